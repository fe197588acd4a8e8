//! OTLP/gRPC: `LogsService`, `TraceService` and `MetricsService` over one handler, served by
//! the bounded accept loop of [`crate::listener`]. The services accept gzip and zstd request
//! compression (collector exporters send gzip by default, and a tonic server answers
//! `UNIMPLEMENTED` to it unless told otherwise), check the bearer token on the headers before
//! anything is decoded, and answer a message that is not valid protobuf with
//! `INVALID_ARGUMENT` (not retried) rather than tonic's `INTERNAL`.

use std::convert::Infallible;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Buf as _;
use prost::Message;
use tokio_util::sync::CancellationToken;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::server::NamedService;
use tonic::service::Routes;
use tonic::{Code, Request, Response, Status};

use super::signal::{BoxFuture, Export, Logs, Metrics, Traces};
use super::status::{self, CODE_UNAVAILABLE};
use super::{DEFAULT_MAX_REQUEST_BYTES, OtlpHandler, Refused};
use crate::listener::{self, Limits, OnRefused, Protocol};

/// OTLP/gRPC limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcConfig {
    /// Largest request message, as framed and once decompressed (default 20 MiB; tonic's own
    /// default is 4 MiB). tonic refuses a larger frame with `OUT_OF_RANGE` and stops a
    /// decompression at this cap with `RESOURCE_EXHAUSTED` (neither is retried).
    pub max_decoding_message_size: usize,
    /// Exports handled at once over all connections; the others wait their turn (a message
    /// is decoded only once admitted, so this bounds decode memory at about this many times
    /// the message limit). Default 2.
    pub max_concurrency: usize,
    /// The connection bounds of the listener (the same rule as the HTTP ports').
    pub connections: Limits,
}

impl Default for GrpcConfig {
    fn default() -> Self {
        Self {
            max_decoding_message_size: DEFAULT_MAX_REQUEST_BYTES,
            max_concurrency: 2,
            connections: Limits::default(),
        }
    }
}

/// One OTLP service as a tower service tonic's routes can hold.
struct Service<E> {
    handler: Arc<dyn OtlpHandler>,
    max_decode: usize,
    signal: PhantomData<fn() -> E>,
}

impl<E> Clone for Service<E> {
    fn clone(&self) -> Self {
        Self { handler: self.handler.clone(), max_decode: self.max_decode, signal: PhantomData }
    }
}

impl<E: Export> NamedService for Service<E> {
    const NAME: &'static str = E::SERVICE;
}

impl<E, B> tower::Service<::http::Request<B>> for Service<E>
where
    E: Export,
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
{
    type Response = ::http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: ::http::Request<B>) -> Self::Future {
        let handler = self.handler.clone();
        let max_decode = self.max_decode;
        Box::pin(async move {
            if req.uri().path() != E::GRPC_PATH {
                return Ok(
                    Status::unimplemented(format!("{} has no method {}", E::SERVICE, req.uri().path())).into_http()
                );
            }
            // The token is checked on the headers, before the message is read and decoded:
            // an unauthenticated client costs no decode.
            let token = req
                .headers()
                .get(::http::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(crate::hooks::bearer_value);
            if !handler.authorized(token) {
                handler.refused("unauthorized");
                let msg = "missing or invalid bearer token in the `authorization` metadata";
                return Ok(Status::unauthenticated(msg).into_http());
            }
            let codec = OtlpCodec::<E::Resp, E::Req> { handler: handler.clone(), types: PhantomData };
            let mut grpc = tonic::server::Grpc::new(codec)
                .accept_compressed(CompressionEncoding::Gzip)
                .accept_compressed(CompressionEncoding::Zstd)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(max_decode);
            let method = tower::service_fn(move |r: Request<E::Req>| export::<E>(handler.clone(), r.into_inner()));
            Ok(grpc.unary(method, req).await)
        })
    }
}

/// One export: the ids checked (tonic decoded the message), the request handed to the
/// handler, its answer as the response or the status of a refusal.
async fn export<E: Export>(handler: Arc<dyn OtlpHandler>, req: E::Req) -> Result<Response<E::Resp>, Status> {
    E::check_ids(&req).map_err(|e| invalid(&*handler, e))?;
    let a = E::take_async(handler, req).await.map_err(refused)?;
    Ok(Response::new(E::response(a)))
}

/// Protobuf in and out, like tonic's prost codec except that a message that does not decode
/// is the client's fault: `INVALID_ARGUMENT`, counted as refused.
struct OtlpCodec<Enc, Dec> {
    handler: Arc<dyn OtlpHandler>,
    types: PhantomData<fn() -> (Enc, Dec)>,
}

impl<Enc, Dec> Codec for OtlpCodec<Enc, Dec>
where
    Enc: Message + Send + 'static,
    Dec: Message + Default + Send + 'static,
{
    type Encode = Enc;
    type Decode = Dec;
    type Encoder = ProtoEncoder<Enc>;
    type Decoder = ProtoDecoder<Dec>;

    fn encoder(&mut self) -> Self::Encoder {
        ProtoEncoder(PhantomData)
    }

    fn decoder(&mut self) -> Self::Decoder {
        ProtoDecoder { handler: self.handler.clone(), types: PhantomData }
    }
}

/// Writes a response message.
struct ProtoEncoder<T>(PhantomData<fn() -> T>);

impl<T: Message> Encoder for ProtoEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst).map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
}

/// Reads a request message.
struct ProtoDecoder<T> {
    handler: Arc<dyn OtlpHandler>,
    types: PhantomData<fn() -> T>,
}

impl<T: Message + Default> Decoder for ProtoDecoder<T> {
    type Item = T;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<T>, Status> {
        let len = src.remaining();
        T::decode(src).map(Some).map_err(|e| {
            self.handler.refused("invalid");
            Status::invalid_argument(format!("the {len}-byte message is not a valid OTLP protobuf message: {e}"))
        })
    }
}

/// The OTLP gRPC services as tonic routes (mountable in any tonic or axum server).
pub fn grpc_routes(handler: Arc<dyn OtlpHandler>, cfg: &GrpcConfig) -> Routes {
    let max_decode = cfg.max_decoding_message_size;
    let logs = Service::<Logs> { handler: handler.clone(), max_decode, signal: PhantomData };
    let traces = Service::<Traces> { handler: handler.clone(), max_decode, signal: PhantomData };
    let metrics = Service::<Metrics> { handler, max_decode, signal: PhantomData };
    Routes::new(logs).add_service(traces).add_service(metrics)
}

/// The OTLP gRPC services behind one admission limit of `cfg.max_concurrency` exports at a
/// time over all connections (waiting exports hold their stream's flow-control window, which
/// the listener sizes so they cannot starve the admitted ones).
pub fn grpc_router(handler: Arc<dyn OtlpHandler>, cfg: &GrpcConfig) -> axum::Router {
    grpc_routes(handler, cfg)
        .into_axum_router()
        .layer(tower::limit::GlobalConcurrencyLimitLayer::new(cfg.max_concurrency.max(1)))
}

/// Serves OTLP/gRPC on `listener` until `shutdown` (conventionally port 4317), within
/// `cfg.connections`; `on_refused` hears of each connection refused over the cap.
pub async fn serve_grpc(
    listener: tokio::net::TcpListener,
    handler: Arc<dyn OtlpHandler>,
    cfg: GrpcConfig,
    on_refused: OnRefused,
    shutdown: CancellationToken,
) {
    let app = grpc_router(handler, &cfg);
    listener::serve(listener, app, cfg.connections, Protocol::Grpc, on_refused, shutdown).await;
}

/// A request that fails the id checks: `INVALID_ARGUMENT`, counted as refused.
fn invalid(handler: &dyn OtlpHandler, e: String) -> Status {
    handler.refused("invalid");
    Status::invalid_argument(e)
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
