//! OTLP/gRPC receiver over a real socket with the tonic client: gzip and zstd requests,
//! partial success, UNAVAILABLE + RetryInfo, INVALID_ARGUMENT (bad ids, malformed protobuf),
//! the message size limit, the bearer token, exports multiplexed on one connection, the
//! connection cap.

mod otlp_common;

use std::sync::Arc;
use std::time::Duration;

use aep_receivers::listener::{Limits, OnRefused};
use aep_receivers::otlp::{self, GrpcConfig, OtlpHandler};
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use otlp_common::{Answer, Entry, Recorder, RecordsRecorder, codex_request};
use prost::Message;
use tokio_util::sync::CancellationToken;
use tonic::Code;
use tonic::codec::CompressionEncoding;
use tonic::transport::Channel;

/// `google.rpc.Status` / `Any` / `RetryInfo` / `Duration`, declared here to read the wire.
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
    #[prost(message, repeated, tag = "3")]
    details: Vec<Any>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct Any {
    #[prost(string, tag = "1")]
    type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    retry_delay: Option<PbDuration>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PbDuration {
    #[prost(int64, tag = "1")]
    seconds: i64,
    #[prost(int32, tag = "2")]
    nanos: i32,
}

const TRACE: [u8; 16] = [7; 16];

async fn start(handler: Arc<dyn OtlpHandler>, cfg: GrpcConfig) -> Channel {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let on_refused: OnRefused = Arc::new(|_| {});
    tokio::spawn(otlp::serve_grpc(listener, handler, cfg, on_refused, CancellationToken::new()));
    Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap()
}

fn logs_client(ch: Channel, enc: CompressionEncoding) -> LogsServiceClient<Channel> {
    LogsServiceClient::new(ch).send_compressed(enc).accept_compressed(CompressionEncoding::Gzip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gzip_and_zstd_exports_reach_the_handler() {
    let rec = Recorder::new();
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    let resp = logs_client(ch.clone(), CompressionEncoding::Gzip).export(codex_request(TRACE.to_vec())).await.unwrap();
    assert_eq!(resp.into_inner().partial_success, None);
    logs_client(ch, CompressionEncoding::Zstd).export(codex_request(Vec::new())).await.unwrap();
    let got = rec.logs.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    let records = otlp::to_otel_records(&got[0]);
    assert_eq!(records[0].attr_str("event.name"), Some("codex.tool_result"));
    assert_eq!(records[0].trace_id.as_deref(), Some("07070707070707070707070707070707"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_pipeline_is_unavailable_with_retry_info() {
    let rec = Recorder::new();
    rec.set(Answer::Full(Duration::from_millis(1500)));
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    let err = logs_client(ch, CompressionEncoding::Gzip).export(codex_request(Vec::new())).await.unwrap_err();
    assert_eq!(err.code(), Code::Unavailable);
    let st = RpcStatus::decode(err.details()).unwrap();
    assert_eq!(st.code, 14);
    let any = &st.details[0];
    assert_eq!(any.type_url, "type.googleapis.com/google.rpc.RetryInfo");
    let delay = RetryInfo::decode(any.value.as_slice()).unwrap().retry_delay.unwrap();
    assert_eq!((delay.seconds, delay.nanos), (1, 500_000_000));
    assert_eq!(rec.log_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_and_handler_refusals_are_invalid_argument() {
    let rec = Recorder::new();
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    let err = logs_client(ch.clone(), CompressionEncoding::Gzip).export(codex_request(vec![1; 15])).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("traceId"), "{}", err.message());
    assert_eq!(rec.log_count(), 0);
    rec.set(Answer::Invalid("no session"));
    let err = logs_client(ch, CompressionEncoding::Gzip).export(codex_request(Vec::new())).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_success_is_reported() {
    let rec = Recorder::new();
    rec.set(Answer::Partial(1, "one record had no session"));
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    let resp = logs_client(ch, CompressionEncoding::Gzip).export(codex_request(Vec::new())).await.unwrap();
    let ps = resp.into_inner().partial_success.unwrap();
    assert_eq!((ps.rejected_log_records, ps.error_message.as_str()), (1, "one record had no session"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_size_limit_applies_before_and_after_decompression() {
    let rec = Recorder::new();
    let ch = start(rec.clone(), GrpcConfig { max_decoding_message_size: 4096, ..Default::default() }).await;
    let mut big = codex_request(Vec::new());
    big.resource_logs[0].scope_logs[0].log_records[0].severity_text = "x".repeat(64 * 1024);
    // Uncompressed: the frame itself is too large.
    let err = LogsServiceClient::new(ch.clone()).export(big.clone()).await.unwrap_err();
    assert_eq!(err.code(), Code::OutOfRange, "{err:?}");
    // Gzip: the frame is small, the decompressed message is not (a bomb stops at the cap).
    let err = logs_client(ch, CompressionEncoding::Gzip).export(big).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(rec.log_count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_service_is_served() {
    let rec = Recorder::new();
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    let req = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    trace_id: TRACE.to_vec(),
                    span_id: vec![1; 8],
                    name: "chat".into(),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    TraceServiceClient::new(ch).send_compressed(CompressionEncoding::Gzip).export(req).await.unwrap();
    assert_eq!(rec.traces.lock().unwrap()[0].resource_spans[0].scope_spans[0].spans[0].name, "chat");
}

/// A handler that takes records gets gRPC exports through `log_records_async`, awaited on the
/// task tonic decoded them on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_take_the_async_entry() {
    let rec = RecordsRecorder::new();
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    let mut client = logs_client(ch, CompressionEncoding::Gzip);
    client.export(codex_request(Vec::new())).await.unwrap();
    assert_eq!(rec.entries(), [(Entry::Async, 1)]);
    assert_eq!(rec.exports.lock().unwrap()[0].1, ["codex.tool_result"]);
}

/// A message that is not protobuf is the client's fault: `INVALID_ARGUMENT` (not retried),
/// counted as refused, nothing recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_protobuf_is_invalid_argument() {
    let rec = Recorder::new();
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    // A message holding a length-delimited field whose length is a truncated varint.
    let body = vec![0x0a, 0xff, 0xff];
    let mut client = tonic::client::Grpc::new(ch);
    client.ready().await.unwrap();
    let path = http::uri::PathAndQuery::from_static("/opentelemetry.proto.collector.logs.v1.LogsService/Export");
    let err =
        client.unary::<RawFrame, RawFrame, _>(tonic::Request::new(RawFrame(body)), path, RawCodec).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("not a valid OTLP protobuf"), "{}", err.message());
    assert_eq!(rec.log_count(), 0);
    assert_eq!(*rec.refusals.lock().unwrap(), ["invalid"]);
}

/// Bytes sent and received as they are, to put a malformed message on the wire.
#[derive(Debug, Clone)]
struct RawFrame(Vec<u8>);

#[derive(Debug, Clone, Copy)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = RawFrame;
    type Decode = RawFrame;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = RawFrame;
    type Error = tonic::Status;
    fn encode(&mut self, item: RawFrame, dst: &mut tonic::codec::EncodeBuf<'_>) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item.0);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = RawFrame;
    type Error = tonic::Status;
    fn decode(&mut self, src: &mut tonic::codec::DecodeBuf<'_>) -> Result<Option<RawFrame>, tonic::Status> {
        let n = bytes::Buf::remaining(src);
        Ok(Some(RawFrame(bytes::Buf::copy_to_bytes(src, n).to_vec())))
    }
}

/// The auth scheme is case-insensitive (RFC 9110 §11.1); a wrong token is `UNAUTHENTICATED`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive() {
    let rec = Recorder::new();
    *rec.token.lock().unwrap() = Some("s3cret");
    let ch = start(rec.clone(), GrpcConfig::default()).await;
    let with = |auth: &'static str| {
        let mut req = tonic::Request::new(codex_request(Vec::new()));
        req.metadata_mut().insert("authorization", auth.parse().unwrap());
        req
    };
    let mut client = logs_client(ch, CompressionEncoding::Gzip);
    client.export(with("bearer s3cret")).await.unwrap();
    client.export(with("BEARER s3cret")).await.unwrap();
    let err = client.export(with("Bearer nope")).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    let err = client.export(codex_request(Vec::new())).await.unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    assert_eq!(rec.log_count(), 2);
}

/// Eight concurrent exports of about 4 MB multiplexed on one connection (an OTel Collector
/// exporter with several queue consumers) all complete, though only two are admitted at a
/// time: the ones waiting cannot fill the connection's flow-control window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_exports_on_one_connection_all_complete() {
    let rec = Recorder::new();
    let ch = start(rec.clone(), GrpcConfig { max_concurrency: 2, ..Default::default() }).await;
    let mut big = codex_request(Vec::new());
    big.resource_logs[0].scope_logs[0].log_records[0].severity_text = "x".repeat(4 << 20);
    let calls = (0..8).map(|_| {
        // Uncompressed: 4 MB of flow-controlled DATA per stream.
        let (mut client, req) = (LogsServiceClient::new(ch.clone()), big.clone());
        tokio::spawn(async move { client.export(req).await.map(|_| ()) })
    });
    let all = futures_util::future::join_all(calls);
    // A bound on a stall, not a measurement: before, they all ended in DEADLINE_EXCEEDED.
    let done = tokio::time::timeout(Duration::from_secs(60), all).await.expect("the exports stalled");
    for r in done {
        r.unwrap().unwrap();
    }
    assert_eq!(rec.log_count(), 8);
}

/// Over the cap a gRPC connection is closed at once (the client retries); a connection
/// that never sends a request is closed after the header timeout, and the room is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_capped_and_timed_out() {
    let rec = Recorder::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let r = refused.clone();
    let on_refused: OnRefused = Arc::new(move |_| {
        r.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    });
    let connections = Limits { max_connections: 4, header_timeout: Duration::from_millis(300), ..Limits::default() };
    let cfg = GrpcConfig { connections, ..Default::default() };
    tokio::spawn(otlp::serve_grpc(listener, rec.clone(), cfg, on_refused, CancellationToken::new()));
    let result = tokio::task::spawn_blocking(move || {
        use std::io::Read as _;
        let idle: Vec<_> = (0..4).map(|_| std::net::TcpStream::connect(addr).unwrap()).collect();
        let mut over = std::net::TcpStream::connect(addr).unwrap();
        over.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 64];
        let over_closed = matches!(over.read(&mut buf), Ok(0) | Err(_));
        let idle_closed = idle.into_iter().all(|mut s| {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            // The server's HTTP/2 preface (SETTINGS) may come first; then the close.
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).is_ok()
        });
        (over_closed, idle_closed)
    })
    .await
    .unwrap();
    assert_eq!(result, (true, true));
    assert!(refused.load(std::sync::atomic::Ordering::Relaxed) >= 1);
    let ch = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    logs_client(ch, CompressionEncoding::Gzip).export(codex_request(Vec::new())).await.unwrap();
    assert_eq!(rec.log_count(), 1);
}
