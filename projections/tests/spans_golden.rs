//! Golden tests of the span assembler over `tests/data/spans/*.jsonl`.
//!
//! Each input line is an AEP Event or a directive: `{"#config": {...}}` (first line:
//! `idle_timeout_ms`, `max_open_sessions`, `max_open_spans`) or `{"#flush_idle": "<RFC 3339>"}`.
//! The harness pushes every Event, runs the directives, then `flush_all()`, and compares
//! `{tree, batches}` with `<case>.expected.json`: `tree` is a readable span tree, `batches`
//! the OTLP/JSON spans each step returned. `UPDATE_GOLDEN=1` rewrites the expected files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use aep_projections::otlp::to_json;
use aep_projections::spans::{
    Span, SpanAssembler, SpanConfig, assemble, parse_rfc3339_nanos, session_root_context, traces_request,
};
use aep_schemas::event::Event;
use serde_json::{Value, json};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/spans")
}

enum Step {
    Event(Box<Event>),
    FlushIdle(u64, String),
}

fn load(name: &str) -> (SpanConfig, Vec<Step>) {
    let text = std::fs::read_to_string(data_dir().join(format!("{name}.jsonl"))).unwrap();
    let mut cfg = SpanConfig::default();
    let mut steps = Vec::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{name}:{}: {e}", n + 1));
        if let Some(c) = v.get("#config") {
            if let Some(ms) = c.get("idle_timeout_ms").and_then(Value::as_u64) {
                cfg.idle_timeout_nanos = ms * 1_000_000;
            }
            if let Some(x) = c.get("max_open_sessions").and_then(Value::as_u64) {
                cfg.max_open_sessions = x as usize;
            }
            if let Some(x) = c.get("max_open_spans").and_then(Value::as_u64) {
                cfg.max_open_spans = x as usize;
            }
        } else if let Some(t) = v.get("#flush_idle").and_then(Value::as_str) {
            steps.push(Step::FlushIdle(parse_rfc3339_nanos(t).unwrap(), t.to_owned()));
        } else {
            let ev = Event::from_value(v).unwrap_or_else(|e| panic!("{name}:{}: {e}", n + 1));
            steps.push(Step::Event(Box::new(ev)));
        }
    }
    (cfg, steps)
}

fn events_of(steps: &[Step]) -> Vec<Event> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Event(e) => Some((**e).clone()),
            Step::FlushIdle(..) => None,
        })
        .collect()
}

/// Runs a case: the spans each step returned, labelled by the step.
fn run(cfg: SpanConfig, steps: &[Step]) -> Vec<(String, Vec<Span>)> {
    let mut asm = SpanAssembler::new(cfg);
    let mut batches = Vec::new();
    for step in steps {
        let (label, spans) = match step {
            Step::Event(ev) => (format!("{} {}", ev.id, ev.r#type), asm.push(ev)),
            Step::FlushIdle(now, t) => (format!("#flush_idle {t}"), asm.flush_idle(*now)),
        };
        if !spans.is_empty() {
            batches.push((label, spans));
        }
    }
    let rest = asm.flush_all();
    if !rest.is_empty() {
        batches.push(("#flush_all".to_owned(), rest));
    }
    assert_eq!(asm.open_spans(), 0, "flush_all leaves nothing open");
    assert_eq!(asm.open_sessions(), 0);
    batches
}

/// A readable tree: `name [status] (flags)` lines, children indented under their parent.
fn tree(spans: &[Span]) -> Vec<String> {
    let ids: HashMap<[u8; 8], usize> = spans.iter().enumerate().map(|(i, s)| (s.span_id, i)).collect();
    let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        let parent = s.parent_span_id.and_then(|p| ids.get(&p).copied());
        children.entry(parent).or_default().push(i);
    }
    for list in children.values_mut() {
        list.sort_by_key(|i| (spans[*i].start_unix_nanos, spans[*i].name.clone(), spans[*i].span_id));
    }
    fn walk(
        i: usize,
        depth: usize,
        spans: &[Span],
        children: &HashMap<Option<usize>, Vec<usize>>,
        out: &mut Vec<String>,
    ) {
        let s = &spans[i];
        let mut line = format!("{}{}", "  ".repeat(depth), s.name);
        let ms = (s.end_unix_nanos - s.start_unix_nanos) / 1_000_000;
        line.push_str(&format!(" {ms}ms"));
        if s.status == aep_projections::spans::StatusCode::Error {
            line.push_str(" ERROR");
        }
        if s.is_incomplete() {
            line.push_str(" incomplete");
        }
        if !s.events.is_empty() {
            let names: Vec<&str> = s.events.iter().map(|e| e.name.as_str()).collect();
            line.push_str(&format!(" events=[{}]", names.join(",")));
        }
        if !s.links.is_empty() {
            let kinds: Vec<&str> =
                s.links.iter().filter_map(|l| l.attributes.get("aep.link.kind").and_then(Value::as_str)).collect();
            line.push_str(&format!(" links=[{}]", kinds.join(",")));
        }
        out.push(line);
        for c in children.get(&Some(i)).into_iter().flatten() {
            walk(*c, depth + 1, spans, children, out);
        }
    }
    let mut out = Vec::new();
    for r in children.get(&None).into_iter().flatten() {
        walk(*r, 0, spans, &children, &mut out);
    }
    out
}

fn render(batches: &[(String, Vec<Span>)]) -> Value {
    let all: Vec<Span> = batches.iter().flat_map(|(_, s)| s.iter().cloned()).collect();
    let batches: Vec<Value> = batches
        .iter()
        .map(
            |(label, spans)| json!({"after": label, "spans": spans.iter().map(Span::to_otlp_json).collect::<Vec<_>>()}),
        )
        .collect();
    json!({"tree": tree(&all), "batches": batches})
}

/// A readable diff: the first differing line of the pretty-printed values, with context.
fn diff(expected: &Value, actual: &Value) -> String {
    let e = serde_json::to_string_pretty(expected).unwrap();
    let a = serde_json::to_string_pretty(actual).unwrap();
    let (el, al): (Vec<&str>, Vec<&str>) = (e.lines().collect(), a.lines().collect());
    let first = el.iter().zip(al.iter()).position(|(x, y)| x != y).unwrap_or(el.len().min(al.len()));
    let from = first.saturating_sub(6);
    let mut out = format!("first difference at line {}\n--- expected\n", first + 1);
    for l in el.iter().skip(from).take(14) {
        out.push_str(&format!("  {l}\n"));
    }
    out.push_str("+++ actual\n");
    for l in al.iter().skip(from).take(14) {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

fn golden(name: &str) -> Vec<(String, Vec<Span>)> {
    let (cfg, steps) = load(name);
    let batches = run(cfg, &steps);
    let actual = render(&batches);
    let path = data_dir().join(format!("{name}.expected.json"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, serde_json::to_string_pretty(&actual).unwrap() + "\n").unwrap();
    } else {
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|_| panic!("{} missing: run with UPDATE_GOLDEN=1", path.display()));
        let expected: Value = serde_json::from_str(&text).unwrap();
        assert!(expected == actual, "{name}: spans differ from {}\n{}", path.display(), diff(&expected, &actual));
    }
    batches
}

fn all_spans(batches: &[(String, Vec<Span>)]) -> Vec<Span> {
    batches.iter().flat_map(|(_, s)| s.iter().cloned()).collect()
}

fn find<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no span {name}"))
}

fn attr<'a>(s: &'a Span, k: &str) -> &'a Value {
    s.attributes.get(k).unwrap_or(&Value::Null)
}

/// Spans keyed by span id as OTLP/JSON, for order-independent comparison.
fn by_id(spans: &[Span]) -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = spans.iter().map(|s| (hex::encode(s.span_id), s.to_otlp_json())).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn normal_session() {
    let spans = all_spans(&golden("normal"));
    assert_eq!(spans.len(), 1 + 2 + 4, "root, two runs, four tools");
    assert!(spans.iter().all(|s| !s.is_incomplete()));
    let root = root_of(&spans);
    assert_eq!(root.parent_span_id, None);
    assert!(spans.iter().all(|s| s.trace_id == root.trace_id), "one trace per session");
    let bash = find(&spans, "execute_tool Bash");
    assert_eq!(attr(bash, "gen_ai.tool.call.id"), "toolu_01");
    assert_eq!(attr(bash, "gen_ai.usage.input_tokens"), 120);
    assert_eq!(bash.events.len(), 1, "progress.status lands on the open tool span");
    assert!(attr(bash, "aep.tool.args").is_null() && !bash.to_otlp_json().to_string().contains("cargo build"));
    let run1 = spans.iter().find(|s| attr(s, "aep.run_id") == "r1" && s.name.starts_with("invoke_agent")).unwrap();
    assert_eq!(bash.parent_span_id, Some(run1.span_id));
    assert_eq!(run1.parent_span_id, Some(root.span_id));
    assert_eq!(attr(run1, "gen_ai.usage.output_tokens"), 210);
    assert_eq!(attr(run1, "aep.cost.currency"), "USD");
    // Two Grep calls without call ids or causes pair in order.
    let greps: Vec<&Span> = spans.iter().filter(|s| s.name == "execute_tool Grep").collect();
    assert_eq!(greps.len(), 2);
    let mut durations: Vec<u64> = greps.iter().map(|s| (s.end_unix_nanos - s.start_unix_nanos) / 1_000_000).collect();
    durations.sort();
    assert_eq!(durations, [800, 800]);
    // No content-level data leaks into attributes (AEP-0005 §3.3).
    let text = to_json(&traces_request(&spans)).to_string();
    for secret in ["secret-project", "fix the build", "compiling 12 crates", "Finished"] {
        assert!(!text.contains(secret), "{secret} leaked");
    }
}

#[test]
fn traces_request_groups_by_agent() {
    let spans = all_spans(&golden("subagent"));
    let req = to_json(&traces_request(&spans));
    let rs = req["resourceSpans"].as_array().unwrap();
    assert_eq!(rs.len(), 1);
    assert_eq!(rs[0]["resource"]["attributes"][0]["value"]["stringValue"], "claude-code");
    assert_eq!(rs[0]["scopeSpans"][0]["spans"].as_array().unwrap().len(), spans.len());
}

#[test]
fn out_of_order_matches_in_order() {
    let shuffled = all_spans(&golden("out_of_order"));
    let (_, steps) = load("out_of_order");
    let mut events = events_of(&steps);
    events.sort_by_key(|e| e.seq);
    let ordered = assemble(&events, SpanConfig::default());
    assert_eq!(by_id(&shuffled), by_id(&ordered));
    assert!(shuffled.iter().all(|s| !s.is_incomplete()));
    let failed = find(&shuffled, "execute_tool apply_patch");
    assert_eq!(failed.status, aep_projections::spans::StatusCode::Error);
    assert_eq!(attr(failed, "error.type"), "patch_rejected");
}

/// Permutations of the middle of a session (first and last Event fixed) give the same
/// spans as the ordered stream: a deterministic shuffle, 50 orders per case.
#[test]
fn arrival_order_does_not_change_spans() {
    for case in
        ["normal", "attention", "failed_tool", "denied_tool", "missing_terminal", "replayed_duplicate", "subagent"]
    {
        shuffled_like_ordered(case);
    }
}

fn shuffled_like_ordered(case: &str) {
    let (_, steps) = load(case);
    // Foreign-emitter Events carry no `seq`: nothing orders them against the owner's
    // stream, so a late one can only annotate (AEP-0001 §5.2). Only sequenced Events here.
    let events: Vec<Event> = events_of(&steps).into_iter().filter(|e| e.seq.is_some()).collect();
    let expected = by_id(&assemble(&events, SpanConfig::default()));
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..50 {
        let mut middle = events[1..events.len() - 1].to_vec();
        for i in (1..middle.len()).rev() {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            let j = (seed >> 33) as usize % (i + 1);
            middle.swap(i, j);
        }
        let mut shuffled = vec![events[0].clone()];
        shuffled.extend(middle);
        shuffled.push(events[events.len() - 1].clone());
        // Within the reorder window (here: all of the session) order cannot matter.
        let cfg = SpanConfig { reorder_window_nanos: 3_600_000_000_000, ..SpanConfig::default() };
        let got = by_id(&assemble(&shuffled, cfg));
        let order: Vec<&str> = shuffled.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(got.len(), expected.len(), "{case}: order {order:?}");
        for (g, e) in got.iter().zip(expected.iter()) {
            assert!(g == e, "{case}: order {order:?}\n{}", diff(&e.1, &g.1));
        }
    }
}

#[test]
fn missing_terminal_closes_incomplete() {
    let batches = golden("missing_terminal");
    let spans = all_spans(&batches);
    assert_eq!(batches.len(), 1, "everything closes at session.ended");
    let tool = find(&spans, "execute_tool Bash");
    assert!(tool.is_incomplete());
    let ended = parse_rfc3339_nanos("2026-07-03T10:00:30Z").unwrap();
    assert_eq!(tool.end_unix_nanos, ended, "open children end at session.ended");
    let run = find(&spans, "invoke_agent claude-code");
    assert!(run.is_incomplete());
    assert!(!root_of(&spans).is_incomplete());
}

#[test]
fn replayed_duplicates_change_nothing() {
    let with_dups = all_spans(&golden("replayed_duplicate"));
    let (_, steps) = load("replayed_duplicate");
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<Event> = events_of(&steps).into_iter().filter(|e| seen.insert(e.id.clone())).collect();
    assert!(unique.len() < events_of(&steps).len());
    assert_eq!(by_id(&with_dups), by_id(&assemble(&unique, SpanConfig::default())));
    assert_eq!(with_dups.len(), 3);
    // Replaying the whole stream into the same assembler after it closed adds nothing.
    let mut asm = SpanAssembler::new(SpanConfig::default());
    let first: Vec<Span> = unique.iter().flat_map(|e| asm.push(e)).collect();
    assert_eq!(first.len(), 3);
    let again: Vec<Span> = unique.iter().flat_map(|e| asm.push(e)).collect();
    assert!(again.is_empty());
    assert!(asm.flush_all().is_empty());
}

#[test]
fn subagent_links_both_ways() {
    let spans = all_spans(&golden("subagent"));
    let deleg = find(&spans, "invoke_agent Explore");
    assert_eq!(attr(deleg, "aep.delegation.child.session"), "s_child");
    let child_root =
        spans.iter().find(|s| s.name.starts_with("session ") && attr(s, "aep.session_id") == "s_child").unwrap();
    let parent_run = spans
        .iter()
        .find(|s| {
            attr(s, "aep.session_id") == "s_parent"
                && attr(s, "aep.run_id") == "r1"
                && attr(s, "gen_ai.agent.name") == "claude-code"
                && s.name == "invoke_agent claude-code"
        })
        .unwrap();
    assert_eq!(deleg.parent_span_id, Some(parent_run.span_id));
    assert_eq!(deleg.links.len(), 1);
    assert_eq!(deleg.links[0].context.trace_id, child_root.trace_id);
    assert_eq!(deleg.links[0].context.span_id, child_root.span_id, "the link resolves to the child's real root");
    assert_eq!(child_root.links.len(), 1);
    assert_eq!(child_root.links[0].context.span_id, parent_run.span_id, "the child links back to the parent run");
    assert_eq!(child_root.links[0].context.trace_id, parent_run.trace_id);
    assert_ne!(child_root.trace_id, parent_run.trace_id);
    assert_eq!(
        session_root_context("aep://host-a/agent/claude-code/session/s_child", "s_child").span_id,
        child_root.span_id
    );
}

#[test]
fn denied_tool_is_error_with_clear_attribute() {
    let spans = all_spans(&golden("denied_tool"));
    let bash = find(&spans, "execute_tool Bash");
    assert_eq!(bash.status, aep_projections::spans::StatusCode::Error);
    assert_eq!(attr(bash, "aep.tool.denied"), true);
    assert_eq!(attr(bash, "aep.tool.denied.by"), "policy");
    assert_eq!(attr(bash, "aep.tool.outcome"), "denied");
    assert_eq!(bash.start_unix_nanos, bash.end_unix_nanos, "blocked before execution: zero length");
    assert!(!bash.is_incomplete());
    let fetch = find(&spans, "execute_tool WebFetch");
    assert_eq!(attr(fetch, "aep.tool.denied.by"), "user_setting");
    assert_eq!((fetch.end_unix_nanos - fetch.start_unix_nanos) / 1_000_000, 100);
}

#[test]
fn failed_tool_and_run_are_errors() {
    let spans = all_spans(&golden("failed_tool"));
    let write = find(&spans, "execute_tool Write");
    assert_eq!(write.status, aep_projections::spans::StatusCode::Error);
    assert_eq!(attr(write, "error.type"), "io_error");
    assert!(!write.to_otlp_json().to_string().contains("EACCES"), "error messages are content");
    let run = find(&spans, "invoke_agent claude-code");
    assert_eq!(run.status, aep_projections::spans::StatusCode::Error);
    assert_eq!(run.status_message, "tool_error");
    assert_eq!(run.to_otlp_json()["status"]["code"], 2);
    assert!(run.events.iter().any(|e| e.name == "error.raised"));
}

#[test]
fn attention_answered_and_timeout() {
    let spans = all_spans(&golden("attention"));
    let perm = find(&spans, "attention permission");
    assert_eq!(attr(perm, "aep.attention.outcome"), "answered");
    assert_eq!(attr(perm, "aep.attention.answer.option"), "allow");
    assert_eq!(attr(perm, "aep.attention.wait_ms"), 7200);
    assert_eq!(attr(perm, "aep.attention.routed_to"), &json!(["telegram"]));
    let names: Vec<&str> = perm.events.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["attention.routed", "control.attention.respond", "attention.answered"]);
    assert!(!perm.to_otlp_json().to_string().contains("rm -rf"), "the prompt is content");
    let input = find(&spans, "attention input");
    assert_eq!(attr(input, "aep.attention.outcome"), "timeout");
    assert_eq!((input.end_unix_nanos - input.start_unix_nanos) / 1_000_000, 30_000);
    // The router's Events joined the owner's session: no stray session for its source.
    assert_eq!(spans.iter().filter(|s| s.name.starts_with("session ")).count(), 1);
}

#[test]
fn idle_flush_closes_incomplete_and_continues() {
    let batches = golden("idle_flush");
    assert!(!batches.iter().any(|(l, _)| l == "#flush_idle 2026-07-03T10:00:30Z"), "not idle yet");
    let (_, flushed) = batches.iter().find(|(l, _)| l == "#flush_idle 2026-07-03T10:01:05Z").unwrap();
    assert_eq!(flushed.len(), 3);
    assert!(flushed.iter().all(Span::is_incomplete));
    let root = root_of(flushed);
    let later = all_spans(&batches[1..]);
    let cont = root_of(&later);
    assert_eq!(cont.trace_id, root.trace_id, "a late Event continues the trace");
    assert_eq!(cont.parent_span_id, Some(root.span_id));
    assert_eq!(attr(cont, "aep.continuation"), 1);
    let ids: std::collections::HashSet<[u8; 8]> = all_spans(&batches).iter().map(|s| s.span_id).collect();
    assert_eq!(ids.len(), all_spans(&batches).len(), "no span id is exported twice");
}

#[test]
fn caps_flush_oldest_first() {
    let batches = golden("caps");
    let spans = all_spans(&batches);
    // Opening s_cap_c exceeds two open sessions: s_cap_a (the oldest) is flushed whole.
    let (label, evicted) = &batches[0];
    assert!(label.contains("s_cap_b-e04") || label.contains("s_cap_c"), "{label}");
    assert!(evicted.iter().all(Span::is_incomplete));
    let sessions: Vec<&str> = spans
        .iter()
        .filter(|s| s.name.starts_with("session "))
        .map(|s| attr(s, "aep.session_id").as_str().unwrap())
        .collect();
    assert_eq!(sessions.len(), 3, "nothing dropped: {sessions:?}");
    assert_eq!(sessions[0], "s_cap_a");
    let mut asm = SpanAssembler::new(SpanConfig { max_open_spans: 5, max_open_sessions: 2, ..SpanConfig::default() });
    let (_, steps) = load("caps");
    for ev in events_of(&steps) {
        asm.push(&ev);
        assert!(asm.open_spans() <= 5 && asm.open_sessions() <= 2);
    }
}

#[test]
fn traceparent_is_honored() {
    let spans = all_spans(&golden("traceparent"));
    let root = root_of(&spans);
    assert_eq!(hex::encode(root.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(root.parent_span_id.map(hex::encode).as_deref(), Some("00f067aa0ba902b7"));
    let r1 = spans.iter().find(|s| attr(s, "aep.run_id") == "r1" && s.name.starts_with("invoke_agent")).unwrap();
    assert_eq!(r1.trace_id, root.trace_id);
    let r2 = spans.iter().find(|s| attr(s, "aep.run_id") == "r2" && s.name.starts_with("invoke_agent")).unwrap();
    assert_eq!(hex::encode(r2.trace_id), "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(r2.parent_span_id.map(hex::encode).as_deref(), Some("b7ad6b7169203331"));
    assert_eq!(r2.links.len(), 1, "the foreign-trace run links to its session");
    let tool = find(&spans, "execute_tool Bash");
    assert_eq!(tool.trace_id, r2.trace_id);
    assert_eq!(tool.parent_span_id, Some(r2.span_id));
    assert_eq!(tool.links.len(), 1, "a later traceparent becomes a link");
}

#[test]
fn ids_are_deterministic_across_assemblers() {
    let (_, steps) = load("normal");
    let events = events_of(&steps);
    assert_eq!(by_id(&assemble(&events, SpanConfig::default())), by_id(&assemble(&events, SpanConfig::default())));
}

/// A small deterministic generator (no RNG dependency): an LCG.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

/// Random streams over the whole vocabulary (out of order, duplicates, missing ends,
/// foreign Events, bad times, traceparents, tiny caps, idle flushes) keep the invariants:
/// no panic, no span id exported twice, no span ending before it starts, every parent
/// either exported or an incoming traceparent, caps honored, nothing left after flush_all.
#[test]
fn random_streams_keep_invariants() {
    const TYPES: [&str; 20] = [
        "session.started",
        "session.ended",
        "run.started",
        "run.finished",
        "run.failed",
        "run.cancelled",
        "tool.requested",
        "tool.completed",
        "tool.failed",
        "tool.denied",
        "attention.requested",
        "attention.answered",
        "attention.resolved",
        "attention.timeout",
        "attention.routed",
        "delegation.subagent.started",
        "delegation.subagent.stopped",
        "progress.status",
        "error.raised",
        "control.attention.respond",
    ];
    let mut rng = Lcg(7);
    for round in 0..60 {
        let cfg = SpanConfig {
            max_open_sessions: 1 + rng.next(4) as usize,
            max_open_spans: 2 + rng.next(12) as usize,
            idle_timeout_nanos: 5_000_000_000,
            reorder_window_nanos: rng.next(3) * 1_000_000_000,
            ..SpanConfig::default()
        };
        let (max_sessions, max_spans) = (cfg.max_open_sessions, cfg.max_open_spans);
        let mut asm = SpanAssembler::new(cfg);
        let mut out: Vec<Span> = Vec::new();
        let mut ids: Vec<String> = Vec::new();
        let mut sent: Vec<Event> = Vec::new();
        let mut parents_in: std::collections::HashSet<[u8; 8]> = Default::default();
        let mut seqs = [0u64; 3];
        for i in 0..120 {
            let ev = if !sent.is_empty() && rng.next(10) == 0 {
                sent[rng.next(sent.len() as u64) as usize].clone() // replayed duplicate
            } else {
                let s = rng.next(3) as usize;
                let ty = TYPES[rng.next(TYPES.len() as u64) as usize];
                let foreign = rng.next(8) == 0;
                let source =
                    if foreign { "aep://h/agent/router".to_owned() } else { format!("aep://h/agent/a/session/s{s}") };
                let mut v = json!({"aep":"0.1","id":format!("e{round}-{i}"),"type":ty,
                    "time": if rng.next(20) == 0 { "not a time".to_owned() } else { format!("2026-07-03T10:00:{:02}.{:03}Z", rng.next(60), rng.next(1000)) },
                    "source": source, "agent": if foreign { "router" } else { "a" }, "session": format!("s{s}")});
                if !foreign && rng.next(6) != 0 {
                    seqs[s] += 1 + rng.next(2);
                    v["seq"] = json!(seqs[s] - rng.next(3).min(seqs[s]));
                }
                if rng.next(2) == 0 {
                    v["run"] = json!(format!("r{}", rng.next(3)));
                }
                if rng.next(3) == 0 && !ids.is_empty() {
                    v["cause"] = json!(ids[rng.next(ids.len() as u64) as usize]);
                }
                if rng.next(3) == 0 && !ids.is_empty() {
                    v["subject"] = json!(ids[rng.next(ids.len() as u64) as usize]);
                }
                if rng.next(12) == 0 {
                    let span = format!("{:016x}", 1 + rng.next(1 << 40));
                    v["traceparent"] = json!(format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{span}-01"));
                    let bytes: [u8; 8] = hex::decode(&span).unwrap().try_into().unwrap();
                    parents_in.insert(bytes);
                }
                let tool_name = ["Bash", "Read"][rng.next(2) as usize];
                let mut data = json!({"tool":{"name": tool_name}});
                if rng.next(2) == 0 {
                    data["tool"]["call_id"] = json!(format!("c{}", rng.next(4)));
                }
                if rng.next(3) == 0 {
                    data["child"] = json!({"session": format!("s{}", rng.next(3))});
                }
                if rng.next(3) == 0 {
                    data["duration_ms"] = json!(rng.next(5000));
                }
                if rng.next(4) == 0 {
                    data["parent"] = json!({"session": "s0", "run": "r1"});
                }
                v["data"] = data;
                let ev = Event::from_value(v).unwrap();
                ids.push(ev.id.clone());
                sent.push(ev.clone());
                ev
            };
            out.extend(asm.push(&ev));
            if rng.next(15) == 0 {
                out.extend(
                    asm.flush_idle(parse_rfc3339_nanos("2026-07-03T10:00:00Z").unwrap() + rng.next(90) * 1_000_000_000),
                );
            }
            assert!(asm.open_sessions() <= max_sessions, "round {round}: session cap");
            assert!(asm.open_spans() <= max_spans, "round {round}: span cap");
        }
        out.extend(asm.flush_all());
        assert_eq!(asm.open_spans(), 0);
        let mut seen = std::collections::HashSet::new();
        for s in &out {
            assert!(seen.insert((s.trace_id, s.span_id)), "round {round}: {} exported twice", s.name);
            assert!(s.end_unix_nanos >= s.start_unix_nanos, "round {round}: {} ends before it starts", s.name);
        }
        let exported: std::collections::HashSet<[u8; 8]> = out.iter().map(|s| s.span_id).collect();
        for s in &out {
            if let Some(p) = s.parent_span_id {
                assert!(
                    exported.contains(&p) || parents_in.contains(&p),
                    "round {round}: {} has an unknown parent",
                    s.name
                );
            }
        }
        let req = to_json(&traces_request(&out));
        assert!(req["resourceSpans"].as_array().is_some_and(|r| !r.is_empty()) || out.is_empty());
    }
}

#[test]
fn trace_per_run_roots_each_run() {
    let (_, steps) = load("subagent");
    let cfg = SpanConfig { trace_per_run: true, ..SpanConfig::default() };
    let spans = assemble(&events_of(&steps), cfg);
    let roots: Vec<&Span> = spans.iter().filter(|s| s.name.starts_with("session ")).collect();
    let runs: Vec<&Span> = spans.iter().filter(|s| s.name == "invoke_agent claude-code").collect();
    assert_eq!((roots.len(), runs.len()), (2, 2));
    for run in &runs {
        assert_eq!(run.parent_span_id, None, "a run roots its own trace");
        let session = roots.iter().find(|r| attr(r, "aep.session_id") == attr(run, "aep.session_id")).unwrap();
        assert_ne!(run.trace_id, session.trace_id);
        assert_eq!(
            run.links[0].context,
            aep_projections::spans::SpanContext { trace_id: session.trace_id, span_id: session.span_id }
        );
        assert!(spans.iter().filter(|s| s.parent_span_id == Some(run.span_id)).all(|c| c.trace_id == run.trace_id));
    }
    // The child session's link to its parent run follows the run's own trace.
    let child = roots.iter().find(|r| attr(r, "aep.session_id") == "s_child").unwrap();
    let parent_run = runs.iter().find(|r| attr(r, "aep.session_id") == "s_parent").unwrap();
    assert_eq!(
        child.links[0].context,
        aep_projections::spans::SpanContext { trace_id: parent_run.trace_id, span_id: parent_run.span_id }
    );
}

/// A session whose vendor timestamps lag another session's by hours (clock skew,
/// late OTLP, a replay) keeps its own idle and reorder clocks: it stays one trace, with
/// one root and every run and tool under it, however often idle flushing runs.
#[test]
fn a_lagging_session_stays_one_trace() {
    let live = parse_rfc3339_nanos("2026-07-03T15:00:00Z").unwrap();
    let lag = 5 * 3_600_000_000_000u64; // five hours behind
    let cfg = SpanConfig { idle_timeout_nanos: 60_000_000_000, ..SpanConfig::default() };
    let mut asm = SpanAssembler::new(cfg);
    let mk = |session: &str, seq: u64, ty: &str, at: u64, extra: Value| {
        let time = aep_schemas::time::format_rfc3339_ms(at / 1_000_000);
        let mut v = json!({"aep":"0.1","id":format!("{session}-{seq}"),"type":ty,"time":time,
            "source":format!("aep://h/agent/codex/session/{session}"),"agent":"codex","session":session,"seq":seq});
        v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        Event::from_value(v).unwrap()
    };
    let script = [
        ("session.started", json!({})),
        ("run.started", json!({"run":"r1"})),
        ("tool.requested", json!({"run":"r1","data":{"tool":{"name":"Bash","call_id":"c1"}}})),
        ("tool.completed", json!({"run":"r1","data":{"tool":{"name":"Bash","call_id":"c1"}}})),
        ("run.finished", json!({"run":"r1"})),
        ("run.started", json!({"run":"r2"})),
        ("tool.requested", json!({"run":"r2","data":{"tool":{"name":"Read","call_id":"c2"}}})),
        ("tool.completed", json!({"run":"r2","data":{"tool":{"name":"Read","call_id":"c2"}}})),
        ("run.finished", json!({"run":"r2"})),
        ("session.ended", json!({})),
    ];
    let mut out = Vec::new();
    for (i, (ty, extra)) in script.iter().enumerate() {
        // Ten seconds of wall time per step; idle flushing every second of it.
        let wall = live + i as u64 * 10_000_000_000;
        out.extend(asm.push_at(&mk("live", i as u64, ty, wall, extra.clone()), wall));
        out.extend(asm.push_at(&mk("lagging", i as u64, ty, wall - lag, extra.clone()), wall));
        for s in 0..10 {
            out.extend(asm.flush_idle(wall + s * 1_000_000_000));
        }
    }
    out.extend(asm.flush_all());
    for session in ["live", "lagging"] {
        let mine: Vec<&Span> = out.iter().filter(|s| attr(s, "aep.session_id") == session).collect();
        let roots: Vec<&&Span> = mine.iter().filter(|s| s.parent_span_id.is_none()).collect();
        assert_eq!(roots.len(), 1, "{session}: one root, got {:?}", mine.iter().map(|s| &s.name).collect::<Vec<_>>());
        assert!(mine.iter().all(|s| s.trace_id == roots[0].trace_id), "{session}: one trace");
        assert!(mine.iter().all(|s| !s.is_incomplete() && attr(s, "aep.continuation").is_null()), "{session}");
        assert_eq!(mine.len(), 1 + 2 + 2, "{session}: root, two runs, two tools");
    }
}

/// The first session root span (`session {agent}`).
fn root_of(spans: &[Span]) -> &Span {
    spans.iter().find(|s| s.name.starts_with("session ")).expect("no session root")
}

/// The root is named for what it is (`session {agent}`), carries the session
/// identity and is classified as the agent (OpenInference kind `AGENT`) with the session's
/// model, but names no GenAI operation: its runs are the `invoke_agent` operations, and a
/// root counted as one too would count each session twice. Every GenAI span below it
/// names its operation and its OpenInference kind, runs carry the session's model, and
/// finished runs and tools are OK.
#[test]
fn one_readable_trace_per_session() {
    let spans = all_spans(&golden("normal"));
    let root = root_of(&spans);
    assert_eq!(root.name, "session claude-code");
    assert_eq!(attr(root, "gen_ai.agent.name"), "claude-code");
    assert_eq!(attr(root, "gen_ai.conversation.id"), "s_norm");
    assert_eq!(attr(root, "session.id"), "s_norm");
    assert!(attr(root, "gen_ai.operation.name").is_null(), "the runs are the operations");
    assert_eq!(attr(root, "openinference.span.kind"), "AGENT");
    assert_eq!(attr(root, "gen_ai.request.model"), "claude-sonnet-5");
    assert_eq!(attr(root, "aep.session.model"), "claude-sonnet-5");
    assert!(attr(root, "input.value").is_null(), "no content at the default ceiling");
    assert_eq!(root.status, aep_projections::spans::StatusCode::Ok, "the session ended");
    for s in spans.iter().filter(|s| s.parent_span_id.is_some()) {
        let (op, kind) =
            if s.name.starts_with("invoke_agent") { ("invoke_agent", "AGENT") } else { ("execute_tool", "TOOL") };
        assert_eq!(attr(s, "gen_ai.operation.name"), op, "{}", s.name);
        assert_eq!(attr(s, "openinference.span.kind"), kind, "{}", s.name);
        assert_eq!(s.status, aep_projections::spans::StatusCode::Ok, "{}", s.name);
        assert_eq!(attr(s, "session.id"), "s_norm");
    }
    let run = spans.iter().find(|s| s.name == "invoke_agent claude-code").unwrap();
    assert_eq!(attr(run, "gen_ai.request.model"), "claude-sonnet-5");
    assert_eq!(attr(run, "gen_ai.provider.name"), "anthropic");
    // A failed run marks the session root ERROR too, so the trace list shows it.
    let failed = all_spans(&golden("failed_tool"));
    assert_eq!(root_of(&failed).status, aep_projections::spans::StatusCode::Error);
}

/// A run's prompt and final answer and a tool call's arguments and result become
/// GenAI content attributes only as far as the capture ceiling allows (AEP-0005 §3.3,
/// AEP-0003 §6.4 / §9: down-leveled mechanically, never up-leveled).
#[test]
fn content_attributes_follow_the_capture_ceiling() {
    use aep_schemas::Capture;
    let session = |capture: &str, redacted: bool| -> Vec<Event> {
        let (args, result) = if redacted { ("args_redacted", "result_redacted") } else { ("args", "result") };
        let rows = [
            ("session.started", None, json!({})),
            ("run.started", Some("r1"), json!({"trigger":"user","prompt":"list the files"})),
            ("tool.requested", Some("r1"), json!({"tool":{"name":"Bash","call_id":"c1"},(args):{"command":"ls"}})),
            ("tool.completed", Some("r1"), json!({"tool":{"name":"Bash","call_id":"c1"},(result):"a.txt"})),
            ("run.finished", Some("r1"), json!({"summary":"One file: a.txt."})),
            ("session.ended", None, json!({})),
        ];
        rows.iter()
            .enumerate()
            .map(|(i, (ty, run, data))| {
                let mut v = json!({"aep":"0.1","id":format!("c-{i}"),"type":ty,"time":format!("2026-07-03T10:00:0{i}Z"),
                    "source":"aep://h/agent/codex/session/s","agent":"codex","session":"s","seq":i,"capture":capture,"data":data});
                if let Some(r) = run {
                    v["run"] = json!(r);
                }
                Event::from_value(v).unwrap()
            })
            .collect()
    };
    // (span name, attribute, value) of every content attribute, sorted.
    let content = |events: &[Event], ceiling: Capture| -> Vec<(String, String, String)> {
        let spans = assemble(events, SpanConfig { max_capture: ceiling, ..SpanConfig::default() });
        let mut out: Vec<(String, String, String)> = spans
            .iter()
            .flat_map(|s| s.attributes.iter().map(move |(k, v)| (s, k, v)))
            .filter(|(_, k, _)| {
                k.contains("messages")
                    || k.starts_with("gen_ai.tool.call.a")
                    || k.ends_with(".result")
                    || k.ends_with(".value")
            })
            .map(|(s, k, v)| (s.name.clone(), k.clone(), v.as_str().unwrap_or_default().to_owned()))
            .collect();
        out.sort();
        out
    };
    let full = session("full", false);
    assert!(content(&full, Capture::Metadata).is_empty(), "the default ceiling shows no content");
    assert!(content(&full, Capture::Redacted).is_empty(), "a full Event under a redacted ceiling is metadata");
    let got = content(&full, Capture::Full);
    let keys: Vec<(&str, &str)> = got.iter().map(|(n, k, _)| (n.as_str(), k.as_str())).collect();
    let agent = ["gen_ai.input.messages", "gen_ai.output.messages", "input.value", "output.value"];
    let mut want: Vec<(&str, &str)> = Vec::new();
    want.extend(agent.iter().map(|k| ("invoke_agent codex", *k)));
    want.extend(agent.iter().map(|k| ("session codex", *k)));
    want.extend(
        ["gen_ai.tool.call.arguments", "gen_ai.tool.call.result", "input.value", "output.value"]
            .iter()
            .map(|k| ("execute_tool Bash", *k)),
    );
    want.sort();
    assert_eq!(keys, want);
    let value = |name: &str, key: &str| got.iter().find(|(n, k, _)| n == name && k == key).unwrap().2.clone();
    assert_eq!(value("execute_tool Bash", "gen_ai.tool.call.arguments"), r#"{"command":"ls"}"#);
    assert_eq!(value("execute_tool Bash", "input.value"), r#"{"command":"ls"}"#);
    assert_eq!(value("execute_tool Bash", "gen_ai.tool.call.result"), "a.txt");
    let input: Value = serde_json::from_str(&value("invoke_agent codex", "gen_ai.input.messages")).unwrap();
    assert_eq!(input, json!([{"role":"user","parts":[{"type":"text","content":"list the files"}]}]));
    let output: Value = serde_json::from_str(&value("invoke_agent codex", "gen_ai.output.messages")).unwrap();
    assert_eq!(output[0]["parts"][0]["content"], "One file: a.txt.");
    // The root shows the session's first prompt and last answer.
    assert_eq!(value("session codex", "input.value"), "list the files");
    assert_eq!(value("session codex", "output.value"), "One file: a.txt.");
    // Redacted Events under a redacted ceiling: the redacted members.
    let red = content(&session("redacted", true), Capture::Redacted);
    assert_eq!(red.len(), 12, "{red:?}");
    assert!(content(&session("metadata", false), Capture::Full).is_empty(), "never up-leveled");
}

/// A late Event after `session.ended` (Codex `notify` on exit) makes no new root: an Event
/// that opens no span of its own is on no span (its log record names the ended root), and
/// nothing is left open until idle or shutdown. A late Event that does open a span (a tool
/// call finishing after the end) gets it under the ended root, in the same trace.
#[test]
fn a_late_event_after_the_end_makes_no_new_root() {
    let mk = |seq: u64, ty: &str, data: Value| {
        Event::from_value(
            json!({"aep":"0.1","id":format!("n-{seq}"),"type":ty,"time":format!("2026-07-03T10:00:0{seq}Z"),
            "source":"aep://h/agent/codex/session/th","agent":"codex","session":"th","seq":seq,"data":data}),
        )
        .unwrap()
    };
    let mut asm = SpanAssembler::new(SpanConfig::default());
    asm.push(&mk(0, "session.started", json!({})));
    let ended = asm.push(&mk(1, "session.ended", json!({})));
    assert_eq!(ended.len(), 1);
    let late = asm.push(&mk(2, "x.codex.session.notify", json!({"type": "agent-turn-complete"})));
    assert!(late.is_empty(), "no `session codex (late)`: {late:?}");
    assert_eq!(asm.open_sessions(), 0, "nothing left open");
    assert!(asm.flush_all().is_empty());
    let tool = json!({"tool": {"name": "Bash", "call_id": "c9"}});
    let mut done = asm.push(&mk(3, "tool.requested", tool.clone()));
    done.extend(asm.push(&mk(4, "tool.completed", tool)));
    // The reorder window (the late stream has no start to count from) settles it.
    let t4 = aep_projections::spans::parse_rfc3339_nanos("2026-07-03T10:00:04Z").unwrap();
    done.extend(asm.flush_idle(t4 + 11_000_000_000));
    assert_eq!(done.len(), 1, "{done:?}");
    assert_eq!(asm.open_sessions(), 0, "closed once its span went out");
    let t = &done[0];
    assert_eq!(t.name, "execute_tool Bash");
    assert_eq!((t.trace_id, t.parent_span_id), (ended[0].trace_id, Some(ended[0].span_id)));
    assert!(attr(t, "aep.late") == true);
    assert!(asm.flush_all().is_empty(), "and no root after it either");
}

/// A vendor's own telemetry lags its session (Claude Code exports on an interval): after
/// `session.ended` its records open no `(late)` span each; the trace stays as it ended.
/// Seen in Phoenix: one real Claude Code session replayed with its OTLP exports showed 32
/// one-span `session claude-code (late)` traces beside the real one.
#[test]
fn late_vendor_telemetry_opens_no_continuation() {
    let mk = |seq: u64, ty: &str| {
        Event::from_value(
            json!({"aep":"0.1","id":format!("t-{seq}"),"type":ty,"time":format!("2026-07-03T10:00:0{seq}Z"),
            "source":"aep://h/agent/claude-code/session/s","agent":"claude-code","session":"s","seq":seq}),
        )
        .unwrap()
    };
    let mut asm = SpanAssembler::new(SpanConfig::default());
    assert!(asm.push(&mk(0, "x.claude-code.otel.api_request")).is_empty(), "in-session: annotates the root");
    asm.push(&mk(1, "session.ended"));
    for seq in 2..6 {
        assert!(asm.push(&mk(seq, "x.claude-code.otel.api_request")).is_empty(), "late telemetry: no span");
    }
    assert_eq!(asm.open_sessions(), 0);
    assert!(asm.flush_all().is_empty());
    // Nor does a late Event of the agent's own (the Codex notify case): no root of its own.
    assert!(asm.push(&mk(7, "x.claude-code.session.note")).is_empty());
    assert!(asm.flush_all().is_empty());
}
