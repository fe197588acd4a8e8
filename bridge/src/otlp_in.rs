//! The bridge's OTLP inbound handler: log records through the vendor profiles into the
//! pipeline. Traces and metrics are accepted (an exporter never sees an error for them)
//! and only handed to the tees: the HTTP tee, the metrics forward, and the spans sink,
//! which places the agents' own spans in their session traces (`export::vendor_spans`).
//!
//! The receivers hand it an export's records on the task (or, for a large body, the
//! blocking-pool thread) that decoded them: it maps them (pure) and stamps the drafts right
//! there, a chunk of records at a time, awaiting the pipeline's bounded queues, so an export
//! costs no thread handoff and its memory stays in cache. When
//! an earlier export's drafts are still queued, or a tee needs the decoded request, the drafts
//! go to a bounded queue drained in order by one task instead. Past `max_queued` drafts in
//! flight an export is answered 503 / `UNAVAILABLE` with a retry delay (OTLP backpressure),
//! never dropped silently.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use aep_adapters::MapContext;
use aep_adapters::otel::{MappedDraft, Mode, OtelRecord};
use aep_adapters::vendors::OtelVendor;
use aep_adapters::vendors::otel_route::{Mapped, ProfileOverrides};
use aep_receivers::otlp::{
    Accepted, ExportLogsServiceRequest, ExportMetricsServiceRequest, ExportTraceServiceRequest, OtlpHandler,
    RecordsAnswer, Refused, into_otel_records, to_otel_records,
};
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::export::tee::OtlpTee;
use crate::metrics::Metrics;
use crate::pipeline::{Flush, Pipeline};
use crate::transport::config::{HttpUrl, off_if_empty};
use crate::transport::{Headers, TlsConfig};

/// `[otlp_in]`: the OTLP receivers' vendor profiles.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OtlpInConfig {
    /// `primary` or `companion` (default).
    pub mode: aep_adapters::otel::Mode,
    /// Overrides of profile selection: resource `service.name` -> profile (the id of a
    /// vendor with an OTel profile, see `aep-bridge adapters`).
    pub profiles: BTreeMap<String, OtelVendor>,
    /// Opt-in for services no profile knows: resource `service.name` -> a vendor name; their
    /// records map to `x.<vendor>.otel.<event>` (only the event name below the `full`
    /// ceiling) instead of being refused.
    pub generic: BTreeMap<String, aep_adapters::otel::generic::VendorName>,
    /// Forward every received OTLP request to this OTLP/HTTP base URL (the tee), gated by
    /// `tee_max_capture`; `""` = off.
    #[serde(deserialize_with = "off_if_empty")]
    pub tee: Option<HttpUrl>,
    /// Extra request headers of the tee (e.g. an API key).
    pub tee_headers: Headers,
    /// `[otlp_in.tee_tls]`: extra CA bundle and client certificate for an `https://` tee.
    pub tee_tls: TlsConfig,
    /// Capture ceiling of what the tee forwards (`export::gate`); unset = `[capture] max`,
    /// and never above it: `full` (with `[capture] max = "full"`) forwards unchanged.
    pub tee_max_capture: Option<aep_schemas::Capture>,
    /// Decompressed OTLP/HTTP bytes decoded at once over every receiver; past it an
    /// export gets 503 + `Retry-After` (one export is always taken when none is in flight).
    pub max_decode_bytes: usize,
    /// OTLP/gRPC exports handled at once (tonic decodes a message before the bridge sees
    /// it, so gRPC is bounded by count: memory is about this many times the message limit).
    pub max_grpc_concurrency: usize,
}

impl Default for OtlpInConfig {
    fn default() -> Self {
        Self {
            mode: aep_adapters::otel::Mode::default(),
            profiles: BTreeMap::new(),
            generic: BTreeMap::new(),
            tee: None,
            tee_headers: Headers::default(),
            tee_tls: TlsConfig::default(),
            tee_max_capture: None,
            max_decode_bytes: 16 * 1024 * 1024,
            max_grpc_concurrency: 2,
        }
    }
}

/// Drafts submitted to the pipeline at once from an OTLP export.
const BULK_CHUNK: usize = 256;

/// Events the log writer may have queued and unwritten before more OTLP drafts go in.
const BULK_BACKLOG: u64 = 1024;

/// The profile overrides of `[otlp_in.profiles]` and `[otlp_in.generic]` (a service in
/// both takes its built-in profile).
pub fn profile_overrides(cfg: &OtlpInConfig) -> ProfileOverrides {
    ProfileOverrides::new(&cfg.profiles, &cfg.generic)
}

/// Maps OTLP log records through the profiles and feeds the pipeline.
pub struct BridgeOtlp {
    tx: mpsc::Sender<Vec<MappedDraft>>,
    cx: MapContext,
    mode: Mode,
    overrides: ProfileOverrides,
    metrics: Arc<Metrics>,
    tee: Option<Arc<dyn OtlpTee>>,
    /// Drafts mapped and not yet through the pipeline; past `max_queued` new exports are
    /// refused (503 / `UNAVAILABLE`) before they are decoded, so memory stays bounded by
    /// records, not by requests of any size.
    queued: Arc<AtomicUsize>,
    /// Drafts being stamped inline by blocking-pool handlers (counted against `max_queued`
    /// with `queued`).
    inline: AtomicUsize,
    max_queued: usize,
    /// The pipeline, for drafts stamped inline.
    pipeline: Pipeline,
    /// The bearer token every export must carry, when set (one token on every ingress).
    token: Option<String>,
    /// Decompressed bytes decoded at once.
    budget: aep_receivers::otlp::DecodeBudget,
}

impl BridgeOtlp {
    /// A handler feeding `pipeline`, holding at most about `max_queued` drafts in flight,
    /// decoding within `budget` and, with `token`, requiring it as every export's bearer
    /// credential; returns it with the task draining its queue.
    pub fn new(
        pipeline: Pipeline,
        cx: MapContext,
        mode: Mode,
        overrides: ProfileOverrides,
        max_queued: usize,
        tee: Option<Arc<dyn OtlpTee>>,
        token: Option<String>,
        budget: aep_receivers::otlp::DecodeBudget,
    ) -> (Arc<Self>, tokio::task::JoinHandle<()>) {
        // Every queued batch holds at least one draft, so the record count binds first.
        let (tx, mut rx) = mpsc::channel::<Vec<MappedDraft>>(max_queued.max(1));
        let metrics = pipeline.metrics().clone();
        let inline_pipeline = pipeline.clone();
        let queued = Arc::new(AtomicUsize::new(0));
        let in_flight = queued.clone();
        let task = tokio::spawn(async move {
            while let Some(batch) = rx.recv().await {
                let n = batch.len();
                // In order; each draft stamped as its vendor (each vendor is its own agent identity).
                let _ = submit_in_chunks(&pipeline, batch, Flush::Now).await;
                in_flight.fetch_sub(n, Ordering::AcqRel);
            }
        });
        let max_queued = max_queued.max(1);
        let this = Self {
            tx,
            cx,
            mode,
            overrides,
            metrics,
            tee,
            queued,
            inline: AtomicUsize::new(0),
            max_queued,
            pipeline: inline_pipeline,
            token,
            budget,
        };
        (Arc::new(this), task)
    }

    /// Refuses while the pipeline holds `max_queued` drafts or more (one export of any
    /// size is always taken into an empty queue).
    fn check_room(&self) -> Result<(), Refused> {
        if self.queued.load(Ordering::Acquire) + self.inline.load(Ordering::Acquire) >= self.max_queued {
            self.metrics.rejected.inc(&[("receiver", "otlp"), ("reason", "pipeline_full")]);
            return Err(Refused::Full { retry_after: Duration::from_secs(1) });
        }
        Ok(())
    }
}

/// Submits `batch` in order, in chunks, each only once the log writer is near caught up:
/// the stamper lock is never held for a whole export, and a hook, which waits for its own
/// events to be written, never queues behind one. The chunks' lines are held for the last
/// one, whose lines go as `last` says (the writer gets an export at once, [`Flush`]).
async fn submit_in_chunks(
    pipeline: &Pipeline,
    batch: Vec<MappedDraft>,
    last: Flush,
) -> Result<(), crate::pipeline::SubmitError> {
    let mut rest = batch.into_iter();
    while rest.len() > 0 {
        let chunk: Vec<MappedDraft> = rest.by_ref().take(BULK_CHUNK).collect();
        let flush = if rest.len() == 0 { last } else { Flush::WithNext };
        pipeline.room_for_bulk(BULK_BACKLOG).await;
        pipeline.submit_mapped("otlp", chunk, flush).await?;
    }
    Ok(())
}

/// Flushes the lines an export's chunks held ([`Flush::WithNext`]) however the export
/// ends: [`FlushOnDrop::finish`] at its end, or on drop (the export's future dropped
/// midway) from a task it spawns, since a drop cannot wait.
struct FlushOnDrop<'a>(Option<&'a Pipeline>);

impl FlushOnDrop<'_> {
    /// The export's end: hands the writer what its chunks held (unless another submit
    /// already flushed it). Armed until that flush is done: dropped while it waits for the
    /// stamper, the guard still leaves the flush behind.
    async fn finish(mut self) {
        if let Some(p) = self.0 {
            p.flush_held().await;
        }
        self.0 = None;
    }
}

impl Drop for FlushOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.0.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            let p = p.clone();
            rt.spawn(async move { p.flush_held().await });
        }
    }
}

impl BridgeOtlp {
    /// Maps `records` through the profiles (pure), after checking there is room for them.
    fn map_records(&self, records: &[OtelRecord]) -> Result<Mapped, Refused> {
        self.check_room()?;
        let mut m = Mapped::default();
        self.map_into(records, &mut m);
        Ok(m)
    }

    /// Maps `records` (pure) onto `m` ([`ProfileOverrides::map_into`]); those that name no
    /// session are dropped, counted here and reported in the answer's partial_success
    /// (see `answer`).
    fn map_into(&self, records: &[OtelRecord], m: &mut Mapped) {
        let sessionless = self.overrides.map_into(records, &self.cx, self.mode, m);
        for (vendor, version) in m.versions.drain(..) {
            self.metrics.drift.version_seen(vendor, &version);
        }
        for d in m.drift.drain(..) {
            self.metrics.drift.count(d.vendor, d.version.as_deref(), std::slice::from_ref(&d.drift));
        }
        if sessionless > 0 {
            self.metrics.rejected.add(&[("receiver", "otlp"), ("reason", "no_session")], sessionless);
        }
    }

    /// Whether an export's records may be mapped and stamped by its own caller: only when
    /// no earlier export's drafts are still queued (they go first: the queue keeps exports
    /// in order).
    fn may_stamp_inline(&self) -> bool {
        self.queued.load(Ordering::Acquire) == 0
    }

    /// Hands `drafts` to the draining task, or refuses when its queue is full.
    fn queue(&self, drafts: Vec<MappedDraft>) -> Result<(), Refused> {
        if drafts.is_empty() {
            return Ok(());
        }
        let n = drafts.len();
        self.queued.fetch_add(n, Ordering::AcqRel);
        match self.tx.try_send(drafts) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.queued.fetch_sub(n, Ordering::AcqRel);
                self.metrics.rejected.inc(&[("receiver", "otlp"), ("reason", "pipeline_full")]);
                Err(Refused::Full { retry_after: Duration::from_secs(1) })
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.queued.fetch_sub(n, Ordering::AcqRel);
                Err(Refused::Full { retry_after: Duration::from_secs(5) })
            }
        }
    }

    /// The answer to an export whose drafts are in the pipeline (or queued for it): the
    /// records it dropped are reported in `partial_success` (an OTLP sender, and a collector
    /// in between, counts them as rejected instead of taking a silent success), those no
    /// profile matched counted here, those that name no session counted while mapping.
    fn answer(&self, m: &Mapped) -> Accepted {
        let (unmatched, sessionless, total) = (m.unmatched, m.sessionless, m.total);
        let mut why = Vec::new();
        if unmatched > 0 {
            self.metrics.rejected.add(&[("receiver", "otlp"), ("reason", "no_profile")], unmatched);
            let svc = m.first_unmatched.as_deref().unwrap_or_default();
            why.push(format!(
                "{unmatched} of {total} log records match no vendor profile (service.name {svc:?}); set [otlp_in.profiles] or [otlp_in.generic] to map it"
            ));
        }
        if sessionless > 0 {
            why.push(format!(
                "{sessionless} of {total} log records name no session (no session or conversation id): an AEP event belongs to one, so they were dropped"
            ));
        }
        if why.is_empty() {
            return Accepted::all();
        }
        Accepted::partial(i64::try_from(unmatched + sessionless).unwrap_or(i64::MAX), why.join("; "))
    }

    /// Maps `records` and queues the drafts; `tee` runs once they are accepted. With
    /// `inline` (the caller is a blocking-pool thread) the drafts are stamped and fanned out
    /// on this thread instead, unless drafts of earlier exports are still queued.
    fn take_records(&self, records: Vec<OtelRecord>, tee: impl FnOnce(), inline: bool) -> Result<Accepted, Refused> {
        // Inline: everything a record costs is allocated and freed on this one thread (a
        // free from another thread, the drain task's or the log writer's, costs the
        // allocator several times a local one), and the export is answered once its events
        // are in the pipeline.
        let handle = if inline && self.may_stamp_inline() { tokio::runtime::Handle::try_current().ok() } else { None };
        let answer = match handle {
            Some(handle) => handle.block_on(self.take_records_inline(records))?,
            None => {
                let mut m = self.map_records(&records)?;
                drop(records);
                self.queue(std::mem::take(&mut m.drafts))?;
                self.answer(&m)
            }
        };
        // The tee sees only requests this receiver accepted: a 503 makes the sender retry,
        // and forwarding before it would hand the upstream the same records twice.
        tee();
        Ok(answer)
    }

    /// Maps, stamps and fans out `records` on the caller's thread or task, [`INLINE_CHUNK`]
    /// records at a time (counted against `max_queued` meanwhile), and answers once their
    /// events are in the pipeline.
    ///
    /// Chunked for the cache, not for fairness: a chunk's records are dropped once mapped
    /// and its drafts once stamped, so the next chunk allocates from memory that is still
    /// in cache. An export of 500 records mapped whole, then stamped whole, cycles its
    /// allocations through the core's L2 (measured with `aep-bench otlp`, same
    /// instruction counts, fewer CPU-seconds).
    async fn take_records_inline(&self, records: Vec<OtelRecord>) -> Result<Accepted, Refused> {
        self.check_room()?;
        let n = records.len();
        self.inline.fetch_add(n, Ordering::AcqRel);
        let mut m = Mapped::default();
        let mut done = Ok(());
        let mut records = records.into_iter();
        // The chunks' lines go to the writer together, at the end (or, should this future be
        // dropped midway, the client gone, from a task the guard leaves behind).
        let held = FlushOnDrop(Some(&self.pipeline));
        while records.len() > 0 && done.is_ok() {
            let k = records.len().min(INLINE_CHUNK);
            self.map_into(&records.as_slice()[..k], &mut m);
            // Dropped where they lie, before their drafts are stamped.
            records.by_ref().take(k).for_each(drop);
            let chunk = std::mem::take(&mut m.drafts);
            if !chunk.is_empty() {
                done = submit_in_chunks(&self.pipeline, chunk, Flush::WithNext).await;
            }
        }
        held.finish().await;
        self.inline.fetch_sub(n, Ordering::AcqRel);
        done.map_err(|_| Refused::Full { retry_after: Duration::from_secs(5) })?;
        Ok(self.answer(&m))
    }

    /// [`Self::take_records`] on the receiving task itself: the records are mapped and
    /// stamped there (awaiting the pipeline, which bounds it), not handed to the draining
    /// task, so an export costs no thread handoff and is answered once its events are in
    /// the pipeline.
    async fn take_records_async(&self, records: Vec<OtelRecord>) -> Result<Accepted, Refused> {
        if self.may_stamp_inline() {
            return self.take_records_inline(records).await;
        }
        let mut m = self.map_records(&records)?;
        drop(records);
        self.queue(std::mem::take(&mut m.drafts))?;
        Ok(self.answer(&m))
    }
}

/// Records mapped and stamped at a time by [`BridgeOtlp::take_records_inline`] (`aep-bench
/// otlp` on both recorded vendor mixes: 32-128 beat the whole export in the same run,
/// 256 did not; 64 costs no more instructions than the whole).
const INLINE_CHUNK: usize = 64;

impl OtlpHandler for BridgeOtlp {
    fn refused(&self, reason: &'static str) {
        self.metrics.rejected.inc(&[("receiver", "otlp"), ("reason", reason)]);
    }

    fn authorized(&self, token: Option<&str>) -> bool {
        crate::auth::bearer_ok(self.token.as_deref(), token)
    }

    fn decode_budget(&self) -> Option<&aep_receivers::otlp::DecodeBudget> {
        Some(&self.budget)
    }

    fn logs(&self, req: ExportLogsServiceRequest) -> Result<Accepted, Refused> {
        match self.tee.as_ref().filter(|t| t.wants_logs()) {
            Some(t) => self.take_records(to_otel_records(&req), || t.logs(&req), false),
            // Without a tee nothing needs the request after conversion: take it apart (no copies).
            None => self.take_records(into_otel_records(req), || {}, false),
        }
    }

    fn ready_for_logs(&self) -> Result<(), Refused> {
        self.check_room()
    }

    /// Records straight from the wire, when no tee needs the decoded request.
    fn wants_log_records(&self) -> bool {
        self.tee.as_ref().is_none_or(|t| !t.wants_logs())
    }

    fn log_records(&self, records: Vec<OtelRecord>) -> Result<Accepted, Refused> {
        self.take_records(records, || {}, false)
    }

    fn log_records_blocking(&self, records: Vec<OtelRecord>) -> Result<Accepted, Refused> {
        self.take_records(records, || {}, true)
    }

    fn log_records_async(&self, records: Vec<OtelRecord>) -> RecordsAnswer<'_> {
        Box::pin(self.take_records_async(records))
    }

    fn traces(&self, req: ExportTraceServiceRequest) -> Result<Accepted, Refused> {
        if let Some(t) = &self.tee {
            t.traces(&req);
        }
        Ok(Accepted::all())
    }

    fn metrics(&self, req: ExportMetricsServiceRequest) -> Result<Accepted, Refused> {
        if let Some(t) = &self.tee {
            t.metrics(&req);
        }
        Ok(Accepted::all())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::PipelineBuilder;
    use aep_adapters::otel::Attributes;
    use aep_adapters::otel::generic::GenericOtel;
    use aep_receivers::otlp::DecodeBudget;
    use serde_json::json;
    use std::collections::HashMap;

    fn codex_record(conversation: &str) -> OtelRecord {
        OtelRecord {
            resource: Arc::new(serde_json::Map::from_iter([("service.name".to_owned(), json!("codex_exec"))])),
            attributes: Attributes::from_iter([
                ("event.name", json!("codex.turn_ttft")),
                ("conversation.id", json!(conversation)),
                ("duration_ms", json!(12)),
            ]),
            ..Default::default()
        }
    }

    /// A handler over `pipeline` holding at most `max_queued` drafts, with `overrides`.
    fn handler(
        pipeline: Pipeline,
        overrides: ProfileOverrides,
        max_queued: usize,
    ) -> (Arc<BridgeOtlp>, tokio::task::JoinHandle<()>) {
        let cx = MapContext::default();
        BridgeOtlp::new(pipeline, cx, Mode::Companion, overrides, max_queued, None, None, DecodeBudget::new(1 << 20))
    }

    /// A pipeline whose only sink is a line queue of `depth` batches (what the JSONL sink
    /// is handed), and that queue.
    fn line_pipeline(depth: usize) -> (Pipeline, mpsc::Receiver<crate::pipeline::LineBatch>) {
        let (tx, rx) = mpsc::channel(depth);
        let pipeline = PipelineBuilder::new(0, "h", Arc::new(Metrics::default()))
            .sink(crate::pipeline::SinkTx::durable_lines("jsonl", tx))
            .build();
        (pipeline, rx)
    }

    /// A record that names no session (Codex's own "flushing OTEL metrics" line) is dropped,
    /// and the answer says so in `partial_success`, beside the records that were taken.
    #[tokio::test(flavor = "current_thread")]
    async fn sessionless_records_are_reported_rejected() {
        let (pipeline, mut rx) = line_pipeline(64);
        let metrics = pipeline.metrics().clone();
        let (otlp, _task) = handler(pipeline, ProfileOverrides::default(), 100);
        let flushing = OtelRecord {
            resource: Arc::new(serde_json::Map::from_iter([("service.name".to_owned(), json!("codex_exec"))])),
            body: json!("flushing OTEL metrics").into(),
            ..Default::default()
        };
        let got = otlp.log_records_async(vec![codex_record("c1"), flushing]).await.unwrap();
        assert_eq!(got.rejected, 1);
        assert!(got.message.contains("1 of 2 log records name no session"), "{}", got.message);
        assert_eq!(rx.try_recv().unwrap().iter().count(), 1, "the other record was taken");
        assert_eq!(metrics.rejected.get(&[("receiver", "otlp"), ("reason", "no_session")]), 1);
    }

    /// On a current-thread runtime the draining task cannot run between the two calls, so
    /// the second export meets a full queue: refused before mapping, counted, and taken
    /// again once the queue has drained.
    #[tokio::test(flavor = "current_thread")]
    async fn a_full_queue_refuses_with_a_retry_delay_and_recovers() {
        let metrics = Arc::new(Metrics::default());
        let pipeline = PipelineBuilder::new(0, "h", metrics.clone()).build();
        let (otlp, _task) = handler(pipeline, ProfileOverrides::default(), 2);
        let batch = || vec![codex_record("c1"), codex_record("c1")];
        assert_eq!(otlp.log_records(batch()), Ok(Accepted::all()));
        assert!(matches!(otlp.ready_for_logs(), Err(Refused::Full { .. })));
        assert!(matches!(otlp.log_records(batch()), Err(Refused::Full { retry_after }) if retry_after.as_secs() >= 1));
        assert_eq!(metrics.rejected.get(&[("receiver", "otlp"), ("reason", "pipeline_full")]), 2);
        for _ in 0..100 {
            if otlp.ready_for_logs().is_ok() {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(otlp.log_records(batch()), Ok(Accepted::all()), "taken again once drained");
    }

    /// A handler on the blocking pool stamps its records before it answers (they are in the
    /// sink queue when the call returns), unless an earlier export's drafts are still queued:
    /// then its drafts queue behind them, so exports stay in order. On a current-thread
    /// runtime the draining task runs only when this test yields.
    #[tokio::test(flavor = "current_thread")]
    async fn blocking_exports_stamp_inline_but_never_overtake_queued_ones() {
        let (pipeline, mut rx) = line_pipeline(64);
        let (otlp, _task) = handler(pipeline, ProfileOverrides::default(), 100);
        let blocking = |conv: &'static str| {
            let otlp = otlp.clone();
            tokio::task::spawn_blocking(move || otlp.log_records_blocking(vec![codex_record(conv)]))
        };
        // Nothing queued: stamped on the blocking thread, in the sink before the answer.
        assert_eq!(blocking("c1").await.unwrap(), Ok(Accepted::all()));
        let first = rx.try_recv().expect("stamped before the answer");
        assert_eq!(first.iter().next().unwrap().0.session.as_deref(), Some("c1"));
        // An export queued (its task has not run yet), then a blocking one: it must not go first.
        assert_eq!(otlp.log_records(vec![codex_record("c2")]), Ok(Accepted::all()));
        assert_eq!(blocking("c3").await.unwrap(), Ok(Accepted::all()));
        let mut sessions = Vec::new();
        while sessions.len() < 2 {
            let b = rx.recv().await.unwrap();
            sessions.extend(b.iter().map(|(k, _, _)| k.session.clone().unwrap()));
        }
        assert_eq!(sessions, ["c2", "c3"]);
    }

    /// An export awaited on the receiving task is stamped there: its events are in the sink
    /// queue when it is answered, though the draining task never ran (a current-thread
    /// runtime runs it only when this test yields). Behind an export still queued it queues
    /// too, so exports stay in order.
    #[tokio::test(flavor = "current_thread")]
    async fn async_exports_stamp_on_the_receiving_task_but_never_overtake_queued_ones() {
        let (pipeline, mut rx) = line_pipeline(64);
        let (otlp, _task) = handler(pipeline, ProfileOverrides::default(), 100);
        assert_eq!(otlp.log_records_async(vec![codex_record("c1"), codex_record("c1")]).await, Ok(Accepted::all()));
        let first = rx.try_recv().expect("stamped before the answer");
        let seqs: Vec<_> = first.iter().map(|(k, _, _)| k.session.clone().unwrap()).collect();
        assert_eq!(seqs, ["c1", "c1"]);
        assert_eq!(otlp.log_records(vec![codex_record("c2")]), Ok(Accepted::all()));
        assert_eq!(otlp.log_records_async(vec![codex_record("c3")]).await, Ok(Accepted::all()));
        assert!(rx.try_recv().is_err(), "c3 waits behind the queued c2");
        let mut sessions = Vec::new();
        while sessions.len() < 2 {
            let b = rx.recv().await.unwrap();
            sessions.extend(b.iter().map(|(k, _, _)| k.session.clone().unwrap()));
        }
        assert_eq!(sessions, ["c2", "c3"]);
    }

    /// The chunks of an export hand the log writer their lines at once, at the export's
    /// end; an export dropped midway (its client gone) still has the lines of the chunks it
    /// stamped written, by the task its guard leaves behind, not held until some later submit.
    #[tokio::test(flavor = "current_thread")]
    async fn an_export_cut_short_still_hands_its_stamped_lines_to_the_writer() {
        let (ltx, mut lines) = mpsc::channel(64);
        // A durable event sink with room for one chunk: the second chunk waits in it, under
        // the stamper, with the first chunk's lines held.
        let (etx, mut events) = mpsc::channel(INLINE_CHUNK);
        let pipeline = PipelineBuilder::new(0, "h", Arc::new(Metrics::default()))
            .sink(crate::pipeline::SinkTx::durable_lines("jsonl", ltx))
            .sink(crate::pipeline::SinkTx::durable("events", etx))
            .build();
        let (otlp, _task) = handler(pipeline, ProfileOverrides::default(), 10_000);
        let records: Vec<OtelRecord> = (0..3 * INLINE_CHUNK).map(|_| codex_record("c1")).collect();
        {
            let export = otlp.log_records_async(records);
            tokio::pin!(export);
            assert!(futures_util::poll!(&mut export).is_pending(), "waits in the second chunk");
            assert!(lines.try_recv().is_err(), "the first chunk's lines are held");
        }
        // Dropped: the guard's task sends what the first chunk held.
        let got = tokio::time::timeout(Duration::from_secs(5), lines.recv()).await.unwrap().unwrap();
        assert_eq!(got.len(), INLINE_CHUNK);
        let seqs: Vec<u64> = got
            .iter()
            .map(|(_, l, _)| serde_json::from_slice::<serde_json::Value>(l).unwrap()["seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (0..INLINE_CHUNK as u64).collect::<Vec<_>>());
        // The events the sink did take are exactly those whose lines were sent.
        let mut taken = 0;
        while events.try_recv().is_ok() {
            taken += 1;
        }
        assert_eq!(taken, INLINE_CHUNK);
    }

    /// An export larger than one chunk is mapped and stamped a chunk at a time, yet its
    /// events reach the sink in record order, all before the answer; a record whose service
    /// has a configured profile keeps its place among the detected ones (it used to be
    /// mapped ahead of them), and its sessions keep gapless sequence numbers.
    #[tokio::test(flavor = "current_thread")]
    async fn a_large_export_is_stamped_in_chunks_in_record_order() {
        let (pipeline, mut rx) = line_pipeline(1024);
        let mut overrides = ProfileOverrides::default();
        overrides.generic.insert(
            "acme-agent".to_owned(),
            GenericOtel::leak(&aep_adapters::otel::generic::VendorName::new("acme").unwrap()),
        );
        let (otlp, _task) = handler(pipeline, overrides, 10_000);
        let n = 3 * INLINE_CHUNK + 7;
        let acme = |i: usize| OtelRecord {
            resource: Arc::new(serde_json::Map::from_iter([("service.name".to_owned(), json!("acme-agent"))])),
            attributes: Attributes::from_iter([
                ("event.name", json!("acme.tick")),
                ("session.id", json!("a1")),
                ("i", json!(i)),
            ]),
            ..Default::default()
        };
        let records: Vec<OtelRecord> = (0..n)
            .map(|i| if i % 50 == 25 { acme(i) } else { codex_record(if i % 2 == 0 { "c1" } else { "c2" }) })
            .collect();
        let expected: Vec<String> = (0..n)
            .map(|i| {
                if i % 50 == 25 {
                    "a1"
                } else if i % 2 == 0 {
                    "c1"
                } else {
                    "c2"
                }
                .to_owned()
            })
            .collect();
        assert_eq!(otlp.log_records_async(records).await, Ok(Accepted::all()));
        let mut seen = Vec::new();
        let mut seqs: HashMap<String, Vec<u64>> = HashMap::new();
        while let Ok(batch) = rx.try_recv() {
            for (key, line, _) in batch.iter() {
                let session = key.session.clone().unwrap();
                let ev: serde_json::Value = serde_json::from_slice(line).unwrap();
                seqs.entry(session.clone()).or_default().push(ev["seq"].as_u64().unwrap());
                seen.push(session);
            }
        }
        assert_eq!(seen, expected, "every event in the sink before the answer, in record order");
        for (session, s) in seqs {
            assert_eq!(s, (0..s.len() as u64).collect::<Vec<_>>(), "{session}: gapless, in order");
        }
        assert_eq!(otlp.inline.load(Ordering::Acquire), 0, "nothing left counted in flight");
    }
}
