package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/llmhedge/caddy-llm-hedge/bench/demo"
)

// loadDemo loads ../Caddyfile.demo in this process, its loopback ports
// replaced by free ones and its log sent to a file, and returns the
// proxy's and the dashboard's base URLs.
func loadDemo(t *testing.T) (proxyURL, dashboardURL string) {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "Caddyfile.demo"))
	if err != nil {
		t.Fatal(err)
	}
	// Every address the demo names (admin, dashboard, proxy, the three
	// simulators) moves to a free port: a second Caddy on a fixed port
	// would silently share its traffic (SO_REUSEPORT).
	ports := map[string]int{}
	var pairs []string
	for _, addr := range regexp.MustCompile(`(?:127\.0\.0\.1|localhost):\d+`).FindAllString(string(src), -1) {
		if _, ok := ports[addr]; ok {
			continue
		}
		ports[addr] = freePort(t)
		pairs = append(pairs, addr, fmt.Sprintf("127.0.0.1:%d", ports[addr]))
	}
	// The site of the dashboard and the site of the proxy, by what they serve.
	var proxyAddr, dashAddr string
	sites := regexp.MustCompile(`(?m)^http://(\S+) \{`).FindAllStringSubmatchIndex(string(src), -1)
	for i, m := range sites {
		end := len(src)
		if i+1 < len(sites) {
			end = sites[i+1][0]
		}
		body, addr := string(src[m[1]:end]), string(src[m[2]:m[3]])
		switch {
		case strings.Contains(body, "llm_hedge_dashboard"):
			dashAddr = addr
		case strings.Contains(body, "llm_hedge {"):
			proxyAddr = addr
		}
	}
	if ports[proxyAddr] == 0 || ports[dashAddr] == 0 || len(ports) < 6 {
		t.Fatalf("Caddyfile.demo: proxy site %q, dashboard site %q, addresses %v", proxyAddr, dashAddr, ports)
	}
	pairs = append(pairs, "level WARN", "output file "+filepath.Join(t.TempDir(), "caddy.log")+"\n\t\tlevel WARN")
	cfg := strings.NewReplacer(pairs...).Replace(string(src))
	js, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cfg), nil)
	if err != nil {
		t.Fatalf("adapt: %v\n%s", err, cfg)
	}
	for _, w := range warn {
		t.Logf("adapt warning: %s", w.String())
	}
	if err := caddy.Load(js, true); err != nil {
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	for _, addr := range []string{proxyAddr, dashAddr} {
		waitListening(t, fmt.Sprintf("127.0.0.1:%d", ports[addr]))
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[proxyAddr]), fmt.Sprintf("http://127.0.0.1:%d", ports[dashAddr])
}

// The dashboard an operator keeps open, on the demo's own configuration
// and load (Caddyfile.demo and bench/demo, as `make -f xcaddy.mk demo`
// runs them): the page waits for the demo's events (requests, the
// first-event quantiles, a failover, a hedge and a continuation in the
// last minute's rescues, the flaky simulator's breaker opening and, once
// its outage is over, closing in the feed), then checks the overview strip, that a 1280-px window needs no
// sideways scroll (the provider table included), and keyboard reach; with
// LLM_HEDGE_SCREENSHOT=1 it writes the README's screenshot (1280x800) to
// docs/img/dashboard.png.
func TestDashboardDemo(t *testing.T) {
	chromium := dashboardChromium(t)
	proxyURL, dashboardURL := loadDemo(t)

	loadCtx, stopLoad := context.WithCancel(context.Background())
	var loadDone sync.WaitGroup
	loadDone.Go(func() { demo.Run(loadCtx, demo.Options{URL: proxyURL}) })
	t.Cleanup(func() { stopLoad(); loadDone.Wait() })

	ctx := dashboardBrowser(t, chromium, 1280, 800, 4*time.Minute)
	var mu sync.Mutex
	var pageErrors []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			pageErrors = append(pageErrors, "exception: "+ev.ExceptionDetails.Text)
		case *runtime.EventConsoleAPICalled:
			if ev.Type == "error" {
				pageErrors = append(pageErrors, "console.error")
			}
		}
	}); err != nil {
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
	// until waits for the page's own state: a bound for a failure, not a
	// margin for success (the demo's first outage starts with it and lasts
	// 25 s; a probe then finds the flaky simulator back).
	until := func(expr string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			_, err := chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(3*time.Minute))(ctx, tg)
			return chromedp.Void{}, err
		}
	}
	const metric = `(m => (document.querySelector('.card[data-metric="' + m + '"]') || {dataset: {}}).dataset.value || "")`
	do("load the page at 1280x800", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(dashboardURL+"/llm_hedge/ui/"),
		chromedp.WaitVisible(chromedp.CSS("tr.provider")))
	// What the page shows of the demo's events; on a timeout the test
	// says which of them never came.
	const state = `(() => { const v = ` + metric + `;
		return {requests: v("requests"), success: v("success"), firstEvent: v("first-event"),
			kinds: (document.querySelector('.card[data-metric="rescued"]').dataset.kinds || "").split(" "),
			charts: document.querySelectorAll("#charts figure").length,
			breakerCycle: document.querySelector('#feed li[data-kind="breaker_closed"][data-provider="sim-flaky"] ~ li[data-kind="breaker_opened"][data-provider="sim-flaky"]') !== null} })()`
	if err := chromedp.Do(ctx, until(`(s => parseInt(s.requests) > 0 && s.success !== "" && s.firstEvent !== "" &&
			["failover", "hedge", "continuation"].every(k => s.kinds.includes(k)) && s.charts === 3 && s.breakerCycle)(`+state+`)`)); err != nil {
		var seen map[string]any
		eval(state, &seen)
		t.Fatalf("the demo's events on the page: %v; the page shows %v", err, seen)
	}

	// The overview strip: five figures, the spend's honest without prices.
	var strip map[string]string
	eval(`(() => { const v = `+metric+`; const o = {};
		for (const c of document.querySelectorAll('.strip .card')) o[c.dataset.metric] = c.querySelector('.value').textContent;
		o.requestsValue = v("requests"); return o })()`, &strip)
	if len(strip) != 6 || strip["requests"] == "" || !strings.HasSuffix(strip["success"], "%") || !strings.HasSuffix(strip["first-event"], " ms") || strip["spend"] == "" {
		t.Fatalf("the overview strip: %v", strip)
	}
	t.Logf("overview: %v", strip)

	// 1280 px: no sideways scroll, of the page nor of the provider table.
	var widths map[string]int
	eval(`(() => { const s = document.scrollingElement, p = document.querySelector("#providers-scroll");
		return { page: s.scrollWidth, pageClient: s.clientWidth, table: p.scrollWidth, tableClient: p.clientWidth } })()`, &widths)
	if widths["page"] > widths["pageClient"] || widths["table"] > widths["tableClient"] {
		t.Fatalf("at 1280 px something scrolls sideways: %v", widths)
	}

	var top bool
	eval(`window.scrollTo(0, 0) || window.scrollY === 0`, &top)
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	dashboardScreenshot(t, shot)

	// Keyboard reach: Tab from the top reaches the refresh switch, each
	// provider's details and reset buttons and a request's timeline, each
	// with a visible focus; Enter opens a provider's details.
	do("stop refreshing, so the tab order stays put", chromedp.Click(chromedp.CSS(`#live`)))
	var want int
	eval(`(() => { document.activeElement.blur();
		const c = document.querySelectorAll('#live, button.more, button.reset, tr.request button');
		c.forEach((e, i) => e.dataset.reach = i); return c.length })()`, &want)
	reached := map[string]bool{}
	for range want + 10 {
		do("Tab", chromedp.KeyEvent(kb.Tab))
		var focus struct {
			Reach, Outline string
		}
		eval(`(() => { const e = document.activeElement; return { reach: e.dataset.reach || "", outline: getComputedStyle(e).outlineStyle } })()`, &focus)
		if focus.Reach != "" {
			if focus.Outline == "none" {
				t.Fatalf("control %s has no visible focus", focus.Reach)
			}
			reached[focus.Reach] = true
		}
		if len(reached) == want {
			break
		}
	}
	if len(reached) != want {
		t.Fatalf("Tab reached %d of %d controls", len(reached), want)
	}
	var expanded bool
	do("Enter on sim-flaky's details", chromedp.Focus(chromedp.CSS(`tr.provider[data-provider="sim-flaky"] button.more`)), chromedp.KeyEvent(kb.Enter))
	eval(`!document.querySelector('tr.details[data-provider="sim-flaky"]').hidden &&
		document.querySelector('tr.provider[data-provider="sim-flaky"] button.more').ariaExpanded === "true"`, &expanded)
	if !expanded {
		t.Fatal("Enter on a provider's Details did not show its details")
	}

	mu.Lock()
	defer mu.Unlock()
	if len(pageErrors) > 0 {
		t.Fatalf("page errors: %v", pageErrors)
	}
}
