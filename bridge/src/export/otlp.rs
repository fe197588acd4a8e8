//! The OTLP exporter: AEP Events as LogRecords (AEP-0005 §3) and synthesized spans, over
//! OTLP/gRPC (tonic, gzip) or OTLP/HTTP (protobuf or JSON), with the OTLP retry rules.
//!
//! The projections build OTLP/JSON; it is converted to the protobuf messages with
//! `opentelemetry-proto`'s serde (camelCase, which is what the projections write: see
//! the round-trip tests below) and sent as protobuf, or sent as-is over `http/json`.

use std::str::FromStr as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

// Tokio's clock, not std's: the sinks' batch and idle timers then follow paused time in
// tests (`tokio::time::pause`), and behave the same otherwise.
use tokio::time::Instant;

use aep_projections::otlp_logs::{OtlpOptions, logs_request, logs_request_on_spans};
use aep_projections::spans::{LogSpans, Span, SpanAssembler, SpanConfig, traces_request};
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsServiceRequest, ExportLogsServiceResponse, logs_service_client::LogsServiceClient,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse, metrics_service_client::MetricsServiceClient,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse, trace_service_client::TraceServiceClient,
};
use prost::Message as _;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::{Channel, Endpoint};

use super::Stats;
pub use super::config::Signal;
use super::config::{Compression, OtlpConfig, Protocol, RetryConfig, SignalSettings};
use super::feed::Feed;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::pipeline::Stamped;
use crate::transport::http::HttpOptions;
pub use crate::transport::retry::classify_grpc;
use crate::transport::{Attempt, HttpClient, Reply, with_retry};
pub use aep_projections::otlp::{ConvertError, logs_from_json, traces_from_json};
use aep_projections::spans::VendorSpans;
use aep_projections::spans::{JoinConfig, SpanJoin};

/// What the peer rejected of a delivered request (OTLP `partial_success`): logged and
/// counted, never retried.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partial {
    /// Records or spans the peer rejected.
    pub rejected: i64,
    /// The peer's explanation.
    pub message: String,
}

/// Why an export request was not delivered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    /// The peer does not take this signal at all: gRPC `UNIMPLEMENTED` (no such service)
    /// or HTTP 404 / 405 (no such path, or not POST there), as a traces-only backend
    /// answers logs. Permanent for the exporter: retrying every batch cannot help.
    #[error("{0}")]
    Unsupported(String),
    /// Refused permanently (bad data, auth, a refused certificate): this request is lost,
    /// the next one is tried.
    #[error("{0}")]
    Failed(String),
    /// The peer stayed away or overloaded past the retry budget, or shutdown cut the
    /// retries short: lost for a sender from memory, kept and sent again by a durable one.
    #[error("{0}")]
    Unreachable(String),
}

/// What a peer answered to a request it received, for [`with_retry`] (neither is retried).
#[derive(Debug)]
enum Answer {
    /// Taken, perhaps partly (see [`Partial`]).
    Accepted(Partial),
    /// The signal is refused (see [`ExportError::Unsupported`]).
    Unsupported(String),
}

/// Whether an OTLP/HTTP status says the receiver does not serve the signal's path: 404
/// (no such path) or 405 (the path exists but takes no POST).
fn refuses_signal(status: u16) -> bool {
    matches!(status, 404 | 405)
}

/// Whether a gRPC `UNIMPLEMENTED` refuses the request's compression rather than the service
/// (gRPC's compression rule: the server names the encodings it takes in
/// `grpc-accept-encoding`; tonic says "Content is compressed with `gzip` which isn't supported").
fn refuses_gzip(s: &tonic::Status) -> bool {
    if s.code() != tonic::Code::Unimplemented {
        return false;
    }
    let accepts = s.metadata().get("grpc-accept-encoding").and_then(|v| v.to_str().ok());
    accepts.is_some_and(|a| !a.split(',').any(|e| e.trim() == "gzip"))
        || (s.message().contains("compressed") && s.message().contains("gzip"))
}

/// One request ready to send (converted and encoded once, resent as-is on retry).
#[derive(Debug, Clone)]
enum Prepared {
    Logs(ExportLogsServiceRequest),
    Traces(ExportTraceServiceRequest),
    Metrics(ExportMetricsServiceRequest),
    /// An HTTP body: content type, bytes (already compressed when `gzipped`).
    Body(&'static str, Bytes, bool),
}

/// A `google.rpc.Status` with a `RetryInfo` detail, as `grpc-status-details-bin` carries it
/// (tests and the docs' examples; encoded by tonic-types).
pub fn retry_info_details(code: i32, delay: Duration) -> Vec<u8> {
    crate::transport::retry::status_with_retry_info(tonic::Code::from(code), "", delay).details().to_vec()
}

/// A failed gRPC call: a refused server certificate is permanent (retrying cannot fix a
/// missing CA), `UNIMPLEMENTED` refuses the signal, anything else follows the OTLP/gRPC rules.
fn grpc_failure(s: &tonic::Status) -> Attempt<Answer> {
    match crate::transport::tls::certificate_error(s) {
        Some(reason) => {
            Attempt::Fail(format!("gRPC: TLS certificate refused: {reason} (is the server's CA in tls.ca_file?)"))
        }
        None if s.code() == tonic::Code::Unimplemented => {
            Attempt::Done(Answer::Unsupported(format!("gRPC Unimplemented: {}", s.message())))
        }
        None => classify_grpc(s),
    }
}

/// Reads `partial_success` from an OTLP/HTTP answer, leniently for JSON (the Go collector
/// writes int64 counts as strings, which opentelemetry-proto's serde rejects).
fn partial_from_reply(signal: Signal, r: &Reply) -> Partial {
    if r.body.is_empty() {
        return Partial::default();
    }
    if r.content_type.starts_with("application/json") {
        let Ok(v) = serde_json::from_slice::<Value>(&r.body) else { return Partial::default() };
        let ps = &v["partialSuccess"];
        let key = match signal {
            Signal::Logs => "rejectedLogRecords",
            Signal::Traces => "rejectedSpans",
            Signal::Metrics => "rejectedDataPoints",
        };
        let rejected = match &ps[key] {
            Value::Number(n) => n.as_i64().unwrap_or(0),
            Value::String(s) => s.parse().unwrap_or(0),
            _ => 0,
        };
        let message = ps["errorMessage"].as_str().unwrap_or_default().to_owned();
        return Partial { rejected, message };
    }
    match signal {
        Signal::Logs => ExportLogsServiceResponse::decode(&r.body[..])
            .ok()
            .and_then(|x| x.partial_success)
            .map(|p| Partial { rejected: p.rejected_log_records, message: p.error_message })
            .unwrap_or_default(),
        Signal::Traces => ExportTraceServiceResponse::decode(&r.body[..])
            .ok()
            .and_then(|x| x.partial_success)
            .map(|p| Partial { rejected: p.rejected_spans, message: p.error_message })
            .unwrap_or_default(),
        Signal::Metrics => ExportMetricsServiceResponse::decode(&r.body[..])
            .ok()
            .and_then(|x| x.partial_success)
            .map(|p| Partial { rejected: p.rejected_data_points, message: p.error_message })
            .unwrap_or_default(),
    }
}

/// Converts (and encodes, and compresses) one request for `protocol`.
/// One OTLP export request, as the projections build it.
#[derive(Debug, Clone, PartialEq)]
pub enum OtlpRequest {
    /// Log records.
    Logs(ExportLogsServiceRequest),
    /// Spans.
    Traces(ExportTraceServiceRequest),
    /// Metric points (the bridge's own instruments, collected by the SDK).
    Metrics(ExportMetricsServiceRequest),
}

impl OtlpRequest {
    /// Adds the deployment's resource attributes to every resource of the request, where
    /// absent ([`aep_projections::otlp::add_resource_attributes`]).
    pub fn add_resource_attributes(&mut self, extra: &[(String, String)]) {
        use aep_projections::otlp::add_resource_attributes as add;
        if extra.is_empty() {
            return;
        }
        match self {
            OtlpRequest::Logs(r) => r.resource_logs.iter_mut().for_each(|x| add(&mut x.resource, extra)),
            OtlpRequest::Traces(r) => r.resource_spans.iter_mut().for_each(|x| add(&mut x.resource, extra)),
            OtlpRequest::Metrics(r) => r.resource_metrics.iter_mut().for_each(|x| add(&mut x.resource, extra)),
        }
    }

    /// The signal it carries.
    pub fn signal(&self) -> Signal {
        match self {
            OtlpRequest::Logs(_) => Signal::Logs,
            OtlpRequest::Traces(_) => Signal::Traces,
            OtlpRequest::Metrics(_) => Signal::Metrics,
        }
    }
}

/// Encodes a request for the wire once (protobuf or OTLP/JSON, gzip when asked); gRPC
/// keeps the message for tonic.
fn prepare(protocol: Protocol, gzip: bool, req: OtlpRequest) -> Result<Prepared, ConvertError> {
    let encode =
        |bytes: Vec<u8>| if gzip { Bytes::from(crate::transport::http::gzip(&bytes)) } else { Bytes::from(bytes) };
    Ok(match (protocol, req) {
        // The proto crate's serde writes OTLP/JSON (camelCase, hex ids, int64 as strings).
        (Protocol::HttpJson, OtlpRequest::Logs(r)) => {
            Prepared::Body("application/json", encode(serde_json::to_vec(&r)?), gzip)
        }
        (Protocol::HttpJson, OtlpRequest::Traces(r)) => {
            Prepared::Body("application/json", encode(serde_json::to_vec(&r)?), gzip)
        }
        (Protocol::HttpProtobuf, OtlpRequest::Logs(r)) => {
            Prepared::Body("application/x-protobuf", encode(r.encode_to_vec()), gzip)
        }
        (Protocol::HttpProtobuf, OtlpRequest::Traces(r)) => {
            Prepared::Body("application/x-protobuf", encode(r.encode_to_vec()), gzip)
        }
        (Protocol::HttpJson, OtlpRequest::Metrics(r)) => {
            Prepared::Body("application/json", encode(serde_json::to_vec(&r)?), gzip)
        }
        (Protocol::HttpProtobuf, OtlpRequest::Metrics(r)) => {
            Prepared::Body("application/x-protobuf", encode(r.encode_to_vec()), gzip)
        }
        (Protocol::Grpc, OtlpRequest::Logs(r)) => Prepared::Logs(r),
        (Protocol::Grpc, OtlpRequest::Traces(r)) => Prepared::Traces(r),
        (Protocol::Grpc, OtlpRequest::Metrics(r)) => Prepared::Metrics(r),
    })
}

/// One gRPC export over `$self`'s channel: the same client set-up (message limit, gzip,
/// metadata) and partial-success reading for each of the three OTLP services. A peer that
/// refuses gzip is asked again uncompressed, and this client sends uncompressed from then on.
macro_rules! grpc_export {
    ($self:ident, $client:ident, $req:expr, $rejected:ident) => {{
        let Some(ch) = $self.channel.clone() else { return Attempt::Fail("no gRPC channel".into()) };
        loop {
            let gzip = $self.grpc_gzip.load(Ordering::Relaxed);
            let mut c = $client::new(ch.clone()).max_decoding_message_size(16 << 20);
            if gzip {
                c = c.send_compressed(CompressionEncoding::Gzip).accept_compressed(CompressionEncoding::Gzip);
            }
            match c.export($self.request($req.clone())).await {
                Ok(r) => {
                    break Attempt::Done(Answer::Accepted(
                        r.into_inner()
                            .partial_success
                            .map(|p| Partial { rejected: p.$rejected, message: p.error_message })
                            .unwrap_or_default(),
                    ));
                }
                Err(s) if gzip && refuses_gzip(&s) => {
                    if $self.grpc_gzip.swap(false, Ordering::Relaxed) {
                        tracing::warn!(endpoint = %$self.url, message = s.message(),
                            "The OTLP/gRPC peer takes no gzip: sending uncompressed (set compression = \"none\" to say so).");
                    }
                }
                Err(s) => break grpc_failure(&s),
            }
        }
    }};
}

/// An OTLP client for one signal's endpoint and protocol.
#[derive(Debug, Clone)]
pub struct OtlpClient {
    protocol: Protocol,
    url: String,
    gzip: bool,
    /// gRPC compression, turned off for good once the peer refuses gzip.
    grpc_gzip: Arc<AtomicBool>,
    http: Option<HttpClient>,
    channel: Option<Channel>,
    metadata: MetadataMap,
    /// Resource attributes added to every request.
    resource: Arc<[(String, String)]>,
}

/// Why an OTLP client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum OtlpClientError {
    /// The gRPC endpoint is not a URI.
    #[error("endpoint {0:?}: {1}")]
    Endpoint(String, String),
    /// A header is not valid gRPC metadata.
    #[error("headers: {0:?}: {1}")]
    Metadata(String, String),
    /// The TLS options are unusable.
    #[error("tls.{0}")]
    Tls(#[from] crate::transport::tls::TlsError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Http(#[from] crate::transport::http::ClientError),
}

impl OtlpClient {
    /// A client for one signal's settings (the gRPC channel connects lazily; `https://`
    /// gRPC endpoints use TLS with the configured CA and client certificate).
    pub fn new(s: &SignalSettings) -> Result<Self, OtlpClientError> {
        let timeout = Duration::from_millis(s.timeout_ms.max(1));
        let url = s.url.trim_end_matches('/').to_owned();
        let (channel, http) = match s.protocol {
            Protocol::Grpc => {
                let mut ep = Endpoint::from_str(&url)
                    .map_err(|e| OtlpClientError::Endpoint(url.clone(), e.to_string()))?
                    .timeout(timeout)
                    .connect_timeout(timeout);
                if url.starts_with("https://") {
                    ep = ep
                        .tls_config(crate::transport::tls::grpc_tls(&s.tls)?)
                        .map_err(|e| OtlpClientError::Endpoint(url.clone(), e.to_string()))?;
                }
                (Some(ep.connect_lazy()), None)
            }
            _ => {
                let opts = HttpOptions { timeout, headers: s.headers.clone(), tls: s.tls.clone() };
                (None, Some(HttpClient::new(&opts)?))
            }
        };
        let mut metadata = MetadataMap::new();
        if s.protocol == Protocol::Grpc {
            for (k, v) in &s.headers {
                let key = MetadataKey::from_bytes(k.to_ascii_lowercase().as_bytes())
                    .map_err(|e| OtlpClientError::Metadata(k.clone(), e.to_string()))?;
                let val = MetadataValue::try_from(v.as_str())
                    .map_err(|e| OtlpClientError::Metadata(k.clone(), e.to_string()))?;
                metadata.insert(key, val);
            }
        }
        let gzip = s.compression == Compression::Gzip;
        Ok(Self {
            protocol: s.protocol,
            url,
            gzip,
            grpc_gzip: Arc::new(AtomicBool::new(gzip)),
            http,
            channel,
            metadata,
            resource: s.resource.clone(),
        })
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut req = tonic::Request::new(msg);
        for kv in self.metadata.iter() {
            if let tonic::metadata::KeyAndValueRef::Ascii(k, v) = kv {
                req.metadata_mut().insert(k.clone(), v.clone());
            }
        }
        req
    }

    /// The URL (HTTP) or endpoint (gRPC) requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }

    async fn attempt(&self, signal: Signal, p: &Prepared) -> Attempt<Answer> {
        match p {
            Prepared::Body(ct, body, gz) => {
                let Some(http) = &self.http else { return Attempt::Fail("no HTTP client".into()) };
                let outcome = http.post(&self.url, ct, body.clone(), *gz).await;
                if let Ok(r) = &outcome
                    && refuses_signal(r.status)
                {
                    return Attempt::Done(Answer::Unsupported(format!(
                        "POST {}: HTTP {} {}",
                        self.url,
                        r.status,
                        r.snippet()
                    )));
                }
                match crate::transport::http::classify(&self.url, outcome) {
                    Attempt::Done(r) => Attempt::Done(Answer::Accepted(partial_from_reply(signal, &r))),
                    Attempt::Retry(h, e) => Attempt::Retry(h, e),
                    Attempt::Fail(e) => Attempt::Fail(e),
                }
            }
            Prepared::Logs(req) => grpc_export!(self, LogsServiceClient, req, rejected_log_records),
            Prepared::Traces(req) => grpc_export!(self, TraceServiceClient, req, rejected_spans),
            Prepared::Metrics(req) => grpc_export!(self, MetricsServiceClient, req, rejected_data_points),
        }
    }

    /// Sends one request with retries; `Ok` carries the peer's partial success.
    pub async fn send(
        &self,
        req: OtlpRequest,
        policy: &RetryConfig,
        shutdown: &CancellationToken,
    ) -> (Result<Partial, ExportError>, u32) {
        self.send_held(req, policy, shutdown, None).await
    }

    /// [`Self::send`], and when `stalled` is given (a durable sender, whose events wait in
    /// the log) a request whose peer stays away past the retry budget is not given up:
    /// `stalled` is told, and the request is tried again after `max_ms`, until it is taken,
    /// refused, or shutdown comes.
    pub(crate) async fn send_held(
        &self,
        req: OtlpRequest,
        policy: &RetryConfig,
        shutdown: &CancellationToken,
        mut stalled: Option<&mut (dyn FnMut(&str) + Send)>,
    ) -> (Result<Partial, ExportError>, u32) {
        // Encoding is CPU work: keep it off the async workers.
        let (protocol, gzip, signal) = (self.protocol, self.gzip, req.signal());
        let resource = self.resource.clone();
        let p = match tokio::task::spawn_blocking(move || {
            let mut req = req;
            req.add_resource_attributes(&resource);
            prepare(protocol, gzip, req)
        })
        .await
        {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return (Err(ExportError::Failed(e.to_string())), 0),
            Err(e) => return (Err(ExportError::Failed(format!("encoder task: {e}"))), 0),
        };
        let mut retries = 0;
        loop {
            let d = with_retry(policy, shutdown, || self.attempt(signal, &p)).await;
            retries += d.retries;
            let result = match d.result {
                Ok(Answer::Accepted(p)) => Ok(p),
                Ok(Answer::Unsupported(e)) => Err(ExportError::Unsupported(e)),
                Err(e) if d.transient => Err(ExportError::Unreachable(e)),
                Err(e) => Err(ExportError::Failed(e)),
            };
            match (&result, stalled.as_deref_mut()) {
                (Err(ExportError::Unreachable(e)), Some(tell)) if !shutdown.is_cancelled() => {
                    tell(e);
                    if !super::pause(policy, shutdown).await {
                        return (result, retries);
                    }
                }
                _ => return (result, retries),
            }
        }
    }
}

/// One OTLP sink's delivery book-keeping: counters, `/healthz`, and whether its peer
/// refused the signal. A refused signal (see [`ExportError::Unsupported`]) is logged once
/// with the key that turns it off, counted in `aep_bridge_export_disabled_total`, named on
/// `/healthz` for the rest of the process, and never sent again: what the sink is handed
/// from then on is counted dropped, not sent.
pub(crate) struct Outlet {
    sink: &'static str,
    signal: Signal,
    url: String,
    metrics: Arc<Metrics>,
    stats: Arc<Stats>,
    health: Arc<Health>,
    off: bool,
    /// Its events wait in the log: a batch not taken is not lost (see [`Outlet::account`]).
    durable: bool,
}

impl Outlet {
    /// The book of sink `sink`, sending `signal` to `url`.
    pub(crate) fn new(
        sink: &'static str,
        signal: Signal,
        url: &str,
        metrics: Arc<Metrics>,
        stats: Arc<Stats>,
        health: Arc<Health>,
    ) -> Self {
        Self { sink, signal, url: url.to_owned(), metrics, stats, health, off: false, durable: false }
    }

    /// Marks the sink durable: a batch its peer did not take stays in the log.
    pub(crate) fn durable(mut self, durable: bool) -> Self {
        self.durable = durable;
        self
    }

    /// What a durable sink does while its peer stays away past the retry budget: say so on
    /// `/healthz` and count it (the batch is held and retried, nothing dropped).
    pub(crate) fn stalled(&self, error: &str) {
        super::note_stall(self.sink, &self.url, error, &self.metrics, &self.health);
    }

    /// Whether the peer refused the signal: nothing is sent any more.
    pub(crate) fn is_off(&self) -> bool {
        self.off
    }

    /// Records one request's outcome: on success `out` more in `events_out` and `items`
    /// delivered; on failure `events` dropped and `items` failed. Returns whether it was
    /// delivered.
    pub(crate) fn account(
        &mut self,
        outcome: (Result<Partial, ExportError>, u32),
        events: &[Arc<Stamped>],
        out: u64,
        items: usize,
    ) -> bool {
        let sink = self.sink;
        let (result, retries) = outcome;
        self.stats.add_retries(retries);
        match result {
            Ok(p) => {
                self.metrics.events_out.add(&[("sink", sink)], out);
                self.stats.add_delivered(items);
                self.health.recovered(sink);
                if p.rejected > 0 || !p.message.is_empty() {
                    // Partial success: the rest was accepted; retrying would duplicate it.
                    self.metrics.sink_errors.inc(&[("sink", sink)]);
                    self.stats.add_rejected(usize::try_from(p.rejected).unwrap_or(0));
                    tracing::warn!(sink, rejected = p.rejected, message = %p.message, "OTLP peer rejected part of a request.");
                }
                true
            }
            Err(ExportError::Unreachable(e)) if self.durable => {
                // Shutdown cut the retries: the batch stays in the log for the next start.
                tracing::info!(sink, error = %e, items, "OTLP export not finished; it is sent again after a restart.");
                false
            }
            Err(e) => {
                self.metrics.sink_errors.inc(&[("sink", sink)]);
                super::count_dropped(sink, &self.metrics, events);
                self.stats.add_failed(items);
                match e {
                    ExportError::Unsupported(reason) => self.refused(&reason),
                    ExportError::Failed(e) | ExportError::Unreachable(e) => {
                        tracing::error!(sink, error = %e, items, "OTLP export failed; batch dropped.");
                        self.health.failing(sink, format!("{}: {e}", self.url));
                    }
                }
                false
            }
        }
    }

    /// What the sink is handed once the signal is off: counted dropped, never sent.
    pub(crate) fn discard(&self, events: &[Arc<Stamped>], items: usize) {
        super::count_dropped(self.sink, &self.metrics, events);
        self.stats.add_failed(items);
    }

    fn refused(&mut self, reason: &str) {
        if std::mem::replace(&mut self.off, true) {
            return;
        }
        let (sink, signal, key) = (self.sink, self.signal.name(), self.signal.switch_key());
        self.metrics.export_disabled.inc(&[("sink", sink), ("signal", signal)]);
        tracing::warn!(
            sink,
            signal,
            endpoint = %self.url,
            reason,
            "The OTLP peer does not take {signal}: the {signal} exporter is off until restart. \
             Set {key} = false to stop exporting them, or point export.otlp.signals.{signal}.endpoint \
             at a receiver that takes them."
        );
        // Off, not failing: everything else flows, and a restart would not change the peer's mind.
        self.health.disabled(
            sink,
            format!("{} does not take {signal} ({reason}); not sent again until restart; set {key} = false", self.url),
        );
    }
}

/// The OTLP logs sink: batches Events into `ExportLogsServiceRequest`s. From a durable
/// feed, a batch is acknowledged in the log once its peer took it (or refused it for good),
/// and a peer that stays away holds the batch (retried) instead of dropping it.
pub(crate) async fn run_logs(
    mut feed: Feed,
    cfg: OtlpConfig,
    client: OtlpClient,
    policy: RetryConfig,
    mut outlet: Outlet,
    shutdown: CancellationToken,
) {
    const SINK: &str = "otlp_logs";
    let metrics = outlet.metrics.clone();
    let durable = feed.durable();
    let opts = OtlpOptions {
        max_capture: cfg.max_capture,
        service_name: (!cfg.service_name.is_empty()).then(|| cfg.service_name.clone()),
        ..OtlpOptions::default()
    };
    let linger = Duration::from_millis(cfg.batch_timeout_ms);
    // With spans exported too, every record carries the trace and span id of the span the
    // span sink builds for its Event, so a backend links the log line to its trace.
    let mut placed = cfg.spans.then(|| LogSpans::new(cfg.trace_per_run));
    loop {
        let t = feed.next(cfg.batch_size, linger, Duration::from_secs(3600)).await;
        metrics.queue_depth.set(SINK, feed.depth());
        if let Some(spans) = placed.as_mut() {
            // A session's Events before the cursor, read again after a restart: the records
            // sent from here on land on the same spans as before.
            for s in &t.warm {
                spans.context(&s.event);
            }
        }
        let batch = &t.events;
        if outlet.is_off() {
            outlet.discard(batch, batch.len());
        } else if !batch.is_empty() {
            // Projected from the shared events where they are: no copy of the batch.
            let events = batch.iter().map(|s| &s.event);
            let req = OtlpRequest::Logs(match placed.as_mut() {
                Some(spans) => logs_request_on_spans(events, &opts, spans),
                None => logs_request(events, &opts),
            });
            let outcome = {
                let mut stall = |e: &str| outlet.stalled(e);
                let hold: Option<&mut (dyn FnMut(&str) + Send)> = if durable { Some(&mut stall) } else { None };
                client.send_held(req, &policy, &shutdown, hold).await
            };
            let kept = durable && matches!(outcome.0, Err(ExportError::Unreachable(_)));
            outlet.account(outcome, batch, batch.len() as u64, batch.len());
            if kept {
                // Shutdown while the peer is away: the batch stays in the log.
                feed.finish().await;
                return;
            }
        }
        feed.ack(&t.marks).await;
        if t.closed {
            feed.finish().await;
            return;
        }
    }
}

/// The caller clock of the span assembler: wall time at start plus monotonic time since,
/// so an NTP step does not make every session look idle. Each session measures idleness
/// and reordering on its own timeline against it (`SpanAssembler::push_at`): a session
/// whose vendor timestamps lag another's, or a replay of old Events, is not cut up.
#[derive(Debug)]
struct SinkClock {
    base: u64,
    start: Instant,
}

impl SinkClock {
    fn new() -> Self {
        Self { base: crate::time::now_nanos(), start: Instant::now() }
    }

    fn now(&self) -> u64 {
        self.base.saturating_add(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// What a durable spans sink has read of one log and not acknowledged: the position read
/// to, and the sessions read from it since. The position is acknowledged once none of them
/// is held anywhere (no open span in the assembler, none waiting for vendor records or for
/// its batch): the spans a session holds live only in memory, so a restart reads its log
/// again from where the session was last quiet (see [`crate::export::wal`]).
#[derive(Debug, Default)]
struct Unsettled {
    at: super::wal::Cursor,
    sessions: std::collections::HashSet<(String, String)>,
}

/// The OTLP spans sink: a [`SpanAssembler`] fed by the stream, idle spans closed on a
/// tick, everything open flushed (as incomplete) at shutdown. From a durable feed a log is
/// acknowledged once no session read from it is held; spans not taken by the peer at
/// shutdown leave their logs unacknowledged, read again at the next start.
pub(crate) async fn run_spans(
    mut feed: Feed,
    mut vendor_rx: Option<mpsc::Receiver<super::vendor_spans::Queued>>,
    cfg: OtlpConfig,
    client: OtlpClient,
    policy: RetryConfig,
    mut outlet: Outlet,
    shutdown: CancellationToken,
) {
    const SINK: &str = "otlp_spans";
    let metrics = outlet.metrics.clone();
    let durable = feed.durable();
    let mut asm = SpanAssembler::new(SpanConfig {
        idle_timeout_nanos: cfg.span_idle_timeout_secs.saturating_mul(1_000_000_000),
        root_idle_nanos: cfg.span_root_idle_secs.saturating_mul(1_000_000_000),
        trace_per_run: cfg.trace_per_run,
        max_capture: cfg.max_capture,
        ..SpanConfig::default()
    });
    // Finished run and tool spans wait here for the vendors' own records (usage, tool duration).
    let grace_nanos = cfg.span_grace_ms.saturating_mul(1_000_000);
    let mut join = SpanJoin::new(JoinConfig {
        grace_nanos,
        max_held: cfg.span_grace_max_spans,
        max_held_bytes: cfg.span_grace_max_bytes,
        trace_per_run: cfg.trace_per_run,
        ..JoinConfig::default()
    });
    // The agents' own spans, placed in their session traces (or forwarded as sent).
    let mut vendor = VendorSpans::new(grace_nanos, cfg.span_grace_max_spans, cfg.span_grace_max_bytes);
    let batch_timeout = Duration::from_millis(cfg.batch_timeout_ms);
    let grace_tick = Duration::from_millis(cfg.span_grace_ms.max(10));
    let tick = Duration::from_secs(1).min(batch_timeout.max(Duration::from_millis(10))).min(grace_tick);
    let mut pending: Vec<Span> = Vec::new();
    let mut pending_since: Option<Instant> = None;
    let mut last_idle = Instant::now();
    let clock = SinkClock::new();
    let mut unsettled: std::collections::HashMap<std::path::PathBuf, Unsettled> = Default::default();
    loop {
        let t = feed.next(cfg.batch_size, Duration::ZERO, tick).await;
        let (batch, closed) = (&t.events, t.closed);
        metrics.queue_depth.set(SINK, feed.depth());
        if outlet.is_off() {
            // The peer takes no traces: nothing is assembled or held any more.
            outlet.discard(batch, 0);
            feed.ack(&t.marks).await;
            if let Some(vrx) = vendor_rx.as_mut() {
                while vrx.try_recv().is_ok() {
                    metrics.dropped.inc(&[("sink", "otlp_vendor_spans"), ("severity", "info")]);
                }
            }
            if closed {
                feed.finish().await;
                return;
            }
            continue;
        }
        if durable {
            for (i, s) in batch.iter().enumerate() {
                let (Some(session), Some(k)) = (s.event.session.as_ref(), t.from.get(i)) else { continue };
                let Some((log, _)) = t.marks.get(*k as usize) else { continue };
                let u = unsettled.entry(log.clone()).or_default();
                if !u.sessions.iter().any(|(src, n)| n == session && **src == *s.event.source) {
                    u.sessions.insert((s.event.source.to_string(), session.clone()));
                }
            }
            for (log, at) in &t.marks {
                unsettled.entry(log.clone()).or_default().at = *at;
            }
        }
        metrics.events_out.add(&[("sink", SINK)], batch.len() as u64);
        let arrived = clock.now();
        let mut finished = Vec::new();
        for s in batch {
            join.observe(&s.event);
            finished.extend(asm.push_at(&s.event, arrived));
        }
        if last_idle.elapsed() >= Duration::from_secs(1) {
            last_idle = Instant::now();
            finished.extend(asm.flush_idle(clock.now()));
        }
        if closed {
            // A session still open (one that never ends, as Qwen Code's headless runs) is
            // exported as incomplete, as without durability; its log is acknowledged once
            // the peer took it, and read again at the next start if it did not.
            finished.extend(asm.flush_all());
        }
        let now = clock.now();
        // The agents' own spans first: a model-call span among them tells the join, before
        // any run span is released, that the session's calls need no synthesized span.
        let mut vendor_out = Vec::new();
        if let Some(vrx) = vendor_rx.as_mut() {
            while let Ok(mut q) = vrx.try_recv() {
                vendor_out.extend(vendor.take(std::mem::take(&mut q.req), &mut join, now));
            }
        }
        for span in finished {
            pending.extend(join.hold(span, now));
        }
        pending.extend(if closed { join.release_all() } else { join.release(now) });
        vendor_out.extend(vendor.tick(&mut join, now, closed));
        if !vendor_out.is_empty() {
            // The agents' own spans are not in the log: sent once, best effort.
            let n = vendor_out.iter().flat_map(|r| &r.scope_spans).map(|s| s.spans.len()).sum();
            let req = ExportTraceServiceRequest { resource_spans: vendor_out };
            let outcome = client.send(OtlpRequest::Traces(req), &policy, &shutdown).await;
            let outcome = match outcome {
                (Err(ExportError::Unreachable(e)), r) => (Err(ExportError::Failed(e)), r),
                o => o,
            };
            outlet.account(outcome, &[], 0, n);
        }
        if !pending.is_empty() && pending_since.is_none() {
            pending_since = Some(Instant::now());
        }
        while !pending.is_empty()
            && !outlet.is_off()
            && (pending.len() >= cfg.batch_size
                || closed
                || pending_since.is_some_and(|t| t.elapsed() >= batch_timeout))
        {
            let n = pending.len().min(cfg.batch_size);
            let chunk: Vec<Span> = pending.drain(..n).collect();
            let outcome = {
                let mut stall = |e: &str| outlet.stalled(e);
                let hold: Option<&mut (dyn FnMut(&str) + Send)> = if durable { Some(&mut stall) } else { None };
                client.send_held(OtlpRequest::Traces(traces_request(&chunk)), &policy, &shutdown, hold).await
            };
            let kept = durable && matches!(outcome.0, Err(ExportError::Unreachable(_)));
            // Events were counted when consumed; a failed span batch counts one sink error.
            outlet.account(outcome, &[], 0, chunk.len());
            if kept {
                // Shutdown while the peer is away: the sessions of these spans are read
                // again at the next start (their logs are not acknowledged past them).
                feed.finish().await;
                return;
            }
            pending_since = if pending.is_empty() { None } else { Some(Instant::now()) };
        }
        if outlet.is_off() {
            // Refused: what was assembled or held is lost with the signal (counted failed).
            outlet.discard(&[], pending.len() + join.release_all().len());
            pending.clear();
            asm = SpanAssembler::new(SpanConfig::default());
            vendor = VendorSpans::new(0, 1, 1);
        }
        if durable && !unsettled.is_empty() {
            let quiet = |(src, n): &(String, String)| {
                !asm.holds(src, n) && !join.holds(n) && !pending.iter().any(|s| span_session(s) == Some(n.as_str()))
            };
            let settled: Vec<(std::path::PathBuf, super::wal::Cursor)> = unsettled
                .iter()
                .filter(|(_, u)| u.sessions.iter().all(quiet))
                .map(|(log, u)| (log.clone(), u.at))
                .collect();
            for (log, _) in &settled {
                unsettled.remove(log);
            }
            feed.ack(&settled).await;
        }
        if closed {
            feed.finish().await;
            return;
        }
    }
}

/// The session a synthesized span belongs to (`aep.session_id`).
fn span_session(s: &Span) -> Option<&str> {
    s.attributes.get("aep.session_id").and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Event;
    use serde_json::json;

    fn events() -> Vec<Event> {
        let base = json!({"aep":"0.1","source":"aep://h/agent/codex/session/s1","agent":"codex","session":"s1","epoch":1,"capture":"metadata"});
        let mk = |id: &str, ty: &str, seq: u64, time: &str, extra: Value| {
            let mut v = base.clone();
            v["id"] = id.into();
            v["type"] = ty.into();
            v["seq"] = seq.into();
            v["time"] = time.into();
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            Event::from_value(v).unwrap()
        };
        vec![
            mk("e0", "session.started", 0, "2026-01-02T03:04:05Z", json!({"data": {"model": "gpt-5"}})),
            mk("e1", "run.started", 1, "2026-01-02T03:04:06Z", json!({"run": "r1"})),
            mk(
                "e2",
                "tool.requested",
                2,
                "2026-01-02T03:04:07Z",
                json!({"run": "r1", "subject": "Bash", "data": {"tool": {"name": "Bash", "call_id": "c1"}}}),
            ),
            mk(
                "e3",
                "tool.completed",
                3,
                "2026-01-02T03:04:08.250Z",
                json!({"run": "r1", "subject": "Bash", "severity": "notice", "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "data": {"tool": {"name": "Bash", "call_id": "c1"}}}),
            ),
            mk("e4", "run.completed", 4, "2026-01-02T03:04:09Z", json!({"run": "r1"})),
            mk("e5", "session.ended", 5, "2026-01-02T03:04:10Z", json!({})),
        ]
    }

    /// The body `prepare` writes for `protocol`, uncompressed.
    fn body(protocol: Protocol, req: OtlpRequest) -> Bytes {
        match prepare(protocol, false, req).unwrap() {
            Prepared::Body(_, b, _) => b,
            p => panic!("not an HTTP body: {p:?}"),
        }
    }

    #[test]
    fn logs_go_out_as_otlp_json_and_protobuf_that_read_back_identically() {
        let req = logs_request(&events(), &OtlpOptions::default());
        let recs = &req.resource_logs[0].scope_logs[0].log_records;
        assert_eq!(recs.len(), 6);
        assert_eq!(recs[3].severity_number, 10);
        assert_eq!(recs[3].trace_id.len(), 16);
        assert!(recs.iter().all(|r| r.time_unix_nano > 0 && !r.attributes.is_empty()));
        let json = body(Protocol::HttpJson, OtlpRequest::Logs(req.clone()));
        assert!(std::str::from_utf8(&json).unwrap().contains(r#""severityNumber":10"#), "camelCase OTLP/JSON");
        assert_eq!(logs_from_json(serde_json::from_slice(&json).unwrap()).unwrap(), req);
        let pb = body(Protocol::HttpProtobuf, OtlpRequest::Logs(req.clone()));
        assert_eq!(ExportLogsServiceRequest::decode(&pb[..]).unwrap(), req);
    }

    #[test]
    fn spans_go_out_as_otlp_json_and_protobuf_that_read_back_identically() {
        let spans = aep_projections::spans::assemble(&events(), SpanConfig::default());
        assert!(spans.len() >= 3, "{spans:?}");
        let req = traces_request(&spans);
        let got: Vec<&opentelemetry_proto::tonic::trace::v1::Span> =
            req.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans).collect();
        assert_eq!(got.len(), spans.len());
        assert!(got.iter().all(|s| s.trace_id.len() == 16 && s.span_id.len() == 8 && s.end_time_unix_nano > 0));
        assert!(got.iter().any(|s| s.name.starts_with("execute_tool")));
        let json = body(Protocol::HttpJson, OtlpRequest::Traces(req.clone()));
        assert_eq!(traces_from_json(serde_json::from_slice(&json).unwrap()).unwrap(), req);
        let pb = body(Protocol::HttpProtobuf, OtlpRequest::Traces(req.clone()));
        assert_eq!(ExportTraceServiceRequest::decode(&pb[..]).unwrap(), req);
    }

    #[test]
    fn the_sink_clock_is_wall_time_and_monotonic() {
        let c = SinkClock::new();
        let (a, wall) = (c.now(), crate::time::now_nanos());
        assert!(a <= wall + 1_000_000_000 && wall <= a + 1_000_000_000);
        assert!(c.now() >= a);
    }

    #[test]
    fn grpc_retry_rules() {
        let with = tonic::Status::with_details(
            tonic::Code::ResourceExhausted,
            "slow down",
            Bytes::from(retry_info_details(8, Duration::from_millis(1500))),
        );
        assert!(matches!(classify_grpc::<()>(&with), Attempt::Retry(Some(d), _) if d == Duration::from_millis(1500)));
        let without = tonic::Status::resource_exhausted("quota");
        assert!(matches!(classify_grpc::<()>(&without), Attempt::Fail(_)));
        assert!(matches!(classify_grpc::<()>(&tonic::Status::unavailable("x")), Attempt::Retry(None, _)));
        assert!(matches!(classify_grpc::<()>(&tonic::Status::invalid_argument("x")), Attempt::Fail(_)));
    }

    #[test]
    fn partial_success_is_read_leniently() {
        let r = Reply {
            status: 200,
            retry_after: None,
            content_type: "application/json".into(),
            body: br#"{"partialSuccess":{"rejectedLogRecords":"2","errorMessage":"bad"}}"#.to_vec(),
        };
        assert_eq!(partial_from_reply(Signal::Logs, &r), Partial { rejected: 2, message: "bad".into() });
        let pb = ExportTraceServiceResponse {
            partial_success: Some(opentelemetry_proto::tonic::collector::trace::v1::ExportTracePartialSuccess {
                rejected_spans: 3,
                error_message: "x".into(),
            }),
        };
        let r = Reply {
            status: 200,
            retry_after: None,
            content_type: "application/x-protobuf".into(),
            body: pb.encode_to_vec(),
        };
        assert_eq!(partial_from_reply(Signal::Traces, &r).rejected, 3);
    }
}
