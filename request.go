package llmhedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"unicode/utf8"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// llmRequest is a completion request read once from the client: the body
// is kept as received and each attempt gets its own view of it, rewritten
// only where its model differs.
type llmRequest struct {
	dialect dialect
	body    []byte
	model   string
	stream  bool
	// byte range of the model's JSON string value (quotes included) in
	// body, so a rewrite splices the new name without re-encoding the rest
	modelStart, modelEnd int
	sessionKey           string
	sizeClass            int
}

var (
	errBodyTooLarge = errors.New("request body too large")
	// The server's read timeouts (read_body, read_body_idle) cut a client
	// that sends its body too slowly.
	errBodyTimeout = errors.New("timed out reading the request body")
)

// readBody reads the body once, bounded by max; over it is errBodyTooLarge.
// A body of known length is read into one buffer of its size: no copy
// beyond the read itself.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errBodyTooLarge
	}
	size := bytes.MinRead
	if r.ContentLength > 0 {
		// Room for the read that sees EOF too: bytes.Buffer grows (and
		// copies) when less than MinRead bytes are free.
		size = int(r.ContentLength) + bytes.MinRead
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	n, err := buf.ReadFrom(io.LimitReader(r.Body, max+1))
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, errBodyTimeout
		}
		var tooLarge *http.MaxBytesError
		var he caddyhttp.HandlerError
		if errors.As(err, &tooLarge) || (errors.As(err, &he) && he.StatusCode == http.StatusRequestEntityTooLarge) {
			return nil, errBodyTooLarge // Caddy's request_body max_size
		}
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if n > max {
		return nil, errBodyTooLarge
	}
	return buf.Bytes(), nil
}

// bodyStatus is the status of the answer to a body readBody refused.
func bodyStatus(err error) int {
	switch {
	case errors.Is(err, errBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBodyTimeout):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// parseCompletion validates the body and reads the fields the proxy needs
// (model, stream) in one pass of the validating scanner the stream gate
// uses: a 1 MiB prompt is never decoded into Go values, and validation
// costs no second pass. Keys are compared decoded ("mod\u0065l" is model)
// and a repeated key counts by its last value, as encoding/json and the
// providers' own parsers read it, so the proxy routes by the model the
// provider will see.
func parseCompletion(d dialect, body []byte) (*llmRequest, error) {
	req := &llmRequest{dialect: d, body: body, modelStart: -1}
	it, ok := jsonOpen(body, 0, 0)
	if !ok || !it.isObject() {
		if !jsonValid(body) {
			return nil, errInvalidJSON
		}
		return nil, errScan
	}
	for it.next() {
		switch {
		case it.keyIs("model"):
			start := it.i
			v := it.value()
			req.model, req.modelStart = "", -1
			if jsonIsString(v) {
				req.model, req.modelStart, req.modelEnd = jsonStringValue(v), start, start+len(v)
			}
		case it.keyIs("stream"):
			req.stream = string(it.value()) == "true"
		}
	}
	if !it.end() {
		return nil, errInvalidJSON
	}
	if req.modelStart < 0 || req.model == "" {
		return nil, errors.New("model: field required (a non-empty string)")
	}
	return req, nil
}

var errInvalidJSON = errors.New("request body is not valid JSON")

// jsonStringValue decodes a validated raw JSON string as encoding/json
// does; one without escapes (nearly every model name) is a small copy.
func jsonStringValue(v []byte) string {
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1])
	}
	return unquote(v)
}

// bodyFor returns the request body for an upstream model: the original
// bytes when the model is unchanged, else one copy with the new name
// spliced into the model field; the rest of the JSON is not re-encoded.
func (req *llmRequest) bodyFor(model string) []byte {
	if model == req.model {
		return req.body
	}
	q, _ := json.Marshal(model) // a JSON string, never Go syntax: cannot fail
	out := make([]byte, 0, len(req.body)-(req.modelEnd-req.modelStart)+len(q))
	out = append(out, req.body[:req.modelStart]...)
	out = append(out, q...)
	out = append(out, req.body[req.modelEnd:]...)
	return out
}

var errScan = errors.New("request body: expected a JSON object")

// scanTopLevel calls fn with each top-level key of a JSON object (raw, as
// written) and the byte range of its value, validating as it goes.
// Returning false from fn stops the scan.
func scanTopLevel(body []byte, fn func(key []byte, vStart, vEnd int) bool) error {
	it, ok := jsonOpen(body, 0, 0)
	if !ok || !it.isObject() {
		return errScan
	}
	for it.next() {
		start := it.i
		v := it.value()
		if v == nil {
			break
		}
		if !fn(it.key, start, start+len(v)) {
			return nil
		}
	}
	if !it.end() {
		return errScan
	}
	return nil
}

// unquote decodes a raw JSON string value.
func unquote(v []byte) string { return string(jsonAppendString(nil, v)) }
