//! Shared test seam: a handler that records what it got and answers as told.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_adapters::otel::OtelRecord;
use aep_receivers::otlp::{
    Accepted, ExportLogsServiceRequest, ExportMetricsServiceRequest, ExportTraceServiceRequest, OtlpHandler,
    RecordsAnswer, Refused,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value::Value as Av};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// How the recorder answers.
#[derive(Debug, Clone)]
pub enum Answer {
    Accept,
    Partial(i64, &'static str),
    Full(Duration),
    Invalid(&'static str),
}

/// Records every request; answers with `answer`.
pub struct Recorder {
    pub answer: Mutex<Answer>,
    pub logs: Mutex<Vec<ExportLogsServiceRequest>>,
    pub traces: Mutex<Vec<ExportTraceServiceRequest>>,
    pub metrics: Mutex<Vec<ExportMetricsServiceRequest>>,
    /// The bearer token required, if any.
    pub token: Mutex<Option<&'static str>>,
    /// The refusals the receiver reported, by reason.
    pub refusals: Mutex<Vec<&'static str>>,
}

impl Recorder {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            answer: Mutex::new(Answer::Accept),
            logs: Mutex::default(),
            traces: Mutex::default(),
            metrics: Mutex::default(),
            token: Mutex::default(),
            refusals: Mutex::default(),
        })
    }

    pub fn set(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    fn reply(&self) -> Result<Accepted, Refused> {
        match self.answer.lock().unwrap().clone() {
            Answer::Accept => Ok(Accepted::all()),
            Answer::Partial(n, m) => Ok(Accepted::partial(n, m)),
            Answer::Full(d) => Err(Refused::Full { retry_after: d }),
            Answer::Invalid(m) => Err(Refused::Invalid(m.into())),
        }
    }

    pub fn log_count(&self) -> usize {
        self.logs.lock().unwrap().len()
    }
}

impl OtlpHandler for Recorder {
    fn authorized(&self, token: Option<&str>) -> bool {
        self.token.lock().unwrap().is_none_or(|t| token == Some(t))
    }
    fn refused(&self, reason: &'static str) {
        self.refusals.lock().unwrap().push(reason);
    }
    fn logs(&self, req: ExportLogsServiceRequest) -> Result<Accepted, Refused> {
        let r = self.reply();
        if r.is_ok() {
            self.logs.lock().unwrap().push(req);
        }
        r
    }
    fn traces(&self, req: ExportTraceServiceRequest) -> Result<Accepted, Refused> {
        let r = self.reply();
        if r.is_ok() {
            self.traces.lock().unwrap().push(req);
        }
        r
    }
    fn metrics(&self, req: ExportMetricsServiceRequest) -> Result<Accepted, Refused> {
        let r = self.reply();
        if r.is_ok() {
            self.metrics.lock().unwrap().push(req);
        }
        r
    }
}

/// Which entry point of a records-taking handler a logs export came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// `log_records_async`, awaited on the receiving task.
    Async,
    /// `log_records_blocking`, on the blocking pool.
    Blocking,
    /// `logs`, with the decoded request.
    Request,
}

/// A handler that takes logs as records and notes, per export, the entry point it came
/// through and the records' event names.
#[derive(Default)]
pub struct RecordsRecorder {
    pub exports: Mutex<Vec<(Entry, Vec<String>)>>,
}

impl RecordsRecorder {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn note(&self, entry: Entry, records: &[OtelRecord]) -> Result<Accepted, Refused> {
        let names = records.iter().map(|r| r.attr_str("event.name").unwrap_or("").to_owned()).collect();
        self.exports.lock().unwrap().push((entry, names));
        Ok(Accepted::all())
    }

    pub fn entries(&self) -> Vec<(Entry, usize)> {
        self.exports.lock().unwrap().iter().map(|(e, n)| (*e, n.len())).collect()
    }
}

impl OtlpHandler for RecordsRecorder {
    fn logs(&self, req: ExportLogsServiceRequest) -> Result<Accepted, Refused> {
        self.note(Entry::Request, &aep_receivers::otlp::into_otel_records(req))
    }
    fn wants_log_records(&self) -> bool {
        true
    }
    fn log_records(&self, _records: Vec<OtelRecord>) -> Result<Accepted, Refused> {
        panic!("the receivers call log_records_async or log_records_blocking, never this")
    }
    fn log_records_blocking(&self, records: Vec<OtelRecord>) -> Result<Accepted, Refused> {
        self.note(Entry::Blocking, &records)
    }
    fn log_records_async(&self, records: Vec<OtelRecord>) -> RecordsAnswer<'_> {
        Box::pin(async move {
            // Awaiting is what this entry point allows: yield once before answering.
            tokio::task::yield_now().await;
            self.note(Entry::Async, &records)
        })
    }
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue { key: k.into(), value: Some(AnyValue { value: Some(Av::StringValue(v.into())) }), ..Default::default() }
}

/// A Codex-shaped logs request with one `codex.tool_result` record.
pub fn codex_request(trace_id: Vec<u8>) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            resource: Some(Resource { attributes: vec![kv("service.name", "codex_exec")], ..Default::default() }),
            scope_logs: vec![ScopeLogs {
                scope: Some(InstrumentationScope { name: "codex_otel.log_only".into(), ..Default::default() }),
                log_records: vec![LogRecord {
                    observed_time_unix_nano: 1_796_011_452_165_000_000,
                    event_name: "event otel/src/tool_result.rs:54".into(),
                    attributes: vec![
                        kv("event.name", "codex.tool_result"),
                        kv("conversation.id", "conv-1"),
                        kv("tool_name", "exec_command"),
                        kv("success", "true"),
                        kv("duration_ms", "61"),
                    ],
                    trace_id,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    }
}
