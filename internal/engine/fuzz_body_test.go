package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// refBody is how a Go provider reads the fields the proxy routes by:
// encoding/json matches keys to fields case-insensitively (Unicode case
// folding) and the last matching key wins.
type refBody struct {
	Model  string `json:"model"`
	Stream bool   `json:"stream"`
}

// refTopKeys returns the top-level keys of a JSON object as encoding/json
// decodes them (escapes, invalid UTF-8 as U+FFFD); ok is false when body is
// not one JSON object.
func refTopKeys(body []byte) (keys []string, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		k, isKey := tok.(string)
		if !isKey {
			return nil, false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		keys = append(keys, k)
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return keys, true
}

// refCount counts the keys encoding/json would match to the field name
// (strings.EqualFold is the same simple Unicode folding its matching uses).
func refCount(keys []string, name string) int {
	n := 0
	for _, k := range keys {
		if strings.EqualFold(k, name) {
			n++
		}
	}
	return n
}

// FuzzRequestBodyAgreesWithEncodingJSON holds the request-body scan to
// what a Go provider reads (SPEC 15): for every body parseCompletion
// accepts, encoding/json reads the same model and stream, no second key
// matches either field in any letter case or escaping, the model name is
// bounded and free of control characters, and the body rewritten for
// another model reads as that model with the same stream.
func FuzzRequestBodyAgreesWithEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hello"}]}`,
		`{"model":"claude-cheap","Model":"claude-opus-expensive"}`,
		`{"stream":false,"Stream":true,"model":"m"}`,
		`{"model":"a","model":"b"}`,
		`{"MODEL":"upper","STREAM":true}`,
		`{"mod\u0065l":"escaped","str\u0065am":true}`,
		`{"\u004d\u004f\u0044\u0045\u004c":"escaped-upper"}`,
		`{"model":"m","ſtream":true}`,
		`{"model":"m","\u017ftream":true}`,
		`{"model":"m","stream":true,"\u212a":1}`,
		`{"model":"a\u00e9\"b","stream":"true"}`,
		`{"model":"x","stream":1}`,
		`{"model":"x","stream":null}`,
		`{"model":"\ud800","stream":true}`,
		`{"model":"\ud83d\ude00x"}`,
		`{"model":"a\u0000b"}`,
		`{"model":"a\u0085b"}`,
		"{\"model\":\"a\xffb\"}",
		"{\"mo\xffdel\":\"x\",\"model\":\"y\"}",
		`{"metadata":{"model":"inner","Model":"inner2"},"model":"outer"}`,
		`{"model":"` + strings.Repeat("x", 256) + `"}`,
		`{"model":"` + strings.Repeat("x", 257) + `"}`,
		`{"model":"x"} `,
		` {"model":"x","stream":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := wire.ParseCompletion(dialectOpenAI, "", "", body)
		if err != nil {
			return
		}
		var ref refBody
		if err := json.Unmarshal(body, &ref); err != nil {
			// A stream that is not a boolean is a type error; encoding/json
			// still reads every other field, and the proxy reads it as false.
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) || !strings.EqualFold(te.Field, "stream") {
				t.Fatalf("accepted a body encoding/json refuses: %v\n%q", err, body)
			}
		}
		if req.Model != ref.Model || req.Stream != ref.Stream {
			t.Fatalf("module reads model %q stream %v; encoding/json reads model %q stream %v\n%q", req.Model, req.Stream, ref.Model, ref.Stream, body)
		}
		keys, ok := refTopKeys(body)
		if !ok {
			t.Fatalf("accepted a body that is not one JSON object: %q", body)
		}
		if refCount(keys, "model") != 1 || refCount(keys, "stream") > 1 {
			t.Fatalf("accepted an ambiguous body (keys %q)", keys)
		}
		if len(req.Model) > wire.MaxModelLen || !utf8.ValidString(req.Model) || strings.IndexFunc(req.Model, unicode.IsControl) >= 0 {
			t.Fatalf("accepted model name %q", req.Model)
		}
		const other = "claude-haiku-4-5"
		var back refBody
		if err := json.Unmarshal(req.BodyFor(other), &back); err != nil {
			var te *json.UnmarshalTypeError
			if !errors.As(err, &te) {
				t.Fatalf("rewritten body is not valid JSON: %v", err)
			}
		}
		if back.Model != other || back.Stream != req.Stream {
			t.Fatalf("rewritten body reads model %q stream %v; want %q %v", back.Model, back.Stream, other, req.Stream)
		}
	})
}
