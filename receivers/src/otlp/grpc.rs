//! OTLP/gRPC: the tonic `LogsService`, `TraceService` and `MetricsService`, accepting gzip and
//! zstd request compression (collector exporters send gzip by default, and a tonic server
//! answers `UNIMPLEMENTED` to it unless told otherwise).

use std::future::Future;
use std::sync::Arc;

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{
    ExportLogsPartialSuccess, ExportLogsServiceRequest, ExportLogsServiceResponse,
};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use prost::Message;
use tonic::codec::CompressionEncoding;
use tonic::service::{Interceptor, Routes, interceptor::InterceptedService};
use tonic::{Code, Request, Response, Status};

use super::status::{self, CODE_UNAVAILABLE};
use super::{Accepted, DEFAULT_MAX_REQUEST_BYTES, OtlpHandler, Refused, decode};

/// OTLP/gRPC limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcConfig {
    /// Largest request message, as framed and once decompressed (default 20 MiB; tonic's own
    /// default is 4 MiB). tonic refuses a larger frame with `OUT_OF_RANGE` and stops a
    /// decompression at this cap with `RESOURCE_EXHAUSTED` (neither is retried).
    pub max_decoding_message_size: usize,
    /// Exports handled at once over all connections; the others wait their turn (tonic
    /// decodes a message before the handler sees it, so this bounds decode memory at about
    /// this many times the message limit). Default 2.
    pub max_concurrency: usize,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        Self { max_decoding_message_size: DEFAULT_MAX_REQUEST_BYTES, max_concurrency: 2 }
    }
}

/// The three OTLP services over one handler.
#[derive(Clone)]
struct Otlp {
    handler: Arc<dyn OtlpHandler>,
}

/// The OTLP gRPC services as tonic routes, ready for
/// `tonic::transport::Server::builder().add_routes(routes)` (or [`Routes::into_axum_router`]).
pub fn grpc_routes(handler: Arc<dyn OtlpHandler>, cfg: &GrpcConfig) -> Routes {
    let svc = Otlp { handler: handler.clone() };
    let max = cfg.max_decoding_message_size;
    let logs = LogsServiceServer::new(svc.clone())
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(max);
    let traces = TraceServiceServer::new(svc.clone())
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(max);
    let metrics = MetricsServiceServer::new(svc)
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(max);
    // The token is checked by an interceptor, on the headers, before tonic reads and decodes
    // the message: an unauthenticated client costs no decode.
    let check = BearerCheck { handler };
    Routes::new(InterceptedService::new(logs, check.clone()))
        .add_service(InterceptedService::new(traces, check.clone()))
        .add_service(InterceptedService::new(metrics, check))
}

/// The bearer token in the `authorization` metadata, through [`OtlpHandler::authorized`].
#[derive(Clone)]
struct BearerCheck {
    handler: Arc<dyn OtlpHandler>,
}

impl Interceptor for BearerCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let token =
            request.metadata().get("authorization").and_then(|v| v.to_str().ok()).and_then(crate::hooks::bearer_value);
        if self.handler.authorized(token) {
            Ok(request)
        } else {
            self.handler.refused("unauthorized");
            Err(Status::unauthenticated("missing or invalid bearer token in the `authorization` metadata"))
        }
    }
}

/// Serves OTLP/gRPC on `listener` until `shutdown` resolves (conventionally port 4317).
pub async fn serve_grpc(
    listener: tokio::net::TcpListener,
    handler: Arc<dyn OtlpHandler>,
    cfg: GrpcConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), tonic::transport::Error> {
    tonic::transport::Server::builder()
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(cfg.max_concurrency.max(1)))
        .add_routes(grpc_routes(handler, &cfg))
        .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener), shutdown)
        .await
}

/// The gRPC status for a refusal: `UNAVAILABLE` + `RetryInfo` when full (retried by
/// exporters), `INVALID_ARGUMENT` for bad data (not retried).
fn refused(r: Refused) -> Status {
    match r {
        Refused::Full { retry_after } => {
            let msg = "pipeline full, retry later".to_owned();
            let details = status::with_retry(CODE_UNAVAILABLE, msg.clone(), retry_after).encode_to_vec();
            Status::with_details(Code::Unavailable, msg, details.into())
        }
        Refused::Invalid(m) => Status::invalid_argument(m),
    }
}

fn partial(a: &Accepted) -> bool {
    a.rejected > 0 || !a.message.is_empty()
}

#[tonic::async_trait]
impl LogsService for Otlp {
    async fn export(
        &self,
        request: Request<ExportLogsServiceRequest>,
    ) -> Result<Response<ExportLogsServiceResponse>, Status> {
        let req = request.into_inner();
        decode::check_ids_logs(&req).map_err(|e| {
            self.handler.refused("invalid");
            Status::invalid_argument(e)
        })?;
        // tonic has decoded the message on this task; the records stay on it.
        let a = if self.handler.wants_log_records() {
            self.handler.log_records_async(super::into_otel_records(req)).await
        } else {
            self.handler.logs(req)
        }
        .map_err(refused)?;
        let partial_success = partial(&a)
            .then_some(ExportLogsPartialSuccess { rejected_log_records: a.rejected, error_message: a.message });
        Ok(Response::new(ExportLogsServiceResponse { partial_success }))
    }
}

#[tonic::async_trait]
impl TraceService for Otlp {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let req = request.into_inner();
        decode::check_ids_traces(&req).map_err(|e| {
            self.handler.refused("invalid");
            Status::invalid_argument(e)
        })?;
        let a = self.handler.traces(req).map_err(refused)?;
        let partial_success =
            partial(&a).then_some(ExportTracePartialSuccess { rejected_spans: a.rejected, error_message: a.message });
        Ok(Response::new(ExportTraceServiceResponse { partial_success }))
    }
}

#[tonic::async_trait]
impl MetricsService for Otlp {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let req = request.into_inner();
        decode::check_ids_metrics(&req).map_err(|e| {
            self.handler.refused("invalid");
            Status::invalid_argument(e)
        })?;
        let a = self.handler.metrics(req).map_err(refused)?;
        let partial_success = partial(&a)
            .then_some(ExportMetricsPartialSuccess { rejected_data_points: a.rejected, error_message: a.message });
        Ok(Response::new(ExportMetricsServiceResponse { partial_success }))
    }
}
