package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// A path no dialect serves claims no dialect in the request log line or
// the {http.llm_hedge.dialect} placeholder: its 404 keeps the OpenAI error
// shape (the fallback a client with no other hint reads), but nothing says
// the client spoke OpenAI. A path or a header a dialect claims still names it.
func TestUnknownPathClaimsNoDialect(t *testing.T) {
	up := newUpstream(t, sim.Config{})
	accessLog := filepath.Join(t.TempDir(), "access.log")
	p := startProxy(t, provider("upd-a", up, "key sk-operator"),
		fmt.Sprintf("log {\n\t\toutput file %s\n\t\tformat json\n\t}", accessLog),
		"log_append llm_dialect {http.llm_hedge.dialect}")

	cases := []struct {
		method, path string
		hdr          []string
		status       int
		shape        string // in the answer's body
		dialect      string // logged
	}{
		{http.MethodGet, "/v1/fine_tuning/jobs", []string{"Authorization", "Bearer client"}, 404, `{"error":{"message":`, ""},
		{http.MethodPost, "/v1/unheard/of", nil, 404, `{"error":{"message":`, ""},
		{http.MethodPost, "/v1/messages/batches", []string{"x-api-key", "client", "anthropic-version", "2023-06-01"}, 404, `"type":"error"`, "anthropic"},
		{http.MethodGet, "/v1/models", []string{"Authorization", "Bearer client"}, 200, `"data"`, "openai"},
	}
	for _, c := range cases {
		status, _, body := pathsDo(t, c.method, p.URL+c.path, `{}`, c.hdr...)
		if status != c.status || !strings.Contains(body, c.shape) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.method, c.path, status, body, c.status, c.shape)
		}
	}
	byPath := map[string]map[string]any{}
	for _, l := range observeRequestLines(t, p.LogFile, len(cases)) {
		byPath[fmt.Sprint(l["path"])] = l
	}
	access := map[string]map[string]any{}
	for _, e := range observeAccessEntries(t, accessLog, len(cases)) {
		req, _ := e["request"].(map[string]any)
		access[fmt.Sprint(req["uri"])] = e
	}
	for _, c := range cases {
		l, e := byPath[c.path], access[c.path]
		if l == nil || e == nil {
			t.Errorf("%s: request log line %v, access entry %v", c.path, l, e)
			continue
		}
		if got, ok := l["dialect"]; !ok || got != c.dialect {
			t.Errorf("%s: request log line dialect = %v (present %v), want %q", c.path, got, ok, c.dialect)
		}
		if got := e["llm_dialect"]; got != c.dialect {
			t.Errorf("%s: {http.llm_hedge.dialect} = %v, want %q", c.path, got, c.dialect)
		}
	}
}
