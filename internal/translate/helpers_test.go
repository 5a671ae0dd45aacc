package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse/ssetest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// runStream feeds a target stream, read in pieces ending at cuts, through
// a fresh Stream of p and returns the client's bytes; err is the stream's
// error (after which Fail's bytes end the output).
func runStream(p Pair, target []byte, cuts []int) (out []byte, err error) {
	return runTranslation(minimal(p), target, cuts)
}

// runTranslation is runStream for the translation of a given request.
func runTranslation(tr *Translation, target []byte, cuts []int) (out []byte, err error) {
	return runStreamOf(tr.NewStream(), target, cuts...)
}

// runStreamOf feeds a target stream through s.
func runStreamOf(s Stream, target []byte, cuts ...int) (out []byte, err error) {
	rd := sse.NewReader(&ssetest.SplitReader{Data: target, Cuts: cuts}, 0)
	for {
		ev, rerr := rd.Next()
		if rerr == io.EOF {
			if out, err = s.End(out); err != nil {
				return s.Fail(out, err), err
			}
			return out, nil
		}
		if rerr != nil {
			return s.Fail(out, rerr), rerr
		}
		if out, err = s.Event(out, ev); err != nil {
			return s.Fail(out, err), err
		}
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// golden compares got with testdata/golden/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readFile(t, path)
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (-update rewrites it)\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// sseEvents splits client output into events.
func sseEvents(t testing.TB, out []byte) []sse.Event {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(out), 0)
	var evs []sse.Event
	for {
		ev, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("client output is not a valid event stream: %v", err)
		}
		evs = append(evs, sse.Event{Name: bytes.Clone(ev.Name), Data: bytes.Clone(ev.Data)})
	}
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t testing.TB, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

// cutsEvery returns, for a stream of n bytes, every single cut and a few
// cuts of every byte.
func cutSets(n int) [][]int {
	sets := [][]int{nil}
	for i := 1; i < n; i++ {
		sets = append(sets, []int{i})
	}
	every := make([]int, 0, n)
	for i := 1; i < n; i++ {
		every = append(every, i)
	}
	sets = append(sets, every)
	for step := 2; step < 40; step += 7 {
		var c []int
		for i := step; i < n; i += step {
			c = append(c, i)
		}
		sets = append(sets, c)
	}
	return sets
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func stringsReader(s string) io.Reader { return bytes.NewReader([]byte(s)) }

// The tests' clock: created_at is the same in every run.
func init() { now = func() time.Time { return time.Unix(1733000000, 0) } }

// request is Pair.Request as the table tests read it.
func request(p Pair, body []byte, model string) ([]byte, []Loss, error) {
	tr, err := p.Translate(body, model)
	if err != nil {
		return nil, nil, err
	}
	return tr.Body, tr.Losses, nil
}

// minimal is the translation of a plain request of p's client format,
// whose answers the goldens feed.
func minimal(p Pair) *Translation {
	body := `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`
	switch p.Client() {
	case Responses:
		body = `{"model":"m","input":"x","store":false}`
	case Gemini:
		body = `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":16}}`
	}
	tr, err := p.Translate([]byte(body), "target-model")
	if err != nil {
		panic(err)
	}
	return tr
}

// checkRechunked asserts that every byte-level re-chunking of each
// testdata/<dir>/*.sse target stream gives p's client the same bytes and
// the same outcome.
func checkRechunked(t *testing.T, p Pair, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", dir, "*.sse"))
	if len(files) < 5 {
		t.Fatalf("found %d streams", len(files))
	}
	for _, f := range files {
		target := readFile(t, f)
		whole, wholeErr := runStream(p, target, nil)
		for _, cuts := range cutSets(len(target)) {
			out, err := runStream(p, target, cuts)
			if !bytes.Equal(out, whole) || (err == nil) != (wholeErr == nil) {
				t.Fatalf("%s cut at %v: output differs", f, cuts)
			}
		}
	}
}

// anthropicStreamCase runs testdata/<dir>/<name>.sse through p, an Anthropic
// client's pair, and checks the client's stream against its golden file
// and Anthropic's grammar. With wantErr the stream must end in an error
// event naming it, and the non-stream answer (where there is one) must be
// refused alike; ok is then false. Else the stream must stop cleanly with
// the message the non-stream answer gives, which it returns.
func anthropicStreamCase(t *testing.T, p Pair, dir, name, wantErr string) (msg anthropic.Message, ok bool) {
	t.Helper()
	out, err := runStream(p, readFile(t, filepath.Join("testdata", dir, name+".sse")), nil)
	golden(t, "anthropic_from_"+dir+"_"+name+".sse", out)
	if _, gerr := checkAnthropicStream(t, out); gerr != nil {
		t.Fatalf("grammar: %v\n%s", gerr, out)
	}
	msg, stopped, errEvent := accumulateAnthropic(t, out)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) || stopped || errEvent == "" {
			t.Fatalf("err %v, stopped %v, error event %q; want an error event for %q and no message_stop", err, stopped, errEvent, wantErr)
		}
		if body := filepath.Join("testdata", dir, name+".json"); fileExists(body) {
			if _, err := minimal(p).Response(readFile(t, body)); err == nil {
				t.Errorf("the non-stream answer translates")
			}
		}
		return msg, false
	}
	if err != nil || !stopped {
		t.Fatalf("err %v, stopped %v", err, stopped)
	}
	body, err := minimal(p).Response(readFile(t, filepath.Join("testdata", dir, name+".json")))
	if err != nil {
		t.Fatal(err)
	}
	var want anthropic.Message
	if err := json.Unmarshal(body, &want); err != nil {
		t.Fatal(err)
	}
	sameMessage(t, msg, want)
	return msg, true
}

// checkRequest translates a client's request body through p for model and
// checks the body and the losses (lossNames' form) it gives; it returns
// the body for the target SDK's own check.
func checkRequest(t *testing.T, p Pair, body, model, want, wantLosses string) []byte {
	t.Helper()
	out, losses, err := request(p, []byte(body), model)
	if err != nil {
		t.Fatal(err)
	}
	if got := lossNames(losses); got != wantLosses {
		t.Errorf("losses = %q, want %q", got, wantLosses)
	}
	if !jsonEqual(t, out, []byte(want)) {
		t.Errorf("body:\n got %s\nwant %s", out, want)
	}
	return out
}

// checkRefusal asserts that p's translation of body for model loses
// something material, described as want.
func checkRefusal(t *testing.T, p Pair, body, model, want string) {
	t.Helper()
	_, losses, err := request(p, []byte(body), model)
	if err != nil {
		t.Fatal(err)
	}
	if !Material(losses) {
		t.Fatalf("losses %q hold nothing material", lossNames(losses))
	}
	if got := Describe(losses, true); got != want {
		t.Errorf("material losses = %q, want %q (all: %s)", got, want, lossNames(losses))
	}
}

// expectedLosses collects the losses a projection expects, each once, in
// the order first noted.
type expectedLosses []string

func (l *expectedLosses) note(s string) {
	if !slices.Contains(*l, s) {
		*l = append(*l, s)
	}
}

// joinedSystem is the system prompt as both OpenAI targets hold it: one
// text block, the parts joined by blank lines (nil when there is none).
func joinedSystem(sys []Block, note func(string)) []Block {
	if len(sys) == 0 {
		return nil
	}
	var parts []string
	for _, b := range sys {
		parts = append(parts, b.Text)
		if b.Cache {
			note("cache_control breakpoints")
		}
	}
	return []Block{{Kind: KindText, Text: strings.Join(parts, "\n\n")}}
}

// resultText is a tool result as the targets that carry only text hold
// it: its non-empty text parts one per line, anything else noted as lost.
func resultText(result []Block, note func(string)) string {
	var texts []string
	for _, rb := range result {
		if rb.Kind != KindText {
			note("image or document in a tool result")
			continue
		}
		if rb.Text != "" {
			texts = append(texts, rb.Text)
		}
	}
	return strings.Join(texts, "\n")
}

// appendTurn adds a turn's blocks, merged into the previous turn when it
// has the same role (as the item- and parts-based targets do); a turn
// left with no blocks is dropped.
func appendTurn(msgs []Message, role string, blocks []Block) []Message {
	if n := len(msgs); n > 0 && msgs[n-1].Role == role {
		msgs[n-1].Blocks = append(msgs[n-1].Blocks, blocks...)
	} else if len(blocks) > 0 {
		msgs = append(msgs, Message{Role: role, Blocks: blocks})
	}
	return msgs
}

// unmarkedBlock is b without what no other target keeps: its cache mark
// (noted, cleared); kept is false for Anthropic reasoning (noted, dropped).
func unmarkedBlock(b Block, note func(string)) (_ Block, kept bool) {
	if b.Cache {
		note("cache_control breakpoints")
		b.Cache = false
	}
	if b.Kind == KindReasoning {
		note("anthropic reasoning state (kept for anthropic only)")
		return b, false
	}
	return b, true
}

// targetParams checks that a translated body unmarshals into the target
// SDK's request type.
func targetParams(t *testing.T, target string, body []byte) {
	t.Helper()
	switch target {
	case Anthropic:
		messageParams(t, body)
	case OpenAI:
		chatParams(t, body)
	case Gemini:
		geminiParams(t, body)
	case Responses:
		responsesParams(t, body)
	}
}
