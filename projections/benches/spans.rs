//! Throughput of the span assembler (events/s through `push`, plus the final flush):
//! sessions of five runs with four tool calls each (requested, progress, completed),
//! one run with an attention request; fed one session after another, and interleaved
//! across 64 concurrent sessions with every pair delivered in reverse (out of order).

#![allow(missing_docs)] // criterion_group! generates undocumented public items

use std::hint::black_box;

use aep_projections::spans::{SpanAssembler, SpanConfig, traces_request};
use aep_schemas::Event;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

fn ts(ms: u64) -> String {
    format!("2026-07-03T10:{:02}:{:02}.{:03}Z", (ms / 60_000) % 60, (ms / 1000) % 60, ms % 1000)
}

/// The Events of one session, in emission order.
fn session(n: u64) -> Vec<Event> {
    let sid = format!("s{n}");
    let src = format!("aep://host-a/agent/claude-code/session/{sid}");
    let mut seq = 0u64;
    let mut out = Vec::new();
    let mut push = |ty: &str, run: Option<String>, subject: Option<&str>, data: Value, out: &mut Vec<Event>| {
        let mut v = json!({"aep":"0.1","id":format!("{sid}-{seq}"),"type":ty,"time":ts(seq * 100),
            "source":src,"agent":"claude-code","session":sid,"seq":seq,"data":data});
        if let Some(r) = run {
            v["run"] = r.into();
        }
        if let Some(s) = subject {
            v["subject"] = s.into();
        }
        seq += 1;
        out.push(Event::from_value(v).unwrap());
    };
    push("session.started", None, None, json!({"client":{"name":"claude-code"},"gen_ai.request.model":"m"}), &mut out);
    for r in 0..5 {
        let run = Some(format!("r{r}"));
        push("run.started", run.clone(), None, json!({"trigger":"user"}), &mut out);
        for t in 0..4 {
            let tool = json!({"name":"Bash","call_id":format!("t{r}-{t}")});
            push("tool.requested", run.clone(), Some("Bash"), json!({"tool":tool,"args_digest":"ab"}), &mut out);
            push("progress.status", run.clone(), None, json!({"phase":"exec","percent":50}), &mut out);
            push(
                "tool.completed",
                run.clone(),
                Some("Bash"),
                json!({"tool":tool,"duration_ms":90,"gen_ai.usage.input_tokens":10}),
                &mut out,
            );
        }
        if r == 2 {
            push("attention.requested", run.clone(), Some("Bash"), json!({"kind":"permission","prompt":"p"}), &mut out);
            let req = out.last().map(|e| e.id.clone()).unwrap_or_default();
            push("attention.answered", None, Some(&req), json!({"answer":{"option":"allow"}}), &mut out);
            push("attention.resolved", None, Some(&req), json!({"resolution":"answered"}), &mut out);
        }
        push("run.finished", run.clone(), None, json!({"gen_ai.usage.output_tokens":99}), &mut out);
    }
    push("session.ended", None, None, json!({"reason":"normal"}), &mut out);
    out
}

fn sequential(sessions: u64) -> Vec<Event> {
    (0..sessions).flat_map(session).collect()
}

/// Round-robin across 64 live sessions, each adjacent pair of a session swapped.
fn interleaved(sessions: u64) -> Vec<Event> {
    let mut streams: Vec<Vec<Event>> = (0..sessions).map(session).collect();
    for s in &mut streams {
        for pair in s[1..].chunks_mut(2) {
            pair.reverse();
        }
    }
    let mut out = Vec::new();
    for chunk in streams.chunks(64) {
        let longest = chunk.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            out.extend(chunk.iter().filter_map(|s| s.get(i).cloned()));
        }
    }
    out
}

fn feed(events: &[Event]) -> usize {
    let mut asm = SpanAssembler::new(SpanConfig::default());
    let mut spans = 0;
    for ev in events {
        spans += asm.push(ev).len();
    }
    spans + asm.flush_all().len()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("spans");
    for (name, events) in [("sequential", sequential(256)), ("interleaved_out_of_order", interleaved(256))] {
        g.throughput(Throughput::Elements(events.len() as u64));
        g.bench_function(name, |b| b.iter(|| black_box(feed(black_box(&events)))));
    }
    let spans = aep_projections::spans::assemble(&sequential(16), SpanConfig::default());
    g.throughput(Throughput::Elements(spans.len() as u64));
    g.bench_function("traces_request_json", |b| b.iter(|| black_box(traces_request(black_box(&spans)))));
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
