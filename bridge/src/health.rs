//! The bridge's three probes, kept apart because a supervisor acts on each differently:
//!
//! - `GET /livez`: the process and its loops turn. A watch task beats every second and
//!   looks at each sink's progress: a sink with events waiting that finishes none for
//!   [`STALL`] is stuck, and so is a runtime whose watch stopped beating. Only this says
//!   "restart me" (a systemd watchdog, a Kubernetes liveness probe).
//! - `GET /readyz`: events taken now keep the bridge's promise: not stopping, the JSONL log
//!   writing (acknowledged means written), a required relay connected, nothing stuck.
//!   A Kubernetes readiness probe takes the bridge out of rotation meanwhile.
//! - `GET /healthz`: everything, for people and monitoring: the same, plus exporters whose
//!   last batch failed and a state file that is not durable (503 while any fails). A signal
//!   a backend refuses (its exporter off until restart) is reported under `disabled`, not
//!   failing: everything else flows, and a restart would not change the backend's mind.
//!
//! Each answer names what fails and why.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::pipeline::Progress;
use crate::relay::RelayStatus;

/// How often the watch beats and looks at the sinks.
pub const BEAT: Duration = Duration::from_secs(1);
/// A sink with events waiting that finishes none for this long is stuck.
pub const STALL: Duration = Duration::from_secs(60);
/// A watch silent for this long means the runtime no longer turns.
pub const SILENT: Duration = Duration::from_secs(10);

/// Parts whose failure breaks the promise made to an agent whose events are taken now.
const INTAKE: &[&str] = &["jsonl"];

/// Failing, disabled and stuck parts by name, each with its last error; all empty when
/// all is well.
#[derive(Debug, Default)]
pub struct Health {
    failing: Mutex<BTreeMap<&'static str, String>>,
    disabled: Mutex<BTreeMap<&'static str, String>>,
    stalled: Mutex<BTreeMap<&'static str, String>>,
    /// The watch's last beat, once it runs.
    beat: Mutex<Option<tokio::time::Instant>>,
    stopping: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Health {
    /// Marks `part` as failing with `error` (the latest error replaces an earlier one).
    pub fn failing(&self, part: &'static str, error: impl std::fmt::Display) {
        lock(&self.failing).insert(part, error.to_string());
    }

    /// Marks `part` as working again.
    pub fn recovered(&self, part: &'static str) {
        lock(&self.failing).remove(part);
    }

    /// Marks `part` as switched off for the rest of the run (a signal its backend refuses),
    /// with why and what to do.
    pub fn disabled(&self, part: &'static str, reason: impl std::fmt::Display) {
        lock(&self.failing).remove(part);
        lock(&self.disabled).insert(part, reason.to_string());
    }

    /// The failing parts and their errors, by name.
    pub fn failures(&self) -> BTreeMap<&'static str, String> {
        lock(&self.failing).clone()
    }

    /// The parts switched off until restart, by name.
    pub fn disabled_parts(&self) -> BTreeMap<&'static str, String> {
        lock(&self.disabled).clone()
    }

    /// What does not turn: stuck sinks, and the runtime when the watch fell silent (before
    /// shutdown, which stops the watch).
    pub fn stalled(&self) -> BTreeMap<&'static str, String> {
        let mut s = lock(&self.stalled).clone();
        let beat = *lock(&self.beat);
        if let Some(beat) = beat.filter(|_| !self.is_stopping()) {
            let silent = beat.elapsed();
            if silent > SILENT {
                s.insert("runtime", format!("the liveness watch has not run for {} s", silent.as_secs()));
            }
        }
        s
    }

    /// Whether the bridge is shutting down.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}

/// Beats every [`BEAT`] and marks a sink stuck once it has had events waiting and finished
/// none for [`STALL`]; stops with `shutdown`, marking the bridge as stopping.
pub async fn watch(health: Arc<Health>, sinks: BTreeMap<&'static str, Arc<Progress>>, shutdown: CancellationToken) {
    // Per sink: its finished count at the last look, and since when nothing was finished
    // while something waited.
    let mut seen: BTreeMap<&'static str, (u64, Option<tokio::time::Instant>)> = BTreeMap::new();
    loop {
        let now = tokio::time::Instant::now();
        *lock(&health.beat) = Some(now);
        for (name, p) in &sinks {
            let (handed, done) = p.counts();
            let entry = seen.entry(name).or_insert((done, None));
            let waiting = handed.saturating_sub(done);
            if done != entry.0 || waiting == 0 {
                *entry = (done, None);
                lock(&health.stalled).remove(name);
                continue;
            }
            let since = *entry.1.get_or_insert(now);
            let still = now.duration_since(since);
            if still >= STALL {
                lock(&health.stalled)
                    .insert(name, format!("{waiting} event(s) waiting, none written for {} s", still.as_secs()));
            }
        }
        tokio::select! {
            () = tokio::time::sleep(BEAT) => {}
            () = shutdown.cancelled() => break,
        }
    }
    health.stopping.store(true, Ordering::Release);
}

/// What the probes read.
#[derive(Clone)]
pub struct Probes {
    /// Failing, disabled and stuck parts.
    pub health: Arc<Health>,
    /// Upstream relay liveness.
    pub relay: Arc<RelayStatus>,
    /// Whether the relay is required (for `/readyz` and `/healthz`).
    pub relay_required: bool,
}

/// `/livez`, `/readyz` and `/healthz`.
pub fn router(probes: Probes) -> Router {
    Router::new()
        .route("/livez", get(livez))
        .route("/readyz", get(readyz))
        .route("/healthz", get(healthz))
        .with_state(probes)
}

fn answer(ok: bool, body: Value) -> Response {
    let status = if ok { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, [(axum::http::header::CACHE_CONTROL, "no-store")], axum::Json(body)).into_response()
}

/// 200 `{"live":true}`, or 503 naming what is stuck.
async fn livez(State(p): State<Probes>) -> Response {
    let stalled = p.health.stalled();
    let live = stalled.is_empty();
    let mut body = json!({ "live": live });
    if !live {
        body["stalled"] = json!(stalled);
    }
    answer(live, body)
}

/// 200 `{"ready":true}`, or 503 naming why events taken now would not be handled as
/// promised.
async fn readyz(State(p): State<Probes>) -> Response {
    let mut failing: BTreeMap<&str, String> = p.health.stalled();
    for (part, e) in p.health.failures() {
        if INTAKE.contains(&part) {
            failing.insert(part, e);
        }
    }
    if p.relay_required && !p.relay.all_live() {
        failing.insert("relay", "the required relay is not connected".into());
    }
    if p.health.is_stopping() {
        failing.insert("server", "the bridge is shutting down".into());
    }
    let ready = failing.is_empty();
    let mut body = json!({ "ready": ready });
    if !ready {
        body["failing"] = json!(failing);
    }
    answer(ready, body)
}

/// 200 `{"ok":true,...}`, or 503 naming what fails: a required relay that is down, a sink
/// that cannot write (`"failing":{"jsonl":"...: No space left on device"}`), an exporter
/// whose last batch failed, anything stuck. Parts off until restart are listed under
/// `disabled` without making it fail.
async fn healthz(State(p): State<Probes>) -> Response {
    let relay = p.relay.all_live();
    let mut failing = p.health.failures();
    failing.extend(p.health.stalled());
    let disabled = p.health.disabled_parts();
    let ok = (!p.relay_required || relay) && failing.is_empty();
    let mut body = json!({ "ok": ok, "relay": relay });
    if !failing.is_empty() {
        body["failing"] = json!(failing);
    }
    if !disabled.is_empty() {
        body["disabled"] = json!(disabled);
    }
    answer(ok, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    async fn get(app: &Router, path: &str) -> (u16, Value) {
        let res = app.clone().oneshot(axum::http::Request::get(path).body(Body::empty()).unwrap()).await.unwrap();
        let status = res.status().as_u16();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&body).unwrap())
    }

    fn probes() -> (Router, Arc<Health>) {
        let health = Arc::new(Health::default());
        let p = Probes { health: health.clone(), relay: Arc::default(), relay_required: false };
        (router(p), health)
    }

    /// A refused export signal is reported, never fails a probe; a failing exporter fails
    /// `/healthz` only; a failing log fails `/readyz` too; none of them `/livez`.
    #[tokio::test]
    async fn each_probe_fails_on_its_own_parts() {
        let (app, h) = probes();
        for path in ["/livez", "/readyz", "/healthz"] {
            assert_eq!(get(&app, path).await.0, 200, "{path}");
        }
        h.failing("otlp_logs", "x: timed out");
        h.disabled("otlp_logs", "x does not take logs; set export.otlp.logs = false");
        let (st, body) = get(&app, "/healthz").await;
        let disabled = json!({"otlp_logs": "x does not take logs; set export.otlp.logs = false"});
        assert_eq!((st, body), (200, json!({"ok": true, "relay": false, "disabled": disabled})));
        h.failing("otlp_spans", "http://x: connection refused");
        assert_eq!(get(&app, "/healthz").await.0, 503);
        assert_eq!(get(&app, "/readyz").await.0, 200, "an exporter is not intake");
        h.failing("jsonl", "/d: No space left on device");
        let (st, body) = get(&app, "/readyz").await;
        assert_eq!((st, body), (503, json!({"ready": false, "failing": {"jsonl": "/d: No space left on device"}})));
        assert_eq!(get(&app, "/livez").await.0, 200, "a full disk is not cured by a restart");
        h.recovered("jsonl");
        assert_eq!(get(&app, "/readyz").await.0, 200);
    }

    /// A sink with events waiting that finishes none for a minute is stuck: `/livez` says
    /// so (and the others); it recovers as soon as it writes. A silent watch means the
    /// runtime does not turn. Paused time: the minute passes at once.
    #[tokio::test(start_paused = true)]
    async fn a_stuck_sink_or_a_silent_watch_fails_liveness() {
        let (app, h) = probes();
        let jsonl = Arc::new(Progress::default());
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch(h.clone(), BTreeMap::from([("jsonl", jsonl.clone())]), stop.clone()));
        jsonl.handed_for_test(3);
        tokio::time::sleep(STALL - BEAT).await;
        assert_eq!(get(&app, "/livez").await.0, 200, "not yet a minute");
        tokio::time::sleep(BEAT * 2).await;
        let (st, body) = get(&app, "/livez").await;
        assert_eq!(st, 503);
        assert!(body["stalled"]["jsonl"].as_str().unwrap().starts_with("3 event(s) waiting"), "{body}");
        assert_eq!(get(&app, "/readyz").await.0, 503);
        jsonl.finished(3);
        tokio::time::sleep(BEAT * 2).await;
        assert_eq!(get(&app, "/livez").await.0, 200, "written: turning again");
        // A watch that no longer runs (a runtime that does not turn it): past the silence
        // bound the runtime is reported stuck.
        task.abort();
        let _ = task.await;
        tokio::time::sleep(SILENT + BEAT).await;
        let (st, body) = get(&app, "/livez").await;
        assert_eq!(st, 503);
        assert!(body["stalled"]["runtime"].as_str().unwrap().contains("has not run"), "{body}");
        drop(stop);
    }

    /// Shutdown: not ready any more, still live, however long it takes.
    #[tokio::test(start_paused = true)]
    async fn a_bridge_shutting_down_is_not_ready_but_live() {
        let (app, h) = probes();
        let stop = CancellationToken::new();
        let task = tokio::spawn(watch(h.clone(), BTreeMap::new(), stop.clone()));
        tokio::time::sleep(BEAT).await;
        assert_eq!(get(&app, "/readyz").await.0, 200);
        stop.cancel();
        task.await.unwrap();
        let (st, body) = get(&app, "/readyz").await;
        assert_eq!((st, &body["failing"]["server"]), (503, &json!("the bridge is shutting down")));
        tokio::time::sleep(SILENT * 3).await;
        assert_eq!(get(&app, "/livez").await.0, 200);
    }
}
