//! Per-event cost of the model: validation, hop down-leveling, the redaction pipeline,
//! and the three chained, reported as events/s (criterion `Throughput::Elements`).
//!
//! Run: `cargo bench -p aep-schemas --bench model`.

// criterion_group!/criterion_main! expand to undocumented items.
#![allow(missing_docs)]

use std::hint::black_box;

use aep_schemas::downlevel::downlevel;
use aep_schemas::redact::{RedactConfig, redact_value};
use aep_schemas::validate::{StreamValidator, validate_value};
use aep_schemas::{Capture, Event};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

/// A small mixed batch written for this bench: the shapes an adapter emits most.
fn batch() -> Vec<Value> {
    let env = |id: &str, ty: &str, seq: u64, capture: &str, data: Value| {
        json!({"aep":"0.1","id":id,"type":ty,"subject":"Bash","time":"2026-05-01T09:00:00.000Z",
            "source":"aep://bench/agent/coder/session/s1","agent":"coder","session":"s1","run":"r1",
            "seq":seq,"capture":capture,"data":data})
    };
    vec![
        env(
            "b1",
            "tool.requested",
            1,
            "metadata",
            json!({"tool":{"name":"Bash","call_id":"c1"},"args_digest":"00112233445566778899aabbccddeeff"}),
        ),
        env(
            "b2",
            "tool.completed",
            2,
            "full",
            json!({"tool":{"name":"Bash","call_id":"c1"},"status":"success","duration_ms":412,
            "result":"total 12\n-rw-r--r-- 1 dev dev 220 notes.txt","result_digest":"ffeeddccbbaa99887766554433221100",
            "gen_ai.usage.input_tokens":120,"gen_ai.usage.output_tokens":40,"cost":{"currency":"USD","total":0.0012}}),
        ),
        env(
            "b3",
            "tool.failed",
            3,
            "redacted",
            json!({"tool":{"name":"Bash","call_id":"c2"},
            "error":{"type":"ExitCode","message":"make: *** [build] Error 2 (see /home/dev/proj/log.txt, mail ops@example.org)"}}),
        ),
        env(
            "b4",
            "attention.requested",
            4,
            "redacted",
            json!({"kind":"form","prompt":"Choose the rollout",
            "fields":[{"id":"env","type":"select","label":"Environment","choices":[{"id":"1","label":"staging"},{"id":"2","label":"prod"}]},
                      {"id":"note","type":"string","label":"Note"},{"id":"pct","type":"number","label":"Percent","min":0,"max":100}],
            "respond_via":["control"]}),
        ),
        env(
            "b5",
            "attention.answered",
            5,
            "redacted",
            json!({"answer":{"values":{"env":"1","note":"after the standup","pct":25}},"via":"control"}),
        ),
        env(
            "b6",
            "resource.retrieval.returned",
            6,
            "full",
            json!({"documents":[
            {"id":"d1","score":0.9,"content":"token=abc123 in config","content_redacted":"token=[REDACTED:secret] in config","metadata":{"rank":1}},
            {"id":"d2","score":0.4,"metadata":{"rank":2}}],"count":2,"duration_ms":33}),
        ),
        env(
            "b7",
            "run.finished",
            7,
            "metadata",
            json!({"duration_ms":5000,"gen_ai.usage.input_tokens":900,"gen_ai.usage.output_tokens":300}),
        ),
        env(
            "b8",
            "progress.status",
            8,
            "redacted",
            json!({"message":"compiling 14 crates","phase":"build","percent":40}),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let values = batch();
    let events: Vec<Event> = values.iter().map(|v| validate_value(v).expect("bench events are valid")).collect();
    let cfg = RedactConfig { home: Some("/home/dev".into()), ..RedactConfig::default() };
    let n = values.len() as u64;

    let mut g = c.benchmark_group("model");
    g.throughput(Throughput::Elements(n));
    g.bench_function("validate", |b| {
        b.iter(|| {
            for v in &values {
                black_box(validate_value(black_box(v)).is_ok());
            }
        })
    });
    g.bench_function("stream", |b| {
        b.iter(|| {
            let mut sv = StreamValidator::new();
            for e in &events {
                black_box(sv.push(black_box(e)));
            }
            black_box(sv.finish())
        })
    });
    g.bench_function("downlevel_metadata", |b| {
        b.iter(|| {
            for e in &events {
                black_box(downlevel(black_box(e), Capture::Metadata));
            }
        })
    });
    g.bench_function("redact", |b| {
        b.iter(|| {
            for e in &events {
                if let Some(d) = &e.data {
                    black_box(redact_value(black_box(d), &cfg));
                }
            }
        })
    });
    g.bench_function("validate_downlevel_redact", |b| {
        b.iter(|| {
            for v in &values {
                if let Ok(e) = validate_value(black_box(v)) {
                    let mut d = downlevel(&e, Capture::Redacted);
                    if let Some(data) = &d.data {
                        d.data = Some(redact_value(data, &cfg));
                    }
                    black_box(d);
                }
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
