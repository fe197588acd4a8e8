//! The ceiling gate's cost on real captured OTLP: every export of Claude Code's recorded
//! sessions kept in the project's test data (`bridge/tests/data`: the `s01` spans and logs
//! recorded with every content switch on, the `o` and `s16` protobuf log exports), as the
//! bridge forwards them. The baseline is the ungated forward (decode the protobuf body,
//! encode it again: what the tee does at `full`); the gated forward adds the copy and the
//! gate (`metadata`, `redacted`). After criterion's own figures, alternating rounds of the
//! baseline and each gated forward print the ratio measured in the same run.

#![allow(missing_docs)] // criterion_group! generates undocumented public items

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use aep_projections::capture_gate::CaptureGate;
use aep_schemas::Capture;
use aep_schemas::redact::RedactConfig;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../bridge/tests/data");

/// One captured export, as protobuf bytes.
enum Body {
    Logs(Vec<u8>),
    Traces(Vec<u8>),
}

impl Body {
    fn len(&self) -> usize {
        match self {
            Body::Logs(b) | Body::Traces(b) => b.len(),
        }
    }
}

/// Every Claude Code export of the test data, re-encoded as protobuf (the JSON ones decoded
/// the way the receivers decode OTLP/JSON).
fn bodies() -> Vec<Body> {
    let mut out = Vec::new();
    let mut files: Vec<_> = ["otlp-captures/claude-code", "otlp-mix/claude-code"]
        .iter()
        .flat_map(|d| std::fs::read_dir(Path::new(DATA).join(d)).expect("bridge/tests/data").flatten())
        .map(|e| e.path())
        .collect();
    files.sort();
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).unwrap();
        let json = name.ends_with(".json");
        if name.contains("_traces") {
            let req: ExportTraceServiceRequest =
                if json { serde_json::from_slice(&bytes).unwrap() } else { Message::decode(&bytes[..]).unwrap() };
            out.push(Body::Traces(req.encode_to_vec()));
        } else if name.contains("_logs") {
            let req: ExportLogsServiceRequest =
                if json { serde_json::from_slice(&bytes).unwrap() } else { Message::decode(&bytes[..]).unwrap() };
            out.push(Body::Logs(req.encode_to_vec()));
        }
    }
    out
}

/// The ungated forward: decode, encode.
fn forward(bodies: &[Body]) -> usize {
    bodies
        .iter()
        .map(|b| match b {
            Body::Logs(b) => ExportLogsServiceRequest::decode(&b[..]).unwrap().encode_to_vec().len(),
            Body::Traces(b) => ExportTraceServiceRequest::decode(&b[..]).unwrap().encode_to_vec().len(),
        })
        .sum()
}

/// The ungated forward with the gated one's copy: decode, copy, encode (what the gate
/// itself costs is the gated forward less this).
fn copied(bodies: &[Body]) -> usize {
    bodies
        .iter()
        .map(|b| match b {
            Body::Logs(b) => ExportLogsServiceRequest::decode(&b[..]).unwrap().clone().encode_to_vec().len(),
            Body::Traces(b) => ExportTraceServiceRequest::decode(&b[..]).unwrap().clone().encode_to_vec().len(),
        })
        .sum()
}

/// The gated forward: decode, copy (the tee gets a borrowed request), gate, encode.
fn gated(bodies: &[Body], gate: &CaptureGate) -> usize {
    bodies
        .iter()
        .map(|b| match b {
            Body::Logs(b) => {
                let req = ExportLogsServiceRequest::decode(&b[..]).unwrap();
                let mut copy = req.clone();
                gate.logs(&mut copy);
                copy.encode_to_vec().len()
            }
            Body::Traces(b) => {
                let req = ExportTraceServiceRequest::decode(&b[..]).unwrap();
                let mut copy = req.clone();
                gate.traces(&mut copy);
                copy.encode_to_vec().len()
            }
        })
        .sum()
}

fn redact() -> RedactConfig {
    RedactConfig { home: Some("/home/dev".into()), ..RedactConfig::default() }
}

fn bench(c: &mut Criterion) {
    let bodies = bodies();
    let bytes: usize = bodies.iter().map(Body::len).sum();
    let gates = [Capture::Metadata, Capture::Redacted].map(|c| (c, CaptureGate::new(c, redact())));
    let mut g = c.benchmark_group("capture_gate");
    g.throughput(Throughput::Bytes(bytes as u64));
    g.bench_function("ungated forward (decode, encode)", |b| b.iter(|| black_box(forward(black_box(&bodies)))));
    for (c, gate) in &gates {
        g.bench_function(format!("gated forward at {}", c.as_str()), |b| {
            b.iter(|| black_box(gated(black_box(&bodies), gate)))
        });
    }
    g.finish();

    // Same-run ratios: alternating rounds, the median of each.
    let (rounds, reps) = (15, 20);
    let time = |f: &dyn Fn() -> usize| {
        let t = Instant::now();
        for _ in 0..reps {
            black_box(f());
        }
        t.elapsed() / reps
    };
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (mut base, mut copy) = (Vec::new(), Vec::new());
    let mut each: Vec<Vec<Duration>> = vec![Vec::new(); gates.len()];
    for _ in 0..rounds {
        base.push(time(&|| forward(&bodies)));
        copy.push(time(&|| copied(&bodies)));
        for (i, (_, gate)) in gates.iter().enumerate() {
            each[i].push(time(&|| gated(&bodies, gate)));
        }
    }
    let (base, copy) = (median(base), median(copy));
    let out: usize = gates.iter().map(|(_, gate)| gated(&bodies, gate)).sum::<usize>() / gates.len();
    println!(
        "capture_gate: {} Claude Code exports, {bytes} bytes; ungated forward {:.1} us ({:.0} MB/s)",
        bodies.len(),
        base.as_secs_f64() * 1e6,
        bytes as f64 / base.as_secs_f64() / 1e6
    );
    println!(
        "capture_gate: the copy alone      {:.1} us, {:.2}x the ungated forward",
        copy.as_secs_f64() * 1e6,
        copy.as_secs_f64() / base.as_secs_f64()
    );
    for ((c, _), times) in gates.iter().zip(each) {
        let t = median(times);
        println!(
            "capture_gate: gated at {:<8} {:.1} us, {:.2}x the ungated forward (+{:.1} us per export); out {} bytes",
            c.as_str(),
            t.as_secs_f64() * 1e6,
            t.as_secs_f64() / base.as_secs_f64(),
            (t.as_secs_f64() - base.as_secs_f64()) * 1e6 / bodies.len() as f64,
            gated(&bodies, &CaptureGate::new(*c, redact())),
        );
    }
    black_box(out);
}

criterion_group!(benches, bench);
criterion_main!(benches);
