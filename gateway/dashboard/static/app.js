"use strict";
// mcpvisor dashboard. One EventSource (/admin/stream) brings the supervisor's
// events (numbered: the log's resume cursor) and the gateway's server rows
// (snapshot, then status frames). Everything that arrives is queued and
// applied once per animation frame, so a storm of events costs one render
// per frame, and only the rows that changed are touched.
(() => {
  const $ = (id) => document.getElementById(id);
  const LOG_KEEP = 5000;       // events kept in memory
  const LOG_SHOW = 250;        // newest matching events shown
  const LOG_SAVE = 500;        // events saved for a page reload
  const STORE = "mcpvisor.dashboard.v1";

  // ---- state -------------------------------------------------------------
  const servers = new Map();   // name → row data (the gateway's ServerReport)
  const rows = new Map();      // name → {tr, cells, canvas}
  const hist = new Map();      // name → [[calls, errors], …] per interval
  let historyLen = 120, intervalMs = 1000;
  let actions = {};
  let log = [];                // events, oldest first; gaps included
  let cursor = null;           // last sequence number seen
  const eventTypes = new Set();
  let channelMsgs = [];
  let gateway = {};

  // Queued input, applied by flush() once per frame.
  let pendingFrames = [];      // snapshot and status frames
  let pendingEvents = [];
  let scheduled = false, frameReq = 0, timerReq = 0;
  const dirty = { rows: new Set(), all: false, log: false, summary: false, pool: false, channels: false, charts: false };

  // ---- small helpers -----------------------------------------------------
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    if (attrs) for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  const isZeroTime = (t) => !t || t.startsWith("0001-01-01");
  function ago(t) {
    if (isZeroTime(t)) return "—";
    const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
    if (s < 60) return Math.floor(s) + "s ago";
    if (s < 3600) return Math.floor(s / 60) + "m ago";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m ago";
    return Math.floor(s / 86400) + "d ago";
  }
  function clock(t) {
    if (isZeroTime(t)) return "";
    const d = new Date(t);
    return d.toLocaleTimeString([], { hour12: false }) + "." + String(d.getMilliseconds()).padStart(3, "0");
  }
  function ms(v) {
    if (!v) return "—";
    return v < 10 ? v.toFixed(1) : String(Math.round(v));
  }
  function era(v) {
    if (!v) return "—";
    return v >= "2026-07-28" ? v + ": stateless era (server/discover)" : v + ": session era (initialize)";
  }
  function notice(text, isError) {
    const n = $("notice");
    n.textContent = text;
    n.className = "notice" + (isError ? " error" : "");
    n.hidden = !text;
    clearTimeout(notice.timer);
    if (text && !isError) notice.timer = setTimeout(() => { n.hidden = true; }, 5000);
  }

  // ---- theme -------------------------------------------------------------
  const themes = ["auto", "light", "dark"];
  function applyTheme(t) {
    if (t === "auto") document.documentElement.removeAttribute("data-theme");
    else document.documentElement.setAttribute("data-theme", t);
    $("theme").textContent = "Theme: " + t;
    dirty.charts = true; schedule();
  }
  // The system's scheme can change under "auto": the charts' colours follow.
  matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => { dirty.charts = true; schedule(); });
  let theme = localStorage.getItem(STORE + ".theme") || "auto";
  applyTheme(theme);
  $("theme").addEventListener("click", () => {
    theme = themes[(themes.indexOf(theme) + 1) % themes.length];
    localStorage.setItem(STORE + ".theme", theme);
    applyTheme(theme);
  });

  // ---- tabs --------------------------------------------------------------
  let tab = "servers";
  function showTab(name) {
    tab = name;
    for (const b of document.querySelectorAll(".tabs button")) b.setAttribute("aria-selected", String(b.dataset.tab === name));
    for (const s of document.querySelectorAll("section.tab")) s.hidden = s.id !== "tab-" + name;
    if (name === "tools") loadPool();
    if (name === "channels") loadChannels();
    if (name === "events") dirty.log = true;
    if (name === "servers") dirty.all = true;
    schedule();
    window.history.replaceState(null, "", "#" + name);
  }
  for (const b of document.querySelectorAll(".tabs button")) b.addEventListener("click", () => showTab(b.dataset.tab));

  // ---- the admin API -----------------------------------------------------
  async function post(path, body) {
    const r = await fetch(path, {
      method: "POST", credentials: "same-origin",
      headers: body === undefined ? {} : { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status === 401) { location.reload(); throw new Error("not logged in"); }
    const text = await r.text();
    if (!r.ok) throw new Error(text.trim() || r.statusText);
    return text ? JSON.parse(text) : {};
  }
  async function getJSON(path) {
    const r = await fetch(path, { credentials: "same-origin" });
    if (r.status === 401) { location.reload(); throw new Error("not logged in"); }
    if (!r.ok) throw new Error((await r.text()).trim() || r.statusText);
    return r.json();
  }
  async function act(button, what, fn) {
    if (button) button.disabled = true;
    try {
      const res = await fn();
      notice(what + ": done");
      return res;
    } catch (e) {
      notice(what + ": " + e.message, true);
    } finally {
      if (button) button.disabled = false;
    }
  }
  $("reload").addEventListener("click", (e) => act(e.currentTarget, "Reload config", () => post("/admin/reload")));
  $("reconnect-all").addEventListener("click", (e) => act(e.currentTarget, "Reconnect all", () => post("/admin/reconnect")));
  $("logout").addEventListener("click", async () => { try { await post("/logout"); } finally { location.href = "/"; } });
  const enc = encodeURIComponent;
  function reconnect(name, b) { return act(b, "Reconnect " + name, () => post("/admin/servers/" + enc(name) + "/reconnect")); }
  function toggle(name, on, b) { return act(b, (on ? "Turn on " : "Turn off ") + name, () => post("/admin/servers/" + enc(name) + "/toggle", { on })); }
  async function login(name, b) {
    // Open the window now, while the click still counts as the user's.
    const w = window.open("", "_blank");
    const res = await act(b, "Log in to " + name, () => post("/admin/servers/" + enc(name) + "/login"));
    if (res && res.url) {
      if (w) { w.opener = null; w.location.href = res.url; }
      else notice("Open this address to authorize " + name + ": " + res.url);
    } else if (w) w.close();
  }

  // ---- the stream --------------------------------------------------------
  let es = null, retry = 1000;
  function connect() {
    const conn = $("conn");
    conn.dataset.state = "connecting"; conn.textContent = "connecting…";
    const url = "/admin/stream" + (cursor !== null ? "?after=" + cursor : "?after=0");
    es = new EventSource(url);
    es.addEventListener("open", () => { retry = 1000; conn.dataset.state = "live"; conn.textContent = "live"; });
    es.addEventListener("snapshot", (m) => { pendingFrames.push(["snapshot", JSON.parse(m.data)]); schedule(); });
    es.addEventListener("status", (m) => { pendingFrames.push(["status", JSON.parse(m.data)]); schedule(); });
    es.onmessage = null;
    es.addEventListener("error", async () => {
      if (es.readyState !== EventSource.CLOSED) {
        conn.dataset.state = "retrying"; conn.textContent = "reconnecting…";
        return;
      }
      conn.dataset.state = "retrying"; conn.textContent = "disconnected; retrying…";
      es = null;
      try {
        const r = await fetch("/status", { credentials: "same-origin" });
        if (r.status === 401) { location.reload(); return; }
      } catch (_) { /* the gateway is down: retry */ }
      setTimeout(connect, retry);
      retry = Math.min(retry * 2, 15000);
    });
    es.addEventListener("events", (m) => {
      let batch;
      try { batch = JSON.parse(m.data); } catch (_) { return; }
      for (const ev of batch) pendingEvents.push(ev);
      schedule();
    });
  }

  // schedule asks for one flush: at the next animation frame, or within
  // 250 ms when frames do not come (a hidden tab), so that queues stay short.
  function schedule() {
    if (scheduled) return;
    scheduled = true;
    frameReq = requestAnimationFrame(flush);
    timerReq = setTimeout(flush, 250);
  }

  // flush applies what arrived since the last frame and renders what changed.
  const stats = { flushes: 0, flushMaxMs: 0, flushTotalMs: 0, eventsApplied: 0 };
  function flush() {
    const t0 = performance.now();
    flushInner();
    const d = performance.now() - t0;
    stats.flushes++; stats.flushTotalMs += d; if (d > stats.flushMaxMs) stats.flushMaxMs = d;
  }
  function flushInner() {
    cancelAnimationFrame(frameReq); clearTimeout(timerReq);
    scheduled = false;
    const frames = pendingFrames; pendingFrames = [];
    const events = pendingEvents; pendingEvents = [];
    for (const [kind, f] of frames) kind === "snapshot" ? applySnapshot(f) : applyStatus(f);
    if (events.length) { applyEvents(events); stats.eventsApplied += events.length; }
    render();
  }

  function applySnapshot(f) {
    intervalMs = f.intervalMs || 1000;
    actions = f.actions || {};
    gateway = f.gateway || {};
    const seen = new Set();
    for (const s of f.servers || []) { servers.set(s.name, s); seen.add(s.name); }
    for (const name of [...servers.keys()]) if (!seen.has(name)) removeServer(name);
    hist.clear();
    for (const [name, h] of Object.entries(f.history || {})) hist.set(name, h.slice());
    historyLen = f.historyLen || historyLen;
    if (f.channels) { channelMsgs = f.channels; dirty.channels = true; }
    $("reload").hidden = !actions.reload;
    $("reconnect-all").hidden = !actions.reconnect;
    $("logout").hidden = !actions.logout;
    dirty.all = true; dirty.summary = true; dirty.charts = true;
  }
  // A state event can arrive before the status sample that shows it (or a
  // sample taken just before it can arrive after it): the newer one wins.
  const stateAt = new Map();   // name → time of the last state event applied
  function applyStatus(f) {
    for (const s of f.servers || []) {
      const at = stateAt.get(s.name);
      const old = servers.get(s.name);
      if (old && at && !isZeroTime(s.stateSince) && Date.parse(s.stateSince) < at) {
        s.state = old.state;
        if (old.lastError) s.lastError = old.lastError;
      }
      servers.set(s.name, s); dirty.rows.add(s.name);
    }
    for (const name of f.removed || []) removeServer(name);
    if (f.gateway) gateway = f.gateway;
    if (f.tick) {
      for (const name of servers.keys()) {
        let h = hist.get(name);
        if (!h) { h = []; hist.set(name, h); }
        h.push((f.point && f.point[name]) || [0, 0]);
        if (h.length > historyLen) h.splice(0, h.length - historyLen);
      }
      dirty.charts = true;
    }
    if ((f.servers && f.servers.length) || (f.removed && f.removed.length)) dirty.summary = true;
  }
  function removeServer(name) {
    servers.delete(name);
    hist.delete(name);
    const r = rows.get(name);
    if (r) { sight.unobserve(r.tr); r.tr.remove(); rows.delete(name); }
    dirty.summary = true;
  }
  function applyEvents(events) {
    for (const ev of events) {
      if (ev.seq) {
        if (cursor !== null && ev.seq <= cursor) continue; // already have it (a replay after reconnect)
        cursor = ev.seq;
      }
      log.push(ev);
      if (!eventTypes.has(ev.type)) { eventTypes.add(ev.type); addTypeOption(ev.type); }
      switch (ev.type) {
        case "server_state": {
          const s = servers.get(ev.server);
          const at = Date.parse(ev.time);
          if (s && !(Date.parse(s.stateSince) > at)) {
            const next = Object.assign({}, s, { state: ev.state, stateSince: ev.time });
            if (ev.error) next.lastError = ev.error;
            if (ev.state === "ready") { next.attempt = 0; next.nextRetry = ""; }
            servers.set(ev.server, next);
            stateAt.set(ev.server, at);
            dirty.rows.add(ev.server); dirty.summary = true;
          }
          break;
        }
        case "tools_changed": case "prompts_changed": case "resources_changed": case "collision":
        case "tool_definition_changed": case "server_toggled":
          dirty.pool = true; break;
        case "permission_request": case "permission_answered":
          dirty.channels = true; break;
        case "channel_message": {
          let content = "";
          try { content = (ev.data && ev.data.content) || ""; } catch (_) { /* keep "" */ }
          channelMsgs.push({ seq: ev.seq, time: ev.time, server: ev.server, content, meta: ev.data && ev.data.meta });
          if (channelMsgs.length > 200) channelMsgs.splice(0, channelMsgs.length - 200);
          dirty.channelList = true;
          break;
        }
      }
    }
    if (log.length > LOG_KEEP) { logDropped += log.length - LOG_KEEP; log.splice(0, log.length - LOG_KEEP); }
    dirty.log = true;
    saveSoon();
  }
  function addTypeOption(t) {
    const sel = $("event-type");
    const opts = [...sel.options].slice(1).map((o) => o.value);
    opts.push(t); opts.sort();
    const at = opts.indexOf(t);
    sel.insertBefore(el("option", { value: t, text: t }), sel.options[at + 1] || null);
  }

  // ---- persistence across a reload of the page ---------------------------
  let saveTimer = 0;
  function saveSoon() {
    if (saveTimer) return;
    saveTimer = setTimeout(save, 1000);
  }
  function save() {
    saveTimer = 0;
    try {
      sessionStorage.setItem(STORE, JSON.stringify({ cursor, log: log.slice(-LOG_SAVE) }));
    } catch (_) { /* storage full or off: the log starts afresh next time */ }
  }
  function restore() {
    try {
      const s = JSON.parse(sessionStorage.getItem(STORE) || "null");
      if (s && typeof s.cursor === "number") {
        cursor = s.cursor;
        log = Array.isArray(s.log) ? s.log : [];
        for (const ev of log) if (!eventTypes.has(ev.type)) { eventTypes.add(ev.type); addTypeOption(ev.type); }
      }
    } catch (_) { cursor = null; log = []; }
  }
  addEventListener("pagehide", save);

  // ---- rendering ---------------------------------------------------------
  function render() {
    if (dirty.summary) { renderSummary(); dirty.summary = false; }
    if (tab === "servers") {
      if (dirty.all) { renderAllRows(); dirty.all = false; dirty.rows.clear(); dirty.charts = true; }
      for (const name of dirty.rows) updateRow(name);
      dirty.rows.clear();
      if (dirty.charts) { drawCharts(); dirty.charts = false; }
    }
    if (dirty.log && tab === "events") { renderLog(); dirty.log = false; }
    $("count-events").textContent = log.length ? String(log.length) : "";
    if (dirty.pool) { dirty.pool = false; poolStale = true; if (tab === "tools") loadPoolSoon(); }
    if (dirty.channels) { dirty.channels = false; channelsStale = true; loadChannelsSoon(); }
    if (dirty.channelList && tab === "channels") { dirty.channelList = false; renderChannelMessages(); }
    renderGateway();
  }

  function renderGateway() {
    const g = gateway;
    const parts = [];
    if (g.version) parts.push("v" + g.version);
    if (g.started) parts.push("up " + ago(g.started).replace(" ago", ""));
    parts.push((g.sessions || 0) + " sessions", (g.tools || 0) + " tools offered (~" + (g.toolTokens || 0) + " tokens" +
      (g.toolMode ? ", tools/list: " + g.toolMode : "") + ")", (g.inFlight || 0) + " requests in flight");
    const text = parts.join(" · ");
    if ($("gwinfo").textContent !== text) $("gwinfo").textContent = text;
    $("count-tools").textContent = g.tools ? String(g.tools) : "";
  }

  // Display state: a server toggled off shows as "off" (its connection is
  // kept, so that turning it on is instant).
  function stateOf(s) { return s.toggledOff ? "off" : s.state; }
  const STATE_WORDS = {
    ready: "ready", pending: "pending", connecting: "connecting", reconnecting: "reconnecting", failed: "failed",
    "needs-auth": "needs login", "needs-approval": "needs approval", disabled: "disabled", stopped: "stopped", off: "off",
  };
  const STATE_ORDER = ["ready", "connecting", "pending", "reconnecting", "failed", "needs-auth", "needs-approval", "off", "disabled", "stopped"];
  let stateFilter = "";
  function renderSummary() {
    const counts = {};
    for (const s of servers.values()) counts[stateOf(s)] = (counts[stateOf(s)] || 0) + 1;
    const box = $("summary");
    box.textContent = "";
    const all = el("button", { type: "button", class: "chip", "aria-pressed": String(stateFilter === ""), text: "all " + servers.size });
    all.addEventListener("click", () => { stateFilter = ""; dirty.all = dirty.summary = true; schedule(); });
    box.append(all);
    for (const st of STATE_ORDER) {
      if (!counts[st]) continue;
      const b = el("button", { type: "button", class: "chip", "aria-pressed": String(stateFilter === st), "data-state": st },
        el("span", { class: "state s-" + st, text: STATE_WORDS[st] || st }), " " + counts[st]);
      b.addEventListener("click", () => { stateFilter = stateFilter === st ? "" : st; dirty.all = dirty.summary = true; schedule(); });
      box.append(b);
    }
    $("count-servers").textContent = String(servers.size);
    $("servers-empty").hidden = servers.size !== 0;
    const dl = $("server-names");
    if (dl.childElementCount !== servers.size) {
      dl.textContent = "";
      for (const name of [...servers.keys()].sort()) dl.append(el("option", { value: name }));
    }
  }

  let serverFilter = "";
  $("server-filter").addEventListener("input", (e) => { serverFilter = e.target.value.toLowerCase(); dirty.all = true; schedule(); });
  function visible(s) {
    if (stateFilter && stateOf(s) !== stateFilter) return false;
    if (!serverFilter) return true;
    const hay = (s.name + " " + s.state + " " + (s.lastError || "") + " " + (s.transport || "") + " " + (s.lastErrorClass || "")).toLowerCase();
    return hay.includes(serverFilter);
  }
  // Rows in order: problems first (then by name), or by name alone.
  const RANK = { failed: 0, reconnecting: 1, "needs-auth": 2, "needs-approval": 3, connecting: 4, pending: 4, ready: 5, off: 6, disabled: 7, stopped: 8 };
  let sortBy = localStorage.getItem(STORE + ".sort") || "problems";
  $("server-sort").value = sortBy;
  $("server-sort").addEventListener("change", (e) => { sortBy = e.target.value; localStorage.setItem(STORE + ".sort", sortBy); dirty.all = true; schedule(); });
  function order() {
    const names = [...servers.keys()];
    if (sortBy === "name") return names.sort();
    const rank = (n) => { const r = RANK[stateOf(servers.get(n))]; return r === undefined ? 9 : r; };
    return names.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  }
  let reorderTimer = 0;
  function reorderSoon() {
    if (reorderTimer) return;
    reorderTimer = setTimeout(() => { reorderTimer = 0; dirty.all = true; schedule(); }, 1000);
  }
  function renderAllRows() {
    const body = $("servers");
    const names = order();
    let same = body.childElementCount === names.length;
    for (let i = 0; i < names.length; i++) {
      const name = names[i];
      let r = rows.get(name);
      if (!r) { r = makeRow(name); rows.set(name, r); same = false; }
      const s = servers.get(name);
      r.tr.hidden = !visible(s);
      if (r.inView || !r.key) { fillRow(r, s); r.stale = false; }
      else { r.tr.dataset.state = stateOf(s); r.stale = true; }
      if (same && body.children[i] !== r.tr) same = false;
    }
    if (same) return; // the order holds: no row moves
    const frag = document.createDocumentFragment();
    for (const name of names) frag.append(rows.get(name).tr);
    body.textContent = "";
    body.append(frag);
  }
  function updateRow(name) {
    const s = servers.get(name);
    if (!s) return;
    let r = rows.get(name);
    if (!r) { dirty.all = true; schedule(); return; }
    // A row whose state changed may move (problems first): reorder, at
    // most once a second, so that a storm does not move rows every frame.
    if (sortBy !== "name" && r.tr.dataset.state !== stateOf(s)) reorderSoon();
    r.tr.hidden = !visible(s);
    // Rows out of sight get their state now and their cells when they come
    // into sight: a storm redraws the rows one sees, not a thousand.
    if (r.inView) fillRow(r, s);
    else { r.tr.dataset.state = stateOf(s); r.stale = true; }
  }
  // Which rows are in (or near) the viewport.
  const sight = new IntersectionObserver((entries) => {
    for (const e of entries) {
      const r = rows.get(e.target.dataset.server);
      if (!r) continue;
      r.inView = e.isIntersecting;
      if (r.inView && r.stale) {
        r.stale = false;
        const s = servers.get(r.name);
        if (s) fillRow(r, s);
        r.chartSig = "";
        dirty.charts = true; schedule();
      }
    }
  }, { rootMargin: "300px 0px" });
  const COLS = ["name", "state", "transport", "era", "tools", "strikes", "retry", "error", "since", "inflight", "latency", "chart", "actions"];
  function makeRow(name) {
    const tr = el("tr", { "data-server": name });
    const cells = {};
    for (const c of COLS) {
      const td = el("td", { class: "c-" + c });
      if (["tools", "strikes", "inflight", "latency"].includes(c)) td.classList.add("num");
      cells[c] = td;
      tr.append(td);
    }
    cells.name.append(el("strong", { text: name }));
    cells.error.classList.add("err");
    const canvas = el("canvas", { class: "spark", width: "240", height: "52", title: "calls/s (line) and errors/s (bars), last minutes" });
    cells.chart.append(canvas);
    const r = { name, tr, cells, canvas, key: "", inView: false, stale: true };
    sight.observe(tr);
    return r;
  }
  function set(td, text) { if (td.textContent !== text) td.textContent = text; }
  function fillRow(r, s) {
    const st = stateOf(s);
    const key = JSON.stringify(s);
    if (r.key === key) { updateCountdown(r, s); return; }
    r.key = key;
    r.tr.dataset.state = st;
    const c = r.cells;
    // State, in colour and words, with what it means where it needs saying.
    c.state.textContent = "";
    c.state.append(el("span", { class: "state s-" + st, text: STATE_WORDS[st] || st }));
    if (st === "needs-approval") c.state.append(el("span", { class: "state-note", text: "project server awaiting approval: run 'mcpvisor trust' in its project" }));
    if (st === "needs-auth") c.state.append(el("span", { class: "state-note", text: "log in to authorize" + (s.auth && s.auth.scope ? " (scope " + s.auth.scope + ")" : "") }));
    if (st === "off") c.state.append(el("span", { class: "state-note", text: "toggled off; connection " + s.state }));
    if (s.lazy && st === "pending") c.state.append(el("span", { class: "state-note", text: "lazy: connects on first use" }));
    set(c.transport, s.transport || "—");
    set(c.era, s.protocolVersion || "—");
    c.era.title = era(s.protocolVersion);
    c.tools.textContent = "";
    c.tools.append(String(s.offeredTools || 0));
    if (s.toolCount && s.toolCount !== s.offeredTools && st === "ready") c.tools.append(el("span", { class: "muted", text: " / " + s.toolCount }));
    if (s.toolTokens) c.tools.append(el("span", { class: "muted", title: "estimated tokens of the tool definitions (JSON bytes / 4)", text: " ~" + s.toolTokens + " tok" }));
    if (s.deferred) c.tools.append(el("span", { class: "badge", title: "\"defer\": true: its tools are found by search only, never listed", text: "deferred" }));
    if (s.withheldTools && s.withheldTools.length) {
      c.tools.append(el("span", { class: "badge warn", title: "withheld until 'mcpvisor trust' approves their definitions: " + s.withheldTools.join(", "),
        text: s.withheldTools.length + " withheld" }));
    }
    set(c.strikes, String(s.strikes || 0));
    c.error.textContent = "";
    if (s.lastError) {
      const cls = [s.lastFailure, s.lastErrorClass].filter(Boolean).join(" · ");
      if (cls) c.error.append(el("span", { class: "class", text: cls }));
      c.error.append(el("span", { class: "msg", text: s.lastError }));
      c.error.title = s.lastError;
    } else { c.error.append(el("span", { class: "muted", text: "—" })); c.error.title = ""; }
    set(c.since, st === "ready" && !isZeroTime(s.connectedSince) ? ago(s.connectedSince) : "—");
    c.since.title = isZeroTime(s.connectedSince) ? "" : new Date(s.connectedSince).toLocaleString();
    set(c.inflight, String(s.inFlight || 0));
    set(c.latency, s.latency && s.latency.calls ? ms(s.latencyP50Ms) + " / " + ms(s.latencyP99Ms) + " ms" : "—");
    updateCountdown(r, s);
    fillActions(r, s, st);
  }
  function updateCountdown(r, s) {
    let text = "—";
    if (s.attempt) {
      text = "attempt " + s.attempt;
      if (!isZeroTime(s.nextRetry)) {
        const left = (Date.parse(s.nextRetry) - Date.now()) / 1000;
        text += left > 0 ? " · in " + (left < 10 ? left.toFixed(1) : Math.round(left)) + "s" : " · now";
      }
    }
    set(r.cells.retry, text);
  }
  function fillActions(r, s, st) {
    // The buttons change only with what they depend on: a click is never
    // lost to a row redrawn for its latency or counters.
    const key = st + "|" + JSON.stringify(actions);
    if (r.actionsKey === key) return;
    r.actionsKey = key;
    const c = r.cells.actions;
    c.textContent = "";
    c.classList.add("actions");
    const name = s.name;
    if (actions.reconnect && st !== "needs-approval" && st !== "off" && st !== "disabled") {
      const b = el("button", { type: "button", "data-action": "reconnect", title: "close the connection and connect again", text: "Reconnect" });
      b.addEventListener("click", () => reconnect(name, b));
      c.append(b, " ");
    }
    // A server disabled in the config stays so; toggling is for the others.
    if (actions.toggle && st !== "needs-approval" && !(st === "disabled" && !s.toggledOff)) {
      const on = !s.toggledOff;
      const b = el("button", { type: "button", "data-action": "toggle", class: on ? "danger" : "",
        title: on ? "take the server out of the pool and disconnect it" : "connect the server and offer its tools again",
        text: on ? "Turn off" : "Turn on" });
      b.addEventListener("click", () => toggle(name, !on, b));
      c.append(b, " ");
    }
    if (actions.login && st === "needs-auth") {
      const b = el("button", { type: "button", "data-action": "login", text: "Log in" });
      b.addEventListener("click", () => login(name, b));
      c.append(b);
    }
  }

  // Charts: calls per second as a line, errors per second as bars.
  function drawCharts() {
    const css = getComputedStyle(document.documentElement);
    const callsColor = css.getPropertyValue("--chart-calls").trim() || "#2f6fdf";
    const errColor = css.getPropertyValue("--chart-errors").trim() || "#cf222e";
    const lineColor = css.getPropertyValue("--line").trim() || "#ddd";
    for (const [name, r] of rows) {
      if (r.tr.hidden || !r.inView) continue;
      drawChart(r, hist.get(name) || [], callsColor, errColor, lineColor);
    }
  }
  function drawChart(r, h, callsColor, errColor, lineColor) {
    let sig = h.length + ":" + callsColor;
    let max = 0, nonzero = false;
    for (const [c, e] of h) { if (c > max) max = c; if (e > max) max = e; if (c || e) nonzero = true; }
    sig += nonzero ? ":" + h.slice(-historyLen).join(",") : ":0";
    if (r.chartSig === sig) return;
    r.chartSig = sig;
    const cv = r.canvas, ctx = cv.getContext("2d");
    const W = cv.width, H = cv.height;
    ctx.clearRect(0, 0, W, H);
    ctx.fillStyle = lineColor;
    ctx.fillRect(0, H - 2, W, 2);
    if (!nonzero) return;
    const n = historyLen, step = W / Math.max(n - 1, 1), off = n - h.length;
    const y = (v) => H - 3 - (v / max) * (H - 6);
    ctx.fillStyle = errColor;
    h.forEach(([, e], i) => { if (e) { const x = (off + i) * step; ctx.fillRect(x - 1.5, y(e), 3, H - 2 - y(e)); } });
    ctx.strokeStyle = callsColor; ctx.lineWidth = 2; ctx.beginPath();
    h.forEach(([c], i) => { const x = (off + i) * step; i ? ctx.lineTo(x, y(c)) : ctx.moveTo(x, y(c)); });
    ctx.stroke();
    const rate = (h[h.length - 1] || [0, 0]).map((v) => v / (intervalMs / 1000));
    r.canvas.title = "now: " + rate[0].toFixed(1) + " calls/s, " + rate[1].toFixed(1) + " errors/s; peak " + (max / (intervalMs / 1000)).toFixed(1) + "/s";
  }

  // Live countdowns and "connected since": a local clock, no request.
  setInterval(() => {
    if (tab !== "servers") return;
    for (const [name, r] of rows) {
      const s = servers.get(name);
      if (!s || r.tr.hidden || !r.inView || r.stale) continue;
      if (s.attempt) updateCountdown(r, s);
      if (s.state === "ready" && !isZeroTime(s.connectedSince)) set(r.cells.since, ago(s.connectedSince));
    }
    renderGateway();
  }, 250);

  // ---- the event log -----------------------------------------------------
  let logServer = "", logType = "", paused = false;
  const relog = () => { logRebuild = true; dirty.log = true; schedule(); };
  $("event-server").addEventListener("input", (e) => { logServer = e.target.value.trim(); relog(); });
  $("event-type").addEventListener("change", (e) => { logType = e.target.value; relog(); });
  $("event-pause").addEventListener("change", (e) => { paused = e.target.checked; if (!paused) relog(); });
  $("event-clear").addEventListener("click", () => { log = []; logShownUpTo = 0; relog(); save(); });
  function describe(ev) {
    switch (ev.type) {
      case "server_state": return (ev.previous ? ev.previous + " → " : "") + ev.state + (ev.error ? ": " + ev.error : "");
      case "server_toggled": return ev.toggledOff ? "toggled off" : "toggled on";
      case "tools_changed": case "prompts_changed": case "resources_changed": {
        const d = ev.diff || {};
        const parts = [];
        if (d.added) parts.push("+" + d.added.length + " " + d.added.slice(0, 3).join(", ") + (d.added.length > 3 ? "…" : ""));
        if (d.removed) parts.push("−" + d.removed.length + " " + d.removed.slice(0, 3).join(", ") + (d.removed.length > 3 ? "…" : ""));
        if (d.changed) parts.push("~" + d.changed.length + " " + d.changed.slice(0, 3).join(", ") + (d.changed.length > 3 ? "…" : ""));
        return parts.join("  ") + (ev.type === "tools_changed" ? "  (pool: " + (ev.tools || 0) + ")" : "");
      }
      case "collision": { const c = ev.collision || {}; return c.kind + " " + c.name + " held by " + c.holder + "; " + c.server + "/" + c.original + " offered as " + c.renamed; }
      case "tool_definition_changed": { const c = ev.toolChange || {}; return c.tool + ": " + c.change + " (" + c.action + ")"; }
      case "channel_message": return (ev.data && ev.data.content) || "";
      case "permission_request": case "permission_answered": return ev.permissionId + " " + (ev.data ? JSON.stringify(ev.data) : "");
      case "log_message": return "[" + ev.level + "] " + JSON.stringify(ev.data && ev.data.data !== undefined ? ev.data.data : ev.data);
      case "resource_updated": return ev.uri;
      default: return ev.data ? JSON.stringify(ev.data) : "";
    }
  }
  function gapText(ev) {
    const why = ev.gapReason === "cursor_too_old" ? "no longer remembered by the gateway" : ev.gapReason === "slow_subscriber" ? "dropped: this page fell behind" : ev.gapReason || "lost";
    return "⋯ " + (ev.dropped || "some") + " events " + why + " ⋯";
  }
  // The log table shows the newest LOG_SHOW matching events, newest first.
  // New events are added on top (and the oldest rows dropped) without
  // touching the others; a filter change or a clear rebuilds it.
  let logShownUpTo = 0;        // log index up to which rows were made
  let logRebuild = true;
  let logDropped = 0;          // events dropped from the front of log since the last rebuild
  function logMatches(ev) {
    if (ev.type === "gap") return true;
    if (logServer && !(ev.server || "").includes(logServer)) return false;
    return !logType || ev.type === logType;
  }
  function logRow(ev) {
    if (ev.type === "gap") {
      return el("tr", { class: "gap", "data-type": "gap" }, el("td", { class: "num", text: ev.seq ? String(ev.seq) : "" }),
        el("td", { text: clock(ev.time) }), el("td", { text: "gap" }), el("td"), el("td", { text: gapText(ev) }));
    }
    return el("tr", { "data-type": ev.type, "data-seq": String(ev.seq || "") },
      el("td", { class: "num", text: String(ev.seq || "") }), el("td", { class: "mono", text: clock(ev.time) }),
      el("td", { text: ev.type }), el("td", { text: ev.server || "" }), el("td", { class: "details", text: describe(ev) }));
  }
  function renderLog() {
    if (paused) return;
    const body = $("events");
    let from = logShownUpTo - logDropped;
    logDropped = 0;
    if (logRebuild || from < 0) { body.textContent = ""; from = 0; logRebuild = false; }
    // Only the newest LOG_SHOW events can show.
    from = Math.max(from, log.length - LOG_SHOW * 4);
    const fresh = [];
    for (let i = log.length - 1; i >= from && fresh.length < LOG_SHOW; i--) if (logMatches(log[i])) fresh.push(log[i]);
    if (fresh.length) {
      const frag = document.createDocumentFragment();
      for (const ev of fresh) frag.append(logRow(ev));
      body.prepend(frag);
      while (body.childElementCount > LOG_SHOW) body.lastElementChild.remove();
    }
    logShownUpTo = log.length;
    let matching = log.length;
    if (logServer || logType) { matching = 0; for (const ev of log) if (logMatches(ev) && ev.type !== "gap") matching++; }
    $("event-info").textContent = (logServer || logType ? matching + " of " : "") + log.length + " events" +
      (body.childElementCount >= LOG_SHOW ? " (newest " + LOG_SHOW + " shown)" : "") + (cursor !== null ? " · cursor " + cursor : "");
  }

  // ---- the pool ----------------------------------------------------------
  let pool = null, poolStale = true, poolTimer = 0, selected = null;
  function loadPoolSoon() {
    if (poolTimer) return;
    poolTimer = setTimeout(() => { poolTimer = 0; loadPool(); }, 300);
  }
  async function loadPool() {
    if (!poolStale && pool) { renderPool(); return; }
    poolStale = false;
    try { pool = await getJSON("/admin/pool"); } catch (e) { notice("Loading the pool: " + e.message, true); return; }
    renderPool();
  }
  let poolQuery = "", onlyOdd = false;
  $("pool-filter").addEventListener("input", (e) => { poolQuery = e.target.value.toLowerCase(); renderPool(); });
  $("pool-collisions").addEventListener("change", (e) => { onlyOdd = e.target.checked; renderPool(); });
  const matches = (...fields) => !poolQuery || fields.some((f) => (f || "").toLowerCase().includes(poolQuery));
  function renderPool() {
    if (!pool) return;
    const tools = $("pool-tools"); tools.textContent = "";
    let nTools = 0;
    for (const t of pool.tools) {
      if (!matches(t.name, t.qualified, t.definition.description, t.definition.title, t.server)) continue;
      if (onlyOdd && !t.renamedFrom) continue;
      nTools++;
      if (nTools > 1000) continue;
      const li = el("li", { "data-tool": t.qualified, "aria-selected": String(selected === "tool:" + t.qualified) },
        el("strong", { text: t.name }),
        t.server ? el("span", { class: "badge", text: t.server }) : el("span", { class: "badge", text: "built-in" }),
        t.renamedFrom ? el("span", { class: "badge warn", title: "collides with " + (t.holder || "?"), text: "renamed from " + t.renamedFrom }) : null,
        t.offered ? null : el("span", { class: "badge bad", title: "hidden by --allow-tools/--deny-tools", text: "not offered" }),
        t.definition.annotations && t.definition.annotations.destructiveHint ? el("span", { class: "badge warn", text: "destructive" }) : null,
        t.definition.annotations && t.definition.annotations.readOnlyHint ? el("span", { class: "badge", text: "read-only" }) : null,
        el("span", { class: "desc", text: t.definition.description || "" }));
      li.addEventListener("click", () => { selected = "tool:" + t.qualified; showTool(t); renderPool(); });
      tools.append(li);
    }
    $("pool-tools-count").textContent = String(nTools);
    const wh = $("pool-withheld"); wh.textContent = "";
    for (const [server, names] of Object.entries(pool.withheld || {})) {
      for (const n of names) {
        if (!matches(n, server)) continue;
        wh.append(el("li", {}, el("strong", { text: n }), el("span", { class: "badge", text: server }),
          el("span", { class: "badge warn", text: "withheld: definition not approved ('mcpvisor trust')" })));
      }
    }
    if (!wh.childElementCount) wh.append(el("li", { class: "muted", text: "none" }));
    const prompts = $("pool-prompts"); prompts.textContent = "";
    let nPrompts = 0;
    for (const p of pool.prompts) {
      if (!matches(p.name, p.prompt.description, p.server)) continue;
      if (onlyOdd && !p.renamedFrom) continue;
      nPrompts++;
      const li = el("li", { "aria-selected": String(selected === "prompt:" + p.name) }, el("strong", { text: p.name }), el("span", { class: "badge", text: p.server }),
        p.renamedFrom ? el("span", { class: "badge warn", text: "renamed from " + p.renamedFrom }) : null,
        el("span", { class: "desc", text: p.prompt.description || "" }));
      li.addEventListener("click", () => { selected = "prompt:" + p.name; showDetail(p.name, [["server", p.server], ["prompt", p.prompt.name]], p.prompt.arguments, "Arguments"); renderPool(); });
      prompts.append(li);
    }
    $("pool-prompts-count").textContent = String(nPrompts);
    const res = $("pool-resources"); res.textContent = "";
    let nRes = 0;
    const all = pool.resources.map((r) => ["resource", r.server, r.resource.uri, r.resource]).concat(
      pool.templates.map((t) => ["template", t.server, t.template.uriTemplate, t.template]));
    for (const [kind, server, uri, def] of all) {
      if (!matches(uri, def.name, def.description, server)) continue;
      if (onlyOdd) continue;
      nRes++;
      if (nRes > 1000) continue;
      const li = el("li", { "aria-selected": String(selected === kind + ":" + uri) }, el("strong", { text: uri }), el("span", { class: "badge", text: server }),
        kind === "template" ? el("span", { class: "badge", text: "template" }) : null, el("span", { class: "desc", text: def.description || def.name || "" }));
      li.addEventListener("click", () => { selected = kind + ":" + uri; showDetail(uri, [["server", server], ["kind", kind], ["name", def.name], ["MIME type", def.mimeType]], def, "Definition"); renderPool(); });
      res.append(li);
    }
    $("pool-resources-count").textContent = String(nRes);
  }
  function showTool(t) {
    const facts = [["called as", t.name], ["pool name", t.qualified], ["server", t.server || "built-in"], ["server's name", t.definition.name],
      ["title", t.definition.title], ["offered", t.offered ? "yes" : "no (gateway filters)"], ["annotations trusted", t.trusted ? "yes (server marked trusted)" : "no"]];
    if (t.renamedFrom) facts.push(["renamed from", t.renamedFrom + " (held by " + (t.holder || "?") + ")"]);
    showDetail(t.name, facts, { inputSchema: t.definition.inputSchema, outputSchema: t.definition.outputSchema, annotations: t.definition.annotations }, "Schema and annotations", t.definition.description);
  }
  function showDetail(title, facts, json, jsonTitle, description) {
    const d = $("pool-detail"); d.textContent = "";
    d.append(el("h3", { text: title }));
    if (description) d.append(el("p", { text: description }));
    const dl = el("dl");
    for (const [k, v] of facts) if (v) dl.append(el("dt", { text: k }), el("dd", { text: v }));
    d.append(dl);
    if (json !== undefined) d.append(el("h4", { text: jsonTitle }), el("pre", { text: JSON.stringify(json, null, 2) }));
  }

  // ---- channels ----------------------------------------------------------
  let channelsStale = true, channelsTimer = 0;
  function loadChannelsSoon() {
    if (channelsTimer) return;
    channelsTimer = setTimeout(() => { channelsTimer = 0; loadChannels(); }, 200);
  }
  async function loadChannels() {
    channelsStale = false;
    let rep;
    try { rep = await getJSON("/admin/channels"); } catch (e) { notice("Loading the channels: " + e.message, true); return; }
    channelMsgs = rep.messages || [];
    renderPermissions(rep.permissions || []);
    $("channel-waiting").textContent = rep.waiting ? "(" + rep.waiting + " wait_for_channel_message calls waiting)" : "";
    renderChannelMessages();
  }
  function renderPermissions(perms) {
    const body = $("perms"); body.textContent = "";
    $("perms-empty").hidden = perms.length > 0;
    $("count-perms").textContent = perms.length ? String(perms.length) : "";
    for (const p of perms) {
      const allow = el("button", { type: "button", "data-answer": "allow", text: "Allow" });
      const deny = el("button", { type: "button", class: "danger", "data-answer": "deny", text: "Deny" });
      const answer = (ok, b) => act(b, (ok ? "Allow " : "Deny ") + p.id, () => post("/admin/permissions/" + enc(p.id), { allow: ok })).then(loadChannels);
      allow.addEventListener("click", () => answer(true, allow));
      deny.addEventListener("click", () => answer(false, deny));
      body.append(el("tr", { "data-permission": p.id }, el("td", { class: "mono", text: p.id }), el("td", { text: p.server || "host" }),
        el("td", { text: p.toolName }), el("td", { text: p.description }), el("td", { class: "mono", text: p.inputPreview || "" }),
        el("td", { text: clock(p.expires) }), el("td", { class: "actions" }, allow, " ", deny)));
    }
  }
  function renderChannelMessages() {
    const body = $("channel"); body.textContent = "";
    $("channel-empty").hidden = channelMsgs.length > 0;
    for (let i = channelMsgs.length - 1; i >= 0 && i >= channelMsgs.length - 200; i--) {
      const m = channelMsgs[i];
      body.append(el("tr", {}, el("td", { class: "num", text: String(m.seq || "") }), el("td", { class: "mono", text: clock(m.time) }),
        el("td", { text: m.server }), el("td", { text: m.content }), el("td", { class: "mono", text: m.meta ? JSON.stringify(m.meta) : "" })));
    }
  }

  // ---- start -------------------------------------------------------------
  restore();
  dirty.log = true;
  // Every tab has its own #hash (#pool, the tools tab's former name, too).
  const tabOf = (hash) => {
    const h = hash.replace(/^#/, "");
    if (h === "pool") return "tools";
    return ["servers", "tools", "events", "channels"].includes(h) ? h : "servers";
  };
  showTab(tabOf(location.hash));
  window.addEventListener("hashchange", () => { if (tabOf(location.hash) !== tab) showTab(tabOf(location.hash)); });
  connect();
  // For tests and the curious: what the page holds.
  window.mcpvisorDashboard = { servers, log: () => log, cursor: () => cursor, hist, stats };
})();
