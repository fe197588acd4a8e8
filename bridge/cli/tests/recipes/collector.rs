//! The Collector topologies of `collector-config/`, run by the project's own OpenTelemetry
//! Collector distribution (`otelcol-builder.yaml`, built by `.ci/peers-go`) with real data:
//! every shipped Collector YAML passes `validate`; each topology runs from its shipped file
//! (only addresses overridden) with exact counts end to end.

use super::peers::{GrpcBackend, Jaeger, Otelcol, Prometheus};
use super::*;

use aep_testkit::peers::{JAEGER, OTELCOL, PROMETHEUS3};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::resource::v1::Resource;

/// The Collector configs of `collector-config/`; every `*.yaml` there is one of these or of
/// [`OTHER_YAML`].
const COLLECTOR_YAML: &[&str] = &[
    "agent-collector-bridge.yaml",
    "bridge-collector-backends.yaml",
    "gateway-loadbalancing.yaml",
    "grafana-lgtm.yaml",
];
/// The other YAML files there: the distribution's manifest, Jaeger's and Tempo's configs.
const OTHER_YAML: &[&str] = &["otelcol-builder.yaml", "jaeger-v2.yaml", "tempo.yaml"];

/// The sessions each topology carries.
const SESSIONS: [&Capture; 3] = [&CODEX, &QWEN, &GEMINI];

/// A config file with nothing exported (the bridge's defaults).
fn no_export(dir: &Path) -> PathBuf {
    write(dir, "plain.toml", "# the defaults: the JSONL log, nothing exported\n")
}

/// The log records an OTLP/HTTP backend stand-in got, each with its resource.
fn log_records(got: &[Got]) -> Vec<(Resource, LogRecord)> {
    got.iter()
        .filter(|g| g.path.ends_with("/v1/logs"))
        .flat_map(|g| ExportLogsServiceRequest::decode(&g.body[..]).unwrap().resource_logs)
        .flat_map(|r| {
            let res = r.resource.unwrap_or_default();
            r.scope_logs.into_iter().flat_map(|s| s.log_records).map(move |l| (res.clone(), l))
        })
        .collect()
}

/// `(session, Event type)` of every logged Event, sorted: what a bridge made of its input.
fn session_types(events: &[Value]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = events
        .iter()
        .map(|e| (e["session_id"].as_str().unwrap_or("").to_owned(), e["type"].as_str().unwrap_or("").to_owned()))
        .collect();
    out.sort();
    out
}

#[test]
fn every_collector_yaml_passes_validate() {
    let test = "every_collector_yaml_passes_validate";
    let mut found: Vec<String> = std::fs::read_dir(RECIPES)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    found.sort();
    for n in &found {
        assert!(
            COLLECTOR_YAML.contains(&n.as_str()) || OTHER_YAML.contains(&n.as_str()),
            "{n}: which program runs it?"
        );
    }
    let Some(otelcol) = OTELCOL.or_skip(test) else { return };
    for yaml in COLLECTOR_YAML {
        let out = Command::new(&otelcol).arg("validate").arg("--config").arg(recipe(yaml)).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{yaml}: {text}");
    }
    // Jaeger v2 is a Collector too: its config passes its own validate.
    if let Some(jaeger) = JAEGER.or_skip(test) {
        let out = Command::new(&jaeger).arg("validate").arg("--config").arg(recipe("jaeger-v2.yaml")).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "jaeger-v2.yaml: {text}");
    }
}

// ---------------------------------------------------------------- topology 1

/// Agents -> Collector -> bridge: the agents' OTLP logs reach the bridge through the
/// shipped `agent-collector-bridge.yaml` and become exactly the Events they become when the
/// agents send them to the bridge directly; their traces reach the Collector's traces
/// pipeline (the debug exporter there) span for span.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology1_agents_through_the_collector_to_the_bridge() {
    let Some(otelcol) = OTELCOL.or_skip("topology1_agents_through_the_collector_to_the_bridge") else { return };
    let dir = tempfile::tempdir().unwrap();
    let plain = no_export(dir.path());

    // The same sessions straight into a bridge: what the Collector's path must equal.
    let mut direct = Serve::start(&plain, &[]);
    for c in SESSIONS {
        c.replay(&direct.url).await;
    }
    direct.stop().await;
    let want = session_types(&direct.logged());

    let mut bridge = Serve::start_with(&plain, &[], true);
    let (grpc, http) = (free_port(), free_port());
    let overlay = format!(
        "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:{grpc}\n      http:\n        \
         endpoint: 127.0.0.1:{http}\nexporters:\n  otlp_grpc/aep-bridge:\n    endpoint: {}\n",
        bridge.grpc.as_deref().expect("the bridge's OTLP/gRPC receiver")
    );
    let collector = Otelcol::start(&otelcol, "agent-collector-bridge.yaml", &overlay);
    let agents = format!("http://127.0.0.1:{http}");
    for c in SESSIONS {
        c.replay_hooks(&bridge.url, None).await;
        c.replay_logs(&agents, None).await;
    }
    // Claude Code's own trace exports, into the traces pipeline.
    let traces: Vec<String> = std::fs::read_dir(Path::new(super::CAPTURES).join("claude-code"))
        .unwrap()
        .map(|e| read(e.unwrap().path()))
        .collect();
    let spans: usize = traces.iter().map(|b| common::otlp_json_spans(b).len()).sum();
    for body in &traces {
        let (status, text) = common::post(format!("{agents}/v1/traces"), body.clone(), vec![]).await;
        assert_eq!(status, 200, "{text}");
    }

    let records: usize = SESSIONS.iter().map(|c| c.log_records()).sum();
    let to_bridge = ["exporter=\"otlp_grpc/aep-bridge\""];
    let sent = collector.until_count("otelcol_exporter_sent_log_records_total", &to_bridge, records as u64).await;
    assert_eq!(sent, records as u64, "log records the bridge acknowledged\n{}", collector.log());
    let debug = ["exporter=\"debug\""];
    assert_eq!(collector.until_count("otelcol_exporter_sent_spans_total", &debug, spans as u64).await, spans as u64);
    for failed in ["otelcol_exporter_send_failed_log_records_total", "otelcol_exporter_send_failed_spans_total"] {
        assert_eq!(collector.count(failed, &[]).await, 0, "{failed}");
    }
    let printed = bridge.stop().await;
    assert!(!printed.contains("ERROR"), "{printed}");
    let got = session_types(&bridge.logged());
    assert_eq!(got.len(), want.len(), "Events through the Collector vs straight in");
    assert_eq!(got, want, "the same Events, session by session");
    eprintln!(
        "topology 1: {records} agent log records through the Collector, {} Events as straight in, {spans} agent \
         spans to the traces pipeline",
        got.len()
    );
}

// ---------------------------------------------------------------- topology 2

/// Bridge -> Collector -> Jaeger (real), Tempo (an OTLP/gRPC stand-in: Tempo is AGPL) and
/// Loki (an OTLP/HTTP stand-in: AGPL too), from the shipped `aep-bridge.export.toml` and
/// `bridge-collector-backends.yaml`: every span the Collector took reaches Jaeger and the
/// Tempo stand-in, every Event the bridge logged reaches Loki's path as one log record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology2_bridge_through_the_collector_to_the_backends() {
    let test = "topology2_bridge_through_the_collector_to_the_backends";
    let Some(otelcol) = OTELCOL.or_skip(test) else { return };
    let Some(jaeger_bin) = JAEGER.or_skip(test) else { return };
    let jaeger = Jaeger::start(&jaeger_bin, None);
    let (tempo, tempo_addr) = GrpcBackend::start().await;
    let (loki, loki_addr) = recorder().await;
    let (grpc, http) = (free_port(), free_port());
    let overlay = format!(
        "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:{grpc}\n      http:\n        \
         endpoint: 127.0.0.1:{http}\nexporters:\n  otlp_grpc/jaeger:\n    endpoint: 127.0.0.1:{}\n  \
         otlp_grpc/tempo:\n    endpoint: {tempo_addr}\n  otlp_http/loki:\n    endpoint: http://{loki_addr}/otlp\n",
        jaeger.otlp_grpc
    );
    let collector = Otelcol::start(&otelcol, "bridge-collector-backends.yaml", &overlay);

    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "aep-bridge.export.toml",
        &pointed_at(&read(recipe("aep-bridge.export.toml")), &format!("http://127.0.0.1:{grpc}")),
    );
    let mut bridge = Serve::start(&file, &[]);
    for c in SESSIONS {
        c.replay(&bridge.url).await;
    }
    let printed = bridge.stop().await;
    assert!(!printed.contains("ERROR") && !printed.contains("WARN"), "{printed}");
    let ids = bridge.logged_ids();

    // The bridge flushed before it exited: the Collector has taken all it will take.
    let spans = collector.count("otelcol_receiver_accepted_spans_total", &[]).await;
    let records = collector.count("otelcol_receiver_accepted_log_records_total", &[]).await;
    assert!(spans > 0, "{}", collector.log());
    assert_eq!(records, ids.len() as u64, "one log record per logged Event");
    for (exporter, n, what) in [
        ("otlp_grpc/jaeger", spans, "spans"),
        ("otlp_grpc/tempo", spans, "spans"),
        ("otlp_http/loki", records, "log_records"),
    ] {
        let label = format!("exporter=\"{exporter}\"");
        let sent = collector.until_count(&format!("otelcol_exporter_sent_{what}_total"), &[&label], n).await;
        assert_eq!(sent, n, "{exporter}: {what} sent\n{}", collector.log());
    }
    tempo.until(spans as usize, 0).await;
    assert_eq!(tempo.spans.lock().unwrap().len(), spans as usize, "Tempo's spans");
    loki.until("Loki's log records", |g| log_records(g).len() >= ids.len()).await;
    let got = log_records(&loki.all());
    let got_ids: BTreeSet<String> =
        got.iter().filter_map(|(_, r)| attr_str(&r.attributes, "aep.event_id").map(str::to_owned)).collect();
    assert_eq!((got.len(), &got_ids), (ids.len(), &ids), "every logged Event, once, at Loki");
    let services: BTreeSet<&str> =
        got.iter().filter_map(|(res, _)| attr_str(&res.attributes, "service.name")).collect();
    assert_eq!(services, SESSIONS.iter().map(|c| c.vendor).collect(), "Loki's service_name label: the agents");

    let services: Vec<&str> = SESSIONS.iter().map(|c| c.vendor).collect();
    let traces = jaeger.until_spans(&services, spans as usize).await;
    let in_jaeger: usize = traces.iter().map(|t| t["spans"].as_array().map_or(0, Vec::len)).sum();
    assert_eq!(in_jaeger, spans as usize, "Jaeger's spans");
    assert_eq!(traces.len(), SESSIONS.len(), "one trace per session in Jaeger");
    eprintln!(
        "topology 2: {spans} spans to Jaeger and the Tempo stand-in, {records} log records to the Loki stand-in, \
         {} traces",
        traces.len()
    );
}

// ---------------------------------------------------------------- topology 3

/// Copies of each session per edge in topology 3 (under new session ids): 8 x 3 sessions
/// over two backends. A session's trace id is derived from its source and id, so which
/// backend each goes to is the same on every run (13 and 11 here).
const COPIES: usize = 8;

/// The data points of one resource's metrics.
fn points_of(r: &opentelemetry_proto::tonic::metrics::v1::ResourceMetrics) -> usize {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    r.scope_metrics
        .iter()
        .flat_map(|s| &s.metrics)
        .map(|m| match &m.data {
            Some(Data::Sum(d)) => d.data_points.len(),
            Some(Data::Gauge(d)) => d.data_points.len(),
            Some(Data::Histogram(d)) => d.data_points.len(),
            Some(Data::ExponentialHistogram(d)) => d.data_points.len(),
            Some(Data::Summary(d)) => d.data_points.len(),
            None => 0,
        })
        .sum()
}

/// Many bridges -> the Collector gateway (`gateway-loadbalancing.yaml`) -> two backends:
/// three edge bridges, each of its own tenant (`aep-bridge.edge.toml`), replay 8 sessions
/// each; the gateway's load-balancing exporter puts every span and log record of a session
/// on one backend (by trace id) and each edge's metrics on one (by resource), both backends
/// get sessions, nothing is lost, and every request to a backend carries the tenant of the
/// edge the session came from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology3_gateway_keeps_each_session_on_one_backend_with_its_tenant() {
    let Some(otelcol) = OTELCOL.or_skip("topology3_gateway_keeps_each_session_on_one_backend_with_its_tenant") else {
        return;
    };
    let backends = [GrpcBackend::start().await, GrpcBackend::start().await];
    let (grpc, http, health) = (free_port(), free_port(), free_port());
    let queue = tempfile::tempdir().unwrap();
    let overlay = format!(
        "extensions:\n  health_check:\n    endpoint: 127.0.0.1:{health}\n  file_storage:\n    directory: {}\nreceivers:\n  otlp:\n    protocols:\n      \
         grpc:\n        endpoint: 127.0.0.1:{grpc}\n      http:\n        endpoint: 127.0.0.1:{http}\nexporters:\n  \
         loadbalancing:\n    resolver:\n      static:\n        hostnames: [\"{b0}\", \"{b1}\"]\n  loadbalancing/metrics:\n    \
         resolver:\n      static:\n        hostnames: [\"{b0}\", \"{b1}\"]\n",
        queue.path().display(),
        b0 = backends[0].1,
        b1 = backends[1].1
    );
    let gateway = Otelcol::start(&otelcol, "gateway-loadbalancing.yaml", &overlay);
    let (status, _) = common::get(format!("http://127.0.0.1:{health}/")).await;
    assert_eq!(status, 200, "health_check answers");

    let dir = tempfile::tempdir().unwrap();
    let edge = read(recipe("aep-bridge.edge.toml"));
    assert!(edge.contains("\"x-scope-orgid\" = \"team-a\""), "{edge}");
    // session id -> the tenant of the edge that replayed it.
    let mut tenant_of = std::collections::BTreeMap::new();
    let mut logged = 0;
    for (i, c) in SESSIONS.iter().enumerate() {
        let tenant = format!("team-{}", ["a", "b", "c"][i]);
        let text = pointed_at(&edge, &format!("http://127.0.0.1:{grpc}")).replace("team-a", &tenant);
        let file = write(dir.path(), &format!("edge-{i}.toml"), &text);
        let mut bridge = Serve::start(&file, &[]);
        for k in 0..COPIES {
            let session = format!("{}{k:04}", &c.session[..c.session.len() - 4]);
            c.replay_hooks(&bridge.url, Some(&session)).await;
            c.replay_logs(&bridge.url, Some(&session)).await;
            tenant_of.insert(session, tenant.clone());
        }
        let printed = bridge.stop().await;
        assert!(!printed.contains("ERROR") && !printed.contains("WARN"), "edge {i}: {printed}");
        logged += bridge.logged_ids().len();
    }

    let spans = gateway.count("otelcol_receiver_accepted_spans_total", &[]).await as usize;
    let records = gateway.count("otelcol_receiver_accepted_log_records_total", &[]).await as usize;
    let points = gateway.count("otelcol_receiver_accepted_metric_points_total", &[]).await as usize;
    assert_eq!(records, logged, "one log record per logged Event");
    assert!(points > 0, "the edges' metrics reached the gateway");
    let deadline = tokio::time::Instant::now() + WAIT;
    let total = || -> (usize, usize, usize) {
        let s = backends.iter().map(|(b, _)| b.spans.lock().unwrap().len()).sum();
        let l = backends.iter().map(|(b, _)| b.logs.lock().unwrap().len()).sum();
        let m = backends
            .iter()
            .flat_map(|(b, _)| b.metrics.lock().unwrap().iter().map(|(_, r)| points_of(r)).collect::<Vec<_>>())
            .sum();
        (s, l, m)
    };
    while total() != (spans, records, points) && tokio::time::Instant::now() < deadline {
        // Two backends, one count: wake on either.
        let _ = tokio::time::timeout(
            Duration::from_millis(500),
            futures_util::future::select(
                Box::pin(backends[0].0.seen.notified()),
                Box::pin(backends[1].0.seen.notified()),
            ),
        )
        .await;
    }
    assert_eq!(
        total(),
        (spans, records, points),
        "(spans, log records, metric points) at the backends\n{}",
        gateway.log()
    );
    // Each edge's metrics (its tenant's) on one backend, with its tenant header.
    let mut metrics_at: std::collections::BTreeMap<String, BTreeSet<usize>> = Default::default();
    for (i, (b, _)) in backends.iter().enumerate() {
        for (tenant, _) in b.metrics.lock().unwrap().iter() {
            metrics_at.entry(tenant.clone().expect("the tenant header of a metrics request")).or_default().insert(i);
        }
    }
    assert_eq!(metrics_at.len(), 3, "every edge's metrics: {metrics_at:?}");
    assert!(metrics_at.values().all(|at| at.len() == 1), "each bridge's series on one backend: {metrics_at:?}");

    // Where each session went, and with which tenant.
    let mut backend_of: std::collections::BTreeMap<String, BTreeSet<usize>> = Default::default();
    let mut traces_of: std::collections::BTreeMap<String, BTreeSet<Vec<u8>>> = Default::default();
    for (i, (b, _)) in backends.iter().enumerate() {
        for (tenant, span) in b.spans.lock().unwrap().iter() {
            let session = attr_str(&span.attributes, "aep.session_id").expect("a session span").to_owned();
            assert_eq!(tenant.as_ref(), tenant_of.get(&session), "{session}: the tenant header of its spans");
            backend_of.entry(session.clone()).or_default().insert(i);
            traces_of.entry(session).or_default().insert(span.trace_id.clone());
        }
    }
    assert_eq!(backend_of.len(), tenant_of.len(), "every session reached a backend");
    for (session, at) in &backend_of {
        assert_eq!(at.len(), 1, "{session}: all its spans on one backend, got {at:?}");
        assert_eq!(traces_of[session].len(), 1, "{session}: one trace");
    }
    let per_backend: Vec<usize> = (0..2).map(|i| backend_of.values().filter(|at| at.contains(&i)).count()).collect();
    assert!(per_backend.iter().all(|n| *n > 0), "both backends get sessions: {per_backend:?}");
    for (i, (b, _)) in backends.iter().enumerate() {
        for (tenant, record) in b.logs.lock().unwrap().iter() {
            let session = attr_str(&record.attributes, "aep.session_id").unwrap_or_default().to_owned();
            assert_eq!(tenant.as_ref(), tenant_of.get(&session), "{session}: the tenant header of its logs");
            assert_eq!(backend_of[&session], BTreeSet::from([i]), "{session}: its logs beside its spans");
        }
    }
    eprintln!(
        "topology 3: {} sessions from 3 edges, {spans} spans and {records} log records through the gateway, sessions \
         per backend {per_backend:?}",
        tenant_of.len()
    );
}

/// The gateway loses nothing it acknowledged: an edge's sessions taken by the gateway while
/// its backend is away, the gateway then killed (SIGKILL: no flush at all) and the edge
/// stopped (its cursors past them: it will not send them again), then the backend back and
/// the gateway started again on the same queue directory: every span and log record
/// reaches the backend, with its tenant. With the in-memory queue and batch processor the
/// YAML had before, all of them were lost here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology3_gateway_keeps_what_it_acknowledged_across_a_kill() {
    let test = "topology3_gateway_keeps_what_it_acknowledged_across_a_kill";
    let Some(otelcol) = OTELCOL.or_skip(test) else {
        return;
    };
    let backend_port = free_port();
    let (grpc, http) = (free_port(), free_port());
    let queue = tempfile::tempdir().unwrap();
    let overlay = || {
        format!(
            "extensions:\n  health_check:\n    endpoint: 127.0.0.1:{}\n  file_storage:\n    directory: {}\nreceivers:\n  \
             otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:{grpc}\n      http:\n        endpoint: \
             127.0.0.1:{http}\nexporters:\n  loadbalancing:\n    resolver:\n      static:\n        hostnames: \
             [\"127.0.0.1:{backend_port}\"]\n  loadbalancing/metrics:\n    resolver:\n      static:\n        \
             hostnames: [\"127.0.0.1:{backend_port}\"]\n",
            free_port(),
            queue.path().display()
        )
    };
    let gateway = Otelcol::start(&otelcol, "gateway-loadbalancing.yaml", &overlay());

    let dir = tempfile::tempdir().unwrap();
    let edge = pointed_at(&read(recipe("aep-bridge.edge.toml")), &format!("http://127.0.0.1:{grpc}"));
    let mut bridge = Serve::start(&write(dir.path(), "edge.toml", &edge), &[]);
    for k in 0..COPIES {
        let c = SESSIONS[k % SESSIONS.len()];
        let session = format!("{}{k:04}", &c.session[..c.session.len() - 4]);
        c.replay_hooks(&bridge.url, Some(&session)).await;
        c.replay_logs(&bridge.url, Some(&session)).await;
    }
    // SIGTERM: the edge's exporters flush to the gateway (which acknowledges into its queue).
    bridge.stop().await;
    let logged = bridge.logged_ids().len() as u64;
    let records = gateway.until_count("otelcol_receiver_accepted_log_records_total", &[], logged).await;
    assert_eq!(records, logged, "the gateway acknowledged every Event's log record");
    let spans = gateway.count("otelcol_receiver_accepted_spans_total", &[]).await;
    assert!(spans > 0, "and the sessions' spans");
    drop(gateway); // SIGKILL, its backend never reached

    let (backend, _) = GrpcBackend::start_on(backend_port).await;
    let _gateway = Otelcol::start(&otelcol, "gateway-loadbalancing.yaml", &overlay());
    backend.until(spans as usize, records as usize).await;
    let (s, l) = (backend.spans.lock().unwrap(), backend.logs.lock().unwrap());
    let ids: BTreeSet<Vec<u8>> = s.iter().map(|(_, span)| span.span_id.clone()).collect();
    assert_eq!(ids.len() as u64, spans, "every span the gateway took, after its kill");
    assert_eq!(l.len() as u64, records, "every log record, once");
    assert!(
        s.iter().all(|(t, _)| t.as_deref() == Some("team-a")) && l.iter().all(|(t, _)| t.as_deref() == Some("team-a")),
        "the tenant header kept on disk with each request"
    );
    eprintln!("gateway killed with {spans} spans and {records} log records queued: all delivered after its restart");
}

// ---------------------------------------------------------------- grafana-lgtm.yaml

/// Each panel of the shipped Grafana dashboard with its PromQL, `$agent` as All, `$team`
/// and `$developer` as the bridge's (`team-a`, `alice`), the rate
/// interval 1m and the range 1h.
fn dashboard_queries() -> Vec<(String, String)> {
    let dash: Value =
        serde_json::from_str(&read(Path::new(RECIPES).join("grafana/aep-bridge-dashboard.json"))).unwrap();
    let mut out = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(expr) = t["expr"].as_str() else { continue };
            if p["datasource"]["type"] != "prometheus" {
                continue;
            }
            let expr = expr.replace("$agent", ".*").replace("$team", "team-a").replace("$developer", "alice");
            let expr = expr.replace("$__rate_interval", "1m").replace("$__range", "1h");
            out.push((p["title"].as_str().unwrap_or_default().to_owned(), expr));
        }
    }
    out
}

/// A permission prompt of a real Claude Code session, answered in the agent's own dialog
/// (the tool's result settles it): what the dashboard's approval panels count.
async fn claude_permission(url: &str) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data");
    let mut ask: Value = serde_json::from_str(&read(data.join("claude-code-permission-request.json"))).unwrap();
    let (status, text) = common::post(format!("{url}/hooks/claude-code"), ask.to_string(), vec![]).await;
    assert_eq!(status, 200, "{text}");
    // Its PostToolUse, as Claude Code sends it: no suggestions (an unknown field is drift,
    // which the bridge warns about).
    ask.as_object_mut().unwrap().remove("permission_suggestions");
    ask["hook_event_name"] = "PostToolUse".into();
    ask["tool_response"] = json!({"stdout": "42", "stderr": "", "interrupted": false});
    ask["tool_use_id"] = "toolu_grafana_1".into();
    let (status, text) = common::post(format!("{url}/hooks/claude-code"), ask.to_string(), vec![]).await;
    assert_eq!(status, 200, "{text}");
}

/// The bridge -> the Collector of `grafana-lgtm.yaml` -> one backend per signal: spans only
/// at Tempo's path, logs only at Loki's (with its tenant), metrics into a real Prometheus 3
/// through its OTLP receiver, where PromQL finds the bridge's GenAI metrics with the labels
/// the dashboard groups by, their token totals the agents' own, and the dashboard's
/// queries return series.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grafana_lgtm_through_the_collector_into_prometheus() {
    let test = "grafana_lgtm_through_the_collector_into_prometheus";
    let Some(otelcol) = OTELCOL.or_skip(test) else { return };
    let Some(prometheus_bin) = PROMETHEUS3.or_skip(test) else { return };
    let prometheus = Prometheus::start(&prometheus_bin);
    let (tempo, tempo_addr) = recorder().await;
    let (loki, loki_addr) = recorder().await;
    let (grpc, http) = (free_port(), free_port());
    let overlay = format!(
        "receivers:\n  otlp:\n    protocols:\n      grpc:\n        endpoint: 127.0.0.1:{grpc}\n      http:\n        \
         endpoint: 127.0.0.1:{http}\nexporters:\n  otlp_http/tempo:\n    traces_endpoint: \
         http://{tempo_addr}/v1/traces\n  otlp_http/loki:\n    logs_endpoint: http://{loki_addr}/otlp/v1/logs\n  \
         otlp_http/prometheus:\n    metrics_endpoint: {}\n",
        prometheus.otlp_url()
    );
    let collector = Otelcol::start(&otelcol, "grafana-lgtm.yaml", &overlay);

    // The shipped file, pointed at this Collector; metrics every second instead of 15 so
    // that rate() has two samples within the test.
    let shipped = read(recipe("grafana-lgtm.toml"));
    assert!(shipped.contains("metrics_interval_ms = 15000"), "{shipped}");
    let text = pointed_at(&shipped, &format!("http://127.0.0.1:{grpc}"))
        .replace("metrics_interval_ms = 15000", "metrics_interval_ms = 1000")
        + "\n[fleet]\nteam = \"team-a\"\nuser = \"alice\"\n";
    let dir = tempfile::tempdir().unwrap();
    let mut bridge = Serve::start(&write(dir.path(), "grafana-lgtm.toml", &text), &[]);
    for c in SESSIONS {
        c.replay(&bridge.url).await;
    }
    claude_permission(&bridge.url).await;
    // Two exports of the token usage after the last session: rate() over them.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let n = prometheus.query("count_over_time(gen_ai_client_token_usage_count[5m])").await;
        if n.iter().any(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) >= 3.0) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "Prometheus has no token usage samples:\n{}", collector.log());
        // The bridge pushes every second; Prometheus has no signal of its own.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let printed = bridge.stop().await;
    assert!(!printed.contains("ERROR") && !printed.contains("WARN"), "{printed}");

    // Token totals per agent and type: the agents' own.
    for c in SESSIONS {
        let (_, input, output) = c.usage();
        for (kind, want) in [("input", input), ("output", output)] {
            let q = format!(
                "sum(gen_ai_client_token_usage_sum{{gen_ai_agent_name=\"{}\",gen_ai_token_type=\"{kind}\"}})",
                c.vendor
            );
            let r = prometheus.query(&q).await;
            let got = r.first().and_then(|s| s["value"][1].as_str()).and_then(|v| v.parse::<f64>().ok());
            assert_eq!(got, Some(want as f64), "{q}: {r:?}");
        }
    }
    // The labels the dashboard groups by, on the GenAI series.
    for (metric, labels) in [
        ("gen_ai_client_token_usage_sum", &["gen_ai_agent_name", "gen_ai_request_model", "gen_ai_token_type"][..]),
        ("gen_ai_invoke_agent_duration_seconds_count", &["gen_ai_agent_name"][..]),
        ("aep_tool_calls_total", &["gen_ai_agent_name", "gen_ai_tool_name", "aep_outcome"][..]),
    ] {
        let r = prometheus.query(metric).await;
        assert!(!r.is_empty(), "{metric}: no series");
        for s in &r {
            for l in labels {
                assert!(s["metric"][l].is_string(), "{metric} has no {l}: {s}");
            }
        }
    }
    // The dashboard's Agent variable: `label_values(aep_bridge_events_in_total, gen_ai_agent_name)`.
    let agents: BTreeSet<String> = prometheus
        .query("aep_bridge_events_in_total")
        .await
        .iter()
        .filter_map(|s| s["metric"]["gen_ai_agent_name"].as_str().map(str::to_owned))
        .collect();
    for c in SESSIONS {
        assert!(agents.contains(c.vendor), "the Agent variable lists {}: {agents:?}", c.vendor);
    }
    // The Team and Developer variables: every series carries the bridge's identity from
    // its OTLP resource (promoted to labels by Prometheus' otlp.promote_resource_attributes).
    let series = prometheus.query("aep_bridge_events_in_total").await;
    for (label, want) in [("aep_team", "team-a"), ("user_name", "alice")] {
        assert!(series.iter().all(|s| s["metric"][label] == want), "{label} = {want} on every series: {series:?}");
    }
    assert!(series.iter().all(|s| s["metric"]["host_name"].is_string()), "host_name: {series:?}");
    let mut answered = Vec::new();
    let mut empty = Vec::new();
    for (title, expr) in dashboard_queries() {
        let n = prometheus.query(&expr).await.len();
        eprintln!("dashboard: {n:>3} series  {title}: {expr}");
        if n > 0 { &mut answered } else { &mut empty }.push(title);
    }
    answered.dedup();
    empty.retain(|t| !answered.contains(t));
    empty.dedup();
    eprintln!("dashboard panels with series: {answered:?}; without: {empty:?}");
    // Every Prometheus panel: the sessions have model calls, runs, tools, hooks and a
    // permission prompt answered in the agent's dialog.
    assert!(empty.is_empty() && answered.len() >= 10, "panels without series: {empty:?}");

    // Spans only at Tempo's path, logs only at Loki's with the tenant, all of them.
    let spans = collector.count("otelcol_receiver_accepted_spans_total", &[]).await as usize;
    tempo.until("Tempo's spans", |g| super::spans(g).len() >= spans).await;
    let got = tempo.all();
    assert!(got.iter().all(|g| g.path == "/v1/traces"), "Tempo: only /v1/traces");
    assert_eq!(super::spans(&got).len(), spans, "Tempo's spans");
    let ids = bridge.logged_ids();
    loki.until("Loki's logs", |g| log_records(g).len() >= ids.len()).await;
    let got = loki.all();
    assert!(got.iter().all(|g| g.path == "/otlp/v1/logs" && g.header("x-scope-orgid") == Some("aep")), "Loki");
    assert_eq!(log_records(&got).len(), ids.len(), "Loki's log records: one per Event");
}
