package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
)

// llmRequest is a completion request read once from the client: the body
// is kept as received and each attempt gets its own view of it, rewritten
// only where its model differs.
type Request struct {
	Dialect Dialect
	Body    []byte
	Model   string
	Stream  bool
	// byte range of the model's JSON string value (quotes included) in
	// body, so a rewrite splices the new name without re-encoding the rest
	ModelStart, modelEnd int
	SessionKey           string
	SizeClass            int
	// Top is where the body's top-level members stand, as the parse's
	// walk found them, for the readers of one member (Top.Scan).
	Top jsonscan.Top
}

var (
	ErrBodyTooLarge = errors.New("request body too large")
	// The server's read timeouts (read_body, read_body_idle) cut a client
	// that sends its body too slowly.
	ErrBodyTimeout = errors.New("timed out reading the request body")
)

// parseCompletion validates the body and reads the fields the proxy needs
// (model, stream) in one pass of the validating scanner the stream gate
// uses: a 1 MiB prompt is never decoded into Go values, and validation
// costs no second pass. Keys are matched as encoding/json matches them to
// a struct field: escapes decoded ("mod\u0065l" is model) and Unicode case
// folded ("MODEL", and "\u017ftream" with the long s that folds to s). The
// body must be unambiguous: parsers disagree on repeated keys
// (the last wins in encoding/json and Python, the first elsewhere) and on
// letter case (a Go provider reads "Model" as model), so a second model or
// stream key in any spelling is refused rather than routed by one reading
// while the provider runs another. path and rawQuery are the client's,
// for a dialect that routes on them (Gemini's model and stream mode).
func ParseCompletion(d Dialect, path, rawQuery string, body []byte) (*Request, error) {
	req, err := d.ParseRequest(path, rawQuery, body)
	if err != nil {
		return nil, err
	}
	req.Dialect = d
	return req, nil
}

// parseRequestBody is the parse every dialect's body shares: a JSON
// object with a `model` string and an optional `stream` flag.
func ParseRequestBody(body []byte) (*Request, error) { return ParseRequestBodyWatching(body, nil) }

// ParseRequestBodyWatching is ParseRequestBody noting words (nil: none)
// in the index's Marks as the walk passes them (jsonscan.Watch): the
// dialect's object markers, which NamedObjectsIn then needs no search for.
func ParseRequestBodyWatching(body []byte, words *jsonscan.Words) (*Request, error) {
	req := &Request{Body: body, ModelStart: -1}
	it, ok := jsonscan.Open(body, 0, 0)
	if !ok || !it.IsObject() {
		if !jsonscan.Valid(body) {
			return nil, ErrInvalidJSON
		}
		return nil, jsonscan.ErrScan
	}
	var modelRaw []byte
	sawModel, sawStream := false, false
	req.Top.Reset(body)
	if words != nil {
		req.Top.Marks.Words = words
		it.Watch(&req.Top.Marks)
	}
	for it.Next() {
		key, start := it.Key, it.Pos
		switch {
		case it.KeyFold("model"):
			if sawModel {
				return nil, errDuplicateModel
			}
			sawModel = true
			start := it.Pos
			if v := it.Value(); jsonscan.IsString(v) {
				modelRaw, req.ModelStart, req.modelEnd = v, start, start+len(v)
			}
		case it.KeyFold("stream"):
			if sawStream {
				return nil, errDuplicateStream
			}
			sawStream = true
			req.Stream = string(it.Value()) == "true"
		default:
			it.Value()
		}
		req.Top.Add(key, start, it.Pos)
	}
	if !it.End() {
		return nil, ErrInvalidJSON
	}
	if modelRaw == nil || len(modelRaw) == 2 {
		return nil, errors.New("model: field required (a non-empty string)")
	}
	// A decoded name is at most as long as its JSON text: a long one is
	// refused before it is copied.
	if len(modelRaw)-2 > MaxModelLen*6 { // "\u0041" is 6 bytes for one
		return nil, errModelTooLong
	}
	req.Model = JSONStringValue(modelRaw)
	if err := CheckModelName(req.Model); err != nil {
		return nil, err
	}
	return req, nil
}

// maxModelLen bounds a model name: every copy the proxy keeps
// (model cooldowns, log lines, error messages) is bounded by it.
const MaxModelLen = 256

var (
	errDuplicateModel  = errors.New(`request body: more than one "model" key (in any letter case or escaping): the request is ambiguous`)
	errDuplicateStream = errors.New(`request body: more than one "stream" key (in any letter case or escaping): the request is ambiguous`)
	errModelTooLong    = fmt.Errorf("model: longer than %d bytes", MaxModelLen)
	errModelControl    = errors.New("model: contains a control character or invalid UTF-8")
	errModelDotSegment = errors.New(`model: "." and ".." are path dot-segments, refused: a cloud puts the model in its URL path`)
)

// checkModelName refuses a model name over maxModelLen bytes, or with a
// control character (C0, DEL, C1) or invalid UTF-8, which would reach log
// lines and the admin text view, or with a dot-segment: Bedrock, Vertex
// and Azure put the model in the URL path, where url.PathEscape keeps
// dots and `/model/../invoke` would name another resource.
func CheckModelName(m string) error {
	if len(m) > MaxModelLen {
		return errModelTooLong
	}
	if HasDotSegment(m) {
		return errModelDotSegment
	}
	for i := 0; i < len(m); {
		c := m[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return errModelControl
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(m[i:])
		if r == utf8.RuneError && n == 1 || unicode.IsControl(r) {
			return errModelControl
		}
		i += n
	}
	return nil
}

var ErrInvalidJSON = errors.New("request body is not valid JSON")

// hasDotSegment reports whether a name, split where a server may split a
// path (at / and \), has a part that is "." or "..".
func HasDotSegment(name string) bool {
	for len(name) > 0 {
		i := strings.IndexAny(name, `/\`)
		seg := name
		if i >= 0 {
			seg, name = name[:i], name[i+1:]
		} else {
			name = ""
		}
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// jsonStringValue decodes a validated raw JSON string as encoding/json
// does; one without escapes (nearly every model name) is a small copy.
func JSONStringValue(v []byte) string {
	if bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v) {
		return string(v[1 : len(v)-1])
	}
	return jsonscan.Unquote(v)
}

// bodyFor returns the request body for an upstream model, as the
// request's dialect rewrites it.
func (req *Request) BodyFor(model string) []byte { return req.Dialect.BodyFor(req, model) }

// spliceModel returns the body with model as its model: the original
// bytes when the model is unchanged, else one copy with the new name
// spliced into the model field; the rest of the JSON is not re-encoded.
func (req *Request) SpliceModel(model string) []byte {
	if model == req.Model {
		return req.Body
	}
	out := make([]byte, 0, len(req.Body)-(req.modelEnd-req.ModelStart)+len(model)+2)
	out = append(out, req.Body[:req.ModelStart]...)
	out = AppendJSONString(out, model)
	out = append(out, req.Body[req.modelEnd:]...)
	return out
}

// AppendJSONString appends s as json.Marshal encodes it: a name of plain
// printable ASCII (the usual model name or member key) is quoted as is,
// anything else goes through encoding/json.
func AppendJSONString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a JSON string, never Go syntax: cannot fail
			return append(dst, q...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// StripKeyParam removes every `key` parameter (Google's API key) (by its decoded name, so
// k%65y too) from a raw query, keeping the other parameters byte for
// byte and in order: the client's key must not reach a provider that
// has a key of its own.
func StripKeyParam(rawQuery string) string {
	if !strings.Contains(rawQuery, "key") && !strings.Contains(rawQuery, "%") {
		return rawQuery
	}
	var b strings.Builder
	first := true
	for param := range strings.SplitSeq(rawQuery, "&") {
		name, _, _ := strings.Cut(param, "=")
		if QueryName(name) == "key" {
			continue
		}
		if !first {
			b.WriteByte('&')
		}
		first = false
		b.WriteString(param)
	}
	return b.String()
}

// QueryName decodes a raw query parameter name; one with a bad escape is
// kept as written (it names nothing the proxy looks for).
func QueryName(raw string) string {
	if !strings.ContainsAny(raw, "%+") {
		return raw
	}
	if n, err := url.QueryUnescape(raw); err == nil {
		return n
	}
	return raw
}
