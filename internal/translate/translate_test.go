package translate

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// Loss names carry client input into logs and a header: printable, bounded.
func TestLossNamesArePrintable(t *testing.T) {
	p, _ := For(Anthropic, OpenAI)
	key := "evil\r\nSet-Cookie: x=" + strings.Repeat("a", 300)
	body := `{"model":"c","max_tokens":1,"messages":[{"role":"user","content":"x"}],` + `"` + strings.ReplaceAll(strings.ReplaceAll(key, "\r", `\r`), "\n", `\n`) + `":1}`
	_, losses, err := request(p, []byte(body), "gpt-5")
	if err != nil {
		t.Fatal(err)
	}
	d := Describe(losses, true)
	if !strings.HasPrefix(d, "field evil??Set-Cookie") || len(d) > 110 || strings.ContainsAny(d, "\r\n") {
		t.Errorf("material losses %q", d)
	}
}

func TestForAndPairs(t *testing.T) {
	want := map[[2]string]bool{{Anthropic, OpenAI}: true, {Responses, Anthropic}: true, {Anthropic, Gemini}: true, {Anthropic, Responses}: true,
		{OpenAI, Anthropic}: true, {OpenAI, Gemini}: true, {OpenAI, Responses}: true,
		{Gemini, Anthropic}: true, {Gemini, OpenAI}: true, {Responses, Gemini}: true, {Responses, OpenAI}: true}
	got := Pairs()
	if len(got) != len(want) {
		t.Fatalf("pairs %v", got)
	}
	for _, pr := range got {
		p, ok := For(pr[0], pr[1])
		if !want[pr] || !ok || p.Client() != pr[0] || p.Target() != pr[1] {
			t.Errorf("pair %v", pr)
		}
	}
	if _, ok := For(OpenAI, OpenAI); ok {
		t.Error("a format is not translated to itself")
	}
	if TargetPath(Gemini, "gemini-2.5-pro", true) != "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse" ||
		TargetPath(Gemini, "g", false) != "/v1beta/models/g:generateContent" || TargetPath(OpenAI, "m", true) != "/v1/chat/completions" {
		t.Error("target paths")
	}
}

// A refusal names the losses in the client's own error shape.
func TestRefusal(t *testing.T) {
	losses := []Loss{{What: "server tool web_search_20250305", Material: true}, {What: "top_k"}}
	for _, c := range []struct{ client, wantType string }{{Anthropic, "invalid_request_error"}, {Responses, "invalid_request_error"}} {
		status, body := Refusal(c.client, losses)
		if status != 400 || !strings.Contains(string(body), "server tool web_search_20250305") || strings.Contains(string(body), "top_k") || !strings.Contains(string(body), c.wantType) {
			t.Errorf("%s: %d %s", c.client, status, body)
		}
	}
	if b := ClientError(Gemini, 429, "slow down"); string(b) != `{"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED"}}` {
		t.Errorf("gemini %s", b)
	}
}

// Pair.Request, Response and NewStream are Translate's for a request whose
// answers need nothing of it; custom tools need Translate and are refused
// by Request.
func TestRequestOnlyMatchesTranslate(t *testing.T) {
	for _, pr := range Pairs() {
		p, _ := For(pr[0], pr[1])
		tr := minimal(p)
		body := `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`
		switch p.Client() {
		case Responses:
			body = `{"model":"m","input":"x","store":false}`
		case Gemini:
			body = `{"contents":[{"role":"user","parts":[{"text":"x"}]}],"generationConfig":{"maxOutputTokens":16}}`
		}
		out, losses, err := p.Request([]byte(body), "target-model")
		if err != nil || string(out) != string(tr.Body) || len(losses) != len(tr.Losses) {
			t.Errorf("%v: Request %s %v %v, Translate %s %v", pr, out, losses, err, tr.Body, tr.Losses)
		}
	}
	p, _ := For(Responses, Anthropic)
	_, losses, err := p.Request([]byte(codexCustomRequest), "claude")
	if err != nil || Describe(losses, true) != "custom tool apply_patch (carried only through Pair.Translate)" {
		t.Errorf("%v %q", err, Describe(losses, true))
	}
	// The request-free answers read plain answers as Translate's do.
	target := readFile(t, filepath.Join("testdata", "anthropic", "parallel_tools.sse"))
	a, errA := runStream(p, target, nil)
	b, errB := runStreamOf(p.NewStream(), target)
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("stream differs: %v %v", errA, errB)
	}
	body := readFile(t, filepath.Join("testdata", "anthropic", "parallel_tools.json"))
	x, errX := p.Response(body)
	y, errY := minimal(p).Response(body)
	if errX != nil || errY != nil || !bytes.Equal(x, y) {
		t.Errorf("answer differs: %v %v", errX, errY)
	}
}
