//! The CloudEvents and OCSF sinks against in-test HTTP servers: content types, bodies
//! parsed by the official CloudEvents SDK, the retry policy, the OCSF JSONL file.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_bridge::export::{self, CeMode, ExportConfig, Stats};
use aep_bridge::metrics::Metrics;
use aep_bridge::pipeline::Stamped;
use aep_schemas::Event;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use cloudevents::AttributesReader as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

fn session(agent: &str) -> Vec<Event> {
    let src = format!("aep://test-host/agent/{agent}/session/s1");
    let rows = [
        ("session.started", "2026-01-02T03:04:05Z", json!({"model": "gpt-5"})),
        ("run.started", "2026-01-02T03:04:06Z", json!({})),
        ("tool.requested", "2026-01-02T03:04:07Z", json!({"tool": {"name": "Bash", "call_id": "c1"}})),
        ("tool.completed", "2026-01-02T03:04:08.250Z", json!({"tool": {"name": "Bash", "call_id": "c1"}})),
        ("run.completed", "2026-01-02T03:04:09Z", json!({})),
        ("session.ended", "2026-01-02T03:04:10Z", json!({})),
    ];
    rows.iter()
        .enumerate()
        .map(|(i, (ty, time, data))| {
            Event::from_value(json!({"aep":"0.1","id":format!("{agent}-e{i}"),"type":ty,"time":time,"source":src,
                "agent":agent,"session":"s1","run":"r1","seq":i,"epoch":1,"capture":"metadata","data":data}))
            .unwrap()
        })
        .collect()
}

async fn export_all(cfg: &ExportConfig, events: &[Event]) -> (Vec<(&'static str, Arc<Stats>)>, Arc<Metrics>) {
    let metrics = Arc::new(Metrics::default());
    let ex = export::start(cfg, 1024, metrics.clone(), Arc::default(), CancellationToken::new());
    assert!(!ex.sinks.is_empty(), "no exporter started");
    for s in &ex.sinks {
        for e in events {
            s.tx.send(Arc::new(Stamped::new(e.clone()))).await.unwrap();
        }
    }
    drop(ex.sinks);
    for t in ex.tasks {
        tokio::time::timeout(Duration::from_secs(30), t).await.expect("exporter did not flush").unwrap();
    }
    (ex.stats, metrics)
}

fn fast_retry(cfg: &mut ExportConfig) {
    cfg.retry.initial_ms = 10;
    cfg.retry.max_ms = 1000;
    cfg.retry.max_elapsed_ms = 5000;
}

/// Content type and body of one request.
type Posted = (String, Vec<u8>);
/// A scripted status with an optional `Retry-After`.
type Answer = (u16, Option<&'static str>);

#[derive(Clone, Default)]
struct Recorder {
    got: Arc<Mutex<Vec<Posted>>>,
    script: Arc<Mutex<VecDeque<Answer>>>,
}

async fn record(State(rec): State<Recorder>, headers: HeaderMap, body: Bytes) -> Response {
    let ct = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    rec.got.lock().unwrap().push((ct, body.to_vec()));
    match rec.script.lock().unwrap().pop_front() {
        Some((status, Some(ra))) => {
            (StatusCode::from_u16(status).unwrap(), [("retry-after", ra)], "busy").into_response()
        }
        Some((status, None)) => StatusCode::from_u16(status).unwrap().into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    }
}

async fn start_recorder(rec: Recorder) -> SocketAddr {
    let app = axum::Router::new().fallback(record).with_state(rec);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

fn check_sdk_event(ce: &cloudevents::Event, ev: &Event) {
    assert_eq!(ce.id(), ev.id);
    assert_eq!(ce.ty(), format!("dev.aep.{}", ev.r#type));
    assert_eq!(ce.source().as_str(), &*ev.source);
    assert_eq!(ce.specversion().as_str(), "1.0");
}

#[tokio::test]
async fn cloudevents_structured_one_post_per_event_with_a_retry() {
    let rec = Recorder::default();
    rec.script.lock().unwrap().push_back((503, Some("0")));
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = ExportConfig::default();
    fast_retry(&mut cfg);
    cfg.cloudevents.endpoint = Some(format!("http://{addr}/ce").parse().unwrap());
    let events = session("codex");
    let (stats, metrics) = export_all(&cfg, &events).await;
    let got = rec.got.lock().unwrap().clone();
    assert_eq!(got.len(), events.len() + 1, "one 503, then every event once");
    assert_eq!(got[0].1, got[1].1, "the refused event is resent");
    for ((ct, body), ev) in got[1..].iter().zip(&events) {
        assert_eq!(ct, "application/cloudevents+json");
        let ce: cloudevents::Event = serde_json::from_slice(body).expect("the CloudEvents SDK rejects the body");
        check_sdk_event(&ce, ev);
    }
    let s = stats[0].1.snapshot();
    assert_eq!((s.0, s.1, s.3), (6, 0, 1));
    assert_eq!(metrics.events_out.get(&[("sink", "cloudevents")]), 6);
}

#[tokio::test]
async fn cloudevents_batch_mode_posts_arrays() {
    let rec = Recorder::default();
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = ExportConfig::default();
    fast_retry(&mut cfg);
    cfg.cloudevents.endpoint = Some(format!("http://{addr}/ce").parse().unwrap());
    cfg.cloudevents.mode = CeMode::Batch;
    cfg.cloudevents.batch_size = 4;
    cfg.cloudevents.batch_timeout_ms = 60_000;
    let events = session("codex");
    let (stats, _) = export_all(&cfg, &events).await;
    let got = rec.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    let mut parsed = Vec::new();
    for (ct, body) in &got {
        assert_eq!(ct, "application/cloudevents-batch+json");
        let batch: Vec<cloudevents::Event> =
            serde_json::from_slice(body).expect("the CloudEvents SDK rejects the batch");
        parsed.push(batch.len());
        for (ce, ev) in batch.iter().zip(events.iter().skip(if parsed.len() == 1 { 0 } else { 4 })) {
            check_sdk_event(ce, ev);
        }
    }
    assert_eq!(parsed, [4, 2]);
    assert_eq!(stats[0].1.snapshot().0, 6);
}

#[tokio::test]
async fn cloudevents_permanent_failure_is_counted_as_dropped() {
    let rec = Recorder::default();
    rec.script.lock().unwrap().extend([(400, None), (400, None)]);
    let addr = start_recorder(rec.clone()).await;
    let mut cfg = ExportConfig::default();
    fast_retry(&mut cfg);
    cfg.cloudevents.endpoint = Some(format!("http://{addr}/ce").parse().unwrap());
    let (stats, metrics) = export_all(&cfg, &session("codex")[..2]).await;
    assert_eq!(rec.got.lock().unwrap().len(), 2, "400 is not retried");
    assert_eq!(stats[0].1.snapshot().1, 2);
    assert_eq!(metrics.dropped.get(&[("sink", "cloudevents"), ("severity", "info")]), 2);
    assert_eq!(metrics.sink_errors.get(&[("sink", "cloudevents")]), 2);
}

#[tokio::test]
async fn ocsf_to_a_jsonl_file_and_http() {
    let rec = Recorder::default();
    rec.script.lock().unwrap().push_back((429, Some("0")));
    let addr = start_recorder(rec.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sub/ocsf.jsonl");
    let mut cfg = ExportConfig::default();
    fast_retry(&mut cfg);
    cfg.ocsf.file = file.display().to_string();
    cfg.ocsf.endpoint = Some(format!("http://{addr}/ocsf").parse().unwrap());
    let events = session("codex");
    let (stats, _) = export_all(&cfg, &events).await;
    let lines: Vec<Value> =
        std::fs::read_to_string(&file).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // session.started/ended (Authentication 3002), tool.requested/completed (Process Activity 1007).
    let classes: Vec<i64> = lines.iter().map(|r| r["class_uid"].as_i64().unwrap()).collect();
    assert_eq!(classes, [3002, 1007, 1007, 3002]);
    assert!(lines.iter().all(|r| r["metadata"]["version"].is_string() && r["time"].is_i64()));
    let got = rec.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "one 429, one retry");
    assert_eq!(got[1].0, "application/json");
    let posted: Vec<Value> = serde_json::from_slice(&got[1].1).unwrap();
    assert_eq!(posted, lines);
    assert_eq!(stats[0].1.snapshot(), (4, 0, 0, 1));
}
