package sim

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discard is a ResponseWriter that flushes into nothing.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(int)             {}
func (d *discard) Flush()                      {}

func serveOnce(s *Simulator, path, body string) {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	s.ServeHTTP(&discard{h: http.Header{}}, r)
}

// TestDeltasDoNotAllocate checks a stream costs the same allocations with
// 10 or 500 deltas: the events themselves allocate nothing.
func TestDeltasDoNotAllocate(t *testing.T) {
	for _, tc := range []struct{ path, body string }{
		{"/v1/messages", anthropicStreamBody},
		{"/v1/chat/completions", openaiStreamBody},
	} {
		allocs := func(tokens int) float64 {
			s := New(Config{Tokens: tokens})
			return testing.AllocsPerRun(50, func() { serveOnce(s, tc.path, tc.body) })
		}
		few, many := allocs(10), allocs(500)
		if many > few+2 {
			t.Errorf("%s: %v allocations with 10 deltas, %v with 500", tc.path, few, many)
		}
	}
}

func BenchmarkStream(b *testing.B) {
	for _, bc := range []struct{ name, path, body string }{
		{"anthropic", "/v1/messages", anthropicStreamBody},
		{"openai", "/v1/chat/completions", openaiStreamBody},
		{"anthropic non-stream", "/v1/messages", anthropicBody},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := New(Config{})
			b.ReportAllocs()
			for b.Loop() {
				serveOnce(s, bc.path, bc.body)
			}
		})
	}
}
