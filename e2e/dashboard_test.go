package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/llmhedge/caddy-llm-hedge/sim"
)

// dashboardChromium is the path of a Chromium, installed with apt when
// missing and the test runs as root; the test is skipped when there is none.
func dashboardChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getuid() == 0 {
		// A fresh machine's package lists may be empty or stale: update once
		// when the first install fails.
		install := func() ([]byte, error) {
			cmd := exec.Command("apt-get", "install", "-y", "chromium")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			return cmd.CombinedOutput()
		}
		out, err := install()
		if err != nil {
			if uout, uerr := exec.Command("apt-get", "update").CombinedOutput(); uerr != nil {
				t.Logf("apt-get update: %v\n%s", uerr, uout)
			}
			out, err = install()
		}
		if err == nil {
			if p, err := exec.LookPath("chromium"); err == nil {
				return p
			}
		}
		t.Logf("apt-get install chromium: %v\n%s", err, out)
	}
	t.Skip("no chromium, and it could not be installed")
	return ""
}

// The live dashboard in a real browser, mounted in a site with
// llm_hedge_dashboard (Caddy's admin endpoint refuses a browser's top-level
// navigation, which carries Sec-Fetch-Mode and no Origin: TestDashboardAdmin
// reads the same page and JSON there without a browser): every provider has a row, a
// provider that starts answering 503 turns open on the page, its reset
// button closes it, a hedged request's timeline shows its two attempts,
// every control has a name and is reached by Tab, and a narrow window
// scrolls inside the tables rather than the page. The README's screenshot
// is TestDashboardDemo's, of the demo's traffic.
func TestDashboardInBrowser(t *testing.T) {
	chromium := dashboardChromium(t)
	slow := newUpstream(t, sim.Config{FirstToken: caddyDur(2 * time.Second)})
	fast := newUpstream(t, sim.Config{})
	spare := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("slow", slow, "priority 0")+provider("fast", fast, "priority 1")+
		provider("spare", spare, "priority 2", "max_in_flight 4")+"hedge {\n after 200ms\n }\n"+healthCooldown(1, "60s"),
		"route /llm_hedge/* {\n llm_hedge_dashboard {\n resets on\n }\n }",
		"route /readonly/* {\n llm_hedge_dashboard\n }")

	// A hedged request: slow is raced by fast after 200ms, fast wins.
	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	for range 3 { // some traffic for the charts
		if _, err := streamOpenAI(ctxTimeout(t, 10*time.Second), openaiClient(p, "k"), openaiParams("gpt-test")); err != nil {
			t.Fatal(err)
		}
	}

	ctx := dashboardBrowser(t, chromium, 1280, 1000, 90*time.Second)

	var mu sync.Mutex
	var consoleErrors []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			consoleErrors = append(consoleErrors, "exception: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == "error" {
				consoleErrors = append(consoleErrors, "console.error")
			}
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				consoleErrors = append(consoleErrors, "log: "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	eval := func(expr string, into any) {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if err := json.Unmarshal(v, into); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	rowIs := func(name, state string) chromedp.Action[chromedp.Void] {
		expr := fmt.Sprintf(`(document.querySelector('tr.provider[data-provider=%q]')||{dataset:{}}).dataset.state === %q`, name, state)
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(3*time.Second))(ctx, tg)
			return chromedp.Void{}, err
		}
	}

	do("load the page", chromedp.Navigate(p.URL+"/llm_hedge/ui/"), chromedp.WaitVisible(chromedp.CSS("tr.provider")))
	var names []string
	eval(`[...document.querySelectorAll('tr.provider')].map(r => r.dataset.provider)`, &names)
	if strings.Join(names, ",") != "fast,slow,spare" {
		t.Fatalf("provider rows %v, want fast, slow, spare", names)
	}
	var slowDelay string // hedge after 200ms, armed after slow's first attempt
	eval(`document.querySelector('tr.details[data-provider="slow"] .hedge-delay').textContent`, &slowDelay)
	if slowDelay != "200 ms" {
		t.Fatalf("slow's hedge delay on the page: %q, want 200 ms", slowDelay)
	}
	// In flight against max_in_flight; the hedges fast won; slow's lost
	// attempts of the last minute (every request raced slow).
	var cells map[string]string
	eval(`(() => { const c = (p, k) => document.querySelector('tr.provider[data-provider="' + p + '"] .' + k).textContent;
		return { slowFlight: c("slow", "in-flight"), spareFlight: c("spare", "in-flight"), fastHedges: c("fast", "hedges"),
			slowHedges: c("slow", "hedges"), slowMinute: c("slow", "per-minute"), fastContinuations: c("fast", "continuations") } })()`, &cells)
	var won, started, lost int
	fmt.Sscanf(cells["fastHedges"], "%d / %d", &started, &won)
	fmt.Sscanf(cells["slowMinute"], "0 / %d / 0 / 0", &lost)
	if cells["slowFlight"] != "0 / ∞" || cells["spareFlight"] != "0 / 4" || started < 1 || won != started ||
		cells["slowHedges"] != "0 / 0" || lost != started || cells["fastContinuations"] != "0 / 0" {
		t.Fatalf("provider cells: %v", cells)
	}

	// slow starts answering 503: one failure opens it (cooldown failures 1).
	if err := slow.SetFaults([]sim.Fault{{Kind: sim.FaultStatus, Status: 503}}); err != nil {
		t.Fatal(err)
	}
	if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "k"), anthropicParams("claude-test")); err != nil {
		t.Fatal(err)
	}
	do("slow's row turns open within 3 s of its breaker opening", rowIs("slow", "open"))
	do("the reset button closes slow", chromedp.Click(chromedp.CSS(`button.reset[data-provider="slow"]`)), rowIs("slow", "closed"))

	// The hedged request's timeline: two attempt bars.
	do("open the hedged request", chromedp.Click(chromedp.CSS(`tr.request.hedged button`)), chromedp.WaitVisible(chromedp.CSS(`tr.chain .attempt-bar`)))
	var bars int
	eval(`document.querySelectorAll('tr.chain .attempt-bar').length`, &bars)
	if bars != 2 {
		t.Fatalf("the hedged request's timeline has %d attempt bars, want 2", bars)
	}
	// Accessibility: every control has a name, and Tab reaches each one.
	do("stop refreshing, so the tab order stays put", chromedp.Click(chromedp.CSS(`#live`)))
	var unnamed []string
	eval(`[...document.querySelectorAll('button,input,select,a[href]')].filter(e => {
		const name = (e.ariaLabel || (e.labels && e.labels[0] && e.labels[0].textContent) || e.textContent || "").trim();
		return name === "";
	}).map(e => e.outerHTML)`, &unnamed)
	if len(unnamed) > 0 {
		t.Fatalf("controls without an accessible name: %v", unnamed)
	}
	var controls int
	eval(`(() => { document.querySelectorAll('button,input,select,a[href]').forEach((e, i) => e.dataset.a11y = i);
		document.activeElement.blur(); return document.querySelectorAll('[data-a11y]').length })()`, &controls)
	reached := map[string]bool{}
	for range controls + 5 {
		do("Tab", chromedp.KeyEvent(kb.Tab))
		var id string
		eval(`document.activeElement.dataset.a11y || ""`, &id)
		if id != "" {
			reached[id] = true
		}
	}
	if len(reached) != controls {
		t.Fatalf("Tab reached %d of %d controls", len(reached), controls)
	}

	// A narrow window (a laptop split screen): nothing wider than the page.
	do("narrow the window", chromedp.EmulateViewport(640, 900))
	var overflow int
	eval(`document.documentElement.scrollWidth - window.innerWidth`, &overflow)
	if overflow > 0 {
		t.Fatalf("at 640 px the page is %d px too wide", overflow)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(consoleErrors) > 0 {
		t.Fatalf("console errors: %v", consoleErrors)
	}
}

// dashboardScreenshot writes the page to docs/img/dashboard.png when
// LLM_HEDGE_SCREENSHOT=1 (a test run leaves the checkout as it was),
// else to the test's temporary directory.
func dashboardScreenshot(t *testing.T, png []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "dashboard.png")
	if os.Getenv("LLM_HEDGE_SCREENSHOT") == "1" {
		path = filepath.Join("..", "docs", "img", "dashboard.png") // the test runs in e2e/
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// The admin endpoint serves the page and the JSON it reads; a site mount
// without `resets on` refuses a reset; the ring and the series hold the
// requests the proxy served.
func TestDashboardAdmin(t *testing.T) {
	u := newUpstream(t, sim.Config{})
	p := startProxy(t, provider("only", u, "max_in_flight 3"), "route /readonly/* {\n llm_hedge_dashboard\n }")
	for range 2 {
		if _, err := streamAnthropic(ctxTimeout(t, 10*time.Second), anthropicClient(p, "sk-dash-secret"), anthropicParams("claude-dash")); err != nil {
			t.Fatal(err)
		}
	}
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, asset := range []string{"", "app.js", "uPlot.iife.min.js", "uPlot.min.css", "LICENSE.uPlot"} {
		if code, _ := get(p.AdminURL + "/llm_hedge/ui/" + asset); code != http.StatusOK {
			t.Fatalf("admin ui/%s: %d", asset, code)
		}
	}
	var recent []struct {
		Site, Dialect, Model, Provider, Outcome string
		Attempts                                int
		Chain                                   []struct{ Provider, Outcome string }
	}
	code, body := get(p.AdminURL + "/llm_hedge/recent")
	if err := json.Unmarshal([]byte(body), &recent); code != http.StatusOK || err != nil {
		t.Fatalf("recent: %d %v %s", code, err, body)
	}
	// The ring is process-wide: other tests' requests may follow ours.
	mine := 0
	for _, r := range recent {
		if r.Model == "claude-dash" {
			mine++
			if r.Provider != "only" || r.Outcome != "success" || r.Dialect != "anthropic" || len(r.Chain) != 1 || r.Chain[0].Outcome != "request_success" {
				t.Fatalf("recent row %+v", r)
			}
		}
	}
	if mine != 2 {
		t.Fatalf("%d of our 2 requests in /llm_hedge/recent: %s", mine, body)
	}
	var series []struct {
		Provider string
		OK       []int
	}
	code, body = get(p.AdminURL + "/llm_hedge/series")
	if err := json.Unmarshal([]byte(body), &series); code != http.StatusOK || err != nil {
		t.Fatalf("series: %d %v %s", code, err, body)
	}
	ok := 0
	for _, s := range series {
		if s.Provider == "only" {
			for _, n := range s.OK {
				ok += n
			}
		}
	}
	if ok < 2 {
		t.Fatalf("series of only: %d ok attempts, want at least 2: %s", ok, body)
	}
	var views []providerLimitView
	code, body = get(p.AdminURL + "/llm_hedge/providers")
	if err := json.Unmarshal([]byte(body), &views); code != http.StatusOK || err != nil {
		t.Fatalf("providers: %d %v %s", code, err, body)
	}
	views = slices.DeleteFunc(views, func(v providerLimitView) bool { return v.Name != "only" })
	if len(views) != 1 || views[0].MaxInFlight != 3 || views[0].InFlight != 0 {
		t.Fatalf("providers: %s, want only with in_flight 0 of max_in_flight 3", body)
	}
	_, recentBody := get(p.AdminURL + "/llm_hedge/recent")
	for _, secret := range []string{"sk-dash-secret", `"hello"`, sim.DefaultText[:12]} {
		if strings.Contains(body+recentBody, secret) {
			t.Fatalf("the dashboard shows a key, the prompt or the answer (%q)", secret)
		}
	}

	if code, body := get(p.URL + "/readonly/ui/config.json"); code != http.StatusOK || !strings.Contains(body, `"resets":false`) {
		t.Fatalf("read-only config: %d %s", code, body)
	}
	resp, err := http.Post(p.URL+"/readonly/providers/only/reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a reset through a read-only mount: %d, want 403", resp.StatusCode)
	}
}

// providerLimitView is a provider's in-flight attempts and its limit, as
// /llm_hedge/providers shows them.
type providerLimitView struct {
	Name        string
	InFlight    int64 `json:"in_flight"`
	MaxInFlight int64 `json:"max_in_flight"`
}

// dashboardBrowser starts headless Chromium at a window of w x h and
// returns its context, bounded by d. A start that fails (Chromium exiting
// before its DevTools endpoint, seen once on a loaded CI machine) is tried
// again, twice at most, each time in a fresh profile.
func dashboardBrowser(t *testing.T, chromium string, w, h int, d time.Duration) context.Context {
	t.Helper()
	var err error
	for try := 1; try <= 3; try++ {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox,
			chromedp.WindowSize(w, h), chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(actx)
		if _, err = chromedp.Run(ctx, chromedp.Navigate("about:blank")); err == nil {
			ctx, cancelTimeout := context.WithTimeout(ctx, d)
			t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
			return ctx
		}
		cancel()
		cancelAlloc()
		t.Logf("chromium start %d: %v", try, err)
	}
	t.Fatalf("chromium did not start: %v", err)
	return nil
}
