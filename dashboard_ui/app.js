"use strict";
// The llm_hedge live dashboard: reads ../providers, ../recent and ../series
// (relative, so it works on the admin API and under llm_hedge_dashboard),
// redraws every 2 s. Nothing here is fetched from outside.
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
  const keyMax = new Map(); // largest remaining seen per key fingerprint, for the bars
  const charts = new Map();

  function ago(iso) {
    const s = Math.round((new Date(iso) - Date.now()) / 1000);
    return s > 0 ? s + " s" : "now";
  }
  function ms(v) { return v == null ? "–" : Math.round(v) + " ms"; }

  // routeCell: adaptive routing's cost of the provider now and its share
  // of its priority tier's first attempts over the last ~10 s.
  function routeCell(p) {
    const r = p.routing;
    if (!r) return el("td", {}, "–");
    const why = "recent first event " + ms(r.first_event_est_ms) + ", failure rate " + Math.round(r.failure_rate * 100) +
      "%, quota left " + Math.round(r.quota_left * 100) + "%, weight " + r.weight + ", priority " + r.priority;
    return el("td", { className: "route", title: why }, ms(r.cost_ms) + " / " + Math.round(r.share * 100) + "%");
  }

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
    const focused = document.activeElement && document.activeElement.dataset.provider;
    tbody.replaceChildren();
    for (const p of views) {
      const tr = el("tr", { className: "provider" });
      tr.dataset.provider = p.name;
      tr.dataset.state = p.state;
      const act = activity(bySeries.get(p.name));
      tr.append(
        el("th", { scope: "row", title: p.url }, p.name + (p.vendor ? " (" + p.vendor + ")" : "")),
        el("td", {}, stateCell(p)),
        el("td", { className: "in-flight" }, p.in_flight + " / " + (p.max_in_flight ? p.max_in_flight : "∞")),
        el("td", {}, ms(p.first_event_p50_ms) + " / " + ms(p.first_event_p95_ms)),
        el("td", { title: "the hedge delay last armed after a first attempt on this provider" }, ms(p.hedge_delay_ms)),
        routeCell(p),
        el("td", {}, p.requests + " / " + p.failures),
        el("td", { className: "per-minute" }, `${act.ok} / ${act.lost} / ${act.error} / ${act.other}`),
        el("td", { className: "hedges" }, act.hedges + " / " + act.hedges_won),
        el("td", {}, p.hedges_won + " / " + p.hedges_lost),
        el("td", { className: "continuations" }, act.continuations_ok + " / " + act.continuations),
        keysCell(p));
      const td = el("td");
      if (resets) {
        const b = el("button", { type: "button", className: "reset", textContent: "Reset", ariaLabel: "Reset provider " + p.name });
        b.dataset.provider = p.name;
        b.addEventListener("click", () => reset(p.name, b));
        td.append(b);
        if (focused === p.name) queueMicrotask(() => b.focus());
      } else {
        td.textContent = "read-only";
      }
      tr.append(td);
      tbody.append(tr);
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

  function drawSeries(all) {
    const box = $("#charts");
    for (const s of all) {
      const x = s.ok.map((_, i) => s.start + i * s.step_s);
      const data = [x, s.ok, s.lost, s.error, s.other, s.p50_ms, s.p95_ms];
      let c = charts.get(s.provider);
      if (!c) {
        const fig = el("figure", { className: "chart", ariaLabel: "Attempts and first-event latency of " + s.provider });
        fig.append(el("h3", {}, s.provider));
        box.append(fig);
        const width = Math.max(Math.min(fig.clientWidth || 320, 520), 280);
        c = new uPlot({
          width, height: 180,
          scales: { ms: { auto: true } },
          series: [{}, { label: "ok", stroke: "#2e8b57" }, { label: "lost", stroke: "#8a939c" },
            { label: "error", stroke: "#d0342c" }, { label: "other", stroke: "#b8860b" },
            { label: "p50 ms", stroke: "#1a73e8", scale: "ms", dash: [4, 3] }, { label: "p95 ms", stroke: "#6a1b9a", scale: "ms", dash: [4, 3] }],
          axes: [{}, { label: "attempts" }, { side: 1, scale: "ms", label: "ms", grid: { show: false } }],
        }, data, fig);
        charts.set(s.provider, c);
      } else {
        c.setData(data);
      }
    }
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
      const [providers, recent, series] = await Promise.all([getJSON("providers"), getJSON("recent"), getJSON("series")]);
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
