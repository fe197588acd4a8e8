//! The collector's per-line ingest under random input (a bounded fuzz run, part of
//! `cargo test`): every NDJSON line (and every JSON body) goes through the strict parser
//! (`aep_schemas::json`, text or bytes) and then `collector::validate_received`. Both are
//! pure and public. The last test sends the same lines over the real sockets (`POST
//! /events` bodies, WebSocket frames) to a running bridge.
//!
//! Properties: no panic; the text and byte parsers agree; the strict parser accepts exactly
//! what serde_json accepts, except repeated keys, with the same value; an accepted line's
//! event passes the project's own validator and is kept as one line that reads back as it.

use aep_bridge::collector::validate_received;
use aep_schemas::json::{from_slice_strict, from_str_strict};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::{Value, json};

/// Valid events of several shapes: the seeds the mutations start from.
fn seeds() -> Vec<Value> {
    let base = |ty: &str, seq: u64, data: Value| {
        json!({"aep": "0.1", "id": format!("01JX9YB3P4T9{seq:014}"), "type": ty, "time": "2026-07-03T10:15:04.221Z",
            "source": "aep://host-a/agent/claude-code/session/s_8f2c", "agent": "claude-code", "session": "s_8f2c",
            "seq": seq, "epoch": 0, "data": data})
    };
    vec![
        base("session.started", 0, json!({"client": {"name": "claude-code"}})),
        base(
            "tool.requested",
            1,
            json!({"tool": {"name": "Bash", "call_id": "t_1"}, "args_digest": "1df8bccaec747dc615b50678f35bf5b5"}),
        ),
        base("tool.completed", 2, json!({"tool": {"name": "Bash", "call_id": "t_1"}, "duration_ms": 12})),
        base("x.claude-code.session.custom", 3, json!({"anything": [1, {"deep": "é🦀"}]})),
        json!({"aep": "0.1", "id": "01JX9YB3P4T9H", "type": "agent.heartbeat", "time": "2026-07-03T10:15:04Z",
            "source": "aep://host-a/agent/claude-code", "agent": "claude-code", "data": {"tick": 3}}),
    ]
}

/// Strings that break naive code.
fn odd() -> impl Strategy<Value = Value> {
    prop_oneof![
        "\\PC{0,10}".prop_map(Value::String),
        prop::sample::select(vec![
            json!(""),
            json!(null),
            json!(-1),
            json!(1.5),
            json!(u64::MAX),
            json!([]),
            json!({}),
            json!("\u{0}"),
            json!("\u{202e}x"),
            json!("a\nb"),
            json!("x".repeat(100_000)),
            json!("2026-13-40T99:99:99Z"),
            json!("control.cancel"),
            json!("x.Bad.type"),
            json!("session."),
            json!("aep://"),
        ]),
    ]
}

/// A seed event with one top-level or `data` field dropped or replaced.
fn mutated_event() -> impl Strategy<Value = Value> {
    (0..seeds().len(), any::<usize>(), any::<bool>(), prop::option::of(odd())).prop_map(|(i, pick, in_data, with)| {
        let mut v = seeds().swap_remove(i);
        let target = if in_data && v["data"].is_object() { &mut v["data"] } else { &mut v };
        if let Value::Object(m) = target {
            let keys: Vec<String> = m.keys().cloned().collect();
            let key = keys[pick % keys.len()].clone();
            match with {
                Some(w) => m.insert(key, w),
                None => m.remove(&key),
            };
        }
        v
    })
}

/// Bytes as the wire may carry them: a (mutated) event's text, byte-level damage to it
/// (flips, truncation, a repeated key spliced in, stray bytes), or noise.
fn line() -> impl Strategy<Value = Vec<u8>> {
    let text = || mutated_event().prop_map(|v| v.to_string().into_bytes());
    prop_oneof![
        4 => text(),
        2 => (text(), any::<usize>(), any::<u8>()).prop_map(|(mut b, at, x)| {
            let i = at % b.len();
            b[i] = x;
            b
        }),
        1 => (text(), any::<usize>()).prop_map(|(b, at)| b[..at % (b.len() + 1)].to_vec()),
        1 => text().prop_map(|b| {
            // `"type":"control.cancel",` right after the opening brace: a repeated key.
            let mut out = b"{\"type\":\"control.cancel\",".to_vec();
            out.extend_from_slice(&b[1..]);
            out
        }),
        1 => (text(), prop::collection::vec(any::<u8>(), 0..8), any::<usize>()).prop_map(|(mut b, junk, at)| {
            let i = at % (b.len() + 1);
            b.splice(i..i, junk);
            b
        }),
        1 => prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn runner(cases: u32) -> TestRunner {
    let scale = std::env::var("AEP_FUZZ_SCALE").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(1).max(1);
    let config = Config { cases: cases.saturating_mul(scale), failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
}

/// One line through the ingest: parse (both ways), compare with serde_json, validate.
/// Returns whether the line was accepted.
fn ingest(raw: &[u8]) -> Result<bool, TestCaseError> {
    let by_bytes = from_slice_strict(raw);
    if let Ok(text) = std::str::from_utf8(raw) {
        let by_text = from_str_strict(text);
        prop_assert_eq!(by_text.as_ref().ok(), by_bytes.as_ref().ok(), "text and byte parsers disagree");
    }
    let loose = serde_json::from_slice::<Value>(raw);
    let value = match (by_bytes, loose) {
        (Ok(strict), Ok(loose)) => {
            prop_assert_eq!(&strict, &loose, "strict parse differs from serde_json");
            strict
        }
        (Ok(v), Err(e)) => {
            return Err(TestCaseError::fail(format!("strict accepts what serde_json refuses ({e}): {v}")));
        }
        (Err(e), Ok(_)) => {
            prop_assert!(e.to_string().contains("duplicate"), "strict refuses valid JSON for another reason: {e}");
            return Ok(false);
        }
        (Err(_), Err(_)) => return Ok(false),
    };
    let Ok(stamped) = validate_received(value.clone(), raw) else { return Ok(false) };
    prop_assert!(aep_schemas::validate::validate_event(&stamped.event).is_ok());
    let line = &stamped.line;
    prop_assert!(line.ends_with(b"\n") && !line[..line.len() - 1].contains(&b'\n'), "kept as one line");
    let back: Value = serde_json::from_slice(line).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(back, value, "the kept line reads back as the received event");
    Ok(true)
}

/// Random and damaged lines: no panic, the parsers agree, what is accepted is valid.
#[test]
fn random_and_damaged_lines_are_refused_or_valid() {
    let accepted = std::sync::atomic::AtomicU64::new(0);
    let mut runner = runner(3000);
    let cases = u64::from(runner.config().cases);
    runner
        .run(&line(), |raw| {
            if ingest(&raw)? {
                accepted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            Ok(())
        })
        .unwrap();
    // Not vacuous: many lines reach validation and pass, many do not.
    let accepted = accepted.into_inner();
    assert!((cases / 10..cases * 9 / 10).contains(&accepted), "{accepted} of {cases} lines accepted");
}

/// The seeds themselves are accepted (so the mutations start from valid events), and a
/// repeated key is refused however the rest of the line looks.
#[test]
fn seeds_pass_and_repeated_keys_never_do() {
    for s in seeds() {
        assert!(ingest(s.to_string().as_bytes()).unwrap(), "{s}");
        let mut dup = b"{\"type\":\"control.cancel\",".to_vec();
        dup.extend_from_slice(&s.to_string().as_bytes()[1..]);
        assert!(!ingest(&dup).unwrap());
    }
}

/// The same lines over the real sockets: random and damaged NDJSON bodies to `POST /events`
/// and random frames on a WebSocket emitter connection, against a running bridge. Every
/// body gets a clear answer (202, or 400 naming the line, 413, 415), every bad frame an
/// in-band error or a close of that connection only, and the bridge stays healthy and takes
/// new connections.
#[test]
fn random_bodies_and_frames_over_the_sockets() {
    use futures_util::{SinkExt as _, StreamExt as _};
    use proptest::strategy::ValueTree as _;
    use tokio_tungstenite::tungstenite::Message;

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = aep_bridge::config::Config::default();
        cfg.server.listen = "127.0.0.1:0".parse().unwrap();
        cfg.server.otlp_grpc = None;
        cfg.server.otlp_http = None;
        cfg.server.data_dir = dir.path().display().to_string();
        let stop = tokio_util::sync::CancellationToken::new();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let mut tx = Some(tx);
            aep_bridge::server::serve(cfg, s, move |b, _| {
                if let Some(tx) = tx.take() {
                    let _ = tx.send(b.http);
                }
            })
            .await
            .unwrap();
        });
        let addr = rx.await.unwrap();
        let mut runner = runner(48);
        let mut bodies = Vec::new();
        let body = prop::collection::vec(line(), 1..6);
        for _ in 0..48 {
            let lines = body.new_tree(&mut runner).unwrap().current();
            bodies.push(lines.join(&b'\n'));
        }
        let url = format!("http://{addr}/events");
        let answers = tokio::task::spawn_blocking(move || {
            let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
            bodies
                .into_iter()
                .map(|b| {
                    let r = agent
                        .post(&url)
                        .header("content-type", "application/x-ndjson")
                        .header("aep-version", "0.1")
                        .send(&b[..])
                        .expect("the bridge answers every body");
                    r.status().as_u16()
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        assert!(answers.iter().all(|s| matches!(s, 202 | 400 | 413 | 415)), "{answers:?}");
        assert!(answers.contains(&400), "the damaged bodies were refused: {answers:?}");

        // WebSocket: hello, then random frames (text and binary).
        let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/socket")).await.unwrap();
        let hello = json!({"type": "hello", "versions": ["0.1"], "role": "emitter", "agent": "fuzz"});
        ws.send(Message::text(hello.to_string())).await.unwrap();
        let frame = line();
        for i in 0..48 {
            let raw = frame.new_tree(&mut runner).unwrap().current();
            let msg = if i % 5 == 0 {
                Message::binary(raw)
            } else {
                Message::text(String::from_utf8_lossy(&raw).into_owned())
            };
            if ws.send(msg).await.is_err() {
                break; // the bridge closed this connection: allowed, checked below
            }
        }
        // Whatever happened to that connection, the bridge is healthy and takes a new one.
        let _ = tokio::time::timeout(std::time::Duration::from_millis(500), ws.next()).await;
        let health = tokio::task::spawn_blocking(move || {
            ureq::get(&format!("http://{addr}/healthz")).call().map(|r| r.status().as_u16()).unwrap_or(0)
        })
        .await
        .unwrap();
        assert_eq!(health, 200);
        assert!(tokio_tungstenite::connect_async(format!("ws://{addr}/socket")).await.is_ok());
        stop.cancel();
        let _ = tokio::time::timeout(std::time::Duration::from_secs(10), task).await;
    });
}
