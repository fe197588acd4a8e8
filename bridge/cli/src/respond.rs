//! The control sender (AEP-0004 §7): `aep-bridge respond` answers an `attention.requested`,
//! `cancel` cancels a run or session, `pending` lists open attention requests. All ride the
//! collector's authenticated `/socket` binding (AEP-0004 §4.1) with hello role `both` and
//! identity agent `aep-cli`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use aep_schemas::Event;
use clap::{ArgGroup, Args};
use serde_json::{Value, json};

use crate::client::{
    ClientError, Endpoint, Pending, Socket, as_event, attention_book, clip, event_line, now_rfc3339, replay_all,
    stdout_color,
};

/// The sender's agent identity (AEP-0004 §2.2: `agent` names the sender).
pub const SENDER: &str = "aep-cli";

/// Connection and timing options shared by the control commands.
#[derive(Debug, Clone, Args)]
pub struct ControlConn {
    /// Collector base URL.
    #[arg(long, env = "AEP_URL")]
    pub url: Option<String>,
    /// Bearer token (control requires one, AEP-0004 §4.1).
    #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Ack window in ms (AEP-0004 §3 default 10 000); the command is retransmitted once
    /// with the same id when it passes in silence.
    #[arg(long, default_value_t = 10_000)]
    pub ack_window_ms: u64,
    /// How long to wait for the outcome events after the ack, in ms.
    #[arg(long, default_value_t = 30_000)]
    pub timeout_ms: u64,
}

/// Arguments of `aep-bridge respond`.
#[derive(Debug, Clone, Args)]
#[command(group(ArgGroup::new("answer").required(true).args(["option", "text", "values"])))]
pub struct RespondArgs {
    /// The `id` of the `attention.requested` Event.
    pub request: String,
    /// Answer with this option id.
    #[arg(long)]
    pub option: Option<String>,
    /// Answer with free text (AEP-0008).
    #[arg(long)]
    pub text: Option<String>,
    /// Answer a form with this JSON object of field values (AEP-0006).
    #[arg(long)]
    pub values: Option<String>,
    /// The request's session (looked up from the collector's replay when omitted, else
    /// from the session logs under `--data-dir`).
    #[arg(long)]
    pub session: Option<String>,
    /// The bridge's data folder (default `~/.aep`): a restarted bridge's collector replays
    /// nothing from before its start, so a request it does not hold is looked up in the
    /// session logs there.
    #[arg(long, env = "AEP_BRIDGE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Connection options.
    #[command(flatten)]
    pub conn: ControlConn,
}

/// Arguments of `aep-bridge cancel`.
#[derive(Debug, Clone, Args)]
pub struct CancelArgs {
    /// The target session.
    pub session: String,
    /// The run to cancel (the whole session when omitted, AEP-0004 §5).
    pub run: Option<String>,
    /// Why (carried at capture `redacted`).
    #[arg(long)]
    pub reason: Option<String>,
    /// Connection options.
    #[command(flatten)]
    pub conn: ControlConn,
}

/// Arguments of `aep-bridge pending`.
#[derive(Debug, Clone, Args)]
pub struct PendingArgs {
    /// Collector base URL.
    #[arg(long, env = "AEP_URL")]
    pub url: Option<String>,
    /// Bearer token.
    #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Only this session.
    #[arg(long)]
    pub session: Option<String>,
    /// One JSON object per open request instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// How a control exchange ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `control.accepted` seen (exit 0).
    Accepted,
    /// `control.rejected` with this reason.
    Rejected(String),
    /// A `cause`-matched `error` frame with this code (relay-behalf refusal, AEP-0004 §4.2).
    Refused(String),
    /// No ack within the window, twice (the local `timeout` nack, AEP-0004 §3).
    Timeout,
}

/// Builds a command Event (AEP-0004 §2, [`aep_schemas::command`]): seq-less, a fresh ULID
/// id, this CLI as the sender.
pub fn command(ty: &str, session: &str, run: Option<&str>, subject: Option<&str>, capture: &str, data: Value) -> Value {
    let source = format!("aep://{}/agent/{SENDER}", crate::client::host_name());
    let cmd = aep_schemas::command::Command { r#type: ty, session, run, answers: subject, capture, data };
    cmd.event(
        aep_schemas::command::Sender { agent: SENDER, source: &source },
        &ulid::Ulid::new().to_string(),
        &now_rfc3339(),
    )
}

/// Sends `cmd` and settles it: ack or `error` frame within the window, one same-id
/// retransmission on silence (AEP-0004 §2.3), then waits up to `outcome_wait` for Events
/// `is_outcome` accepts, printing each; `done` marks the terminal one.
pub fn send_control(
    ep: &Endpoint,
    cmd: &Value,
    window: Duration,
    outcome_wait: Duration,
    is_outcome: &dyn Fn(&Event) -> bool,
    done: &dyn Fn(&Event) -> bool,
) -> Result<Outcome, ClientError> {
    let color = stdout_color();
    let session = cmd.get("session").cloned().unwrap_or(Value::Null);
    let cmd_id = cmd.get("id").and_then(Value::as_str).unwrap_or("").to_owned();
    let mut s = Socket::connect(ep, "both", SENDER, json!({"emits": ["control"]}))?;
    // Subscribe to the target session before sending: acks are live session Events (AEP-0004 §3).
    s.subscribe("control", json!({"session": session}), None)?;
    let line = cmd.to_string();
    s.send_text(line.clone())?;
    println!("sent {} {cmd_id} -> session {}", cmd["type"].as_str().unwrap_or(""), session.as_str().unwrap_or(""));
    let mut attempts = 1;
    let mut deadline = Instant::now() + window;
    let outcome = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            if attempts >= 2 {
                break Outcome::Timeout;
            }
            // Retries reuse the id and bytes: the target dedupes and re-acks (AEP-0004 §2.3, §3).
            attempts += 1;
            eprintln!("no ack within {} ms; retransmitting {cmd_id}", window.as_millis());
            s.send_text(line.clone())?;
            deadline = Instant::now() + window;
            continue;
        }
        let Some(v) = s.recv(left)? else { continue };
        if v.get("type").and_then(Value::as_str) == Some("error") {
            if v.get("cause").and_then(Value::as_str) == Some(cmd_id.as_str()) {
                let code = v.get("code").and_then(Value::as_str).unwrap_or("error").to_owned();
                println!("refused: {code}: {}", v.get("detail").and_then(Value::as_str).unwrap_or(""));
                break Outcome::Refused(code);
            }
            continue;
        }
        let Some(ev) = as_event(&v) else { continue };
        if ev.cause.as_deref() != Some(cmd_id.as_str()) {
            continue;
        }
        match ev.r#type.as_str() {
            "control.accepted" => {
                println!("{}", event_line(&ev, color));
                break Outcome::Accepted;
            }
            "control.rejected" => {
                println!("{}", event_line(&ev, color));
                let reason = ev
                    .data
                    .as_ref()
                    .and_then(|d| d.get("reason"))
                    .and_then(Value::as_str)
                    .unwrap_or("unspecified")
                    .to_owned();
                break Outcome::Rejected(reason);
            }
            _ if is_outcome(&ev) => println!("{}", event_line(&ev, color)),
            _ => {}
        }
    };
    if outcome == Outcome::Timeout {
        println!("timeout: no ack for {cmd_id} within {} ms (sent twice)", window.as_millis());
    }
    if outcome != Outcome::Accepted {
        return Ok(outcome);
    }
    // The outcome is an ordinary Event, observed, never assumed (AEP-0004 §7).
    let end = Instant::now() + outcome_wait;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            eprintln!("accepted; no outcome observed within {} ms", outcome_wait.as_millis());
            break;
        }
        let Some(v) = s.recv(left)? else { continue };
        let Some(ev) = as_event(&v) else { continue };
        if is_outcome(&ev) {
            println!("{}", event_line(&ev, color));
            if done(&ev) {
                break;
            }
        }
    }
    Ok(Outcome::Accepted)
}

fn exit_for(r: Result<Outcome, ClientError>, what: &str) -> i32 {
    match r {
        Ok(Outcome::Accepted) => 0,
        Ok(Outcome::Rejected(reason)) => {
            eprintln!("aep-bridge {what}: rejected ({reason})");
            1
        }
        Ok(Outcome::Refused(code)) => {
            eprintln!("aep-bridge {what}: refused ({code})");
            1
        }
        Ok(Outcome::Timeout) => 1,
        Err(e) => {
            if e.is_unauthorized() {
                println!("refused: unauthorized");
            }
            eprintln!("aep-bridge {what}: {e}");
            1
        }
    }
}

/// The `answer` object of a respond command.
fn answer(args: &RespondArgs) -> Result<(Value, &'static str), String> {
    if let Some(o) = &args.option {
        return Ok((json!({"option": o}), "metadata"));
    }
    if let Some(t) = &args.text {
        // Free text is user-authored: `redacted` minimum (AEP-0004 §5, AEP-0008).
        return Ok((json!({"text": t}), "redacted"));
    }
    if let Some(v) = &args.values {
        return match serde_json::from_str::<Value>(v) {
            Ok(Value::Object(m)) => Ok((json!({"values": m}), "redacted")),
            Ok(_) => Err("--values must be a JSON object".into()),
            Err(e) => Err(format!("--values is not JSON: {e}")),
        };
    }
    Err("one of --option, --text, --values is required".into())
}

/// Advisory checks of an answer against the request (the target stays the authority):
/// `respond_via` without `control` (AEP-0008) and an option id the request did not offer.
pub fn request_warnings(req: &Event, args: &RespondArgs) -> Vec<String> {
    let mut out = Vec::new();
    let data = req.data.as_ref();
    if let Some(via) = data.and_then(|d| d.get("respond_via")).and_then(Value::as_array)
        && !via.iter().any(|v| v.as_str() == Some("control"))
    {
        out.push(format!(
            "the request declares respond_via {} (no control): the target may refuse",
            Value::Array(via.clone())
        ));
    }
    if let (Some(o), Some(opts)) = (&args.option, data.and_then(|d| d.get("options")).and_then(Value::as_array)) {
        let ids: Vec<&str> = opts.iter().filter_map(|x| x.get("id").and_then(Value::as_str)).collect();
        if !ids.contains(&o.as_str()) {
            out.push(format!("option {o:?} is not among the offered ids {ids:?}"));
        }
    }
    out
}

/// Runs `respond`; returns the exit code.
pub fn run(args: RespondArgs) -> i32 {
    let (ans, capture) = match answer(&args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("aep-bridge respond: {e}");
            return 2;
        }
    };
    let ep = Endpoint::new(args.conn.url.clone(), args.conn.token.clone());
    let session = match &args.session {
        Some(s) => s.clone(),
        None => {
            // Look the request up in the collector's replay (from=all, attention.* only).
            let evs = match replay_all(&ep, json!({"type": "attention.*"}), Duration::from_millis(400)) {
                Ok(e) => e,
                Err(e) => return exit_for(Err(e), "respond"),
            };
            let mut book = attention_book(&evs);
            let data_dir = args.data_dir.clone().unwrap_or_else(|| aep_bridge::env::Env::process().data_dir());
            let p = match book.remove(&args.request) {
                Some(p) => p,
                None => match request_in_logs(&data_dir, &args.request) {
                    Some((path, p)) => {
                        eprintln!(
                            "aep-bridge respond: request {} found in {} (the collector's buffer no longer holds it)",
                            args.request,
                            path.display()
                        );
                        p
                    }
                    None => {
                        eprintln!(
                            "aep-bridge respond: no attention.requested with id {} in the collector's buffer or the logs under {}; pass --session",
                            args.request,
                            data_dir.display()
                        );
                        return 1;
                    }
                },
            };
            if let Some(t) = &p.closed_by {
                eprintln!("aep-bridge respond: note: request {} already closed ({t})", args.request);
            }
            for w in request_warnings(&p.request, &args) {
                eprintln!("aep-bridge respond: note: {w}");
            }
            match &p.request.session {
                Some(s) => s.clone(),
                None => {
                    eprintln!("aep-bridge respond: request {} names no session", args.request);
                    return 1;
                }
            }
        }
    };
    let cmd =
        command("control.attention.respond", &session, None, Some(&args.request), capture, json!({"answer": ans}));
    let req = args.request.clone();
    let is_outcome = move |ev: &Event| {
        ev.r#type.starts_with("attention.") && ev.r#type != "attention.requested" && ev.subject.as_deref() == Some(&req)
    };
    let done = |ev: &Event| matches!(ev.r#type.as_str(), "attention.resolved" | "attention.timeout");
    let r = send_control(
        &ep,
        &cmd,
        Duration::from_millis(args.conn.ack_window_ms),
        Duration::from_millis(args.conn.timeout_ms),
        &is_outcome,
        &done,
    );
    exit_for(r, "respond")
}

/// Request `id` as the bridge's session logs hold it (`{data_dir}/logs/{agent}/{session}.jsonl`
/// and its rotations `.jsonl.N`, newest file first), with whether that log closed it, and
/// the file it was found in. Only lines naming the id are parsed: a request's lifecycle
/// events all do (their `subject`).
pub fn request_in_logs(data_dir: &Path, id: &str) -> Option<(PathBuf, Pending)> {
    let mut files: Vec<(SystemTime, PathBuf)> = Vec::new();
    for agent in std::fs::read_dir(data_dir.join("logs")).ok()?.flatten() {
        let Ok(entries) = std::fs::read_dir(agent.path()) else { continue };
        for f in entries.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            // `@agent.jsonl` holds the agent-scoped events: no attention.
            if name.starts_with('@') || log_base(&name).is_none() {
                continue;
            }
            let at = f.metadata().and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
            files.push((at, f.path()));
        }
    }
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    let found = files
        .iter()
        .map(|(_, p)| p)
        .find(|p| events_naming(p, id).iter().any(|e| e.r#type == "attention.requested" && e.id == id))?;
    // Its closing events are in the same session's log, rotated or not.
    let base = |p: &Path| Some((p.parent()?.to_owned(), log_base(&p.file_name()?.to_string_lossy())?.to_owned()));
    let session = base(found);
    let events: Vec<Event> =
        files.iter().map(|(_, p)| p).filter(|p| base(p) == session).flat_map(|p| events_naming(p, id)).collect();
    let p = attention_book(&events).remove(id)?;
    Some((found.clone(), p))
}

/// A session log's name without its rotation suffix (`s.jsonl.2` -> `s.jsonl`), if it is one.
fn log_base(name: &str) -> Option<&str> {
    if name.ends_with(".jsonl") {
        return Some(name);
    }
    let (base, n) = name.rsplit_once('.')?;
    (base.ends_with(".jsonl") && !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then_some(base)
}

/// The events of the log at `path` whose line contains `id` (the bridge may be appending
/// to it: a last line still being written is not yet an event, [`aep_schemas::jsonl`]).
fn events_naming(path: &Path, id: &str) -> Vec<Event> {
    let Ok(f) = std::fs::File::open(path) else { return Vec::new() };
    aep_schemas::jsonl::LiveLines::new(std::io::BufReader::new(f))
        .map_while(Result::ok)
        .filter(|l| l.contains(id))
        .filter_map(|l| serde_json::from_str::<Value>(&l).ok())
        .filter_map(|v| as_event(&v))
        .collect()
}

/// Runs `cancel`; returns the exit code.
pub fn run_cancel(args: CancelArgs) -> i32 {
    let ep = Endpoint::new(args.conn.url.clone(), args.conn.token.clone());
    let scope = if args.run.is_some() { "run" } else { "session" };
    let mut data = json!({"scope": scope});
    let mut capture = "metadata";
    if let Some(r) = &args.reason {
        data["reason"] = json!(r);
        capture = "redacted";
    }
    let cmd = command("control.cancel", &args.session, args.run.as_deref(), None, capture, data);
    let cmd_id = cmd["id"].as_str().unwrap_or("").to_owned();
    let run = args.run.clone();
    let is_outcome = move |ev: &Event| {
        let linked = ev.cause.as_deref() == Some(cmd_id.as_str());
        match ev.r#type.as_str() {
            "run.cancelled" => linked || (run.is_some() && ev.run == run),
            "session.ended" => linked || run.is_none(),
            _ => linked && !ev.r#type.starts_with("control."),
        }
    };
    let done = |ev: &Event| matches!(ev.r#type.as_str(), "run.cancelled" | "session.ended");
    let r = send_control(
        &ep,
        &cmd,
        Duration::from_millis(args.conn.ack_window_ms),
        Duration::from_millis(args.conn.timeout_ms),
        &is_outcome,
        &done,
    );
    exit_for(r, "cancel")
}

/// `12s`, `4m`, `3h`, `2d`.
fn age(ms: u64) -> String {
    let s = ms / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// Runs `pending`; returns the exit code.
pub fn run_pending(args: PendingArgs) -> i32 {
    let ep = Endpoint::new(args.url.clone(), args.token.clone());
    let mut filter = json!({"type": "attention.*"});
    if let Some(s) = &args.session {
        filter["session"] = json!(s);
    }
    let evs = match replay_all(&ep, filter, Duration::from_millis(400)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("aep-bridge pending: {e}");
            return 1;
        }
    };
    let now_ms = aep_bridge::time::now_ms();
    let open: Vec<Pending> = attention_book(&evs).into_values().filter(|p| p.closed_by.is_none()).collect();
    for p in &open {
        let r = &p.request;
        let d = r.data.as_ref();
        let kind = d.and_then(|d| d.get("kind")).and_then(Value::as_str).unwrap_or("?");
        let prompt = d.and_then(|d| d.get("prompt")).and_then(Value::as_str).unwrap_or("");
        let at = aep_bridge::time::parse_rfc3339_nanos(&r.time).map(|n| n / 1_000_000);
        let age_ms = at.map(|t| now_ms.saturating_sub(t));
        if args.json {
            let mut o = json!({"id": r.id, "agent": r.agent, "session": r.session, "kind": kind, "prompt": prompt, "time": r.time});
            if let Some(a) = age_ms {
                o["age_ms"] = json!(a);
            }
            if let Some(opts) = d.and_then(|d| d.get("options")) {
                o["options"] = opts.clone();
            }
            println!("{o}");
        } else {
            let opts: Vec<&str> = d
                .and_then(|d| d.get("options"))
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|o| o.get("id").and_then(Value::as_str)).collect())
                .unwrap_or_default();
            let kind = if opts.is_empty() { kind.to_owned() } else { format!("{kind}[{}]", opts.join("|")) };
            println!(
                "{}  {}  {}  {}  {}  {}",
                r.id,
                r.agent,
                r.session.as_deref().unwrap_or("-"),
                kind,
                age_ms.map_or_else(|| "?".into(), age),
                clip(prompt, 60)
            );
        }
    }
    if !args.json && open.is_empty() {
        println!("no open attention requests");
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_logs_and_their_rotations_are_the_files_looked_over() {
        assert_eq!(log_base("s-1.jsonl"), Some("s-1.jsonl"));
        assert_eq!(log_base("s-1.jsonl.12"), Some("s-1.jsonl"));
        for not_a_log in ["s-1.jsonl.tmp", "s-1.jsonl.", "notes.txt", "s.json"] {
            assert_eq!(log_base(not_a_log), None, "{not_a_log}");
        }
    }

    fn ev(v: Value) -> Event {
        Event::from_value(v).unwrap()
    }

    #[test]
    fn the_book_subtracts_resolved_and_timed_out_requests() {
        let base = |id: &str, ty: &str, subject: Option<&str>| {
            let mut v = json!({"aep": "0.1", "id": id, "type": ty, "time": "2026-01-01T00:00:00Z",
                "source": "aep://h/agent/a", "agent": "a", "session": "s", "seq": 1});
            if let Some(s) = subject {
                v["subject"] = json!(s);
            }
            ev(v)
        };
        let evs = vec![
            base("r1", "attention.requested", None),
            base("r2", "attention.requested", None),
            base("r3", "attention.requested", None),
            base("x1", "attention.resolved", Some("r1")),
            base("x2", "attention.timeout", Some("r3")),
            base("x3", "attention.answered", Some("r2")),
        ];
        let b = attention_book(&evs);
        let open: Vec<&str> = b.values().filter(|p| p.closed_by.is_none()).map(|p| p.request.id.as_str()).collect();
        assert_eq!(open, vec!["r2"]);
    }

    #[test]
    fn commands_are_seqless_and_linked() {
        let c = command(
            "control.attention.respond",
            "s1",
            None,
            Some("req"),
            "metadata",
            json!({"answer": {"option": "y"}}),
        );
        assert!(c.get("seq").is_none());
        assert_eq!(c["subject"], "req");
        assert_eq!(c["cause"], "req");
        assert_eq!(c["agent"], SENDER);
        assert!(c["source"].as_str().unwrap().ends_with("/agent/aep-cli"));
        assert!(aep_schemas::validate::validate_value(&c).is_ok(), "{:?}", aep_schemas::validate::validate_value(&c));
    }

    #[test]
    fn warnings_flag_oob_only_requests_and_unoffered_options() {
        let req = ev(json!({"aep": "0.1", "id": "r", "type": "attention.requested", "time": "2026-01-01T00:00:00Z",
            "source": "aep://h/agent/a", "agent": "a", "session": "s", "seq": 1,
            "data": {"kind": "permission", "prompt": "p", "respond_via": ["oob"], "options": [{"id": "allow", "label": "1"}]}}));
        let conn = ControlConn { url: None, token: None, ack_window_ms: 1, timeout_ms: 1 };
        let args = |o: &str| RespondArgs {
            request: "r".into(),
            option: Some(o.into()),
            text: None,
            values: None,
            session: None,
            data_dir: None,
            conn: conn.clone(),
        };
        let w = request_warnings(&req, &args("nope"));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].contains("respond_via"));
        assert!(w[1].contains("\"nope\""));
        assert_eq!(request_warnings(&req, &args("allow")).len(), 1);
    }
}
