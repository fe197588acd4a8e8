//! The record mixes `aep-bench otlp --mix` sends: every captured logs export of each
//! recorded agent (Codex, Claude Code, Gemini CLI, Qwen Code; `bridge/tests/data/otlp-mix/`
//! and `otlp-captures/`, copied verbatim from the real-client captures), a VS Code-shaped one
//! built from the profile's mapping pin (no capture of that agent exists), and the
//! synthetic `codex.tool_result` shape of earlier runs.
//!
//! A mix is a list of template records, each with the resource and scope it was exported
//! under. Requests replay them over `--sessions` conversations: session `s` gets its own
//! contiguous run of each request, walks the templates in capture order (each session from
//! its own starting point), and has its session id attribute rewritten to its own id. Every
//! other attribute is sent as captured.

use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
use opentelemetry_proto::tonic::resource::v1::Resource;

use aep_receivers::otlp::decode::{self, Format};

/// Which records `aep-bench otlp` sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mix {
    /// The real Codex 0.171.0 exports (about 70% `codex.sse_event`).
    Codex,
    /// The real Claude Code 2.1.197 exports (hooks, API requests, tools).
    ClaudeCode,
    /// The real Gemini CLI 0.61 exports (API requests and responses, tool calls, hook calls,
    /// the GenAI inference details).
    GeminiCli,
    /// The real Qwen Code 0.15.10 exports (API requests and responses, tool calls).
    QwenCode,
    /// `copilot_chat.*` records shaped after the VS Code profile's pin (no capture exists).
    Vscode,
    /// One synthetic `codex.tool_result` shape (the bench's first workload).
    Synthetic,
}

impl Mix {
    /// The name used on the command line and in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Mix::Codex => "codex",
            Mix::ClaudeCode => "claude-code",
            Mix::GeminiCli => "gemini-cli",
            Mix::QwenCode => "qwen-code",
            Mix::Vscode => "vscode",
            Mix::Synthetic => "synthetic",
        }
    }
}

/// Where a mix names its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionKey {
    /// A record attribute (Codex `conversation.id`, Claude Code `session.id`).
    Record(&'static str),
    /// A resource attribute (the VS Code agent's `session.id`).
    Resource(&'static str),
}

/// One template record and the (index of the) resource and scope it was exported under.
#[derive(Debug, Clone)]
struct Template {
    group: usize,
    record: LogRecord,
}

/// A mix ready to build requests from.
#[derive(Debug, Clone)]
pub struct Source {
    /// Resource and scope of each captured export group.
    groups: Vec<(Resource, InstrumentationScope)>,
    templates: Vec<Template>,
    key: SessionKey,
    /// The session id the capture used, whose last 12 characters become the session number.
    session_base: String,
}

macro_rules! capture {
    ($path:literal) => {
        ($path, include_bytes!(concat!("../../tests/data/otlp-mix/", $path)).as_slice())
    };
}

/// A capture the integration tests replay too (`bridge/tests/data/otlp-captures/`).
macro_rules! recorded {
    ($path:literal) => {
        ($path, include_bytes!(concat!("../../tests/data/otlp-captures/", $path)).as_slice())
    };
}

/// Every Codex logs export recorded: `c01_exec_json` (a headless `exec` with tools),
/// `c03_otlp_binary` (OTLP/HTTP protobuf), `c10_auto_compact` (OTLP/JSON) and
/// `c13_long_tools` (twelve tool calls, one of them parallel, OTLP/HTTP protobuf), each with
/// Codex's own sessionless "flushing OTEL metrics" line.
const CODEX: &[(&str, &[u8])] = &[
    recorded!("codex/c01_0001_logs.json"),
    recorded!("codex/c01_0003_logs.json"),
    recorded!("codex/c01_0004_logs.json"),
    recorded!("codex/c01_0007_logs.json"),
    capture!("codex/c03_0002_logs.pb"),
    capture!("codex/c03_0005_logs.pb"),
    capture!("codex/c10_0002_logs.json"),
    capture!("codex/c10_0005_logs.json"),
    capture!("codex/c13_0001_logs.pb"),
    capture!("codex/c13_0003_logs.pb"),
    capture!("codex/c13_0004_logs.pb"),
    capture!("codex/c13_0006_logs.pb"),
    capture!("codex/c13_0007_logs.pb"),
    capture!("codex/c13_0009_logs.pb"),
    capture!("codex/c13_0012_logs.pb"),
];

/// Every Gemini CLI logs export recorded: `g01_tools_yolo_http`, `g02` (with traces) and
/// `g05_long_tools` (thirteen tool calls, each with the hook calls the harness wires).
const GEMINI_CLI: &[(&str, &[u8])] = &[
    recorded!("gemini-cli/g01_0001_logs.json"),
    recorded!("gemini-cli/g01_0003_logs.json"),
    recorded!("gemini-cli/g02_0001_logs.json"),
    recorded!("gemini-cli/g02_0004_logs.json"),
    capture!("gemini-cli/g05_0001_logs.json"),
    capture!("gemini-cli/g05_0004_logs.json"),
    capture!("gemini-cli/g05_0006_logs.json"),
];

/// Every Qwen Code logs export recorded: `q01_tools_yolo_http` and `q05_long_tools`
/// (thirteen tool calls).
const QWEN_CODE: &[(&str, &[u8])] = &[
    recorded!("qwen-code/q01_0001_logs.json"),
    recorded!("qwen-code/q01_0003_logs.json"),
    capture!("qwen-code/q05_0001_logs.json"),
    capture!("qwen-code/q05_0002_logs.json"),
];

/// The Claude Code captures: `o_http_protobuf`, `s01_tools_bypass_json` and
/// `s16_long_subagents` (two subagents, eleven tool calls, OTLP/HTTP protobuf).
const CLAUDE_CODE: &[(&str, &[u8])] = &[
    capture!("claude-code/o_0001_logs.pb"),
    capture!("claude-code/o_0004_logs.pb"),
    capture!("claude-code/o_0005_logs.pb"),
    capture!("claude-code/s01_0001_logs.json"),
    capture!("claude-code/s01_0003_logs.json"),
    capture!("claude-code/s01_0006_logs.json"),
    capture!("claude-code/s01_0008_logs.json"),
    capture!("claude-code/s01_0010_logs.json"),
    capture!("claude-code/s01_0012_logs.json"),
    capture!("claude-code/s01_0015_logs.json"),
    capture!("claude-code/s01_0017_logs.json"),
    capture!("claude-code/s01_0020_logs.json"),
    capture!("claude-code/s01_0021_logs.json"),
    capture!("claude-code/s16_0001_logs.pb"),
    capture!("claude-code/s16_0003_logs.pb"),
    capture!("claude-code/s16_0005_logs.pb"),
    capture!("claude-code/s16_0008_logs.pb"),
    capture!("claude-code/s16_0011_logs.pb"),
    capture!("claude-code/s16_0013_logs.pb"),
    capture!("claude-code/s16_0015_logs.pb"),
    capture!("claude-code/s16_0018_logs.pb"),
    capture!("claude-code/s16_0020_logs.pb"),
    capture!("claude-code/s16_0023_logs.pb"),
    capture!("claude-code/s16_0025_logs.pb"),
    capture!("claude-code/s16_0028_logs.pb"),
    capture!("claude-code/s16_0029_logs.pb"),
    capture!("claude-code/s16_0032_logs.pb"),
    capture!("claude-code/s16_0035_logs.pb"),
    capture!("claude-code/s16_0036_logs.pb"),
];

fn kv(key: &str, v: any_value::Value) -> KeyValue {
    KeyValue { key: key.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
}

fn s(key: &str, v: impl Into<String>) -> KeyValue {
    kv(key, any_value::Value::StringValue(v.into()))
}

fn int(key: &str, v: i64) -> KeyValue {
    kv(key, any_value::Value::IntValue(v))
}

fn boolean(key: &str, v: bool) -> KeyValue {
    kv(key, any_value::Value::BoolValue(v))
}

impl Source {
    /// The templates of `mix`.
    pub fn new(mix: Mix) -> anyhow::Result<Self> {
        match mix {
            Mix::Codex => Self::from_captures(CODEX, SessionKey::Record("conversation.id")),
            Mix::ClaudeCode => Self::from_captures(CLAUDE_CODE, SessionKey::Record("session.id")),
            Mix::GeminiCli => Self::from_captures(GEMINI_CLI, SessionKey::Record("session.id")),
            Mix::QwenCode => Self::from_captures(QWEN_CODE, SessionKey::Record("session.id")),
            Mix::Vscode => Ok(Self::vscode()),
            Mix::Synthetic => Ok(Self::synthetic()),
        }
    }

    /// Template records from captured export bodies, in capture order.
    fn from_captures(files: &[(&str, &[u8])], key: SessionKey) -> anyhow::Result<Self> {
        let mut src = Source { groups: Vec::new(), templates: Vec::new(), key, session_base: String::new() };
        for (name, body) in files {
            let format = if name.ends_with(".json") { Format::Json } else { Format::Protobuf };
            let req = decode::logs(body, format).map_err(|e| anyhow::anyhow!("capture {name}: {e}"))?;
            for rl in req.resource_logs {
                let resource = rl.resource.unwrap_or_default();
                for sl in rl.scope_logs {
                    let group = src.groups.len();
                    src.groups.push((resource.clone(), sl.scope.unwrap_or_default()));
                    src.templates.extend(sl.log_records.into_iter().map(|record| Template { group, record }));
                }
            }
        }
        src.session_base = src.first_session().unwrap_or_else(|| "00000000-0000-0000-0000-000000000000".into());
        anyhow::ensure!(!src.templates.is_empty(), "the mix has no records");
        Ok(src)
    }

    fn first_session(&self) -> Option<String> {
        let (SessionKey::Record(k) | SessionKey::Resource(k)) = self.key;
        self.templates.iter().find_map(|t| {
            let attrs = match self.key {
                SessionKey::Record(_) => &t.record.attributes,
                SessionKey::Resource(_) => &self.groups[t.group].0.attributes,
            };
            attrs.iter().find(|a| a.key == k).and_then(|a| match a.value.as_ref()?.value.as_ref()? {
                any_value::Value::StringValue(s) if !s.is_empty() => Some(s.clone()),
                _ => None,
            })
        })
    }

    /// VS Code agent records (`service.name` `copilot-chat`, `session.id` on the resource),
    /// with the keys and values of `mappings/vscode-otel.json`: per session one
    /// `session.start`, then turns of three inference records, two tool calls (every third
    /// turn one fails), the turn summary and an edit feedback.
    fn vscode() -> Self {
        let resource = Resource {
            attributes: vec![
                s("service.name", "copilot-chat"),
                s("service.version", "0.37.0"),
                s("session.id", "5d3c0b9e-7a41-4f6e-9b1d-000000000000"),
            ],
            ..Default::default()
        };
        let scope =
            InstrumentationScope { name: "copilot-chat".into(), version: "0.37.0".into(), ..Default::default() };
        let rec = |attrs: Vec<KeyValue>| Template {
            group: 0,
            record: LogRecord {
                time_unix_nano: 1,
                observed_time_unix_nano: 1,
                severity_number: 9,
                severity_text: "INFO".into(),
                attributes: attrs,
                ..Default::default()
            },
        };
        let mut templates = vec![rec(vec![
            s("event.name", "copilot_chat.session.start"),
            s("gen_ai.request.model", "gpt-5.2"),
            s("gen_ai.agent.name", "agent"),
        ])];
        for turn in 0..6i64 {
            for i in 0..3 {
                templates.push(rec(vec![
                    s("event.name", "gen_ai.client.inference.operation.details"),
                    s("gen_ai.operation.name", "chat"),
                    s("gen_ai.request.model", "gpt-5.2"),
                    s("gen_ai.response.model", "gpt-5.2"),
                    s("gen_ai.response.id", format!("resp_{turn}_{i}")),
                    s("gen_ai.response.finish_reasons", "[\"tool_calls\"]"),
                    int("gen_ai.usage.input_tokens", 1204 + 300 * i),
                    int("gen_ai.usage.output_tokens", 388),
                    int("gen_ai.usage.cache_read.input_tokens", 1024),
                    s("gen_ai.input.messages", "[{\"role\":\"user\",\"content\":\"build the annex\"}]"),
                    s("gen_ai.output.messages", "[{\"role\":\"assistant\",\"content\":\"Reading the files.\"}]"),
                ]));
            }
            templates.push(rec(vec![
                s("event.name", "copilot_chat.tool.call"),
                s("gen_ai.tool.name", "readFile"),
                s("gen_ai.tool.call.id", format!("call_{turn}_r")),
                int("duration_ms", 63),
                boolean("success", true),
            ]));
            let fail = turn % 3 == 2;
            let mut call = vec![
                s("event.name", "copilot_chat.tool.call"),
                s("gen_ai.tool.name", "runInTerminal"),
                s("gen_ai.tool.call.id", format!("call_{turn}_t")),
                int("duration_ms", 842),
                boolean("success", !fail),
            ];
            if fail {
                call.push(s("error.type", "ToolCallError"));
                call.push(s("error.message", "exit code 1"));
            }
            templates.push(rec(call));
            templates.push(rec(vec![
                s("event.name", "copilot_chat.agent.turn"),
                int("turn.index", turn),
                int("gen_ai.usage.input_tokens", 1204),
                int("gen_ai.usage.output_tokens", 388),
                int("tool_call_count", 2),
                s("gen_ai.request.model", "gpt-5.2"),
            ]));
            templates.push(rec(vec![
                s("event.name", "copilot_chat.edit.feedback"),
                s("outcome", "accepted"),
                s("language_id", "typescript"),
                s("participant", "agent"),
                s("request_id", format!("req_{turn}")),
                s("edit_surface", "panel"),
                boolean("has_remaining_edits", false),
                boolean("is_notebook", false),
            ]));
        }
        Source {
            groups: vec![(resource, scope)],
            templates,
            key: SessionKey::Resource("session.id"),
            session_base: "5d3c0b9e-7a41-4f6e-9b1d-000000000000".into(),
        }
    }

    /// The synthetic `codex.tool_result` record (every record the same shape).
    fn synthetic() -> Self {
        let resource = Resource {
            attributes: vec![
                s("host.name", "vm"),
                s("service.name", "codex_exec"),
                s("telemetry.sdk.language", "rust"),
                s("telemetry.sdk.version", "0.31.0"),
                s("env", "bench"),
                s("telemetry.sdk.name", "opentelemetry"),
                s("service.version", "0.171.0"),
            ],
            ..Default::default()
        };
        let scope = InstrumentationScope { name: "codex_otel.log_only".into(), ..Default::default() };
        let record = LogRecord {
            observed_time_unix_nano: 1,
            severity_number: 9,
            severity_text: "INFO".into(),
            flags: 1,
            trace_id: vec![7; 16],
            span_id: vec![9; 8],
            event_name: "event otel/src/tool_result.rs:54".into(),
            attributes: vec![
                s("event.name", "codex.tool_result"),
                s("tool_name", "exec_command"),
                s("tool_namespace", "functions"),
                s("call_id", "call_00000000000000000000"),
                s("duration_ms", "43"),
                s("success", "true"),
                boolean("output_truncated", false),
                s("agent_name", "/root"),
                s("arguments", "{\"cmd\": \"echo hi\", \"workdir\": \"/home/dev/agents/work/codex/project\"}"),
                s(
                    "output",
                    "Chunk ID: 62bb11\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 1\nOutput:\nhi\n",
                ),
                s("mcp_server", ""),
                s("mcp_server_origin", ""),
                s("event.timestamp", "2026-11-30T04:04:22.096Z"),
                s("conversation.id", "01a22aa0-0c16-7b32-bb14-000000000000"),
                s("app.version", "0.171.0"),
                s("originator", "codex_exec"),
                s("terminal.type", "xterm"),
                s("model", "gpt-5-codex-mock"),
                s("slug", "gpt-5-codex-mock"),
            ],
            ..Default::default()
        };
        Source {
            groups: vec![(resource, scope)],
            templates: vec![Template { group: 0, record }],
            key: SessionKey::Record("conversation.id"),
            session_base: "01a22aa0-0c16-7b32-bb14-000000000000".into(),
        }
    }

    /// Template records in the mix.
    pub fn len(&self) -> usize {
        self.templates.len()
    }

    /// The record kinds of the mix in capture order, each with its number of templates: a
    /// record's event name ([`aep_adapters::otel::record_event_name`]), else its body text
    /// (Codex's sessionless "flushing OTEL metrics" line), else `""`.
    pub fn kinds(&self) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = Vec::new();
        for t in &self.templates {
            let k = self.kind_of(t);
            match out.iter_mut().find(|(name, _)| *name == k) {
                Some((_, n)) => *n += 1,
                None => out.push((k, 1)),
            }
        }
        out
    }

    /// The mix cut down to the templates of one kind (see [`Source::kinds`]), all under the
    /// resource and scope of the first one; `None` when it has none of them.
    ///
    /// One resource, so a request carries one `ResourceLogs` per session, as an exporter
    /// sends it: a kind captured once per export would otherwise start a new resource with
    /// nearly every record, and its figure would be mostly the resource's.
    pub fn only(&self, kind: &str) -> Option<Source> {
        let mut templates = self.templates.iter().filter(|t| self.kind_of(t) == kind).cloned().peekable();
        let group = templates.peek()?.group;
        let templates = templates.map(|t| Template { group, ..t }).collect();
        Some(Source { templates, ..self.clone() })
    }

    fn kind_of(&self, t: &Template) -> String {
        let (resource, scope) = &self.groups[t.group];
        let req = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(resource.clone()),
                scope_logs: vec![ScopeLogs {
                    scope: Some(scope.clone()),
                    log_records: vec![t.record.clone()],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let recs = aep_receivers::otlp::to_otel_records(&req);
        let Some(r) = recs.first() else { return String::new() };
        aep_adapters::otel::record_event_name(r)
            .or_else(|| r.body.get().and_then(|b| b.as_str()).map(str::to_owned))
            .unwrap_or_default()
    }

    /// The session id of session `n`: the capture's id with its last 12 characters replaced
    /// by `n` in hex (a UUID stays a UUID).
    pub fn session_id(&self, n: usize) -> String {
        let base = &self.session_base;
        let keep = base.len().saturating_sub(12);
        match base.get(..keep) {
            Some(head) if base.is_char_boundary(keep) => format!("{head}{n:012x}"),
            _ => format!("{base}-{n}"),
        }
    }

    /// Export request `b` of `records` records over `sessions` sessions, timestamps from `now`
    /// (Unix nanoseconds).
    pub fn request(&self, b: usize, records: usize, sessions: usize, now: u64) -> ExportLogsServiceRequest {
        let sessions = sessions.clamp(1, records.max(1));
        let n = self.templates.len();
        let mut resource_logs: Vec<ResourceLogs> = Vec::new();
        let mut done = 0;
        for sess in 0..sessions {
            // Session `sess` takes a contiguous share of the request.
            let share = records / sessions + usize::from(sess < records % sessions);
            let id = self.session_id(sess);
            // Where this session is in its walk of the templates: its own offset, then every
            // record it was sent before.
            let start = sess * n / sessions + b * share;
            let mut last_group = usize::MAX;
            for j in 0..share {
                let t = &self.templates[(start + j) % n];
                if t.group != last_group {
                    last_group = t.group;
                    let (res, scope) = &self.groups[t.group];
                    let mut res = res.clone();
                    if let SessionKey::Resource(k) = self.key {
                        rewrite(&mut res.attributes, k, &id);
                    }
                    resource_logs.push(ResourceLogs {
                        resource: Some(res),
                        scope_logs: vec![ScopeLogs { scope: Some(scope.clone()), ..Default::default() }],
                        ..Default::default()
                    });
                }
                let mut rec = t.record.clone();
                if let SessionKey::Record(k) = self.key {
                    rewrite(&mut rec.attributes, k, &id);
                }
                let at = now + (b * records + done) as u64;
                if rec.time_unix_nano != 0 {
                    rec.time_unix_nano = at;
                }
                if rec.observed_time_unix_nano != 0 {
                    rec.observed_time_unix_nano = at;
                }
                done += 1;
                if let Some(sl) = resource_logs.last_mut().and_then(|r| r.scope_logs.last_mut()) {
                    sl.log_records.push(rec);
                }
            }
        }
        ExportLogsServiceRequest { resource_logs }
    }
}

/// Sets the string attribute `key` (when present) to `id`.
fn rewrite(attrs: &mut [KeyValue], key: &str, id: &str) {
    for a in attrs.iter_mut().filter(|a| a.key == key) {
        if let Some(AnyValue { value: Some(any_value::Value::StringValue(v)) }) = &mut a.value {
            v.clear();
            v.push_str(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashMap};

    use super::*;
    use aep_adapters::MapContext;
    use aep_adapters::otel::{Mode, map_batch};
    use aep_adapters::vendors::otel_selector;
    use prost::Message as _;

    /// Share of each event name among `recs` (unnamed records under "").
    fn kinds(recs: &[aep_adapters::otel::OtelRecord]) -> HashMap<String, usize> {
        let mut m = HashMap::new();
        for r in recs {
            let name = aep_adapters::otel::record_event_name(r)
                .or_else(|| r.body.get().and_then(|b| b.as_str()).map(str::to_owned))
                .unwrap_or_default();
            *m.entry(name).or_insert(0) += 1;
        }
        m
    }

    /// Encoded, read back by the receiver's direct reader and by prost: the same records,
    /// all claimed by the mix's vendor profile, spread over every session.
    fn round_trip(mix: Mix, vendor: &str) -> (Vec<aep_adapters::otel::OtelRecord>, HashMap<String, usize>) {
        let src = Source::new(mix).unwrap();
        let req = src.request(3, 500, 8, 1_796_011_461_000_000_000);
        let body = req.encode_to_vec();
        let fast = aep_receivers::otlp::fast::log_records(bytes::Bytes::from(body.clone()))
            .expect("the direct reader takes the mix");
        let slow = aep_receivers::otlp::to_otel_records(&decode::logs(&body, Format::Protobuf).unwrap());
        assert_eq!(fast, slow, "{mix:?}");
        assert_eq!(fast.len(), 500);
        let out = map_batch(&fast, &otel_selector(None), &MapContext::default(), Mode::Companion);
        assert_eq!(out.unmatched, 0, "{mix:?}");
        assert!(out.drafts.iter().all(|d| d.vendor == vendor), "{mix:?}");
        let sessions: BTreeSet<_> = out.drafts.iter().filter_map(|d| d.draft.session.clone()).collect();
        let want: BTreeSet<_> = (0..8).map(|n| src.session_id(n)).collect();
        assert_eq!(sessions, want, "{mix:?}");
        assert_eq!(out.drafts.len() as u64 + out.sessionless, 500, "{mix:?}: one draft per record");
        (fast, kinds(&slow))
    }

    #[test]
    fn codex_mix_is_dominated_by_sse_events_like_real_traffic() {
        let (recs, k) = round_trip(Mix::Codex, "codex");
        let sse = k.get("codex.sse_event").copied().unwrap_or(0);
        assert!(sse * 100 >= 60 * recs.len() && sse * 100 <= 80 * recs.len(), "{k:?}");
        for name in [
            "codex.api_request",
            "codex.startup_phase",
            "codex.tool_result",
            "codex.tool_decision",
            "codex.conversation_starts",
            "codex.user_prompt",
            "codex.turn_ttft",
        ] {
            assert!(k.get(name).is_some_and(|n| *n > 0), "{name} missing: {k:?}");
        }
        let top = k.iter().max_by_key(|(_, n)| **n).map(|(name, _)| name.as_str());
        assert_eq!(top, Some("codex.sse_event"));
        // The real attribute sets ride along (e.g. the `auth.*` flags of api_request).
        assert!(recs.iter().any(|r| r.attributes.contains_key("auth.header_attached")));
    }

    #[test]
    fn claude_code_mix_has_hooks_api_requests_and_tools() {
        let (recs, k) = round_trip(Mix::ClaudeCode, "claude-code");
        for name in [
            "hook_registered",
            "hook_execution_start",
            "hook_execution_complete",
            "api_request",
            "tool_decision",
            "tool_result",
            "user_prompt",
            "assistant_response",
            "subagent_completed",
        ] {
            assert!(k.get(name).is_some_and(|n| *n > 0), "{name} missing: {k:?}");
        }
        assert!(recs.iter().all(|r| &*r.scope_name == "com.anthropic.claude_code.events"));
    }

    #[test]
    fn vscode_mix_carries_every_profile_kind_on_the_resource_session() {
        let (recs, k) = round_trip(Mix::Vscode, "vscode");
        for name in [
            "copilot_chat.session.start",
            "copilot_chat.tool.call",
            "copilot_chat.agent.turn",
            "copilot_chat.edit.feedback",
            "gen_ai.client.inference.operation.details",
        ] {
            assert!(k.get(name).is_some_and(|n| *n > 0), "{name} missing: {k:?}");
        }
        assert!(recs.iter().all(|r| r.resource_str("session.id").is_some()));
    }

    /// Gemini CLI and Qwen Code: every recorded export, model calls and tool calls among them.
    #[test]
    fn gemini_and_qwen_mixes_are_their_recorded_exports() {
        for (mix, vendor, kinds) in [
            (Mix::GeminiCli, "gemini-cli", ["gemini_cli.api_response", "gemini_cli.tool_call"]),
            (Mix::QwenCode, "qwen-code", ["qwen-code.api_response", "qwen-code.tool_call"]),
        ] {
            let (_, k) = round_trip(mix, vendor);
            for name in kinds {
                assert!(k.get(name).is_some_and(|n| *n > 0), "{name} missing: {k:?}");
            }
        }
    }

    #[test]
    fn synthetic_mix_is_one_tool_result_shape() {
        let (_, k) = round_trip(Mix::Synthetic, "codex");
        assert_eq!(k.len(), 1, "{k:?}");
        assert_eq!(k.get("codex.tool_result"), Some(&500));
    }

    #[test]
    fn sessions_walk_the_templates_in_order_across_requests() {
        let src = Source::new(Mix::Codex).unwrap();
        // One session, requests of 10: request 1 continues where request 0 stopped.
        let names = |b| {
            let recs = aep_receivers::otlp::to_otel_records(&src.request(b, 10, 1, 1));
            recs.iter().map(|r| format!("{:?}", r.attributes.get("event.timestamp"))).collect::<Vec<_>>()
        };
        let both = aep_receivers::otlp::to_otel_records(&src.request(0, 20, 1, 1));
        let both: Vec<_> = both.iter().map(|r| format!("{:?}", r.attributes.get("event.timestamp"))).collect();
        assert_eq!([names(0), names(1)].concat(), both);
        assert_eq!(src.session_id(10), "01a22a9f-e3e6-71d0-8872-00000000000a");
    }
}
