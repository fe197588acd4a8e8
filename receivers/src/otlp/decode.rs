//! Body decoding shared by the transports: media type and content coding, the capped
//! decompressor, protobuf and OTLP/JSON decoding, and id validation.
//!
//! OTLP/JSON rules applied here (OTLP specification, "JSON Protobuf Encoding"):
//! - keys are lowerCamelCase; the proto field names are not valid keys. opentelemetry-proto's
//!   serde silently ignores them, turning a snake_case body into an empty request, so a body
//!   whose top level uses `resource_logs` / `resource_spans` / `resource_metrics` is
//!   **rejected with 400** (deliberate: loud beats silently dropping a batch);
//! - trace and span ids are hex; their decoded length must be 16 / 8 bytes, or empty (checked
//!   by [`check_ids_logs`] and friends, for protobuf too: the decoder accepts any length);
//! - int64 fields as string or number; unknown fields are ignored.

use std::io::Read;

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;

use super::Signal;

/// The body format of a request (and of its response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `application/x-protobuf` (also `application/protobuf`).
    Protobuf,
    /// `application/json`.
    Json,
}

impl Format {
    /// Reads a `Content-Type` value; parameters (`; charset=utf-8`) and case are ignored.
    pub fn from_content_type(ct: &str) -> Option<Format> {
        let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/x-protobuf" | "application/protobuf" => Some(Format::Protobuf),
            "application/json" => Some(Format::Json),
            _ => None,
        }
    }

    /// The `Content-Type` of a response in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Protobuf => "application/x-protobuf",
            Format::Json => "application/json",
        }
    }
}

/// A `Content-Encoding` the receiver can undo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// No coding (`identity` or absent).
    Identity,
    /// `gzip` / `x-gzip`.
    Gzip,
    /// `zstd`.
    Zstd,
    /// `deflate` (zlib).
    Deflate,
}

impl Encoding {
    /// Reads a `Content-Encoding` value; `None` for a coding the receiver does not support.
    pub fn from_header(v: Option<&str>) -> Option<Encoding> {
        match v.map(|s| s.trim().to_ascii_lowercase()).as_deref() {
            None | Some("") | Some("identity") => Some(Encoding::Identity),
            Some("gzip") | Some("x-gzip") => Some(Encoding::Gzip),
            Some("zstd") => Some(Encoding::Zstd),
            Some("deflate") => Some(Encoding::Deflate),
            Some(_) => None,
        }
    }
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The decompressed body exceeds the limit (HTTP 413).
    #[error("decompressed body exceeds the {limit}-byte limit")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The compressed stream is corrupt (HTTP 400).
    #[error("cannot decompress the {coding} body: {detail}")]
    Decompress {
        /// The content coding.
        coding: &'static str,
        /// The decoder's message.
        detail: String,
    },
    /// The protobuf or JSON is malformed, or violates an OTLP rule (HTTP 400).
    #[error("{0}")]
    Invalid(String),
    /// The receiver is already decoding as many bytes as its [`DecodeBudget`](super::DecodeBudget)
    /// allows (HTTP 503 + `Retry-After`: retried by exporters).
    #[error("the receiver is decoding as much as it may at once; retry later")]
    Busy,
}

/// Undoes `encoding`, reading at most `limit` decompressed bytes: a decompression bomb stops
/// at the cap instead of exhausting memory.
pub fn decompress(body: &[u8], encoding: Encoding, limit: usize) -> Result<Vec<u8>, DecodeError> {
    fn capped(mut r: impl Read, coding: &'static str, limit: usize, hint: usize) -> Result<Vec<u8>, DecodeError> {
        let mut out = Vec::with_capacity(hint.min(limit));
        let read_cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
        (&mut r)
            .take(read_cap)
            .read_to_end(&mut out)
            .map_err(|e| DecodeError::Decompress { coding, detail: e.to_string() })?;
        if out.len() > limit {
            return Err(DecodeError::TooLarge { limit });
        }
        Ok(out)
    }
    let hint = body.len().saturating_mul(4);
    match encoding {
        Encoding::Identity => {
            if body.len() > limit {
                return Err(DecodeError::TooLarge { limit });
            }
            Ok(body.to_vec())
        }
        Encoding::Gzip => capped(flate2::read::MultiGzDecoder::new(body), "gzip", limit, hint),
        Encoding::Deflate => capped(flate2::read::ZlibDecoder::new(body), "deflate", limit, hint),
        Encoding::Zstd => {
            let dec = zstd::stream::read::Decoder::new(body)
                .map_err(|e| DecodeError::Decompress { coding: "zstd", detail: e.to_string() })?;
            capped(dec, "zstd", limit, hint)
        }
    }
}

/// Whether a JSON body uses a proto field name (snake_case) for the signal's top-level key:
/// `"resource_logs"` followed by optional whitespace and `:` can only be an object key.
fn has_snake_case_top_key(body: &[u8], signal: Signal) -> bool {
    let needle: &[u8] = match signal {
        Signal::Logs => b"\"resource_logs\"",
        Signal::Traces => b"\"resource_spans\"",
        Signal::Metrics => b"\"resource_metrics\"",
    };
    let mut from = 0;
    while let Some(pos) = body[from..].windows(needle.len()).position(|w| w == needle) {
        let after = from + pos + needle.len();
        if body[after..].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b':') {
            return true;
        }
        from = after;
    }
    false
}

fn decode_json<T: serde::de::DeserializeOwned>(body: &[u8], signal: Signal) -> Result<T, DecodeError> {
    if has_snake_case_top_key(body, signal) {
        return Err(DecodeError::Invalid(
            "OTLP/JSON keys must be lowerCamelCase (e.g. `resourceLogs`); proto field names such as \
             `resource_logs` are not valid OTLP/JSON keys"
                .into(),
        ));
    }
    serde_json::from_slice(body).map_err(|e| DecodeError::Invalid(format!("malformed OTLP/JSON: {e}")))
}

fn decode_proto<T: prost::Message + Default>(body: &[u8]) -> Result<T, DecodeError> {
    T::decode(body).map_err(|e| DecodeError::Invalid(format!("malformed OTLP protobuf: {e}")))
}

/// Decodes and validates a logs request.
pub fn logs(body: &[u8], format: Format) -> Result<ExportLogsServiceRequest, DecodeError> {
    let req = match format {
        Format::Protobuf => decode_proto(body)?,
        Format::Json => decode_json(body, Signal::Logs)?,
    };
    check_ids_logs(&req).map_err(DecodeError::Invalid)?;
    Ok(req)
}

/// Decodes and validates a traces request.
pub fn traces(body: &[u8], format: Format) -> Result<ExportTraceServiceRequest, DecodeError> {
    let req = match format {
        Format::Protobuf => decode_proto(body)?,
        Format::Json => decode_json(body, Signal::Traces)?,
    };
    check_ids_traces(&req).map_err(DecodeError::Invalid)?;
    Ok(req)
}

/// Decodes and validates a metrics request.
pub fn metrics(body: &[u8], format: Format) -> Result<ExportMetricsServiceRequest, DecodeError> {
    let req = match format {
        Format::Protobuf => decode_proto(body)?,
        Format::Json => decode_json(body, Signal::Metrics)?,
    };
    check_ids_metrics(&req).map_err(DecodeError::Invalid)?;
    Ok(req)
}

fn check_id(what: &str, id: &[u8], len: usize) -> Result<(), String> {
    if id.is_empty() || id.len() == len {
        Ok(())
    } else {
        Err(format!("{what} must be {len} bytes ({} hex digits) or empty, got {} bytes", len * 2, id.len()))
    }
}

/// Checks every log record's `traceId` (16 bytes) and `spanId` (8 bytes), or empty.
pub fn check_ids_logs(req: &ExportLogsServiceRequest) -> Result<(), String> {
    for r in req.resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records) {
        check_id("logRecord.traceId", &r.trace_id, 16)?;
        check_id("logRecord.spanId", &r.span_id, 8)?;
    }
    Ok(())
}

/// Checks every span's, parent's and link's ids.
pub fn check_ids_traces(req: &ExportTraceServiceRequest) -> Result<(), String> {
    for s in req.resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
        check_id("span.traceId", &s.trace_id, 16)?;
        check_id("span.spanId", &s.span_id, 8)?;
        check_id("span.parentSpanId", &s.parent_span_id, 8)?;
        for l in &s.links {
            check_id("link.traceId", &l.trace_id, 16)?;
            check_id("link.spanId", &l.span_id, 8)?;
        }
    }
    Ok(())
}

/// Checks every exemplar's ids.
pub fn check_ids_metrics(req: &ExportMetricsServiceRequest) -> Result<(), String> {
    for m in req.resource_metrics.iter().flat_map(|r| &r.scope_metrics).flat_map(|s| &s.metrics) {
        let exemplars: Vec<_> = match &m.data {
            Some(Data::Gauge(g)) => g.data_points.iter().flat_map(|p| &p.exemplars).collect(),
            Some(Data::Sum(s)) => s.data_points.iter().flat_map(|p| &p.exemplars).collect(),
            Some(Data::Histogram(h)) => h.data_points.iter().flat_map(|p| &p.exemplars).collect(),
            Some(Data::ExponentialHistogram(h)) => h.data_points.iter().flat_map(|p| &p.exemplars).collect(),
            Some(Data::Summary(_)) | None => Vec::new(),
        };
        for e in exemplars {
            check_id("exemplar.traceId", &e.trace_id, 16)?;
            check_id("exemplar.spanId", &e.span_id, 8)?;
        }
    }
    Ok(())
}

/// Number of log records in a request (for `partial_success` accounting).
pub fn count_logs(req: &ExportLogsServiceRequest) -> usize {
    req.resource_logs.iter().flat_map(|r| &r.scope_logs).map(|s| s.log_records.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn media_types_and_codings() {
        assert_eq!(Format::from_content_type("application/json; charset=utf-8"), Some(Format::Json));
        assert_eq!(Format::from_content_type("Application/X-Protobuf"), Some(Format::Protobuf));
        assert_eq!(Format::from_content_type("text/plain"), None);
        assert_eq!(Encoding::from_header(None), Some(Encoding::Identity));
        assert_eq!(Encoding::from_header(Some("GZIP")), Some(Encoding::Gzip));
        assert_eq!(Encoding::from_header(Some("br")), None);
    }

    #[test]
    fn gzip_bomb_stops_at_the_cap() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            enc.write_all(&zeros).unwrap();
        }
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < 200_000, "64 MiB of zeros compresses small: {}", bomb.len());
        assert_eq!(decompress(&bomb, Encoding::Gzip, 1 << 20), Err(DecodeError::TooLarge { limit: 1 << 20 }));
        assert_eq!(
            decompress(b"not gzip", Encoding::Gzip, 1 << 20).map_err(|e| matches!(e, DecodeError::Decompress { .. })),
            Err(true)
        );
    }

    #[test]
    fn zstd_round_trip_and_cap() {
        let data = vec![7u8; 5000];
        let z = zstd::encode_all(&data[..], 3).unwrap();
        assert_eq!(decompress(&z, Encoding::Zstd, 5000).unwrap(), data);
        assert_eq!(decompress(&z, Encoding::Zstd, 4999), Err(DecodeError::TooLarge { limit: 4999 }));
    }

    #[test]
    fn json_rules() {
        let ok = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"timeUnixNano":"5","traceId":"5B8EFFF798038103D269B633813FC60C","spanId":"EEE19B7EC3C1B174","futureField":1}]}]}]}"#;
        let req = logs(ok, Format::Json).unwrap();
        let r = &req.resource_logs[0].scope_logs[0].log_records[0];
        assert_eq!(r.time_unix_nano, 5);
        assert_eq!(r.trace_id.len(), 16);
        let short =
            br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"traceId":"5b8efff798038103d269b633813fc6"}]}]}]}"#;
        assert!(matches!(logs(short, Format::Json), Err(DecodeError::Invalid(m)) if m.contains("traceId")));
        let snake = br#"{"resource_logs" : [{"scope_logs":[{"log_records":[{}]}]}]}"#;
        assert!(matches!(logs(snake, Format::Json), Err(DecodeError::Invalid(m)) if m.contains("lowerCamelCase")));
        // The same words inside a string value are data, not keys.
        let value = br#"{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"body":{"stringValue":"resource_logs"}}]}]}]}"#;
        assert!(logs(value, Format::Json).is_ok());
        assert!(matches!(logs(b"{not json", Format::Json), Err(DecodeError::Invalid(_))));
    }
}
