//! The three OTLP signals as types. Each names its request and response messages, its gRPC
//! service, how its body is decoded and checked, and which handler method takes it; the
//! gRPC services ([`super::grpc`]) and the OTLP/HTTP endpoints ([`super::http`]) are then
//! each written once, generic over [`Export`], so a rule changes in one place for all three.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;

use super::decode::{self, DecodeError, Format};
use super::{Accepted, OtlpHandler, Refused};

/// A boxed future that may cross threads (tonic's services hold one per request).
pub(crate) type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// One OTLP signal's export.
pub(crate) trait Export: Sized + Send + Sync + 'static {
    /// The request message.
    type Req: Message + Default + Send + 'static;
    /// The response message.
    type Resp: Message + Send + 'static;
    /// The gRPC service name.
    const SERVICE: &'static str;
    /// The gRPC method's path.
    const GRPC_PATH: &'static str;
    /// The OTLP/HTTP path.
    const HTTP_PATH: &'static str;
    /// The `partialSuccess` count's key in OTLP/JSON.
    const REJECTED_KEY: &'static str;

    /// Decodes an OTLP/HTTP body (protobuf or OTLP/JSON) and checks its ids.
    fn decode(body: &[u8], format: Format) -> Result<Self::Req, DecodeError>;

    /// Checks the trace and span ids of a request decoded elsewhere (by tonic).
    fn check_ids(req: &Self::Req) -> Result<(), String>;

    /// Hands a decoded request to the handler, answered without waiting.
    fn take(handler: &dyn OtlpHandler, req: Self::Req) -> Result<Accepted, Refused>;

    /// Hands a request tonic decoded to the handler: [`Export::take`] unless the signal has
    /// a path the handler may await.
    fn take_async(handler: Arc<dyn OtlpHandler>, req: Self::Req) -> BoxFuture<Result<Accepted, Refused>> {
        Box::pin(async move { Self::take(&*handler, req) })
    }

    /// The response message: `partial_success` set only when something was rejected or the
    /// handler has a message (OTLP: leave it unset on full success).
    fn response(a: Accepted) -> Self::Resp;
}

/// Whether an answer is reported as a partial success.
pub(crate) fn partial(a: &Accepted) -> bool {
    a.rejected > 0 || !a.message.is_empty()
}

/// `opentelemetry.proto.collector.logs.v1.LogsService`, `/v1/logs`.
pub(crate) struct Logs;
/// `opentelemetry.proto.collector.trace.v1.TraceService`, `/v1/traces`.
pub(crate) struct Traces;
/// `opentelemetry.proto.collector.metrics.v1.MetricsService`, `/v1/metrics`.
pub(crate) struct Metrics;

impl Export for Logs {
    type Req = ExportLogsServiceRequest;
    type Resp = ExportLogsServiceResponse;
    const SERVICE: &'static str = "opentelemetry.proto.collector.logs.v1.LogsService";
    const GRPC_PATH: &'static str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";
    const HTTP_PATH: &'static str = "/v1/logs";
    const REJECTED_KEY: &'static str = "rejectedLogRecords";

    fn decode(body: &[u8], format: Format) -> Result<Self::Req, DecodeError> {
        decode::logs(body, format)
    }

    fn check_ids(req: &Self::Req) -> Result<(), String> {
        decode::check_ids_logs(req)
    }

    fn take(handler: &dyn OtlpHandler, req: Self::Req) -> Result<Accepted, Refused> {
        handler.logs(req)
    }

    /// As neutral records when the handler takes them ([`OtlpHandler::wants_log_records`]).
    fn take_async(handler: Arc<dyn OtlpHandler>, req: Self::Req) -> BoxFuture<Result<Accepted, Refused>> {
        Box::pin(async move {
            if handler.wants_log_records() {
                handler.log_records_async(super::into_otel_records(req)).await
            } else {
                handler.logs(req)
            }
        })
    }

    fn response(a: Accepted) -> Self::Resp {
        let partial_success = partial(&a)
            .then_some(ExportLogsPartialSuccess { rejected_log_records: a.rejected, error_message: a.message });
        ExportLogsServiceResponse { partial_success }
    }
}

impl Export for Traces {
    type Req = ExportTraceServiceRequest;
    type Resp = ExportTraceServiceResponse;
    const SERVICE: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
    const GRPC_PATH: &'static str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
    const HTTP_PATH: &'static str = "/v1/traces";
    const REJECTED_KEY: &'static str = "rejectedSpans";

    fn decode(body: &[u8], format: Format) -> Result<Self::Req, DecodeError> {
        decode::traces(body, format)
    }

    fn check_ids(req: &Self::Req) -> Result<(), String> {
        decode::check_ids_traces(req)
    }

    fn take(handler: &dyn OtlpHandler, req: Self::Req) -> Result<Accepted, Refused> {
        handler.traces(req)
    }

    fn response(a: Accepted) -> Self::Resp {
        let partial_success =
            partial(&a).then_some(ExportTracePartialSuccess { rejected_spans: a.rejected, error_message: a.message });
        ExportTraceServiceResponse { partial_success }
    }
}

impl Export for Metrics {
    type Req = ExportMetricsServiceRequest;
    type Resp = ExportMetricsServiceResponse;
    const SERVICE: &'static str = "opentelemetry.proto.collector.metrics.v1.MetricsService";
    const GRPC_PATH: &'static str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";
    const HTTP_PATH: &'static str = "/v1/metrics";
    const REJECTED_KEY: &'static str = "rejectedDataPoints";

    fn decode(body: &[u8], format: Format) -> Result<Self::Req, DecodeError> {
        decode::metrics(body, format)
    }

    fn check_ids(req: &Self::Req) -> Result<(), String> {
        decode::check_ids_metrics(req)
    }

    fn take(handler: &dyn OtlpHandler, req: Self::Req) -> Result<Accepted, Refused> {
        handler.metrics(req)
    }

    fn response(a: Accepted) -> Self::Resp {
        let partial_success = partial(&a)
            .then_some(ExportMetricsPartialSuccess { rejected_data_points: a.rejected, error_message: a.message });
        ExportMetricsServiceResponse { partial_success }
    }
}
