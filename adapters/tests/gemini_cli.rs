//! Gemini CLI: every captured real payload maps without error onto the Annex A.3 types or
//! the vendor namespace; never attention.* (observe-only).

mod common;

use aep_adapters::vendors::gemini_cli;
use aep_adapters::{HookCall, MapContext, SessionState};

use common::{check_postures, core, load, replay};
use serde_json::{Value, json};

/// The core types beyond `common::LIFECYCLE` this vendor maps onto.
const MORE_CORE: &[&str] = &["tool.failed", "progress.status"];

const CAPTURE: &str = include_str!("data/gemini-cli/g01_tools_yolo_http.jsonl");

#[test]
fn every_captured_payload_maps() {
    check_postures(gemini_cli::adapter().as_ref(), "gemini-cli", CAPTURE, &core(MORE_CORE));
}

#[test]
fn captured_run_pairs_every_tool_and_stays_in_one_run() {
    let drafts = replay(gemini_cli::adapter().as_ref(), &load(CAPTURE), &MapContext::default());
    let requested: Vec<_> = drafts.iter().filter(|d| d.r#type == "tool.requested").collect();
    let completed: Vec<_> = drafts.iter().filter(|d| d.r#type == "tool.completed").collect();
    assert_eq!(requested.len(), 4);
    assert_eq!(completed.len(), 4);
    for (r, c) in requested.iter().zip(&completed) {
        assert_eq!(r.correlation_key, c.cause_key);
        assert_eq!(r.run.as_deref(), Some("r1"));
        assert_eq!(c.run.as_deref(), Some("r1"));
    }
    let model = drafts.iter().find(|d| d.r#type == "x.gemini-cli.session.before_model").unwrap();
    assert_eq!(model.data["model"], "gemini-2.5-pro");
    assert_eq!(model.data.len(), 1, "only the model id rides");
    assert!(drafts.iter().all(|d| d.time.is_some()), "the vendor timestamp is the event time");
}

/// The captured `(BeforeTool, AfterTool)` pairs, plus a failed read built from the captured
/// read (another path, and the vendor's `tool_response.error` shape as the Annex A.3 fixture
/// pins it): two calls each of `run_shell_command` and `read_file`.
fn captured_tool_pairs() -> Vec<(Value, Value)> {
    let records = load(CAPTURE);
    let of = |hook: &str| records.iter().filter(|(h, _)| h == hook).map(|(_, p)| p.clone()).collect::<Vec<_>>();
    let mut pairs: Vec<(Value, Value)> = of("BeforeTool").into_iter().zip(of("AfterTool")).collect();
    let (mut before, mut after) =
        pairs.iter().find(|(b, _)| b["tool_name"] == "read_file").cloned().expect("a captured read");
    let missing = json!({"file_path": "/home/dev/agents/work/gemini/project/missing.txt",
        "absolute_path": "/home/dev/agents/work/gemini/project/missing.txt"});
    before["tool_input"] = missing.clone();
    after["tool_input"] = missing;
    after["tool_response"] = json!({"error": {"type": "FileNotFound", "message": "no such file: missing.txt"}});
    pairs.push((before, after));
    pairs
}

/// Every permutation of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![Vec::new()];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

/// Gemini fires BeforeTool hooks concurrently and their AfterTools finish in any order:
/// every interleaving (all requests first, outcomes in each of the 120 orders) pairs each
/// outcome with its own request, the failed read included, because AfterTool repeats
/// `tool_input`.
#[test]
fn concurrent_tool_calls_pair_by_their_input_in_every_order() {
    let pairs = captured_tool_pairs();
    assert_eq!(pairs.len(), 5);
    let a = gemini_cli::adapter();
    let cx = MapContext::default();
    for order in permutations(pairs.len()) {
        let mut st = SessionState::default();
        let mut map = |p: &Value| a.map(&HookCall { event: None, payload: p }, &mut st, &cx).unwrap();
        let keys: Vec<_> = pairs.iter().map(|(b, _)| map(b)[0].correlation_key.clone().expect("a key")).collect();
        for &i in &order {
            let out = map(&pairs[i].1);
            assert_eq!(out[0].cause_key.as_ref(), Some(&keys[i]), "order {order:?}: outcome {i} ({})", out[0].r#type);
        }
    }
}

/// An AfterTool that does not repeat the input (or repeats one no request had) is paired as
/// before: in order per tool name.
#[test]
fn an_outcome_without_a_matching_input_pairs_in_order() {
    let pairs = captured_tool_pairs();
    let shells: Vec<_> = pairs.iter().filter(|(b, _)| b["tool_name"] == "run_shell_command").collect();
    let a = gemini_cli::adapter();
    let cx = MapContext::default();
    let mut st = SessionState::default();
    let mut map = |p: &Value| a.map(&HookCall { event: None, payload: p }, &mut st, &cx).unwrap();
    let first = map(&shells[0].0)[0].correlation_key.clone();
    let second = map(&shells[1].0)[0].correlation_key.clone();
    let mut bare = shells[1].1.clone();
    bare.as_object_mut().unwrap().remove("tool_input");
    assert_eq!(map(&bare)[0].cause_key, first);
    let mut other = shells[0].1.clone();
    other["tool_input"] = json!({"command": "never requested"});
    assert_eq!(map(&other)[0].cause_key, second);
}
