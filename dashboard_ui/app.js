"use strict";
// The llm_hedge live dashboard: reads ../overview, ../feed, ../providers,
// ../recent and ../series (relative, so it works on the admin API and under
// llm_hedge_dashboard), redraws every 2 s. Nothing here is fetched from
// outside.
(function () {
  const api = (p) => new URL("../" + p, location.href).toString();
  const $ = (sel) => document.querySelector(sel);
  const el = (tag, props, ...kids) => {
    const e = document.createElement(tag);
    Object.assign(e, props || {});
    for (const k of kids) e.append(k);
    return e;
  };
  let resets = true;
  const open = new Set(); // requests whose timeline is shown, by time+site+model
  const details = new Set(); // providers whose details row is shown
  const keyMax = new Map(); // largest remaining seen per key fingerprint, for the bars
  const charts = new Map();

  function ago(iso) {
    const s = Math.round((new Date(iso) - Date.now()) / 1000);
    return s > 0 ? s + " s" : "now";
  }
  function ms(v) { return v == null ? "–" : Math.round(v) + " ms"; }

  function stateCell(p) {
    let text = p.state;
    if (p.state === "open" && p.open_until) text = "open, next probe in " + ago(p.open_until);
    if (p.state === "half_open") text = "half-open (probing)";
    return el("span", { className: "state state-" + p.state, textContent: text });
  }

  function keysCell(p) {
    const td = el("td");
    for (const k of p.keys || []) {
      const row = el("div", { className: "key" }, k.fingerprint + " " + k.state);
      for (const [what, left, reset] of [["requests", k.requests_remaining, k.requests_reset], ["tokens", k.tokens_remaining, k.tokens_reset]]) {
        if (left == null) continue;
        const id = k.fingerprint + what;
        const max = Math.max(keyMax.get(id) || 0, left, 1);
        keyMax.set(id, max);
        const label = `${what} remaining for key ${k.fingerprint}: ${left}` + (reset ? `, resets in ${ago(reset)}` : "");
        row.append(el("meter", { min: 0, max, value: left, title: label, ariaLabel: label }));
      }
      td.append(row);
    }
    return td;
  }

  async function reset(name, button) {
    button.disabled = true;
    try {
      // A same-origin fetch: the browser sends Sec-Fetch-Site: same-origin
      // and this page's Origin, which a site mount requires of a reset.
      const r = await fetch(api("providers/" + encodeURIComponent(name) + "/reset"),
        { method: "POST", mode: "same-origin", credentials: "same-origin" });
      $("#status").textContent = r.ok ? `reset ${name}` : `reset ${name} failed: ${r.status}`;
    } catch (e) {
      $("#status").textContent = `reset ${name} failed`;
    }
    button.disabled = false;
    refresh();
  }

  // activity sums a provider's series: attempts by outcome in the last
  // minute (the last 12 steps of 5 s), hedges and continuations in 15 min.
  function activity(s) {
    const out = { ok: 0, lost: 0, error: 0, other: 0, hedges: 0, hedges_won: 0, continuations: 0, continuations_ok: 0 };
    if (!s) return out;
    const perMinute = Math.round(60 / s.step_s);
    for (const k of ["ok", "lost", "error", "other"]) {
      for (const n of s[k].slice(-perMinute)) out[k] += n;
    }
    for (const k of ["hedges", "hedges_won", "continuations", "continuations_ok"]) out[k] = s[k] || 0;
    return out;
  }

  function drawProviders(views, series) {
    const bySeries = new Map((series || []).map((s) => [s.provider, s]));
    const tbody = $("#providers tbody");
    const focused = document.activeElement && document.activeElement.dataset.control;
    tbody.replaceChildren();
    for (const p of views) {
      const tr = el("tr", { className: "provider" });
      tr.dataset.provider = p.name;
      tr.dataset.state = p.state;
      const act = activity(bySeries.get(p.name));
      const name = el("th", { scope: "row", title: p.url }, p.name);
      if (p.vendor) name.append(el("span", { className: "vendor" }, p.vendor));
      tr.append(
        name,
        el("td", { className: "state-cell" }, stateCell(p)),
        el("td", { className: "in-flight num" }, p.in_flight + " / " + (p.max_in_flight ? p.max_in_flight : "∞")),
        el("td", { className: "num" }, ms(p.first_event_p50_ms) + " / " + ms(p.first_event_p95_ms)),
        el("td", { className: "per-minute num" }, `${act.ok} / ${act.lost} / ${act.error} / ${act.other}`),
        el("td", { className: "hedges num" }, act.hedges + " / " + act.hedges_won),
        el("td", { className: "continuations num" }, act.continuations_ok + " / " + act.continuations));
      const shown = details.has(p.name);
      const actions = el("div", { className: "actions" });
      const more = el("button", { type: "button", className: "more", textContent: shown ? "Less" : "Details",
        ariaExpanded: String(shown), ariaLabel: (shown ? "Hide" : "Show") + " the details of provider " + p.name });
      more.dataset.control = "more:" + p.name;
      more.addEventListener("click", () => {
        details.has(p.name) ? details.delete(p.name) : details.add(p.name);
        more.dataset.control = "more:" + p.name;
        drawProviders(views, series);
      });
      actions.append(more);
      if (focused === more.dataset.control) queueMicrotask(() => more.focus());
      if (resets) {
        const b = el("button", { type: "button", className: "reset", textContent: "Reset", ariaLabel: "Reset provider " + p.name });
        b.dataset.provider = p.name;
        b.dataset.control = "reset:" + p.name;
        b.addEventListener("click", () => reset(p.name, b));
        actions.append(b);
        if (focused === b.dataset.control) queueMicrotask(() => b.focus());
      } else {
        actions.append(el("span", { title: "resets are not enabled on this mount" }, "read-only"));
      }
      tr.append(el("td", {}, actions));
      tbody.append(tr);

      // The details on demand, always in the page (hidden until asked).
      const dl = el("dl");
      const item = (label, value, cls) => dl.append(el("div", {}, el("dt", {}, label), el("dd", { className: cls || "" }, value)));
      item("Hedge delay (last armed)", ms(p.hedge_delay_ms), "hedge-delay");
      const r = p.routing;
      item("Route cost / share of its tier", r ? ms(r.cost_ms) + " / " + Math.round(r.share * 100) + "%" : "–", "route");
      if (r) item("Why that cost", "recent first event " + ms(r.first_event_est_ms) + ", failure rate " + Math.round(r.failure_rate * 100) +
        "%, quota left " + Math.round(r.quota_left * 100) + "%, weight " + r.weight + ", priority " + r.priority);
      item("Requests / failures (since start)", p.requests + " / " + p.failures);
      item("Races won / lost (since start)", p.hedges_won + " / " + p.hedges_lost);
      item("Continuations completed / tried (15 min)", act.continuations_ok + " / " + act.continuations);
      if ((p.keys || []).length) {
        const keys = keysCell(p);
        dl.append(el("div", {}, el("dt", {}, "Keys"), el("dd", {}, ...keys.childNodes)));
      }
      item("URL", p.url || "–");
      const det = el("tr", { className: "details", hidden: !shown }, el("td", { colSpan: 8 }, dl));
      det.dataset.provider = p.name;
      tbody.append(det);
    }
  }

  function timeline(r) {
    const total = Math.max(r.total_ms, ...r.chain.map((a) => a.end_ms), 1);
    const list = el("ol", { className: "timeline", ariaLabel: "Attempts of this request on a time axis of " + total + " ms" });
    for (const a of r.chain) {
      const kind = a.outcome === "hedge_winner" || a.outcome === "request_success" ? "won"
        : a.outcome === "hedge_loser_cancelled" ? "lost" : a.outcome ? "failed" : "";
      const bar = el("div", { className: "attempt-bar " + kind });
      bar.style.left = (100 * a.start_ms / total) + "%";
      bar.style.width = (100 * Math.max(a.end_ms - a.start_ms, 0) / total) + "%";
      const why = [a.provider, a.reason, "at " + a.start_ms + " ms",
        a.first_event_ms ? "first event +" + a.first_event_ms + " ms" : "no first event",
        (a.outcome || "unfinished") + (a.error_class ? " (" + a.error_class + (a.status ? " " + a.status : "") + ")" : "")].join(", ");
      const li = el("li", {}, bar);
      if (a.first_event_ms) {
        const fe = el("div", { className: "first-event" });
        fe.style.left = (100 * (a.start_ms + a.first_event_ms) / total) + "%";
        li.append(fe);
      }
      li.append(el("span", { className: "label" }, why));
      list.append(li);
    }
    return list;
  }

  function drawRecent(rows) {
    const tbody = $("#recent tbody");
    const focused = document.activeElement && document.activeElement.dataset.request;
    tbody.replaceChildren();
    for (const r of rows) {
      const id = r.time + "|" + r.site + "|" + r.model + "|" + r.total_ms;
      const shown = open.has(id);
      const b = el("button", { type: "button", textContent: new Date(r.time).toLocaleTimeString(), ariaExpanded: String(shown),
        ariaLabel: (shown ? "Hide" : "Show") + " the attempts of the request at " + new Date(r.time).toLocaleTimeString() });
      b.dataset.request = id;
      b.addEventListener("click", () => { shown ? open.delete(id) : open.add(id); drawRecent(rows); });
      if (focused === id) queueMicrotask(() => b.focus());
      const tr = el("tr", { className: "request" + (r.hedged ? " hedged" : "") },
        el("td", {}, b), el("td", {}, r.site), el("td", {}, r.dialect), el("td", {}, r.model),
        el("td", {}, r.provider || "–"), el("td", {}, String(r.attempts)), el("td", {}, r.hedged ? "yes" : "no"),
        el("td", {}, r.outcome), el("td", {}, r.first_event_ms ? r.first_event_ms + " ms" : "–"),
        el("td", {}, r.input_tokens + " / " + r.output_tokens));
      tbody.append(tr);
      if (shown) tbody.append(el("tr", { className: "chain" }, el("td", { colSpan: 10 }, timeline(r))));
    }
  }

  // zoom is the x range the charts show: from the first step with any
  // attempt (at least 2 minutes back) to now, so a fresh process's
  // traffic is not a sliver at the right edge of 15 minutes.
  function zoom(all) {
    if (!all.length) return null;
    const s0 = all[0], n = s0.ok.length, end = s0.start + (n - 1) * s0.step_s;
    let first = n - 1;
    for (const s of all) {
      for (let i = 0; i < n; i++) {
        if (s.ok[i] || s.lost[i] || s.error[i] || s.other[i]) { first = Math.min(first, i); break; }
      }
    }
    return [Math.min(s0.start + first * s0.step_s, end - 120), end];
  }
  const hhmm = (u, vals) => vals.map((v) => new Date(v * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" }));

  let lastSeries = [];
  function drawSeries(all) {
    lastSeries = all;
    const box = $("#charts");
    const xr = zoom(all);
    if (xr) $("#charts-h").textContent = "Last " + Math.round((xr[1] - xr[0]) / 60) + " minutes";
    for (const s of all) {
      const x = s.ok.map((_, i) => s.start + i * s.step_s);
      const data = [x, s.ok, s.lost, s.error, s.other, s.p50_ms, s.p95_ms];
      let c = charts.get(s.provider);
      if (!c) {
        const fig = el("figure", { className: "chart", ariaLabel: "Attempts per 5 s and first-event latency of " + s.provider + " over the last 15 minutes" });
        fig.append(el("h3", {}, s.provider));
        box.append(fig);
        const width = Math.max(Math.min(fig.clientWidth || 320, 620), 260);
        const axis = { stroke: "#333", grid: { stroke: "#e4e7ea" }, ticks: { stroke: "#c9ced3" }, font: "11px system-ui, sans-serif", labelFont: "11px system-ui, sans-serif" };
        c = new uPlot({
          width, height: 150,
          legend: { show: false },
          cursor: { drag: { x: false, y: false } },
          scales: { x: { time: true, range: () => zoom(lastSeries) || [null, null] }, y: { range: (u, lo, hi) => [0, Math.max(hi, 4)] }, ms: { range: (u, lo, hi) => [0, Math.max(hi || 0, 100)] } },
          series: [{}, { label: "ok", stroke: "#2e8b57", width: 1.5 }, { label: "lost", stroke: "#8a939c" },
            { label: "error", stroke: "#d0342c", width: 1.5 }, { label: "other", stroke: "#b8860b" },
            { label: "p50 ms", stroke: "#1a73e8", scale: "ms", dash: [4, 3] }, { label: "p95 ms", stroke: "#6a1b9a", scale: "ms", dash: [4, 3] }],
          axes: [Object.assign({ space: 70, values: hhmm }, axis),
            Object.assign({ label: "attempts / 5 s", labelSize: 16, size: 36 }, axis),
            Object.assign({ side: 1, scale: "ms", label: "ms", labelSize: 16, size: 44 }, axis, { grid: { show: false } })],
        }, data, fig);
        charts.set(s.provider, c);
      } else {
        c.setData(data);
      }
    }
  }

  function fmtCount(n) {
    return n >= 10000 ? (n / 1000).toFixed(0) + "k" : n >= 1000 ? (n / 1000).toFixed(1) + "k" : String(n);
  }
  function usd(v) {
    return v >= 100 ? "$" + v.toFixed(0) : v >= 1 ? "$" + v.toFixed(2) : v > 0 ? "$" + v.toPrecision(2) : "$0";
  }

  function card(metric, value, sub, none) {
    const c = document.querySelector(`.card[data-metric="${metric}"]`);
    const v = c.querySelector(".value");
    v.textContent = value;
    v.classList.toggle("none", !!none);
    c.dataset.value = none ? "" : value;
    const s = c.querySelector(".sub");
    s.replaceChildren(...(Array.isArray(sub) ? sub : [sub]));
    s.title = s.textContent;
  }

  function sparkline(values) {
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("class", "spark");
    svg.setAttribute("viewBox", `0 0 ${values.length} 20`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("aria-hidden", "true");
    const max = Math.max(...values, 1);
    const line = document.createElementNS(NS, "polyline");
    line.setAttribute("points", values.map((v, i) => `${i},${(20 - 18 * v / max).toFixed(1)}`).join(" "));
    line.setAttribute("vector-effect", "non-scaling-stroke");
    svg.append(line);
    return svg;
  }

  function drawOverview(o) {
    const mins = Math.round(o.rate_window_s / 60);
    const per = mins === 1 ? "last minute" : `last ${mins} min`;
    const firstStep = Math.min(Math.max(o.requests.findIndex((n) => n > 0), 0), o.requests.length - 60);
    card("requests", String(o.requests_per_min), sparkline(o.requests.slice(firstStep)));
    card("success", o.success_rate == null ? "–" : (o.success_rate * 100).toFixed(o.success_rate >= 0.9995 || o.success_rate === 0 ? 0 : 1) + "%",
      o.success_rate == null ? "no requests, " + per : `of ${o.judged} in the ${per}`, o.success_rate == null);
    const kinds = ["failover", "hedge", "continuation", "translation"].filter((k) => (o.rescued || {})[k] > 0)
      .map((k) => `${k === "continuation" ? "continued" : k === "translation" ? "translated" : k} ${o.rescued[k]}`);
    card("rescued", String(o.rescued_per_min), kinds.length ? kinds.join(" · ") : per);
    document.querySelector('.card[data-metric="rescued"]').dataset.kinds =
      Object.keys(o.rescued || {}).filter((k) => o.rescued[k] > 0).join(" ");
    card("first-event", o.first_event_p50_ms == null ? "–" : Math.round(o.first_event_p50_ms) + " / " + Math.round(o.first_event_p95_ms) + " ms",
      `last ${Math.round(o.latency_window_s / 60)} min`, o.first_event_p50_ms == null);
    const sp = o.spend;
    if (sp) {
      const share = Math.round(sp.reliability_share * 100);
      card("spend", usd(sp.usd_per_hour), `${share}% on reliability · last ${Math.max(Math.round(sp.window_s / 60), 1)} min`);
    } else {
      card("spend", "no prices", `tokens / min: ${fmtCount(o.input_tokens_per_min)} in · ${fmtCount(o.output_tokens_per_min)} out`, true);
    }
  }

  const feedKinds = {
    breaker_opened: ["breaker opened", "bad"], breaker_closed: ["breaker closed", "good"], breaker_reset: ["breaker reset", "info"],
    key_disabled: ["key disabled", "bad"], key_reenabled: ["key re-enabled", "good"], reload: ["reload", "info"],
  };
  function drawFeed(items) {
    const list = $("#feed");
    list.replaceChildren();
    for (const t of items) {
      const [label, tone] = feedKinds[t.kind] || [t.kind.replace(/_/g, " "), "info"];
      const li = el("li", {}, el("time", { className: "when", dateTime: t.time }, new Date(t.time).toLocaleTimeString()),
        el("span", { className: "kind " + tone }, label), t.provider ? " " + t.provider : "");
      li.dataset.kind = t.kind;
      li.dataset.provider = t.provider || "";
      if (t.detail) li.append(el("span", { className: "detail" }, t.detail));
      list.append(li);
    }
    $("#feed-empty").hidden = items.length > 0;
  }

  async function getJSON(p) {
    const r = await fetch(api(p), { cache: "no-store" });
    if (!r.ok) throw new Error(p + ": " + r.status);
    return r.json();
  }

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const [overview, feed, providers, recent, series] = await Promise.all([getJSON("overview"), getJSON("feed"),
        getJSON("providers"), getJSON("recent"), getJSON("series")]);
      drawOverview(overview);
      drawFeed(feed);
      drawProviders(providers, series);
      drawRecent(recent);
      if (typeof uPlot !== "undefined") drawSeries(series);
      $("#status").textContent = "updated " + new Date().toLocaleTimeString();
    } catch (e) {
      $("#status").textContent = "update failed: " + e.message;
    } finally {
      busy = false;
    }
  }

  async function start() {
    try {
      const cfg = await getJSON("ui/config.json");
      resets = !!cfg.resets;
    } catch (e) { /* the admin API: resets allowed */ }
    refresh();
    setInterval(() => { if ($("#live").checked) refresh(); }, 2000);
  }
  start();
})();
