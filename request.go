package llmhedge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
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

var errBodyTooLarge = errors.New("request body too large")

// readBody reads the body once, bounded by max; over it is errBodyTooLarge.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.ContentLength > max {
		return nil, errBodyTooLarge
	}
	size := 512
	if r.ContentLength > 0 {
		size = int(r.ContentLength) + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	n, err := buf.ReadFrom(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if n > max {
		return nil, errBodyTooLarge
	}
	return buf.Bytes(), nil
}

// parseCompletion validates the body and reads the fields the proxy needs
// (model, stream) with one top-level scan: a 1 MiB prompt is never decoded
// into Go values.
func parseCompletion(d dialect, body []byte) (*llmRequest, error) {
	if !json.Valid(body) {
		return nil, errors.New("request body is not valid JSON")
	}
	req := &llmRequest{dialect: d, body: body, modelStart: -1}
	err := scanTopLevel(body, func(key []byte, vStart, vEnd int) bool {
		v := body[vStart:vEnd]
		switch string(key) {
		case "model":
			if len(v) > 0 && v[0] == '"' {
				var s string
				if json.Unmarshal(v, &s) == nil {
					req.model, req.modelStart, req.modelEnd = s, vStart, vEnd
				}
			}
		case "stream":
			req.stream = string(v) == "true"
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if req.modelStart < 0 || req.model == "" {
		return nil, errors.New("model: field required (a non-empty string)")
	}
	return req, nil
}

// bodyFor returns the request body for an upstream model: the original
// bytes when the model is unchanged, else one copy with the new name
// spliced into the model field.
func (req *llmRequest) bodyFor(model string) []byte {
	if model == req.model {
		return req.body
	}
	q := strconv.Quote(model)
	out := make([]byte, 0, len(req.body)-(req.modelEnd-req.modelStart)+len(q))
	out = append(out, req.body[:req.modelStart]...)
	out = append(out, q...)
	out = append(out, req.body[req.modelEnd:]...)
	return out
}

var errScan = errors.New("request body: expected a JSON object")

// scanTopLevel calls fn with each top-level key of a JSON object and the
// byte range of its value. It assumes body is valid JSON (json.Valid).
// Returning false from fn stops the scan.
func scanTopLevel(body []byte, fn func(key []byte, vStart, vEnd int) bool) error {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return errScan
	}
	i++
	for {
		i = skipSpace(body, i)
		if i >= len(body) {
			return errScan
		}
		if body[i] == '}' {
			return nil
		}
		if body[i] == ',' {
			i++
			continue
		}
		if body[i] != '"' {
			return errScan
		}
		kEnd := skipString(body, i)
		key := body[i+1 : kEnd-1]
		i = skipSpace(body, kEnd)
		if i >= len(body) || body[i] != ':' {
			return errScan
		}
		vStart := skipSpace(body, i+1)
		vEnd := skipValue(body, vStart)
		if !fn(key, vStart, vEnd) {
			return nil
		}
		i = vEnd
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the JSON value starting at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
		j++
	}
	return j
}

// scanTopLevelSafe is scanTopLevel for bodies of unknown validity (an
// upstream's error body): invalid JSON yields no keys.
func scanTopLevelSafe(body []byte, fn func(key, value []byte)) {
	if !json.Valid(body) {
		return
	}
	_ = scanTopLevel(body, func(k []byte, s, e int) bool { fn(k, body[s:e]); return true })
}

func unquote(v []byte) string {
	var s string
	_ = json.Unmarshal(v, &s)
	return s
}
