package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmhedge/caddy-llm-hedge"
	"github.com/llmhedge/caddy-llm-hedge/internal/sse"
	"github.com/llmhedge/caddy-llm-hedge/internal/translate"
	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// TestBenchModesCheck sends every mode's request to the simulator and
// requires its check to pass the whole answer and to fail the answer
// without its last event, or with a body that is no stream at all.
func TestBenchModesCheck(t *testing.T) {
	// bedrock-stream: the client of llm_hedge reads Anthropic SSE (the
	// Bedrock request is TestBedrockStreamMode's).
	// A translating mode's request, sent here to the simulator as direct
	// sends it, gets its native stream (TestTranslatedStreams has what
	// llm_hedge's translation makes).
	wantEvents := map[string]int{"non-stream": 0, "stream": 60, "openai-stream": 58, "responses-stream": 62, "gemini-stream": 55, "bedrock-stream": 60}
	for name, m := range benchModes {
		if m.client != "" {
			wantEvents[name] = wantEvents[nativeStreamModes[m.client]]
		}
		if f, ok := strings.CutPrefix(name, "agent-stream/"); ok { // agent.go: the native stream's answer
			wantEvents[name] = wantEvents[map[string]string{"anthropic": "stream", "chat": "openai-stream",
				"responses": "responses-stream", "gemini": "gemini-stream", "bedrock": "bedrock-stream"}[f]]
		}
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(sim.New(sim.Config{Tokens: m.tokens}))
			defer srv.Close()
			resp, err := http.DefaultClient.Do(m.newRequest(context.Background(), srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d, %v: %.300s", resp.StatusCode, err, b)
			}
			if err := m.check(b); err != nil {
				t.Fatalf("complete answer rejected: %v", err)
			}
			if got := countEvents(b); got != wantEvents[name] {
				t.Errorf("%d events, want %d", got, wantEvents[name])
			}
			if wantEvents[name] == 0 { // non-stream, agent/<format>
				if m.check(b[:len(b)/2]) == nil {
					t.Error("truncated body passed")
				}
				return
			}
			// As relayed with LF line ends only.
			if lf := bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")); m.check(lf) != nil {
				t.Errorf("LF-only stream rejected: %v", m.check(lf))
			}
			sep := "\n\n"
			if bytes.HasSuffix(b, []byte("\r\n\r\n")) {
				sep = "\r\n\r\n"
			}
			body := strings.TrimSuffix(string(b), sep)
			cut := body[:strings.LastIndex(body, sep)+len(sep)]
			for desc, bad := range map[string]string{
				"without its last event":  cut,
				"cut inside the last one": body,
				"error JSON":              `{"error":{"type":"not_found","message":"no"}}`,
				"empty":                   "",
			} {
				if m.check([]byte(bad)) == nil {
					t.Errorf("stream %s passed", desc)
				}
			}
		})
	}
}

// TestPrintTableFailures: failed requests show in the table and the
// targets, and a cell with no success is a FAILED row, not a figure.
func TestPrintTableFailures(t *testing.T) {
	const ms = 1e6
	rs := []cellResult{
		{mode: "gemini-stream", config: "direct", conc: 1, rps: 3000, p50: 300e3, p99: ms, cpuPer1k: -1, hwmKB: -1, requests: 3000},
		{mode: "gemini-stream", config: "reverse_proxy", conc: 1, rps: 1500, p50: 500e3, p99: ms, cpuPer1k: 0.3, hwmKB: 50 << 10, requests: 1500},
		{mode: "gemini-stream", config: "llm_hedge", conc: 1, rps: 1400, p50: 520e3, p99: ms, cpuPer1k: 0.3, hwmKB: 50 << 10, requests: 1400, failed: 7, failSample: "stream without a finishReason chunk"},
		{mode: "gemini-stream", config: "llm_hedge_3", conc: 1, cpuPer1k: -1, hwmKB: -1, failed: 9000, failSample: "status 404: no such endpoint"},
	}
	f, err := os.CreateTemp(t.TempDir(), "table")
	if err != nil {
		t.Fatal(err)
	}
	printTable(f, rs, []string{"gemini-stream"}, []int{1}, []string{"direct", "reverse_proxy", "llm_hedge", "llm_hedge_3"})
	f.Close()
	b, _ := os.ReadFile(f.Name())
	out := string(b)
	for _, want := range []string{
		"7 of 1407 requests FAILED, e.g. stream without a finishReason chunk",
		"llm_hedge_3  FAILED  ",
		"9000 of 9000 requests FAILED, e.g. status 404",
		"FAILED requests: 7 here, 0 in reverse_proxy",
		"llm_hedge_3  FAILED: no request succeeded (9000 errors)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	t.Log("\n" + out)
}

// TestBedrockStreamMode: the requests of the bedrock-stream cell and the
// Caddyfiles of its configurations. The Bedrock request (direct,
// reverse_proxy) is what Bedrock takes, and its check accepts the whole
// event stream and nothing less; reverse_proxy's client sends no key (its
// header_up adds it); every configuration's Caddyfile adapts and provisions.
func TestBedrockStreamMode(t *testing.T) {
	m := benchModes["bedrock-stream"]
	if got := modeConfigs(m, []string{"direct", "reverse_proxy", "llm_hedge", "llm_hedge_3"}); !slices.Equal(got, []string{"direct", "reverse_proxy", "llm_hedge", "llm_hedge_sigv4", "llm_hedge_3"}) {
		t.Errorf("configs %v", got)
	}
	if got := modeConfigs(benchModes["stream"], []string{"reverse_proxy", "llm_hedge", "llm_hedge_sigv4"}); !slices.Equal(got, []string{"reverse_proxy", "llm_hedge"}) {
		t.Errorf("stream configs %v", got)
	}

	// The llm_hedge client speaks Anthropic Messages, streamed.
	if hm := m.forConfig("llm_hedge"); hm.path != "/v1/messages" || !bytes.Contains(hm.body, []byte(`"stream":true`)) || !bytes.Contains(hm.body, []byte(`"model":"claude-bench"`)) {
		t.Errorf("llm_hedge request %s %s", hm.path, hm.body)
	}
	// The Bedrock request: no model or stream in the body, Bedrock's version.
	direct, rp := m.forConfig("direct"), m.forConfig("reverse_proxy")
	var body map[string]json.RawMessage
	if err := json.Unmarshal(rp.body, &body); err != nil {
		t.Fatal(err)
	}
	if _, ok := body["model"]; ok || body["stream"] != nil || string(body["anthropic_version"]) != `"bedrock-2023-05-31"` || body["messages"] == nil {
		t.Errorf("Bedrock body %s", rp.body)
	}
	if rp.path != "/model/anthropic.claude-bench-v1%3A0/invoke-with-response-stream" || rp.header["Authorization"] != "" {
		t.Errorf("reverse_proxy request %s %v", rp.path, rp.header)
	}
	if direct.header["Authorization"] != "Bearer "+bedrockKey || m.raw.header["Authorization"] != "" {
		t.Errorf("direct request headers %v (the mode's own: %v)", direct.header, m.raw.header)
	}

	// Against the Bedrock simulator of the cell.
	srv := httptest.NewServer(sim.New(m.simConfig(0)))
	defer srv.Close()
	do := func(bm benchMode) (int, []byte) {
		resp, err := http.DefaultClient.Do(bm.newRequest(context.Background(), srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	if status, b := do(rp); status != http.StatusForbidden {
		t.Errorf("without the key: status %d %s, want 403 (reverse_proxy must add it)", status, b)
	}
	status, b := do(direct)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, b)
	}
	if err := direct.check(b); err != nil {
		t.Fatalf("complete event stream rejected: %v", err)
	}
	if n := direct.countEvents(b); n != 60 {
		t.Errorf("%d frames, want 60", n)
	}
	frames, _ := eventFrames(b)
	last := len(b) - len(frames[len(frames)-1])
	bad := map[string][]byte{
		"without its last frame": b[:last],
		"cut inside the last":    b[:len(b)-5],
		"empty":                  nil,
		"an SSE stream":          []byte("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
		"a flipped payload byte": append(append([]byte(nil), b[:len(b)-10]...), append([]byte{b[len(b)-10] ^ 1}, b[len(b)-9:]...)...),
	}
	for desc, bb := range bad {
		if direct.check(bb) == nil {
			t.Errorf("event stream %s passed", desc)
		}
	}
	if status, b := do(m.forConfig("llm_hedge")); status == http.StatusOK {
		t.Errorf("an Anthropic request to the Bedrock simulator passed: %.200s", b)
	}

	// The Caddyfiles: what each configuration must hold, and each adapts
	// and provisions (llm_hedge_sigv4 with the credentials of its environment).
	sims := placeholderSims()
	for _, e := range caddyEnv("llm_hedge_sigv4") {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	want := map[string][]string{
		"reverse_proxy":   {"reverse_proxy 127.0.0.1:1 {", `header_up Authorization "Bearer ` + bedrockKey + `"`, "keepalive_idle_conns_per_host"},
		"llm_hedge":       {"provider bedrock http://127.0.0.1:1 {", "api bedrock", "region us-east-1", "key " + bedrockKey, "model claude-bench " + bedrockModel},
		"llm_hedge_sigv4": {"provider bedrock http://127.0.0.1:4 {", "api bedrock", "region us-east-1", "model claude-bench " + bedrockModel},
		"llm_hedge_3":     {"http://127.0.0.1:1 {", "http://127.0.0.1:2 {", "http://127.0.0.1:3 {", "vendor c", "hedge {"},
	}
	for config, parts := range want {
		st := modeSite(m, config, sims)
		for _, p := range parts {
			if !strings.Contains(st, p) {
				t.Errorf("%s site lacks %q:\n%s", config, p, st)
			}
		}
		if config == "llm_hedge_sigv4" && strings.Contains(st, "key ") {
			t.Errorf("llm_hedge_sigv4 has a key, so it would not sign:\n%s", st)
		}
		js, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile(freePort(), freePort(), "", st)), nil)
		if err != nil {
			t.Errorf("%s: %v\n%s", config, err, st)
			continue
		}
		var c caddy.Config
		if err := json.Unmarshal(js, &c); err != nil {
			t.Fatal(err)
		}
		if err := caddy.Validate(&c); err != nil {
			t.Errorf("%s: %v", config, err)
		}
	}
	if caddyEnv("llm_hedge") != nil {
		t.Error("llm_hedge gets AWS credentials")
	}
}

// TestTranslateStreamModes: a mode per translation pair, translate-stream
// the anthropic-openai one. Each client sends its native stream mode's
// request byte for byte in every configuration; llm_hedge's sites hold
// providers of the target format translating the client's, with their own
// key, and adapt and provision; direct and reverse_proxy's are the native
// stream's.
func TestTranslateStreamModes(t *testing.T) {
	pairs := translate.Pairs()
	if len(pairs) < 11 {
		t.Fatalf("%d pairs", len(pairs))
	}
	alias, xl := benchModes["translate-stream"], benchModes["translate-stream/anthropic-openai"]
	if alias.client != translate.Anthropic || alias.translate != translate.OpenAI || xl.client != alias.client || xl.translate != alias.translate ||
		!bytes.Equal(alias.body, xl.body) || alias.path != xl.path {
		t.Errorf("translate-stream is not translate-stream/anthropic-openai")
	}
	sims := placeholderSims()
	configs := []string{"direct", "reverse_proxy", "llm_hedge", "llm_hedge_3"}
	for _, p := range pairs {
		client, target := p[0], p[1]
		name := "translate-stream/" + client + "-" + target
		t.Run(name, func(t *testing.T) {
			m, ok := benchModes[name]
			if !ok || m.client != client || m.translate != target {
				t.Fatalf("mode %q: %v, client %q, target %q", name, ok, m.client, m.translate)
			}
			if got := modeConfigs(m, configs); !slices.Equal(got, configs) {
				t.Errorf("configs %v", got)
			}
			native := benchModes[nativeStreamModes[client]]
			want := dumpRequest(t, native)
			for _, config := range configs {
				if got := dumpRequest(t, m.forConfig(config)); !bytes.Equal(got, want) {
					t.Errorf("%s's request differs from %s's:\n%s\nwant\n%s", config, nativeStreamModes[client], got, want)
				}
			}
			api := target
			if client == translate.Responses && target == translate.OpenAI {
				api = "chat"
			}
			prov := []string{"provider sim-a http://127.0.0.1:1 {", "api " + api + "\n", "translate " + client + "\n", "key sk-bench-" + target + "\n", "model * " + translateModel(target) + "\n"}
			for config, parts := range map[string][]string{
				"reverse_proxy": {"reverse_proxy 127.0.0.1:1"},
				"llm_hedge":     prov,
				"llm_hedge_3":   append(slices.Clone(prov[1:]), "http://127.0.0.1:3 {", "vendor c", "hedge {"),
			} {
				st := modeSite(m, config, sims)
				for _, p := range parts {
					if !strings.Contains(st, p) {
						t.Errorf("%s site lacks %q:\n%s", config, p, st)
					}
				}
				if config == "reverse_proxy" && st != modeSite(native, config, sims) {
					t.Errorf("reverse_proxy's site is not the native stream's:\n%s", st)
				}
				js, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile(freePort(), freePort(), "", st)), nil)
				if err != nil {
					t.Fatalf("%s: %v\n%s", config, err, st)
				}
				var c caddy.Config
				if err := json.Unmarshal(js, &c); err != nil {
					t.Fatal(err)
				}
				if err := caddy.Validate(&c); err != nil {
					t.Errorf("%s: %v\n%s", config, err, st)
				}
			}
		})
	}
}

// dumpRequest is the bytes of m's request on the wire (to one base URL).
func dumpRequest(t *testing.T, m benchMode) []byte {
	t.Helper()
	b, err := httputil.DumpRequestOut(m.newRequest(context.Background(), "http://127.0.0.1:1"), true)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestTranslatedStreams: what each pair's client reads, made here as
// llm_hedge makes it (the pair's translation of the native request to the
// simulator speaking the target, its stream translated back event by
// event), passes the native mode's check, with the expected events. (It
// is the pair's code without the engine around it; the smoke run of the
// tool is what sends it through Caddy.)
func TestTranslatedStreams(t *testing.T) {
	srv := httptest.NewServer(sim.New(sim.Config{Tokens: streamTokens}))
	defer srv.Close()
	for _, p := range translate.Pairs() {
		client, target := p[0], p[1]
		name := "translate-stream/" + client + "-" + target
		t.Run(name, func(t *testing.T) {
			m := benchModes[name]
			pair, _ := translate.For(client, target)
			body := m.body
			if client == translate.Gemini {
				body = translate.WithGeminiStream(body) // as the engine marks a streamed Gemini request
			}
			model := translateModel(target)
			tr, err := pair.Translate(body, model)
			if err != nil {
				t.Fatal(err)
			}
			if translate.Material(tr.Losses) {
				t.Fatalf("material losses: %v", tr.Losses)
			}
			resp, err := http.Post(srv.URL+translate.TargetPath(target, model, true), "application/json", bytes.NewReader(tr.Body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			st, rd := tr.NewStream(), sse.NewReader(resp.Body, 0)
			var out []byte
			for {
				ev, err := rd.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if out, err = st.Event(out, ev); err != nil {
					t.Fatalf("event %q: %v", ev.Raw, err)
				}
			}
			if out, err = st.End(out); err != nil {
				t.Fatal(err)
			}
			if err := m.check(out); err != nil {
				t.Fatalf("translated stream rejected: %v", err)
			}
			// The native streams' events (TestBenchModesCheck); an
			// Anthropic client's translated stream has no ping.
			want := map[string]int{translate.Anthropic: 59, translate.OpenAI: 58, translate.Responses: 62, translate.Gemini: 55}[client]
			if got := m.countEvents(out); got != want {
				t.Errorf("%d events, want %d:\n%s", got, want, out)
			}
		})
	}
}

// placeholderSims stand for the bench's simulators in a Caddyfile that is
// only built (and adapted), never served: one per provider a site names,
// on ports 1, 2, ….
func placeholderSims() []*simServer {
	sims := make([]*simServer, sigv4Sim+1)
	for i := range sims {
		sims[i] = &simServer{URL: "http://127.0.0.1:" + string(rune('1'+i))}
	}
	return sims
}

// -modes translate-all is every pair, each after the native stream of its
// client format; a mode named twice runs once; translate-stream stays a
// mode of its own name.
func TestParseTranslateAll(t *testing.T) {
	got, err := parseModes("stream, translate-all,gemini-stream")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(translate.Pairs())+4 {
		t.Fatalf("%d modes: %v", len(got), got)
	}
	native := ""
	for _, name := range got {
		m := benchModes[name]
		if m.client == "" {
			native = name
			continue
		}
		if nativeStreamModes[m.client] != native {
			t.Errorf("%s follows %q, not its client's native stream", name, native)
		}
	}
	for _, p := range translate.Pairs() {
		if !slices.Contains(got, "translate-stream/"+p[0]+"-"+p[1]) {
			t.Errorf("no mode for %s->%s", p[0], p[1])
		}
	}
	if got, err := parseModes("stream,translate-stream"); err != nil || !slices.Equal(got, []string{"stream", "translate-stream"}) {
		t.Errorf("translate-stream: %v %v", got, err)
	}
	if _, err := parseModes("translate-stream/gemini-responses"); err == nil || !strings.Contains(err.Error(), "translate-stream/openai-anthropic") || !strings.Contains(err.Error(), "translate-all") {
		t.Errorf("a pair that does not exist: %v", err)
	}
}

// The table's translation lines: each translating cell's CPU per request
// against its configuration's own in its client's native stream cell.
func TestTranslateTable(t *testing.T) {
	cell := func(mode, config string, cpu float64) cellResult {
		return cellResult{mode: mode, config: config, conc: 16, rps: 1000, cpuPer1k: cpu, hwmKB: 40 << 10, requests: 1000}
	}
	rs := []cellResult{
		cell("openai-stream", "reverse_proxy", 0.5), cell("openai-stream", "llm_hedge", 1.0),
		cell("translate-stream/openai-anthropic", "reverse_proxy", 0.5), cell("translate-stream/openai-anthropic", "llm_hedge", 1.05),
		cell("translate-stream/openai-gemini", "llm_hedge", 1.3),
		cell("translate-stream/gemini-openai", "llm_hedge", 0.9),
	}
	modes := []string{"openai-stream", "translate-stream/openai-anthropic", "translate-stream/openai-gemini", "translate-stream/gemini-openai"}
	var out strings.Builder
	printTable(&out, rs, modes, []int{16}, []string{"reverse_proxy", "llm_hedge"})
	for _, want := range []string{
		"translation (issue 59): CPU/request ≤ 1.10×",
		"translate-stream/openai-anthropic    c=16  llm_hedge    CPU 1.050 s/1k req, openai-stream 1.000: 1.050× met",
		"translate-stream/openai-gemini       c=16  llm_hedge    CPU 1.300 s/1k req, openai-stream 1.000: 1.300× MISSED",
		"translate-stream/gemini-openai       c=16  llm_hedge    CPU 0.900 s/1k req; no gemini-stream cell of llm_hedge in this run",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "openai-anthropic    c=16  reverse_proxy") {
		t.Errorf("a translation line for reverse_proxy:\n%s", out.String())
	}
}

// translate-all's pairs take their rounds in turn with their client's
// native stream (one group each); other modes, and a pair named without
// its native stream before it, are groups of their own.
func TestModeGroups(t *testing.T) {
	all, err := parseModes("translate-all")
	if err != nil {
		t.Fatal(err)
	}
	groups := modeGroups(all)
	if len(groups) != len(clientOrder) {
		t.Fatalf("%d groups, want one per client format: %v", len(groups), groups)
	}
	n := 0
	for _, g := range groups {
		for _, mode := range g[1:] {
			if nativeStreamModes[benchModes[mode].client] != g[0] {
				t.Errorf("%s grouped with %s", mode, g[0])
			}
		}
		n += len(g)
	}
	if n != len(all) {
		t.Errorf("%d modes grouped of %d", n, len(all))
	}
	got := modeGroups([]string{"stream", "gemini-stream", "translate-stream/anthropic-openai", "openai-stream", "translate-stream/openai-anthropic"})
	want := [][]string{{"stream"}, {"gemini-stream"}, {"translate-stream/anthropic-openai"}, {"openai-stream", "translate-stream/openai-anthropic"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}
}
