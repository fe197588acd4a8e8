//! Durable export: the exporters read the JSONL logs back, so a peer that is away for hours
//! or a bridge restart loses no event. Real parts: the pipeline, the JSONL writer thread,
//! every exporter (OTLP logs and spans over HTTP, CloudEvents, OCSF to a file and HTTP), a
//! recording OTLP/HTTP backend, and between them a TCP switch that plays the outage (it
//! takes connections and drops them, as a network that is gone does). Every item that
//! arrives names the bridge (its fleet identity: machine, developer, team).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_adapters::EventDraft;
use aep_bridge::export::{self, ExportConfig, ExportContext, Protocol};
use aep_bridge::health::Health;
use aep_bridge::metrics::Metrics;
use aep_bridge::pipeline::{Pipeline, PipelineBuilder, Progress, SinkTx};
use aep_bridge::sinks::jsonl::{self, JsonlConfig};
use aep_schemas::{Capture, Event};
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

// ---------------------------------------------------------------- the backend

/// What the backend took: log records by `(source, event id)`, span ids, CloudEvents and
/// OCSF records by id, with how many times each arrived.
#[derive(Default)]
struct Taken {
    records: BTreeMap<(String, String), u32>,
    spans: BTreeMap<Vec<u8>, u32>,
    cloudevents: BTreeMap<String, u32>,
    ocsf: BTreeMap<String, u32>,
    /// Items that did not name the bridge's team and developer (its fleet identity).
    unnamed: u32,
}

impl Taken {
    fn resent(&self) -> u32 {
        [&self.cloudevents, &self.ocsf].iter().flat_map(|m| m.values()).map(|n| n - 1).sum::<u32>()
            + self.records.values().map(|n| n - 1).sum::<u32>()
            + self.spans.values().map(|n| n - 1).sum::<u32>()
    }
}

#[derive(Clone, Default)]
struct Backend {
    taken: Arc<Mutex<Taken>>,
    seen: Arc<tokio::sync::Notify>,
}

fn str_attr(attrs: &[opentelemetry_proto::tonic::common::v1::KeyValue], key: &str) -> String {
    match attrs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        _ => String::new(),
    }
}

async fn take(State(b): State<Backend>, uri: Uri, headers: HeaderMap, body: Bytes) -> &'static str {
    let body = if headers.get("content-encoding").is_some_and(|v| v == "gzip") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out).unwrap();
        out
    } else {
        body.to_vec()
    };
    {
        let mut t = b.taken.lock().unwrap();
        match uri.path() {
            "/v1/logs" => {
                let req = ExportLogsServiceRequest::decode(&body[..]).unwrap();
                t.unnamed += req.resource_logs.iter().filter(|r| !named(r.resource.as_ref())).count() as u32;
                for r in req.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records) {
                    let key = (str_attr(&r.attributes, "aep.source"), str_attr(&r.attributes, "aep.event_id"));
                    *t.records.entry(key).or_default() += 1;
                }
            }
            "/v1/traces" => {
                let req = ExportTraceServiceRequest::decode(&body[..]).unwrap();
                t.unnamed += req.resource_spans.iter().filter(|r| !named(r.resource.as_ref())).count() as u32;
                for s in req.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
                    *t.spans.entry(s.span_id.clone()).or_default() += 1;
                }
            }
            "/ce" => {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                for e in v.as_array().cloned().unwrap_or_else(|| vec![v]) {
                    t.unnamed += u32::from(e["aepbridgeteam"] != "team-a" || e["aepbridgeuser"] != "alice");
                    *t.cloudevents.entry(e["id"].as_str().unwrap().to_owned()).or_default() += 1;
                }
            }
            "/ocsf" => {
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                for r in v.as_array().unwrap() {
                    t.unnamed += u32::from(r["metadata"]["tenant_uid"] != "team-a");
                    *t.ocsf.entry(r["metadata"]["uid"].as_str().unwrap().to_owned()).or_default() += 1;
                }
            }
            p => panic!("unexpected path {p}"),
        }
    }
    b.seen.notify_waiters();
    ""
}

/// Whether an OTLP resource names the bridge's machine, developer and team.
fn named(r: Option<&opentelemetry_proto::tonic::resource::v1::Resource>) -> bool {
    r.is_some_and(|r| {
        str_attr(&r.attributes, "host.name") == "lap-7"
            && str_attr(&r.attributes, "user.name") == "alice"
            && str_attr(&r.attributes, "aep.team") == "team-a"
    })
}

async fn start_backend(b: Backend) -> SocketAddr {
    let app = axum::Router::new().fallback(take).with_state(b);
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    addr
}

/// A TCP switch in front of the backend: while down it takes each connection and drops it,
/// and cuts the connections it forwards (the exporters see the peer gone, pooled
/// connections included); while up it forwards.
#[derive(Clone)]
struct Switch {
    up: Arc<tokio::sync::watch::Sender<bool>>,
    addr: SocketAddr,
}

impl Switch {
    fn set(&self, up: bool) {
        self.up.send_replace(up);
    }
}

async fn start_switch(backend: SocketAddr, up: bool) -> Switch {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let s = Switch { up: Arc::new(tokio::sync::watch::Sender::new(up)), addr: l.local_addr().unwrap() };
    let state = s.up.clone();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = l.accept().await {
            if !*state.borrow() {
                drop(inbound);
                continue;
            }
            let mut watch = state.subscribe();
            tokio::spawn(async move {
                if let Ok(mut out) = tokio::net::TcpStream::connect(backend).await {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut out) => {}
                        _ = watch.wait_for(|up| !*up) => {}
                    }
                }
            });
        }
    });
    s
}

// ---------------------------------------------------------------- a bridge's export path

/// The export path of one bridge run: pipeline -> JSONL writer (the log) -> exporters.
struct Run {
    pipeline: Pipeline,
    writer: std::thread::JoinHandle<()>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    stop: CancellationToken,
    metrics: Arc<Metrics>,
}

/// The fleet identity of the bridge under test.
fn identity() -> export::fleet::Identity {
    export::fleet::Identity {
        host: "lap-7".into(),
        user: Some("alice".into()),
        team: Some("team-a".into()),
        version: "test".into(),
    }
}

fn export_cfg(peer: SocketAddr, data: &Path) -> ExportConfig {
    let mut cfg = ExportConfig::default();
    // Every signal names the bridge (as `serve` stamps it, `fleet::stamped`).
    identity().add_to(&mut cfg.otlp);
    cfg.otlp.endpoint = Some(format!("http://{peer}").parse().unwrap());
    cfg.otlp.protocol = Protocol::HttpProtobuf;
    cfg.otlp.metrics = false;
    cfg.otlp.batch_timeout_ms = 50;
    cfg.otlp.span_grace_ms = 50;
    cfg.cloudevents.endpoint = Some(format!("http://{peer}/ce").parse().unwrap());
    cfg.cloudevents.mode = export::CeMode::Batch;
    cfg.cloudevents.batch_timeout_ms = 50;
    cfg.ocsf.endpoint = Some(format!("http://{peer}/ocsf").parse().unwrap());
    cfg.ocsf.file = data.join("ocsf.jsonl").display().to_string();
    cfg.ocsf.batch_timeout_ms = 50;
    // The default budget (a batch given up after 5 minutes without durability), with waits
    // of at most 5 s so the outage is retried often.
    cfg.retry.initial_ms = 200;
    cfg.retry.max_ms = 5000;
    cfg.retry.max_elapsed_ms = 300_000;
    cfg
}

impl Run {
    fn start(data: &Path, cfg: &ExportConfig, jsonl_cfg: JsonlConfig) -> Run {
        let metrics = Arc::new(Metrics::default());
        let health = Arc::new(Health::default());
        let stop = CancellationToken::new();
        let wal = export::wal::Wal::new(data, metrics.clone());
        let (tx, rx) = mpsc::channel(1024);
        let progress = Arc::new(Progress::default());
        let writer = jsonl::spawn(
            rx,
            data.to_owned(),
            jsonl_cfg,
            metrics.clone(),
            Some(progress.clone()),
            None,
            Some(wal.clone()),
        );
        let ex = export::start_in(
            cfg,
            ExportContext {
                wal: Some(wal),
                fleet: Arc::new(identity()),
                ..ExportContext::memory(1024, metrics.clone(), health, stop.clone())
            },
        );
        assert!(ex.sinks.is_empty(), "durable exporters take nothing from memory");
        let pipeline = PipelineBuilder::new(1, "lap-7", metrics.clone())
            .sink(SinkTx::durable_lines("jsonl", tx).with_progress(progress))
            .build();
        Run { pipeline, writer, tasks: ex.tasks, stop, metrics }
    }

    /// Stops as `serve` does: retries cut, the pipeline closed, the log flushed, the
    /// exporters ended (their cursors written).
    async fn stop(self) -> Arc<Metrics> {
        self.stop.cancel();
        self.pipeline.close();
        drop(self.pipeline);
        tokio::task::spawn_blocking(move || self.writer.join().unwrap()).await.unwrap();
        for t in self.tasks {
            tokio::time::timeout(Duration::from_secs(60), t).await.expect("an exporter did not end").unwrap();
        }
        self.metrics
    }
}

/// A whole session `s` of Codex: start, a run with a tool call, end.
fn session(s: &str) -> Vec<EventDraft> {
    let d = |ty: &str| {
        let mut d = EventDraft::new(ty, Capture::Metadata);
        d.session = Some(s.to_owned());
        d
    };
    let mut run = d("run.started");
    run.run = Some("r1".into());
    let mut req = d("tool.requested");
    req.run = Some("r1".into());
    req.subject = Some("Bash".into());
    req.correlation_key = Some("tool:c1".into());
    req.data.insert("tool".into(), serde_json::json!({"name": "Bash", "call_id": "c1"}));
    let mut done = d("tool.completed");
    done.run = Some("r1".into());
    done.subject = Some("Bash".into());
    done.cause_key = Some("tool:c1".into());
    done.data.insert("tool".into(), serde_json::json!({"name": "Bash", "call_id": "c1"}));
    let mut end = d("run.completed");
    end.run = Some("r1".into());
    vec![d("session.started"), run, req, done, end, d("session.ended")]
}

/// Every event in the logs below `data`.
fn logged(data: &Path) -> Vec<Event> {
    let mut out = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for a in std::fs::read_dir(data.join("logs")).unwrap().flatten() {
        files.extend(std::fs::read_dir(a.path()).unwrap().flatten().map(|f| f.path()));
    }
    files.sort();
    for f in files {
        for l in std::fs::read_to_string(f).unwrap().lines() {
            out.push(serde_json::from_str(l).unwrap());
        }
    }
    out
}

/// What the backend must hold for `events`: every record, every span the assembler makes of
/// them, every CloudEvent, every OCSF record.
/// Log records by `(source, event id)`, span ids, CloudEvent ids, OCSF record ids.
type Expected = (BTreeSet<(String, String)>, BTreeSet<Vec<u8>>, BTreeSet<String>, BTreeSet<String>);

fn expected(events: &[Event]) -> Expected {
    let records = events.iter().map(|e| (e.source.to_string(), e.id.clone())).collect();
    let mut by_session: BTreeMap<String, Vec<Event>> = BTreeMap::new();
    for e in events {
        by_session.entry(e.session.clone().unwrap_or_default()).or_default().push(e.clone());
    }
    let spans = by_session
        .values()
        .flat_map(|evs| aep_projections::spans::assemble(evs, aep_projections::spans::SpanConfig::default()))
        .map(|s| s.span_id.to_vec())
        .collect();
    let ces = events.iter().map(|e| e.id.clone()).collect();
    let opts = aep_projections::ocsf::OcsfOptions::default();
    let ocsf =
        events.iter().filter(|e| aep_projections::ocsf::to_ocsf(e, &opts).is_some()).map(|e| e.id.clone()).collect();
    (records, spans, ces, ocsf)
}

/// Waits (bounded: the backend is local) until the backend holds everything `events` make.
async fn delivered(b: &Backend, events: &[Event]) {
    let (records, spans, ces, ocsf) = expected(events);
    let done = || {
        let t = b.taken.lock().unwrap();
        records.iter().all(|k| t.records.contains_key(k))
            && spans.iter().all(|k| t.spans.contains_key(k))
            && ces.iter().all(|k| t.cloudevents.contains_key(k))
            && ocsf.iter().all(|k| t.ocsf.contains_key(k))
    };
    let ok = aep_testkit::until_notified(&b.seen, Duration::from_secs(60), done).await;
    let t = b.taken.lock().unwrap();
    assert!(
        ok,
        "not everything arrived: records {}/{}, spans {}/{}, cloudevents {}/{}, ocsf {}/{}",
        records.iter().filter(|k| t.records.contains_key(*k)).count(),
        records.len(),
        spans.iter().filter(|k| t.spans.contains_key(*k)).count(),
        spans.len(),
        ces.iter().filter(|k| t.cloudevents.contains_key(*k)).count(),
        ces.len(),
        ocsf.iter().filter(|k| t.ocsf.contains_key(*k)).count(),
        ocsf.len(),
    );
    assert_eq!(t.unnamed, 0, "every record, span, CloudEvent and OCSF record names the bridge");
    // Nothing the log does not hold, and each span of a session once per trace.
    assert_eq!(t.records.keys().cloned().collect::<BTreeSet<_>>(), records);
    assert_eq!(t.spans.keys().cloned().collect::<BTreeSet<_>>(), spans);
}

/// A laptop offline for two hours (tokio's clock, paused: the exporters' retry budgets and
/// waits run in simulated time): the backend is gone from the first event on; the old
/// design dropped every batch after its 5-minute budget. After the outage every event
/// reaches every exporter, once, the OCSF file included, and nothing was counted lost.
#[tokio::test]
async fn two_hours_offline_then_everything_is_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::default();
    let switch = start_switch(start_backend(backend.clone()).await, false).await;
    let cfg = export_cfg(switch.addr, dir.path());
    let run = Run::start(dir.path(), &cfg, JsonlConfig::default());
    for s in ["s1", "s2", "s3"] {
        run.pipeline.submit_drafts("hook", "codex", session(s)).await.unwrap();
    }
    // Written in real time (the JSONL writer is an OS thread), then the clock is paused.
    assert!(run.pipeline.written(Duration::from_secs(5)).await);
    tokio::time::pause();
    // Two hours pass with the peer gone.
    tokio::time::sleep(Duration::from_secs(2 * 3600)).await;
    let stalled = run.metrics.export_stalled.get(&[("sink", "otlp_logs")]);
    assert!(stalled >= 20, "the 5-minute budget ran out again and again: {stalled}");
    assert!(backend.taken.lock().unwrap().records.is_empty());
    // The peer is back; real time again.
    tokio::time::resume();
    switch.set(true);
    let events = logged(dir.path());
    assert_eq!(events.len(), 18);
    delivered(&backend, &events).await;
    let metrics = run.stop().await;
    let t = backend.taken.lock().unwrap();
    assert_eq!(t.resent(), 0, "nothing sent twice");
    for sink in ["otlp_logs", "otlp_spans", "cloudevents", "ocsf"] {
        assert_eq!(metrics.dropped.get(&[("sink", sink), ("severity", "info")]), 0, "{sink}");
        assert_eq!(metrics.export_lost.get(&[("sink", sink), ("reason", "rotated")]), 0, "{sink}");
    }
    let file = std::fs::read_to_string(dir.path().join("ocsf.jsonl")).unwrap();
    assert_eq!(file.lines().count(), t.ocsf.len(), "the OCSF file has each record once");
}

/// The bridge restarts while its peer is away: the second run resumes from the cursors the
/// first wrote and sends what the first could not, plus its own events; what the first
/// delivered before the outage is not sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_during_an_outage_resumes_from_the_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::default();
    let switch = start_switch(start_backend(backend.clone()).await, true).await;
    let mut cfg = export_cfg(switch.addr, dir.path());
    cfg.retry.initial_ms = 20;
    cfg.retry.max_ms = 100;
    cfg.retry.max_elapsed_ms = 300;
    let run = Run::start(dir.path(), &cfg, JsonlConfig::default());
    run.pipeline.submit_drafts("hook", "codex", session("before")).await.unwrap();
    assert!(run.pipeline.written(Duration::from_secs(5)).await);
    delivered(&backend, &logged(dir.path())).await;
    // The peer goes; a session is written and cannot leave; the bridge stops.
    switch.set(false);
    run.pipeline.submit_drafts("hook", "codex", session("during")).await.unwrap();
    assert!(run.pipeline.written(Duration::from_secs(5)).await);
    let m = run.metrics.clone();
    let stalled = tokio::time::timeout(Duration::from_secs(30), async {
        // Polled: the stall is a counter, no signal; the budget is 300 ms.
        while m.export_stalled.get(&[("sink", "otlp_logs")]) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    stalled.await.expect("the exporter did not stall with its peer away");
    run.stop().await;
    assert!(std::fs::read_to_string(dir.path().join("state/export/otlp_logs.json")).unwrap().contains("codex/"));
    // Restarted while the peer is still away, it comes back later.
    let run = Run::start(dir.path(), &cfg, JsonlConfig::default());
    run.pipeline.submit_drafts("hook", "codex", session("after")).await.unwrap();
    assert!(run.pipeline.written(Duration::from_secs(5)).await);
    switch.set(true);
    let events = logged(dir.path());
    assert_eq!(events.len(), 18);
    delivered(&backend, &events).await;
    run.stop().await;
    let t = backend.taken.lock().unwrap();
    assert_eq!(t.records.values().map(|n| n - 1).sum::<u32>(), 0, "no log record sent twice");
    assert_eq!(t.cloudevents.values().map(|n| n - 1).sum::<u32>(), 0, "no CloudEvent sent twice");
    assert_eq!(t.ocsf.values().map(|n| n - 1).sum::<u32>(), 0, "no OCSF record sent twice");
    // Spans: a session still open at the stop is assembled again from its log; its spans
    // keep their ids (`delivered` found no span id the log does not make), so a resend is
    // the same span, which a backend keeps once.
    let span_resends: u32 = t.spans.values().map(|n| n - 1).sum();
    eprintln!("span resends after the restart: {span_resends} of {} spans", t.spans.len());
}

/// An exporter that falls further behind one session than the rotation keeps loses the
/// rotated-away lines, and counts exactly those; what is still on disk arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_rotation_budget_the_oldest_events_are_counted_lost() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::default();
    let switch = start_switch(start_backend(backend.clone()).await, false).await;
    let mut cfg = export_cfg(switch.addr, dir.path());
    // Only the log records: one sink to count.
    cfg.otlp.spans = false;
    cfg.cloudevents.endpoint = None;
    cfg.ocsf.endpoint = None;
    cfg.ocsf.file.clear();
    cfg.retry.initial_ms = 20;
    cfg.retry.max_ms = 100;
    cfg.retry.max_elapsed_ms = 300;
    // A session log rotates every ~2 KB, one rotated file kept.
    let jsonl_cfg = JsonlConfig { rotate_bytes: 2000, rotate_keep: 1, ..JsonlConfig::default() };
    let run = Run::start(dir.path(), &cfg, jsonl_cfg);
    // One session (a second `session.started` would continue it in a new log). Its first
    // two events are read and held in memory by the exporter, whose peer is away past
    // its retry budget: from then on it reads nothing more until the peer is back.
    let mut all = session("long");
    let end = all.split_off(2);
    let mut submitted = all.len() as u64;
    let held: Vec<(String, String)> = run
        .pipeline
        .submit_drafts("hook", "codex", all)
        .await
        .unwrap()
        .iter()
        .map(|s| (s.event.source.to_string(), s.event.id.clone()))
        .collect();
    assert!(run.pipeline.written(Duration::from_secs(5)).await);
    let m = run.metrics.clone();
    let stalled = tokio::time::timeout(Duration::from_secs(30), async {
        // Polled: the stall is a counter, no signal; the budget is 300 ms.
        while m.export_stalled.get(&[("sink", "otlp_logs")]) == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    stalled.await.expect("the exporter did not stall with its peer away");
    // Then the session goes on, a tool call per write (a rotation happens between writes).
    for i in 0..20 {
        let mut call: Vec<EventDraft> = end[..2].to_vec();
        for d in &mut call {
            let id = format!("c{i}");
            d.correlation_key = d.correlation_key.as_ref().map(|_| format!("tool:{id}"));
            d.cause_key = d.cause_key.as_ref().map(|_| format!("tool:{id}"));
            d.data.insert("tool".into(), serde_json::json!({"name": "Bash", "call_id": id}));
        }
        submitted += call.len() as u64;
        run.pipeline.submit_drafts("hook", "codex", call).await.unwrap();
        assert!(run.pipeline.written(Duration::from_secs(5)).await);
    }
    // What the rotation deleted unread is counted, exactly: lost + on disk + held = written.
    let lost = run.metrics.export_lost.get(&[("sink", "otlp_logs"), ("reason", "rotated")]);
    let kept = logged(dir.path());
    let (records, ..) = expected(&kept);
    let on_disk_or_held = records.iter().chain(&held).collect::<BTreeSet<_>>().len() as u64;
    assert!(
        lost > 0 && lost + on_disk_or_held == submitted,
        "lost {lost} + kept {} + held {} != {submitted}",
        kept.len(),
        held.len()
    );
    switch.set(true);
    let want: BTreeSet<(String, String)> = records.into_iter().chain(held).collect();
    let ok = aep_testkit::until_notified(&backend.seen, Duration::from_secs(60), || {
        want.iter().all(|k| backend.taken.lock().unwrap().records.contains_key(k))
    })
    .await;
    assert!(ok, "what is still on disk or held arrives");
    run.stop().await;
    let t = backend.taken.lock().unwrap();
    assert_eq!(t.records.keys().cloned().collect::<BTreeSet<_>>(), want, "and nothing else");
    assert_eq!(t.resent(), 0, "each once");
}
