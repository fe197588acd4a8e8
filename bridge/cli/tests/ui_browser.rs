//! The web view in a real browser: Playwright (bridge/tests/requirements-ui.txt) driving
//! Debian's chromium against the real `aep-bridge serve` with a token, fed the real Claude
//! Code hook payloads, the real `aep-hook` shim and a real `/socket` emitter. One browser
//! for the file; the Python side (bridge/tests/ui_browser.py) only drives the page.
//!
//! In order, on one page: the login (a wrong token refused, the right one accepted); a
//! session appearing live; a held Claude Code `PermissionRequest` answered with one click,
//! the shim's stdout carrying the allow decision and the card naming `aep-web`; a form
//! (AEP-0006) filled on the page reaching the emitter that holds it; hostile event content
//! rendered inert; the bridge restarted on the same port and data folder, the page
//! resuming without a new login and showing the new events.
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
        let Ok(mut child) = Command::new("python3")
            .arg(DRIVER)
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
        // A request held at shutdown keeps `serve` up for the grace period: a short one here.
        let config = data.join("aep-bridge.toml");
        std::fs::write(&config, "[server]\nshutdown_grace_ms = 1000\n").unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
        cmd.env_clear()
            .env("HOME", data)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("AEP_BRIDGE_TOKEN", TOKEN)
            .env("AEP_BRIDGE_LOG", "warn")
            .args(["serve", "--config"])
            .arg(&config)
            .args(["--listen", listen, "--otlp-grpc", "", "--otlp-http", "", "--data-dir"])
            .arg(data)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
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
    b.wait("its tool in the tree", &format!("{sel} .tree"), Some("tool"));
    b.wait("grouped under its agent", ".agent[data-agent=\"claude-code\"]", None);
    b.wait("its events in the table", "#events tbody tr[data-type=\"session.started\"]", None);

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
    b.wait("what was answered", &format!(".card[data-request=\"{req}\"] .status"), Some("option allow"));
    let perm_sel = format!(".session[data-session=\"{perm_session}\"] .tree");
    b.wait("the answered request in the session's tree", &perm_sel, Some("answered"));

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
    b.wait("the big event", "#events td.summary", Some("(1048586 chars)"));
    let dom = b.eval(
        "the DOM after hostile content",
        "({pwned: window.__pwned === undefined ? null : window.__pwned, images: document.images.length, \
          scripts: document.scripts.length, iframes: document.querySelectorAll('iframe, svg, b').length, \
          longest: Math.max(...Array.from(document.querySelectorAll('td, .prompt, .label, button')).map(e => e.textContent.length)), \
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
    b.wait("the held request", ".session[data-session=\"held-across-restart\"] .tree", Some("pending"));
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
