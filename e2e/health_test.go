package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// Each simulator of these tests reports its own model name, so the answer a
// client gets tells which provider served it.
const (
	healthByPrimary   = "served-by-primary"
	healthBySecondary = "served-by-secondary"
)

// healthIsolated keeps the breaker alone in charge of where requests go:
// no hedges, no same-provider retries.
const healthIsolated = "hedge off\nretry {\n same_provider 0\n}\n"

func healthCooldown(failures int, duration string) string {
	return fmt.Sprintf("cooldown {\n failures %d\n duration %s\n}\n", failures, duration)
}

// healthView is one provider as GET /llm_hedge/providers shows it.
type healthView struct {
	Name                string `json:"name"`
	URL                 string `json:"url"`
	Vendor              string `json:"vendor"`
	State               string `json:"state"`
	ConsecutiveFailures int64  `json:"consecutive_failures"`
	OpenUntil           string `json:"open_until"`
	InFlight            int64  `json:"in_flight"`
	Requests            int64  `json:"requests"`
	Failures            int64  `json:"failures"`
	LastError           *struct {
		Class string `json:"class"`
		At    string `json:"at"`
	} `json:"last_error"`
}

// healthAdmin sends one request to the admin listener.
func healthAdmin(t testing.TB, p *proxy, method, path string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.AdminURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	return resp.StatusCode, resp.Header, readAll(resp)
}

func healthViews(t testing.TB, body string) []healthView {
	t.Helper()
	var views []healthView
	if err := json.Unmarshal([]byte(body), &views); err != nil {
		t.Fatalf("decoding %s: %v", body, err)
	}
	return views
}

// healthProvider returns the admin view of provider name at up, or nil when
// the admin API does not list it.
func healthProvider(t testing.TB, p *proxy, name string, up *upstream) *healthView {
	t.Helper()
	status, _, body := healthAdmin(t, p, http.MethodGet, "/llm_hedge/providers")
	if status != http.StatusOK {
		t.Fatalf("GET /llm_hedge/providers: status %d: %s", status, body)
	}
	for _, v := range healthViews(t, body) {
		if v.Name == name && v.URL == up.URL {
			return &v
		}
	}
	return nil
}

func healthMustProvider(t testing.TB, p *proxy, name string, up *upstream) *healthView {
	t.Helper()
	v := healthProvider(t, p, name, up)
	if v == nil {
		t.Fatalf("provider %s (%s) is not in the admin list", name, up.URL)
	}
	return v
}

// healthAsk sends one completion through an official SDK. Modes: 0
// anthropic, 1 openai, 2 anthropic stream, 3 openai stream. It returns the
// model of the answer (which simulator served it) and its text.
func healthAsk(ctx context.Context, p *proxy, mode int) (by, text string, err error) {
	switch mode {
	case 0:
		m, err := anthropicClient(p, "sk-client").Messages.New(ctx, anthropicParams("claude-test"))
		if err != nil {
			return "", "", err
		}
		return string(m.Model), messageText(*m), nil
	case 1:
		c, err := openaiClient(p, "sk-client").Chat.Completions.New(ctx, openaiParams("gpt-test"))
		if err != nil {
			return "", "", err
		}
		if len(c.Choices) == 0 {
			return c.Model, "", errors.New("no choices")
		}
		return c.Model, c.Choices[0].Message.Content, nil
	case 2:
		m, err := streamAnthropic(ctx, anthropicClient(p, "sk-client"), anthropicParams("claude-test"))
		return string(m.Model), messageText(m), err
	default:
		acc, err := streamOpenAI(ctx, openaiClient(p, "sk-client"), openaiParams("gpt-test"))
		if len(acc.Choices) > 0 {
			text = acc.Choices[0].Message.Content
		}
		return acc.Model, text, err
	}
}

var healthModes = []string{"anthropic", "openai", "anthropic-stream", "openai-stream"}

// healthAskOK sends one request and fails the test unless it was answered
// in full by the simulator that reports model want.
func healthAskOK(t testing.TB, p *proxy, mode int, want string) {
	t.Helper()
	by, text, err := healthAsk(ctxTimeout(t, 10*time.Second), p, mode)
	if err != nil || text != wantText || by != want {
		t.Fatalf("%s: served by %q, text %q, err %v; want %q in full from %s", healthModes[mode], by, text, err, wantText, want)
	}
}

// healthPost sends an Anthropic completion as raw HTTP, for the status and
// headers the SDKs hide.
func healthPost(ctx context.Context, p *proxy, stream bool) (*http.Response, string, error) {
	body := fmt.Sprintf(`{"model":"claude-test","max_tokens":64,"stream":%t,"messages":[{"role":"user","content":"hello"}]}`, stream)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.URL+"/v1/messages", strings.NewReader(body))
	if err != nil {
		return nil, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "sk-client")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, string(b), err
}

// healthWaitRecords waits until cond holds for the upstream's records.
func healthWaitRecords(t testing.TB, up *upstream, what string, cond func([]sim.RequestRecord) bool) {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second) // generous: the machine is shared
	defer deadline.Stop()
	for {
		changed := up.Changed()
		if cond(up.Requests()) {
			return
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// healthWaitAdmin polls the admin view of a provider until cond holds.
func healthWaitAdmin(t testing.TB, p *proxy, name string, up *upstream, what string, cond func(*healthView) bool) *healthView {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v := healthProvider(t, p, name, up)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last view %+v", what, v)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a wait for an event
	}
}

func healthCompletionRecords(up *upstream) []sim.RequestRecord {
	var out []sim.RequestRecord
	for _, r := range up.Requests() {
		if r.Path == "/v1/messages" || r.Path == "/v1/chat/completions" {
			out = append(out, r)
		}
	}
	return out
}

// A primary that answers 503 for a few seconds and then recovers: every
// client request succeeds throughout, the secondary carries the outage, the
// primary sees one probe per open period, and traffic is back on the
// primary soon after it recovers.
func TestHealthOutageAndRecovery(t *testing.T) {
	const (
		failures = 3
		duration = 2 * time.Second
		outage   = 3 * time.Second
		every    = 50 * time.Millisecond
	)
	primary := newUpstream(t, sim.Config{Model: healthByPrimary, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	secondary := newUpstream(t, sim.Config{Model: healthBySecondary})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		healthIsolated+healthCooldown(failures, "2s"))

	type sent struct {
		at time.Time
		by string
	}
	var log []sent
	tick := time.NewTicker(every)
	defer tick.Stop()
	start := time.Now()
	var recovered time.Time
	sawOpen, backOnPrimary := false, 0
	for i := 0; backOnPrimary < 10; i++ {
		<-tick.C
		if recovered.IsZero() && time.Since(start) >= outage {
			recovered = time.Now()
			if err := primary.SetFaults(nil); err != nil {
				t.Fatal(err)
			}
		}
		if !recovered.IsZero() && time.Since(recovered) > duration+10*time.Second {
			t.Fatalf("traffic never came back to the primary (%d requests after it recovered)", len(log))
		}
		mode := i % 2 // mostly non-stream; every fifth request streams
		if i%5 == 4 {
			mode = 2 + (i/5)%2
		}
		at := time.Now()
		by, text, err := healthAsk(ctxTimeout(t, 10*time.Second), p, mode)
		if err != nil || text != wantText {
			t.Fatalf("request %d (%s) at +%v failed: text %q, err %v", i, healthModes[mode], at.Sub(start), text, err)
		}
		log = append(log, sent{at, by})
		if !recovered.IsZero() && by == healthByPrimary {
			backOnPrimary++
		}
		if !sawOpen && len(healthCompletionRecords(primary)) >= failures {
			// Right after the third failure the breaker is open for 2s.
			v := healthMustProvider(t, p, "primary", primary)
			if v.State != "open" || v.ConsecutiveFailures != failures || v.OpenUntil == "" || v.LastError == nil || v.LastError.Class != "overloaded" {
				t.Fatalf("after %d failures the admin view is %+v; want open, %d in a row, last error overloaded", failures, *v, failures)
			}
			sawOpen = true
		}
	}

	for _, s := range log {
		if s.at.Before(recovered) && s.by != healthBySecondary {
			t.Fatalf("request at +%v during the outage was served by %s", s.at.Sub(start), s.by)
		}
	}

	recs := healthCompletionRecords(primary)
	for i := 0; i < failures; i++ {
		if recs[i].Status != 503 {
			t.Fatalf("primary request %d: status %d, want the outage's 503", i, recs[i].Status)
		}
	}
	firstOK := -1
	for i, r := range recs {
		if r.Status == http.StatusOK {
			firstOK = i
			break
		}
	}
	if firstOK < failures {
		t.Fatalf("primary served a request while it was down (record %d of %v)", firstOK, recs)
	}
	// After opening, the primary gets one request (the probe) per open
	// period: consecutive requests at least a period apart. The proxy
	// re-opens the breaker after the probe's answer, so the gap is more than
	// the period; the small slack only absorbs clock reading order.
	for i := failures; i <= firstOK; i++ {
		if gap := recs[i].Start.Sub(recs[i-1].Start); gap < duration-50*time.Millisecond {
			t.Fatalf("primary request %d came %v after the previous one: more than one request in a %v open period", i, gap, duration)
		}
	}
	failedProbes := firstOK - failures
	if most := int((outage + duration - 1) / duration); failedProbes > most {
		t.Fatalf("primary saw %d failed probes in a %v outage with %v open periods, want at most %d", failedProbes, outage, duration, most)
	}
	back := recs[firstOK].Start.Sub(recovered)
	if back > duration+2*time.Second {
		t.Fatalf("traffic returned %v after the primary recovered, want within %v", back, duration+2*time.Second)
	}
	// The successful probe closed the breaker: everything after it is the
	// primary's again, not just the probe.
	for _, s := range log {
		if s.at.After(recs[firstOK].Start) && s.by != healthByPrimary {
			t.Fatalf("request at +%v, after the probe succeeded, went to %s", s.at.Sub(start), s.by)
		}
	}
	if v := healthMustProvider(t, p, "primary", primary); v.State != "closed" || v.ConsecutiveFailures != 0 {
		t.Fatalf("after recovery the admin view is %+v, want closed", *v)
	}
	t.Logf("%d requests; breaker opened at +%v; %d failed probe(s) during the %v outage; traffic back %v after recovery",
		len(log), recs[failures-1].Start.Sub(start), failedProbes, outage, back)
}

// A reload through the admin API keeps an open breaker open (same open
// period) and cuts none of the 20 streams in flight.
func TestHealthBreakerSurvivesReload(t *testing.T) {
	const streams = 20
	primary := newUpstream(t, sim.Config{Model: healthByPrimary, Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 503}}})
	secondary := newUpstream(t, sim.Config{Model: healthBySecondary})
	block := func(weight int) string {
		return provider("primary", primary, "priority 0") +
			provider("secondary", secondary, "priority 1", fmt.Sprintf("weight %d", weight)) +
			healthIsolated + healthCooldown(3, "30s")
	}
	p := startProxy(t, block(1))
	for i := range 3 {
		healthAskOK(t, p, i%2, healthBySecondary)
	}
	before := healthMustProvider(t, p, "primary", primary)
	if before.State != "open" || before.OpenUntil == "" {
		t.Fatalf("before the reload: %+v, want open", *before)
	}

	// Each stream now lasts about 6.3 s: under -race on 2 cores the 20 take
	// well over a second to all be in flight (3.6 s in one CI run, with
	// another package's tests beside them), and the first must not end
	// before the reload starts.
	if err := secondary.SetConfig(sim.Config{Model: healthBySecondary, Tokens: 9, TokenDelay: caddyDur(700 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	results := make(chan error, streams)
	for i := range streams {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			by, text, err := healthAsk(ctx, p, 2+i%2)
			if err == nil && (text != wantText || by != healthBySecondary) {
				err = fmt.Errorf("served by %s with text %q", by, text)
			}
			if err != nil {
				err = fmt.Errorf("stream %d (%s): %w", i, healthModes[2+i%2], err)
			}
			results <- err
		}()
	}
	healthWaitRecords(t, secondary, "20 streams in flight", func(recs []sim.RequestRecord) bool {
		n := 0
		for _, r := range recs {
			if r.Stream && !r.FirstDelta.IsZero() && r.End.IsZero() {
				n++
			}
		}
		return n == streams
	})

	reloadAt := time.Now()
	p.reload(t, block(3))

	after := healthMustProvider(t, p, "primary", primary)
	if after.State != "open" || after.OpenUntil != before.OpenUntil || after.ConsecutiveFailures != before.ConsecutiveFailures {
		t.Fatalf("after the reload: %+v; before: %+v; want the same open period", *after, *before)
	}
	if _, _, cfg := healthAdmin(t, p, http.MethodGet, "/config/apps/http"); !strings.Contains(cfg, `"weight":3`) {
		t.Fatalf("the reloaded config is not running: %s", cfg)
	}
	for range streams {
		if err := <-results; err != nil {
			t.Error(err)
		}
	}
	across := 0
	for _, r := range secondary.Requests() {
		if r.Stream && r.Start.Before(reloadAt) && r.End.After(reloadAt) {
			across++
		}
	}
	if across != streams {
		t.Fatalf("%d streams ran across the reload, want %d", across, streams)
	}

	// The new handler shares the open breaker: traffic still avoids the primary.
	n := len(healthCompletionRecords(primary))
	if err := secondary.SetConfig(sim.Config{Model: healthBySecondary, Tokens: 9}); err != nil {
		t.Fatal(err)
	}
	healthAskOK(t, p, 0, healthBySecondary)
	healthAskOK(t, p, 3, healthBySecondary)
	if got := len(healthCompletionRecords(primary)); got != n {
		t.Fatalf("the primary got %d requests after the reload while its breaker was open", got-n)
	}
}

// The admin endpoints on the real admin listener: the list in JSON and as
// text, reset (traffic returns), 405 and 404, providers removed by a reload
// disappear, and no configured key shows in any response or in the log.
func TestHealthAdminEndpoints(t *testing.T) {
	keys := map[string]string{
		"primary":   "sk-secret-primary-7f3a9c0d",
		"secondary": "sk-secret-secondary-41d2e8aa",
		"tertiary":  "sk-secret-tertiary-9b0c11ff",
	}
	primary := newUpstream(t, sim.Config{Model: healthByPrimary, Key: keys["primary"]})
	secondary := newUpstream(t, sim.Config{Model: healthBySecondary, Key: keys["secondary"]})
	tertiary := newUpstream(t, sim.Config{Key: keys["tertiary"]})
	// The primary's key comes from the environment, the way the README
	// recommends; the others are written in the Caddyfile.
	t.Setenv("LLMHEDGE_HEALTH_TEST_KEY", keys["primary"])
	base := provider("primary", primary, "priority 0", "key {env.LLMHEDGE_HEALTH_TEST_KEY}", "vendor acme") +
		provider("secondary", secondary, "priority 1", "key "+keys["secondary"]) +
		healthIsolated + healthCooldown(2, "30s")
	p := startProxy(t, base+provider("tertiary", tertiary, "priority 2", "key "+keys["tertiary"]))

	var seen []string // every admin answer, headers included, checked for keys at the end
	admin := func(method, path string) (int, http.Header, string) {
		t.Helper()
		status, hdr, body := healthAdmin(t, p, method, path)
		seen = append(seen, fmt.Sprintf("%s %s -> %d %v\n%s", method, path, status, hdr, body))
		return status, hdr, body
	}

	healthAskOK(t, p, 0, healthByPrimary)
	if err := primary.SetFaults([]sim.Fault{{Kind: sim.FaultStatus, Status: 503}}); err != nil {
		t.Fatal(err)
	}
	healthAskOK(t, p, 1, healthBySecondary)
	healthAskOK(t, p, 2, healthBySecondary)
	if err := primary.SetFaults(nil); err != nil {
		t.Fatal(err)
	}

	// The JSON list.
	status, hdr, body := admin(http.MethodGet, "/llm_hedge/providers")
	if status != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("list: status %d, Content-Type %q", status, hdr.Get("Content-Type"))
	}
	var raw []map[string]any
	if err := json.Unmarshal([]byte(body), &raw); err != nil {
		t.Fatal(err)
	}
	var rawPrimary map[string]any
	for _, v := range raw {
		if v["name"] == "primary" && v["url"] == primary.URL {
			rawPrimary = v
		}
	}
	for _, field := range []string{"name", "url", "vendor", "state", "consecutive_failures", "open_until", "in_flight",
		"requests", "failures", "hedges_won", "hedges_lost", "tokens", "last_error"} {
		if _, ok := rawPrimary[field]; !ok {
			t.Errorf("the primary's view has no %q: %v", field, rawPrimary)
		}
	}
	views := healthViews(t, body)
	find := func(name string, up *upstream) *healthView {
		for i := range views {
			if views[i].Name == name && views[i].URL == up.URL {
				return &views[i]
			}
		}
		t.Fatalf("%s not listed in %s", name, body)
		return nil
	}
	pv, sv := find("primary", primary), find("secondary", secondary)
	find("tertiary", tertiary)
	if pv.State != "open" || pv.Vendor != "acme" || pv.ConsecutiveFailures != 2 || pv.Requests != 3 || pv.Failures != 2 ||
		pv.InFlight != 0 || pv.LastError == nil || pv.LastError.Class != "overloaded" {
		t.Errorf("primary: %+v", *pv)
	}
	if pv.LastError != nil {
		if _, err := time.Parse(time.RFC3339, pv.LastError.At); err != nil {
			t.Errorf("last_error.at: %v", err)
		}
	}
	if until, err := time.Parse(time.RFC3339, pv.OpenUntil); err != nil || time.Until(until) < 20*time.Second || time.Until(until) > 31*time.Second {
		t.Errorf("primary open_until %q (%v): want about 30s from now", pv.OpenUntil, err)
	}
	if sv.State != "closed" || sv.Vendor != "127.0.0.1" || sv.Requests != 2 || sv.Failures != 0 || sv.OpenUntil != "" || sv.LastError != nil {
		t.Errorf("secondary: %+v", *sv)
	}

	// The text table.
	status, hdr, body = admin(http.MethodGet, "/llm_hedge/providers?format=text")
	if status != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("text: status %d, Content-Type %q", status, hdr.Get("Content-Type"))
	}
	lines := strings.Split(body, "\n")
	if !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "STATE") {
		t.Errorf("text header: %q", lines[0])
	}
	rowOf := func(name, url string) string {
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 1 && f[0] == name && f[1] == url {
				return l
			}
		}
		t.Errorf("no text row for %s %s in\n%s", name, url, body)
		return ""
	}
	if row := rowOf("primary", primary.URL); !strings.Contains(row, "open for") || !strings.Contains(row, "overloaded") {
		t.Errorf("primary row: %q", row)
	}
	if row := rowOf("secondary", secondary.URL); !strings.Contains(row, "closed") {
		t.Errorf("secondary row: %q", row)
	}

	// While open, the primary gets nothing.
	healthAskOK(t, p, 3, healthBySecondary)
	if n := len(healthCompletionRecords(primary)); n != 3 {
		t.Fatalf("primary got %d requests, want 3 (none while open)", n)
	}

	// Reset closes it and keeps the lifetime counters.
	status, _, body = admin(http.MethodPost, "/llm_hedge/providers/primary/reset")
	if status != http.StatusOK {
		t.Fatalf("reset: status %d: %s", status, body)
	}
	reset := healthViews(t, body)
	if len(reset) != 1 || reset[0].Name != "primary" || reset[0].State != "closed" || reset[0].ConsecutiveFailures != 0 ||
		reset[0].OpenUntil != "" || reset[0].Requests != 3 || reset[0].Failures != 2 {
		t.Fatalf("reset answered %s", body)
	}
	healthAskOK(t, p, 0, healthByPrimary)
	healthAskOK(t, p, 2, healthByPrimary)

	// Wrong methods and unknown names.
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/llm_hedge/providers/primary/reset", http.StatusMethodNotAllowed, http.MethodPost},
		{http.MethodPost, "/llm_hedge/providers", http.StatusMethodNotAllowed, http.MethodGet},
		{http.MethodDelete, "/llm_hedge/providers", http.StatusMethodNotAllowed, http.MethodGet},
		{http.MethodPost, "/llm_hedge/providers/nobody/reset", http.StatusNotFound, ""},
		{http.MethodGet, "/llm_hedge/elsewhere", http.StatusNotFound, ""},
	} {
		status, hdr, body := admin(tc.method, tc.path)
		if status != tc.status || hdr.Get("Allow") != tc.allow {
			t.Errorf("%s %s: status %d Allow %q (%s); want %d Allow %q", tc.method, tc.path, status, hdr.Get("Allow"), body, tc.status, tc.allow)
		}
	}

	// A provider no running config names any more leaves the list once the
	// old handler is cleaned up; the others keep their state.
	p.reload(t, base)
	healthWaitAdmin(t, p, "tertiary", tertiary, "the removed provider to leave the list", func(v *healthView) bool { return v == nil })
	if v := healthMustProvider(t, p, "primary", primary); v.Requests != 5 {
		t.Errorf("primary after the reload: %+v, want its 5 requests kept", *v)
	}
	_, _, body = admin(http.MethodGet, "/llm_hedge/providers")
	_, _, _ = admin(http.MethodGet, "/llm_hedge/providers?format=text")

	logs := p.logs(t)
	if !strings.Contains(logs, `"provider":"secondary"`) {
		t.Errorf("the log has no request line naming the secondary; is it the Caddy log?\n%s", logs)
	}
	for name, key := range keys {
		for _, s := range seen {
			if strings.Contains(s, key) {
				t.Errorf("%s's key in an admin answer: %s", name, s)
			}
		}
		for _, line := range strings.Split(logs, "\n") {
			if !strings.Contains(line, key) {
				continue
			}
			// At debug level Caddy itself logs the whole HTTP app config,
			// a key written in the Caddyfile included (not one from
			// {env.*}): that line is Caddy's, and the README says so.
			var entry struct{ Logger, Msg string }
			_ = json.Unmarshal([]byte(line), &entry)
			if name != "primary" && entry.Logger == "http.auto_https" && entry.Msg == "adjusted config" {
				continue
			}
			t.Errorf("%s's key in the Caddy log: %.300s", name, line)
		}
	}
}

// When every candidate is open, one probe goes to the provider whose open
// period ends first; if it fails the client gets 503 with a Retry-After of
// the earliest recovery as it stands after that failure. Only one request
// at a time probes; an aborted probe frees the slot.
func TestHealthAllOpenProbesEarliest(t *testing.T) {
	retryAfter := func(s string) []sim.Fault {
		return []sim.Fault{{Kind: sim.FaultStatus, Status: 503, RetryAfter: s}}
	}
	primary := newUpstream(t, sim.Config{Model: healthByPrimary, Faults: retryAfter("20")})
	secondary := newUpstream(t, sim.Config{Model: healthBySecondary, Faults: retryAfter("10")})
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		healthIsolated+healthCooldown(3, "2s"))
	ctx := ctxTimeout(t, 30*time.Second)

	// One request opens both: a 503 with Retry-After opens at once.
	resp, body, err := healthPost(ctx, p, false)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("first request: %v %v %s", resp, err, body)
	}
	pv, sv := healthMustProvider(t, p, "primary", primary), healthMustProvider(t, p, "secondary", secondary)
	if pv.State != "open" || sv.State != "open" || !(sv.OpenUntil < pv.OpenUntil) {
		t.Fatalf("want both open, the secondary first to recover: primary %+v secondary %+v", *pv, *sv)
	}

	// The probe goes to the secondary and fails with a longer Retry-After.
	if err := secondary.SetFaults(retryAfter("15")); err != nil {
		t.Fatal(err)
	}
	primary.ResetStats()
	secondary.ResetStats()
	resp, body, err = healthPost(ctx, p, false)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || !strings.Contains(body, "overloaded_error") {
		t.Fatalf("failed probe: status %d %s; want 503 overloaded_error", resp.StatusCode, body)
	}
	if np, ns := completions(primary), completions(secondary); np != 0 || ns != 1 {
		t.Fatalf("primary got %d and secondary %d requests; want one probe, to the secondary", np, ns)
	}
	// The secondary now recovers in 15s, before the primary's 20s: that is
	// the advice, not the 10s it had before its probe failed.
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 13 || ra > 15 {
		t.Fatalf("Retry-After %q, want the secondary's new recovery, about 15s", resp.Header.Get("Retry-After"))
	}

	// A probe that hangs holds the slot: every other request is turned
	// away at once with a Retry-After, none reaches a provider.
	if err := secondary.SetFaults([]sim.Fault{{Kind: sim.FaultStall}}); err != nil {
		t.Fatal(err)
	}
	probeCtx, cancelProbe := context.WithCancel(ctx)
	probeDone := make(chan error, 1)
	go func() {
		_, _, err := healthPost(probeCtx, p, true)
		probeDone <- err
	}()
	healthWaitRecords(t, secondary, "the hanging probe", func(recs []sim.RequestRecord) bool { return len(recs) == 2 })
	for i := range 4 {
		resp, body, err := healthPost(ctx, p, i%2 == 0)
		if err != nil {
			t.Fatal(err)
		}
		ra, raErr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != 503 || raErr != nil || ra < 1 || ra > 15 {
			t.Fatalf("request %d while the probe hangs: status %d Retry-After %q %s", i, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	if np, ns := completions(primary), completions(secondary); np != 0 || ns != 2 {
		t.Fatalf("while a probe was in flight, primary got %d and secondary %d requests; want 0 and 2", np, ns)
	}
	cancelProbe()
	if err := <-probeDone; err == nil {
		t.Fatal("the aborted probe's client saw no error")
	}

	// The aborted probe counted for nothing and freed the slot: the next
	// request probes the secondary again, succeeds, and closes it.
	if err := secondary.SetFaults(nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, body, err := healthPost(ctx, p, false)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			if !strings.Contains(body, healthBySecondary) {
				t.Fatalf("probe answered by the wrong provider: %s", body)
			}
			break
		}
		// 503 until the aborted attempt is settled on the proxy's side.
		if time.Now().After(deadline) || completions(secondary) != 2 {
			t.Fatalf("after the probe was aborted: status %d %s (secondary requests %d)", resp.StatusCode, body, completions(secondary))
		}
		time.Sleep(20 * time.Millisecond) // polling interval
	}
	if sv := healthMustProvider(t, p, "secondary", secondary); sv.State != "closed" {
		t.Fatalf("secondary after a successful probe: %+v", *sv)
	}
	if pv := healthMustProvider(t, p, "primary", primary); pv.State != "open" || completions(primary) != 0 {
		t.Fatalf("primary: %+v, %d requests; want open and untouched", *pv, completions(primary))
	}
}

// A provider that cuts every stream after its first tokens fails the
// clients it was committed to: those failures count like any other, so its
// breaker opens and the next streams go elsewhere whole.
func TestHealthCutStreamsOpenTheBreaker(t *testing.T) {
	primary := newUpstream(t, sim.Config{Model: healthByPrimary, Faults: []sim.Fault{{Kind: sim.FaultCut, After: 3}}})
	secondary := newUpstream(t, sim.Config{Model: healthBySecondary})
	// Without continuation: a continued stream would reach the client whole
	// (the breaker counts the cut all the same: TestResumeCutStillCountsAgainstTheProvider).
	p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
		healthIsolated+healthCooldown(2, "30s")+"stream {\n resume off\n }\n")
	for i := range 2 {
		if _, _, err := healthAsk(ctxTimeout(t, 10*time.Second), p, 2+i%2); err == nil {
			t.Fatalf("cut stream %d finished cleanly", i)
		}
	}
	// The client may see the error event before the proxy's relay returns.
	v := healthWaitAdmin(t, p, "primary", primary, "the cut streams to settle", func(v *healthView) bool { return v != nil && v.InFlight == 0 })
	if v.State != "open" || v.LastError == nil || !strings.HasPrefix(v.LastError.Class, "stream_") {
		t.Fatalf("after 2 cut streams with failures 2: %+v, want open with a stream_ error", *v)
	}
	healthAskOK(t, p, 2, healthBySecondary)
	healthAskOK(t, p, 3, healthBySecondary)
	if n := completions(primary); n != 2 {
		t.Fatalf("primary got %d requests, want only the 2 it cut", n)
	}
}

// max_in_flight is a limit, not a breaker: a request that finds every
// candidate busy is turned away, never forced through as a "probe" (which
// would also open a healthy provider's breaker on one failure).
func TestHealthBusyIsNotForcedThrough(t *testing.T) {
	up := newUpstream(t, sim.Config{Model: healthByPrimary, FirstToken: caddyDur(time.Minute)})
	p := startProxy(t, provider("only", up, "max_in_flight 1")+healthIsolated)

	ctx, cancel := context.WithCancel(ctxTimeout(t, 30*time.Second))
	done := make(chan error, 1)
	go func() {
		_, _, err := healthPost(ctx, p, true)
		done <- err
	}()
	healthWaitRecords(t, up, "the first request", func(recs []sim.RequestRecord) bool { return len(recs) == 1 })

	resp, body, err := healthPost(ctxTimeout(t, 10*time.Second), p, true)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 {
		t.Errorf("a request over max_in_flight: status %d %s, want 503", resp.StatusCode, body)
	}
	if n := completions(up); n != 1 {
		t.Errorf("the provider got %d requests at once with max_in_flight 1", n)
	}
	cancel()
	<-done
	if v := healthMustProvider(t, p, "only", up); v.State != "closed" || v.ConsecutiveFailures != 0 {
		t.Errorf("after a busy skip and an abort: %+v, want closed", *v)
	}
}

// Request-level errors and client aborts are not the provider's fault:
// however many there are, the breaker stays closed.
func TestHealthRequestErrorsAndAbortsNeverOpen(t *testing.T) {
	t.Run("400s", func(t *testing.T) {
		primary := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400}}})
		secondary := newUpstream(t, sim.Config{})
		p := startProxy(t, provider("primary", primary, "priority 0")+provider("secondary", secondary, "priority 1")+
			healthIsolated+healthCooldown(2, "30s"))
		for i := range 12 {
			_, _, err := healthAsk(ctxTimeout(t, 10*time.Second), p, i%4)
			var ae *anthropic.Error
			var oe *openai.Error
			if !(errors.As(err, &ae) && ae.StatusCode == 400) && !(errors.As(err, &oe) && oe.StatusCode == 400) {
				t.Fatalf("request %d (%s): %v, want the provider's 400", i, healthModes[i%4], err)
			}
		}
		v := healthMustProvider(t, p, "primary", primary)
		if v.State != "closed" || v.ConsecutiveFailures != 0 || v.Failures != 0 || v.Requests != 12 {
			t.Fatalf("after 12 400s: %+v, want closed with no failure counted", *v)
		}
		if n := completions(secondary); n != 0 {
			t.Fatalf("a request-level error failed over %d times", n)
		}
	})

	t.Run("client aborts", func(t *testing.T) {
		up := newUpstream(t, sim.Config{FirstToken: caddyDur(time.Minute)})
		other := newUpstream(t, sim.Config{})
		p := startProxy(t, provider("primary", up, "priority 0")+provider("secondary", other, "priority 1")+
			healthIsolated+healthCooldown(1, "30s"))
		abort := func(i int, stream bool, reached func([]sim.RequestRecord) bool) {
			t.Helper()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan struct{})
			go func() {
				defer close(done)
				if stream {
					msgs := anthropicClient(p, "k").Messages.NewStreaming(ctx, anthropicParams("claude-test"))
					for msgs.Next() {
					}
					msgs.Close()
					return
				}
				_, _, _ = healthPost(ctx, p, false)
			}()
			healthWaitRecords(t, up, fmt.Sprintf("abort %d to reach its point", i), reached)
			cancel()
			<-done
		}
		// Before the first byte: streaming and not.
		for i := range 4 {
			abort(i, i%2 == 0, func(recs []sim.RequestRecord) bool { return len(recs) == i+1 })
		}
		// After commit, mid-stream: the first delta is the first valid
		// event, and the rest take seconds.
		if err := up.SetConfig(sim.Config{Tokens: 9, TokenDelay: caddyDur(time.Second)}); err != nil {
			t.Fatal(err)
		}
		for i := 4; i < 6; i++ {
			abort(i, true, func(recs []sim.RequestRecord) bool { return len(recs) == i+1 && !recs[i].FirstDelta.IsZero() })
		}
		v := healthWaitAdmin(t, p, "primary", up, "the aborted attempts to settle", func(v *healthView) bool { return v != nil && v.InFlight == 0 })
		if v.State != "closed" || v.ConsecutiveFailures != 0 || v.Failures != 0 {
			t.Fatalf("after 6 client aborts with failures 1: %+v, want closed", *v)
		}
		if n := completions(other); n != 0 {
			t.Fatalf("an aborted request failed over %d times", n)
		}
		// The simulator notices a cancel when its handler next writes or
		// waits: read the records once every handler has returned.
		healthWaitRecords(t, up, "every aborted request to end upstream", func(recs []sim.RequestRecord) bool {
			for _, r := range recs {
				if r.End.IsZero() {
					return false
				}
			}
			return len(recs) == 6
		})
		for i, r := range up.Requests() {
			if !r.Canceled || r.Deltas == 9 {
				t.Fatalf("request %d was not cut short by its client: %+v", i, r)
			}
		}
	})

	// A hedge that answers 400 decides the request; the attempt it cut
	// short on the slow provider did not fail, and must not count.
	t.Run("attempt cancelled by a sibling's 400", func(t *testing.T) {
		bad := newUpstream(t, sim.Config{Faults: []sim.Fault{{Kind: sim.FaultStatus, Status: 400, Delay: caddyDur(300 * time.Millisecond)}}})
		slow := newUpstream(t, sim.Config{FirstToken: caddyDur(time.Minute)})
		p := startProxy(t, provider("bad", bad, "priority 0")+provider("slow", slow, "priority 1")+
			"hedge {\n after 50ms\n budget 100\n}\nretry {\n same_provider 0\n}\n"+healthCooldown(1, "30s"))
		for i := range 3 {
			_, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test"))
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode != 400 {
				t.Fatalf("request %d: %v, want the 400 passed through", i, err)
			}
		}
		if n := completions(slow); n != 3 {
			t.Fatalf("the hedge reached the slow provider %d times, want 3", n)
		}
		v := healthWaitAdmin(t, p, "slow", slow, "the cancelled attempts to settle", func(v *healthView) bool { return v != nil && v.InFlight == 0 })
		if v.State != "closed" || v.ConsecutiveFailures != 0 || v.Failures != 0 {
			t.Fatalf("the provider whose attempts were cut short by a 400: %+v, want closed", *v)
		}
	})
}
