//! A real Prometheus (Debian's `prometheus` package, `bridge/tests/apt-packages.txt`)
//! scrapes the bridge's `/metrics` after a real Claude Code session (hooks with tools and
//! failures, its OTLP exports, a permission prompt answered in the agent's own dialog), and
//! every metric name the shipped Grafana dashboard queries must exist there.
//! Prints `SKIP` and passes when no `prometheus` binary is installed.

use aep_testkit as common;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

const DASHBOARD: &str = include_str!("../../collector-config/grafana/aep-bridge-dashboard.json");
const HOOKS: &str = include_str!("data/claude-code-s01-hooks.jsonl");
const OTLP: &[&str] = &[
    include_str!("data/otlp-mix/claude-code/s01_0006_logs.json"),
    include_str!("data/otlp-mix/claude-code/s01_0008_logs.json"),
];

fn prometheus() -> Option<PathBuf> {
    let from_env = std::env::var_os("PROMETHEUS").map(PathBuf::from);
    let on_path = std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("prometheus")).find(|p| p.is_file()));
    from_env.or(on_path)
}

/// The metric names of every PromQL expression in the dashboard: an identifier followed by
/// a selector or a range (`name{`, `name[`), or the metric of `label_values(name, ...)`.
fn dashboard_metrics() -> Vec<String> {
    fn exprs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr" | "definition", Value::String(s)) => out.push(s.clone()),
                        _ => exprs(v, out),
                    }
                }
            }
            Value::Array(a) => a.iter().for_each(|v| exprs(v, out)),
            _ => {}
        }
    }
    let dash: Value = serde_json::from_str(DASHBOARD).unwrap();
    let mut all = Vec::new();
    exprs(&dash, &mut all);
    let mut names = Vec::new();
    for e in all.iter().filter(|e| !e.contains("service_name")) {
        let b = e.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i].is_ascii_alphabetic() || b[i] == b'_' {
                let start = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                    i += 1;
                }
                let word = &e[start..i];
                let next = e[i..].trim_start().bytes().next();
                let after_label_values = e[..start].trim_end().ends_with("label_values(");
                if (matches!(next, Some(b'{' | b'[')) || after_label_values) && !names.iter().any(|n| n == word) {
                    names.push(word.to_owned());
                }
            } else {
                i += 1;
            }
        }
    }
    names
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn drive_a_session(base: &str) {
    for line in HOOKS.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let (status, body) = common::post(format!("{base}/hooks/claude-code"), v["payload"].to_string(), vec![]).await;
        assert_eq!(status, 200, "{body}");
    }
    for body in OTLP {
        let (status, text) = common::post(format!("{base}/v1/logs"), (*body).to_owned(), vec![]).await;
        assert_eq!(status, 200, "{text}");
    }
    // A real permission prompt, answered in Claude Code's own dialog: the tool's result
    // settles it (attention.answered allow via oob, attention.resolved answered, with the
    // human's wait).
    let mut ask: Value = serde_json::from_str(include_str!("data/claude-code-permission-request.json")).unwrap();
    let (status, _) = common::post(format!("{base}/hooks/claude-code"), ask.to_string(), vec![]).await;
    assert_eq!(status, 200);
    ask["hook_event_name"] = "PostToolUse".into();
    ask["tool_response"] = serde_json::json!({"stdout": "ok", "stderr": "", "interrupted": false});
    ask["tool_use_id"] = "toolu_prom_1".into();
    let (status, _) = common::post(format!("{base}/hooks/claude-code"), ask.to_string(), vec![]).await;
    assert_eq!(status, 200);
    // And one refused export (a body that is not OTLP/JSON): a 400 the refusal series counts.
    let (status, _) = common::post(format!("{base}/v1/logs"), "{\"resourceLogs\": 7}".into(), vec![]).await;
    assert_eq!(status, 400);
}

/// Serves the bridge's `/metrics` on a port of its own and sends `()` each time a scrape
/// of it begins.
async fn scrape_relay(bridge: String) -> (std::net::SocketAddr, tokio::sync::mpsc::UnboundedReceiver<()>) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let _ = tx.send(());
            let url = format!("{bridge}/metrics");
            async move {
                let (_, text) = common::get(url).await;
                ([("content-type", "text/plain; version=0.0.4; charset=utf-8")], text)
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_every_metric_the_dashboard_queries() {
    let Some(bin) = prometheus() else {
        eprintln!("SKIP: prometheus is not installed (apt-get install prometheus, bridge/tests/apt-packages.txt)");
        return;
    };
    let wanted = dashboard_metrics();
    assert!(wanted.len() >= 10, "the dashboard queries the GenAI and aep metrics: {wanted:?}");

    let dir = tempfile::tempdir().unwrap();
    let bridge = common::start(common::config(&dir.path().join("data"))).await;
    drive_a_session(&bridge.url()).await;
    // Prometheus scrapes through this relay, which says when a scrape began.
    let (scrape_addr, mut scrapes) = scrape_relay(bridge.url()).await;

    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: aep-bridge\n    static_configs:\n      - targets: [\"{}\"]\n",
            scrape_addr
        ),
    )
    .unwrap();
    let log = dir.path().join("prometheus.log");
    let child = Command::new(&bin)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("tsdb").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    let _prometheus = Killed(child);

    let api = format!("http://127.0.0.1:{port}/api/v1");
    // A scrape begins only once the one before it is stored: after two, the series of the
    // first (which saw every metric) are queryable.
    for _ in 0..2 {
        let began = tokio::time::timeout(Duration::from_secs(60), scrapes.recv()).await;
        assert!(
            matches!(began, Ok(Some(()))),
            "Prometheus did not scrape: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    let missing = {
        let names: Vec<String> = tokio::task::spawn_blocking({
            let url = format!("{api}/label/__name__/values");
            move || {
                let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
                let text = agent.get(&url).call().ok().and_then(|mut r| r.body_mut().read_to_string().ok());
                let v: Value = text.and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(Value::Null);
                v["data"]
                    .as_array()
                    .map(|a| a.iter().filter_map(|n| n.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default()
            }
        })
        .await
        .unwrap();
        wanted.iter().filter(|w| !names.contains(w)).cloned().collect::<Vec<_>>()
    };
    let (_, exposition) = common::get(format!("{}/metrics", bridge.url())).await;
    assert!(
        missing.is_empty(),
        "Prometheus has no series for {missing:?}\nprometheus log:\n{}\nexposition:\n{exposition}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    bridge.shutdown().await;
}
