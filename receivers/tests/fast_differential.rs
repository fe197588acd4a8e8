//! A differential fuzz run of the OTLP fast reader against prost: random logs
//! exports of every shape the fast path reads (and some it must leave to prost), then
//! random mutations of their bytes. For every body, the fast reader either declines
//! (`None`) or yields exactly the records prost's decoding gives; it never accepts a body
//! prost rejects. Deterministic (a seeded generator) and bounded: a few thousand cases.

use aep_receivers::otlp::{fast, into_otel_records};
use bytes::Bytes;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList, any_value,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;

/// xorshift64*: small, seeded, good enough to spread cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const KEYS: &[&str] = &[
    "event.name",
    "conversation.id",
    "session.id",
    "tool_name",
    "call_id",
    "duration_ms",
    "success",
    "model",
    "prompt",
    "",
    "ключ",
    "k\u{0}",
];

fn string(r: &mut Rng) -> String {
    match r.below(7) {
        0 => String::new(),
        1 => "codex.sse_event".into(),
        2 => "é✓\u{1F600}".repeat(r.below(4) as usize + 1),
        // Long and not ASCII, as prompts are: the reader's SIMD UTF-8 check.
        6 => "a prompt é✓\u{1F600} ".repeat(r.below(40) as usize + 4),
        3 => "x".repeat(r.below(300) as usize),
        4 => format!("{}", r.next()),
        _ => "true".into(),
    }
}

fn any(r: &mut Rng, depth: usize) -> AnyValue {
    let leaf = depth >= 3;
    let v = match r.below(if leaf { 6 } else { 8 }) {
        0 => any_value::Value::StringValue(string(r)),
        1 => any_value::Value::BoolValue(r.chance(50)),
        2 => any_value::Value::IntValue(r.next() as i64),
        3 => any_value::Value::DoubleValue(match r.below(4) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => -0.0,
            _ => (r.next() as f64) / 7.0,
        }),
        4 => any_value::Value::BytesValue((0..r.below(20)).map(|_| r.next() as u8).collect()),
        5 => return AnyValue { value: None },
        6 => any_value::Value::ArrayValue(ArrayValue { values: (0..r.below(4)).map(|_| any(r, depth + 1)).collect() }),
        _ => any_value::Value::KvlistValue(KeyValueList { values: kvs(r, depth + 1, 4) }),
    };
    AnyValue { value: Some(v) }
}

fn kvs(r: &mut Rng, depth: usize, max: u64) -> Vec<KeyValue> {
    (0..r.below(max))
        .map(|_| KeyValue {
            key: KEYS[r.below(KEYS.len() as u64) as usize].into(),
            value: if r.chance(5) { None } else { Some(any(r, depth)) },
            ..Default::default()
        })
        .collect()
}

fn id(r: &mut Rng, len: usize) -> Vec<u8> {
    match r.below(5) {
        0 => Vec::new(),
        1 => vec![0; len],
        _ => (0..len).map(|_| r.next() as u8).collect(),
    }
}

fn record(r: &mut Rng) -> LogRecord {
    LogRecord {
        time_unix_nano: if r.chance(50) { 0 } else { r.next() },
        observed_time_unix_nano: r.next(),
        severity_number: r.below(25) as i32,
        severity_text: if r.chance(50) { String::new() } else { "INFO".into() },
        body: if r.chance(40) { Some(any(r, 0)) } else { None },
        attributes: kvs(r, 0, 12),
        dropped_attributes_count: r.below(3) as u32,
        flags: r.below(512) as u32,
        trace_id: id(r, 16),
        span_id: id(r, 8),
        event_name: if r.chance(50) { String::new() } else { string(r) },
    }
}

fn request(r: &mut Rng) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: (0..r.below(3) + 1)
            .map(|_| ResourceLogs {
                resource: if r.chance(90) {
                    Some(Resource { attributes: kvs(r, 0, 6), ..Default::default() })
                } else {
                    None
                },
                scope_logs: (0..r.below(3) + 1)
                    .map(|_| ScopeLogs {
                        scope: if r.chance(70) {
                            Some(InstrumentationScope {
                                name: string(r),
                                version: string(r),
                                attributes: kvs(r, 0, 2),
                                ..Default::default()
                            })
                        } else {
                            None
                        },
                        log_records: (0..r.below(6)).map(|_| record(r)).collect(),
                        schema_url: if r.chance(20) {
                            "https://opentelemetry.io/schemas/1.0".into()
                        } else {
                            String::new()
                        },
                    })
                    .collect(),
                schema_url: String::new(),
            })
            .collect(),
    }
}

/// The fast reader declines or agrees with prost; `true` when it read the body itself.
fn check(body: &[u8], case: &str) -> bool {
    let fast = fast::log_records(Bytes::copy_from_slice(body));
    let prost = ExportLogsServiceRequest::decode(body).map(into_otel_records);
    match (fast, prost) {
        (None, _) => false,
        (Some(f), Ok(p)) => {
            assert!(f == p, "{case}: the fast reader and prost disagree\nfast:  {f:?}\nprost: {p:?}");
            true
        }
        (Some(f), Err(e)) => panic!("{case}: the fast reader accepted a body prost rejects ({e}): {f:?}"),
    }
}

fn mutate(r: &mut Rng, body: &mut Vec<u8>) {
    if body.is_empty() {
        body.push(r.next() as u8);
        return;
    }
    let at = r.below(body.len() as u64) as usize;
    match r.below(5) {
        0 => body[at] ^= 1 << r.below(8),
        1 => body[at] = r.next() as u8,
        2 => body.truncate(at),
        3 => body.insert(at, r.next() as u8),
        _ => {
            let n = r.below(8) as usize;
            let end = (at + n).min(body.len());
            body.drain(at..end);
        }
    }
}

#[test]
fn the_fast_reader_agrees_with_prost_on_random_exports() {
    let mut r = Rng(0x005e_ed0f_a3b1_d9e5);
    let mut read_fast = 0;
    for case in 0..1500 {
        let body = request(&mut r).encode_to_vec();
        if check(&body, &format!("case {case}")) {
            read_fast += 1;
        }
    }
    // Most generated shapes are the common one the fast path exists for.
    assert!(read_fast > 500, "the fast reader read only {read_fast} of 1500 well-formed exports");
}

#[test]
fn the_fast_reader_never_accepts_what_prost_rejects_after_mutation() {
    let mut r = Rng(0x0bad_c0de_1234_5678);
    for case in 0..3000 {
        let mut body = request(&mut r).encode_to_vec();
        for _ in 0..=r.below(3) {
            mutate(&mut r, &mut body);
        }
        check(&body, &format!("mutated case {case}"));
    }
}
