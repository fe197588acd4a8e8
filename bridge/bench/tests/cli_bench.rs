//! Smoke tests of `aep-bench ...`: each bench runs with a tiny load, completes, and
//! prints its report lines. Wall-clock figures are never asserted, only the counts the
//! benches check themselves (nothing lost between what was pushed and what arrived).

use std::process::Command;

fn bench(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_aep-bench"))
        .args(args)
        .env_remove("AEP_BRIDGE_CONFIG")
        .output()
        .expect("cannot run aep-bench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "bench {args:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The report line starting with `label` (after the indent).
fn report_line<'a>(report: &'a str, label: &str) -> &'a str {
    report.lines().find(|l| l.trim_start().starts_with(label)).unwrap_or_else(|| panic!("no {label:?} in:\n{report}"))
}

fn has_verdict(l: &str) -> bool {
    l.contains("PASS") || l.contains("MISS")
}

#[test]
fn pipeline_bench_writes_every_event_and_reports_rss() {
    let r = bench(&["pipeline", "--events", "3000", "--rate", "2000", "--secs", "0.5", "--sessions", "3"]);
    assert!(has_verdict(report_line(&r, "idle RSS")), "{r}");
    assert!(has_verdict(report_line(&r, "RSS while sustaining")), "{r}");
    assert!(has_verdict(report_line(&r, "max rate")), "{r}");
    report_line(&r, "peak RSS");
    report_line(&r, "baseline: pipeline without sinks");
    report_line(&r, "baseline: raw write()");
    // 1000 sustained + 3000 max-rate events, all on disk.
    let disk = report_line(&r, "JSONL lines on disk");
    assert!(disk.contains(" 4000 ") && disk.contains("dropped 0"), "{disk}");
}

#[test]
fn hook_bench_reaches_the_bridge_through_the_real_shim() {
    let r = bench(&["hook", "--n", "5", "--warmup", "1"]);
    report_line(&r, "aep-hook end to end");
    report_line(&r, "baseline: spawn");
    report_line(&r, "baseline: direct POST");
    assert!(has_verdict(report_line(&r, "budget p50")), "{r}");
    assert!(has_verdict(report_line(&r, "budget p99")), "{r}");
    let admitted = report_line(&r, "bridge admitted");
    let n: u64 = admitted.split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap_or(0);
    // Six shim calls and five direct POSTs, each mapped to at least one event.
    assert!(n >= 11, "{admitted}");
    assert!(admitted.contains("0 refused"), "{admitted}");
}

#[test]
fn collector_bench_delivers_every_event_to_every_subscriber() {
    let r = bench(&["collector", "--events", "600", "--batch", "100", "--subscribers", "2"]);
    assert!(has_verdict(report_line(&r, "ingest with 2 subscribers")), "{r}");
    report_line(&r, "baseline: ingest, no subscriber");
    report_line(&r, "baseline: parse+validate only");
    assert!(report_line(&r, "delivery delay").contains("p99"), "{r}");
    let delivered = report_line(&r, "delivered per subscriber");
    assert!(delivered.contains("600..600"), "{delivered}");
}

/// A small `bench otlp` run: two measured rounds of 50-record requests (the caller says
/// how many requests).
const SMALL_OTLP: &[&str] = &["otlp", "--mix", "synthetic", "--records", "50", "--warmup", "2", "--rounds", "2"];

#[test]
fn otlp_bench_maps_every_record_into_the_jsonl_log() {
    let r = bench(&[SMALL_OTLP, &["--batches", "4", "--rotel", "off"]].concat());
    assert!(has_verdict(report_line(&r, "serve idle RSS")), "{r}");
    report_line(&r, "bridge: records per CPU-second");
    // Two measured rounds of 4 x 50 records (the warm-up is not counted).
    let jsonl = report_line(&r, "bridge: events to JSONL");
    assert!(jsonl.contains(" 400 ") && jsonl.contains("admitted 400,") && jsonl.contains("dropped 0"), "{jsonl}");
    assert!(report_line(&r, "baseline: rotel").contains("skipped"), "{r}");
}

/// `--against`: another bridge binary (here the same one) in rotel's place, interleaved
/// round for round, both settled: the A/B line is printed, with no rotel target, and no
/// rotel line. Enough requests that the baseline's CPU passes the bench's 0.05 s floor.
#[test]
fn otlp_bench_against_another_bridge_reports_their_ratio() {
    let r = bench(&[SMALL_OTLP, &["--batches", "120", "--against", &cli_binary()]].concat());
    assert!(report_line(&r, "baseline: aep-bridge").contains("rec/CPU-s"), "{r}");
    let ratio = report_line(&r, "bridge / baseline bridge");
    assert!(ratio.contains("median of 2 per-round ratios") && !ratio.contains("target"), "{ratio}");
    assert!(!r.contains("rotel"), "{r}");
}

/// The real Codex mix: every record is an event in the log except Codex's own sessionless
/// "flushing OTEL metrics" lines, which are counted, not emitted (AEP-0001 §5.1).
#[test]
fn otlp_bench_codex_mix_accounts_for_every_record() {
    let r = bench(&["otlp", "--batches", "4", "--records", "200", "--warmup", "2", "--rounds", "1", "--rotel", "off"]);
    assert!(r.contains("--mix codex"), "the default mix: {r}");
    let jsonl = report_line(&r, "bridge: events to JSONL");
    let num = |after: &str| -> u64 {
        let rest = &jsonl[jsonl.find(after).unwrap_or_else(|| panic!("{after:?} in {jsonl}")) + after.len()..];
        rest.trim_start().split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok()).unwrap()
    };
    let (events, admitted, sessionless) = (num("JSONL"), num("admitted"), num("without a session"));
    assert_eq!(events, admitted, "{jsonl}");
    assert!(sessionless > 0 && sessionless < 40, "{jsonl}");
    assert_eq!(admitted + sessionless, 800, "{jsonl}");
    assert!(jsonl.contains("dropped 0"), "{jsonl}");
}

#[test]
fn hostile_bench_keeps_the_bridge_healthy_under_its_load() {
    let r = bench(&[
        "hostile",
        "--n",
        "5",
        "--idle",
        "20",
        "--grpc-idle",
        "20",
        "--subscribers",
        "5",
        "--replay-readers",
        "3",
        "--flood",
        "1",
        "--flood-mb",
        "1",
        "--grpc-mux",
        "4",
        "--grpc-mb",
        "1",
    ]);
    report_line(&r, "shim quiet (same run)");
    report_line(&r, "shim under load");
    let held = report_line(&r, "load held");
    assert!(held.contains("20 idle") && held.contains("20 idle on gRPC"), "{held}");
    assert!(
        held.contains("5 subscribers") && held.contains("3 replay readers") && held.contains("/healthz 200"),
        "{held}"
    );
    let mux = report_line(&r, "grpc multiplexed");
    let taken: u64 = mux.split_whitespace().nth(2).and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(taken > 0 && mux.contains(" 0 failed"), "exports multiplexed on one connection: {mux}");
    let flood = report_line(&r, "flood");
    let taken: u64 = flood.split_whitespace().nth(1).and_then(|v| v.parse().ok()).unwrap_or(0);
    assert!(taken > 0, "the flood never got through: {flood}");
    assert!(has_verdict(report_line(&r, "budget RSS")), "{r}");
    assert!(has_verdict(report_line(&r, "budget shim p99")), "{r}");
}

#[test]
fn wrap_bench_passes_every_line_back_and_reaches_the_bridge() {
    // The bench itself fails when a line comes back changed or nothing reached the bridge.
    let r = bench(&["wrap", "--n", "40", "--warmup", "4"]);
    report_line(&r, "round trip via wrap acp -- cat");
    report_line(&r, "baseline: cat alone");
    assert!(has_verdict(report_line(&r, "budget p99 added")), "{r}");
    let counters = report_line(&r, "tee counters");
    assert!(counters.contains("lines=88"), "44 lines, each teed in and out: {counters}");
    assert!(!report_line(&r, "bridge admitted").contains(" 0 events"), "{r}");
}

/// The `aep-bridge` binary beside this crate's `aep-bench`: `cargo test --workspace` builds
/// it (the CLI crate has integration tests of its own); a crate-only run must build it first.
fn cli_binary() -> String {
    let p = std::path::Path::new(env!("CARGO_BIN_EXE_aep-bench")).with_file_name("aep-bridge");
    assert!(
        p.is_file(),
        "{} is missing: run `cargo build -p aep-bridge-cli` (or the whole workspace) first",
        p.display()
    );
    p.display().to_string()
}

/// The recorded agent sessions `fleet` replays (`../shared/captures`, beside the
/// repository; not in it), when present.
fn captures() -> Option<std::path::PathBuf> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/captures");
    p.is_dir().then_some(p)
}

/// A small fleet through rotel with the gateway stopped for 2 s and one edge restarted
/// meanwhile: every event every edge logged reaches the sink as a log record, every span
/// made of them as a span, and every held permission answered at the hub reaches its
/// edge's shim. Counts only; no figure is asserted.
#[test]
fn fleet_bench_delivers_everything_through_an_outage_and_answers_at_the_hub() {
    let test = "fleet_bench_delivers_everything_through_an_outage_and_answers_at_the_hub";
    if aep_testkit::rotel_agent().is_none() {
        eprintln!("SKIP {test}: rotel-agent is not installed (pip install -r bridge/tests/requirements-otel.txt)");
        return;
    }
    let Some(caps) = captures() else {
        eprintln!("SKIP {test}: no recorded sessions at ../shared/captures (the real-agent captures)");
        return;
    };
    let caps = caps.display().to_string();
    let r = bench(&[
        "fleet",
        "--bridges",
        "3",
        "--speed",
        "50",
        "--duration-secs",
        "6",
        "--baseline-secs",
        "2",
        "--outage-secs",
        "2",
        "--restart-edge",
        "--captures",
        &caps,
    ]);
    let result = report_line(&r, "fleet result:");
    assert!(result.contains("logs_lost=0 ") && result.contains("spans_lost=0 "), "{r}");
    let field = |k: &str| -> u64 {
        result.split_whitespace().find_map(|w| w.strip_prefix(k)).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    let (held, reached) = (field("held="), field("reached_shim="));
    assert!(held >= 3, "every edge replays at least one held permission: {r}");
    assert_eq!(reached, held, "every held hook got the hub's answer through its shim: {r}");
    let logs = report_line(&r, "logs: delivered/in");
    let (got, want) = logs
        .split_whitespace()
        .filter_map(|w| w.split_once('/'))
        .find_map(|(a, b)| Some((a.parse::<u64>().ok()?, b.parse::<u64>().ok()?)))
        .expect("delivered/in");
    assert!(want > 0 && got == want, "{logs}");
    assert!(report_line(&r, "drain:").contains("the sink held everything"), "{r}");
    report_line(&r, "edge peak RSS");
    report_line(&r, "hub ingest");
    report_line(&r, "answer at hub -> shim reply");
    report_line(&r, "fleet edge / baseline");
}
