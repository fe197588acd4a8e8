//! The bridge's metrics over OTLP: the GenAI instruments reach an OTLP/HTTP
//! receiver as `ExportMetricsServiceRequest`s, with the configured temporality, after a
//! real Claude Code session's own OTLP logs went through `serve`.

use aep_testkit as common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use aep_bridge::export::{Compression, MetricsTemporality, Protocol};
use axum::body::Bytes;
use axum::extract::State;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{AggregationTemporality, Metric, metric::Data};
use prost::Message as _;

const OTLP: &[&str] = &[
    include_str!("data/otlp-mix/claude-code/s01_0006_logs.json"),
    include_str!("data/otlp-mix/claude-code/s01_0008_logs.json"),
    include_str!("data/otlp-mix/claude-code/s01_0010_logs.json"),
];

type Got = Arc<Mutex<Vec<ExportMetricsServiceRequest>>>;

/// What the receiver kept, and a wake-up per request kept.
#[derive(Clone, Default)]
struct Received {
    got: Got,
    seen: Arc<tokio::sync::Notify>,
}

impl Received {
    /// Waits until what was kept satisfies `pred`; `false` after `timeout`.
    async fn until(&self, timeout: Duration, pred: impl Fn(&[ExportMetricsServiceRequest]) -> bool) -> bool {
        common::until_notified(&self.seen, timeout, || pred(&self.got.lock().unwrap())).await
    }
}

/// An OTLP/HTTP metrics receiver: decodes every `/v1/metrics` body and keeps it.
async fn receiver() -> (std::net::SocketAddr, Received) {
    let rec = Received::default();
    let app = axum::Router::new()
        .route(
            "/v1/metrics",
            axum::routing::post(|State(r): State<Received>, body: Bytes| async move {
                match ExportMetricsServiceRequest::decode(body) {
                    Ok(req) => {
                        r.got.lock().unwrap().push(req);
                        r.seen.notify_waiters();
                        (axum::http::StatusCode::OK, Vec::new())
                    }
                    Err(_) => (axum::http::StatusCode::BAD_REQUEST, Vec::new()),
                }
            }),
        )
        .with_state(rec.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    (addr, rec)
}

fn metrics_named<'a>(reqs: &'a [ExportMetricsServiceRequest], name: &str) -> Vec<&'a Metric> {
    reqs.iter()
        .flat_map(|r| &r.resource_metrics)
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .filter(|m| m.name == name)
        .collect()
}

/// `(temporality, sum of input-token points)` of the token histogram in one request.
fn input_tokens(m: &Metric) -> Option<(i32, f64)> {
    let Some(Data::Histogram(h)) = &m.data else { return None };
    let input = h
        .data_points
        .iter()
        .filter(|p| {
            p.attributes.iter().any(|kv| kv.key == "gen_ai.token.type" && format!("{:?}", kv.value).contains("input"))
        })
        .map(|p| p.sum.unwrap_or(0.0))
        .sum();
    Some((h.aggregation_temporality, input))
}

/// A bridge config exporting only metrics, as uncompressed protobuf, to `addr`.
fn metrics_only(dir: &std::path::Path, addr: std::net::SocketAddr, interval_ms: u64) -> aep_bridge::config::Config {
    let mut cfg = common::config(dir);
    cfg.export.otlp.endpoint = Some(format!("http://{addr}").parse().unwrap());
    cfg.export.otlp.protocol = Protocol::HttpProtobuf;
    cfg.export.otlp.compression = Compression::None;
    cfg.export.otlp.logs = false;
    cfg.export.otlp.spans = false;
    cfg.export.otlp.metrics_interval_ms = interval_ms;
    cfg
}

async fn run(temporality: MetricsTemporality) -> Vec<ExportMetricsServiceRequest> {
    let (addr, got) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = metrics_only(dir.path(), addr, 200);
    cfg.export.otlp.metrics_temporality = temporality;
    let bridge = common::start(cfg).await;
    for body in OTLP {
        let (status, text) = common::post(format!("{}/v1/logs", bridge.url()), (*body).to_owned(), vec![]).await;
        assert_eq!(status, 200, "{text}");
    }
    // Enough intervals for the session's points and a few quiet collections after them.
    let counts = |g: &[ExportMetricsServiceRequest]| (metrics_named(g, "gen_ai.client.token.usage").len(), g.len());
    let arrived = got
        .until(Duration::from_secs(20), |g| {
            let n = counts(g);
            // Cumulative: every collection after the session carries it; delta: only the first.
            let quiet_after = if temporality == MetricsTemporality::Delta { n.0 + 3 } else { 4 };
            n.0 >= 1 && n.1 >= quiet_after
        })
        .await;
    assert!(arrived, "metrics did not arrive: {:?}", counts(&got.got.lock().unwrap()));
    bridge.shutdown().await;
    got.got.lock().unwrap().clone()
}

fn expected_input_tokens() -> f64 {
    let records = OTLP.iter().flat_map(|b| common::otlp_json_records(b));
    records
        .filter(|r| common::otlp_json_attr(r, "event.name").as_deref() == Some("api_request"))
        .filter_map(|r| common::otlp_json_attr(&r, "input_tokens")?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cumulative_metrics_carry_the_sessions_tokens_in_every_collection() {
    let want = expected_input_tokens();
    assert!(want > 0.0);
    let got = run(MetricsTemporality::Cumulative).await;
    let tokens: Vec<(i32, f64)> =
        metrics_named(&got, "gen_ai.client.token.usage").into_iter().filter_map(input_tokens).collect();
    assert!(!tokens.is_empty());
    assert!(tokens.iter().all(|(t, _)| *t == AggregationTemporality::Cumulative as i32), "{tokens:?}");
    assert_eq!(tokens.last().unwrap().1, want, "the last collection holds the whole session: {tokens:?}");
    let m = metrics_named(&got, "gen_ai.client.token.usage")[0];
    assert_eq!(m.unit, "{token}");
    assert!(!metrics_named(&got, "gen_ai.client.operation.duration").is_empty());
    // The bridge's own counters ride along, under the same OTel naming scheme (Prometheus
    // renders this one `aep_bridge_events_in_total`).
    let own = metrics_named(&got, "aep.bridge.events.in");
    assert!(!own.is_empty(), "the bridge's own counters ride along");
    assert_eq!(own[0].unit, "{event}");
    let names: std::collections::BTreeSet<&str> = got
        .iter()
        .flat_map(|r| &r.resource_metrics)
        .filter(|rm| resource_attr(rm, "service.name").as_deref() == Some("aep-bridge"))
        .flat_map(|rm| &rm.scope_metrics)
        .flat_map(|s| &s.metrics)
        .map(|m| m.name.as_str())
        .collect();
    assert!(names.iter().all(|n| n.starts_with("gen_ai.") || n.starts_with("aep.")), "one naming scheme: {names:?}");
    assert!(names.contains("aep.bridge.events.dropped"), "{names:?}");
}

fn resource_attr(rm: &opentelemetry_proto::tonic::metrics::v1::ResourceMetrics, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    let kv = rm.resource.as_ref()?.attributes.iter().find(|kv| kv.key == key)?;
    match kv.value.as_ref()?.value.as_ref()? {
        V::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// The metrics resource names the bridge (the SDK's default is `unknown_service:aep-bridge`)
/// and its version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_resource_is_the_bridge() {
    let got = run(MetricsTemporality::Cumulative).await;
    let own: Vec<_> = got
        .iter()
        .flat_map(|r| &r.resource_metrics)
        .filter(|rm| rm.scope_metrics.iter().any(|s| s.metrics.iter().any(|m| m.name == "gen_ai.client.token.usage")))
        .collect();
    assert!(!own.is_empty());
    for rm in own {
        assert_eq!(resource_attr(rm, "service.name").as_deref(), Some("aep-bridge"));
        assert_eq!(resource_attr(rm, "service.version").as_deref(), Some(env!("CARGO_PKG_VERSION")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delta_metrics_count_each_token_once() {
    let want = expected_input_tokens();
    let got = run(MetricsTemporality::Delta).await;
    let tokens: Vec<(i32, f64)> =
        metrics_named(&got, "gen_ai.client.token.usage").into_iter().filter_map(input_tokens).collect();
    assert!(tokens.iter().all(|(t, _)| *t == AggregationTemporality::Delta as i32), "{tokens:?}");
    let total: f64 = tokens.iter().map(|(_, s)| s).sum();
    assert_eq!(total, want, "delta collections add up to the session, each token once: {tokens:?}");
}

/// The agents' own OTLP metrics (here an OTLP/JSON request shaped like Claude Code's
/// `claude_code.token.usage`) are forwarded unchanged to the same metrics endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vendor_metrics_are_forwarded_unchanged() {
    let (addr, got) = receiver().await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = metrics_only(dir.path(), addr, 60_000);
    let bridge = common::start(cfg).await;
    let body = serde_json::json!({"resourceMetrics": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "claude-code"}}]},
        "scopeMetrics": [{"scope": {"name": "com.anthropic.claude_code"}, "metrics": [{
            "name": "claude_code.token.usage", "unit": "tokens",
            "sum": {"aggregationTemporality": 1, "isMonotonic": true, "dataPoints": [{
                "asDouble": 1225.0, "timeUnixNano": "1796011452016000000",
                "attributes": [{"key": "type", "value": {"stringValue": "input"}}]}]}}]}]}]});
    let (status, text) = common::post(format!("{}/v1/metrics", bridge.url()), body.to_string(), vec![]).await;
    assert_eq!(status, 200, "{text}");
    let found =
        |g: &[ExportMetricsServiceRequest]| metrics_named(g, "claude_code.token.usage").into_iter().next().cloned();
    assert!(got.until(Duration::from_secs(10), |g| found(g).is_some()).await, "the vendor metric was not forwarded");
    let forwarded = found(&got.got.lock().unwrap()).unwrap();
    let Some(Data::Sum(s)) = &forwarded.data else { panic!("{forwarded:?}") };
    assert_eq!(s.data_points.len(), 1);
    assert_eq!(
        s.data_points[0].value,
        Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsDouble(1225.0))
    );
    assert_eq!(forwarded.unit, "tokens");
    let req = got
        .got
        .lock()
        .unwrap()
        .iter()
        .find(|r| !metrics_named(std::slice::from_ref(r), "claude_code.token.usage").is_empty())
        .cloned()
        .unwrap();
    let svc = &req.resource_metrics[0].resource.as_ref().unwrap().attributes[0];
    assert_eq!((svc.key.as_str(), format!("{:?}", svc.value).contains("claude-code")), ("service.name", true));
    bridge.shutdown().await;
}
