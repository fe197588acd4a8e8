//! OTLP receivers: OTLP/HTTP (`/v1/logs`, `/v1/traces`, `/v1/metrics`; protobuf and JSON;
//! gzip, zstd and deflate) as an [`axum::Router`], and OTLP/gRPC (the tonic `LogsService`,
//! `TraceService` and `MetricsService`) as tonic [`Routes`](tonic::service::Routes).
//!
//! Both transports decode, validate (trace and span id lengths) and hand each export request
//! to an [`OtlpHandler`], the seam where the bridge plugs in its pipeline (and a tee). The
//! handler's answer decides the reply:
//!
//! | handler | OTLP/HTTP | OTLP/gRPC |
//! |---|---|---|
//! | `Ok(Accepted { rejected: 0, .. })` | 200, empty response message | OK |
//! | `Ok(Accepted { rejected: n, message })` | 200 with `partial_success` | OK with `partial_success` |
//! | `Err(Refused::Full { retry_after })` | 503 + `Retry-After` | `UNAVAILABLE` + `RetryInfo` |
//! | `Err(Refused::Invalid(msg))` | 400 | `INVALID_ARGUMENT` |
//!
//! Before anything is read, a handler that wants a bearer token ([`OtlpHandler::authorized`])
//! answers a missing or wrong one with 401 / `UNAUTHENTICATED`.
//!
//! Before the handler: undecodable bodies and bad ids are 400 / `INVALID_ARGUMENT`; bodies over
//! the limit (on the wire or once decompressed) are 413 over HTTP; over gRPC tonic answers
//! `OUT_OF_RANGE` for an oversized frame and `RESOURCE_EXHAUSTED` when decompression passes the
//! limit (its decompressor is capped too). An unknown `Content-Type` or `Content-Encoding` is 415.
//!
//! OTLP/JSON decisions (see [`decode`]): lowerCamelCase keys only, as the OTLP specification
//! requires; a body using the proto field names (`resource_logs`, ...) is rejected with 400
//! instead of being read as an empty request. Hex ids are checked for length (16/8 bytes or
//! empty), int64 accepted as string or number, unknown fields ignored.
//!
//! [`to_otel_records`] (or [`into_otel_records`], by move) turns a logs request into the adapters' neutral
//! [`OtelRecord`](aep_adapters::otel::OtelRecord)s for the vendor profiles.

use std::time::Duration;

pub use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
pub use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
pub use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;

mod body;
pub mod convert;
pub mod decode;
pub mod fast;
pub mod grpc;
pub mod http;
mod signal;
mod status;

pub use convert::{into_otel_records, to_otel_records};
pub use grpc::{GrpcConfig, grpc_router, grpc_routes, serve_grpc};
pub use http::{HttpConfig, router, router_with};

/// What a handler did with an export request it took.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Records (log records, spans or data points) the handler rejected; 0 on full success.
    pub rejected: i64,
    /// Why they were rejected (the `partial_success.error_message`); may also carry a warning
    /// when `rejected` is 0.
    pub message: String,
}

impl Accepted {
    /// Everything accepted.
    pub fn all() -> Self {
        Self::default()
    }

    /// `n` records rejected, with a reason.
    pub fn partial(n: i64, message: impl Into<String>) -> Self {
        Self { rejected: n, message: message.into() }
    }
}

/// Why a handler refused a whole request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The pipeline is full: the client should retry after the delay (HTTP 503 + `Retry-After`,
    /// gRPC `UNAVAILABLE` + `RetryInfo`).
    #[error("pipeline full, retry after {retry_after:?}")]
    Full {
        /// The suggested delay before retrying.
        retry_after: Duration,
    },
    /// The data is unusable and must not be retried (HTTP 400, gRPC `INVALID_ARGUMENT`).
    #[error("invalid data: {0}")]
    Invalid(String),
}

/// The answer of [`OtlpHandler::log_records_async`]: a boxed future, so the trait stays
/// object-safe (receivers hold an `Arc<dyn OtlpHandler>`).
pub type RecordsAnswer<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Accepted, Refused>> + Send + 'a>>;

/// The seam between the receivers and the bridge pipeline.
///
/// Called on the receiving task: implementations must not block (hand work to a bounded
/// channel with `try_send` and answer [`Refused::Full`] when it is full; only
/// [`OtlpHandler::log_records_async`] may await, and only bounded work). Traces and metrics
/// are accepted and dropped by default, so exporters that send every signal do not fail.
pub trait OtlpHandler: Send + Sync + 'static {
    /// `true` when `token` (the request's bearer credential, if any) may export. Checked
    /// before the body is read: HTTP 401, gRPC `UNAUTHENTICATED` otherwise (neither is
    /// retried by OTLP exporters). Open by default.
    fn authorized(&self, token: Option<&str>) -> bool {
        let _ = token;
        true
    }

    /// A logs export (`/v1/logs`, `LogsService/Export`).
    fn logs(&self, req: ExportLogsServiceRequest) -> Result<Accepted, Refused>;

    /// A request the receiver refused before the handler saw it (`unauthorized`,
    /// `content_type`, `too_large`, `invalid`), for the caller's refusal counters: bad input
    /// gets a clear error and is counted, never silently lost. Refusals the handler itself
    /// answers ([`Refused`]) are the handler's to count. Does nothing by default.
    fn refused(&self, reason: &'static str) {
        let _ = reason;
    }

    /// Whether this handler takes logs as neutral records ([`OtlpHandler::log_records_async`],
    /// [`OtlpHandler::log_records_blocking`]) instead of [`OtlpHandler::logs`] with the
    /// decoded request. When it does, the OTLP/HTTP receiver reads protobuf bodies straight
    /// into records ([`fast::log_records`]), and JSON bodies and gRPC messages are converted.
    fn wants_log_records(&self) -> bool {
        false
    }

    /// A logs export as neutral records, in request order, answered without waiting (the
    /// default of the two entry points the receivers call, [`OtlpHandler::log_records_async`]
    /// and [`OtlpHandler::log_records_blocking`], only when [`OtlpHandler::wants_log_records`]
    /// is true). Same contract as [`OtlpHandler::logs`].
    fn log_records(&self, records: Vec<aep_adapters::otel::OtelRecord>) -> Result<Accepted, Refused> {
        let _ = records;
        Err(Refused::Invalid("this receiver does not take log records".into()))
    }

    /// [`OtlpHandler::log_records`] called on a blocking-pool thread (the OTLP/HTTP receiver
    /// decodes large bodies there): the handler may block it until the records are through
    /// (so they are built, used and freed on one thread). Defaults to `log_records`.
    fn log_records_blocking(&self, records: Vec<aep_adapters::otel::OtelRecord>) -> Result<Accepted, Refused> {
        self.log_records(records)
    }

    /// [`OtlpHandler::log_records`] awaited on the receiving task (the OTLP/HTTP receiver
    /// decodes bodies under [`BLOCKING_DECODE_BYTES`](http::BLOCKING_DECODE_BYTES) there): the
    /// handler may await its own bounded queues before it answers, so the records are built,
    /// used and freed on one task with no handoff to another thread. Defaults to `log_records`.
    fn log_records_async(&self, records: Vec<aep_adapters::otel::OtelRecord>) -> RecordsAnswer<'_> {
        Box::pin(std::future::ready(self.log_records(records)))
    }

    /// Whether a logs export would be taken now. The OTLP/HTTP receiver asks before it decodes
    /// a logs body, so a full pipeline costs a refused request its read and nothing more
    /// (the answer is the same 503 + `Retry-After` as a refusal by [`OtlpHandler::logs`]).
    fn ready_for_logs(&self) -> Result<(), Refused> {
        Ok(())
    }

    /// The byte budget OTLP/HTTP bodies are decoded within, if any ([`DecodeBudget`]).
    fn decode_budget(&self) -> Option<&DecodeBudget> {
        None
    }

    /// A traces export (`/v1/traces`, `TraceService/Export`).
    fn traces(&self, _req: ExportTraceServiceRequest) -> Result<Accepted, Refused> {
        Ok(Accepted::all())
    }

    /// A metrics export (`/v1/metrics`, `MetricsService/Export`).
    fn metrics(&self, _req: ExportMetricsServiceRequest) -> Result<Accepted, Refused> {
        Ok(Accepted::all())
    }
}

/// Bytes of export bodies decoded and handed on at once, shared by every receiver of one
/// handler. A decoded export takes many times its wire size, so concurrent large exports
/// must not all pass a check made before any of them is decoded: each body takes its
/// decompressed size from the budget before it is decoded and gives it back once the
/// handler has taken the records. Over the budget an export is refused with 503 +
/// `Retry-After` (retried by exporters); one export of any size (up to the body limit) is
/// taken when nothing else is in flight.
#[derive(Debug, Clone)]
pub struct DecodeBudget {
    sem: std::sync::Arc<tokio::sync::Semaphore>,
    total: usize,
}

/// A share of a [`DecodeBudget`], given back on drop.
#[derive(Debug)]
pub struct Admitted(tokio::sync::OwnedSemaphorePermit);

impl Admitted {
    /// Gives back all but `bytes` of this share (a body read in full turned out smaller
    /// than what was set aside for it).
    pub fn shrink_to(&mut self, bytes: usize) {
        let keep = bytes.max(1);
        if let Some(extra) = self.0.num_permits().checked_sub(keep).filter(|n| *n > 0) {
            drop(self.0.split(extra));
        }
    }
}

impl DecodeBudget {
    /// A budget of `bytes` (at least 1 KiB).
    pub fn new(bytes: usize) -> Self {
        let total = bytes.clamp(1024, u32::MAX as usize);
        Self { sem: std::sync::Arc::new(tokio::sync::Semaphore::new(total)), total }
    }

    /// Takes `bytes` from the budget now, or `None` (a body larger than the whole budget
    /// takes all of it, so it is admitted only when nothing else is in flight).
    pub fn try_admit(&self, bytes: usize) -> Option<Admitted> {
        let n = u32::try_from(bytes.clamp(1, self.total)).unwrap_or(u32::MAX);
        self.sem.clone().try_acquire_many_owned(n).ok().map(Admitted)
    }

    /// Bytes not taken right now.
    pub fn available(&self) -> usize {
        self.sem.available_permits()
    }
}

/// The OTLP signal an endpoint carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    /// Logs.
    Logs,
    /// Traces.
    Traces,
    /// Metrics.
    Metrics,
}

impl Signal {
    /// `logs`, `traces`, `metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Logs => "logs",
            Signal::Traces => "traces",
            Signal::Metrics => "metrics",
        }
    }
}

/// Default limit of a request body, on the wire and once decompressed (the collector's 20 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 20 * 1024 * 1024;
