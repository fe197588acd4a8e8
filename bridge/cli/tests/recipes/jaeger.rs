//! `jaeger.toml` against a real Jaeger v2 (`jaeger-v2.yaml`, in-memory storage), read back
//! through Jaeger's query API as its UI reads it: one trace per session, the session root
//! with its runs under it, the tools and model calls under their runs, their names, kinds
//! and GenAI attributes as collector-config/README.md describes them.

use super::peers::Jaeger;
use super::*;

use aep_testkit::peers::JAEGER;

/// A span's tag `key` (Jaeger's JSON: `tags: [{key, type, value}]`).
fn tag<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    span["tags"].as_array()?.iter().find(|t| t["key"] == key).map(|t| &t["value"])
}

fn tag_str<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    tag(span, key)?.as_str()
}

/// The span's parent in its trace (its `CHILD_OF` reference), if any.
fn parent(span: &Value) -> Option<&str> {
    span["references"].as_array()?.iter().find(|r| r["refType"] == "CHILD_OF")?["spanID"].as_str()
}

fn name(span: &Value) -> &str {
    span["operationName"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jaeger_recipe_shows_each_session_as_one_tree() {
    let test = "jaeger_recipe_shows_each_session_as_one_tree";
    let Some(bin) = JAEGER.or_skip(test) else { return };
    let jaeger = Jaeger::start(&bin, None);
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "jaeger.toml",
        &pointed_at(&read(recipe("jaeger.toml")), &format!("http://127.0.0.1:{}", jaeger.otlp_http)),
    );
    let mut bridge = Serve::start(&file, &[]);
    let captures = [&CODEX, &GEMINI, &QWEN];
    for c in captures {
        c.replay(&bridge.url).await;
    }
    let printed = bridge.stop().await;
    assert!(!printed.contains("ERROR") && !printed.contains("WARN"), "Jaeger refused something: {printed}");

    // jaeger-v2.yaml stores each request before answering it, and the bridge flushed before
    // it exited: Jaeger holds every span now.
    let mut total = 0;
    for c in captures {
        let traces = jaeger.traces(c.vendor).await;
        assert_eq!(traces.len(), 1, "{}: one trace per session; services {:?}", c.vendor, jaeger.services().await);
        let trace = &traces[0];
        let service =
            trace["processes"].as_object().unwrap().values().map(|p| p["serviceName"].clone()).collect::<Vec<_>>();
        assert!(service.iter().all(|s| s == c.vendor), "{}: service {service:?}", c.vendor);
        let spans = trace["spans"].as_array().unwrap();
        total += spans.len();
        let ids: BTreeSet<&str> = spans.iter().filter_map(|s| s["spanID"].as_str()).collect();
        for s in spans {
            assert_eq!(tag_str(s, "aep.session_id"), Some(c.session), "{}: {}", c.vendor, name(s));
            if let Some(p) = parent(s) {
                assert!(ids.contains(p), "{}: {} has its parent in the trace", c.vendor, name(s));
            }
        }

        let roots: Vec<&Value> = spans.iter().filter(|s| parent(s).is_none()).collect();
        assert_eq!(roots.len(), 1, "{}: one root", c.vendor);
        let root = roots[0];
        let root_id = root["spanID"].as_str().unwrap();
        assert_eq!(name(root), format!("session {}", c.vendor));
        assert_eq!(tag_str(root, "gen_ai.conversation.id"), Some(c.session), "{root}");
        assert_eq!(tag_str(root, "gen_ai.agent.name"), Some(c.vendor), "{root}");
        assert_eq!(tag(root, "gen_ai.operation.name"), None, "the root is no operation: {root}");

        let runs: Vec<&Value> = spans.iter().filter(|s| name(s) == format!("invoke_agent {}", c.vendor)).collect();
        assert!(!runs.is_empty(), "{}: runs", c.vendor);
        let run_ids: BTreeSet<&str> = runs.iter().filter_map(|r| r["spanID"].as_str()).collect();
        for r in &runs {
            assert_eq!(parent(r), Some(root_id), "{}: a run under the session", c.vendor);
            assert_eq!(tag_str(r, "gen_ai.operation.name"), Some("invoke_agent"), "{r}");
        }

        let tools: Vec<&Value> = spans.iter().filter(|s| name(s).starts_with("execute_tool ")).collect();
        assert!(!tools.is_empty(), "{}: tools", c.vendor);
        for t in &tools {
            assert!(run_ids.contains(parent(t).unwrap_or_default()), "{}: {} under a run", c.vendor, name(t));
            assert_eq!(tag_str(t, "gen_ai.operation.name"), Some("execute_tool"), "{t}");
            let tool = tag_str(t, "gen_ai.tool.name").unwrap_or_else(|| panic!("no gen_ai.tool.name: {t}"));
            assert_eq!(name(t), format!("execute_tool {tool}"));
            // The call id, where the agent's hooks name one (Gemini CLI's do not).
            if c.vendor != "gemini-cli" {
                assert!(tag_str(t, "gen_ai.tool.call.id").is_some(), "{t}");
            }
        }

        let chats: Vec<&Value> = spans.iter().filter(|s| name(s).starts_with("chat ")).collect();
        let (calls, input, output) = c.usage();
        assert_eq!(chats.len(), calls, "{}: one chat span per model call", c.vendor);
        let sum = |k: &str| chats.iter().filter_map(|s| tag(s, k)?.as_i64()).sum::<i64>();
        assert_eq!(
            (sum("gen_ai.usage.input_tokens"), sum("gen_ai.usage.output_tokens")),
            (input, output),
            "{}: the agent's own token counts",
            c.vendor
        );
        for s in &chats {
            assert!(run_ids.contains(parent(s).unwrap_or_default()), "{}: {} under a run", c.vendor, name(s));
            assert_eq!(tag_str(s, "span.kind"), Some("client"), "{s}");
            assert_eq!(tag_str(s, "gen_ai.operation.name"), Some("chat"), "{s}");
            assert_eq!(name(s), format!("chat {}", tag_str(s, "gen_ai.request.model").unwrap_or_default()));
        }
        for s in spans.iter().filter(|s| !name(s).starts_with("chat ")) {
            assert_ne!(tag_str(s, "span.kind"), Some("client"), "{}: {} is no client span", c.vendor, name(s));
        }
        eprintln!(
            "Jaeger {}: trace {} with {} spans: 1 session, {} runs, {} tools, {} chats ({input} + {output} tokens)",
            c.vendor,
            trace["traceID"].as_str().unwrap_or_default(),
            spans.len(),
            runs.len(),
            tools.len(),
            chats.len()
        );
    }
    assert!(total > 0);
}
