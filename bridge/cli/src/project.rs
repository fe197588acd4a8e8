//! `aep-bridge project`: AEP JSONL in, a projection out on stdout (AEP-0005): CloudEvents,
//! OTLP logs or synthesized spans (OTLP/JSON), OCSF.

use std::io::Write as _;

use aep_projections::ce::{to_cloudevent, to_cloudevents_batch};
use aep_projections::ocsf::{OcsfOptions, to_ocsf};
use aep_projections::otlp::to_json;
use aep_projections::otlp_logs::{OtlpOptions, logs_request};
use aep_projections::spans::{SpanConfig, assemble, traces_request};
use aep_schemas::downlevel::downlevel;
use aep_schemas::{Capture, Event};
use clap::{Args, ValueEnum};
use serde_json::Value;

/// The target format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// Structured-mode CloudEvents, one JSON object per line (`--batch`: one JSON array).
    Ce,
    /// One OTLP/JSON `ExportLogsServiceRequest`.
    OtlpLogs,
    /// One OTLP/JSON `ExportTraceServiceRequest` of synthesized spans.
    OtlpSpans,
    /// OCSF records, one per line (Events with no OCSF class are skipped).
    Ocsf,
}

/// Arguments of `aep-bridge project`.
#[derive(Debug, Clone, Args)]
pub struct ProjectArgs {
    /// Target format.
    #[arg(value_enum)]
    pub target: Target,
    /// AEP JSONL input; `-` = stdin.
    #[arg(default_value = "-")]
    pub input: String,
    /// Capture ceiling of projected payloads (none, metadata, redacted, full).
    #[arg(long, default_value = "metadata", value_parser = parse_capture)]
    pub max_capture: Capture,
    /// `ce`: write one CloudEvents batch (a JSON array) instead of one event per line.
    #[arg(long)]
    pub batch: bool,
    /// `otlp-spans`: give every run its own trace, linked to the session span.
    #[arg(long)]
    pub trace_per_run: bool,
    /// Pretty-print single-document outputs (`otlp-logs`, `otlp-spans`, `ce --batch`).
    #[arg(long)]
    pub pretty: bool,
}

fn parse_capture(s: &str) -> Result<Capture, String> {
    s.parse::<Capture>().map_err(|e| e.to_string())
}

/// Reads AEP JSONL; bad lines are reported on stderr and counted. A last line still being
/// written (a live log) is not yet an event ([`aep_schemas::jsonl`]): left out, not counted.
fn read_events(input: &str) -> std::io::Result<(Vec<Event>, usize)> {
    let reader: Box<dyn std::io::BufRead> = if input == "-" {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(std::fs::File::open(input)?))
    };
    let mut events = Vec::new();
    let mut bad = 0;
    for (i, line) in aep_schemas::jsonl::LiveLines::new(reader).enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match Event::from_json(&line) {
            Ok(ev) => events.push(ev),
            Err(e) => {
                bad += 1;
                eprintln!("aep-bridge project: {input}:{}: not an AEP Event: {e}", i + 1);
            }
        }
    }
    Ok((events, bad))
}

/// The projection as text (without the final newline handling of JSONL targets).
pub fn project(args: &ProjectArgs, events: &[Event]) -> String {
    let doc = |v: &Value| {
        if args.pretty { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) }.unwrap_or_default()
    };
    let mut out = String::new();
    match args.target {
        Target::Ce => {
            // AEP-0001 §8.2: a re-emitter never passes content above its ceiling.
            let evs: Vec<Event> = events.iter().map(|e| downlevel(e, args.max_capture)).collect();
            if args.batch {
                out.push_str(&doc(&to_cloudevents_batch(&evs)));
                out.push('\n');
            } else {
                for e in &evs {
                    out.push_str(&serde_json::to_string(&to_cloudevent(e)).unwrap_or_default());
                    out.push('\n');
                }
            }
        }
        Target::OtlpLogs => {
            let opts = OtlpOptions { max_capture: args.max_capture, ..OtlpOptions::default() };
            out.push_str(&doc(&to_json(&logs_request(events, &opts))));
            out.push('\n');
        }
        Target::OtlpSpans => {
            let cfg = SpanConfig {
                trace_per_run: args.trace_per_run,
                max_capture: args.max_capture,
                ..SpanConfig::default()
            };
            let spans = assemble(events, cfg);
            out.push_str(&doc(&to_json(&traces_request(&spans))));
            out.push('\n');
        }
        Target::Ocsf => {
            let opts = OcsfOptions { max_capture: args.max_capture };
            for rec in events.iter().filter_map(|e| to_ocsf(e, &opts)) {
                out.push_str(&serde_json::to_string(&rec).unwrap_or_default());
                out.push('\n');
            }
        }
    }
    out
}

/// Runs the command; returns the exit code (1 when some input lines were not AEP Events).
pub fn run(args: ProjectArgs) -> i32 {
    let (events, bad) = match read_events(&args.input) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("aep-bridge project: {}: {e}", args.input);
            return 2;
        }
    };
    let text = project(&args, &events);
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush())
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("aep-bridge project: stdout: {e}");
        return 2;
    }
    i32::from(bad > 0)
}
