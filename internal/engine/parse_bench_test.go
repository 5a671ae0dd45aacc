package engine

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/llmhedge/caddy-llm-hedge/bench/agentbody"
	"github.com/llmhedge/caddy-llm-hedge/internal/dialect/responses"
	"github.com/llmhedge/caddy-llm-hedge/internal/health"
	"github.com/llmhedge/caddy-llm-hedge/internal/wire"
)

// BenchmarkParse<Dialect> is the work a request's body costs before its
// first attempt, on an agent-shaped body (bench/agentbody, 140-155 KB):
// the read into a pooled buffer, the validating parse, the affinity key, the
// provider-held objects, the quota estimate of a keyed provider and the
// body an attempt sends (the same model: no rewrite). What it reports per
// op is per request; b.SetBytes makes it a rate over the body.
func BenchmarkParseAnthropic(b *testing.B) {
	benchmarkParse(b, dialectAnthropic, "anthropic", "/v1/messages")
}
func BenchmarkParseChat(b *testing.B) {
	benchmarkParse(b, dialectOpenAI, "chat", "/v1/chat/completions")
}
func BenchmarkParseResponses(b *testing.B) {
	benchmarkParse(b, dialectResponses, "responses", "/v1/responses")
}
func BenchmarkParseGemini(b *testing.B) {
	benchmarkParse(b, dialectGemini, "gemini", "/v1beta/models/"+agentbody.Model+":streamGenerateContent")
}

func benchmarkParse(b *testing.B, d wire.Dialect, format, path string) {
	body := agentbody.Body(format)
	hdr := http.Header{"Content-Type": {"application/json"}}
	r := &http.Request{Method: http.MethodPost, Header: hdr, ContentLength: int64(len(body))}
	query := ""
	if d == dialectGemini {
		query = "alt=sse"
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r.Body = nopCloser{bytes.NewReader(body)}
		got, lease, err := readLeasedBody(r, 32<<20)
		if err != nil {
			b.Fatal(err)
		}
		req, err := wire.ParseCompletion(d, path, query, got)
		if err != nil {
			b.Fatal(err)
		}
		req.SizeClass = health.SizeClass(len(got))
		req.SessionKey = sessionKey(d, got, &req.Top, hdr, "")
		var buf [4]wire.ObjectRef
		if d == dialectResponses && responses.PreviousResponseID(got, &req.Top) != "" {
			b.Fatal("no previous_response_id in the agent body")
		}
		if refs := namedObjects(d, got, &req.Top, buf[:0]); len(refs) != 0 {
			b.Fatalf("objects %v in the agent body", refs)
		}
		_ = health.QuotaEstimateIn(got, &req.Top)
		if up := req.BodyFor(req.Model); len(up) != len(got) {
			b.Fatal("body rewritten for its own model")
		}
		lease.release()
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
