use super::*;
use aep_adapters::otel::content::ContentTable;
use opentelemetry_proto::tonic::common::v1::{InstrumentationScope, KeyValueList};
use opentelemetry_proto::tonic::logs::v1::{ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::metrics::v1::{Gauge, NumberDataPoint, ResourceMetrics, ScopeMetrics};
use opentelemetry_proto::tonic::trace::v1::span::{Event, Link};
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Status};
use prost::Message as _;

fn s(v: &str) -> AnyValue {
    AnyValue { value: Some(any_value::Value::StringValue(v.to_owned())) }
}

fn kv(k: &str, v: AnyValue) -> KeyValue {
    KeyValue { key: k.to_owned(), value: Some(v), ..Default::default() }
}

fn int(i: i64) -> AnyValue {
    AnyValue { value: Some(any_value::Value::IntValue(i)) }
}

fn get<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a AnyValue> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| kv.value.as_ref())
}

fn str_of(v: Option<&AnyValue>) -> Option<&str> {
    match v?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s),
        _ => None,
    }
}

fn withheld(attrs: &[KeyValue]) -> Vec<String> {
    match get(attrs, WITHHELD).and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::ArrayValue(a)) => {
            a.values.iter().filter_map(|v| str_of(Some(v)).map(str::to_owned)).collect()
        }
        _ => Vec::new(),
    }
}

fn gate(c: Capture) -> CaptureGate {
    CaptureGate::new(c, RedactConfig::default())
}

/// Claude Code's interaction and tool spans, as recorded with the content switches on.
fn claude_spans(prompt: &str, command: &str) -> ExportTraceServiceRequest {
    let interaction = Span {
        name: "claude_code.interaction".into(),
        attributes: vec![
            kv("session.id", s("ea049876-f1ef-4fc9-9be8-beb01ad8eef7")),
            kv("user_prompt", s(prompt)),
            kv("user_prompt_length", int(prompt.len() as i64)),
            kv("user.id", s("db486ad2b2cc8978748edbc66a83ce5c80e0b767ab539b14c55b153394b0a290")),
        ],
        ..Default::default()
    };
    let tool = Span {
        name: "claude_code.tool".into(),
        attributes: vec![
            kv("tool_name", s("Bash")),
            kv("full_command", s(command)),
            kv("gen_ai.tool.call.id", s("toolu_c3df22ae7ffa472685804aef")),
        ],
        events: vec![Event {
            name: "tool.output".into(),
            attributes: vec![kv("output", s("hi")), kv("bash_command", s(command))],
            ..Default::default()
        }],
        status: Some(Status {
            message: "File does not exist. Note: your current working directory is /home/dev/agents/work/cc/project."
                .into(),
            code: 2,
        }),
        ..Default::default()
    };
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", s("claude-code")), kv("service.version", s("2.1.197"))],
                ..Default::default()
            }),
            scope_spans: vec![ScopeSpans { spans: vec![interaction, tool], ..Default::default() }],
            ..Default::default()
        }],
    }
}

const SECRET_TOKEN: &str = "ghp_0123456789abcdefghijABCDEFGHIJ012345";

#[test]
fn at_metadata_the_prompt_and_the_command_are_withheld_and_named() {
    let prompt = format!("Run tools with {SECRET_TOKEN}");
    let mut req = claude_spans(&prompt, "rm -rf ./scratch_dir_for_permission_test");
    let g = gate(Capture::Metadata).traces(&mut req);
    let bytes = req.encode_to_vec();
    for needle in [prompt.as_str(), "rm -rf", "scratch_dir", "File does not exist", "db486ad2b2cc"] {
        assert!(!contains(&bytes, needle.as_bytes()), "{needle} left");
    }
    let spans = &req.resource_spans[0].scope_spans[0].spans;
    assert_eq!(withheld(&spans[0].attributes), ["user_prompt", "user.id"]);
    assert_eq!(withheld(&spans[1].attributes), ["(status.message)", "full_command"]);
    assert_eq!(withheld(&spans[1].events[0].attributes), ["output", "bash_command"]);
    // Structure stays: names, ids, lengths, the tool's name.
    assert_eq!(spans[0].name, "claude_code.interaction");
    assert_eq!(str_of(get(&spans[0].attributes, "session.id")), Some("ea049876-f1ef-4fc9-9be8-beb01ad8eef7"));
    assert!(get(&spans[0].attributes, "user_prompt_length").is_some());
    assert_eq!(str_of(get(&spans[1].attributes, "tool_name")), Some("Bash"));
    assert_eq!(g, Gated { withheld: 6, redacted: 0 });
    let res = &req.resource_spans[0].resource.as_ref().unwrap().attributes;
    assert_eq!(str_of(get(res, CAPTURE)), Some("metadata"));
}

#[test]
fn at_redacted_text_passes_the_pipeline_and_full_content_is_withheld() {
    let prompt = format!("Run tools with {SECRET_TOKEN} from /home/alice/project");
    let mut req = claude_spans(&prompt, "curl -H 'Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345' x");
    let g = gate(Capture::Redacted).traces(&mut req);
    let spans = &req.resource_spans[0].scope_spans[0].spans;
    assert_eq!(
        str_of(get(&spans[0].attributes, "user_prompt")),
        Some("Run tools with [REDACTED:secret] from ~/project"),
        "a prompt is redacted text: it stays, redacted"
    );
    assert_eq!(withheld(&spans[1].attributes), ["full_command"], "a command is full-only");
    assert_eq!(
        spans[1].status.as_ref().unwrap().message,
        "File does not exist. Note: your current working directory is ~/agents/work/cc/project."
    );
    assert!(!contains(&req.encode_to_vec(), b"abcdefghijklmnopqrstuvwxyz012345"));
    assert_eq!(g.redacted, 2);
}

#[test]
fn at_full_nothing_changes() {
    let mut req = claude_spans("a prompt", "ls");
    let before = req.clone();
    assert_eq!(gate(Capture::Full).traces(&mut req), Gated::default());
    assert_eq!(req, before);
}

#[test]
fn unknown_values_are_judged_by_their_length_and_none_keeps_numbers_only() {
    let long = "x".repeat(LONG_TEXT + 1);
    let attrs = || {
        vec![
            kv("new.free_text", s(&long)),
            kv("new.short", s(&"y".repeat(LONG_TEXT))),
            kv("new.count", int(3)),
            kv(
                "new.list",
                AnyValue {
                    value: Some(any_value::Value::ArrayValue(ArrayValue {
                        values: vec![s(&long[..40]), s(&long[..40])],
                    })),
                },
            ),
        ]
    };
    let logs = |body: AnyValue| ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs {
                log_records: vec![LogRecord { attributes: attrs(), body: Some(body), ..Default::default() }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let rec = |r: &ExportLogsServiceRequest| r.resource_logs[0].scope_logs[0].log_records[0].clone();

    let mut req = logs(s("Tool call: run_shell_command. Decision: auto_accept. Success: true. Duration: 3761ms."));
    gate(Capture::Metadata).logs(&mut req);
    let r = rec(&req);
    assert_eq!(withheld(&r.attributes), ["(body)", "new.free_text", "new.list"]);
    assert!(r.body.is_none());
    assert!(get(&r.attributes, "new.short").is_some() && get(&r.attributes, "new.count").is_some());

    let mut req = logs(s("claude_code.tool_result"));
    gate(Capture::Metadata).logs(&mut req);
    assert_eq!(str_of(rec(&req).body.as_ref()), Some("claude_code.tool_result"), "a short body is structure");

    let mut req = logs(s("claude_code.tool_result"));
    gate(Capture::None).logs(&mut req);
    let r = rec(&req);
    assert_eq!(withheld(&r.attributes), ["(body)", "new.free_text", "new.short", "new.list"]);
    assert_eq!(r.attributes.len(), 2, "the count and the marker");

    let mut req = logs(s(&format!("{long} {SECRET_TOKEN}")));
    gate(Capture::Redacted).logs(&mut req);
    let r = rec(&req);
    assert!(str_of(r.body.as_ref()).unwrap().ends_with(" [REDACTED:secret]"));
    assert_eq!(str_of(get(&r.attributes, "new.free_text")), Some(long.as_str()));
}

#[test]
fn map_bodies_are_judged_entry_by_entry_and_genai_message_bodies_always() {
    let map = AnyValue {
        value: Some(any_value::Value::KvlistValue(KeyValueList {
            values: vec![kv("role", s("user")), kv("prompt", s("hi")), kv("n", int(1))],
        })),
    };
    let mut req = ExportLogsServiceRequest {
        resource_logs: vec![ResourceLogs {
            scope_logs: vec![ScopeLogs {
                log_records: vec![
                    LogRecord { body: Some(map), ..Default::default() },
                    LogRecord { event_name: "gen_ai.user.message".into(), body: Some(s("hi")), ..Default::default() },
                ],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    gate(Capture::Metadata).logs(&mut req);
    let recs = &req.resource_logs[0].scope_logs[0].log_records;
    assert_eq!(withheld(&recs[0].attributes), ["(body).prompt"]);
    let Some(any_value::Value::KvlistValue(l)) = recs[0].body.as_ref().and_then(|b| b.value.as_ref()) else {
        panic!("the map body stays")
    };
    assert_eq!(l.values.iter().map(|kv| kv.key.as_str()).collect::<Vec<_>>(), ["role", "n"]);
    assert_eq!(withheld(&recs[1].attributes), ["(body)"], "a two-byte prompt, named by the GenAI table");
}

#[test]
fn credential_keys_and_configured_secret_names_are_full_only_and_senders_markers_are_dropped() {
    let cfg = RedactConfig { secret_names: vec!["MY_SERVICE_PASS".into()], ..RedactConfig::default() };
    let mut req = ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope { name: "x".into(), ..Default::default() }),
                metrics: vec![Metric {
                    name: "claude_code.token.usage".into(),
                    data: Some(Data::Gauge(Gauge {
                        data_points: vec![NumberDataPoint {
                            attributes: vec![
                                kv("http.request.header.authorization", s("Bearer x")),
                                kv("my_service_pass", s("p")),
                                kv("user.email", s("a@b.c")),
                                kv("type", s("input")),
                                kv(WITHHELD, s("smuggled text")),
                            ],
                            ..Default::default()
                        }],
                    })),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let mut red = req.clone();
    CaptureGate::new(Capture::Metadata, cfg.clone()).metrics(&mut req);
    CaptureGate::new(Capture::Redacted, cfg).metrics(&mut red);
    for r in [&req, &red] {
        let Some(Data::Gauge(g)) = &r.resource_metrics[0].scope_metrics[0].metrics[0].data else { panic!() };
        let attrs = &g.data_points[0].attributes;
        assert_eq!(withheld(attrs), ["http.request.header.authorization", "my_service_pass", "user.email"]);
        assert_eq!(attrs.len(), 2, "the type and the marker");
        assert!(!contains(&r.encode_to_vec(), b"smuggled"));
    }
}

#[test]
fn long_names_are_free_text_and_bytes_are_never_rewritten() {
    let long = format!("bash -c 'cat {}'", "/home/alice/secrets.txt ".repeat(4));
    let mut req = ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            scope_spans: vec![ScopeSpans {
                spans: vec![Span {
                    name: long.clone(),
                    attributes: vec![kv(
                        "blob",
                        AnyValue { value: Some(any_value::Value::BytesValue(vec![7; LONG_TEXT + 1])) },
                    )],
                    links: vec![Link { attributes: vec![kv("gen_ai.prompt", s("p"))], ..Default::default() }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    let mut red = req.clone();
    gate(Capture::Metadata).traces(&mut req);
    let span = &req.resource_spans[0].scope_spans[0].spans[0];
    assert_eq!(span.name, NAME_WITHHELD);
    assert_eq!(withheld(&span.attributes), ["(name)", "blob"]);
    assert_eq!(withheld(&span.links[0].attributes), ["gen_ai.prompt"]);
    gate(Capture::Redacted).traces(&mut red);
    let span = &red.resource_spans[0].scope_spans[0].spans[0];
    assert!(span.name.contains("~/secrets.txt"), "{}", span.name);
    assert_eq!(withheld(&span.attributes), ["blob"], "bytes cannot be redacted: withheld");
}

#[test]
fn every_vendor_table_reaches_the_gate() {
    let g = gate(Capture::Metadata);
    for t in aep_adapters::vendors::content_tables() {
        for a in t.attrs {
            let key = match a.key {
                Key::Exact(k) => k.to_owned(),
                Key::Indexed(p) => format!("{p}0.content"),
                Key::Prefix(p) => format!("{p}x"),
            };
            let rule = g.rule(&key).unwrap_or_else(|| panic!("{}: {key} unknown to the gate", t.source));
            assert!(rule.level >= a.level, "{key}: the gate's level is the highest of the tables'");
        }
    }
    let vendors: Vec<&str> = aep_adapters::vendors::content_tables().map(|t| t.source).collect();
    for v in ["claude-code", "codex", "gemini-cli", "qwen-code", "vscode"] {
        assert!(vendors.contains(&v), "{v} has no table");
    }
    let _: &ContentTable = &aep_adapters::otel::content::GENAI;
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    /// Every content key the tables name (pattern keys made concrete), with its rule as the
    /// gate merges it.
    fn content_keys() -> Vec<(String, Capture, ContentKind)> {
        let g = gate(Capture::Metadata);
        let mut keys: Vec<String> = aep_adapters::vendors::content_tables()
            .flat_map(|t| t.attrs.iter())
            .map(|a| match a.key {
                Key::Exact(k) => k.to_owned(),
                Key::Indexed(p) => format!("{p}3.content"),
                Key::Prefix(p) => format!("{p}0.message.content"),
            })
            .chain(["api_key", "http.request.header.cookie"].map(str::to_owned))
            .collect();
        keys.sort();
        keys.dedup();
        keys.into_iter()
            .map(|k| {
                let r = g.rule(&k).expect("a table key");
                (k, r.level, r.kind)
            })
            .collect()
    }

    /// One generated value: `kind` 0 = a table key's content, 1 = an unknown long text,
    /// 2 = an unknown short text, 3 = an unknown short text in an array; `site` where it rides.
    #[derive(Debug, Clone)]
    struct Item {
        kind: u8,
        key: usize,
        site: u8,
        text: String,
        secret: bool,
    }

    fn item() -> impl Strategy<Value = Item> {
        (0u8..4, 0usize..1000, 0u8..8, "[a-z]{8,30}", 65usize..300, any::<bool>()).prop_map(
            |(kind, key, site, word, long, secret)| {
                let text = if kind == 1 { format!("{word}{}", "q".repeat(long)) } else { word };
                Item { kind, key, site, text, secret }
            },
        )
    }

    /// The value of item `i`: its tag (unique in the request), text and maybe a secret.
    fn value_of(i: usize, it: &Item) -> (String, String) {
        let secret = format!("ghp_{:0>36}", i);
        let text = if it.secret && it.kind != 2 && it.kind != 3 {
            format!("T{i}T {} {secret}", it.text)
        } else {
            format!("T{i}T {}", it.text)
        };
        (text, secret)
    }

    /// One item's expectation: its key, text, planted secret, rule (`None`: unknown).
    type Expect = (String, String, Option<String>, Option<(Capture, ContentKind)>);

    struct Built {
        traces: ExportTraceServiceRequest,
        logs: ExportLogsServiceRequest,
        metrics: ExportMetricsServiceRequest,
        expect: Vec<Expect>,
    }

    fn build(items: &[Item], keys: &[(String, Capture, ContentKind)]) -> Built {
        let mut res = Vec::new();
        let (mut span, mut event, mut link, mut scope) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut log, mut body, mut point) = (Vec::new(), Vec::new(), Vec::new());
        let mut expect = Vec::new();
        for (i, it) in items.iter().enumerate() {
            let (text, secret) = value_of(i, it);
            let (key, rule) = match it.kind {
                0 => {
                    let (k, l, kind) = &keys[it.key % keys.len()];
                    (k.clone(), Some((*l, *kind)))
                }
                _ => (format!("unknown.k{i}"), None),
            };
            let value = if it.kind == 3 {
                AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values: vec![s(&text)] })) }
            } else {
                s(&text)
            };
            let planted = (it.secret && it.kind != 2 && it.kind != 3).then_some(secret);
            expect.push((key.clone(), text, planted, rule));
            let target = match it.site {
                0 => &mut res,
                1 => &mut span,
                2 => &mut event,
                3 => &mut link,
                4 => &mut scope,
                5 => &mut log,
                6 => &mut body,
                _ => &mut point,
            };
            target.push(kv(&key, value));
        }
        let resource = Some(Resource { attributes: res, ..Default::default() });
        let scope = Some(InstrumentationScope { attributes: scope, ..Default::default() });
        let traces = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: resource.clone(),
                scope_spans: vec![ScopeSpans {
                    scope: scope.clone(),
                    spans: vec![Span {
                        name: "s".into(),
                        attributes: span,
                        events: vec![Event { name: "e".into(), attributes: event, ..Default::default() }],
                        links: vec![Link { attributes: link, ..Default::default() }],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let logs = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: resource.clone(),
                scope_logs: vec![ScopeLogs {
                    scope: scope.clone(),
                    log_records: vec![LogRecord {
                        attributes: log,
                        body: Some(AnyValue {
                            value: Some(any_value::Value::KvlistValue(KeyValueList { values: body })),
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let metrics = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource,
                scope_metrics: vec![ScopeMetrics {
                    scope,
                    metrics: vec![Metric {
                        name: "m".into(),
                        data: Some(Data::Gauge(Gauge {
                            data_points: vec![NumberDataPoint { attributes: point, ..Default::default() }],
                        })),
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        Built { traces, logs, metrics, expect }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// No string of a content attribute above the ceiling survives in any signal, a
        /// planted secret never survives at `redacted`, what the ceiling admits is kept.
        #[test]
        fn nothing_above_the_ceiling_survives(items in proptest::collection::vec(item(), 1..40)) {
            let keys = content_keys();
            for ceiling in [Capture::None, Capture::Metadata, Capture::Redacted] {
                let mut b = build(&items, &keys);
                let g = gate(ceiling);
                g.traces(&mut b.traces);
                g.logs(&mut b.logs);
                g.metrics(&mut b.metrics);
                let bytes = [b.traces.encode_to_vec(), b.logs.encode_to_vec(), b.metrics.encode_to_vec()].concat();
                for (key, text, secret, rule) in &b.expect {
                    let found = contains(&bytes, text.as_bytes());
                    let tag_found = contains(&bytes, text.split(' ').next().unwrap().as_bytes());
                    let (level, kind) = rule.unwrap_or(if text.len() > LONG_TEXT {
                        (Capture::Redacted, ContentKind::Text)
                    } else if ceiling == Capture::None {
                        (Capture::Metadata, ContentKind::Text)
                    } else {
                        (Capture::None, ContentKind::DropOnly)
                    });
                    if ceiling < level {
                        prop_assert!(!tag_found, "{ceiling}: {key} ({level}) left: {text}");
                    } else if ceiling == Capture::Redacted && kind == ContentKind::Text {
                        prop_assert!(tag_found, "{ceiling}: {key} kept, redacted");
                        if let Some(secret) = secret {
                            prop_assert!(!contains(&bytes, secret.as_bytes()), "{key}: {secret} left");
                        }
                    } else {
                        prop_assert!(found, "{ceiling}: {key} ({level} {kind:?}) admitted but not kept verbatim");
                    }
                }
            }
        }
    }
}
