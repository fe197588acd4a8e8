//! Exporters to existing observability stacks (AEP-0005): OTLP logs and synthesized spans,
//! CloudEvents over HTTP, OCSF. Each reads the JSONL logs back ([`wal`], the default while
//! the logs are written: nothing is lost to an outage of its peer or a restart), or is a
//! sink on the pipeline's fan-out (a bounded queue, drops counted by the pipeline); each
//! batches by size and time, retries with exponential backoff on retryable failures, and
//! flushes at the end. Everything exported carries the bridge's identity ([`fleet`]).

pub mod cloudevents;
pub mod config;
pub mod feed;
pub mod fleet;
pub mod gate;
pub mod ocsf;
pub mod otel_env;
pub mod otlp;
pub mod otlp_metrics;
pub mod tee;
pub mod vendor_spans;
pub mod wal;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub use config::{
    CeMode, CloudEventsConfig, Compression, ExportConfig, MetricsTemporality, OcsfConfig, OtlpConfig, Protocol,
    RetryConfig, Signal, SignalConfig, SignalSettings, SignalsConfig,
};

use crate::health::Health;
use crate::metrics::Metrics;
use crate::pipeline::{SinkTx, Stamped};
use feed::Feed;

/// Delivery counters of one exporter (items are records, spans or events as the sink sends them).
#[derive(Debug, Default)]
pub struct Stats {
    /// Items the peer accepted (partially rejected requests included).
    pub delivered: AtomicU64,
    /// Items in batches given up after their retries or refused permanently.
    pub failed: AtomicU64,
    /// Items a peer reported as rejected in a partial success.
    pub rejected: AtomicU64,
    /// Retries made.
    pub retries: AtomicU64,
}

impl Stats {
    fn add_delivered(&self, n: usize) {
        self.delivered.fetch_add(n as u64, Ordering::Relaxed);
    }
    fn add_failed(&self, n: usize) {
        self.failed.fetch_add(n as u64, Ordering::Relaxed);
    }
    fn add_rejected(&self, n: usize) {
        self.rejected.fetch_add(n as u64, Ordering::Relaxed);
    }
    fn add_retries(&self, n: u32) {
        self.retries.fetch_add(u64::from(n), Ordering::Relaxed);
    }
    /// `(delivered, failed, rejected, retries)`.
    pub fn snapshot(&self) -> (u64, u64, u64, u64) {
        (
            self.delivered.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.rejected.load(Ordering::Relaxed),
            self.retries.load(Ordering::Relaxed),
        )
    }
}

/// The running exporters.
#[derive(Debug, Default)]
pub struct Exporters {
    /// Queues to add to the pipeline.
    pub sinks: Vec<SinkTx>,
    /// Tasks that end after their final flush once their queue closes.
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    /// Delivery counters by sink name.
    pub stats: Vec<(&'static str, Arc<Stats>)>,
    /// The tee that hands the agents' own `/v1/traces` to the spans sink (when spans are
    /// exported), to be given to the OTLP receiver.
    pub vendor_spans: Option<vendor_spans::VendorSpansTee>,
}

/// Counts a lost batch's events as dropped, by severity.
fn count_dropped(sink: &'static str, metrics: &Metrics, events: &[Arc<Stamped>]) {
    for s in events {
        metrics.dropped.inc(&[("sink", sink), ("severity", s.event.severity().as_str())]);
    }
}

/// Takes the next batch: waits up to `idle` for a first event (an empty batch on timeout),
/// then up to `linger` more for the batch to reach `max`. The flag is true once the queue
/// is closed and drained.
pub(crate) async fn next_batch(
    rx: &mut mpsc::Receiver<Arc<Stamped>>,
    max: usize,
    linger: Duration,
    idle: Duration,
) -> (Vec<Arc<Stamped>>, bool) {
    let mut out = Vec::new();
    match tokio::time::timeout(idle, rx.recv()).await {
        Ok(Some(x)) => out.push(x),
        Ok(None) => return (out, true),
        Err(_) => return (out, false),
    }
    let deadline = tokio::time::Instant::now() + linger;
    while out.len() < max.max(1) {
        match rx.try_recv() {
            Ok(x) => {
                out.push(x);
                continue;
            }
            Err(mpsc::error::TryRecvError::Disconnected) => return (out, true),
            Err(mpsc::error::TryRecvError::Empty) => {}
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(x)) => out.push(x),
            Ok(None) => return (out, true),
            Err(_) => break,
        }
    }
    (out, false)
}

/// The transport client of an HTTP exporter, or `None` (logged) when its options are unusable.
fn http_client(
    name: &str,
    timeout_ms: u64,
    headers: &crate::transport::Headers,
    tls: &crate::transport::TlsConfig,
) -> Option<crate::transport::HttpClient> {
    let opts = crate::transport::HttpOptions {
        timeout: Duration::from_millis(timeout_ms.max(1)),
        headers: headers.clone(),
        tls: tls.clone(),
    };
    match crate::transport::HttpClient::new(&opts) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::error!(sink = name, error = %e, "Exporter not started.");
            eprintln!("aep-bridge: error: export.{name}: {e}; the exporter is off");
            None
        }
    }
}

/// Waits `max_ms` before a durable exporter tries its held batch again; `false` when
/// shutdown came first.
pub(crate) async fn pause(policy: &RetryConfig, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(Duration::from_millis(policy.max_ms.max(1))) => true,
        _ = shutdown.cancelled() => false,
    }
}

/// A durable exporter's peer is still away after the retry budget: said on `/healthz` (until
/// a batch gets through), counted, logged. Nothing is dropped: the batch is held.
pub(crate) fn note_stall(sink: &'static str, peer: &str, error: &str, metrics: &Metrics, health: &Health) {
    metrics.export_stalled.inc(&[("sink", sink)]);
    health.failing(sink, format!("{peer}: {error}; its events wait in the log, retrying"));
    tracing::warn!(
        sink,
        peer,
        error,
        "Exporter peer still away after the retry budget; holding the batch and retrying."
    );
}

/// What the exporters run with besides `[export]`.
#[derive(Debug, Clone)]
pub struct ExportContext {
    /// Capacity of each in-memory queue (exporters not reading the log).
    pub queue_capacity: usize,
    /// The shared metrics.
    pub metrics: Arc<Metrics>,
    /// `/healthz`.
    pub health: Arc<Health>,
    /// Stops retries (and, for the in-memory exporters, nothing else: their queues close).
    pub shutdown: CancellationToken,
    /// The JSONL logs the exporters read from when `[export] durable` (`None`: the JSONL
    /// sink is off, and the exporters take events from memory).
    pub wal: Option<Arc<wal::Wal>>,
    /// Who the bridge runs for, stamped on CloudEvents and OCSF records (the OTLP resource
    /// attributes carry it once `identity::stamped` added it to the config).
    pub fleet: Arc<fleet::Identity>,
}

impl ExportContext {
    /// A context for in-memory exporters with no identity (tests, `import`).
    pub fn memory(
        queue_capacity: usize,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
        shutdown: CancellationToken,
    ) -> Self {
        Self { queue_capacity, metrics, health, shutdown, wal: None, fleet: Arc::default() }
    }
}

/// Starts every configured exporter, with their delivery counters; an OTLP exporter whose
/// peer fails or refuses its signal says so in `health` (`/healthz`). The exporters take
/// events from memory (queues to add to the pipeline).
pub fn start(
    cfg: &ExportConfig,
    queue_capacity: usize,
    metrics: Arc<Metrics>,
    health: Arc<Health>,
    shutdown: CancellationToken,
) -> Exporters {
    start_in(cfg, ExportContext::memory(queue_capacity, metrics, health, shutdown))
}

/// [`start`] in `cx`: with a write-ahead log and `[export] durable`, every exporter reads
/// the JSONL logs (no queue is added to the pipeline for it).
pub fn start_in(cfg: &ExportConfig, cx: ExportContext) -> Exporters {
    let mut ex = Exporters::default();
    let cap = cx.queue_capacity.max(1);
    let wal = cx.wal.clone().filter(|_| cfg.durable);
    let (metrics, health, shutdown) = (cx.metrics.clone(), cx.health.clone(), cx.shutdown.clone());
    // The feed of sink `name`: the log (`warm`: with what precedes each cursor), or a queue.
    let add = |name: &'static str, warm: bool, ex: &mut Exporters| {
        let stats = Arc::new(Stats::default());
        ex.stats.push((name, stats.clone()));
        let feed = match &wal {
            Some(w) => Feed::Log(Box::new(wal::Tail::open(w.clone(), name, warm))),
            None => {
                let (tx, rx) = mpsc::channel::<Arc<Stamped>>(cap);
                ex.sinks.push(SinkTx::new(name, tx));
                Feed::Queue(rx)
            }
        };
        (feed, stats)
    };
    let o = &cfg.otlp;
    for signal in [Signal::Logs, Signal::Traces] {
        let Some(settings) = o.for_signal(signal) else { continue };
        let client = match otlp::OtlpClient::new(&settings) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(?signal, error = %e, "OTLP exporter not started.");
                eprintln!("aep-bridge: error: export.otlp: {e}; the OTLP {signal:?} exporter is off");
                continue;
            }
        };
        let task = match signal {
            // Metrics are no event sink: see `otlp_metrics`, set up with the meter provider.
            Signal::Metrics => continue,
            Signal::Logs => {
                // Records land on their spans: a restart reads a session's start again.
                let (feed, stats) = add("otlp_logs", o.spans, &mut ex);
                let outlet =
                    otlp::Outlet::new("otlp_logs", signal, client.url(), metrics.clone(), stats, health.clone())
                        .durable(feed.durable());
                tokio::spawn(otlp::run_logs(feed, o.clone(), client, cfg.retry.clone(), outlet, shutdown.clone()))
            }
            Signal::Traces => {
                let (feed, stats) = add("otlp_spans", false, &mut ex);
                let outlet =
                    otlp::Outlet::new("otlp_spans", signal, client.url(), metrics.clone(), stats, health.clone())
                        .durable(feed.durable());
                // Vendor trace requests, each a whole export: a short queue, bounded in bytes too.
                let (vtx, vrx) = mpsc::channel(64);
                ex.vendor_spans = Some(vendor_spans::VendorSpansTee::new(vtx, o.span_grace_max_bytes, metrics.clone()));
                tokio::spawn(otlp::run_spans(
                    feed,
                    Some(vrx),
                    o.clone(),
                    client,
                    cfg.retry.clone(),
                    outlet,
                    shutdown.clone(),
                ))
            }
        };
        ex.tasks.push(task);
    }
    let c = &cfg.cloudevents;
    if let Some(endpoint) = &c.endpoint
        && let Some(client) = http_client("cloudevents", c.timeout_ms, &c.headers, &c.tls)
    {
        let (feed, stats) = add("cloudevents", false, &mut ex);
        ex.tasks.push(tokio::spawn(cloudevents::run(
            feed,
            c.clone(),
            endpoint.clone(),
            client,
            cfg.retry.clone(),
            metrics.clone(),
            stats,
            health.clone(),
            cx.fleet.clone(),
            shutdown.clone(),
        )));
    }
    let c = &cfg.ocsf;
    if c.endpoint.is_some() || !c.file.is_empty() {
        // The file alone needs no client; an unusable client with an endpoint stops the sink.
        let client = c
            .endpoint
            .as_ref()
            .and_then(|e| http_client("ocsf", c.timeout_ms, &c.headers, &c.tls).map(|client| (client, e.clone())));
        if c.endpoint.is_none() || client.is_some() {
            let (feed, stats) = add("ocsf", false, &mut ex);
            ex.tasks.push(tokio::spawn(ocsf::run(
                feed,
                c.clone(),
                client,
                cfg.retry.clone(),
                metrics,
                stats,
                health,
                cx.fleet.clone(),
                shutdown,
            )));
        }
    }
    ex
}

/// Starts every configured exporter in `cx` ([`start_in`]); returns the sink queues to add
/// to the pipeline (none for an exporter reading the log) and the tasks to await (each
/// ends after its final flush: a queue's once it closes, a log reader's once the JSONL
/// sink stopped and it read every line).
pub fn spawn(
    cfg: &ExportConfig,
    cx: ExportContext,
) -> (Vec<SinkTx>, Vec<tokio::task::JoinHandle<()>>, Option<vendor_spans::VendorSpansTee>) {
    let ex = start_in(cfg, cx);
    (ex.sinks, ex.tasks, ex.vendor_spans)
}
