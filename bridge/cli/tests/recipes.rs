//! The backend recipes of `collector-config/`, run as a user runs them: the real
//! `aep-bridge serve` with each shipped file, fed the recorded Codex (`c01`), Qwen Code
//! (`q01`) and Gemini CLI (`g01`) sessions (their hooks, then their own OTLP log exports).
//!
//! - Every `*.toml` there passes `aep-bridge config validate`, alone and with the header
//!   variables its comments tell the user to set.
//! - The direct recipes (Jaeger, Phoenix, Langfuse, an OTLP SaaS) send only the signals
//!   their backend takes, to the backend's paths, with the headers the file or its
//!   variables give, and lose no model call: checked on a receiver in this test standing at
//!   the recipe's URL (Langfuse's server and the SaaS backends cannot run here).
//! - Phoenix: a real Arize Phoenix (`bridge/tests/requirements-phoenix.txt`) files the spans
//!   under the recipe's project, classifies the chat spans as LLM and totals their tokens.
//! - Grafana: a real rotel (`bridge/tests/requirements-export.txt`) started from
//!   `grafana-lgtm.rotel.env` routes each signal to its own stand-in backend.
//! - `collector`: the Collector YAMLs, validated and each topology run by the project's
//!   Collector distribution, with a real Jaeger v2 and Prometheus 3; `jaeger`: the Jaeger
//!   recipe read back through Jaeger's query API. Those peers are built from their Go
//!   modules by `.ci/peers-go` (`peers` starts them).
//!
//! The Phoenix and rotel tests print SKIP and pass when their package is missing, the Go
//! peers' tests when `.ci/peers-go` has not built them; `.ci/run` installs every
//! `bridge/tests/requirements-*.txt` and builds the Go peers, so CI runs them.

use aep_testkit as common;

use std::collections::BTreeSet;
use std::io::Read as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

#[path = "recipes/collector.rs"]
mod collector;
#[path = "recipes/jaeger.rs"]
mod jaeger;
#[path = "recipes/peers.rs"]
mod peers;

const RECIPES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../collector-config");
const HOOKS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../adapters/tests/data");
const CAPTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/otlp-captures");

/// Longest wait for a process or a backend; generous, for a loaded CI machine.
const WAIT: Duration = Duration::from_secs(90);

/// What the Langfuse recipe tells the user to export, with `$AUTH` =
/// base64("pk-lf-test:sk-lf-test").
const LANGFUSE_HEADERS: &str = "authorization=Basic%20$AUTH,x-langfuse-ingestion-version=4";
const LANGFUSE_AUTH: &str = "cGstbGYtdGVzdDpzay1sZi10ZXN0";
/// What the SaaS recipe tells the user to export (a Grafana Cloud style basic auth).
const SAAS_HEADERS: &str = "authorization=Basic%20MTIzNDU2OmdsY190ZXN0";

fn recipe(name: &str) -> PathBuf {
    Path::new(RECIPES).join(name)
}

fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

// ---------------------------------------------------------------- recorded sessions

/// One recorded session: its hooks, its OTLP log exports, how its model calls are named.
struct Capture {
    vendor: &'static str,
    session: &'static str,
    hooks: &'static str,
    logs: &'static [&'static str],
    /// The `event.name` of its model-call records, and their input and output counts.
    call: (&'static str, &'static str, &'static str),
}

const CODEX: Capture = Capture {
    vendor: "codex",
    session: "01a22a9f-e3e6-71d0-8872-0556d1423eab",
    hooks: "codex/c01_exec_json.jsonl",
    logs: &[
        "codex/c01_0001_logs.json",
        "codex/c01_0003_logs.json",
        "codex/c01_0004_logs.json",
        "codex/c01_0007_logs.json",
    ],
    call: ("codex.sse_event", "input_token_count", "output_token_count"),
};

const QWEN: Capture = Capture {
    vendor: "qwen-code",
    session: "8a03b421-4c8f-40ab-9b43-04b98fb814c0",
    hooks: "qwen-code/q01_tools_yolo_http.jsonl",
    logs: &["qwen-code/q01_0001_logs.json", "qwen-code/q01_0003_logs.json"],
    call: ("qwen-code.api_response", "input_token_count", "output_token_count"),
};

const GEMINI: Capture = Capture {
    vendor: "gemini-cli",
    session: "ed93f2bc-8abb-4a4a-aaad-c1b58706087a",
    hooks: "gemini-cli/g01_tools_yolo_http.jsonl",
    logs: &["gemini-cli/g01_0001_logs.json", "gemini-cli/g01_0003_logs.json"],
    call: ("gemini_cli.api_response", "input_token_count", "output_token_count"),
};

impl Capture {
    fn log_bodies(&self) -> Vec<String> {
        self.logs.iter().map(|f| read(Path::new(CAPTURES).join(f))).collect()
    }

    /// `(model calls, input tokens, output tokens)` as the agent recorded them: its call
    /// records that carry counts (Codex logs each `response.completed` twice, the second
    /// with the counts).
    fn usage(&self) -> (usize, i64, i64) {
        let (name, input, output) = self.call;
        let n = |r: &Value, k: &str| common::otlp_json_attr(r, k).and_then(|s| s.parse::<i64>().ok()).unwrap_or(0);
        let calls: Vec<Value> = self
            .log_bodies()
            .iter()
            .flat_map(|b| common::otlp_json_records(b))
            .filter(|r| common::otlp_json_attr(r, "event.name").as_deref() == Some(name))
            .filter(|r| common::otlp_json_attr(r, input).is_some())
            .collect();
        (calls.len(), calls.iter().map(|r| n(r, input)).sum(), calls.iter().map(|r| n(r, output)).sum())
    }

    /// Posts the hooks, then the log exports, as the agent sent them.
    async fn replay(&self, url: &str) {
        self.replay_hooks(url, None).await;
        self.replay_logs(url, None).await;
    }

    /// `text` with the session id replaced by `as_session` (a copy of the session under
    /// another id), or as recorded.
    fn renamed(&self, text: &str, as_session: Option<&str>) -> String {
        as_session.map_or_else(|| text.to_owned(), |s| text.replace(self.session, s))
    }

    /// Posts the hooks to the bridge at `url`, under the session id `as_session` if given.
    async fn replay_hooks(&self, url: &str, as_session: Option<&str>) {
        for line in read(Path::new(HOOKS).join(self.hooks)).lines().filter(|l| !l.trim().is_empty()) {
            let r: Value = serde_json::from_str(&self.renamed(line, as_session)).unwrap();
            let hook = r["hook"].as_str().unwrap();
            let (status, text) =
                common::post(format!("{url}/hooks/{}/{hook}", self.vendor), r["payload"].to_string(), vec![]).await;
            assert_eq!(status, 200, "{} {hook}: {text}", self.vendor);
        }
    }

    /// Posts the OTLP/JSON log exports to the OTLP/HTTP receiver at `url` (the bridge's
    /// main port, or a Collector's), under the session id `as_session` if given.
    async fn replay_logs(&self, url: &str, as_session: Option<&str>) {
        for body in self.log_bodies() {
            let (status, text) = common::post(format!("{url}/v1/logs"), self.renamed(&body, as_session), vec![]).await;
            assert_eq!(status, 200, "{}: {text}", self.vendor);
        }
    }

    /// How many log records its exports carry.
    fn log_records(&self) -> usize {
        self.log_bodies().iter().map(|b| common::otlp_json_records(b).len()).sum()
    }
}

// ---------------------------------------------------------------- processes

/// Removes the variables `serve` and `config validate` read, so only the test's count.
fn clean(cmd: &mut Command) -> &mut Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if k.starts_with("OTEL_") || k.starts_with("AEP_") {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// A child process, killed on drop (a failed assertion must not leave it running).
struct Proc {
    child: Option<Child>,
    out: common::Output,
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn spawn(cmd: &mut Command) -> Proc {
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let out = common::Output::follow(&mut child);
    Proc { child: Some(child), out }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running `aep-bridge serve --config FILE` on ephemeral ports.
struct Serve {
    proc: Proc,
    url: String,
    /// Its OTLP/gRPC receiver's address, when it has one.
    grpc: Option<String>,
    data: tempfile::TempDir,
}

impl Serve {
    fn start(config: &Path, env: &[(&str, &str)]) -> Serve {
        Self::start_with(config, env, false)
    }

    /// With `otlp_grpc`, its OTLP/gRPC receiver listens on an ephemeral port too.
    fn start_with(config: &Path, env: &[(&str, &str)], otlp_grpc: bool) -> Serve {
        let data = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
        let grpc = if otlp_grpc { "127.0.0.1:0" } else { "" };
        clean(&mut cmd)
            .args(["serve", "--config"])
            .arg(config)
            .args(["--listen", "127.0.0.1:0", "--otlp-grpc", grpc, "--otlp-http", "", "--data-dir"])
            .arg(data.path())
            .env("AEP_BRIDGE_LOG", "warn")
            .envs(env.iter().copied());
        let proc = spawn(&mut cmd);
        let up = proc.out.wait_blocking(WAIT, |t| t.contains("aep-bridge listening:"));
        assert!(up, "serve did not start: {}", proc.out.text());
        let text = proc.out.text();
        let word = |key: &str| text.split_whitespace().find_map(|w| w.strip_prefix(key)).unwrap().to_owned();
        let grpc = Some(word("otlp-grpc=")).filter(|a| a != "off");
        Serve { proc, url: format!("http://{}", word("http=")), grpc, data }
    }

    /// Every Event in its JSONL logs (`{data}/logs/{agent}/*.jsonl`).
    fn logged(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let logs = self.data.path().join("logs");
        for agent in std::fs::read_dir(&logs).unwrap_or_else(|e| panic!("{}: {e}", logs.display())) {
            for file in std::fs::read_dir(agent.unwrap().path()).unwrap() {
                for line in read(file.unwrap().path()).lines().filter(|l| !l.trim().is_empty()) {
                    out.push(serde_json::from_str(line).unwrap());
                }
            }
        }
        out
    }

    /// The ids of every Event in its JSONL logs.
    fn logged_ids(&self) -> BTreeSet<String> {
        self.logged().iter().map(|v| v["id"].as_str().expect("an Event id").to_owned()).collect()
    }

    /// SIGTERM, as a user's Ctrl-C or service manager stops it: the exporters flush what
    /// they hold (the spans' grace included) before it exits. Returns what it printed.
    async fn stop(&mut self) -> String {
        use rustix::process::{Pid, Signal, kill_process};
        let mut child = self.proc.child.take().expect("serve is running");
        kill_process(Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap(), Signal::TERM).unwrap();
        let out = self.proc.out.clone();
        let (status, closed) =
            tokio::task::spawn_blocking(move || (child.wait().unwrap(), out.wait_closed(WAIT))).await.unwrap();
        let text = self.proc.out.text();
        assert!(status.success() && closed, "serve exited with {status}: {text}");
        text
    }
}

/// The path of an absolute URL (`""` when it has none).
fn path_of(url: &str) -> &str {
    let after_scheme = &url[url.find("://").expect("an absolute URL") + 3..];
    after_scheme.find('/').map_or("", |i| &after_scheme[i..])
}

/// `text` (a recipe) with the origin of every `endpoint = "..."` replaced by `origin`, the
/// path kept: the shipped file, pointed at a test backend.
fn pointed_at(text: &str, origin: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let value = line.trim_start().strip_prefix("endpoint = \"").and_then(|r| r.split_once('"'));
        match value {
            Some((url, rest)) => out.push_str(&format!("endpoint = \"{origin}{}\"{rest}", path_of(url))),
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// Writes `text` to a file in `dir`; returns its path.
fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

// ---------------------------------------------------------------- a backend stand-in

/// One request an OTLP/HTTP backend stand-in got: path, headers, body (gunzipped).
#[derive(Clone, Debug)]
struct Got {
    path: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

#[derive(Clone, Default)]
struct Recorder {
    got: Arc<Mutex<Vec<Got>>>,
    seen: Arc<tokio::sync::Notify>,
}

impl Recorder {
    fn all(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// Waits until `done` holds over what arrived, looking again at each request.
    async fn until(&self, what: &str, done: impl Fn(&[Got]) -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let seen = self.seen.notified();
            if done(&self.all()) {
                return;
            }
            let woke = tokio::time::timeout_at(deadline, seen).await;
            assert!(
                woke.is_ok(),
                "{what}: never arrived; got {:?}",
                self.all().iter().map(|g| &g.path).collect::<Vec<_>>()
            );
        }
    }
}

async fn record(
    State(rec): State<Recorder>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> impl axum::response::IntoResponse {
    let mut body = body.to_vec();
    if headers.get("content-encoding").is_some_and(|v| v == "gzip") {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut plain).unwrap();
        body = plain;
    }
    let headers = headers.iter().map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or("").to_owned())).collect();
    rec.got.lock().unwrap().push(Got { path: uri.path().to_owned(), headers, body });
    rec.seen.notify_waiters();
    // An empty protobuf body is an Export*ServiceResponse with full success.
    ([("content-type", "application/x-protobuf")], Vec::<u8>::new())
}

async fn recorder() -> (Recorder, SocketAddr) {
    let rec = Recorder::default();
    let app = axum::Router::new().fallback(record).with_state(rec.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
    (rec, addr)
}

fn spans(got: &[Got]) -> Vec<Span> {
    got.iter()
        .filter(|g| g.path.ends_with("/v1/traces"))
        .flat_map(|g| ExportTraceServiceRequest::decode(&g.body[..]).unwrap().resource_spans)
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans)
        .collect()
}

fn log_event_names(got: &[Got]) -> Vec<String> {
    got.iter()
        .filter(|g| g.path.ends_with("/v1/logs"))
        .flat_map(|g| ExportLogsServiceRequest::decode(&g.body[..]).unwrap().resource_logs)
        .flat_map(|r| r.scope_logs)
        .flat_map(|s| s.log_records)
        .map(|r| r.event_name)
        .collect()
}

fn metric_names(got: &[Got]) -> BTreeSet<String> {
    got.iter()
        .filter(|g| g.path.ends_with("/v1/metrics"))
        .flat_map(|g| ExportMetricsServiceRequest::decode(&g.body[..]).unwrap().resource_metrics)
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics)
        .map(|m| m.name)
        .collect()
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn attr_int(attrs: &[KeyValue], key: &str) -> Option<i64> {
    match attr(attrs, key)? {
        any_value::Value::IntValue(n) => Some(*n),
        _ => None,
    }
}

fn attr_str<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    match attr(attrs, key)? {
        any_value::Value::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The session's `chat` spans: `(count, input tokens, output tokens)`.
fn chat_usage(spans: &[Span], session: &str) -> (usize, i64, i64) {
    let chats: Vec<&Span> = spans
        .iter()
        .filter(|s| attr_str(&s.attributes, "aep.session_id") == Some(session) && s.name.starts_with("chat "))
        .collect();
    let sum = |k: &str| chats.iter().filter_map(|s| attr_int(&s.attributes, k)).sum();
    (chats.len(), sum("gen_ai.usage.input_tokens"), sum("gen_ai.usage.output_tokens"))
}

// ---------------------------------------------------------------- config validate

fn toml_recipes() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(RECIPES)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    out.sort();
    out
}

fn validate(path: &Path, env: &[(&str, &str)]) {
    let out = clean(&mut Command::new(env!("CARGO_BIN_EXE_aep-bridge")))
        .args(["config", "validate"])
        .arg(path)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{}: {text}", path.display());
}

#[test]
fn every_recipe_passes_config_validate() {
    let all = toml_recipes();
    let names: Vec<String> = all.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    for want in ["phoenix.toml", "jaeger.toml", "langfuse.toml", "otlp-saas.toml", "grafana-lgtm.toml"] {
        assert!(names.iter().any(|n| n == want), "{want} missing from {names:?}");
    }
    for p in &all {
        validate(p, &[]);
    }
    // With the header variables the recipes tell the user to export, exactly as written.
    let langfuse = read(recipe("langfuse.toml"));
    assert!(langfuse.contains(&format!("OTEL_EXPORTER_OTLP_TRACES_HEADERS=\"{LANGFUSE_HEADERS}\"")), "{langfuse}");
    validate(&recipe("langfuse.toml"), &[("OTEL_EXPORTER_OTLP_TRACES_HEADERS", &langfuse_headers())]);
    validate(&recipe("otlp-saas.toml"), &[("OTEL_EXPORTER_OTLP_HEADERS", SAAS_HEADERS)]);
}

fn langfuse_headers() -> String {
    LANGFUSE_HEADERS.replace("$AUTH", LANGFUSE_AUTH)
}

// ---------------------------------------------------------------- direct recipes

struct Direct {
    file: &'static str,
    env: Vec<(&'static str, String)>,
    /// The paths the backend gets, and nothing else.
    paths: &'static [&'static str],
    /// Headers every request carries.
    headers: Vec<(&'static str, String)>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_recipes_send_only_what_their_backend_takes() {
    let (calls, input, output) = CODEX.usage();
    assert!(calls > 1 && input > 0 && output > 0, "the capture has model calls with tokens");
    let cases = [
        Direct { file: "jaeger.toml", env: vec![], paths: &["/v1/traces"], headers: vec![] },
        Direct {
            file: "phoenix.toml",
            env: vec![],
            paths: &["/v1/traces"],
            headers: vec![("x-project-name", "aep-bridge".into())],
        },
        Direct {
            file: "langfuse.toml",
            env: vec![("OTEL_EXPORTER_OTLP_TRACES_HEADERS", langfuse_headers())],
            paths: &["/api/public/otel/v1/traces"],
            headers: vec![
                ("authorization", format!("Basic {LANGFUSE_AUTH}")),
                ("x-langfuse-ingestion-version", "4".into()),
            ],
        },
        Direct {
            file: "otlp-saas.toml",
            env: vec![("OTEL_EXPORTER_OTLP_HEADERS", SAAS_HEADERS.into())],
            paths: &["/v1/traces", "/v1/logs", "/v1/metrics"],
            headers: vec![("authorization", "Basic MTIzNDU2OmdsY190ZXN0".into())],
        },
    ];
    let dir = tempfile::tempdir().unwrap();
    for case in &cases {
        let (rec, addr) = recorder().await;
        let file = write(dir.path(), case.file, &pointed_at(&read(recipe(case.file)), &format!("http://{addr}")));
        let env: Vec<(&str, &str)> = case.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let mut bridge = Serve::start(&file, &env);
        CODEX.replay(&bridge.url).await;
        let printed = bridge.stop().await;
        let got = rec.all();
        let paths: BTreeSet<&str> = got.iter().map(|g| g.path.as_str()).collect();
        assert_eq!(paths, case.paths.iter().copied().collect(), "{}: the signals sent", case.file);
        for g in &got {
            assert_eq!(g.header("content-type"), Some("application/x-protobuf"), "{}: {}", case.file, g.path);
            for (k, v) in &case.headers {
                assert_eq!(g.header(k), Some(v.as_str()), "{}: {k} on {}", case.file, g.path);
            }
        }
        assert_eq!(chat_usage(&spans(&got), CODEX.session), (calls, input, output), "{}: every model call", case.file);
        if case.paths.contains(&"/v1/logs") {
            let names = log_event_names(&got);
            assert!(names.iter().any(|n| n == "dev.aep.tool.completed"), "{}: {names:?}", case.file);
            let metrics = metric_names(&got);
            assert!(metrics.contains("gen_ai.client.token.usage"), "{}: {metrics:?}", case.file);
        }
        assert!(!printed.contains("ERROR"), "{}: serve reported errors: {printed}", case.file);
    }
}

// ---------------------------------------------------------------- Phoenix, for real

/// How long Phoenix may take to say it listens. The wait ends at once on its line or on its
/// exit (a crash is seen then), so this only bounds a start that hangs: Phoenix's start
/// (imports, database migrations) is CPU-bound, 83 s measured at load average 16 on two
/// cores, where 90 s (`WAIT`) failed a loaded run with nothing printed yet.
const PHOENIX_UP: Duration = Duration::from_secs(600);

/// A real Phoenix on free ports with its own working directory; `None` (after a SKIP line)
/// when the package is not installed.
fn start_phoenix(test: &str) -> Option<(Proc, u16, tempfile::TempDir)> {
    let installed = Command::new("python3")
        .args(["-c", "import phoenix.server.main"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        eprintln!("SKIP {test}: Arize Phoenix is not installed (pip install -r bridge/tests/requirements-phoenix.txt)");
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let (port, grpc) = (free_port(), free_port());
    let mut cmd = Command::new("python3");
    cmd.args(["-m", "phoenix.server.main", "serve"])
        .current_dir(dir.path())
        .env("PHOENIX_WORKING_DIR", dir.path())
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", grpc.to_string())
        // Nothing leaves the machine, and less to start.
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .env("PHOENIX_DISABLE_AGENT_ASSISTANT", "true")
        .env("PHOENIX_ENABLE_MCP_SERVER", "false")
        .env("PHOENIX_ALLOW_EXTERNAL_RESOURCES", "false")
        .env("PHOENIX_LOG_MIGRATIONS", "false");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PHOENIX_COLLECTOR") || k.to_string_lossy().starts_with("OTEL_") {
            cmd.env_remove(k);
        }
    }
    let proc = spawn(&mut cmd);
    let up = proc.out.wait_blocking(PHOENIX_UP, |t| t.contains("Uvicorn running on"));
    assert!(up, "Phoenix did not start: {}", proc.out.text());
    Some((proc, port, dir))
}

/// Phoenix's GraphQL API.
async fn graphql(base: &str, query: &str) -> Value {
    let (status, text) = common::post(format!("{base}/graphql"), json!({ "query": query }).to_string(), vec![]).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert!(v.get("errors").is_none(), "{text}");
    v
}

/// Every span Phoenix holds in `project`, over its REST API (empty while it has none).
async fn phoenix_spans(base: &str, project: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor = String::new();
    loop {
        let (status, text) = common::get(format!("{base}/v1/projects/{project}/spans?limit=1000{cursor}")).await;
        if status == 404 {
            return out;
        }
        assert_eq!(status, 200, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        out.extend(v["data"].as_array().cloned().unwrap_or_default());
        match v["next_cursor"].as_str() {
            Some(c) => cursor = format!("&cursor={c}"),
            None => return out,
        }
    }
}

fn named<'a>(spans: &'a [Value], session: &str, prefix: &str) -> Vec<&'a Value> {
    spans
        .iter()
        .filter(|s| {
            s["attributes"]["aep.session_id"] == session && s["name"].as_str().unwrap_or("").starts_with(prefix)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn phoenix_recipe_shows_sessions_runs_chats_and_tokens() {
    let test = "phoenix_recipe_shows_sessions_runs_chats_and_tokens";
    let Some((_phoenix, port, _dir)) = start_phoenix(test) else { return };
    let base = format!("http://127.0.0.1:{port}");
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "phoenix.toml", &pointed_at(&read(recipe("phoenix.toml")), &base));
    let mut bridge = Serve::start(&file, &[]);
    let captures = [&CODEX, &GEMINI, &QWEN];
    for c in captures {
        c.replay(&bridge.url).await;
    }
    let printed = bridge.stop().await;
    assert!(!printed.contains("ERROR") && !printed.contains("WARN"), "Phoenix refused something: {printed}");

    // Phoenix inserts what it accepted in the background: wait until every model call is
    // there, asking again after each look.
    let deadline = tokio::time::Instant::now() + WAIT;
    let all = loop {
        let all = phoenix_spans(&base, "aep-bridge").await;
        if captures.iter().all(|c| named(&all, c.session, "chat ").len() == c.usage().0) {
            break all;
        }
        assert!(tokio::time::Instant::now() < deadline, "Phoenix never showed every model call: {} spans", all.len());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let kind = |s: &Value| s["span_kind"].as_str().unwrap_or_default().to_ascii_uppercase();
    let mut want_prompt = 0;
    let mut want_completion = 0;
    for c in captures {
        let (_, input, output) = c.usage();
        want_prompt += input;
        want_completion += output;
        let roots: Vec<&Value> =
            named(&all, c.session, "session ").into_iter().filter(|s| s["parent_id"].is_null()).collect();
        assert_eq!(roots.len(), 1, "{}: one session root", c.vendor);
        assert_eq!(roots[0]["name"], format!("session {}", c.vendor));
        assert_eq!(kind(roots[0]), "AGENT", "{}: {}", c.vendor, roots[0]);
        let runs = named(&all, c.session, &format!("invoke_agent {}", c.vendor));
        assert!(!runs.is_empty() && runs.iter().all(|r| kind(r) == "AGENT"), "{}: runs {runs:?}", c.vendor);
        let tools = named(&all, c.session, "execute_tool ");
        assert!(!tools.is_empty() && tools.iter().all(|t| kind(t) == "TOOL"), "{}: tools {tools:?}", c.vendor);
        let chats = named(&all, c.session, "chat ");
        assert!(chats.iter().all(|s| kind(s) == "LLM"), "{}: chats {chats:?}", c.vendor);
        let run_ids: BTreeSet<&str> = runs.iter().filter_map(|r| r["context"]["span_id"].as_str()).collect();
        assert!(
            chats.iter().all(|s| run_ids.contains(s["parent_id"].as_str().unwrap_or(""))),
            "{}: chats under runs",
            c.vendor
        );
    }
    // Phoenix totals tokens over LLM spans only: its project totals are the agents' own.
    let v = graphql(&base, "{ projects { edges { node { name traceCount tokenCountPrompt tokenCountCompletion } } } }")
        .await;
    let project = v["data"]["projects"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["node"])
        .find(|n| n["name"] == "aep-bridge")
        .cloned()
        .unwrap_or_else(|| panic!("no aep-bridge project: {v}"));
    assert_eq!(
        (project["tokenCountPrompt"].as_f64(), project["tokenCountCompletion"].as_f64()),
        (Some(want_prompt as f64), Some(want_completion as f64)),
        "{project}"
    );
    assert_eq!(project["traceCount"], captures.len(), "one trace per session: {project}");
    eprintln!(
        "Phoenix: {} spans in project aep-bridge, {} traces, tokens {want_prompt} prompt + {want_completion} completion",
        all.len(),
        project["traceCount"]
    );
}

// ---------------------------------------------------------------- Grafana through rotel

/// `KEY=VALUE` lines of an env file (comments and blank lines skipped).
fn env_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("not KEY=VALUE: {l}"));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grafana_recipe_through_rotel_routes_each_signal_to_its_backend() {
    let Some(rotel) = common::rotel_agent() else {
        eprintln!(
            "SKIP grafana_recipe_through_rotel_routes_each_signal_to_its_backend: rotel-agent is not installed \
             (pip install -r bridge/tests/requirements-export.txt)"
        );
        return;
    };
    let shipped = env_file(&read(recipe("grafana-lgtm.rotel.env")));
    // Every variable is one rotel knows: a misspelt one would be ignored without a word.
    let help = Command::new(&rotel).args(["start", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for (k, _) in &shipped {
        assert!(help.contains(&format!("[env: {k}=")), "rotel-agent knows no {k}");
    }
    // The OpenTelemetry Collector file routes the same paths (`collector` runs it).
    let yaml = read(recipe("grafana-lgtm.yaml"));
    for (k, v) in &shipped {
        if let Some(signal) = k.strip_prefix("ROTEL_OTLP_EXPORTER_").and_then(|s| s.strip_suffix("_ENDPOINT")) {
            let path = path_of(v);
            let key = format!("{}_endpoint: ", signal.to_ascii_lowercase());
            let line = yaml.lines().find(|l| l.trim_start().starts_with(&key)).unwrap_or_else(|| panic!("no {key}"));
            assert!(line.trim_end().ends_with(path), "grafana-lgtm.yaml {line:?} is not {path}");
        }
    }

    let mut recs = Vec::new();
    let (grpc, http) = (free_port(), free_port());
    let mut env = Vec::new();
    for (k, v) in &shipped {
        let v = match k.as_str() {
            "ROTEL_OTLP_GRPC_ENDPOINT" => format!("127.0.0.1:{grpc}"),
            "ROTEL_OTLP_HTTP_ENDPOINT" => format!("127.0.0.1:{http}"),
            _ => v.clone(),
        };
        env.push((k.clone(), v));
    }
    for signal in ["TRACES", "LOGS", "METRICS"] {
        let (rec, addr) = recorder().await;
        let key = format!("ROTEL_OTLP_EXPORTER_{signal}_ENDPOINT");
        let slot = env.iter_mut().find(|(k, _)| *k == key).unwrap_or_else(|| panic!("no {key}"));
        let path = path_of(&slot.1).to_owned();
        slot.1 = format!("http://{addr}{path}");
        recs.push((signal, rec, path));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(&rotel);
    cmd.arg("start")
        .arg("--pid-file")
        .arg(dir.path().join("rotel.pid"))
        .arg("--log-file")
        .arg(dir.path().join("rotel.log"))
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let collector = spawn(&mut cmd);
    let up = collector.out.wait_blocking(WAIT, |t| t.contains(common::ROTEL_STARTED));
    assert!(up, "rotel did not start: {}", collector.out.text());

    let file = write(
        dir.path(),
        "grafana-lgtm.toml",
        &pointed_at(&read(recipe("grafana-lgtm.toml")), &format!("http://127.0.0.1:{grpc}")),
    );
    let mut bridge = Serve::start(&file, &[]);
    CODEX.replay(&bridge.url).await;
    let printed = bridge.stop().await;
    assert!(!printed.contains("ERROR"), "serve reported errors: {printed}");

    let (calls, input, output) = CODEX.usage();
    for (signal, rec, path) in &recs {
        match *signal {
            "TRACES" => rec.until("Tempo's spans", |g| chat_usage(&spans(g), CODEX.session).0 == calls).await,
            "LOGS" => {
                let want = ["dev.aep.tool.completed", "dev.aep.session.ended", "dev.aep.x.codex.otel.sse_event"];
                rec.until("Loki's logs", |g| want.iter().all(|w| log_event_names(g).iter().any(|n| n == w))).await;
            }
            _ => rec.until("Prometheus' metrics", |g| metric_names(g).contains("gen_ai.client.token.usage")).await,
        }
        let got = rec.all();
        assert!(
            got.iter().all(|g| &g.path == path),
            "{signal}: only {path}, got {:?}",
            got.iter().map(|g| &g.path).collect::<Vec<_>>()
        );
        if *signal == "TRACES" {
            assert_eq!(chat_usage(&spans(&got), CODEX.session), (calls, input, output), "the chat spans' tokens");
        }
        if *signal == "LOGS" {
            assert!(got.iter().all(|g| g.header("x-scope-orgid") == Some("aep")), "Loki's tenant header");
        }
    }
}
