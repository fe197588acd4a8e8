// aep-bridge web view. Sessions come from the bridge's history (/ui/history: one summary
// per session, paged back through the JSONL logs) and are kept current by the collector's
// live stream (/ui/stream); a session's events are read on demand (/ui/events). Answers go
// to /ui/answer. Lists are windowed (only the rows in view exist) and updated in place, so
// a team's day of sessions costs the same to show as ten.
// Every event field reaches the page through textContent or a form control's value,
// never as markup. No dependencies, no build step.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const MAX_TEXT = 400;             // characters of one field shown
  const MAX_SESSIONS = 20000;       // sessions kept; the ended ones least recently active go first
  const AUTO_PAGES = 10;            // history pages loaded without asking (500 sessions each)
  const PAGE = 500;                 // sessions per history page
  const MAX_LIVE = 2000;            // live events kept for the live table
  const MAX_TAIL = 300;             // live events kept per session for its detail
  const MAX_SEEN = 50000;           // event keys remembered for skipping replays
  const MAX_SETTLED = 200;          // settled requests kept
  const ROW = 30;                   // px, one row of a windowed list
  const SEVERITIES = ["debug", "info", "notice", "warning", "error", "critical"];
  const REFUSING = ["deny", "reject", "rejected", "no", "decline"];

  let nonce = null;
  let control = false;
  let stream = null;       // AbortController of the open stream
  let backoff = 500;
  let bridgeEpoch = null;  // the running bridge's epoch and source prefix, from /ui/session
  let bridgeStamps = null;
  let hasHistory = false;
  let me = { name: null, sender: "aep-web" };
  let historyNext = null;  // cursor of the next older history page
  let historyCount = 0;    // sessions the history pages held
  let historyGen = 0;      // bumps on each (re)load, so a stale page is dropped
  let ready = false;       // the first history page (or the replay) is in

  const seen = new Set();            // source \n id of events already taken
  const sessions = new Map();        // agent \n session -> session model
  const requests = new Map();        // attention.requested id -> request model
  const commands = new Map();        // command id -> command event (who answered)
  const sent = new Map();            // command id sent from this page -> request id
  const cards = new Map();           // request id -> card element
  const live = [];                   // live events, oldest first (bounded)
  const agents = new Map();          // agent -> session count

  // ------------------------------------------------------------------ helpers

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function setText(e, t) { t = String(t); if (e.textContent !== t) e.textContent = t; }
  function clip(v, n) {
    const s = typeof v === "string" ? v : JSON.stringify(v);
    const max = n || MAX_TEXT;
    if (s === undefined) return "";
    return s.length > max ? s.slice(0, max) + "… (" + s.length + " chars)" : s;
  }
  function ms(t) { const v = Date.parse(t); return Number.isFinite(v) ? v : Date.now(); }
  function dur(a, b) {
    const s = Math.max(0, Math.round((b - a) / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m" + String(s % 60).padStart(2, "0") + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
    return Math.floor(s / 86400) + "d" + String(Math.floor(s / 3600) % 24).padStart(2, "0") + "h";
  }
  function clock(t) { return new Date(t).toLocaleTimeString(); }
  function when(t) {
    const d = new Date(t), now = new Date();
    return d.toDateString() === now.toDateString() ? d.toLocaleTimeString() : d.toLocaleString();
  }
  function data(ev) { return ev.data && typeof ev.data === "object" ? ev.data : {}; }
  function severity(ev) {
    if (typeof ev.severity === "string") return ev.severity;
    if (ev.type === "attention.requested") return "notice";
    if (/\.failed$|^error\./.test(ev.type)) return "warning";
    return "info";
  }
  function num(v) { const n = typeof v === "string" ? Number(v) : v; return Number.isFinite(n) && n > 0 ? n : 0; }
  function short(s) { s = String(s || ""); return s.length > 14 ? s.slice(0, 8) + "…" + s.slice(-4) : s; }
  function keyOf(agent, session) { return agent + "\n" + session; }
  function cmpPos(a, b) { return a[0] - b[0] || a[1] - b[1]; }
  function quote(s) { return "“" + clip(s, 200) + "”"; }

  // ------------------------------------------------------------------ windowed lists

  // A list that keeps only the rows in view (plus a few) in the DOM, positioned inside a
  // spacer as tall as the whole list; rows are reused and updated in place.
  class VList {
    constructor(box, build, fill) {
      this.box = box; this.build = build; this.fill = fill;
      this.items = []; this.pool = []; this.pending = false;
      this.spacer = el("div", "spacer"); box.append(this.spacer);
      box.addEventListener("scroll", () => this.schedule(), { passive: true });
    }
    set(items) { this.items = items; this.spacer.style.height = Math.max(1, items.length) * ROW + "px"; this.draw(); }
    schedule() { if (!this.pending) { this.pending = true; requestAnimationFrame(() => { this.pending = false; this.draw(); }); } }
    draw() {
      const h = this.box.clientHeight || 600;
      const first = Math.max(0, Math.floor(this.box.scrollTop / ROW) - 3);
      const last = Math.min(this.items.length, first + Math.ceil(h / ROW) + 6);
      const n = Math.max(0, last - first);
      while (this.pool.length < n) { const r = this.build(); r.classList.add("row"); this.pool.push(r); this.spacer.append(r); }
      for (let i = 0; i < this.pool.length; i++) {
        const r = this.pool[i];
        if (i < n) {
          const item = this.items[first + i];
          if (r.hidden) r.hidden = false;
          const top = (first + i) * ROW + "px";
          if (r.style.top !== top) r.style.top = top;
          if (r._item !== item || item._v !== r._v) { r._item = item; r._v = item._v; this.fill(r, item); }
        } else if (!r.hidden) { r.hidden = true; r._item = null; }
      }
    }
    // Only the rows in view change: the live durations tick here.
    tick(f) { for (const r of this.pool) if (!r.hidden && r._item) f(r, r._item); }
  }

  // ------------------------------------------------------------------ model

  function newSession(agent, id) {
    return { key: keyOf(agent, id), agent, id, label: "", first: 0, last: 0, ended: null, events: 0, pos: null,
      runs: 0, tools: 0, failed: 0, run: null, sev: 1, types: new Set(), tokens: { run_in: 0, run_out: 0, run_cost: {},
        calls: 0, call_in: 0, call_out: 0, call_cost: {} }, tail: null, unmerged: null, _v: 0, _text: "" };
  }
  function textOf(s) { s._text = (s.agent + " " + s.id + " " + s.label).toLowerCase(); }
  function addAgent(a) {
    if (agents.has(a)) return;
    agents.set(a, 0);
    const sel = $("f-agent"), o = el("option", null, a); o.value = a; sel.append(o);
  }

  // The server's summary of a session's log (history) replaces what the page has unless
  // the page has already seen later events live.
  function fromSummary(x) {
    if (!x || typeof x.session !== "string" || typeof x.agent !== "string") return null;
    const key = keyOf(x.agent, x.session);
    let s = sessions.get(key);
    // Seen live past this summary (and already folded onto an earlier one): keep it.
    if (s && !s.unmerged && s.pos && x.pos && cmpPos(s.pos, x.pos) > 0) return s;
    if (!s) { s = newSession(x.agent, x.session); sessions.set(key, s); addAgent(x.agent); }
    s.label = typeof x.label === "string" ? x.label : "";
    s.first = x.first; s.last = x.last; s.ended = x.ended || null; s.events = x.events; s.pos = x.pos || null;
    s.runs = x.runs; s.tools = x.tools; s.failed = x.failed; s.run = x.run || null;
    s.sev = Math.max(0, SEVERITIES.indexOf(x.severity));
    s.types = new Set(Array.isArray(x.types) ? x.types : []);
    if (x.tokens) s.tokens = x.tokens;
    // A session first met live: its live events past the summary go on top of it.
    const early = s.unmerged;
    s.unmerged = null;
    for (const ev of early || []) {
      if (typeof ev.seq === "number" && x.pos && cmpPos([typeof ev.epoch === "number" ? ev.epoch : 0, ev.seq], x.pos) <= 0) continue;
      fold(s, ev);
    }
    s._v++;
    textOf(s);
    for (const r of Array.isArray(x.open) ? x.open : []) request(r, s, false);
    return s;
  }

  const IN_KEYS = ["gen_ai.usage.input_tokens", "input_tokens", "input_token_count"];
  const OUT_KEYS = ["gen_ai.usage.output_tokens", "output_tokens", "output_token_count"];
  function addCost(into, cost) {
    if (!cost || typeof cost !== "object" || typeof cost.currency !== "string") return;
    const total = num(cost.total);
    if (total > 0) into[cost.currency] = (into[cost.currency] || 0) + total;
  }
  // Folds one live event into its session's summary: the same rules the bridge's history
  // index applies to the logs.
  function fold(s, ev) {
    const t = ev.type, d = data(ev);
    if (!s.events) s.first = ev._t;
    s.events++;
    s.first = Math.min(s.first || ev._t, ev._t);
    s.last = Math.max(s.last, ev._t);
    if (typeof ev.seq === "number") {
      const p = [typeof ev.epoch === "number" ? ev.epoch : 0, ev.seq];
      if (!s.pos || cmpPos(p, s.pos) > 0) s.pos = p;
    }
    s.sev = Math.max(s.sev, SEVERITIES.indexOf(ev._sev));
    s.types.add(t);
    if (t === "session.started" && typeof d.label === "string") { s.label = clip(d.label, 400); textOf(s); }
    if (t === "session.ended") s.ended = ev._t;
    if (t === "run.started") { s.runs++; s.run = { id: ev.run || "", status: "running", start: ev._t }; }
    if (t === "run.finished" || t === "run.failed" || t === "run.cancelled") {
      const id = ev.run || "";
      if (!s.run || s.run.id !== id) s.runs++;
      const start = num(d.duration_ms) > 0 ? ev._t - num(d.duration_ms) : (s.run && s.run.id === id ? s.run.start : ev._t);
      s.run = { id, status: t.slice(4), start, end: ev._t };
    }
    if (t === "tool.requested") s.tools++;
    if (t === "tool.failed" || t === "tool.denied") s.failed++;
    const u = d.usage && typeof d.usage === "object" ? Object.assign({}, d, d.usage) : d;
    const pick = (keys) => { for (const k of keys) if (k in u) return num(u[k]); return 0; };
    if (t.startsWith("x.")) {
      const i = pick(IN_KEYS), o = pick(OUT_KEYS);
      if (i || o) { s.tokens.calls++; s.tokens.call_in += i; s.tokens.call_out += o; }
      if (num(d.cost_usd) > 0) s.tokens.call_cost.USD = (s.tokens.call_cost.USD || 0) + num(d.cost_usd);
      addCost(s.tokens.call_cost, d.cost);
    } else if (t === "run.finished" || t === "run.failed" || t.startsWith("tool.")) {
      s.tokens.run_in += pick(IN_KEYS.slice(0, 1));
      s.tokens.run_out += pick(OUT_KEYS.slice(0, 1));
      addCost(s.tokens.run_cost, d.cost);
    }
    s._v++;
  }

  // Bounded: past MAX_SESSIONS the ended sessions least recently active are forgotten, and
  // past MAX_SETTLED the oldest settled requests.
  function prune() {
    if (sessions.size > MAX_SESSIONS) {
      const ended = Array.from(sessions.values()).filter((s) => s.ended).sort((a, b) => a.last - b.last);
      for (const s of ended.slice(0, sessions.size - MAX_SESSIONS)) sessions.delete(s.key);
    }
    let settled = 0;
    for (const r of requests.values()) if (r.status !== "pending") settled++;
    for (const [id, r] of requests) {
      if (settled <= MAX_SETTLED) break;
      if (r.status !== "pending") { requests.delete(id); settled--; }
    }
  }

  // A request the page learns of, live or from a session's log.
  function request(ev, s, fresh) {
    if (!ev || typeof ev !== "object" || typeof ev.id !== "string") return;
    if (requests.has(ev.id)) return;
    if (ev._t === undefined) ev._t = ms(ev.time);
    const r = { req: ev, status: "pending", start: ev._t, end: null, session: s ? s.key : null };
    if (bridgeEpoch !== null && String(ev.source).startsWith(bridgeStamps) && typeof ev.epoch === "number" && ev.epoch < bridgeEpoch) {
      r.status = "expired (the bridge restarted)";
    } else if (s && s.ended) {
      r.status = "closed (its session ended)";
    }
    // From the logs, only what may still wait: an older run's or an ended session's
    // leftovers are not news.
    if (!fresh && r.status !== "pending") return;
    requests.set(ev.id, r);
    if (r.status === "pending" && fresh) notify(r);
    touch("inbox");
  }

  function ingest(ev) {
    if (!ev || typeof ev !== "object" || typeof ev.type !== "string") return;
    const k = ev.source + "\n" + ev.id;
    if (seen.has(k)) return;
    seen.add(k);
    if (seen.size > MAX_SEEN) for (const x of seen) { seen.delete(x); if (seen.size <= MAX_SEEN * 0.9) break; }
    ev._t = ms(ev.time);
    ev._sev = severity(ev);
    ev._text = (ev.type + " " + ev.agent + " " + (ev.session || "") + " " + clip(ev.data || "", 4000)).toLowerCase();
    live.push(ev);
    if (live.length > MAX_LIVE) live.splice(0, live.length - MAX_LIVE);
    touch("events");

    const t = ev.type;
    const isCommand = t.startsWith("control.") && t !== "control.accepted" && t !== "control.rejected";
    if (isCommand) {
      commands.set(ev.id, ev);
      if (commands.size > MAX_SETTLED * 5) commands.delete(commands.keys().next().value);
      touch("inbox");
      return;
    }
    if (t === "control.accepted" || t === "control.rejected") {
      const req = sent.get(ev.cause);
      if (req && requests.has(req)) {
        const r = requests.get(req);
        r.ack = t === "control.accepted" ? "accepted by the agent's bridge" : "rejected: " + (data(ev).reason || "") + (data(ev).detail ? " (" + clip(data(ev).detail, 200) + ")" : "");
        if (t === "control.rejected") r.busy = false;
        touch("inbox");
      }
    }
    if (!ev.session) return;
    const key = keyOf(ev.agent, ev.session);
    let s = sessions.get(key);
    if (!s) {
      prune();
      s = newSession(ev.agent, ev.session); sessions.set(key, s); addAgent(ev.agent); textOf(s);
      // Its history (begun before this page looked) follows; live events go on top of it.
      if (hasHistory) { s.unmerged = []; if (ready) fetchOne(s); }
    }
    if (s.unmerged && s.unmerged.length < MAX_TAIL) s.unmerged.push(ev);
    const counted = typeof ev.seq === "number" && s.pos && cmpPos([typeof ev.epoch === "number" ? ev.epoch : 0, ev.seq], s.pos) <= 0;
    if (!counted) fold(s, ev);
    if (s.tail) { s.tail.push(ev); if (s.tail.length > MAX_TAIL) s.tail.shift(); }
    if (detailKey === key) detailLive(ev);
    touch("sessions");
    if (t === "attention.requested") request(ev, s, true);
    if (t.startsWith("attention.") && t !== "attention.requested" && ev.subject && requests.has(ev.subject)) {
      const r = requests.get(ev.subject), d = data(ev);
      if (t === "attention.answered") r.answered = ev;
      if (t === "attention.resolved") { r.status = d.resolution || "resolved"; r.end = ev._t; }
      if (t === "attention.timeout") { r.status = "timeout"; r.end = ev._t; }
      touch("inbox");
    }
    if (t === "session.ended") {
      for (const r of requests.values()) if (r.session === key && r.status === "pending") { r.status = "closed (its session ended)"; r.end = ev._t; }
      touch("inbox");
    }
  }

  // ------------------------------------------------------------------ history

  async function getJSON(url) {
    const res = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    if (res.status === 401) { showLogin(); throw new Error("logged out"); }
    if (!res.ok) throw new Error("HTTP " + res.status);
    return res.json();
  }

  // Pages back through the logs: the newest page first (painted at once), then older ones
  // up to AUTO_PAGES, then on request.
  async function loadHistory(more) {
    const gen = more ? historyGen : ++historyGen;
    let pages = 0;
    let cursor = more ? historyNext : null;
    let indexing = false;
    if (!more) historyCount = 0;
    for (;;) {
      let page;
      try {
        page = await getJSON("/ui/history?limit=" + PAGE + (cursor ? "&before=" + encodeURIComponent(cursor) : ""));
      } catch (e) { setText($("history-status"), "history unavailable: " + e.message); return; }
      if (gen !== historyGen) return;
      for (const x of page.sessions || []) fromSummary(x);
      historyCount += (page.sessions || []).length;
      indexing = indexing || !!page.indexing;
      cursor = page.next || null;
      historyNext = cursor;
      pages++;
      if (!ready) { ready = true; touch("sessions"); render(); performance.mark("aep:sessions"); }
      touch("sessions");
      setText($("history-status"), "read " + historyCount + " sessions from the logs of the last days"
        + (indexing ? "; the bridge is still reading older logs…" : cursor ? "; older ones follow on request" : " (all of them); newer ones arrive live"));
      $("older").hidden = !cursor || indexing;
      if (!cursor || pages >= AUTO_PAGES) break;
    }
    // The bridge was still reading its logs: what it has read since follows shortly.
    if (indexing) setTimeout(() => { if (gen === historyGen) loadHistory(false); }, 700);
  }

  // One session's summary, for a session the stream names before the page has it.
  const wanted = new Set();
  function fetchOne(s) {
    if (wanted.has(s.key)) return;
    wanted.add(s.key);
    setTimeout(async () => {
      try {
        const p = await getJSON("/ui/history?limit=200&agent=" + encodeURIComponent(s.agent) + "&session=" + encodeURIComponent(s.id));
        for (const x of p.sessions || []) if (x.session === s.id && x.agent === s.agent) fromSummary(x);
        touch("sessions");
      } catch (e) { /* live events still count */ }
      wanted.delete(s.key);
    }, 300);
  }

  // ------------------------------------------------------------------ stream

  function setConn(text, cls) { const c = $("conn"); c.textContent = text; c.className = "conn " + (cls || ""); }

  function onFrame(frame) {
    const parts = [];
    for (const l of frame.split("\n")) if (l.startsWith("data:")) parts.push(l.slice(l.startsWith("data: ") ? 6 : 5));
    if (!parts.length) return;
    try { ingest(JSON.parse(parts.join("\n"))); } catch (e) { /* not an event: skipped */ }
  }

  // With history, the stream is live only: what happened before (or while the page was
  // away, or before a bridge restart) comes from the logs, read once the stream is open so
  // nothing falls between; an event already in a summary (its (epoch, seq) at or below the
  // summary's) is not counted twice. Without logs, the stream's replay stands in for them.
  async function connect() {
    if (stream) stream.abort();
    const ctl = new AbortController();
    stream = ctl;
    try {
      const res = await fetch(hasHistory ? "/ui/stream" : "/ui/stream?from=all", { signal: ctl.signal, credentials: "same-origin", cache: "no-store" });
      if (res.status === 401) { showLogin(); return; }
      if (!res.ok || !res.body) throw new Error("HTTP " + res.status);
      setConn("live", "live");
      backoff = 500;
      if (hasHistory) loadHistory(false);
      else if (!ready) { ready = true; performance.mark("aep:sessions"); }
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) { const f = buf.slice(0, i); buf = buf.slice(i + 2); onFrame(f); }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    if (stream !== ctl) return;
    setConn("reconnecting", "down");
    setTimeout(() => { if (stream === ctl) start(); }, backoff);
    backoff = Math.min(backoff * 2, 4000);
  }

  // ------------------------------------------------------------------ session and login

  async function start() {
    let res;
    try {
      res = await fetch("/ui/session", { credentials: "same-origin", cache: "no-store" });
    } catch (e) {
      setConn("bridge unreachable", "down");
      setTimeout(start, backoff);
      backoff = Math.min(backoff * 2, 4000);
      return;
    }
    if (res.status === 401) { showLogin(); return; }
    if (!res.ok) { setConn("error " + res.status, "down"); setTimeout(start, 2000); return; }
    const s = await res.json();
    nonce = s.nonce;
    control = !!s.control;
    hasHistory = !!s.history;
    me = { name: typeof s.name === "string" ? s.name : null, sender: typeof s.sender === "string" ? s.sender : "aep-web" };
    expire(s.epoch, s.stamps);
    $("login").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = !s.token;
    $("notify").hidden = !("Notification" in window);
    // A login limited to one tenant (a hub's access list) says whose sessions it shows.
    const tenant = typeof s.tenant === "string" ? s.tenant + " · " : "";
    setText($("whoami"), tenant + (control ? "answering as " + (me.name ? me.name + " via " : "") + me.sender : "read-only"));
    const note = $("control-note");
    note.hidden = control;
    note.textContent = control ? ""
      : s.token ? "Read-only: this login's token may not answer."
      : "Read-only: answering needs the bridge to run with a token (AEP-0004 §4.1).";
    for (const c of cards.values()) c._refresh();
    connect();
  }

  // A request this bridge stamped in an earlier run is no longer held: stopping that run
  // released its hook to the agent's own prompt (AEP-0001 §5.3 epochs).
  function expire(epoch, stamps) {
    if (typeof epoch !== "number" || typeof stamps !== "string") return;
    for (const r of requests.values()) {
      const ev = r.req;
      if (r.status === "pending" && String(ev.source).startsWith(stamps) && typeof ev.epoch === "number" && ev.epoch < epoch) {
        r.status = "expired (the bridge restarted)";
        r.end = Date.now();
      }
    }
    bridgeEpoch = epoch;
    bridgeStamps = stamps;
    touch("inbox");
  }

  function showLogin() {
    if (stream) { stream.abort(); stream = null; }
    setConn("logged out", "down");
    $("app").hidden = true;
    $("login").hidden = false;
    $("logout").hidden = true;
    $("token").focus();
  }

  $("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    const err = $("login-error");
    err.textContent = "";
    const body = new URLSearchParams({ token: $("token").value });
    const res = await fetch("/ui/login", { method: "POST", body, credentials: "same-origin" });
    $("token").value = "";
    if (res.status === 204) { start(); return; }
    let detail = "HTTP " + res.status;
    try { detail = (await res.json()).detail || detail; } catch (x) { /* keep the status */ }
    err.textContent = "Login refused: " + detail;
  });

  $("logout").addEventListener("click", async () => {
    await fetch("/ui/logout", { method: "POST", headers: { "x-aep-nonce": nonce || "" }, credentials: "same-origin" });
    showLogin();
  });

  // ------------------------------------------------------------------ notifications

  // Opt-in: a desktop notification for a request that arrives while the tab is in the
  // background, and the pending count in the tab's title either way.
  function notifyOn() { return "Notification" in window && Notification.permission === "granted" && localStorage.getItem("aep-notify") === "1"; }
  function notifyButton() { setText($("notify"), notifyOn() ? "Notifications on" : "Notify me"); }
  $("notify").addEventListener("click", async () => {
    if (notifyOn()) { localStorage.removeItem("aep-notify"); notifyButton(); return; }
    const p = await Notification.requestPermission();
    if (p === "granted") localStorage.setItem("aep-notify", "1");
    notifyButton();
  });
  function notify(r) {
    if (!notifyOn() || (!document.hidden && document.hasFocus())) return;
    const d = data(r.req);
    try {
      const n = new Notification("aep-bridge: " + clip(r.req.agent, 60) + " asks", { body: clip(d.prompt || d.kind || "a request", 200), tag: r.req.id });
      n.onclick = () => { window.focus(); const c = cards.get(r.req.id); if (c) c.scrollIntoView({ block: "center" }); n.close(); };
    } catch (e) { /* the browser refused: the title still counts */ }
  }

  // ------------------------------------------------------------------ answering

  async function answer(r, ans, retried) {
    r.busy = true; r.ack = "sending"; r.error = null; r.sending = ans; touch("inbox");
    let res;
    try {
      res = await fetch("/ui/answer", {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", "x-aep-nonce": nonce || "" },
        body: JSON.stringify({ request: r.req.id, session: r.req.session, answer: ans }),
      });
    } catch (e) {
      r.busy = false; r.ack = null; r.error = "the bridge is unreachable"; touch("inbox"); return;
    }
    if (res.status === 401) { showLogin(); return; }
    let body = {};
    try { body = await res.json(); } catch (e) { /* empty */ }
    if (res.status === 403 && !retried && /nonce/.test(body.detail || "")) {
      const s = await fetch("/ui/session", { credentials: "same-origin", cache: "no-store" });
      if (s.ok) { nonce = (await s.json()).nonce; return answer(r, ans, true); }
    }
    if (res.status === 202) {
      sent.set(body.command, r.req.id);
      r.command = body.command;
      r.sent = body.sent && body.sent.answer ? body.sent.answer : ans;
      r.ack = "waiting for the agent";
    } else {
      r.busy = false; r.ack = null;
      r.error = (body.error || ("HTTP " + res.status)) + (body.detail ? ": " + body.detail : "");
    }
    touch("inbox");
  }

  // An answer in words: what the request's options and fields call each part.
  function describe(ans, req) {
    if (!ans || typeof ans !== "object") return "an answer";
    const d = data(req);
    const parts = [];
    if (ans.option !== undefined) {
      const o = (Array.isArray(d.options) ? d.options : []).find((x) => x && String(x.id) === String(ans.option));
      const same = o && o.label && String(o.label).toLowerCase() === String(ans.option).toLowerCase();
      parts.push(o && o.label ? clip(o.label, 120) + (same ? "" : " [" + clip(ans.option, 40) + "]") : "option " + clip(ans.option, 80));
    }
    if (ans.text !== undefined) parts.push((ans.option !== undefined ? "with the words " : "the words ") + quote(ans.text));
    if (ans.values && typeof ans.values === "object") {
      const fields = Array.isArray(d.fields) ? d.fields : [];
      const vals = [];
      for (const [id, v] of Object.entries(ans.values)) {
        const f = fields.find((x) => x && String(x.id) === id) || {};
        const choice = (c) => {
          const ch = (Array.isArray(f.choices) ? f.choices : []).find((x) => x && String(x.id) === String(c));
          return ch ? clip(ch.label || ch.id, 80) : quote(c);
        };
        const shown = Array.isArray(v) ? v.map(choice).join(" + ") : f.type === "select" ? choice(v) : typeof v === "string" ? quote(v) : String(v);
        vals.push(clip(f.label || id, 80) + ": " + shown);
      }
      parts.push(vals.length ? vals.join("; ") : "no values");
    }
    return parts.length ? parts.join(" ") : "an empty answer";
  }

  function whoAnswered(r) {
    const a = r.answered;
    if (!a) return null;
    const cmd = commands.get(a.cause);
    const d = data(a), cd = cmd ? data(cmd) : {};
    const via = cmd ? cmd.agent : null;
    const by = typeof d.by === "string" ? d.by : typeof cd.by === "string" ? cd.by : via || (d.via === "oob" ? "the agent's own prompt" : "a control sender");
    return "answered by " + by + (via && via !== by ? " via " + via : "") + " at " + clock(a._t) + ": " + describe(d.answer, r.req);
  }

  function fieldControl(f, problems) {
    const wrap = el("label", "field");
    wrap.append(el("span", null, clip(f.label || f.id, 200) + (f.required ? " *" : "") + " "));
    let input;
    if (f.type === "boolean") {
      input = el("input"); input.type = "checkbox";
    } else if (f.type === "number") {
      input = el("input"); input.type = "number"; input.step = "any";
      if (Number.isFinite(f.min)) input.min = String(f.min);
      if (Number.isFinite(f.max)) input.max = String(f.max);
    } else if (f.type === "select") {
      input = el("select");
      if (f.multi) input.multiple = true; else input.append(el("option", null, ""));
      for (const c of Array.isArray(f.choices) ? f.choices : []) {
        const o = el("option", null, clip(c.label || c.id, 200)); o.value = String(c.id); input.append(o);
      }
    } else {
      input = el("input"); input.type = "text";
    }
    input.name = String(f.id);
    input.dataset.field = String(f.id);
    input.dataset.type = String(f.type);
    // A select with `other` is answered by a pick or by words: neither alone is required.
    if (f.required && f.type !== "boolean" && !(f.type === "select" && f.other)) input.required = true;
    wrap.append(input);
    if (f.type === "select" && f.other) {
      const other = el("input"); other.type = "text"; other.dataset.other = String(f.id);
      other.placeholder = f.multi ? "and/or your own answer" : "or your own answer";
      const hint = el("span", "hint");
      // AEP-0006: a single select takes one answer (a choice or words); a multi-select
      // takes the picks and the words together.
      if (!f.multi) input._other = other;
      const sync = () => {
        const words = other.value.trim() !== "";
        if (!f.multi) { input.disabled = words; hint.textContent = words ? "your words are the answer (this question takes one)" : ""; }
        else hint.textContent = words ? "sent with the picks" : "";
      };
      other.addEventListener("input", sync);
      wrap.append(other, hint);
      if (f.required) problems.push(() => {
        const picked = input.multiple ? input.selectedOptions.length > 0 : input.value !== "";
        return picked || other.value.trim() ? null : "answer “" + clip(f.label || f.id, 80) + "”: pick one or type your own";
      });
    }
    return wrap;
  }

  function formValues(form) {
    const values = {};
    const others = {};
    for (const o of form.querySelectorAll("[data-other]")) if (o.value.trim() !== "") others[o.dataset.other] = o.value;
    for (const c of form.querySelectorAll("[data-field]")) {
      const id = c.dataset.field, type = c.dataset.type;
      if (type === "boolean") values[id] = c.checked;
      else if (type === "number") { if (c.value !== "") values[id] = Number(c.value); }
      else if (type === "select" && c.multiple) {
        const v = Array.from(c.selectedOptions).map((o) => o.value);
        if (id in others) v.push(others[id]);
        if (v.length) values[id] = v;
      } else if (type === "select" && id in others) values[id] = others[id];
      else if (c.value !== "") values[id] = c.value;
    }
    return values;
  }

  // A card is built once per request (what the user types survives updates) and refreshed.
  function card(r) {
    const ev = r.req, d = data(ev);
    const c = el("article", "card");
    c.dataset.request = ev.id;
    const meta = el("div", "meta");
    c.append(meta);
    c.append(el("div", "prompt", clip(d.prompt || "(no prompt)", 2000)));
    const via = Array.isArray(d.respond_via) ? d.respond_via : null;
    const answerable = !via || via.includes("control");
    const controls = [];
    const options = (Array.isArray(d.options) ? d.options : []).filter((o) => o && typeof o === "object");
    if (!answerable) {
      c.append(el("div", "note", "Answer it in the agent's own prompt (respond_via: " + clip(via.join(", "), 80) + ")."));
    } else if (d.kind === "form") {
      const form = el("form", "fields");
      form.noValidate = false;
      const problems = [];
      for (const f of Array.isArray(d.fields) ? d.fields : []) if (f && typeof f === "object") form.append(fieldControl(f, problems));
      const submit = el("button", "opt", "Send answers"); submit.type = "submit"; form.append(submit);
      // What was missing is said until the form changes.
      form.addEventListener("input", () => { if (r.error && !r.busy) { r.error = null; c._refresh(); } });
      form.addEventListener("submit", (e) => {
        e.preventDefault();
        const why = problems.map((p) => p()).find(Boolean);
        if (why) { r.error = why; touch("inbox"); return; }
        answer(r, { values: formValues(form) });
      });
      controls.push(form);
      c.append(form);
    } else {
      const actions = el("div", "actions");
      for (const o of options) {
        const b = el("button", "opt", clip(o.label || o.id, 120));
        b.type = "button";
        b.dataset.option = String(o.id);
        b.title = "sends option " + clip(o.id, 80);
        b.addEventListener("click", () => answer(r, { option: String(o.id) }));
        actions.append(b);
      }
      controls.push(actions);
      c.append(actions);
      // Free text is its own action, named by what it sends. On a permission request the
      // words go with its refusing option, as the reason (the agent is never allowed by
      // words: AEP-0008); elsewhere they are a text answer.
      const refusing = d.kind === "permission" ? options.find((o) => REFUSING.includes(String(o.id).toLowerCase())) : null;
      if (d.kind !== "permission" || refusing) {
        const words = el("div", "words");
        const text = el("input"); text.type = "text"; text.className = "free";
        const send = el("button", null); send.type = "button"; send.className = "send-text";
        let act;
        if (refusing) {
          text.placeholder = "a reason for the agent";
          send.textContent = clip(refusing.label || refusing.id, 40) + " with this reason";
          send.title = "sends option " + clip(refusing.id, 80) + " and your words as its reason";
          act = () => answer(r, { option: String(refusing.id), text: text.value });
        } else {
          text.placeholder = options.length ? "or answer in words" : "your answer";
          send.textContent = "Send these words";
          send.title = "sends your words as a text answer (words that name an option choose it, AEP-0008)";
          act = () => answer(r, { text: text.value });
        }
        send.addEventListener("click", () => { if (text.value.trim()) act(); });
        text.addEventListener("keydown", (e) => { if (e.key === "Enter" && text.value.trim()) act(); });
        words.append(text, send);
        controls.push(words);
        c.append(words);
      }
    }
    const status = el("div", "status");
    status.setAttribute("role", "status");
    const what = el("div", "sent");
    c.append(what, status);
    c._refresh = () => {
      const s = sessions.get(keyOf(ev.agent, ev.session));
      setText(meta, ev.agent + " · session " + short(ev.session) + " · " + (d.kind || "request") + " · asked " + when(r.start)
        + (r.status === "pending" ? " (" + dur(r.start, Date.now()) + " ago)" : "") + (s && s.label ? " · " + clip(s.label, 80) : ""));
      const open = r.status === "pending";
      c.classList.toggle("settled", !open);
      const off = !open || !control || !!r.busy;
      for (const box of controls) for (const x of box.querySelectorAll("button, input, select")) {
        x.disabled = off || !!(x._other && x._other.value.trim());
      }
      const who = whoAnswered(r);
      setText(what, r.sent ? "sent: " + describe(r.sent, ev) : r.sending && r.busy ? "sending: " + describe(r.sending, ev) : "");
      status.className = "status" + (r.error ? " bad" : who ? " good" : "");
      setText(status, r.error ? r.error
        : who ? who + (r.status !== "answered" && r.status !== "pending" ? " · " + r.status : "")
        : !open ? r.status
        : r.ack ? r.ack : "");
    };
    c._refresh();
    return c;
  }

  // ------------------------------------------------------------------ rendering

  const dirty = new Set();
  let scheduled = false;
  function touch(what) { dirty.add(what); if (!scheduled) { scheduled = true; setTimeout(render, 100); } }

  function filters() {
    const since = Number($("f-since").value);
    const sev = $("f-severity").value;
    return {
      text: $("f-text").value.trim().toLowerCase(),
      agent: $("f-agent").value,
      session: $("f-session").value.trim(),
      type: $("f-type").value.trim(),
      sev: sev ? SEVERITIES.indexOf(sev) : -1,
      since: since ? Date.now() - since * 1000 : 0,
    };
  }
  function eventMatches(ev, f) {
    if (f.agent && ev.agent !== f.agent) return false;
    if (f.session && !String(ev.session || "").includes(f.session)) return false;
    if (f.type && !ev.type.startsWith(f.type)) return false;
    if (f.sev >= 0 && SEVERITIES.indexOf(ev._sev) < f.sev) return false;
    if (f.since && ev._t < f.since) return false;
    if (f.text && !ev._text.includes(f.text)) return false;
    return true;
  }
  let found = new Set();   // sessions the bridge found by the text of their events
  function sessionMatches(s, f) {
    if (f.agent && s.agent !== f.agent) return false;
    if (f.session && !s.id.includes(f.session)) return false;
    if (f.since && s.last < f.since) return false;
    if (f.sev >= 0 && s.sev < f.sev) return false;
    if (f.type) { let any = false; for (const t of s.types) if (t.startsWith(f.type)) { any = true; break; } if (!any) return false; }
    if (f.text && !s._text.includes(f.text) && !found.has(s.key)) return false;
    return true;
  }

  function summary(ev) {
    const d = data(ev);
    const t = ev.type;
    if (t.startsWith("tool.")) return (d.tool && d.tool.name ? d.tool.name : "") + (d.error && d.error.message ? ": " + clip(d.error.message) : "");
    if (t.startsWith("attention.")) return [d.kind, d.prompt, d.resolution, d.by ? "by " + d.by : null, d.answer ? "answer " + clip(d.answer, 200) : null].filter(Boolean).map((x) => clip(x)).join(" · ");
    if (t.startsWith("control.")) return ev.agent + (d.by ? " for " + clip(d.by, 64) : "") + (d.answer ? " answer " + clip(d.answer, 200) : "") + (d.reason ? " " + d.reason : "");
    if (t === "session.started") return clip(d.label || "");
    if (t === "run.failed") return clip(d.reason || "");
    if (t === "progress.status") return clip(d.message || "");
    if (t === "error.raised") return clip((d.error && (d.error.message || d.error.type)) || "");
    const keys = Object.keys(d);
    return keys.length ? clip(keys.slice(0, 8).join(", ")) : "";
  }

  let pendingCount = 0;
  function renderInbox() {
    const inbox = $("inbox"), settled = $("settled");
    const pending = [], done = [];
    for (const r of requests.values()) (r.status === "pending" ? pending : done).push(r);
    const recent = done.slice(-20);
    for (const r of pending.concat(recent)) {
      let c = cards.get(r.req.id);
      if (!c) { c = card(r); cards.set(r.req.id, c); }
      c._refresh();
      const home = r.status === "pending" ? inbox : settled;
      if (c.parentNode !== home) home.prepend(c);
    }
    const keep = new Set(recent);
    for (const [id, c] of cards) {
      const r = requests.get(id);
      if (!r || (r.status !== "pending" && !keep.has(r))) { c.remove(); cards.delete(id); }
    }
    pendingCount = pending.length;
    setText($("inbox-count"), pending.length ? "(" + pending.length + ")" : "");
    setText($("settled-count"), done.length ? "(" + done.length + ")" : "");
    $("inbox-empty").hidden = pending.length > 0;
    document.title = (pending.length ? "(" + pending.length + ") " : "") + "aep-bridge";
  }

  function costText(c) {
    return Object.entries(c).map(([cur, v]) => v.toFixed(4) + " " + cur).join(" + ");
  }
  function tokensOf(s) {
    const t = s.tokens, calls = t.calls > 0;
    return { tin: calls ? t.call_in : t.run_in, tout: calls ? t.call_out : t.run_out, cost: calls ? t.call_cost : t.run_cost };
  }
  function tokenText(s) {
    const { tin, tout, cost } = tokensOf(s);
    return "tokens " + tin + " in / " + tout + " out" + (Object.keys(cost).length ? " · cost " + costText(cost) : "");
  }

  // Session rows: built once per pooled row, filled when the row shows another session or
  // its session changed, and their live durations ticked in place.
  function sessionRow() {
    const r = el("div", "session");
    r.setAttribute("role", "listitem");
    r._badge = el("span", "badge"); r._agent = el("span", "agent-name"); r._sid = el("span", "sid");
    r._label = el("span", "label"); r._dur = el("span", "dur"); r._tokens = el("span", "tokens");
    r._run = el("span", "run"); r._count = el("span", "dur count");
    r.append(r._badge, r._agent, r._sid, r._label, r._run, r._tokens, r._count, r._dur);
    r.addEventListener("click", () => { if (r._item) select(r._item); });
    return r;
  }
  function sessionDur(r, s, now) { setText(r._dur, dur(s.first, s.ended || now)); }
  function runText(s, now) {
    if (!s.run) return s.runs ? s.runs + " runs" : "";
    const st = s.run.status === "running" && s.ended ? "unclosed" : s.run.status;
    return "run " + short(s.run.id) + " " + st + " " + dur(s.run.start, s.run.end || s.ended || now) + (s.runs > 1 ? " (" + s.runs + " runs)" : "");
  }
  function fillSession(r, s) {
    const now = Date.now();
    r.dataset.session = s.id;
    r.dataset.agent = s.agent;
    r.classList.toggle("selected", detailKey === s.key);
    const pend = Array.from(requests.values()).some((q) => q.session === s.key && q.status === "pending");
    setText(r._badge, pend ? "waiting" : s.ended ? "ended" : "live");
    r._badge.className = "badge" + (pend ? " pending" : s.ended ? " ended" : "");
    setText(r._agent, s.agent);
    setText(r._sid, short(s.id));
    r._sid.title = s.id;
    setText(r._label, clip(s.label, 160));
    setText(r._run, runText(s, now));
    setText(r._tokens, tokenText(s));
    setText(r._count, s.events + " events" + (s.tools ? " · " + s.tools + " tools" : "") + (s.failed ? " · " + s.failed + " failed" : ""));
    sessionDur(r, s, now);
  }

  function liveRow() {
    const r = el("div", "ev");
    r.setAttribute("role", "listitem");
    r._c = [el("span"), el("span"), el("span"), el("span"), el("span"), el("span", "summary")];
    r.append(...r._c);
    return r;
  }
  function fillEvent(r, ev) {
    r.dataset.type = ev.type;
    const c = r._c;
    setText(c[0], clock(ev._t)); setText(c[1], ev.agent); setText(c[2], short(ev.session));
    setText(c[3], ev.type); setText(c[4], ev._sev); c[4].className = "sev-" + ev._sev; setText(c[5], summary(ev));
  }

  let sessionList, liveList, detailList;
  let shownSessions = [];
  function renderSessions() {
    const f = filters();
    const list = [];
    const counts = new Map();
    let tin = 0, tout = 0;
    const cost = {};
    for (const s of sessions.values()) {
      counts.set(s.agent, (counts.get(s.agent) || 0) + 1);
      const t = tokensOf(s);
      tin += t.tin; tout += t.tout;
      for (const [k, v] of Object.entries(t.cost)) cost[k] = (cost[k] || 0) + v;
      if (sessionMatches(s, f)) list.push(s);
    }
    list.sort((a, b) => b.last - a.last || (a.key < b.key ? -1 : 1));
    shownSessions = list;
    sessionList.set(list);
    renderAgents(counts, f);
    $("sessions-empty").hidden = sessions.size > 0;
    setText($("sessions-count"), "(" + list.length + (list.length !== sessions.size ? " of " + sessions.size : "") + ")");
    setText($("totals"), sessions.size ? sessions.size + " sessions · tokens " + tin + " in / " + tout + " out" + (Object.keys(cost).length ? " · " + costText(cost) : "") : "");
  }

  function renderAgents(counts, f) {
    const box = $("agents");
    const names = Array.from(counts.keys()).sort();
    const have = new Map(Array.from(box.children).map((c) => [c.dataset.agent, c]));
    for (const a of names) {
      let chip = have.get(a);
      if (!chip) {
        chip = el("button", "chip agent"); chip.type = "button"; chip.dataset.agent = a;
        chip.addEventListener("click", () => { const s = $("f-agent"); s.value = s.value === a ? "" : a; onFilter(); });
        box.append(chip);
      }
      setText(chip, a + " " + counts.get(a));
      chip.classList.toggle("on", f.agent === a);
      have.delete(a);
    }
    for (const c of have.values()) c.remove();
  }

  function renderEvents() {
    const f = filters();
    const list = [];
    for (let i = live.length - 1; i >= 0; i--) if (eventMatches(live[i], f)) list.push(live[i]);
    liveList.set(list);
    setText($("events-count"), "(" + list.length + (live.length >= MAX_LIVE ? ", the newest " + MAX_LIVE + " kept" : "") + ")");
  }

  function render() {
    scheduled = false;
    if ($("app").hidden) return;
    const what = new Set(dirty);
    dirty.clear();
    if (what.has("inbox")) { renderInbox(); what.add("sessions"); }
    if (what.has("sessions")) renderSessions();
    if (what.has("events")) renderEvents();
    if (what.has("detail")) renderDetail();
  }

  // ------------------------------------------------------------------ search

  // Typing filters what the page holds at once; words not in a session's name or label are
  // then looked for in the sessions' events by the bridge (a bounded scan of the logs).
  let searchTimer = null, searchGen = 0, searchNext = null;
  function onFilter() {
    renderSessions();
    renderEvents();
    const text = $("f-text").value.trim();
    clearTimeout(searchTimer);
    searchGen++;
    found = new Set();
    searchNext = null;
    $("search-more").hidden = true;
    if (!text || !hasHistory) { setText($("search-status"), ""); return; }
    setText($("search-status"), "searching the sessions' events…");
    searchTimer = setTimeout(() => search(searchGen, null), 250);
  }
  async function search(gen, cursor) {
    const f = filters();
    const q = new URLSearchParams({ text: $("f-text").value.trim(), limit: "200" });
    if (f.agent) q.set("agent", f.agent);
    if (f.session) q.set("session", f.session);
    if (f.type) q.set("type", f.type);
    if (f.sev >= 0) q.set("severity", SEVERITIES[f.sev]);
    if (f.since) q.set("since", String(Math.floor(f.since)));
    if (cursor) q.set("before", cursor);
    let page;
    try { page = await getJSON("/ui/history?" + q); } catch (e) { if (gen === searchGen) setText($("search-status"), "search failed: " + e.message); return; }
    if (gen !== searchGen) return;
    for (const x of page.sessions || []) { const s = fromSummary(x); if (s) found.add(s.key); }
    searchNext = page.next || null;
    renderSessions();
    performance.mark("aep:searched");
    setText($("search-status"), found.size + " sessions with these words in their events" + (searchNext ? " so far (" + (page.scanned / 1048576).toFixed(1) + " MB read)" : ""));
    $("search-more").hidden = !searchNext;
  }
  $("search-more").addEventListener("click", () => { if (searchNext) search(searchGen, searchNext); });

  // ------------------------------------------------------------------ a session's detail

  let detailKey = null, detailEvents = [], detailNext = null, detailGen = 0;
  function select(s) {
    detailKey = s.key;
    detailEvents = s.tail ? s.tail.slice().reverse() : [];
    detailNext = null;
    if (!s.tail) s.tail = [];
    $("detail").hidden = false;
    setText($("detail-title"), s.id);
    $("detail-title").dataset.session = s.id;
    sessionList.tick((r, x) => r.classList.toggle("selected", x.key === detailKey));
    renderDetail();
    $("detail").scrollIntoView({ block: "nearest" });
    if (hasHistory) loadDetail(s, null);
  }
  async function loadDetail(s, cursor) {
    const gen = ++detailGen;
    setText($("detail-status"), "reading its log…");
    let page;
    try {
      const q = new URLSearchParams({ agent: s.agent, session: s.id, limit: "500" });
      if (cursor) q.set("before", cursor);
      page = await getJSON("/ui/events?" + q);
    } catch (e) { if (gen === detailGen) setText($("detail-status"), "its log is not readable here (" + e.message + ")"); return; }
    if (gen !== detailGen || detailKey !== s.key) return;
    const have = new Set(detailEvents.map((e) => e.source + "\n" + e.id));
    for (const ev of page.events || []) {
      if (!ev || typeof ev.type !== "string" || have.has(ev.source + "\n" + ev.id)) continue;
      ev._t = ms(ev.time); ev._sev = severity(ev);
      detailEvents.push(ev);
    }
    detailEvents.sort((a, b) => b._t - a._t);
    detailNext = page.next || null;
    setText($("detail-status"), detailEvents.length + " events" + (detailNext ? ", older ones in its log" : ""));
    $("detail-older").hidden = !detailNext;
    touch("detail");
  }
  function detailLive(ev) {
    if (!detailEvents.some((e) => e.source === ev.source && e.id === ev.id)) detailEvents.unshift(ev);
    touch("detail");
  }
  $("detail-older").addEventListener("click", () => { const s = sessions.get(detailKey); if (s && detailNext) loadDetail(s, detailNext); });
  $("detail-close").addEventListener("click", () => { detailKey = null; $("detail").hidden = true; sessionList.tick((r) => r.classList.remove("selected")); });

  // The run -> tool / attention tree of the loaded events, with durations.
  function renderDetail() {
    const s = sessions.get(detailKey);
    if (!s) return;
    const now = Date.now();
    setText($("detail-meta"), s.agent + " · " + (s.label ? clip(s.label, 200) + " · " : "") + (s.ended ? "ended " : "live ") + dur(s.first, s.ended || now)
      + " · " + tokenText(s) + " · " + s.events + " events");
    const runs = new Map(), loose = [];
    const tools = new Map();
    for (let i = detailEvents.length - 1; i >= 0; i--) {
      const ev = detailEvents[i], t = ev.type, d = data(ev);
      let run = null;
      if (ev.run) { run = runs.get(ev.run); if (!run) { run = { id: ev.run, start: ev._t, end: null, status: "running", items: [] }; runs.set(ev.run, run); } }
      if (run && t === "run.started") run.start = ev._t;
      if (run && (t === "run.finished" || t === "run.failed" || t === "run.cancelled")) {
        run.end = ev._t; run.status = t.slice(4);
        if (num(d.duration_ms) > 0) run.start = run.end - num(d.duration_ms);
      }
      const items = run ? run.items : loose;
      if (t.startsWith("tool.")) {
        const tool = d.tool && typeof d.tool === "object" ? d.tool : {};
        const id = (ev.run || "") + "/" + (tool.call_id || (tool.name || "?") + "/" + (t === "tool.requested" ? ev.id : ""));
        let item = tools.get(id);
        if (!item) { item = { kind: "tool", name: tool.name || "?", start: ev._t, end: null, status: "running" }; tools.set(id, item); items.push(item); }
        if (t !== "tool.requested") { item.end = ev._t; item.status = t.slice(5); if (num(d.duration_ms) > 0) item.start = item.end - num(d.duration_ms); }
      }
      if (t === "attention.requested") items.push({ kind: "attention", id: ev.id, what: d.kind || "request", start: ev._t });
    }
    const tree = $("detail-tree");
    const out = [];
    for (const run of Array.from(runs.values()).slice(-20)) {
      const li = el("li", "run");
      const rs = run.status === "running" && s.ended ? "unclosed" : run.status;
      li.append(el("span", null, "run " + short(run.id) + " "), el("span", "badge" + (rs === "running" ? " pending" : rs === "finished" ? "" : " failed"), rs),
        el("span", "dur", dur(run.start, run.end || s.ended || now)));
      if (run.items.length) {
        const sub = el("ul", "tree");
        for (const item of run.items.slice(-50)) sub.append(treeItem(item, now));
        if (run.items.length > 50) sub.append(el("li", "dur", (run.items.length - 50) + " earlier"));
        li.append(sub);
      }
      out.push(li);
    }
    for (const item of loose.slice(-50)) out.push(treeItem(item, now));
    tree.replaceChildren(...out);
    detailList.set(detailEvents);
  }
  function treeItem(item, now) {
    const li = el("li");
    if (item.kind === "tool") {
      li.append(el("span", null, "tool " + clip(item.name, 120) + " "));
      li.append(el("span", "badge" + (item.status === "running" ? " pending" : item.status === "completed" ? "" : " failed"), item.status));
      li.append(el("span", "dur", dur(item.start, item.end || now)));
    } else {
      const r = requests.get(item.id);
      const st = r ? r.status : "seen";
      li.append(el("span", null, "attention " + item.what + " "));
      li.append(el("span", "badge" + (st === "pending" ? " pending" : ""), st));
      li.append(el("span", "dur", dur(item.start, r && r.end ? r.end : r && st === "pending" ? now : item.start)));
    }
    return li;
  }

  // ------------------------------------------------------------------ wiring

  sessionList = new VList($("sessions"), sessionRow, fillSession);
  liveList = new VList($("events"), liveRow, fillEvent);
  detailList = new VList($("detail-events"), liveRow, fillEvent);
  for (const id of ["f-text", "f-agent", "f-session", "f-type", "f-severity", "f-since"]) $(id).addEventListener("input", onFilter);
  $("older").addEventListener("click", () => loadHistory(true));
  notifyButton();
  // Live durations and ages tick, on the rows in view only; nothing ticks in a hidden tab.
  setInterval(() => {
    if ($("app").hidden || document.hidden) return;
    const now = Date.now();
    sessionList.tick((r, s) => { if (!s.ended) { sessionDur(r, s, now); if (s.run && !s.run.end) setText(r._run, runText(s, now)); } });
    for (const [id, c] of cards) { const r = requests.get(id); if (r && r.status === "pending") c._refresh(); }
  }, 1000);
  start();
})();
