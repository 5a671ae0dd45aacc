package engine

// Reading a client's request body: once, bounded, decoded (gzip, br, zstd).

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// readBody reads the body once, bounded by max; over it is errBodyTooLarge.
// A body of known length is read into one buffer of its size: no copy
// beyond the read itself.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, wire.ErrBodyTooLarge
	}
	b, err := wire.ReadAll(r.Body, r.ContentLength, max)
	if err != nil {
		return nil, readBodyError(err)
	}
	if int64(len(b)) > max {
		return nil, wire.ErrBodyTooLarge
	}
	return decodeBody(r, b, max)
}

// readBodyError is the error of a failed read of a request body.
func readBodyError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return wire.ErrBodyTimeout
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) { // Caddy's request_body max_size wraps it too
		return wire.ErrBodyTooLarge
	}
	return fmt.Errorf("reading request body: %w", err)
}

// bodyStatus is the status of the answer to a body readBody refused.
func bodyStatus(err error) int {
	switch {
	case errors.Is(err, wire.ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, wire.ErrBodyTimeout):
		return http.StatusRequestTimeout
	case errors.Is(err, errBodyEncoding):
		return http.StatusUnsupportedMediaType
	}
	return http.StatusBadRequest
}

// errBodyEncoding is a Content-Encoding the proxy does not decode: 415.
var errBodyEncoding = errors.New("unsupported Content-Encoding")

// decodeBody undoes a compressed request body (Content-Encoding gzip or
// zstd; Codex can send zstd) so the proxy reads the JSON it routes on and
// every provider gets the same identity body: a retry or a failover to
// another vendor or cloud must not depend on what that provider decodes.
// The decoded body counts against max_body, so a small compressed body
// cannot expand past the limit. The header is rewritten to match.
func decodeBody(r *http.Request, body []byte, max int64) ([]byte, error) {
	ce := strings.TrimSpace(r.Header.Get("Content-Encoding"))
	var zr io.Reader
	switch strings.ToLower(ce) {
	case "", "identity":
		r.Header.Del("Content-Encoding")
		return body, nil
	case "gzip", "x-gzip":
		gz, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("request body: Content-Encoding %s: %w", ce, err)
		}
		zr = gz
	case "zstd":
		zd, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxWindow(zstdMaxWindow))
		if err != nil {
			return nil, fmt.Errorf("request body: Content-Encoding zstd: %w", err)
		}
		defer zd.Close()
		zr = zd
	default:
		if len(ce) > 64 {
			ce = ce[:64] + "..."
		}
		return nil, fmt.Errorf("%w %q: send the body uncompressed, or as gzip or zstd", errBodyEncoding, ce)
	}
	out := bytes.NewBuffer(make([]byte, 0, min(4*int64(len(body)), max)+bytes.MinRead))
	n, err := out.ReadFrom(io.LimitReader(zr, max+1))
	switch {
	case n > max:
		return nil, wire.ErrBodyTooLarge
	case err != nil:
		return nil, fmt.Errorf("request body: Content-Encoding %s: %w", ce, err)
	}
	r.Header.Del("Content-Encoding")
	r.Header.Del("Content-Length")
	r.ContentLength = int64(out.Len())
	return out.Bytes(), nil
}
