//! Throughput of the OCSF projection (AEP-0005 §4), per Event: a mixed stream of the
//! three projected families plus out-of-scope Events, at the default and the `full`
//! ceiling (criterion reports events/s through `Throughput::Elements`).

#![allow(missing_docs)] // criterion_group! generates undocumented public items

use std::hint::black_box;

use aep_projections::ocsf::{OcsfOptions, to_ocsf};
use aep_schemas::{Capture, Event};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

/// 64 Events: session start, a tool pair, a denial, an attention request (above the
/// default ceiling), and an out-of-scope progress Event.
fn events() -> Vec<Event> {
    let src = "aep://host-a/agent/claude-code/session/s1";
    (0..64u64)
        .map(|i| {
            let v = match i % 6 {
                0 => json!({"aep":"0.1","id":format!("s{i}"),"type":"session.started","time":"2026-07-03T10:14:00.000Z",
                    "source":src,"agent":"claude-code","session":"s1","seq":i,"acmeregion":"eu-1",
                    "data":{"client":{"name":"claude-code","version":"2.1.0"},"gen_ai.request.model":"m"}}),
                1 => json!({"aep":"0.1","id":format!("q{i}"),"type":"tool.requested","subject":"Bash",
                    "time":"2026-07-03T10:15:03.000Z","source":src,"agent":"claude-code","session":"s1","run":"r1","seq":i,
                    "data":{"tool":{"name":"Bash","call_id":format!("t{i}")},"args_digest":"a3f9c2d1e8b7a6f5"}}),
                2 => json!({"aep":"0.1","id":format!("c{i}"),"type":"tool.completed","subject":"Bash",
                    "time":"2026-07-03T10:15:04.221Z","source":src,"agent":"claude-code","session":"s1","run":"r1","seq":i,
                    "cause":"q1","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                    "data":{"tool":{"name":"Bash","call_id":format!("t{i}")},"status":"success","duration_ms":1240}}),
                3 => json!({"aep":"0.1","id":format!("d{i}"),"type":"tool.denied","subject":"Bash","severity":"warning",
                    "time":"2026-07-03T10:15:12.500Z","source":src,"agent":"claude-code","session":"s1","seq":i,
                    "data":{"tool":{"name":"Bash","call_id":format!("t{i}")},"by":"policy","rule":"deny Bash(rm:*)"}}),
                4 => json!({"aep":"0.1","id":format!("a{i}"),"type":"attention.requested","subject":"Bash",
                    "severity":"notice","capture":"redacted","time":"2026-07-03T10:15:05.000Z","source":src,
                    "agent":"claude-code","session":"s1","seq":i,
                    "data":{"kind":"permission","prompt":"Permission requested: Bash","respond_via":["control"]}}),
                _ => json!({"aep":"0.1","id":format!("p{i}"),"type":"run.progress","time":"2026-07-03T10:15:06.000Z",
                    "source":src,"agent":"claude-code","session":"s1","seq":i,"data":{"message":"working"}}),
            };
            Event::from_value(v).expect("bench events are valid")
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let evs = events();
    let mut g = c.benchmark_group("ocsf");
    g.throughput(Throughput::Elements(evs.len() as u64));
    for (name, max_capture) in [("to_ocsf/metadata", Capture::Metadata), ("to_ocsf/full", Capture::Full)] {
        let opts = OcsfOptions { max_capture };
        g.bench_function(name, |b| {
            b.iter(|| {
                for ev in &evs {
                    black_box(to_ocsf(black_box(ev), &opts));
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
