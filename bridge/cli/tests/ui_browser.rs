//! The web view in a real browser: Playwright (bridge/tests/requirements-ui.txt) driving
//! Debian's chromium against the real `aep-bridge serve` with a token, fed the real Claude
//! Code hook payloads, the real `aep-hook` shim and a real `/socket` emitter. One browser
//! per test; the Python side (bridge/tests/ui_browser.py) only drives the page.
//!
//! - The tour: the login (a wrong token refused, the right one accepted); a session
//!   appearing live; a held Claude Code `PermissionRequest` answered with one click, the
//!   shim's stdout carrying the allow decision and the card naming `aep-web`; a form
//!   (AEP-0006) filled on the page reaching the emitter that holds it; hostile event content
//!   rendered inert; the bridge restarted on the same port and data folder, the page
//!   resuming without a new login and showing the new events and the old ones.
//! - Answers that say what they send: words on a permission card go out with the choice the
//!   button names (Deny, as the reason), a suggested standing permission ("always allow")
//!   reaches Claude Code in its own shape, a question's own-words answer works alone and
//!   with picks, the card shows what was sent and who answered (the login's name); a
//!   request arriving while the tab is in the background raises a desktop notification and
//!   the tab's title counts what waits.
//! - A team's day: 2,000 sessions and 102,000 events written by the bridge, the bridge
//!   restarted, a new tab paging back through them from the logs; first paint, idle cost,
//!   filter and search timings read from the page's Performance API and printed (figures,
//!   never asserted: the structure that makes them small is asserted instead).
//!
//! And against hostile pages, with `serve` as the README's first command runs it (no
//! token): a page on another origin reads and adds nothing, a rebinding name is refused on
//! every route (`another_origins_page_can_neither_read_nor_write_a_token_less_bridge`).
//!
//! Prints SKIP and passes only when python3, playwright or chromium is missing.

use aep_testkit as common;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use futures_util::SinkExt as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

const TOKEN: &str = "browser-test-token-7c1e";
const WAIT: Duration = Duration::from_secs(30);
const DRIVER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/ui_browser.py");
const HOOKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/claude-code-s01-hooks.jsonl");
const PERMISSION: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/claude-code-permission-request.json");
const SHOTS: &str = "/tmp/ui-shots";

/// The page, driven over the Python peer's line protocol.
struct Browser {
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

impl Browser {
    /// The browser, or `None` after a SKIP line.
    fn start(test: &str) -> Option<Browser> {
        Self::start_with(test, &[])
    }

    /// The browser launched with these extra Chromium switches.
    fn start_with(test: &str, args: &[&str]) -> Option<Browser> {
        let Ok(mut child) = Command::new("python3")
            .arg(DRIVER)
            .env("AEP_UI_BROWSER_ARGS", serde_json::to_string(args).unwrap())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
        else {
            eprintln!("SKIP {test}: python3 is not installed");
            return None;
        };
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let first: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("the driver said {line:?}"));
        if let Some(why) = first.get("skip") {
            eprintln!("SKIP {test}: {}", why.as_str().unwrap_or_default());
            let _ = child.wait();
            return None;
        }
        assert_eq!(first["ready"], true, "{line}");
        Some(Browser { child, stdin, out })
    }

    fn call(&mut self, cmd: Value) -> Result<Value, String> {
        tokio::task::block_in_place(|| {
            writeln!(self.stdin, "{cmd}").unwrap();
            let mut line = String::new();
            self.out.read_line(&mut line).unwrap();
            let v: Value = serde_json::from_str(&line).map_err(|e| format!("{e}: {line:?}"))?;
            if v["ok"] == true { Ok(v["value"].clone()) } else { Err(v["error"].as_str().unwrap_or("").to_owned()) }
        })
    }

    /// Runs one step; a failure names it, with a screenshot of the page at that moment.
    fn step(&mut self, what: &str, cmd: Value) -> Value {
        match self.call(cmd) {
            Ok(v) => v,
            Err(e) => {
                let path = format!("{SHOTS}/failed.png");
                let _ = self.call(json!({"op": "screenshot", "path": path}));
                panic!("{what}: {e} (page at {path})");
            }
        }
    }

    fn wait(&mut self, what: &str, selector: &str, text: Option<&str>) {
        let mut cmd = json!({"op": "wait", "selector": selector});
        if let Some(t) = text {
            cmd["text"] = json!(t);
        }
        self.step(what, cmd);
    }

    fn eval(&mut self, what: &str, js: &str) -> Value {
        self.step(what, json!({"op": "eval", "js": js}))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"op": "quit"}));
        let _ = self.child.wait();
    }
}

/// A real `aep-bridge serve` with the token.
struct Bridge {
    child: Child,
    out: common::Output,
    addr: String,
}

impl Bridge {
    fn start(data: &Path, listen: &str) -> Bridge {
        Self::start_with(data, listen, Some(TOKEN), "")
    }

    /// `serve` with `token`, or as the README's first command runs it (no token), with
    /// `more` appended to the config file.
    fn start_with(data: &Path, listen: &str, token: Option<&str>, more: &str) -> Bridge {
        // A request held at shutdown keeps `serve` up for the grace period: a short one here.
        let config = data.join("aep-bridge.toml");
        std::fs::write(&config, format!("[server]\nshutdown_grace_ms = 1000\n{more}")).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
        cmd.env_clear()
            .env("HOME", data)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("AEP_BRIDGE_LOG", "warn")
            .args(["serve", "--config"])
            .arg(&config)
            .args(["--listen", listen, "--otlp-grpc", "", "--otlp-http", "", "--data-dir"])
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(t) = token {
            cmd.env("AEP_BRIDGE_TOKEN", t);
        }
        let mut child = cmd.spawn().unwrap();
        let out = common::Output::follow(&mut child);
        assert!(
            out.wait_blocking(WAIT, |t| t.contains("aep-bridge listening:")),
            "serve did not start: {}",
            out.text()
        );
        let text = out.text();
        let addr = text.split_whitespace().find_map(|w| w.strip_prefix("http=")).unwrap().to_owned();
        Bridge { child, out, addr }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGTERM, as a user's Ctrl-C: waits for the exit.
    fn stop(mut self) {
        use rustix::process::{Pid, Signal, kill_process};
        kill_process(Pid::from_raw(i32::try_from(self.child.id()).unwrap()).unwrap(), Signal::TERM).unwrap();
        let status = tokio::task::block_in_place(|| self.child.wait().unwrap());
        assert!(status.success(), "serve exited with {status}: {}", self.out.text());
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The shim beside the binary: `cargo test --workspace` builds it.
fn shim() -> PathBuf {
    let p = Path::new(env!("CARGO_BIN_EXE_aep-bridge")).with_file_name("aep-hook");
    assert!(p.is_file(), "{} is missing: build it (cargo build -p aep-hook; cargo test --workspace does)", p.display());
    p
}

/// The real shim holding `payload` open on the bridge at `url`; its exit code and stdout.
fn spawn_shim(url: &str, payload: Value) -> tokio::task::JoinHandle<(i32, String)> {
    aep_testkit::spawn_shim(shim(), "claude-code", url.to_owned(), TOKEN, payload)
}

async fn hook(url: &str, payload: &Value) {
    let (status, body) = common::post(
        format!("{url}/hooks/claude-code"),
        payload.to_string(),
        vec![("content-type".into(), "application/json".into()), ("authorization".into(), format!("Bearer {TOKEN}"))],
    )
    .await;
    assert_eq!(status, 200, "{body}");
}

async fn emit(url: &str, events: &[Value]) {
    for e in events {
        let (status, text) = common::post(
            format!("{url}/events"),
            e.to_string(),
            vec![("aep-version".into(), "0.1".into()), ("authorization".into(), format!("Bearer {TOKEN}"))],
        )
        .await;
        assert_eq!(status, 202, "{text}");
    }
}

fn event(agent: &str, session: &str, seq: u64, ty: &str, data: Value) -> Value {
    json!({"aep": "0.1", "id": ulid::Ulid::new().to_string(), "type": ty, "time": aep_bridge::time::rfc3339_ms(aep_bridge::time::now_ms()),
        "source": format!("aep://test/agent/{agent}/session/{session}"), "agent": agent, "session": session,
        "seq": seq, "capture": "redacted", "data": data})
}

use aep_testkit::WsStream as Ws;

/// An emitter on `/socket` that owns a session and holds a form request, as an agent's
/// own AEP emitter would.
async fn form_emitter(addr: &str) -> Ws {
    let mut req = format!("ws://{addr}/socket").into_client_request().unwrap();
    req.headers_mut().insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let hello = json!({"type": "hello", "versions": ["0.1"], "role": "emitter",
        "identity": {"agent": "form-bot", "instance": "ui-test"},
        "capabilities": {"control": {"accepts": ["control.attention.respond"]}}});
    ws.send(Message::text(hello.to_string())).await.unwrap();
    next(&mut ws, |v| v["type"] == "hello").await;
    ws
}

use aep_testkit::ws_next as next;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_view_in_a_real_browser() {
    let test = "the_web_view_in_a_real_browser";
    let Some(mut b) = Browser::start(test) else { return };
    let began = Instant::now();
    let data = tempfile::tempdir().unwrap();
    let bridge = Bridge::start(data.path(), "127.0.0.1:0");
    let url = bridge.url();

    // Login: a wrong token is refused, the right one opens the view; no token in any URL.
    b.step("open the page", json!({"op": "goto", "url": format!("{url}/")}));
    b.wait("the login form", "#login-form", None);
    let hidden = b.eval("nothing but the login shows", "getComputedStyle(document.getElementById('app')).display");
    assert_eq!(hidden, "none");
    b.step("screenshot", json!({"op": "screenshot", "path": format!("{SHOTS}/login.png")}));
    b.step("type a wrong token", json!({"op": "fill", "selector": "#token", "value": "wrong"}));
    b.step("submit it", json!({"op": "click", "selector": "#login-form button"}));
    b.wait("the refusal", "#login-error", Some("Login refused"));
    b.step("type the token", json!({"op": "fill", "selector": "#token", "value": TOKEN}));
    b.step("submit it", json!({"op": "click", "selector": "#login-form button"}));
    b.wait("the stream is live", "#conn", Some("live"));
    let cookie_visible = b.eval("the cookie is HttpOnly", "document.cookie");
    assert_eq!(cookie_visible, json!(""), "the session cookie is not readable by script");
    let href = b.eval("the URL", "location.href");
    assert!(!href.as_str().unwrap().contains(TOKEN));

    // A session appears live: the recorded Claude Code session's first hooks.
    let hooks: Vec<Value> = std::fs::read_to_string(HOOKS)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["payload"].clone())
        .collect();
    let cc_session = hooks[0]["session_id"].as_str().unwrap().to_owned();
    for h in &hooks[..6] {
        hook(&url, h).await;
    }
    let sel = format!(".session[data-session=\"{cc_session}\"]");
    b.wait("the session appears", &sel, None);
    b.wait("counted under its agent", ".agent[data-agent=\"claude-code\"]", Some("claude-code 1"));
    b.wait("its events in the live table", "#events .ev[data-type=\"session.started\"]", None);
    b.step("open it", json!({"op": "click", "selector": sel}));
    b.wait("its tool in the tree", "#detail-tree", Some("tool"));
    b.wait("its events from its log", "#detail-events .ev[data-type=\"session.started\"]", None);

    // A held PermissionRequest through the real shim, answered with one click.
    let permission: Value = serde_json::from_str(&std::fs::read_to_string(PERMISSION).unwrap()).unwrap();
    let perm_session = permission["session_id"].as_str().unwrap().to_owned();
    let mut held = permission.clone();
    let shim = spawn_shim(&url, permission);
    b.wait("the request in the inbox", "#inbox .card button.opt[data-option=\"allow\"]", None);
    let card = b.eval(
        "the card",
        "(() => { const c = document.querySelector('#inbox .card'); return {id: c.dataset.request, meta: c.querySelector('.meta').textContent, prompt: c.querySelector('.prompt').textContent}; })()",
    );
    assert!(card["meta"].as_str().unwrap().contains("claude-code"), "{card}");
    b.step("screenshot", json!({"op": "screenshot", "path": format!("{SHOTS}/live-session-and-pending-request.png")}));
    b.step("click allow", json!({"op": "click", "selector": "#inbox .card button.opt[data-option=\"allow\"]"}));
    let (code, stdout) = tokio::time::timeout(WAIT, shim).await.expect("the shim was released").unwrap();
    assert_eq!(code, 0);
    assert_eq!(
        serde_json::from_str::<Value>(&stdout).unwrap(),
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}}),
        "{stdout}"
    );
    let req = card["id"].as_str().unwrap();
    b.wait("who answered, on the card", &format!(".card[data-request=\"{req}\"] .status"), Some("answered by aep-web"));
    b.wait("what was answered", &format!(".card[data-request=\"{req}\"] .status"), Some(": Allow"));
    b.wait("what was sent", &format!(".card[data-request=\"{req}\"] .sent"), Some("sent: Allow"));
    b.step(
        "open its session",
        json!({"op": "click", "selector": format!(".session[data-session=\"{perm_session}\"]")}),
    );
    b.wait("the answered request in the session's tree", "#detail-tree", Some("answered"));

    // A form (AEP-0006) held by an emitter on /socket, filled on the page.
    let mut ws = form_emitter(&bridge.addr).await;
    let fields = json!([
        {"id": "name", "type": "string", "label": "Release name", "required": true},
        {"id": "count", "type": "number", "label": "How many", "min": 1, "max": 10},
        {"id": "urgent", "type": "boolean", "label": "Urgent"},
        {"id": "env", "type": "select", "label": "Environment", "choices": [{"id": "dev", "label": "Dev"}, {"id": "prod", "label": "Prod"}]}
    ]);
    let request = event(
        "form-bot",
        "form-s1",
        2,
        "attention.requested",
        json!({"kind": "form", "prompt": "Describe the release", "fields": fields, "respond_via": ["control"]}),
    );
    for e in [event("form-bot", "form-s1", 1, "session.started", json!({"label": "form session"})), request.clone()] {
        ws.send(Message::text(e.to_string())).await.unwrap();
    }
    let form = format!(".card[data-request=\"{}\"] form", request["id"].as_str().unwrap());
    b.wait("the form in the inbox", &form, None);
    b.step("name", json!({"op": "fill", "selector": format!("{form} [data-field=name]"), "value": "v1.2 <b>rc</b>"}));
    b.step("count", json!({"op": "fill", "selector": format!("{form} [data-field=count]"), "value": "3"}));
    b.step("urgent", json!({"op": "check", "selector": format!("{form} [data-field=urgent]")}));
    b.step("env", json!({"op": "select", "selector": format!("{form} [data-field=env]"), "value": "prod"}));
    b.step("send", json!({"op": "click", "selector": format!("{form} button[type=submit]")}));
    let cmd = next(&mut ws, |v| v["type"] == "control.attention.respond").await;
    assert_eq!(cmd["agent"], "aep-web");
    assert_eq!(cmd["subject"], request["id"]);
    let values = json!({"name": "v1.2 <b>rc</b>", "count": 3, "urgent": true, "env": "prod"});
    assert_eq!(cmd["data"]["answer"], json!({"values": values}), "{cmd}");
    // The emitter applies it, and says so.
    let mut ack = event("form-bot", "form-s1", 3, "control.accepted", json!({}));
    ack["cause"] = cmd["id"].clone();
    let mut answered = event("form-bot", "form-s1", 4, "attention.answered", json!({"answer": {"values": values}}));
    let mut resolved = event("form-bot", "form-s1", 5, "attention.resolved", json!({"resolution": "answered"}));
    for e in [&mut answered, &mut resolved] {
        e["subject"] = request["id"].clone();
        e["cause"] = cmd["id"].clone();
    }
    for e in [ack, answered, resolved] {
        ws.send(Message::text(e.to_string())).await.unwrap();
    }
    let status = format!(".card[data-request=\"{}\"] .status", request["id"].as_str().unwrap());
    b.wait("the form answered by aep-web", &status, Some("answered by aep-web"));
    // Tokens and cost from a run's `usage` and `cost` (AEP-0002 §5.2).
    let mut started = event("form-bot", "form-s1", 6, "run.started", json!({}));
    let mut finished = event(
        "form-bot",
        "form-s1",
        7,
        "run.finished",
        json!({"duration_ms": 4200,
        "gen_ai.usage.input_tokens": 1200, "gen_ai.usage.output_tokens": 345, "cost": {"currency": "USD", "total": 0.0123}}),
    );
    started["run"] = json!("run-1");
    finished["run"] = json!("run-1");
    for e in [started, finished] {
        ws.send(Message::text(e.to_string())).await.unwrap();
    }
    let head = ".session[data-session=\"form-s1\"] .tokens";
    b.wait("the session's tokens", head, Some("tokens 1200 in / 345 out"));
    b.wait("and cost", head, Some("0.0123 USD"));
    b.wait("the run's duration", ".session[data-session=\"form-s1\"] .run", Some("4s"));

    // Hostile content renders inert: no dialog, no script, no image, the text as text.
    let big = format!("{}<b>end</b>", "A".repeat(1024 * 1024));
    emit(
        &url,
        &[
            event("evil-agent", "evil-s1", 1, "session.started", json!({"label": "<script>window.__pwned=1;alert('label')</script>"})),
            event("evil-agent", "evil-s1", 2, "progress.status", json!({"message": "<img src=x onerror=\"window.__pwned=2;alert('img')\">"})),
            event("evil-agent", "evil-s1", 3, "progress.status", json!({"message": big})),
            event("evil-agent", "evil-s1", 4, "attention.requested", json!({"kind": "permission",
                "prompt": "<img src=x onerror=alert('prompt')><svg onload=alert('svg')>",
                "options": [{"id": "allow\" onclick=\"alert(1)", "label": "<script>alert('opt')</script>"}, {"id": "deny", "label": "<iframe src=javascript:alert(3)>"}],
                "respond_via": ["control"]})),
        ],
    )
    .await;
    b.wait("the hostile session", ".session[data-session=\"evil-s1\"] .label", Some("<script>window.__pwned=1"));
    b.wait("the hostile request", ".card .prompt", Some("<svg onload=alert('svg')>"));
    b.wait("the big event", "#events .summary", Some("(1048586 chars)"));
    let dom = b.eval(
        "the DOM after hostile content",
        "({pwned: window.__pwned === undefined ? null : window.__pwned, images: document.images.length, \
          scripts: document.scripts.length, iframes: document.querySelectorAll('iframe, svg, b').length, \
          longest: Math.max(...Array.from(document.querySelectorAll('.summary, .prompt, .label, button')).map(e => e.textContent.length)), \
          option: document.querySelector('.card button.opt').textContent})",
    );
    assert_eq!(dom["pwned"], Value::Null, "{dom}");
    assert_eq!(
        (dom["images"].as_u64(), dom["scripts"].as_u64(), dom["iframes"].as_u64()),
        (Some(0), Some(1), Some(0)),
        "{dom}"
    );
    assert!(dom["longest"].as_u64().unwrap() < 5000, "long fields are clipped: {dom}");
    assert_eq!(dom["option"], "<script>alert('opt')</script>", "{dom}");
    assert_eq!(b.step("dialogs", json!({"op": "dialogs"})), json!([]), "no dialog opened");

    // Restart on the same port and data folder: the page resumes without a new login. A
    // request held when the bridge stops is released to the agent's own prompt (the shim
    // fails open), and the page says it expired rather than offering a dead answer.
    held["session_id"] = json!("held-across-restart");
    let held_shim = spawn_shim(&url, held);
    b.wait("the held request", ".session[data-session=\"held-across-restart\"] .badge", Some("waiting"));
    let held_id = b.eval(
        "its card",
        "document.querySelector('.card[data-request]:not(.settled) .meta').textContent.includes('held-acr') && \
         Array.from(document.querySelectorAll('#inbox .card')).find(c => c.querySelector('.meta').textContent.includes('held-acr')).dataset.request",
    );
    let held_id = held_id.as_str().expect("the held request's card").to_owned();
    let listen = bridge.addr.clone();
    drop(ws);
    bridge.stop();
    let (code, _) = tokio::time::timeout(WAIT, held_shim).await.expect("the shim let go").unwrap();
    assert_eq!(code, 0, "the shim fails open when the bridge goes away");
    b.wait("the page notices", "#conn.down", None);
    let bridge = Bridge::start(data.path(), &listen);
    b.wait("the stream is live again", "#conn", Some("live"));
    let expired = format!(".card[data-request=\"{held_id}\"] .status");
    b.wait("the held request expired", &expired, Some("expired (the bridge restarted)"));
    b.wait("the hostile request (not this bridge's) still open", "#inbox .card .prompt", Some("<svg onload"));
    for h in &hooks[6..] {
        hook(&url, h).await;
    }
    let codex = common::codex_session("after-restart");
    for p in &codex {
        let (status, body) = common::post(
            format!("{url}/hooks/codex"),
            p.to_string(),
            vec![
                ("content-type".into(), "application/json".into()),
                ("authorization".into(), format!("Bearer {TOKEN}")),
            ],
        )
        .await;
        assert_eq!(status, 200, "{body}");
    }
    b.wait("a new session after the restart", ".session[data-session=\"after-restart\"]", None);
    b.wait("the old one still shown", &sel, None);
    b.wait("the login was kept", "#app", None);
    b.step("screenshot", json!({"op": "screenshot", "path": format!("{SHOTS}/after-restart.png")}));
    assert_eq!(b.step("page errors", json!({"op": "errors"})), json!([]), "the script threw");
    assert_eq!(b.step("dialogs", json!({"op": "dialogs"})), json!([]));
    bridge.stop();
    eprintln!("{test}: {} ms", began.elapsed().as_millis());
}

/// The recorded Claude Code PermissionRequest (a Bash call, with the allow rule Claude Code
/// suggests) in session `session`.
fn permission_in(session: &str) -> Value {
    let mut p: Value = serde_json::from_str(&std::fs::read_to_string(PERMISSION).unwrap()).unwrap();
    p["session_id"] = json!(session);
    p
}

/// The card of the one pending request in `session`: its `data-request` selector.
fn card_of(b: &mut Browser, session: &str) -> String {
    let short: String = session.chars().take(8).collect();
    b.step(
        "the card",
        json!({"op": "wait", "selector": format!("#inbox .card .meta"), "text": format!("session {short}")}),
    );
    let id = b.eval(
        "its id",
        &format!(
            "Array.from(document.querySelectorAll('#inbox .card')).find(c => c.querySelector('.meta').textContent.includes('session {short}')).dataset.request"
        ),
    );
    format!(".card[data-request=\"{}\"]", id.as_str().unwrap())
}

async fn shim_out(shim: tokio::task::JoinHandle<(i32, String)>) -> Value {
    let (code, stdout) = tokio::time::timeout(WAIT, shim).await.expect("the shim was released").unwrap();
    assert_eq!(code, 0);
    serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("the shim said {stdout:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_say_what_they_send_in_a_real_browser() {
    let test = "answers_say_what_they_send_in_a_real_browser";
    let Some(mut b) = Browser::start(test) else { return };
    let data = tempfile::tempdir().unwrap();
    let bridge = Bridge::start_with(data.path(), "127.0.0.1:0", Some(TOKEN), "[ui]\nname = \"Alice Example\"\n");
    let url = bridge.url();
    b.step("allow notifications", json!({"op": "grant", "permissions": ["notifications"]}));
    b.step("open the page", json!({"op": "goto", "url": format!("{url}/")}));
    b.step("type the token", json!({"op": "fill", "selector": "#token", "value": TOKEN}));
    b.step("log in", json!({"op": "click", "selector": "#login-form button"}));
    b.wait("the stream is live", "#conn", Some("live"));
    b.wait("who answers", "#whoami", Some("answering as Alice Example via aep-web"));
    b.step("opt in to notifications", json!({"op": "click", "selector": "#notify"}));
    b.wait("notifications on", "#notify", Some("Notifications on"));

    // Words on a permission card go out with the choice the button names: the refusing one,
    // as its reason (AEP-0008: words never allow). "yes go ahead" is a reason the agent reads.
    let shim = spawn_shim(&url, permission_in("words-s1"));
    let card = card_of(&mut b, "words-s1");
    assert_eq!(b.step("the tab's title", json!({"op": "title"})), "(1) aep-bridge");
    let always = b.eval(
        "the suggestion",
        &format!("document.querySelector('{card} button[data-option=\"always-1\"]').textContent"),
    );
    assert_eq!(always, "Allow, and always allow Bash(python3 -c 'print(6*7)') in local settings");
    b.step("type words", json!({"op": "fill", "selector": format!("{card} input.free"), "value": "yes go ahead"}));
    let label = b.eval("the words' button", &format!("document.querySelector('{card} button.send-text').textContent"));
    assert_eq!(label, "Deny with this reason", "the button says what the words go with");
    b.step(
        "screenshot",
        json!({"op": "screenshot", "path": format!("{SHOTS}/words-on-a-permission-card.png"), "full": false}),
    );
    b.step("send them", json!({"op": "click", "selector": format!("{card} button.send-text")}));
    assert_eq!(
        shim_out(shim).await,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "yes go ahead"}}})
    );
    b.wait("what was sent", &format!("{card} .sent"), Some("sent: Deny with the words “yes go ahead”"));
    b.wait("who answered", &format!("{card} .status"), Some("answered by Alice Example via aep-web"));
    b.wait("what was applied", &format!("{card} .status"), Some(": Deny with the words “yes go ahead”"));

    // "Always allow": Claude Code's own suggestion, answered in its own shape.
    let shim = spawn_shim(&url, permission_in("always-s1"));
    let card = card_of(&mut b, "always-s1");
    b.step("always allow", json!({"op": "click", "selector": format!("{card} button[data-option=\"always-1\"]")}));
    assert_eq!(
        shim_out(shim).await,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow",
            "updatedPermissions": [{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "python3 -c 'print(6*7)'"}],
                "behavior": "allow", "destination": "localSettings"}]}}})
    );
    b.wait("the card says so", &format!("{card} .status"), Some("Allow, and always allow Bash(python3"));
    b.step("nothing waits", json!({"op": "wait_js", "js": "document.title === 'aep-bridge'"}));

    // In the background: a desktop notification, and the title counts what waits.
    b.step("real focus", json!({"op": "real_focus"}));
    b.step("another tab in front", json!({"op": "tab", "name": "other", "url": "about:blank"}));
    let focus = b.eval("the view is in the background", "document.hasFocus()");
    assert_eq!(focus, false);
    let shim = spawn_shim(&url, permission_in("background-s1"));
    b.step("a notification", json!({"op": "wait_js", "js": "(window.__notes || []).length > 0", "timeout_ms": 20000}));
    let notes = b.eval("what it said", "window.__notes");
    assert_eq!(notes[0]["title"], "aep-bridge: claude-code asks", "{notes}");
    assert!(notes[0]["body"].as_str().unwrap().contains("Bash"), "{notes}");
    b.step("the title counts it", json!({"op": "wait_js", "js": "document.title === '(1) aep-bridge'"}));
    b.step("back to the view", json!({"op": "front"}));
    let card = card_of(&mut b, "background-s1");
    b.step("allow", json!({"op": "click", "selector": format!("{card} button[data-option=\"allow\"]")}));
    assert_eq!(shim_out(shim).await["hookSpecificOutput"]["decision"], json!({"behavior": "allow"}));
    assert_eq!(b.step("the one notification", json!({"op": "eval", "js": "window.__notes.length"})), 1);

    // A question (Claude Code's AskUserQuestion, held as a form): an own-words answer
    // alone, and with picks where the question takes several.
    let mut ask = permission_in("ask-s1");
    ask["tool_name"] = json!("AskUserQuestion");
    ask.as_object_mut().unwrap().remove("permission_suggestions");
    ask["tool_input"] = json!({"questions": [
        {"question": "Which database?", "header": "DB", "multiSelect": false,
         "options": [{"label": "Postgres", "description": "server"}, {"label": "SQLite", "description": "file"}]},
        {"question": "Which features?", "header": "Features", "multiSelect": true,
         "options": [{"label": "Auth", "description": "login"}, {"label": "Search", "description": "full text"}]}]});
    let shim = spawn_shim(&url, ask);
    let card = card_of(&mut b, "ask-s1");
    let form = format!("{card} form");
    b.step("send it empty", json!({"op": "click", "selector": format!("{form} button[type=submit]")}));
    b.wait("what is missing", &format!("{card} .status"), Some("pick one or type your own"));
    let sent = b.eval("nothing was sent", &format!("document.querySelector('{card} .sent').textContent"));
    assert_eq!(sent, "");
    b.step("own words", json!({"op": "fill", "selector": format!("{form} [data-other='1']"), "value": "DuckDB"}));
    let disabled =
        b.eval("the pick gives way", &format!("document.querySelector('{form} select[data-field=\"1\"]').disabled"));
    assert_eq!(disabled, true, "a single-answer question takes the words instead of a pick");
    b.wait("and says so", &form, Some("your words are the answer"));
    b.step("a pick", json!({"op": "select", "selector": format!("{form} select[data-field='2']"), "value": "1"}));
    b.step("and words", json!({"op": "fill", "selector": format!("{form} [data-other='2']"), "value": "Billing"}));
    b.step(
        "screenshot",
        json!({"op": "screenshot", "path": format!("{SHOTS}/a-question-answered-in-own-words.png"), "full": false}),
    );
    b.step("send", json!({"op": "click", "selector": format!("{form} button[type=submit]")}));
    let out = shim_out(shim).await;
    let decision = &out["hookSpecificOutput"]["decision"];
    assert_eq!(decision["behavior"], "allow", "{out}");
    assert_eq!(
        decision["updatedInput"]["answers"],
        json!({"Which database?": "DuckDB", "Which features?": "Auth, Billing"}),
        "{out}"
    );
    b.wait("what was sent", &format!("{card} .sent"), Some("“DuckDB”"));
    b.wait("picks and words", &format!("{card} .sent"), Some("Auth + “Billing”"));
    b.wait("who answered", &format!("{card} .status"), Some("answered by Alice Example"));
    b.step("screenshot", json!({"op": "screenshot", "path": format!("{SHOTS}/answers-settled.png")}));
    assert_eq!(b.step("page errors", json!({"op": "errors"})), json!([]), "the script threw");
    bridge.stop();
}

/// Sessions, events per session, and the session whose events alone hold a rare word.
const TEAM_SESSIONS: usize = 2000;
const TEAM_EVENTS: usize = 51;
const RARE: usize = 1234;
/// The newest sessions are still running (their durations tick on the page).
const TEAM_LIVE: usize = 50;

/// A day of a team's agents, through the bridge's own ingest (so the logs are the bridge's):
/// each session a start, a run of tool calls, the run's end with usage, all but the newest
/// [`TEAM_LIVE`] ended (those stay open: a status instead of the end).
async fn a_teams_day(url: &str) {
    let agents = ["claude-code", "codex", "gemini-cli", "opencode", "qwen-code"];
    let day = aep_bridge::time::now_ms() - 8 * 3600 * 1000;
    let mut body = String::new();
    let mut n = 0u64;
    for i in 0..TEAM_SESSIONS {
        let agent = agents[i % agents.len()];
        let session = format!("team-{i:05}");
        let t0 = day + (i as u64) * 14_000;
        let mut seq = 0u64;
        let mut ev = |ty: &str, at: u64, run: Option<&str>, data: Value| {
            seq += 1;
            n += 1;
            let mut e = json!({"aep": "0.1", "id": format!("{n:026}"), "type": ty,
                "time": aep_schemas::time::format_rfc3339_ms(t0 + at), "source": format!("aep://team/agent/{agent}"),
                "agent": agent, "session": session, "seq": seq, "capture": "redacted", "data": data});
            if let Some(r) = run {
                e["run"] = json!(r);
            }
            body.push_str(&e.to_string());
            body.push('\n');
        };
        ev(
            "session.started",
            0,
            None,
            json!({"label": format!("task {i}: {}", ["fix the build", "write docs", "refactor the parser", "add tests"][i % 4])}),
        );
        ev("run.started", 100, Some("r1"), json!({}));
        let tools = (TEAM_EVENTS - 5) / 2;
        for k in 0..tools {
            let tool = ["Bash", "Read", "Edit", "Grep"][k % 4];
            let at = 200 + k as u64 * 250;
            ev("tool.requested", at, Some("r1"), json!({"tool": {"name": tool, "call_id": format!("c{k}")}}));
            ev(
                "tool.completed",
                at + 200,
                Some("r1"),
                json!({"tool": {"name": tool, "call_id": format!("c{k}")}, "duration_ms": 200}),
            );
        }
        let word = if i == RARE { "the quokka migration" } else { "working" };
        ev("progress.status", 12_000, Some("r1"), json!({"message": word}));
        ev(
            "run.finished",
            12_500,
            Some("r1"),
            json!({"duration_ms": 12_400, "gen_ai.usage.input_tokens": 1000, "gen_ai.usage.output_tokens": 100}),
        );
        if i + TEAM_LIVE < TEAM_SESSIONS {
            ev("session.ended", 13_000, None, json!({"reason": "normal"}));
        } else {
            ev("progress.status", 13_000, None, json!({"message": "still going"}));
        }
        if body.len() > 2 * 1024 * 1024 || i + 1 == TEAM_SESSIONS {
            let (url, batch) = (format!("{url}/events"), std::mem::take(&mut body));
            let (status, text) = tokio::task::spawn_blocking(move || {
                let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
                let mut r = agent
                    .post(&url)
                    .header("content-type", "application/x-ndjson")
                    .header("aep-version", "0.1")
                    .header("authorization", format!("Bearer {TOKEN}"))
                    .send(batch.as_bytes())
                    .expect("the bridge takes the batch");
                (r.status().as_u16(), r.body_mut().read_to_string().unwrap_or_default())
            })
            .await
            .unwrap();
            assert_eq!(status, 202, "{text}");
        }
    }
    assert_eq!(n as usize, TEAM_SESSIONS * TEAM_EVENTS);
}

/// A page's main-thread time (Chromium's `TaskDuration`, `ScriptDuration`), seconds.
fn busy(b: &mut Browser) -> (f64, f64) {
    let m = b.step("metrics", json!({"op": "metrics"}));
    (m["TaskDuration"].as_f64().unwrap(), m["ScriptDuration"].as_f64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_teams_day_in_a_real_browser() {
    let test = "a_teams_day_in_a_real_browser";
    let Some(mut b) = Browser::start(test) else { return };
    let data = tempfile::tempdir().unwrap();
    let bridge = Bridge::start(data.path(), "127.0.0.1:0");
    let began = Instant::now();
    a_teams_day(&bridge.url()).await;
    let ingest = began.elapsed();
    let listen = bridge.addr.clone();
    bridge.stop();
    // A restarted bridge holds nothing of that day in memory: the page reads the logs.
    let bridge = Bridge::start(data.path(), &listen);
    let url = bridge.url();
    b.step("open the page", json!({"op": "goto", "url": format!("{url}/")}));
    b.step("type the token", json!({"op": "fill", "selector": "#token", "value": TOKEN}));
    b.step("log in", json!({"op": "click", "selector": "#login-form button"}));
    b.wait("the stream is live", "#conn", Some("live"));
    // A returning user's page load, timed by the page itself.
    b.step("reload", json!({"op": "reload"}));
    b.step(
        "sessions painted",
        json!({"op": "wait_js", "js": "performance.getEntriesByName('aep:sessions').length > 0", "timeout_ms": 60000}),
    );
    let paint = b.eval(
        "paint timings",
        "({fcp: (performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime, \
          sessions: performance.getEntriesByName('aep:sessions')[0].startTime})",
    );
    b.step(
        "every session",
        json!({"op": "wait_js", "js": "document.getElementById('history-status').textContent.includes('(all of them)')", "timeout_ms": 60000}),
    );
    b.wait("all of them listed", "#sessions-count", Some(&format!("({TEAM_SESSIONS})")));
    let loaded = b.eval("when all were in", "performance.now()");
    // Windowed: the DOM holds the rows in view, not 2,000 sessions.
    let dom = b.eval("DOM size", "document.getElementsByTagName('*').length").as_u64().unwrap();
    let rows = b.eval("rows", "document.querySelectorAll('.session.row:not([hidden])').length").as_u64().unwrap();
    assert!(rows < 60, "{rows} session rows in the DOM");
    assert!(dom < 1500, "{dom} elements for {TEAM_SESSIONS} sessions");
    b.step("screenshot", json!({"op": "screenshot", "path": format!("{SHOTS}/a-teams-day.png"), "full": false}));

    // Idle: nothing arrives for 10 s. The page ticks durations of the rows in view only.
    b.eval(
        "count DOM changes",
        "window.__mut = 0; new MutationObserver((l) => { window.__mut += l.length; }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true})",
    );
    let (t0, s0) = busy(&mut b);
    let idle_from = Instant::now();
    b.step("stay idle", json!({"op": "sleep", "ms": 10_000}));
    let (t1, s1) = busy(&mut b);
    let idle_secs = idle_from.elapsed().as_secs_f64();
    let mutations = b.eval("DOM changes while idle", "window.__mut").as_u64().unwrap();
    // Each tick touches at most the rows in view (a duration each) and the pending cards.
    let ticks = idle_secs.ceil() as u64 + 1;
    assert!(
        mutations <= ticks * (2 * rows + 10),
        "{mutations} DOM changes in {idle_secs:.1} s of idleness ({rows} rows in view)"
    );

    // Filters: typed, applied, painted (two frames), timed by the page.
    let mut filters = Vec::new();
    for q in ["team-0123", "codex", "refactor", ""] {
        let t = b.step(
            "filter",
            json!({"op": "eval", "arg": q, "js": "async (q) => { const i = document.getElementById('f-text'); const t0 = performance.now(); \
                i.value = q; i.dispatchEvent(new Event('input')); \
                await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); \
                return [performance.now() - t0, document.getElementById('sessions-count').textContent]; }"}),
        );
        filters.push((q, t[0].as_f64().unwrap(), t[1].as_str().unwrap().to_owned()));
    }
    assert_eq!(filters[0].2, "(10 of 2000)", "{filters:?}");
    assert_eq!(filters[1].2, format!("({} of 2000)", TEAM_SESSIONS / 5), "{filters:?}");
    // By agent: its chip.
    b.step("one agent", json!({"op": "click", "selector": "#agents .chip[data-agent=\"codex\"]"}));
    b.wait("its sessions", "#sessions-count", Some(&format!("({} of 2000)", TEAM_SESSIONS / 5)));
    b.step("every agent", json!({"op": "click", "selector": "#agents .chip[data-agent=\"codex\"]"}));
    b.wait("all again", "#sessions-count", Some(&format!("({TEAM_SESSIONS})")));
    // Words only in one session's events: the bridge scans the logs, newest first.
    b.step(
        "search",
        json!({"op": "eval", "js": "window.__s0 = performance.now(); const i = document.getElementById('f-text'); i.value = 'QUOKKA'; i.dispatchEvent(new Event('input'))"}),
    );
    b.wait("found by its events' text", "#search-status", Some("1 sessions with these words"));
    let search_ms = b.eval("search time", "performance.getEntriesByName('aep:searched').pop().startTime - window.__s0");
    b.wait("its row", &format!(".session[data-session=\"team-{RARE:05}\"]"), None);
    b.step("clear", json!({"op": "fill", "selector": "#f-text", "value": ""}));
    // Paging back by time: the day's first session is at the end of the list.
    b.eval("scroll to the end", "document.getElementById('sessions').scrollTop = 1e9");
    b.wait("the first session of the day", ".session[data-session=\"team-00000\"]", None);
    b.step("open it", json!({"op": "click", "selector": ".session[data-session=\"team-00000\"]"}));
    b.wait("its events from the log", "#detail-status", Some(&format!("{TEAM_EVENTS} events")));
    b.wait("its run", "#detail-tree", Some("finished"));
    b.step("screenshot", json!({"op": "screenshot", "path": format!("{SHOTS}/a-session-from-the-logs.png")}));

    // A log with a line still being written: "not yet", never an error.
    let log = data.path().join("logs/codex/team-00001.jsonl");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&log)
        .unwrap()
        .write_all(b"{\"aep\":\"0.1\",\"type\":\"progr")
        .unwrap();
    b.step("a new tab", json!({"op": "tab", "name": "fresh", "url": format!("{url}/")}));
    b.step(
        "its sessions",
        json!({"page": "fresh", "op": "wait_js", "js": "document.getElementById('history-status').textContent.includes('(all of them)')", "timeout_ms": 60000}),
    );
    b.step(
        "all of them listed",
        json!({"page": "fresh", "op": "wait_js", "js": format!("document.getElementById('sessions-count').textContent === '({TEAM_SESSIONS})'")}),
    );
    assert_eq!(b.step("page errors", json!({"op": "errors"})), json!([]), "the script threw");
    let num = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "{test}: {TEAM_SESSIONS} sessions, {} events (ingested in {:.1} s), bridge restarted; first contentful paint {:.0} ms, \
         first sessions painted {:.0} ms, all {TEAM_SESSIONS} loaded {:.0} ms; DOM {dom} elements ({rows} session rows); \
         idle {:.2}% of one core (script {:.2}%) and {mutations} DOM changes over {idle_secs:.1} s; \
         filters {}; text search in the events {:.0} ms",
        TEAM_SESSIONS * TEAM_EVENTS,
        ingest.as_secs_f64(),
        num(&paint["fcp"]),
        num(&paint["sessions"]),
        num(&loaded),
        100.0 * (t1 - t0) / idle_secs,
        100.0 * (s1 - s0) / idle_secs,
        filters.iter().map(|(q, ms, n)| format!("{q:?} {ms:.1} ms {n}")).collect::<Vec<_>>().join(", "),
        num(&search_ms),
    );
    bridge.stop();
}

/// What a page tries in order to read the bridge's sessions: the collector's WebSocket
/// (subscribing to everything), its SSE stream, the view's stream with the view's cookie,
/// and `fetch` of the reading routes. Each attempt ends on its own signal (a close, an
/// error, the session seen); the 10 s bound only stops a hang.
const READ_JS: &str = r#"async ({base, needle}) => {
  const bound = (p) => Promise.race([p, new Promise(r => setTimeout(() => r({hung: true}), 10000))]);
  const ws = await bound(new Promise(res => {
    let w, opened = false;
    try { w = new WebSocket(base.replace(/^http/, 'ws') + '/socket'); } catch (e) { return res({error: String(e)}); }
    w.onopen = () => {
      opened = true;
      w.send(JSON.stringify({type: 'hello', versions: ['0.1'], role: 'consumer'}));
      w.send(JSON.stringify({type: 'subscribe', id: 'all', from: 'all'}));
    };
    w.onmessage = m => { if (String(m.data).includes(needle)) { w.close(); res({opened, read: true}); } };
    w.onclose = e => res({opened, read: false, code: e.code});
  }));
  const sse = (url, opts) => bound(new Promise(res => {
    const es = new EventSource(url, opts);
    es.addEventListener('session.started', e => { if (e.data.includes(needle)) { es.close(); res({read: true}); } });
    es.onerror = () => { es.close(); res({read: false, error: true}); };
  }));
  const stream = await sse(base + '/stream?from=all');
  const view = await sse(base + '/ui/stream?from=all', {withCredentials: true});
  const fetches = {};
  for (const path of ['/stream?live=0&from=all', '/ui/session', '/events', '/.well-known/aep', '/metrics']) {
    try {
      const r = await fetch(base + path, {credentials: 'include'});
      const t = await r.text();
      fetches[path] = {status: r.status, read: t.includes(needle)};
    } catch (e) { fetches[path] = {read: false, error: String(e)}; }
  }
  return {ws, stream, view, fetches};
}"#;

/// What a page tries in order to add events: `no-cors` fetches with the body types it may
/// send anywhere (text/plain, none), a CORS JSON post (preflighted), a beacon, the classic
/// form post into a hidden frame (`text/plain` shaped as JSON), and an emitter's WebSocket.
const WRITE_JS: &str = r#"async ({base, session}) => {
  const bound = (p) => Promise.race([p, new Promise(r => setTimeout(() => r('hung'), 10000))]);
  const hook = (s) => JSON.stringify({session_id: s, hook_event_name: 'SessionStart', source: 'startup'});
  const out = {};
  const attempt = async (name, f) => {
    try { const r = await f(); out[name] = r && r.type !== undefined ? r.type + ' ' + r.status : String(r); }
    catch (e) { out[name] = 'error: ' + e; }
  };
  await attempt('no-cors text/plain', () => fetch(base + '/hooks/claude-code', {method: 'POST', mode: 'no-cors', headers: {'content-type': 'text/plain'}, body: hook(session + '-a')}));
  await attempt('no-cors untyped blob', () => fetch(base + '/hooks/claude-code', {method: 'POST', mode: 'no-cors', body: new Blob([hook(session + '-b')])}));
  await attempt('cors json', () => fetch(base + '/hooks/claude-code', {method: 'POST', headers: {'content-type': 'application/json'}, body: hook(session + '-c')}));
  await attempt('beacon', () => navigator.sendBeacon(base + '/hooks/claude-code', new Blob([hook(session + '-d')])));
  const event = JSON.stringify({aep: '0.1', id: '01J0000000000000000000000E', type: 'session.started', time: new Date().toISOString(),
    source: 'aep://evil/agent/evil/session/' + session + '-e', agent: 'evil', session: session + '-e', seq: 1});
  await attempt('no-cors events', () => fetch(base + '/events', {method: 'POST', mode: 'no-cors', headers: {'content-type': 'text/plain'}, body: event}));
  await attempt('no-cors otlp', () => fetch(base + '/v1/logs', {method: 'POST', mode: 'no-cors', headers: {'content-type': 'text/plain'}, body: '{}'}));
  out['form'] = await bound(new Promise(res => {
    const frame = document.createElement('iframe');
    frame.name = 'sink';
    let loads = 0;
    frame.onload = () => { if (++loads === 2) res('loaded'); };
    document.body.appendChild(frame);
    const form = document.createElement('form');
    Object.assign(form, {method: 'POST', action: base + '/hooks/claude-code', enctype: 'text/plain', target: 'sink'});
    const field = document.createElement('input');
    const body = hook(session + '-f');
    field.name = body.slice(0, -1) + ',"x":"';
    field.value = '"}';
    form.appendChild(field);
    document.body.appendChild(form);
    form.submit();
  }));
  out['ws emitter'] = await bound(new Promise(res => {
    let w;
    try { w = new WebSocket(base.replace(/^http/, 'ws') + '/socket'); } catch (e) { return res('error: ' + e); }
    w.onopen = () => {
      w.send(JSON.stringify({type: 'hello', versions: ['0.1'], role: 'emitter', identity: {agent: 'evil', instance: 'x'}}));
      w.send(event.replaceAll(session + '-e', session + '-g'));
      setTimeout(() => { w.close(); res('opened'); }, 500);
    };
    w.onclose = e => res('closed ' + e.code);
  }));
  return out;
}"#;

/// A page that is nothing but an origin, served by the test.
async fn page_server() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        while let Ok((mut s, _)) = l.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let body = "<!doctype html><title>elsewhere</title><body>another origin</body>";
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(format!("{head}{body}").as_bytes()).await;
            });
        }
    });
    format!("http://{addr}")
}

/// The bridge's own record of refusals, by reason.
async fn refused(url: &str, reason: &str) -> f64 {
    let (_, text) = common::get(format!("{url}/metrics")).await;
    let series = format!("aep_bridge_requests_rejected_total{{reason=\"{reason}\",receiver=\"http\"}} ");
    text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0.0, |v| v.parse().unwrap())
}

/// Every session id `serve` holds, as a tool (no browser) reads them.
async fn held_sessions(url: &str) -> String {
    let (status, text) = common::get(format!("{url}/stream?live=0&from=all")).await;
    assert_eq!(status, 200, "{text}");
    text
}

/// The README's first command (`serve`, no token) against hostile pages in a real
/// Chromium. A page on another origin (another port of 127.0.0.1: same-site, so it even
/// carries the view's cookie) reads nothing (WebSocket, SSE, the view's stream, fetch) and
/// adds nothing (no-cors posts, a beacon, a form, a WebSocket emitter); the same reads from
/// the bridge's own page do see the session, so the probes can succeed. A name rebound to
/// 127.0.0.1 (`--host-resolver-rules`, as DNS rebinding does) is refused on every route,
/// the page itself included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_origins_page_can_neither_read_nor_write_a_token_less_bridge() {
    let test = "another_origins_page_can_neither_read_nor_write_a_token_less_bridge";
    let Some(mut b) = Browser::start_with(test, &["--host-resolver-rules=MAP rebind.test 127.0.0.1"]) else { return };
    let data = tempfile::tempdir().unwrap();
    let bridge = Bridge::start_with(data.path(), "127.0.0.1:0", None, "");
    let url = bridge.url();
    let port = bridge.addr.rsplit(':').next().unwrap().to_owned();

    // A session with a permission prompt, as the shim posts them (no token: not held).
    let hooks: Vec<Value> = std::fs::read_to_string(HOOKS)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["payload"].clone())
        .collect();
    let session = hooks[0]["session_id"].as_str().unwrap().to_owned();
    for h in &hooks[..6] {
        let (status, body) = common::post(format!("{url}/hooks/claude-code"), h.to_string(), Vec::new()).await;
        assert_eq!(status, 200, "{body}");
    }
    let permission: Value = serde_json::from_str(&std::fs::read_to_string(PERMISSION).unwrap()).unwrap();
    let (status, body) = common::post(format!("{url}/hooks/claude-code"), permission.to_string(), Vec::new()).await;
    assert_eq!(status, 200, "{body}");

    // The user has the view open (it holds a session cookie for 127.0.0.1).
    let status = b.step("open the view", json!({"op": "goto", "url": format!("{url}/")}));
    assert_eq!(status, 200);
    b.wait("the session on the view", &format!(".session[data-session=\"{session}\"]"), None);

    // Another origin's page.
    let elsewhere = page_server().await;
    let before = refused(&url, "cross-origin").await;
    assert_eq!(b.step("open the other origin's page", json!({"op": "goto", "url": format!("{elsewhere}/")})), 200);
    let read = b.step(
        "read from the other origin",
        json!({"op": "eval", "js": format!("({READ_JS})({})", json!({"base": url, "needle": session}))}),
    );
    eprintln!("{test}: reads from {elsewhere}: {read}");
    assert_eq!(read["ws"]["opened"], false, "the WebSocket handshake is refused: {read}");
    assert_eq!(read["ws"]["read"], false, "{read}");
    for what in ["stream", "view"] {
        assert_eq!(read[what]["read"], false, "{what}: {read}");
        assert_eq!(read[what]["error"], true, "{what}: {read}");
    }
    for (path, r) in read["fetches"].as_object().unwrap() {
        assert_eq!(r["read"], false, "{path}: {read}");
    }
    let write = b.step(
        "write from the other origin",
        json!({"op": "eval", "js": format!("({WRITE_JS})({})", json!({"base": url, "session": "evil-cross"}))}),
    );
    eprintln!("{test}: writes from {elsewhere}: {write}");
    assert_eq!(write["ws emitter"], "closed 1006", "{write}");
    // Every attempt reached the bridge and was refused there, not only by the browser:
    // 1 WebSocket + 2 SSE + 5 fetches to read; 6 posts, a form and a WebSocket to write.
    let after = refused(&url, "cross-origin").await;
    assert!(after - before >= 16.0, "{before} -> {after} cross-origin refusals");

    // The same reads from the bridge's own page succeed: the probes are not blind.
    b.step("back to the view", json!({"op": "goto", "url": format!("{url}/")}));
    let own = b.step(
        "read from the view's origin",
        json!({"op": "eval", "js": format!("({READ_JS})({})", json!({"base": url, "needle": session}))}),
    );
    eprintln!("{test}: reads from the bridge's own origin: {own}");
    assert_eq!(
        (&own["ws"]["read"], &own["stream"]["read"], &own["view"]["read"]),
        (&json!(true), &json!(true), &json!(true)),
        "{own}"
    );
    assert_eq!(own["fetches"]["/stream?live=0&from=all"]["read"], true, "{own}");

    // DNS rebinding: rebind.test resolves to 127.0.0.1; the bridge answers none of it.
    let rebound = format!("http://rebind.test:{port}");
    let status = b.step("open the rebound name", json!({"op": "goto", "url": format!("{rebound}/")}));
    assert_eq!(status, 421, "the page itself is refused");
    let routes = [
        "/",
        "/ui/app.js",
        "/ui/session",
        "/ui/stream",
        "/stream?live=0",
        "/events",
        "/.well-known/aep",
        "/healthz",
        "/livez",
        "/readyz",
        "/metrics",
        "/socket",
        "/nowhere",
    ];
    let statuses = b.eval(
        "every route from the rebound page",
        &format!(
            "(async () => {{ const s = {{}}; for (const p of {}) {{ s[p] = (await fetch(p)).status; }} \
              for (const p of ['/hooks/claude-code', '/events', '/v1/logs', '/ui/login', '/ui/answer']) {{ \
              s['POST ' + p] = (await fetch(p, {{method: 'POST', headers: {{'content-type': 'application/json'}}, body: '{{}}'}})).status; }} return s; }})()",
            json!(routes)
        ),
    );
    eprintln!("{test}: statuses from {rebound}: {statuses}");
    let all: Vec<(&String, &Value)> = statuses.as_object().unwrap().iter().collect();
    assert_eq!(all.len(), routes.len() + 5);
    assert!(all.iter().all(|(_, s)| **s == json!(421)), "{statuses}");
    let read = b.step(
        "read from the rebound name",
        json!({"op": "eval", "js": format!("({READ_JS})({})", json!({"base": rebound, "needle": session}))}),
    );
    assert_eq!(read["ws"]["opened"], false, "{read}");
    assert!(["stream", "view"].iter().all(|w| read[w]["read"] == false), "{read}");
    assert!(read["fetches"].as_object().unwrap().values().all(|r| r["read"] == false && r["status"] == 421), "{read}");
    let write = b.step(
        "write from the rebound name",
        json!({"op": "eval", "js": format!("({WRITE_JS})({})", json!({"base": rebound, "session": "evil-rebound"}))}),
    );
    eprintln!("{test}: writes from {rebound}: {write}");

    // Nothing any hostile page sent was taken.
    let held = held_sessions(&url).await;
    assert!(held.contains(&session), "the real session is held");
    assert!(!held.contains("evil-"), "a hostile page's event was taken:\n{held}");
    let logs = data.path().join("logs");
    let logged: Vec<String> = walk(&logs);
    assert!(logged.iter().all(|p| !p.contains("evil")), "{logged:?}");
    assert_eq!(b.step("dialogs", json!({"op": "dialogs"})), json!([]));
    bridge.stop();
}

/// Every file under `dir`, as strings.
fn walk(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p.display().to_string());
        }
    }
    out
}
