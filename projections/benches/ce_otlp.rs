//! Throughput of the CloudEvents bridge (forward and inverse) and the OTLP LogRecord
//! projection, per Event (criterion reports events/s through `Throughput::Elements`).

#![allow(missing_docs)] // `criterion_group!` generates an undocumented `pub fn`.

use std::hint::black_box;

use aep_projections::ce::{from_cloudevent, to_cloudevent};
use aep_projections::otlp_logs::{OtlpOptions, log_record, logs_request};
use aep_schemas::Event;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

/// A small mixed stream: a tool pair with `gen_ai.*` members and a traceparent, an
/// above-ceiling attention request, an agent-scoped presence Event.
fn events() -> Vec<Event> {
    let mut out = Vec::new();
    for i in 0..64u64 {
        let v = match i % 4 {
            0 => json!({"aep":"0.1","id":format!("req{i}"),"type":"tool.requested","subject":"Bash",
                "time":"2026-07-03T10:15:03.000Z","source":"aep://host-a/agent/claude-code/session/s1",
                "agent":"claude-code","session":"s1","run":"r1","step":"turn-3","seq":i,"epoch":0,
                "severity":"info","capture":"metadata",
                "data":{"tool":{"name":"Bash","call_id":format!("t{i}")},"args_digest":"a3f9c2d1e8b7a6f5"}}),
            1 => json!({"aep":"0.1","id":format!("done{i}"),"type":"tool.completed","subject":"Bash",
                "time":"2026-07-03T10:15:04.221Z","source":"aep://host-a/agent/claude-code/session/s1",
                "agent":"claude-code","session":"s1","run":"r1","step":"turn-3","seq":i,"epoch":0,
                "cause":format!("req{}", i - 1),"severity":"info","capture":"metadata",
                "traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","acmeregion":"eu-1",
                "data":{"tool":{"name":"Bash","call_id":format!("t{i}")},"status":"success","duration_ms":1240,
                    "gen_ai.usage.input_tokens":142,"gen_ai.usage.output_tokens":87}}),
            2 => json!({"aep":"0.1","id":format!("att{i}"),"type":"attention.requested","subject":"Bash",
                "time":"2026-07-03T10:15:05.000Z","source":"aep://host-a/agent/claude-code/session/s1",
                "agent":"claude-code","session":"s1","run":"r1","seq":i,"epoch":0,"severity":"notice",
                "capture":"redacted","data":{"kind":"permission","prompt":"Permission requested: Bash",
                    "options":[{"id":"allow","label":"Allow"},{"id":"deny","label":"Deny"}],"respond_via":["control"]}}),
            _ => json!({"aep":"0.1","id":format!("pr{i}"),"type":"agent.presence",
                "time":"2026-07-03T10:16:00.000Z","source":"aep://host-a/agent/codex","agent":"codex",
                "severity":"debug","capture":"metadata","data":{"state":"online"}}),
        };
        out.push(Event::from_value(v).expect("bench events are valid"));
    }
    out
}

fn bench(c: &mut Criterion) {
    let evs = events();
    let ces: Vec<_> = evs.iter().map(to_cloudevent).collect();
    let opts = OtlpOptions::default();
    let n = evs.len() as u64;

    let mut g = c.benchmark_group("projections");
    g.throughput(Throughput::Elements(n));
    g.bench_function("ce_forward", |b| {
        b.iter(|| {
            for e in &evs {
                black_box(to_cloudevent(black_box(e)));
            }
        })
    });
    g.bench_function("ce_inverse", |b| {
        b.iter(|| {
            for ce in &ces {
                black_box(from_cloudevent(black_box(ce)).ok());
            }
        })
    });
    g.bench_function("otlp_log_record", |b| {
        b.iter(|| {
            for e in &evs {
                black_box(log_record(black_box(e), &opts));
            }
        })
    });
    g.bench_function("otlp_logs_request_batch", |b| b.iter(|| black_box(logs_request(black_box(&evs), &opts))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
