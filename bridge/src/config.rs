//! `aep-bridge.toml`: what the pipeline does. Every key is documented in
//! `bridge/aep-bridge.example.toml`; CLI flags (with `AEP_BRIDGE_*` env twins) override
//! the file for how the process runs.
//!
//! Each section's type lives in the module it configures (`[jsonl]` in
//! [`crate::sinks::jsonl`], `[collector]` in [`crate::collector`], and so on), with its
//! defaults and its own checks, and is re-exported here: this module only aggregates them
//! ([`Config`]), loads and layers the file, and checks values across sections. Sections
//! import nothing from here, so the modules stay free of cycles. `[server]` and
//! `[capture]` stay here: their one reader in this library is [`crate::server`], the
//! composition root, which takes the whole [`Config`]: either placed there would make a
//! cycle.
//!
//! [`Config::from_toml`] reports every problem at once (each section is checked on its
//! own, then the values are checked against each other), which is what
//! `aep-bridge config validate` prints.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use aep_schemas::Capture;
use serde::Deserialize;

pub use crate::collector::CollectorConfig;
pub use crate::control::ControlConfig;
use crate::env::Env;
pub use crate::hooks::HooksConfig;
pub use crate::otlp_in::OtlpInConfig;
pub use crate::pipeline::PipelineConfig;
pub use crate::relay::RelayConfig;
pub use crate::sinks::jsonl::{FsyncPolicy, JsonlConfig};
pub use crate::ui::UiConfig;

/// One problem found in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// Dotted key path, e.g. `jsonl.fsync`.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.message)
    }
}

/// Every problem of a configuration, reported together.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid configuration ({} problem(s)):\n{}", .0.len(), .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
pub struct ConfigErrors(pub Vec<ConfigProblem>);

/// The whole configuration.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `[server]`
    pub server: ServerConfig,
    /// `[capture]`
    pub capture: CaptureConfig,
    /// `[jsonl]`
    pub jsonl: JsonlConfig,
    /// `[collector]`
    pub collector: CollectorConfig,
    /// `[relay]`
    pub relay: RelayConfig,
    /// `[pipeline]`
    pub pipeline: PipelineConfig,
    /// `[otlp_in]`
    pub otlp_in: OtlpInConfig,
    /// `[control]`
    pub control: ControlConfig,
    /// `[hooks]`
    pub hooks: HooksConfig,
    /// `[export]`
    pub export: crate::export::ExportConfig,
    /// `[fleet]`: the team and developer on everything exported (see [`crate::export::fleet`]).
    pub fleet: crate::export::fleet::FleetConfig,
    /// `[ui]`: the web view (see [`crate::ui`]).
    pub ui: UiConfig,
    /// `[[access]]`: a hub's further tokens, each scoped to one tenant and its roles (see
    /// [`aep_receivers::access`]); `server.token` stays the operator's, for everything.
    pub access: Vec<aep_receivers::access::AccessEntry>,
    /// `[bridges.<name>]`: observed agent servers (see [`crate::bridges`]).
    pub bridges: std::collections::BTreeMap<String, crate::bridges::BridgeConfig>,
    /// The environment this configuration was loaded in (`HOME`, the redaction list's
    /// secret variables); [`Env::process`] unless a test gives its own.
    pub env: Env,
}

/// `[server]`: listeners and identity.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// The one HTTP port: hooks, collector, OTLP/HTTP paths, `/healthz`, `/metrics`.
    #[serde(deserialize_with = "listen_addr")]
    pub listen: SocketAddr,
    /// OTLP/gRPC listener; `""` disables it.
    #[serde(deserialize_with = "optional_listen_addr")]
    pub otlp_grpc: Option<SocketAddr>,
    /// Extra OTLP/HTTP listener; `""` disables it.
    #[serde(deserialize_with = "optional_listen_addr")]
    pub otlp_http: Option<SocketAddr>,
    /// Bearer token for control and emit bindings; empty means watch-only without auth.
    pub token: String,
    /// Host name used in `source` URIs; empty means the machine's host name.
    pub host: String,
    /// Names every route answers to in `Host` besides IP addresses, `localhost` and
    /// [`ServerConfig::host`] (a reverse proxy's name): any other `Host` is refused, so a web
    /// page that rebinds its own name to this address reaches nothing (`crate::guard`).
    pub allowed_hosts: Vec<String>,
    /// Data directory (JSONL logs, epoch state); empty means `~/.aep`.
    pub data_dir: String,
    /// Grace period for shutdown, in milliseconds.
    pub shutdown_grace_ms: u64,
    /// Largest hook payload accepted, in bytes.
    pub max_hook_body: usize,
    /// Connections served at once per listener (HTTP ports, OTLP/gRPC, AG-UI proxies); past
    /// it a connection is refused (lowered so all listeners full fit the open-file limit).
    pub max_connections: usize,
    /// A new connection must send a complete request head within this many milliseconds.
    pub header_timeout_ms: u64,
    /// A connection with no request in flight is closed after this many milliseconds.
    pub idle_timeout_ms: u64,
    /// A request body must arrive in full within this many milliseconds of its head.
    pub body_timeout_ms: u64,
}

impl ServerConfig {
    /// The connection bounds every listener shares.
    pub fn limits(&self) -> aep_receivers::listener::Limits {
        aep_receivers::listener::Limits {
            max_connections: self.max_connections,
            header_timeout: Duration::from_millis(self.header_timeout_ms.max(1)),
            idle_timeout: Duration::from_millis(self.idle_timeout_ms.max(1)),
            body_timeout: Duration::from_millis(self.body_timeout_ms.max(1)),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8787)),
            otlp_grpc: Some(SocketAddr::from(([127, 0, 0, 1], 4317))),
            otlp_http: Some(SocketAddr::from(([127, 0, 0, 1], 4318))),
            token: String::new(),
            host: String::new(),
            allowed_hosts: Vec::new(),
            data_dir: String::new(),
            shutdown_grace_ms: 5000,
            max_hook_body: 8 * 1024 * 1024,
            max_connections: 4096,
            header_timeout_ms: 10_000,
            idle_timeout_ms: 60_000,
            body_timeout_ms: 60_000,
        }
    }
}

/// `[capture]`: the source-side capture posture (AEP-0003 §9).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CaptureConfig {
    /// Ceiling for every event (default `metadata`).
    pub max: Capture,
    /// Ceiling for `attention.*` events (default `redacted`, never above `max` unless `max` allows).
    pub attention: Capture,
    /// Names of environment variables whose values are redacted as secrets (§9.4 b).
    pub secret_names: Vec<String>,
    /// Home directory prefix replaced with `~` (§9.4 c); empty means `$HOME`.
    pub home: String,
    /// Redact emails and phone numbers (§9.4 d).
    pub pii: bool,
}

impl Default for CaptureConfig {
    fn default() -> Self {
        Self {
            max: Capture::Metadata,
            attention: Capture::Redacted,
            secret_names: Vec::new(),
            home: String::new(),
            pii: true,
        }
    }
}

const SECTIONS: &[&str] = &[
    "server",
    "capture",
    "jsonl",
    "collector",
    "relay",
    "pipeline",
    "otlp_in",
    "control",
    "hooks",
    "export",
    "fleet",
    "bridges",
    "ui",
    "access",
];

fn section<T: for<'de> Deserialize<'de> + Default>(
    table: &toml::Table,
    name: &str,
    problems: &mut Vec<ConfigProblem>,
) -> T {
    let Some(v) = table.get(name) else { return T::default() };
    match T::deserialize(v.clone()) {
        Ok(t) => t,
        Err(e) => {
            // serde stops at the first bad key; read the section again one key at a time so
            // every problem is reported at once, each under its full key (`server.listen`).
            let before = problems.len();
            let fails = |v: toml::Value| T::deserialize(v).err().map(|e| e.message().trim().to_owned());
            bad_keys(v, name, &|v| v, &fails, problems);
            if problems.len() == before {
                problems.push(ConfigProblem { key: name.into(), message: e.message().trim().to_owned() });
            }
            T::default()
        }
    }
}

/// Pushes a problem for every key of `v` that fails on its own: `wrap` puts a one-key table
/// back at its place in the section, so the section's own type judges it with every other
/// key at its default; a failing sub-table is searched the same way for its bad leaves.
fn bad_keys(
    v: &toml::Value,
    path: &str,
    wrap: &dyn Fn(toml::Value) -> toml::Value,
    fails: &dyn Fn(toml::Value) -> Option<String>,
    problems: &mut Vec<ConfigProblem>,
) {
    let Some(table) = v.as_table() else { return };
    for (k, item) in table {
        let key = format!("{path}.{k}");
        let at = |x: toml::Value| wrap(toml::Value::Table(toml::Table::from_iter([(k.clone(), x)])));
        let Some(message) = fails(at(item.clone())) else { continue };
        let before = problems.len();
        if item.is_table() {
            bad_keys(item, &key, &at, fails, problems);
        }
        if problems.len() == before {
            problems.push(ConfigProblem { key, message });
        }
    }
}

/// `server.listen`: an address, with the message naming the expected form.
fn listen_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    parse_listen(&text).map_err(serde::de::Error::custom)
}

/// `server.otlp_grpc` / `otlp_http`: an address, or `""` for off (the flags' parser).
fn optional_listen_addr<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    let text = String::deserialize(d)?;
    parse_optional_listen(&text).map_err(serde::de::Error::custom)
}

/// Parses a listen address (`127.0.0.1:8787`, `[::1]:0`).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| format!("{text:?} is not an address like 127.0.0.1:8787"))
}

/// Parses an optional listen address: `""` disables the listener.
pub fn parse_optional_listen(text: &str) -> Result<Option<SocketAddr>, String> {
    match text.trim() {
        "" => Ok(None),
        t => parse_listen(t).map(Some).map_err(|e| format!("{e} (use \"\" to disable)")),
    }
}

impl Config {
    /// Parses and checks a TOML document, collecting every problem; the `OTEL_*` variables
    /// are not read.
    pub fn from_toml(text: &str) -> Result<Config, ConfigErrors> {
        Self::checked(Self::parse(text, &Env::process(), false)?)
    }

    /// [`Self::from_toml`] in `env`: the standard `OTEL_EXPORTER_OTLP_*` variables fill
    /// `[export.otlp]` where the file leaves a key unset (the file wins; see
    /// [`crate::export::otel_env`]). What `aep-bridge serve` loads.
    pub fn from_toml_with_env(text: &str, env: &Env) -> Result<Config, ConfigErrors> {
        Self::checked(Self::parse(text, env, true)?)
    }

    /// [`Self::from_toml_with_env`] without the checks across values, for a caller that
    /// still applies flags (a token from the environment makes an off-host `listen` in the
    /// file valid) and then runs [`Self::check`] itself, as `serve` and `config validate` do:
    /// the config with the problems found so far (`Err` only when the file is not TOML).
    pub fn layer_from_toml_with_env(text: &str, env: &Env) -> Result<(Config, Vec<ConfigProblem>), ConfigErrors> {
        Self::parse(text, env, true)
    }

    fn checked((cfg, mut problems): (Config, Vec<ConfigProblem>)) -> Result<Config, ConfigErrors> {
        problems.extend(cfg.check());
        if problems.is_empty() { Ok(cfg) } else { Err(ConfigErrors(problems)) }
    }

    fn parse(text: &str, env: &Env, otel: bool) -> Result<(Config, Vec<ConfigProblem>), ConfigErrors> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            ConfigErrors(vec![ConfigProblem { key: "(file)".into(), message: e.message().trim().to_owned() }])
        })?;
        let mut problems = Vec::new();
        for key in table.keys() {
            if !SECTIONS.contains(&key.as_str()) {
                problems.push(ConfigProblem {
                    key: key.clone(),
                    message: format!("unknown section (expected one of: {})", SECTIONS.join(", ")),
                });
            }
        }
        let mut cfg = Config {
            server: section(&table, "server", &mut problems),
            capture: section(&table, "capture", &mut problems),
            jsonl: section(&table, "jsonl", &mut problems),
            collector: section(&table, "collector", &mut problems),
            relay: section(&table, "relay", &mut problems),
            pipeline: section(&table, "pipeline", &mut problems),
            otlp_in: section(&table, "otlp_in", &mut problems),
            control: section(&table, "control", &mut problems),
            hooks: section(&table, "hooks", &mut problems),
            export: section(&table, "export", &mut problems),
            fleet: section(&table, "fleet", &mut problems),
            bridges: section(&table, "bridges", &mut problems),
            ui: section(&table, "ui", &mut problems),
            access: section(&table, "access", &mut problems),
            env: env.clone(),
        };
        if otel {
            let (env, bad) = crate::export::otel_env::OtelEnv::read(|k| env.raw(k));
            for (key, message) in bad {
                problems.push(ConfigProblem { key, message });
            }
            let written = table.get("export").and_then(|e| e.get("otlp")).and_then(toml::Value::as_table);
            env.apply(&mut cfg.export.otlp, written);
        }
        Ok((cfg, problems))
    }

    /// Semantic checks across values (addresses, URLs, bounds).
    pub fn check(&self) -> Vec<ConfigProblem> {
        let mut p = Vec::new();
        let mut bad = |key: &str, message: String| p.push(ConfigProblem { key: key.into(), message });
        // AEP-0003 §8.1: any off-host binding requires a bearer token (and TLS, which a
        // proxy in front terminates: serve warns about it).
        let a = self.server.listen;
        if !a.ip().is_loopback() && self.server.token.is_empty() {
            bad(
                "server.listen",
                format!(
                    "{a} is reachable off-host: set a token (AEP_TOKEN, --token-file or --token; AEP-0003 §8.1 requires one beyond loopback)"
                ),
            );
        }
        for (key, message) in self.relay.check() {
            bad(&format!("relay.{key}"), message);
        }
        if self.capture.attention > self.capture.max.max(Capture::Redacted) {
            bad("capture.attention", format!("{} is above capture.max ({})", self.capture.attention, self.capture.max));
        }
        for (key, message) in self.collector.check() {
            bad(&format!("collector.{key}"), message);
        }
        for (key, message) in self.pipeline.check() {
            bad(&format!("pipeline.{key}"), message);
        }
        for (key, message) in self.jsonl.check() {
            bad(&format!("jsonl.{key}"), message);
        }
        let mut outbound = Vec::new();
        if let Some(tee) = &self.otlp_in.tee {
            crate::transport::config::check_otlp_base_url("otlp_in.tee", tee, &mut outbound);
        }
        crate::transport::config::check_headers("otlp_in.tee_headers", &self.otlp_in.tee_headers, &mut outbound);
        outbound.extend(self.otlp_in.tee_tls.check("otlp_in.tee_tls"));
        outbound.extend(self.relay.tls.check("relay.tls"));
        for (key, message) in outbound {
            bad(&key, message);
        }
        for (key, message) in self.export.check() {
            bad(&format!("export.{key}"), message);
        }
        for (key, message) in self.fleet.check() {
            bad(&format!("fleet.{key}"), message);
        }
        for (key, message) in crate::bridges::check_all(&self.bridges) {
            bad(&key, message);
        }
        for (key, message) in self.control.check() {
            bad(&format!("control.{key}"), message);
        }
        for (key, message) in self.ui.check() {
            bad(&format!("ui.{key}"), message);
        }
        for (key, message) in aep_receivers::access::check(&self.access, &self.server.token) {
            bad(&format!("access{key}"), message);
        }
        p
    }

    /// The data directory: the configured one, else the environment's default
    /// ([`Env::data_dir`]: `$AEP_BRIDGE_DATA_DIR`, else `~/.aep`).
    pub fn data_dir(&self) -> PathBuf {
        if !self.server.data_dir.is_empty() {
            return PathBuf::from(&self.server.data_dir);
        }
        self.env.data_dir()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_the_safe_default() {
        let c = Config::from_toml("").unwrap();
        assert_eq!(c.server.listen, "127.0.0.1:8787".parse().unwrap());
        assert_eq!(c.capture.max, Capture::Metadata);
        assert!(c.collector.enabled && c.jsonl.enabled);
    }

    #[test]
    fn reports_every_problem_at_once() {
        let err = Config::from_toml(
            r#"
            [server]
            listen = "nowhere"
            [jsonl]
            fsync = "sometimes"
            [capture]
            max = "everything"
            [relay]
            url = "ftp://x"
            [otlp_in]
            mode = "sideways"
            [bogus]
            "#,
        )
        .unwrap_err();
        let keys: Vec<&str> = err.0.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(keys, ["bogus", "server.listen", "capture.max", "jsonl.fsync", "relay.url", "otlp_in.mode"]);
        assert!(err.to_string().contains("sometimes"), "{err}");
        assert!(err.to_string().contains("sideways") && err.to_string().contains("primary"), "{err}");
        let typed =
            Config::from_toml("[otlp_in]\nmode = \"primary\"\nprofiles = { \"my-codex\" = \"codex\" }").unwrap();
        assert_eq!(typed.otlp_in.mode, aep_adapters::otel::Mode::Primary);
        assert_eq!(typed.otlp_in.profiles["my-codex"], aep_adapters::vendors::OtelVendor::named("codex").unwrap());
        assert!(Config::from_toml("[otlp_in]\nprofiles = { x = \"gemini\" }").is_err(), "no such profile");
        let typed = Config::from_toml(
            "[otlp_in.profiles]\ng = \"gemini-cli\"\nq = \"qwen-code\"\n[otlp_in.generic]\nmy-app = \"my-agent\"",
        )
        .unwrap();
        assert_eq!(typed.otlp_in.profiles["q"], aep_adapters::vendors::OtelVendor::named("qwen-code").unwrap());
        assert_eq!(typed.otlp_in.generic["my-app"].as_str(), "my-agent");
        assert!(Config::from_toml("[otlp_in.generic]\nmy-app = \"My Agent\"").is_err(), "not a vendor token");
    }

    #[test]
    fn addresses_and_urls_are_typed_and_every_bad_key_is_named() {
        let c = Config::from_toml(
            "[server]\nlisten = \"[::1]:9000\"\notlp_grpc = \"\"\n[relay]\nurl = \"wss://relay.example/aep\"\n\
             [otlp_in]\ntee = \"https://collector:4318\"",
        )
        .unwrap();
        assert_eq!(c.server.listen, "[::1]:9000".parse().unwrap());
        assert_eq!((c.server.otlp_grpc, c.server.otlp_http), (None, Some("127.0.0.1:4318".parse().unwrap())));
        assert_eq!(c.relay.url.unwrap().url().scheme(), "wss");
        assert_eq!(c.otlp_in.tee.unwrap().as_str(), "https://collector:4318");
        // Two bad keys in one section and bad leaves in nested tables: each under its own key.
        let err = Config::from_toml(
            "[server]\nlisten = \"nowhere\"\notlp_http = \"4318\"\nmax_connections = 10\n\
             [export.otlp]\nendpoint = \"collector:4318\"\nbatch_size = \"many\"\n\
             [export.cloudevents]\nendpoint = \"ftp://x\"\n[otlp_in]\ntee = \"https://x/v1/logs\"",
        )
        .unwrap_err();
        let keys: Vec<&str> = err.0.iter().map(|p| p.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "server.listen",
                "server.otlp_http",
                "export.cloudevents.endpoint",
                "export.otlp.batch_size",
                "export.otlp.endpoint",
                "otlp_in.tee"
            ]
        );
        let text = err.to_string();
        for says in [
            "\"nowhere\" is not an address like 127.0.0.1:8787",
            "\"4318\" is not an address like 127.0.0.1:8787 (use \"\" to disable)",
            "must start with http://, https://",
            "base URL",
        ] {
            assert!(text.contains(says), "{says}: {text}");
        }
    }

    #[test]
    fn each_section_check_keeps_its_key_message_and_place() {
        // The per-section checks run in a fixed order and keep their texts: pinned here so
        // moving a section's check next to its type cannot reorder or reword what
        // `config validate` prints.
        let err = Config::from_toml(
            "[control]\nattention_timeout_secs = 0\ngates = { nobody = [] }\n[jsonl]\nmax_open_files = 0\n\
             [pipeline]\nqueue_capacity = 0\n[collector]\nreplay_buffer = 0\n\
             [capture]\nmax = \"none\"\nattention = \"full\"\n[relay]\nrequired = true",
        )
        .unwrap_err();
        let got: Vec<String> = err.0.iter().map(ToString::to_string).collect();
        assert_eq!(got.len(), 7, "{got:?}");
        assert_eq!(
            got[..5],
            [
                "relay.required: is true but relay.url is empty",
                "capture.attention: full is above capture.max (none)",
                "collector.replay_buffer: must be at least 1",
                "pipeline.queue_capacity: must be at least 1",
                "jsonl.max_open_files: must be at least 1",
            ]
        );
        assert!(
            got[5].starts_with("control.gates.nobody: no opt-in gate for this vendor (vendors with one: "),
            "{got:?}"
        );
        assert_eq!(got[6..], ["control.attention_timeout_secs: must be between 1 and 3600".to_owned()]);
    }

    #[test]
    fn an_off_host_listener_needs_a_token() {
        let problems = |text: &str| Config::from_toml(text).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(problems("[server]\nlisten = \"0.0.0.0:8787\"").contains("off-host"));
        assert!(problems("[server]\nlisten = \"[::]:8787\"").contains("off-host"));
        assert_eq!(problems("[server]\nlisten = \"0.0.0.0:8787\"\ntoken = \"t0k3n\""), "");
        assert_eq!(problems("[server]\nlisten = \"127.0.0.2:8787\""), "", "all of 127/8 is loopback");
        assert_eq!(problems("[server]\nlisten = \"[::1]:0\""), "");
    }

    #[test]
    fn bridges_are_typed_and_each_problem_is_named() {
        let c = Config::from_toml(
            "[bridges.oc]\nkind = \"opencode-sse\"\nurl = \"http://127.0.0.1:4096\"\nmode = \"primary\"\ncontrol = true",
        )
        .unwrap();
        assert_eq!(c.bridges["oc"].observer().map(|o| o.id), Some("opencode"));
        let keys =
            |text: &str| -> Vec<String> { Config::from_toml(text).unwrap_err().0.into_iter().map(|p| p.key).collect() };
        assert_eq!(
            keys("[bridges.b]\nkind = \"opencode-sse\"\nurl = \"http://x\"\nmode = \"sideways\"\nretries = 3"),
            ["bridges.b.mode", "bridges.b.retries"]
        );
        assert_eq!(
            keys(
                "[bridges.a]\nkind = \"opencode-sse\"\n[bridges.b]\nkind = \"kilocode-sse\"\nurl = \"http://x\"\ncontrol = true"
            ),
            ["bridges.a.url", "bridges.b.control"]
        );
    }

    #[test]
    fn the_example_file_is_valid() {
        let text = include_str!("../aep-bridge.example.toml");
        Config::from_toml(text).unwrap();
    }
}
