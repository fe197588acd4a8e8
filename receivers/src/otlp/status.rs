//! The `google.rpc.Status` / `RetryInfo` messages OTLP uses for errors, hand-declared with
//! prost (a handful of fields; no extra crate).

use std::time::Duration;

/// `google.protobuf.Any`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Any {
    #[prost(string, tag = "1")]
    pub type_url: String,
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
}

/// `google.rpc.Status`: the OTLP/HTTP error body and the gRPC `grpc-status-details-bin`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RpcStatus {
    #[prost(int32, tag = "1")]
    pub code: i32,
    #[prost(string, tag = "2")]
    pub message: String,
    #[prost(message, repeated, tag = "3")]
    pub details: Vec<Any>,
}

/// `google.protobuf.Duration`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct ProtoDuration {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// `google.rpc.RetryInfo`.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct RetryInfo {
    #[prost(message, optional, tag = "1")]
    pub retry_delay: Option<ProtoDuration>,
}

/// The type URL of `RetryInfo` inside an `Any`.
pub(crate) const RETRY_INFO_TYPE: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// gRPC code numbers used here.
pub(crate) const CODE_INVALID_ARGUMENT: i32 = 3;
pub(crate) const CODE_RESOURCE_EXHAUSTED: i32 = 8;
pub(crate) const CODE_UNAVAILABLE: i32 = 14;
pub(crate) const CODE_UNAUTHENTICATED: i32 = 16;

/// A `google.rpc.Status` carrying a `RetryInfo` with `delay`.
pub(crate) fn with_retry(code: i32, message: String, delay: Duration) -> RpcStatus {
    let info = RetryInfo {
        retry_delay: Some(ProtoDuration {
            seconds: i64::try_from(delay.as_secs()).unwrap_or(i64::MAX),
            nanos: i32::try_from(delay.subsec_nanos()).unwrap_or(0),
        }),
    };
    RpcStatus {
        code,
        message,
        details: vec![Any { type_url: RETRY_INFO_TYPE.into(), value: prost::Message::encode_to_vec(&info) }],
    }
}
