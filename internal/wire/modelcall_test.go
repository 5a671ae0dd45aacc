package wire

import "testing"

func TestModelCallOf(t *testing.T) {
	cases := []struct {
		method, path, body string
		model              string // "" when not a model call
		rewritten          string // path or body with the model "up"
	}{
		{"POST", "/v1/messages/count_tokens", `{"model":"m","messages":[]}`, "m", `{"model":"up","messages":[]}`},
		{"POST", "/v1/responses/input_tokens", `{"model":"a","model":"m"}`, "m", `{"model":"a","model":"up"}`},
		{"POST", "/v1beta/models/gemini-x:countTokens", `{}`, "gemini-x", "/v1beta/models/up:countTokens"},
		{"GET", "/v1/models/claude-x", ``, "claude-x", "/v1/models/up"},
		{"GET", "/v1/models", ``, "", ""},
		{"GET", "/v1/fine_tuning/jobs/models/x", ``, "", ""},
		{"POST", "/v1beta/models/x:embedContent", `{}`, "", ""},
		{"POST", "/v1/messages/count_tokens", `{"model":7}`, "", ""},
		{"POST", "/v1/messages/count_tokens", `{"model":"m"`, "", ""},
		{"GET", "/v1/models/a%00b", ``, "", ""},
	}
	for _, c := range cases {
		mc, ok := ModelCallOf(c.method, c.path, []byte(c.body))
		if ok != (c.model != "") || ok && mc.Model != c.model {
			t.Errorf("%s %s %s: model %q (%v), want %q", c.method, c.path, c.body, mc.Model, ok, c.model)
			continue
		}
		if !ok {
			continue
		}
		path, body := mc.Rewrite(c.path, []byte(c.body), "up")
		if got := path; mc.inPath && got != c.rewritten || !mc.inPath && string(body) != c.rewritten {
			t.Errorf("%s %s: rewritten to %s %s, want %s", c.method, c.path, path, body, c.rewritten)
		}
		if p, b := mc.Rewrite(c.path, []byte(c.body), c.model); p != c.path || string(b) != c.body {
			t.Errorf("%s %s: the same model changed the call", c.method, c.path)
		}
	}
}
