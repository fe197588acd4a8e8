//! The daemon's HTTP behaviour through the very app `serve` runs, built by the same
//! `Daemon::build`, driven with `oneshot` (no socket, no port, no wait for a listener).

use aep_bridge::server::Daemon;
use aep_testkit as common;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

async fn send(app: &axum::Router, req: Request<Body>) -> (StatusCode, String) {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// Each hook is answered only once its events are in the session's log: the line count
/// right after each answer is exact, with no polling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answered_hook_is_already_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let stop = CancellationToken::new();
    let daemon = Daemon::build(common::config(dir.path()), stop.clone()).unwrap();
    let app = daemon.app();
    let log = dir.path().join("logs/codex/s-app.jsonl");
    let expected = ["session.started", "run.started", "tool.requested", "tool.completed", "run.finished"];
    for (i, payload) in common::codex_session("s-app").into_iter().enumerate() {
        let req = Request::post("/hooks/codex")
            .header("content-type", "application/json")
            .body(Body::from(payload.to_string()))
            .unwrap();
        let (status, body) = send(&app, req).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let types: Vec<String> =
            common::log_events(&log).iter().map(|e| e["type"].as_str().unwrap().to_owned()).collect();
        assert_eq!(types, expected[..=i], "after hook {i}");
    }
    let lines = common::log_events(&log);
    assert!(lines.iter().all(|e| e["epoch"] == daemon.epoch()), "stamped with this build's epoch");
    let (status, body) = send(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(serde_json::from_str::<serde_json::Value>(&body).unwrap()["ok"], true);
    stop.cancel();
}
