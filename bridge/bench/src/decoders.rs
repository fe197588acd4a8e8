//! `aep-bench decoders`: a property and differential campaign on the hand-written decoders.
//!
//! - The OTLP fast reader (`aep_receivers::otlp::fast`) against prost: exports generated
//!   as prost messages (every field of the logs shape, ids of every size, nested values),
//!   then mutated on the wire, structure-aware (a field repeated, dropped, moved, of another
//!   wire type, an unknown field, an overlong varint, bad UTF-8, a submessage emptied or
//!   nested deeper) and byte-wise (flips, truncation, insertion, deletion). The property:
//!   the fast reader declines (`None`) or yields exactly the records prost's decoding gives,
//!   and never accepts what prost rejects.
//! - The strict JSON parser (`aep_schemas::json::from_slice_strict` / `from_str_strict`)
//!   against serde_json, on the recorded hook payloads of the repository mutated as text
//!   (a byte flipped, cut, repeated; a key repeated; escapes, lone surrogates, numbers at
//!   the edges, deep nesting, foreign whitespace). The oracle is serde_json's own parse into
//!   members kept in order: accepted iff serde_json accepts and no object repeats a key,
//!   and then the same value. Every accepted value is also written back by the hand-written
//!   writer (`write_value`, `write_canonical`) and compared with serde_json's output.
//!
//! Each case runs under `catch_unwind`: a panic is counted, not fatal. Deterministic from
//! the seed; the report names the first failing cases (their bytes in hex) to replay.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

use aep_receivers::otlp::{fast, into_otel_records};
use bytes::Bytes;
use clap::Args;
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList, any_value,
};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;
use prost::Message as _;
use serde_json::Value;

use super::line;

/// Arguments of `aep-bench decoders`.
#[derive(Debug, Clone, Args)]
pub struct DecodersArgs {
    /// Cases per decoder.
    #[arg(long, default_value_t = 1_000_000)]
    pub cases: u64,
    /// The generator's seed (the same seed replays the same cases).
    #[arg(long, default_value_t = 0x5eed_a3b1_d9e5_0044)]
    pub seed: u64,
    /// Only this decoder: `otlp` or `json`.
    #[arg(long)]
    pub only: Option<String>,
}

/// What a campaign found.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    /// Cases run.
    pub cases: u64,
    /// Cases the decoder under test accepted (and agreed on).
    pub accepted: u64,
    /// Cases it refused or declined where the reference accepted.
    pub declined_valid: u64,
    /// Cases both refused.
    pub both_refused: u64,
    /// Of those, JSON refused for a repeated key only (serde_json alone accepts it).
    pub repeated_keys: u64,
    /// Cases where the decoder and its reference disagreed.
    pub disagreements: u64,
    /// Cases that panicked.
    pub panics: u64,
    /// The first failures: what, and the case's bytes in hex.
    pub failures: Vec<String>,
}

impl Tally {
    fn fail(&mut self, what: String, case: &[u8]) {
        if self.failures.len() < 5 {
            let hex: String = case.iter().take(4096).map(|b| format!("{b:02x}")).collect();
            self.failures.push(format!("{what}\n    case ({} bytes): {hex}", case.len()));
        }
    }
}

/// xorshift64*: small, seeded, good enough to spread cases.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value; zero is replaced).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

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

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

/// Runs the bench.
pub fn run(a: &DecodersArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.cases > 0, "--cases must be at least 1");
    let which = a.only.as_deref();
    anyhow::ensure!(matches!(which, None | Some("otlp") | Some("json")), "--only takes otlp or json");
    println!("bench decoders: {} cases per decoder, seed {:#x}", a.cases, a.seed);
    let mut bad = 0;
    if which != Some("json") {
        let t0 = std::time::Instant::now();
        let t = quiet_panics(|| otlp_campaign(a.cases, a.seed));
        report("otlp fast reader vs prost", &t, t0.elapsed(), "read by the fast path", "declined (prost accepts)");
        bad += t.disagreements + t.panics;
    }
    if which != Some("otlp") {
        let seeds = json_seeds(&repo_root());
        anyhow::ensure!(!seeds.is_empty(), "no recorded hook payloads found under {}", repo_root().display());
        let t0 = std::time::Instant::now();
        let t = quiet_panics(|| json_campaign(a.cases, a.seed, &seeds));
        line("json seeds", &format!("{} payloads", seeds.len()), "adapters/tests/data, bridge/tests/data");
        report("strict JSON parser vs serde_json", &t, t0.elapsed(), "accepted (same value, same writing)", "");
        line("of those refused: a repeated key", &t.repeated_keys.to_string(), "serde_json alone keeps the last");
        bad += t.disagreements + t.panics;
    }
    anyhow::ensure!(bad == 0, "{bad} disagreement(s) or panic(s): see the cases above");
    Ok(())
}

fn report(name: &str, t: &Tally, took: std::time::Duration, accepted: &str, declined: &str) {
    println!("  {name}:");
    line("cases", &t.cases.to_string(), &format!("in {:.1} s", took.as_secs_f64()));
    line(accepted, &t.accepted.to_string(), "");
    if !declined.is_empty() {
        line(declined, &t.declined_valid.to_string(), "");
    }
    line("refused by both", &t.both_refused.to_string(), "");
    line("disagreements", &t.disagreements.to_string(), super::verdict(t.disagreements == 0));
    line("panics", &t.panics.to_string(), super::verdict(t.panics == 0));
    for f in &t.failures {
        println!("    FAIL {f}");
    }
}

/// Runs `f` with panics counted by the campaigns instead of printed (the hook is restored).
fn quiet_panics<T>(f: impl FnOnce() -> T) -> T {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let out = f();
    std::panic::set_hook(hook);
    out
}

/// The repository root (the bench runs from its checkout).
pub fn repo_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

// ------------------------------------------------------------------ OTLP

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
    "gen_ai.request.model",
    "",
    "ключ",
    "k\u{0}",
    "prompt_id",
    "response_id",
];

fn string(r: &mut Rng) -> String {
    match r.below(9) {
        0 => String::new(),
        1 => "codex.sse_event".into(),
        2 => "é✓\u{1F600}".repeat(r.below(4) as usize + 1),
        3 => "x".repeat(r.below(300) as usize),
        4 => format!("{}", r.next()),
        5 => "a prompt é✓\u{1F600} ".repeat(r.below(40) as usize + 4),
        6 => "\u{7f}\u{80}\u{10ffff}".into(),
        7 => KEYS[r.below(KEYS.len() as u64) as usize].into(),
        _ => "true".into(),
    }
}

fn any(r: &mut Rng, depth: usize) -> AnyValue {
    let leaf = depth >= 4 || r.chance(40);
    let v = match r.below(if leaf { 6 } else { 8 }) {
        0 => any_value::Value::StringValue(string(r)),
        1 => any_value::Value::BoolValue(r.chance(50)),
        2 => any_value::Value::IntValue(match r.below(4) {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => -(r.below(1000) as i64),
            _ => r.next() as i64,
        }),
        3 => any_value::Value::DoubleValue(match r.below(6) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => -0.0,
            3 => f64::MIN_POSITIVE / 2.0,
            4 => 1e300,
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
            key_strindex: if r.chance(1) { r.below(4) as i32 } else { 0 },
        })
        .collect()
}

fn id(r: &mut Rng, len: usize) -> Vec<u8> {
    match r.below(40) {
        0..=3 => Vec::new(),
        4 => vec![0; len],
        5 => (0..r.below(20)).map(|_| r.next() as u8).collect(),
        _ => (0..len).map(|_| r.next() as u8).collect(),
    }
}

fn record(r: &mut Rng) -> LogRecord {
    LogRecord {
        time_unix_nano: if r.chance(50) { 0 } else { r.next() },
        observed_time_unix_nano: r.next(),
        severity_number: if r.chance(5) { r.next() as i32 } else { r.below(25) as i32 },
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

/// A random logs export of the shapes agents send, and some they do not.
pub fn export(r: &mut Rng) -> ExportLogsServiceRequest {
    ExportLogsServiceRequest {
        resource_logs: (0..r.below(3) + 1)
            .map(|_| ResourceLogs {
                resource: r.chance(90).then(|| Resource {
                    attributes: kvs(r, 0, 6),
                    dropped_attributes_count: r.below(2) as u32,
                    ..Default::default()
                }),
                scope_logs: (0..r.below(3) + 1)
                    .map(|_| ScopeLogs {
                        scope: r.chance(70).then(|| InstrumentationScope {
                            name: string(r),
                            version: string(r),
                            attributes: kvs(r, 0, 3),
                            dropped_attributes_count: r.below(2) as u32,
                        }),
                        log_records: (0..r.below(6)).map(|_| record(r)).collect(),
                        schema_url: if r.chance(20) {
                            "https://opentelemetry.io/schemas/1.0".into()
                        } else {
                            String::new()
                        },
                    })
                    .collect(),
                schema_url: if r.chance(10) { "s".into() } else { String::new() },
            })
            .collect(),
    }
}

/// What the children of a message's length-delimited fields are, by field number (the
/// logs export's schema, as far as the fast reader reads it).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Export,
    ResourceLogs,
    Resource,
    ScopeLogs,
    Scope,
    Record,
    KeyValue,
    AnyValue,
    Array,
    KvList,
    Opaque,
}

impl Kind {
    fn child(self, field: u64) -> Kind {
        use Kind::*;
        match (self, field) {
            (Export, 1) => ResourceLogs,
            (ResourceLogs, 1) => Resource,
            (ResourceLogs, 2) => ScopeLogs,
            (Resource, 1) | (Scope, 3) | (Record, 6) | (KvList, 1) => KeyValue,
            (ScopeLogs, 1) => Scope,
            (ScopeLogs, 2) => Record,
            (Record, 5) | (KeyValue, 2) | (Array, 1) => AnyValue,
            (AnyValue, 5) => Array,
            (AnyValue, 6) => KvList,
            _ => Opaque,
        }
    }
}

/// One field on the wire.
#[derive(Clone, Debug)]
struct Field {
    number: u64,
    wire: Wire,
}

#[derive(Clone, Debug)]
enum Wire {
    Varint(u64),
    I64([u8; 8]),
    I32([u8; 4]),
    /// A submessage, parsed.
    Msg(Kind, Vec<Field>),
    /// Bytes or a string.
    Raw(Vec<u8>),
}

fn read_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..10 {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// Parses a well-formed message (prost's own encoding) into fields.
fn parse(kind: Kind, b: &[u8]) -> Option<Vec<Field>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < b.len() {
        let key = read_varint(b, &mut at)?;
        let (number, wt) = (key >> 3, key & 7);
        let wire = match wt {
            0 => Wire::Varint(read_varint(b, &mut at)?),
            1 => {
                let w = b.get(at..at + 8)?.try_into().ok()?;
                at += 8;
                Wire::I64(w)
            }
            5 => {
                let w = b.get(at..at + 4)?.try_into().ok()?;
                at += 4;
                Wire::I32(w)
            }
            2 => {
                let n = usize::try_from(read_varint(b, &mut at)?).ok()?;
                let inner = b.get(at..at + n)?;
                at += n;
                match kind.child(number) {
                    Kind::Opaque => Wire::Raw(inner.to_vec()),
                    k => Wire::Msg(k, parse(k, inner)?),
                }
            }
            _ => return None,
        };
        out.push(Field { number, wire });
    }
    Some(out)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn encode(fields: &[Field], out: &mut Vec<u8>) {
    for f in fields {
        let wt = match f.wire {
            Wire::Varint(_) => 0,
            Wire::I64(_) => 1,
            Wire::I32(_) => 5,
            Wire::Msg(..) | Wire::Raw(_) => 2,
        };
        put_varint(out, (f.number << 3) | wt);
        match &f.wire {
            Wire::Varint(v) => put_varint(out, *v),
            Wire::I64(b) => out.extend_from_slice(b),
            Wire::I32(b) => out.extend_from_slice(b),
            Wire::Msg(_, inner) => {
                let mut b = Vec::new();
                encode(inner, &mut b);
                put_varint(out, b.len() as u64);
                out.extend_from_slice(&b);
            }
            Wire::Raw(b) => {
                put_varint(out, b.len() as u64);
                out.extend_from_slice(b);
            }
        }
    }
}

/// Every message of the tree, as (its kind, a path of field indexes to it).
fn messages(fields: &[Field], kind: Kind, path: &mut Vec<usize>, out: &mut Vec<(Kind, Vec<usize>)>) {
    out.push((kind, path.clone()));
    for (i, f) in fields.iter().enumerate() {
        if let Wire::Msg(k, inner) = &f.wire {
            path.push(i);
            messages(inner, *k, path, out);
            path.pop();
        }
    }
}

fn at_path<'a>(fields: &'a mut Vec<Field>, path: &[usize]) -> Option<&'a mut Vec<Field>> {
    match path.split_first() {
        None => Some(fields),
        Some((&i, rest)) => match &mut fields.get_mut(i)?.wire {
            Wire::Msg(_, inner) => at_path(inner, rest),
            _ => None,
        },
    }
}

/// One structure-aware mutation of a parsed export.
fn mutate_tree(r: &mut Rng, tree: &mut Vec<Field>) {
    let mut all = Vec::new();
    messages(tree, Kind::Export, &mut Vec::new(), &mut all);
    let (kind, path) = r.pick(&all).clone();
    let Some(fields) = at_path(tree, &path) else { return };
    let n = fields.len();
    match r.below(12) {
        // A field repeated (a singular one: prost's last-wins or merge; a repeated one: one more).
        0 if n > 0 => {
            let f = fields[r.below(n as u64) as usize].clone();
            let at = r.below(n as u64 + 1) as usize;
            fields.insert(at, f);
        }
        // A field dropped.
        1 if n > 0 => {
            fields.remove(r.below(n as u64) as usize);
        }
        // Two fields swapped (the wire order of fields is free).
        2 if n > 1 => {
            let (a, b) = (r.below(n as u64) as usize, r.below(n as u64) as usize);
            fields.swap(a, b);
        }
        // An unknown field (prost skips it; the fast reader must decline).
        3 => {
            let number = *r.pick(&[13u64, 15, 99, 1000, 536_870_911]);
            let wire = match r.below(4) {
                0 => Wire::Varint(r.next()),
                1 => Wire::I64([7; 8]),
                2 => Wire::I32([7; 4]),
                _ => Wire::Raw(b"unknown".to_vec()),
            };
            let at = r.below(n as u64 + 1) as usize;
            fields.insert(at, Field { number, wire });
        }
        // A known field with another wire type.
        4 if n > 0 => {
            let i = r.below(n as u64) as usize;
            fields[i].wire = match fields[i].wire {
                Wire::Varint(v) => Wire::I64(v.to_le_bytes()),
                Wire::I64(_) | Wire::I32(_) => Wire::Raw(vec![1, 2, 3]),
                _ => Wire::Varint(r.below(300)),
            };
        }
        // A string made invalid UTF-8, or a lone surrogate's encoding.
        5 => {
            for f in fields.iter_mut() {
                if let Wire::Raw(b) = &mut f.wire
                    && !b.is_empty()
                {
                    let at = r.below(b.len() as u64) as usize;
                    b[at] = *r.pick(&[0xff, 0xc0, 0x80, 0xed]);
                    break;
                }
            }
        }
        // An id of another size.
        6 if kind == Kind::Record => {
            let number = *r.pick(&[9u64, 10]);
            let len = r.below(33) as usize;
            fields.push(Field { number, wire: Wire::Raw((0..len).map(|_| r.next() as u8).collect()) });
        }
        // A submessage emptied.
        7 if n > 0 => {
            let i = r.below(n as u64) as usize;
            if let Wire::Msg(_, inner) = &mut fields[i].wire {
                inner.clear();
            }
        }
        // A value nested deeper: around the fast reader's depth limit and beyond.
        8 if kind == Kind::AnyValue => {
            let levels = r.below(fast::MAX_DEPTH as u64 + 8);
            let mut v = std::mem::take(fields);
            for _ in 0..levels {
                v = vec![Field {
                    number: 5,
                    wire: Wire::Msg(Kind::Array, vec![Field { number: 1, wire: Wire::Msg(Kind::AnyValue, v) }]),
                }];
            }
            *fields = v;
        }
        // A oneof member set twice, of two kinds.
        9 if kind == Kind::AnyValue => {
            fields.push(Field { number: *r.pick(&[1u64, 2, 3, 4, 7]), wire: Wire::Varint(1) });
        }
        // A varint at its edges.
        10 => {
            for f in fields.iter_mut() {
                if let Wire::Varint(v) = &mut f.wire {
                    *v = *r.pick(&[0, 1, 127, 128, u64::from(u32::MAX), u64::MAX, 1 << 63]);
                    break;
                }
            }
        }
        _ => {
            // A new record or attribute, generated.
            match kind {
                Kind::ScopeLogs => fields.push(Field {
                    number: 2,
                    wire: Wire::Msg(Kind::Record, parse(Kind::Record, &record(r).encode_to_vec()).unwrap_or_default()),
                }),
                Kind::Record | Kind::Resource => {
                    let kv = KeyValue { key: string(r), value: Some(any(r, 0)), key_strindex: 0 };
                    let number = if kind == Kind::Record { 6 } else { 1 };
                    fields.push(Field {
                        number,
                        wire: Wire::Msg(Kind::KeyValue, parse(Kind::KeyValue, &kv.encode_to_vec()).unwrap_or_default()),
                    });
                }
                _ => {}
            }
        }
    }
}

/// One byte-level mutation.
fn mutate_bytes(r: &mut Rng, body: &mut Vec<u8>) {
    if body.is_empty() {
        body.push(r.next() as u8);
        return;
    }
    let at = r.below(body.len() as u64) as usize;
    match r.below(7) {
        0 => body[at] ^= 1 << r.below(8),
        1 => body[at] = r.next() as u8,
        2 => body.truncate(at),
        3 => body.insert(at, r.next() as u8),
        4 => {
            let n = r.below(8) as usize;
            let end = (at + n).min(body.len());
            body.drain(at..end);
        }
        5 => {
            // A span repeated.
            let end = (at + r.below(16) as usize).min(body.len());
            let span = body[at..end].to_vec();
            body.splice(at..at, span);
        }
        _ => body[at] = *r.pick(&[0x00, 0x7f, 0x80, 0xff, 0x0a, 0x12]),
    }
}

/// One OTLP case: a fresh export, possibly mutated.
pub fn otlp_case(r: &mut Rng) -> Vec<u8> {
    let msg = export(r);
    let body = msg.encode_to_vec();
    match r.below(10) {
        // As prost encodes it.
        0..=2 => body,
        // Structure-aware mutations, re-encoded (some with overlong varints).
        3..=6 => {
            let Some(mut tree) = parse(Kind::Export, &body) else { return body };
            for _ in 0..=r.below(3) {
                mutate_tree(r, &mut tree);
            }
            let mut out = Vec::new();
            encode(&tree, &mut out);
            if r.chance(10) && out.first() == Some(&0x0a) {
                // The first key's varint made overlong (prost reads up to ten bytes).
                out.splice(0..1, [0x8a, 0x00]);
            }
            out
        }
        // Byte-level mutations.
        _ => {
            let mut b = body;
            for _ in 0..=r.below(3) {
                mutate_bytes(r, &mut b);
            }
            b
        }
    }
}

/// The property on one body: the fast reader declines or agrees with prost exactly.
fn otlp_check(body: &[u8], t: &mut Tally) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let fast = fast::log_records(Bytes::copy_from_slice(body));
        let prost = ExportLogsServiceRequest::decode(body).map(into_otel_records);
        match (fast, prost) {
            (None, Ok(_)) => Ok(Seen::Declined),
            (None, Err(_)) => Ok(Seen::BothRefused),
            (Some(f), Ok(p)) if f == p => Ok(Seen::Agreed),
            (Some(f), Ok(p)) => Err(format!("the fast reader and prost disagree\n    fast:  {f:?}\n    prost: {p:?}")),
            (Some(f), Err(e)) => Err(format!("the fast reader accepted what prost rejects ({e}): {f:?}")),
        }
    }));
    tally(t, outcome, body);
}

enum Seen {
    Agreed,
    Declined,
    BothRefused,
    RepeatedKey,
}

fn tally(t: &mut Tally, outcome: std::thread::Result<Result<Seen, String>>, case: &[u8]) {
    t.cases += 1;
    match outcome {
        Ok(Ok(Seen::Agreed)) => t.accepted += 1,
        Ok(Ok(Seen::Declined)) => t.declined_valid += 1,
        Ok(Ok(Seen::BothRefused)) => t.both_refused += 1,
        Ok(Ok(Seen::RepeatedKey)) => {
            t.both_refused += 1;
            t.repeated_keys += 1;
        }
        Ok(Err(why)) => {
            t.disagreements += 1;
            t.fail(why, case);
        }
        Err(p) => {
            t.panics += 1;
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()));
            t.fail(format!("panicked: {}", msg.unwrap_or_default()), case);
        }
    }
}

/// `cases` OTLP cases from `seed`.
pub fn otlp_campaign(cases: u64, seed: u64) -> Tally {
    let mut r = Rng::new(seed);
    let mut t = Tally::default();
    for _ in 0..cases {
        let body = otlp_case(&mut r);
        otlp_check(&body, &mut t);
    }
    t
}

// ------------------------------------------------------------------ JSON

/// The recorded hook payloads of the repository (each `payload` of the capture lines, and
/// the JSON files), as compact text.
pub fn json_seeds(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for dir in ["adapters/tests/data", "bridge/tests/data"] {
        collect(&root.join(dir), &mut files);
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        let name = f.to_string_lossy();
        if name.ends_with(".json") {
            if serde_json::from_str::<Value>(&text).is_ok() {
                out.push(text);
            }
            continue;
        }
        for l in text.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(v) = serde_json::from_str::<Value>(l) else { continue };
            match v.get("payload") {
                Some(p) if p.is_object() => out.push(p.to_string()),
                _ if v.is_object() => out.push(l.to_owned()),
                _ => {}
            }
        }
    }
    out
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect(&p, out);
        } else if p.extension().is_some_and(|x| x == "jsonl" || x == "json") {
            out.push(p);
        }
    }
}

/// Text fragments a mutation inserts: JSON's edges.
const FRAGMENTS: &[&str] = &[
    "\"",
    "\\",
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"a\":1,",
    "\\u0000",
    "\\ud800",
    "\\udc00",
    "\\ud83d\\ude00",
    "\\u00e9",
    "\\x",
    "\\",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "-0.0",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "-9223372036854775809",
    "0.1e1",
    "01",
    "1.",
    ".5",
    "+1",
    "NaN",
    "Infinity",
    "true",
    "tru",
    "null",
    "nul",
    "\u{a0}",
    "\u{feff}",
    "\t",
    "\r\n",
    "\u{2028}",
    "é",
    "\u{10ffff}",
    "\u{0}",
    "\u{1f}",
    "//",
    "/*x*/",
    "'",
    "\"\"",
    "{}",
    "[]",
    "1e+",
    "2.5E-3",
    "123456789012345678901234567890",
];

/// One text mutation of a payload.
fn mutate_json(r: &mut Rng, text: &mut Vec<u8>) {
    if text.is_empty() {
        text.extend_from_slice(r.pick(FRAGMENTS).as_bytes());
        return;
    }
    let at = r.below(text.len() as u64) as usize;
    match r.below(10) {
        0 => text[at] ^= 1 << r.below(8),
        1 => text.truncate(at),
        2 => {
            let f = r.pick(FRAGMENTS).as_bytes().to_vec();
            text.splice(at..at, f);
        }
        3 => {
            let n = r.below(8) as usize;
            let end = (at + n).min(text.len());
            text.drain(at..end);
        }
        4 => {
            // A key repeated: the first member of an object copied in front of it.
            let opens: Vec<usize> = text.iter().enumerate().filter(|(_, c)| **c == b'{').map(|(i, _)| i).collect();
            if opens.is_empty() {
                return;
            }
            let o = *r.pick(&opens);
            if let Some(member) = first_member(&text[o + 1..]) {
                let mut dup = member.to_vec();
                dup.push(b',');
                text.splice(o + 1..o + 1, dup);
            }
        }
        5 => {
            // Nested deeper, around serde_json's recursion limit (128).
            let depth = r.below(140) as usize;
            let (open, close) = if r.chance(50) { ("[", "]") } else { ("{\"k\":", "}") };
            let mut v = open.repeat(depth).into_bytes();
            v.extend_from_slice(text);
            v.extend_from_slice(close.repeat(depth).as_bytes());
            *text = v;
        }
        6 => {
            // Whitespace around the document, some of it not JSON's.
            let w = r.pick(&[" ", "\n", "\t", "\u{a0}", "\u{feff}", "\u{0}", "x"]).as_bytes().to_vec();
            if r.chance(50) {
                text.splice(0..0, w);
            } else {
                text.extend_from_slice(&w);
            }
        }
        7 => {
            // A number replaced by one at the edges.
            if let Some(start) = (at..text.len()).find(|&i| text[i].is_ascii_digit()) {
                let end = (start..text.len())
                    .find(|&i| !matches!(text[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'-' | b'+'))
                    .unwrap_or(text.len());
                let f = r.pick(&FRAGMENTS[16..28]).as_bytes().to_vec();
                text.splice(start..end, f);
            }
        }
        8 => {
            // A string's content replaced by escapes.
            if let Some(q) = (at..text.len()).find(|&i| text[i] == b'"') {
                let f = r.pick(&FRAGMENTS[9..16]).as_bytes().to_vec();
                text.splice(q + 1..q + 1, f);
            }
        }
        _ => text[at] = *r.pick(&[b'"', b'\\', b',', b':', 0xff, 0xc3, 0x80, b' ']),
    }
}

/// The bytes of the first `"key": value` of an object's body (a cheap scan: strings and
/// nesting are followed, the rest is taken as is).
fn first_member(b: &[u8]) -> Option<&[u8]> {
    let mut i = 0;
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let start = i;
    let (mut depth, mut in_str, mut esc) = (0i32, false, false);
    while i < b.len() {
        let c = b[i];
        if in_str {
            match (esc, c) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
        } else {
            match c {
                b'"' => in_str = true,
                b'{' | b'[' => depth += 1,
                b'}' | b']' if depth == 0 => return Some(&b[start..i]),
                b'}' | b']' => depth -= 1,
                b',' if depth == 0 => return Some(&b[start..i]),
                _ => {}
            }
        }
        i += 1;
    }
    None
}

/// JSON with every object's members kept, repeats included: the oracle's parse, with
/// serde_json's parser and the simplest visitor.
enum Members {
    Leaf(Value),
    Array(Vec<Members>),
    Object(Vec<(String, Members)>),
}

impl<'de> serde::Deserialize<'de> for Members {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MembersVisitor)
    }
}

struct MembersVisitor;

impl<'de> serde::de::Visitor<'de> for MembersVisitor {
    type Value = Members;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Members, E> {
        Ok(Members::Leaf(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Members, E> {
        Ok(Members::Leaf(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Members, E> {
        Ok(Members::Leaf(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Members, E> {
        // What serde_json's own Value visitor does with a float.
        Ok(Members::Leaf(Value::from(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Members, E> {
        Ok(Members::Leaf(Value::String(v.to_owned())))
    }
    fn visit_unit<E>(self) -> Result<Members, E> {
        Ok(Members::Leaf(Value::Null))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Members, A::Error> {
        let mut out = Vec::new();
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Members::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
        let mut out = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Members>()? {
            out.push((k, v));
        }
        Ok(Members::Object(out))
    }
}

/// The oracle's value: `None` when an object repeats a key.
fn unique(m: Members) -> Option<Value> {
    Some(match m {
        Members::Leaf(v) => v,
        Members::Array(a) => Value::Array(a.into_iter().map(unique).collect::<Option<_>>()?),
        Members::Object(o) => {
            let mut map = serde_json::Map::new();
            for (k, v) in o {
                if map.contains_key(&k) {
                    return None;
                }
                map.insert(k, unique(v)?);
            }
            Value::Object(map)
        }
    })
}

/// Keys sorted by code point at every depth (the reference for `write_canonical`).
fn sorted(v: &Value) -> Value {
    match v {
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
        }
        other => other.clone(),
    }
}

/// The property on one text.
fn json_check(text: &[u8], t: &mut Tally) {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let oracle = serde_json::from_slice::<Members>(text).ok().map(unique);
        let ours = aep_schemas::json::from_slice_strict(text).ok();
        let same_str = match std::str::from_utf8(text) {
            Ok(s) => aep_schemas::json::from_str_strict(s).ok() == ours,
            Err(_) => true,
        };
        if !same_str {
            return Err("from_str_strict and from_slice_strict disagree".to_owned());
        }
        match (oracle, ours) {
            (Some(Some(want)), Some(got)) if want == got => {
                let mut w = Vec::new();
                aep_schemas::json::write_value(&mut w, &got);
                let reference = serde_json::to_vec(&got).unwrap_or_default();
                if w != reference {
                    return Err(format!(
                        "write_value differs from serde_json\n    ours:  {}\n    serde: {}",
                        String::from_utf8_lossy(&w),
                        String::from_utf8_lossy(&reference)
                    ));
                }
                let mut c = Vec::new();
                aep_schemas::json::write_canonical(&mut c, &got);
                if c != serde_json::to_vec(&sorted(&got)).unwrap_or_default() {
                    return Err(format!(
                        "write_canonical is not the sorted compact form: {}",
                        String::from_utf8_lossy(&c)
                    ));
                }
                Ok(Seen::Agreed)
            }
            (Some(Some(want)), Some(got)) => Err(format!("values differ\n    ours:  {got}\n    serde: {want}")),
            // The strict parser is authoritative (no fallback): refusing valid JSON is a bug.
            (Some(Some(want)), None) => Err(format!("refused what serde_json accepts without a repeated key: {want}")),
            (Some(None), None) => Ok(Seen::RepeatedKey),
            (None, None) => Ok(Seen::BothRefused),
            (Some(None), Some(v)) => Err(format!("accepted an object with a repeated key: {v}")),
            (None, Some(v)) => Err(format!("accepted what serde_json rejects: {v}")),
        }
    }));
    tally(t, outcome, text);
}

/// `cases` JSON cases from `seed`, each a recorded payload mutated zero to four times.
pub fn json_campaign(cases: u64, seed: u64, seeds: &[String]) -> Tally {
    let mut r = Rng::new(seed);
    let mut t = Tally::default();
    if seeds.is_empty() {
        return t;
    }
    for _ in 0..cases {
        let seed = r.pick(seeds);
        let mut text = if r.chance(10) {
            serde_json::from_str::<Value>(seed)
                .ok()
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
                .unwrap_or_default()
        } else {
            seed.clone()
        }
        .into_bytes();
        for _ in 0..r.below(5) {
            mutate_json(&mut r, &mut text);
        }
        json_check(&text, &mut t);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The campaign at a budget for `cargo test` (the bench runs a million of each).
    #[test]
    fn the_fast_otlp_reader_agrees_with_prost_on_generated_and_mutated_exports() {
        let t = quiet_panics(|| otlp_campaign(5_000, 0x0bad_c0de_0044_0001));
        assert_eq!((t.disagreements, t.panics), (0, 0), "{:#?}", t.failures);
        // The fast path is exercised, and so are declines and refusals.
        assert!(t.accepted > 500 && t.declined_valid > 250 && t.both_refused > 250, "{t:?}");
    }

    #[test]
    fn the_strict_json_parser_agrees_with_serde_json_on_mutated_hook_payloads() {
        let seeds = json_seeds(&repo_root());
        assert!(seeds.len() > 50, "{} recorded payloads", seeds.len());
        let t = quiet_panics(|| json_campaign(5_000, 0x0bad_c0de_0044_0002, &seeds));
        assert_eq!((t.disagreements, t.panics), (0, 0), "{:#?}", t.failures);
        assert!(t.accepted > 500 && t.both_refused > 500 && t.repeated_keys > 25, "{t:?}");
    }

    /// The oracle itself: it refuses a repeated key that serde_json alone would accept.
    #[test]
    fn the_json_oracle_sees_repeated_keys() {
        let parse = |s: &str| serde_json::from_str::<Members>(s).ok().map(unique);
        assert!(matches!(parse(r#"{"a":1,"b":{"c":[1,{"d":2}]}}"#), Some(Some(_))));
        assert!(matches!(parse(r#"{"a":1,"b":{"c":[1,{"d":2,"d":3}]}}"#), Some(None)));
        assert!(parse("{").is_none());
        let mut t = Tally::default();
        json_check(br#"{"a":1,"a":2}"#, &mut t);
        assert_eq!((t.both_refused, t.disagreements), (1, 0));
    }

    /// The wire tree round-trips prost's encoding, so a structure-aware mutation changes
    /// only what it means to.
    #[test]
    fn the_wire_tree_round_trips() {
        let mut r = Rng::new(7);
        for _ in 0..200 {
            let body = export(&mut r).encode_to_vec();
            let tree = parse(Kind::Export, &body).expect("prost's encoding parses");
            let mut out = Vec::new();
            encode(&tree, &mut out);
            assert_eq!(out, body);
        }
    }
}
