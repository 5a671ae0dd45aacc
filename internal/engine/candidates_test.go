package engine

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/internal/jsonscan"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

func TestSessionKey(t *testing.T) {
	big := `"messages":[{"role":"user","content":"` + strings.Repeat("x", 1<<20) + `"}]`
	tests := []struct {
		name       string
		d          wire.Dialect
		body       string
		header     http.Header
		headerName string
		want       string
	}{
		{"anthropic metadata.user_id", dialectAnthropic,
			`{"model":"claude","metadata":{"user_id":"u-123"},"messages":[]}`, nil, "", "u-123"},
		{"anthropic escaped value", dialectAnthropic,
			`{"metadata":{"user_id":"a\"b\u00e9"}}`, nil, "", `a"bé`},
		{"anthropic without metadata", dialectAnthropic, `{"model":"claude"}`, nil, "", ""},
		{"anthropic user_id at top level is not metadata", dialectAnthropic,
			`{"user_id":"top","metadata":{}}`, nil, "", ""},
		{"anthropic non-string user_id", dialectAnthropic, `{"metadata":{"user_id":42}}`, nil, "", ""},
		{"anthropic decoy inside a message", dialectAnthropic,
			`{"messages":[{"role":"user","content":"{\"metadata\":{\"user_id\":\"decoy\"}}"},{"metadata":{"user_id":"nested"}}],"model":"m"}`,
			nil, "", ""},
		{"anthropic decoy before the real one", dialectAnthropic,
			`{"messages":[{"metadata":{"user_id":"nested"}}],"metadata":{"note":"{\"user_id\":\"x\"}","user_id":"real"}}`,
			nil, "", "real"},
		{"anthropic after a 1 MiB prompt", dialectAnthropic,
			`{` + big + `,"metadata":{"user_id":"late"}}`, nil, "", "late"},
		{"openai user", dialectOpenAI, `{"model":"gpt","user":"alice"}`, nil, "", "alice"},
		{"openai prompt_cache_key first", dialectOpenAI,
			`{"user":"alice","prompt_cache_key":"conv-9","safety_identifier":"s"}`, nil, "", "conv-9"},
		{"openai safety_identifier", dialectOpenAI, `{"safety_identifier":"hash-1"}`, nil, "", "hash-1"},
		{"openai user before safety_identifier", dialectOpenAI, `{"safety_identifier":"s","user":"u"}`, nil, "", "u"},
		{"openai empty prompt_cache_key falls through", dialectOpenAI, `{"prompt_cache_key":"","user":"u"}`, nil, "", "u"},
		{"openai decoys in messages", dialectOpenAI,
			`{"messages":[{"role":"user","content":"\"user\":\"decoy\""},{"role":"user","name":"x","user":"nested"}],"tools":[{"prompt_cache_key":"no"}]}`,
			nil, "", ""},
		{"openai key inside a string with escaped quotes", dialectOpenAI,
			`{"stop":"\\\",\"user\":\"decoy","user":"real"}`, nil, "", "real"},
		{"openai null user", dialectOpenAI, `{"user":null}`, nil, "", ""},
		{"openai metadata.user_id is not openai's", dialectOpenAI, `{"metadata":{"user_id":"x"}}`, nil, "", ""},
		{"header wins over the body", dialectOpenAI, `{"user":"alice"}`,
			http.Header{"X-Session": {" sess-7 "}}, "X-Session", "sess-7"},
		{"header configured but absent", dialectAnthropic, `{"metadata":{"user_id":"u"}}`,
			http.Header{}, "X-Session", ""},
		{"unknown dialect", wire.DialectNone, `{"user":"alice"}`, nil, "", ""},
		{"empty body", dialectOpenAI, ``, nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sessionKey(tt.d, []byte(tt.body), nil, tt.header, tt.headerName); got != tt.want {
				t.Errorf("sessionKey = %q, want %q", got, tt.want)
			}
		})
	}
}

func BenchmarkSessionKey1MiB(b *testing.B) {
	body := []byte(`{"model":"claude","messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 1<<20/12) + `"}],"metadata":{"user_id":"u-1"}}`)
	req, err := wire.ParseCompletion(dialectAnthropic, "/v1/messages", "", body)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		top  *jsonscan.Top
	}{{"walk", nil}, {"indexed", &req.Top}} { // the parse's index: what a request uses
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if sessionKey(dialectAnthropic, body, bc.top, nil, "") != "u-1" {
					b.Fatal("wrong key")
				}
			}
		})
	}
}
