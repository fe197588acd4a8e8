//! OTLP/gRPC receiver over a real socket with the tonic client: gzip and zstd requests,
//! partial success, UNAVAILABLE + RetryInfo, INVALID_ARGUMENT, the message size limit.

mod otlp_common;

use std::sync::Arc;
use std::time::Duration;

use aep_receivers::otlp::{self, GrpcConfig, OtlpHandler};
use opentelemetry_proto::tonic::collector::logs::v1::logs_service_client::LogsServiceClient;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_client::TraceServiceClient;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use otlp_common::{Answer, Entry, Recorder, RecordsRecorder, codex_request};
use prost::Message;
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
    tokio::spawn(async move { otlp::serve_grpc(listener, handler, cfg, std::future::pending()).await.unwrap() });
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
