package sim

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// prefillCases are prefills of DefaultText in deltas of one word each:
// want is the answer, covered the deltas the prefill covers completely.
var prefillCases = []struct {
	name, prefill, want string
	covered             int
}{
	{"mid-delta", "The quick", " brown fox jumps over the lazy dog.", 1},
	{"mid-word", "The qu", "ick brown fox jumps over the lazy dog.", 1},
	{"delta boundary", "The quick ", "brown fox jumps over the lazy dog.", 2}, // Anthropic: trailing whitespace
	{"whole answer", DefaultText, "", prefillTokens},
	{"empty", "", DefaultText, 0},
}

// TestPrefillContinuation sends, on every wire, streaming and not, each
// prefill and its twin that is not a prefix (the first letter changed, the
// same length, so the same base input tokens): the prefill gets only the
// rest of the answer, and the input tokens it adds plus the output tokens
// of the rest are the output tokens of the full answer, which the twin gets.
func TestPrefillContinuation(t *testing.T) {
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			cfg := w.cfg
			cfg.Tokens = prefillTokens
			s, srv := serve(t, cfg)
			prefills, plains := int64(0), int64(0)
			for _, stream := range []bool{false, true} {
				for _, tc := range prefillCases {
					p := tc.prefill
					status, body, a := askWire(t, w, srv, stream, &p)
					prefills++
					if rec := lastRecord(t, s); !rec.Prefilled || rec.Prefill != p {
						t.Errorf("stream %v %s: record prefill %v %q", stream, tc.name, rec.Prefilled, rec.Prefill)
					}
					if w.family == "anthropic" && strings.HasSuffix(p, " ") {
						if status != http.StatusBadRequest || !strings.Contains(string(body), `"`+PrefillTrailingWhitespace+`"`) ||
							(w.cfg.Wire == WireBedrock) != strings.HasPrefix(string(body), "ValidationException ") ||
							(w.cfg.Wire != WireBedrock) != strings.Contains(string(body), `"type":"invalid_request_error"`) {
							t.Errorf("stream %v %s: %d %s, want 400 trailing whitespace", stream, tc.name, status, body)
						}
						continue
					}
					if status != http.StatusOK || a.text != tc.want || a.output != prefillTokens-tc.covered {
						t.Errorf("stream %v %s: %d %q output %d, want %q output %d (%s)",
							stream, tc.name, status, a.text, a.output, tc.want, prefillTokens-tc.covered, body)
					}
					if rec := lastRecord(t, s); stream && (a.deltas != a.output || rec.Deltas != a.output) {
						t.Errorf("stream %s: %d deltas read, %d sent, output tokens %d", tc.name, a.deltas, rec.Deltas, a.output)
					}
					if p == "" {
						continue
					}
					twin := "X" + p[1:]
					status, body, full := askWire(t, w, srv, stream, &twin)
					prefills++
					if status != http.StatusOK || full.text != DefaultText || full.output != prefillTokens {
						t.Fatalf("stream %v %s not a prefix: %d %q output %d (%s)", stream, tc.name, status, full.text, full.output, body)
					}
					// The prefill adds the deltas it covers to the input of
					// the same request without the assistant turn.
					_, _, plain := askWire(t, w, srv, stream, nil)
					plains++
					if added := a.input - plain.input; added != tc.covered || added+a.output != full.output {
						t.Errorf("stream %v %s: input %d, without the prefill %d: +%d, want +%d; +%d + output %d != %d",
							stream, tc.name, a.input, plain.input, added, tc.covered, added, a.output, full.output)
					}
				}
			}
			status, body, a := askWire(t, w, srv, true, nil)
			if status != http.StatusOK || a.text != DefaultText || a.output != prefillTokens || lastRecord(t, s).Prefilled {
				t.Errorf("no prefill: %d %q output %d (%s)", status, a.text, a.output, body)
			}
			if st := s.Stats(); st.Prefills != prefills || st.Requests != prefills+plains+1 {
				t.Errorf("stats %+v, want %d prefills", st, prefills)
			}
		})
	}
}

// TestPrefillOff: a model without prefill refuses a conversation ending in
// an assistant turn with a 400 in the wire's shape that names "assistant
// message prefill", before any fault, and serves the others.
func TestPrefillOff(t *testing.T) {
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			cfg := w.cfg
			cfg.Prefill, cfg.Tokens = PrefillOff, prefillTokens
			cfg.Faults = []Fault{{Kind: FaultStatus, Status: 503, Count: 1}}
			s, srv := serve(t, cfg)
			for _, stream := range []bool{false, true} {
				p := "The quick"
				status, body, _ := askWire(t, w, srv, stream, &p)
				var want string
				switch {
				case w.cfg.Wire == WireBedrock:
					want = "ValidationException " + string(mustJSON(map[string]string{"message": PrefillUnsupportedAnthropic}))
				case w.family == "anthropic":
					want = string(anthropicWire{}.errorBody(400, PrefillUnsupportedAnthropic))
				case w.family == "openai":
					want = `{"error":{"message":"` + PrefillUnsupportedOpenAI + `","type":"invalid_request_error","param":"messages","code":null}}`
				case w.family == "responses":
					want = `{"error":{"message":"` + PrefillUnsupportedOpenAI + `","type":"invalid_request_error","param":"input","code":null}}`
				case w.family == "gemini":
					want = `{"error":{"code":400,"message":"` + PrefillUnsupportedGemini + `","status":"INVALID_ARGUMENT"}}`
				}
				if status != http.StatusBadRequest || string(body) != want || !strings.Contains(want, "assistant message prefill") {
					t.Errorf("stream %v: %d %s\nwant 400 %s", stream, status, body, want)
				}
			}
			if st := s.Stats(); st.Prefills != 2 || st.Faulted != 0 {
				t.Errorf("stats %+v, want 2 prefills and no fault", st)
			}
			if status, _, _ := askWire(t, w, srv, false, nil); status != http.StatusServiceUnavailable {
				t.Errorf("the fault: %d", status)
			}
			if status, body, a := askWire(t, w, srv, true, nil); status != http.StatusOK || a.text != DefaultText {
				t.Errorf("no prefill: %d %q (%s)", status, a.text, body)
			}
		})
	}
}

// TestPrefillFaults: faults apply to a continuation, and after counts the
// deltas of the rest.
func TestPrefillFaults(t *testing.T) {
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			cfg := w.cfg
			cfg.Tokens = prefillTokens
			cfg.Faults = []Fault{{Kind: FaultCut, After: 2}}
			s, srv := serve(t, cfg)
			p := "The quick"
			status, body, a := askWire(t, w, srv, true, &p)
			if status != http.StatusOK || a.text != " brown " || a.output != 0 || lastRecord(t, s).Deltas != 2 {
				t.Errorf("%d %q output %d, want \" brown \" cut (%s)", status, a.text, a.output, body)
			}
		})
	}
}

// TestPrefillSampling: sampled answers differ from one request to the next
// and from the configured text, keeping its first two words and its words;
// deterministic ones are the text. A prefix of the sampled answer is
// continued.
func TestPrefillSampling(t *testing.T) {
	sorted := func(s string) string {
		w := strings.Fields(s)
		slices.Sort(w)
		return strings.Join(w, " ")
	}
	for _, w := range prefillWires {
		t.Run(w.name, func(t *testing.T) {
			for _, sampling := range []string{"", SamplingDeterministic, SamplingSampled} {
				cfg := w.cfg
				cfg.Tokens, cfg.Sampling, cfg.Seed = prefillTokens, sampling, 7
				_, srv := serve(t, cfg)
				var texts []string
				for _, stream := range []bool{false, true, true} {
					status, body, a := askWire(t, w, srv, stream, nil)
					if status != http.StatusOK || a.output != prefillTokens {
						t.Fatalf("%s: %d output %d (%s)", sampling, status, a.output, body)
					}
					texts = append(texts, a.text)
				}
				for i, text := range texts {
					switch {
					case sampling != SamplingSampled && text != DefaultText:
						t.Errorf("%q: answer %d %q, want %q", sampling, i, text, DefaultText)
					case sampling != SamplingSampled:
					case text == DefaultText || !strings.HasPrefix(text, "The quick ") || sorted(text) != sorted(DefaultText):
						t.Errorf("sampled answer %d %q", i, text)
					case i > 0 && text == texts[i-1]:
						t.Errorf("sampled answers %d and %d are both %q", i-1, i, text)
					}
				}
			}
		})
	}
}

func TestSample(t *testing.T) {
	r := &lockedRand{r: rand.New(rand.NewPCG(1, 2))}
	prev := ""
	for range 200 {
		got := r.sample("a b c d e")
		if got == "a b c d e" || got == prev || !strings.HasPrefix(got, "a b ") || len(got) != len("a b c d e") {
			t.Fatalf("sample %q after %q", got, prev)
		}
		prev = got
	}
	// Only one other order: it is used every time.
	for range 3 {
		if got := r.sample("a b c  d"); got != "a b d c" {
			t.Errorf("sample = %q, want a b d c", got)
		}
	}
	for _, text := range []string{"a b c", "a b c c c"} {
		if got := r.sample(text); got != text {
			t.Errorf("sample(%q) = %q", text, got)
		}
	}
}
