// aep-bridge web view: reads the collector's SSE stream (/ui/stream, replay + live),
// groups sessions by agent, and answers attention requests through /ui/answer.
// Every event field reaches the page through textContent or a form control's value,
// never as markup. No dependencies, no build step.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const MAX_EVENTS = 5000;          // events kept for the table and search
  const MAX_SESSION_EVENTS = 2000;  // per session
  const MAX_TEXT = 400;             // characters of one field shown
  const MAX_ROWS = 200;             // table rows drawn
  const MAX_SEEN = 200000;          // event keys remembered for skipping replays
  const MAX_SESSIONS = 500;         // sessions kept; the ended ones least recently active go first
  const MAX_SETTLED = 200;          // settled requests kept
  const SEVERITIES = ["debug", "info", "notice", "warning", "error", "critical"];

  let nonce = null;
  let control = false;
  let stream = null;      // AbortController of the open stream
  let backoff = 500;
  let bridgeEpoch = null;  // the running bridge's epoch and source prefix, from /ui/session
  let bridgeStamps = null;

  const seen = new Set();            // source \n id: a replay after a reconnect adds nothing twice
  const log = [];                    // events, oldest first
  const sessions = new Map();        // session id -> session model
  const requests = new Map();        // attention.requested id -> request model
  const commands = new Map();        // command id -> command event (who answered)
  const sent = new Map();            // command id sent from this page -> request id
  const cards = new Map();           // request id -> card element

  // ------------------------------------------------------------------ helpers

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
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
    return Math.floor(s / 3600) + "h" + String(Math.floor(s / 60) % 60).padStart(2, "0") + "m";
  }
  function clock(t) { return new Date(t).toLocaleTimeString(); }
  function data(ev) { return ev.data && typeof ev.data === "object" ? ev.data : {}; }
  function severity(ev) {
    if (typeof ev.severity === "string") return ev.severity;
    if (ev.type === "attention.requested") return "notice";
    if (/\.failed$|^error\./.test(ev.type)) return "warning";
    return "info";
  }
  function num(v) { const n = typeof v === "string" ? Number(v) : v; return Number.isFinite(n) ? n : 0; }
  function short(s) { s = String(s || ""); return s.length > 14 ? s.slice(0, 8) + "…" + s.slice(-4) : s; }

  // ------------------------------------------------------------------ model

  // Bounded: past MAX_SESSIONS the ended sessions least recently active are forgotten, and
  // past MAX_SETTLED the oldest settled requests.
  function prune() {
    if (sessions.size > MAX_SESSIONS) {
      const ended = Array.from(sessions.values()).filter((s) => s.ended).sort((a, b) => a.last - b.last);
      for (const s of ended.slice(0, sessions.size - MAX_SESSIONS)) sessions.delete(s.id);
    }
    let settled = 0;
    for (const r of requests.values()) if (r.status !== "pending") settled++;
    for (const [id, r] of requests) {
      if (settled <= MAX_SETTLED) break;
      if (r.status !== "pending") { requests.delete(id); settled--; }
    }
  }

  function sessionOf(ev) {
    let s = sessions.get(ev.session);
    if (!s) {
      prune();
      s = { id: ev.session, agent: ev.agent, first: ms(ev.time), last: ms(ev.time), ended: null, label: "",
        runs: new Map(), loose: [], events: [], tokensIn: 0, tokensOut: 0, callsIn: 0, callsOut: 0,
        cost: {}, callCost: {}, calls: 0 };
      sessions.set(ev.session, s);
    }
    return s;
  }
  function runOf(s, ev) {
    if (!ev.run) return null;
    let r = s.runs.get(ev.run);
    if (!r) { r = { id: ev.run, start: ms(ev.time), end: null, status: "running", items: [], tools: new Map() }; s.runs.set(ev.run, r); }
    return r;
  }
  function addCost(into, cost) {
    if (!cost || typeof cost !== "object" || typeof cost.currency !== "string") return;
    const total = num(cost.total);
    if (total > 0) into[cost.currency] = (into[cost.currency] || 0) + total;
  }
  // Tokens and cost: AEP `usage`/`cost` (AEP-0002 §5.2) on runs and tools, and the agents'
  // own model-call records (x.<vendor>.otel.*). When a session has model calls, their sum
  // is shown (a run's usage would count them again).
  const IN_KEYS = ["gen_ai.usage.input_tokens", "input_tokens", "input_token_count"];
  const OUT_KEYS = ["gen_ai.usage.output_tokens", "output_tokens", "output_token_count"];
  function usage(s, ev) {
    const d = data(ev);
    const u = d.usage && typeof d.usage === "object" ? Object.assign({}, d, d.usage) : d;
    const pick = (keys) => { for (const k of keys) if (k in u) return num(u[k]); return 0; };
    if (ev.type.startsWith("x.")) {
      const i = pick(IN_KEYS), o = pick(OUT_KEYS);
      if (i || o) { s.callsIn += i; s.callsOut += o; s.calls += 1; }
      if (num(d.cost_usd) > 0) s.callCost.USD = (s.callCost.USD || 0) + num(d.cost_usd);
      addCost(s.callCost, d.cost);
    } else if (ev.type === "run.finished" || ev.type === "run.failed" || ev.type.startsWith("tool.")) {
      s.tokensIn += pick(IN_KEYS.slice(0, 1));
      s.tokensOut += pick(OUT_KEYS.slice(0, 1));
      addCost(s.cost, d.cost);
    }
  }

  function ingest(ev) {
    if (!ev || typeof ev !== "object" || typeof ev.type !== "string") return;
    const key = ev.source + "\n" + ev.id;
    if (seen.has(key)) return;
    seen.add(key);
    if (seen.size > MAX_SEEN) for (const k of seen) { seen.delete(k); if (seen.size <= MAX_SEEN * 0.9) break; }
    ev._t = ms(ev.time);
    ev._sev = severity(ev);
    ev._text = (ev.type + " " + ev.agent + " " + (ev.session || "") + " " + clip(ev.data || "", 4000)).toLowerCase();
    log.push(ev);
    if (log.length > MAX_EVENTS) log.splice(0, log.length - MAX_EVENTS);

    const t = ev.type;
    const isCommand = t.startsWith("control.") && t !== "control.accepted" && t !== "control.rejected";
    if (isCommand) {
      commands.set(ev.id, ev);
      if (commands.size > MAX_SETTLED * 5) commands.delete(commands.keys().next().value);
      touch();
      return;
    }
    if (t === "control.accepted" || t === "control.rejected") {
      const req = sent.get(ev.cause);
      if (req && requests.has(req)) {
        const r = requests.get(req);
        r.ack = t === "control.accepted" ? "accepted" : "rejected: " + (data(ev).reason || "") + (data(ev).detail ? " (" + clip(data(ev).detail, 200) + ")" : "");
        if (t === "control.rejected") r.busy = false;
      }
    }
    if (ev.session) {
      const s = sessionOf(ev);
      s.last = Math.max(s.last, ev._t);
      s.first = Math.min(s.first, ev._t);
      s.events.push(ev);
      if (s.events.length > MAX_SESSION_EVENTS) s.events.splice(0, s.events.length - MAX_SESSION_EVENTS);
      usage(s, ev);
      const d = data(ev);
      if (t === "session.started" && typeof d.label === "string") s.label = d.label;
      if (t === "session.ended") s.ended = ev._t;
      const run = runOf(s, ev);
      if (t === "run.started" && run) run.start = ev._t;
      if (run && (t === "run.finished" || t === "run.failed" || t === "run.cancelled")) {
        run.end = ev._t; run.status = t.slice(4);
        if (num(d.duration_ms) > 0) run.start = run.end - num(d.duration_ms);
      }
      if (t.startsWith("tool.")) {
        const tool = d.tool && typeof d.tool === "object" ? d.tool : {};
        const id = tool.call_id || ((ev.run || "") + "/" + (tool.name || "?") + "/" + (t === "tool.requested" ? ev.id : ""));
        const holder = run || { tools: s.looseTools || (s.looseTools = new Map()), items: s.loose };
        let item = holder.tools.get(id);
        if (!item) { item = { kind: "tool", name: tool.name || "?", start: ev._t, end: null, status: "running" }; holder.tools.set(id, item); holder.items.push(item); }
        if (t !== "tool.requested") { item.end = ev._t; item.status = t.slice(5); if (num(d.duration_ms) > 0) item.start = item.end - num(d.duration_ms); }
      }
      if (t === "attention.requested") {
        prune();
        const r = { req: ev, status: "pending", start: ev._t, end: null };
        if (bridgeEpoch !== null && String(ev.source).startsWith(bridgeStamps) && typeof ev.epoch === "number" && ev.epoch < bridgeEpoch) {
          r.status = "expired (the bridge restarted)";
        }
        requests.set(ev.id, r);
        (run ? run.items : s.loose).push({ kind: "attention", request: r });
      }
      if (t.startsWith("attention.") && t !== "attention.requested" && ev.subject && requests.has(ev.subject)) {
        const r = requests.get(ev.subject);
        if (t === "attention.answered") r.answered = ev;
        if (t === "attention.resolved") { r.status = d.resolution || "resolved"; r.end = ev._t; }
        if (t === "attention.timeout") { r.status = "timeout"; r.end = ev._t; }
      }
    }
    touch();
  }

  // ------------------------------------------------------------------ stream

  function setConn(text, cls) { const c = $("conn"); c.textContent = text; c.className = "conn " + (cls || ""); }

  function onFrame(frame) {
    const lines = frame.split("\n");
    const parts = [];
    for (const l of lines) {
      if (l.startsWith("data:")) parts.push(l.slice(l.startsWith("data: ") ? 6 : 5));
    }
    if (!parts.length) return;
    try { ingest(JSON.parse(parts.join("\n"))); } catch (e) { /* not an event: skipped */ }
  }

  // The stream asks for the whole replay on every (re)connect: it holds every session the
  // collector buffers, including sessions that began while the page was away, and what the
  // page has seen already is skipped. After a bridge restart it holds the new run's events.
  async function connect() {
    if (stream) stream.abort();
    const ctl = new AbortController();
    stream = ctl;
    try {
      const res = await fetch("/ui/stream?from=all", { signal: ctl.signal, credentials: "same-origin", cache: "no-store" });
      if (res.status === 401) { showLogin(); return; }
      if (!res.ok || !res.body) throw new Error("HTTP " + res.status);
      setConn("live", "live");
      backoff = 500;
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
    expire(s.epoch, s.stamps);
    $("login").hidden = true;
    $("app").hidden = false;
    $("logout").hidden = !s.token;
    const note = $("control-note");
    note.hidden = control;
    note.textContent = control ? "" : "Read-only: answering needs the bridge to run with a token (AEP-0004 §4.1).";
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
    touch();
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

  // ------------------------------------------------------------------ answering

  async function answer(r, ans, retried) {
    r.busy = true; r.ack = "sending"; r.error = null; touch();
    let res;
    try {
      res = await fetch("/ui/answer", {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json", "x-aep-nonce": nonce || "" },
        body: JSON.stringify({ request: r.req.id, session: r.req.session, answer: ans }),
      });
    } catch (e) {
      r.busy = false; r.ack = null; r.error = "the bridge is unreachable"; touch(); return;
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
      r.ack = "sent, waiting for the agent";
    } else {
      r.busy = false; r.ack = null;
      r.error = (body.error || ("HTTP " + res.status)) + (body.detail ? ": " + body.detail : "");
    }
    touch();
  }

  function whoAnswered(r) {
    const a = r.answered;
    if (!a) return null;
    const cmd = commands.get(a.cause);
    const d = data(a);
    const by = cmd ? cmd.agent : (typeof d.by === "string" ? d.by : (d.via === "oob" ? "the agent's own prompt" : "a control sender"));
    const ans = d.answer || {};
    const what = ans.option !== undefined ? "option " + clip(ans.option, 80)
      : ans.text !== undefined ? "text " + clip(ans.text, 120)
      : ans.values !== undefined ? "values " + clip(ans.values, 200) : "an answer";
    return "answered by " + by + " at " + clock(a._t) + " (" + what + ")";
  }

  function fieldControl(f) {
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
    if (f.required && f.type !== "boolean") input.required = true;
    wrap.append(input);
    if (f.type === "select" && f.other) {
      const other = el("input"); other.type = "text"; other.placeholder = "other"; other.dataset.other = String(f.id);
      wrap.append(other);
    }
    return wrap;
  }

  function formValues(form) {
    const values = {};
    for (const c of form.querySelectorAll("[data-field]")) {
      const id = c.dataset.field, type = c.dataset.type;
      if (type === "boolean") values[id] = c.checked;
      else if (type === "number") { if (c.value !== "") values[id] = Number(c.value); }
      else if (type === "select" && c.multiple) { const v = Array.from(c.selectedOptions).map((o) => o.value); if (v.length) values[id] = v; }
      else if (c.value !== "") values[id] = c.value;
    }
    for (const o of form.querySelectorAll("[data-other]")) if (o.value !== "") values[o.dataset.other] = o.value;
    return values;
  }

  // A card is built once per request (what the user types survives redraws) and refreshed.
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
    if (!answerable) {
      c.append(el("div", "note", "Answer it in the agent's own prompt (respond_via: " + clip(via.join(", "), 80) + ")."));
    } else if (d.kind === "form") {
      const form = el("form", "fields");
      for (const f of Array.isArray(d.fields) ? d.fields : []) if (f && typeof f === "object") form.append(fieldControl(f));
      const submit = el("button", "opt", "Send"); submit.type = "submit"; form.append(submit);
      form.addEventListener("submit", (e) => { e.preventDefault(); answer(r, { values: formValues(form) }); });
      controls.push(form);
      c.append(form);
    } else {
      const actions = el("div", "actions");
      for (const o of Array.isArray(d.options) ? d.options : []) {
        if (!o || typeof o !== "object") continue;
        const b = el("button", "opt", clip(o.label || o.id, 80));
        b.type = "button";
        b.dataset.option = String(o.id);
        b.title = "option " + clip(o.id, 80);
        b.addEventListener("click", () => answer(r, { option: String(o.id) }));
        actions.append(b);
      }
      const text = el("input"); text.type = "text"; text.placeholder = "or answer in words"; text.className = "free";
      const send = el("button", null, "Send text"); send.type = "button"; send.className = "send-text";
      send.addEventListener("click", () => { if (text.value.trim()) answer(r, { text: text.value }); });
      text.addEventListener("keydown", (e) => { if (e.key === "Enter" && text.value.trim()) answer(r, { text: text.value }); });
      actions.append(text, send);
      controls.push(actions);
      c.append(actions);
    }
    const status = el("div", "status");
    status.setAttribute("role", "status");
    c.append(status);
    c._refresh = () => {
      const s = sessions.get(ev.session);
      meta.textContent = ev.agent + " · session " + short(ev.session) + " · " + (d.kind || "request") + " · asked " + clock(r.start)
        + (r.status === "pending" ? " (" + dur(r.start, Date.now()) + " ago)" : "") + (s && s.label ? " · " + clip(s.label, 80) : "");
      const open = r.status === "pending";
      c.classList.toggle("settled", !open);
      for (const box of controls) for (const x of box.querySelectorAll("button, input, select")) x.disabled = !open || !control || !!r.busy;
      const who = whoAnswered(r);
      status.className = "status" + (r.error ? " bad" : who ? " good" : "");
      status.textContent = r.error ? r.error
        : who ? who + (r.status !== "answered" && r.status !== "pending" ? " · " + r.status : "")
        : !open ? r.status
        : r.ack ? r.ack : "";
    };
    c._refresh();
    return c;
  }

  // ------------------------------------------------------------------ rendering

  let scheduled = false;
  function touch() { if (!scheduled) { scheduled = true; setTimeout(render, 40); } }

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
  function matches(ev, f) {
    if (f.agent && ev.agent !== f.agent) return false;
    if (f.session && !String(ev.session || "").includes(f.session)) return false;
    if (f.type && !ev.type.startsWith(f.type)) return false;
    if (f.sev >= 0 && SEVERITIES.indexOf(ev._sev) < f.sev) return false;
    if (f.since && ev._t < f.since) return false;
    if (f.text && !ev._text.includes(f.text)) return false;
    return true;
  }

  function summary(ev) {
    const d = data(ev);
    const t = ev.type;
    if (t.startsWith("tool.")) return (d.tool && d.tool.name ? d.tool.name : "") + (d.error && d.error.message ? ": " + clip(d.error.message) : "");
    if (t.startsWith("attention.")) return [d.kind, d.prompt, d.resolution, d.answer ? "answer " + clip(d.answer, 200) : null].filter(Boolean).map((x) => clip(x)).join(" · ");
    if (t.startsWith("control.")) return ev.agent + (d.answer ? " answer " + clip(d.answer, 200) : "") + (d.reason ? " " + d.reason : "");
    if (t === "session.started") return clip(d.label || "");
    if (t === "run.failed") return clip(d.reason || "");
    if (t === "progress.status") return clip(d.message || "");
    if (t === "error.raised") return clip((d.error && (d.error.message || d.error.type)) || "");
    const keys = Object.keys(d);
    return keys.length ? clip(keys.slice(0, 8).join(", ")) : "";
  }

  function renderInbox() {
    const inbox = $("inbox"), settled = $("settled");
    const pending = [], done = [];
    for (const r of requests.values()) (r.status === "pending" ? pending : done).push(r);
    for (const r of pending.concat(done.slice(-20))) {
      let c = cards.get(r.req.id);
      if (!c) { c = card(r); cards.set(r.req.id, c); }
      c._refresh();
      const home = r.status === "pending" ? inbox : settled;
      if (c.parentNode !== home) home.prepend(c);
    }
    for (const [id, c] of cards) {
      const r = requests.get(id);
      if (r && r.status !== "pending" && !done.slice(-20).includes(r)) { c.remove(); cards.delete(id); }
    }
    $("inbox-count").textContent = pending.length ? "(" + pending.length + ")" : "";
    $("settled-count").textContent = done.length ? "(" + done.length + ")" : "";
    $("inbox-empty").hidden = pending.length > 0;
  }

  function costText(c) {
    return Object.entries(c).map(([cur, v]) => v.toFixed(4) + " " + cur).join(" + ");
  }

  function treeItem(item, now) {
    const li = el("li");
    if (item.kind === "tool") {
      li.append(el("span", null, "tool " + clip(item.name, 120) + " "));
      li.append(el("span", "badge" + (item.status === "running" ? " pending" : item.status === "completed" ? "" : " failed"), item.status));
      li.append(el("span", "dur", dur(item.start, item.end || now)));
    } else {
      const r = item.request, d = data(r.req);
      li.append(el("span", null, "attention " + (d.kind || "") + " "));
      li.append(el("span", "badge" + (r.status === "pending" ? " pending" : ""), r.status));
      li.append(el("span", "dur", dur(r.start, r.end || now)));
    }
    return li;
  }

  function renderSessions(f, now) {
    const box = $("sessions");
    box.replaceChildren();
    const agents = new Map();
    for (const s of sessions.values()) {
      if (f.agent && s.agent !== f.agent) continue;
      if (f.session && !s.id.includes(f.session)) continue;
      if (f.since && s.last < f.since) continue;
      if ((f.text || f.type || f.sev >= 0) && !s.events.some((e) => matches(e, f))) continue;
      if (!agents.has(s.agent)) agents.set(s.agent, []);
      agents.get(s.agent).push(s);
    }
    const agentSelect = $("f-agent");
    const known = new Set(Array.from(agentSelect.options).map((o) => o.value));
    for (const s of sessions.values()) if (!known.has(s.agent)) { const o = el("option", null, s.agent); o.value = s.agent; agentSelect.append(o); known.add(s.agent); }
    let total = { in: 0, out: 0, cost: {} };
    for (const [agent, list] of Array.from(agents).sort((a, b) => a[0].localeCompare(b[0]))) {
      const group = el("section", "agent");
      group.dataset.agent = agent;
      group.append(el("h3", null, agent + " (" + list.length + ")"));
      list.sort((a, b) => b.last - a.last);
      for (const s of list) {
        const div = el("div", "session");
        div.dataset.session = s.id;
        const head = el("div", "head");
        head.append(el("span", "badge" + (s.ended ? " ended" : ""), s.ended ? "ended" : "live"));
        head.append(el("span", "sid", s.id));
        if (s.label) head.append(el("span", "label", clip(s.label, 160)));
        head.append(el("span", "dur", dur(s.first, s.ended || now)));
        const useCalls = s.calls > 0;
        const tin = useCalls ? s.callsIn : s.tokensIn, tout = useCalls ? s.callsOut : s.tokensOut;
        const cost = useCalls ? s.callCost : s.cost;
        total.in += tin; total.out += tout;
        for (const [k, v] of Object.entries(cost)) total.cost[k] = (total.cost[k] || 0) + v;
        const tok = el("span", "tokens", "tokens " + tin + " in / " + tout + " out" + (Object.keys(cost).length ? " · cost " + costText(cost) : ""));
        head.append(tok);
        head.append(el("span", "dur", s.events.length + " events"));
        div.append(head);
        const tree = el("ul", "tree");
        for (const r of s.runs.values()) {
          const li = el("li", "run");
          li.append(el("span", null, "run " + short(r.id) + " "));
          // A run still open when its session ended was never closed (a restart between them).
          const rs = r.status === "running" && s.ended ? "unclosed" : r.status;
          li.append(el("span", "badge" + (rs === "running" ? " pending" : rs === "finished" ? "" : " failed"), rs));
          li.append(el("span", "dur", dur(r.start, r.end || (s.ended || now))));
          if (r.items.length) {
            const sub = el("ul", "tree");
            for (const item of r.items.slice(-50)) sub.append(treeItem(item, now));
            if (r.items.length > 50) sub.append(el("li", "dur", (r.items.length - 50) + " earlier"));
            li.append(sub);
          }
          tree.append(li);
        }
        for (const item of s.loose.slice(-50)) tree.append(treeItem(item, now));
        if (tree.childNodes.length) div.append(tree);
        group.append(div);
      }
      box.append(group);
    }
    $("sessions-empty").hidden = sessions.size > 0;
    $("totals").textContent = sessions.size ? sessions.size + " sessions · tokens " + total.in + " in / " + total.out + " out" + (Object.keys(total.cost).length ? " · " + costText(total.cost) : "") : "";
  }

  function renderEvents(f) {
    const body = $("events").tBodies[0];
    body.replaceChildren();
    let n = 0, shown = 0;
    for (let i = log.length - 1; i >= 0; i--) {
      const ev = log[i];
      if (!matches(ev, f)) continue;
      n++;
      if (shown >= MAX_ROWS) continue;
      shown++;
      const tr = el("tr");
      tr.dataset.type = ev.type;
      tr.append(el("td", null, clock(ev._t)), el("td", null, ev.agent), el("td", null, short(ev.session)),
        el("td", null, ev.type), el("td", "sev-" + ev._sev, ev._sev), el("td", "summary", summary(ev)));
      body.append(tr);
    }
    $("events-count").textContent = "(" + n + (n > shown ? ", newest " + shown + " shown" : "") + ")";
  }

  function render() {
    scheduled = false;
    if ($("app").hidden) return;
    const f = filters(), now = Date.now();
    renderInbox();
    renderSessions(f, now);
    renderEvents(f);
  }

  for (const id of ["f-text", "f-agent", "f-session", "f-type", "f-severity", "f-since"]) $(id).addEventListener("input", touch);
  // Live durations and ages tick.
  setInterval(() => { if (!$("app").hidden) touch(); }, 1000);
  start();
})();
