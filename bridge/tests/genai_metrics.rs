//! GenAI metrics from a real Claude Code session: its hooks (captures
//! `s01_tools_bypass_json`, tools with two failures) and its own OTLP log exports, into the
//! real `serve`; `/metrics` must show the counts the recorded data implies.

use aep_testkit as common;

use serde_json::Value;

const HOOKS: &str = include_str!("data/claude-code-s01-hooks.jsonl");
const OTLP: &[&str] = common::CLAUDE_S01_LOGS;

/// The sum of the values of every series of `name` whose line has all of `labels`.
pub fn series(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.split(['{', ' ']).next() == Some(name) && labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// `(records, input tokens, output tokens, with a duration)` of the `api_request` records
/// in the recorded exports, read straight from the OTLP/JSON.
fn api_requests() -> (u64, u64, u64, u64) {
    let mut out = (0, 0, 0, 0);
    for r in OTLP.iter().flat_map(|b| common::otlp_json_records(b)) {
        if common::otlp_json_attr(&r, "event.name").as_deref() != Some("api_request") {
            continue;
        }
        let n = |k: &str| common::otlp_json_attr(&r, k).and_then(|s| s.parse::<u64>().ok());
        out.0 += 1;
        out.1 += n("input_tokens").unwrap_or(0);
        out.2 += n("output_tokens").unwrap_or(0);
        out.3 += u64::from(n("duration_ms").is_some());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_claude_code_session_yields_the_genai_metrics_its_data_implies() {
    let dir = tempfile::tempdir().unwrap();
    let bridge = common::start(common::config(dir.path())).await;
    let mut hooks = std::collections::BTreeMap::<String, u64>::new();
    for line in HOOKS.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        *hooks.entry(v["hook"].as_str().unwrap().to_owned()).or_default() += 1;
        let (status, body) =
            common::post(format!("{}/hooks/claude-code", bridge.url()), v["payload"].to_string(), vec![]).await;
        assert_eq!(status, 200, "{body}");
    }
    for body in OTLP {
        let (status, text) = common::post(format!("{}/v1/logs", bridge.url()), (*body).to_owned(), vec![]).await;
        assert_eq!(status, 200, "{text}");
        assert!(!text.contains("rejected"), "{text}");
    }
    let (calls, input, output, timed) = api_requests();
    assert!(calls > 0 && input > 0, "the capture has model calls");
    let (completed, failed) = (hooks["PostToolUse"] as f64, hooks["PostToolUseFailure"] as f64);
    let agent = "gen_ai_agent_name=\"claude-code\"";

    let (_, text) = common::get(format!("{}/metrics", bridge.url())).await;
    let tools = series(&text, "aep_tool_calls_total", &[agent]);
    let chats = series(&text, "gen_ai_client_operation_duration_seconds_count", &[agent]);
    assert!(tools >= completed + failed && chats >= timed as f64, "metrics did not arrive:\n{text}");
    let chat = "gen_ai_operation_name=\"chat\"";
    let input_l = "gen_ai_token_type=\"input\"";
    let output_l = "gen_ai_token_type=\"output\"";
    let usage = |labels: &[&str], what: &str| series(&text, &format!("gen_ai_client_token_usage_{what}"), labels);
    assert_eq!(usage(&[chat, input_l], "sum"), input as f64, "input tokens of every api_request\n{text}");
    assert_eq!(usage(&[chat, output_l], "sum"), output as f64);
    assert_eq!(usage(&[chat, input_l], "count"), calls as f64, "one point per call");
    assert!(text.contains("gen_ai_request_model=\"claude-opus-4-8\""), "the model the records name");
    assert_eq!(series(&text, "gen_ai_client_operation_duration_seconds_count", &[chat]), timed as f64);
    // Tools: every PostToolUse and PostToolUseFailure, by outcome, each timed from its request.
    let outcome = |o: &str| series(&text, "aep_tool_calls_total", &[&format!("aep_outcome=\"{o}\"")]);
    assert_eq!((outcome("completed"), outcome("failed")), (completed, failed), "{text}");
    assert_eq!(series(&text, "gen_ai_execute_tool_duration_seconds_count", &[agent]), completed + failed);
    assert!(text.contains("gen_ai_tool_name=\"Bash\""), "{text}");
    // Semantic-convention buckets: the token histogram's first boundaries.
    assert!(text.contains("gen_ai_client_token_usage_bucket{") && text.contains("le=\"67108864\""), "{text}");
    // Hook latency: one observation per hook call.
    let hook_calls = HOOKS.lines().count() as f64;
    assert_eq!(series(&text, "aep_hook_duration_seconds_count", &[agent]), hook_calls, "{text}");
    if std::env::var_os("GENAI_DUMP").is_some() {
        eprintln!("{text}");
    }
    // Ids stay off metric attributes.
    assert!(!text.contains("45a2eddb"), "a session id leaked into a label");
    bridge.shutdown().await;
}

/// Input tokens of the `*.api_response` records of a recorded export, from the OTLP/JSON.
fn response_tokens(body: &str) -> (u64, u64) {
    let mut out = (0, 0);
    for r in common::otlp_json_records(body) {
        if common::otlp_json_attr(&r, "event.name").is_some_and(|n| n.ends_with(".api_response")) {
            out.0 += 1;
            out.1 += common::otlp_json_attr(&r, "input_token_count").and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    out
}

/// Real Gemini CLI 0.61 and Qwen Code 0.15 exports: their `api_response` records become
/// token usage and model-call latency under their own agent names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_and_qwen_code_model_calls_are_counted() {
    let runs = [
        (
            "gemini-cli",
            [
                include_str!("data/otlp-captures/gemini-cli/g01_0001_logs.json"),
                include_str!("data/otlp-captures/gemini-cli/g01_0003_logs.json"),
            ],
        ),
        (
            "qwen-code",
            [
                include_str!("data/otlp-captures/qwen-code/q01_0001_logs.json"),
                include_str!("data/otlp-captures/qwen-code/q01_0003_logs.json"),
            ],
        ),
    ];
    let dir = tempfile::tempdir().unwrap();
    let bridge = common::start(common::config(dir.path())).await;
    for (_, bodies) in &runs {
        for body in bodies {
            let (status, text) = common::post(format!("{}/v1/logs", bridge.url()), (*body).to_owned(), vec![]).await;
            assert_eq!(status, 200, "{text}");
        }
    }
    for (agent, bodies) in &runs {
        let (calls, input) = bodies.iter().map(|b| response_tokens(b)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        assert!(calls > 0 && input > 0, "{agent}: the capture has model calls");
        let labels = [format!("gen_ai_agent_name=\"{agent}\""), "gen_ai_token_type=\"input\"".to_owned()];
        let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        let (_, text) = common::get(format!("{}/metrics", bridge.url())).await;
        let (n, sum) = (
            series(&text, "gen_ai_client_token_usage_count", &labels),
            series(&text, "gen_ai_client_token_usage_sum", &labels),
        );
        assert_eq!((n, sum), (calls as f64, input as f64), "{agent}: token usage\n{text}");
        let timed = series(&text, "gen_ai_client_operation_duration_seconds_count", &[labels[0]]);
        assert_eq!(timed, calls as f64, "{agent}: every response has its duration");
    }
    bridge.shutdown().await;
}

/// The real interactive Claude Code session `i01_interactive_permission`: two permission
/// prompts the person allowed in Claude Code's own dialog (its `tool_decision` records say
/// `accept`, `source = user_temporary`), each tool then ran. Both count as answered
/// approvals, none as dismissed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_granted_in_the_agents_own_dialog_count_as_answered() {
    const I01: &str = include_str!("../../adapters/tests/data/claude-code/i01_interactive_permission.jsonl");
    let dir = tempfile::tempdir().unwrap();
    let bridge = common::start(common::config(dir.path())).await;
    for line in I01.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let (status, body) =
            common::post(format!("{}/hooks/claude-code", bridge.url()), v["payload"].to_string(), vec![]).await;
        assert_eq!(status, 200, "{body}");
    }
    let (_, text) = common::get(format!("{}/metrics", bridge.url())).await;
    let resolved =
        |r: &str| series(&text, "aep_attention_resolutions_total", &[&format!("aep_attention_resolution=\"{r}\"")]);
    assert_eq!((resolved("answered"), resolved("dismissed")), (2.0, 0.0), "{text}");
    bridge.shutdown().await;
}
