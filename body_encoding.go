package llmhedge

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// errBodyEncoding is a Content-Encoding the proxy does not decode: 415.
var errBodyEncoding = errors.New("unsupported Content-Encoding")

// zstdMaxWindow bounds the memory a zstd frame may ask for (level 19
// asks for 8 MiB; the clients that compress, Codex at level 3, 2 MiB).
const zstdMaxWindow = 8 << 20

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
