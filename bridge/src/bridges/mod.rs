//! Protocol bridges started by `aep-bridge serve` (`[bridges.<name>]`): observers that attach
//! to an agent's own server surface and map what it streams through the pure protocol
//! modules, each under its own agent identity.
//!
//! Built: the OpenCode / Kilo Code `serve` event stream (`kind = "opencode-sse"` /
//! `"kilocode-sse"`, [`opencode`]), the adapter design records' "SSE bridge": `GET /event`
//! over the one outbound transport, parsed by the bounded [`sse`] parser, mapped by
//! `aep_adapters::vendors::opencode::sse` in the configured mode (companion or primary,
//! never guessed), reconnected with jittered backoff, resumed with `Last-Event-ID` when the
//! server numbers its frames and re-synced from the server's pending-permission list, with
//! replayed events deduplicated on their own ids. In primary mode with `control = true`
//! (the design record's `AEP_OPENCODE_SSE_CONTROL` gate) a permission ask is answerable:
//! `aep-bridge respond` reaches the control loop, which answers over the server's
//! permission reply route.
//!
//! Built: the Kimi Code `kimi web` observer (`kind = "kimi-ws"`, [`kimi_ws`]), the design
//! record's "kimi web channel": the kap-server's `/api/v1/ws` event stream, every live
//! session subscribed and resumed from its `{seq, epoch}` cursor, mapped by
//! `aep_adapters::vendors::kimi_code::web` in the configured mode; in primary mode with
//! `control = true` an approval is answerable over the server's REST approval route.
//!
//! The OpenHands agent server (`kind = "openhands"`, [`openhands`]): an observer on each
//! discovered conversation's WebSocket event fan-out, mapped by
//! `aep_adapters::protocols::openhands`, read-only unless `control = true` makes its
//! confirmation requests answerable over the server's `respond_to_confirmation` route.
//!
//! AG-UI (`kind = "agui-proxy"`, [`agui`]): a tee proxy between an AG-UI client and its agent,
//! forwarding each run POST byte-transparently and mapping the streamed events by
//! `aep_adapters::protocols::agui` off the client's path.

pub mod agui;
pub mod claims;
pub mod kimi_ws;
pub mod opencode;
pub mod openhands;
pub mod reply;
pub mod sse;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;

use serde::Deserialize;

use crate::transport::config::{Headers, HttpUrl, TlsConfig, check_headers};
use crate::transport::reconnect::Retry;

/// Why an observer's connection ended without the stream's own end (the SSE and Kimi web
/// observers; OpenHands has more reasons of its own).
pub(crate) enum Stop {
    /// Reconnect after a wait.
    Retry(String),
    /// The pipeline is closed: the bridge is shutting down.
    Pipeline,
}

/// What a connection's end means to the supervisor: `Some` retry, or `None` when the
/// pipeline closed and the observer `kind` (for the log) stops.
pub(crate) fn retry_after(ended: Result<(), Stop>, bridge: &str, kind: &str) -> Option<Retry> {
    match ended {
        Ok(()) => Some(Retry::closed()),
        Err(Stop::Pipeline) => {
            tracing::info!(bridge = %bridge, "The pipeline closed; the {kind} bridge stops.");
            None
        }
        Err(Stop::Retry(e)) => Some(Retry::failed(e)),
    }
}

/// What a bridge attaches to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum BridgeKind {
    /// An `opencode serve` event stream.
    #[serde(rename = "opencode-sse")]
    OpencodeSse,
    /// A `kilo serve` event stream (the OpenCode fork, on Kilo's profile).
    #[serde(rename = "kilocode-sse")]
    KilocodeSse,
    /// A `kimi web` (kap-server) WebSocket event stream.
    #[serde(rename = "kimi-ws")]
    KimiWs,
    /// An OpenHands agent server (`openhands-agent-server`): its conversations' event sockets.
    #[serde(rename = "openhands")]
    Openhands,
    /// A tee proxy in front of an AG-UI agent's HTTP endpoint.
    #[serde(rename = "agui-proxy")]
    AguiProxy,
}

impl BridgeKind {
    /// The vendor profile of the OpenCode-shaped mappings (`None` for the other kinds).
    pub fn profile(self) -> Option<aep_adapters::vendors::opencode::Profile> {
        match self {
            BridgeKind::OpencodeSse => Some(aep_adapters::vendors::opencode::OPENCODE),
            BridgeKind::KilocodeSse => Some(aep_adapters::vendors::kilocode::KILOCODE),
            BridgeKind::KimiWs | BridgeKind::Openhands | BridgeKind::AguiProxy => None,
        }
    }

    /// The reply route of the observed server, from its vendor's spec (`None` for the kinds
    /// whose vendor has no folder, or whose server takes no answers).
    pub fn reply_route(self) -> Option<&'static aep_adapters::spec::ReplyRoute> {
        aep_adapters::vendors::spec(self.vendor())?.reply_route()
    }

    /// The default agent identity of the events.
    pub fn vendor(self) -> &'static str {
        match self {
            BridgeKind::OpencodeSse | BridgeKind::KilocodeSse => self.profile().map_or("", |p| p.vendor),
            BridgeKind::KimiWs => aep_adapters::vendors::kimi_code::VENDOR,
            BridgeKind::Openhands => aep_adapters::protocols::openhands::PROTOCOL,
            BridgeKind::AguiProxy => aep_adapters::protocols::agui::PROTOCOL,
        }
    }
}

/// The channel's mode (the design record's two config-level modes, never guessed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BridgeMode {
    /// Beside a plugin adapter that owns the core types: `x.{vendor}.*` only (the default).
    #[default]
    Companion,
    /// SSE-only deployments: the full bus mapping.
    Primary,
}

/// `[bridges.<name>]`: one observed server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BridgeConfig {
    /// What the server is (required).
    pub kind: Option<BridgeKind>,
    /// The server's base URL (required): OpenCode's, e.g. `http://127.0.0.1:4096` (the stream
    /// is `{url}/event`); `kimi-ws`: the stream is `ws(s)://{host}/api/v1/ws`, REST under
    /// `{url}/api/v1`; the OpenHands agent server's, e.g. `http://127.0.0.1:8000`; for
    /// `agui-proxy` the AG-UI agent's endpoint the runs are forwarded to.
    pub url: Option<HttpUrl>,
    /// `agui-proxy`: the local address the AG-UI client posts its runs to (required).
    pub listen: Option<SocketAddr>,
    /// `companion` (default) or `primary`.
    pub mode: BridgeMode,
    /// The control gate: permission asks become answerable over the server's reply route.
    /// OpenCode / Kilo Code: honoured in `primary` mode only; OpenHands: confirmations
    /// answered over `respond_to_confirmation`; never for `agui-proxy` (a read-only channel).
    /// Only when an answer can reach the bridge (a token or a relay).
    pub control: bool,
    /// The envelope `agent` of the events; default the vendor (`opencode`, `kilocode`).
    pub agent: Option<aep_adapters::otel::generic::VendorName>,
    /// HTTP basic auth user (`OPENCODE_SERVER_USERNAME`); used when `password` is set.
    pub username: String,
    /// HTTP basic auth password (`OPENCODE_SERVER_PASSWORD`); `""` = an open server.
    pub password: String,
    /// `kimi-ws`: the server's bearer token; `""` = read `token_file`.
    pub token: String,
    /// `kimi-ws`: the file holding the bearer token (`<KIMI_CODE_HOME>/server.token`), read
    /// at every connect until it exists; `""` = none (a server run with
    /// `--dangerous-bypass-auth`).
    pub token_file: String,
    /// OpenHands: the session API key (`X-Session-API-Key` on REST, the socket's first-message
    /// auth frame); `""` = an unsecured server.
    pub api_key: String,
    /// How often the server's session list is re-read for new sessions, milliseconds;
    /// unset: the kind's default ([`Self::poll_ms`]).
    pub poll_ms: Option<u64>,
    /// OpenHands / AG-UI: the token and argument delta planes (`AEP_OPENHANDS_DELTAS`,
    /// `AEP_AGUI_DELTAS`), off by default.
    pub deltas: bool,
    /// Extra headers on every request to the server.
    pub headers: Headers,
    /// TLS options for an `https://` server.
    pub tls: TlsConfig,
    /// First reconnect wait, milliseconds (then doubling, jittered by 20 %).
    pub reconnect_initial_ms: u64,
    /// Longest reconnect wait, milliseconds.
    pub reconnect_max_ms: u64,
    /// Connect timeout, the wait for the stream's answer, and the timeout of one REST call,
    /// milliseconds.
    pub timeout_ms: u64,
    /// An open stream silent this long is taken for dead and reconnected, milliseconds; 0 =
    /// never. OpenCode sends `server.heartbeat` every 10 s.
    pub idle_timeout_ms: u64,
    /// Largest SSE frame (its data) or WebSocket message accepted, bytes; a larger one is
    /// dropped and counted.
    pub max_frame_bytes: usize,
    /// How long a permission reply may take before the command is acked anyway (the write
    /// may still land), milliseconds; inside the 10 s ack window (AEP-0004 §3).
    pub reply_guard_ms: u64,
    /// OpenHands: a conversation's cursor that nothing wrote for this long and whose
    /// conversation the server no longer lists is removed (deleted while the bridge was
    /// down, no socket says so), hours; 0 = never; unset: [`Self::cursor_ttl_hours`]. The
    /// cursor of a conversation the server reports gone (close 4004) is removed at once.
    pub cursor_ttl_hours: Option<u64>,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            kind: None,
            url: None,
            listen: None,
            mode: BridgeMode::Companion,
            control: false,
            agent: None,
            username: "opencode".into(),
            password: String::new(),
            token: String::new(),
            token_file: String::new(),
            api_key: String::new(),
            poll_ms: None,
            deltas: false,
            headers: Headers::new(),
            tls: TlsConfig::default(),
            reconnect_initial_ms: 500,
            reconnect_max_ms: 30_000,
            timeout_ms: 5_000,
            idle_timeout_ms: 60_000,
            max_frame_bytes: 4 << 20,
            reply_guard_ms: 8_000,
            cursor_ttl_hours: None,
        }
    }
}

impl BridgeConfig {
    /// Whether this bridge's asks are answerable: its control gate is on where its kind
    /// honours one (OpenCode, Kilo Code and Kimi in `primary` mode only; OpenHands; never
    /// AG-UI) and an answer can reach the bridge (`can_answer`: a token or a relay).
    pub fn answerable(&self, can_answer: bool) -> bool {
        self.control
            && can_answer
            && match self.kind {
                None | Some(BridgeKind::AguiProxy) => false,
                Some(BridgeKind::Openhands) => true,
                Some(BridgeKind::OpencodeSse | BridgeKind::KilocodeSse | BridgeKind::KimiWs) => {
                    self.mode == BridgeMode::Primary
                }
            }
    }

    /// The agent identity of the events.
    pub fn agent(&self) -> String {
        match (&self.agent, self.kind) {
            (Some(a), _) => a.as_str().to_owned(),
            (None, Some(k)) => k.vendor().to_owned(),
            (None, None) => String::new(),
        }
    }

    /// The session list's polling period, milliseconds: as configured, else 2 s for `kimi-ws`
    /// and 15 s for `openhands` (the design record's `AEP_OPENHANDS_POLL`).
    pub fn poll_ms(&self) -> u64 {
        self.poll_ms.unwrap_or(if self.kind == Some(BridgeKind::Openhands) { 15_000 } else { 2_000 })
    }

    /// OpenHands: how long an unlisted conversation's untouched cursor is kept, hours (0 =
    /// forever): as configured, else 30 days.
    pub fn cursor_ttl_hours(&self) -> u64 {
        self.cursor_ttl_hours.unwrap_or(30 * 24)
    }

    /// The reconnect policy of the bridge's stream or sockets: doubling from
    /// `reconnect_initial_ms` to `reconnect_max_ms`, jittered by 20 %.
    pub fn reconnect_policy(&self) -> crate::transport::reconnect::Policy {
        crate::transport::reconnect::Policy::new(self.reconnect_initial_ms, self.reconnect_max_ms, 0.2)
    }

    /// The headers of every request: the configured ones plus basic auth.
    pub fn request_headers(&self) -> Headers {
        let mut h = self.headers.clone();
        if self.kind == Some(BridgeKind::Openhands) {
            if !self.api_key.is_empty() {
                h.insert("x-session-api-key".into(), self.api_key.clone());
            }
            return h;
        }
        if !self.password.is_empty() {
            let creds = format!("{}:{}", self.username, self.password);
            h.insert("authorization".into(), format!("Basic {}", base64(creds.as_bytes())));
        }
        h
    }

    /// Problems, as `(key, message)` under `prefix` (`bridges.<name>`).
    pub fn check(&self, prefix: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.kind.is_none() {
            out.push((
                format!("{prefix}.kind"),
                "is required: \"opencode-sse\", \"kilocode-sse\", \"kimi-ws\", \"openhands\" or \"agui-proxy\"".into(),
            ));
        }
        let kimi = self.kind == Some(BridgeKind::KimiWs);
        if !kimi && (!self.token.is_empty() || !self.token_file.is_empty()) {
            out.push((format!("{prefix}.token"), "token and token_file are for kind = \"kimi-ws\"".into()));
        }
        if kimi && !self.password.is_empty() {
            out.push((format!("{prefix}.password"), "is for the SSE kinds; kimi-ws takes token or token_file".into()));
        }
        let openhands = self.kind == Some(BridgeKind::Openhands);
        if !openhands && !self.api_key.is_empty() {
            out.push((format!("{prefix}.api_key"), "is for kind = \"openhands\"".into()));
        }
        if !openhands && self.cursor_ttl_hours.is_some() {
            out.push((format!("{prefix}.cursor_ttl_hours"), "is for kind = \"openhands\"".into()));
        }
        if openhands && !self.password.is_empty() {
            out.push((format!("{prefix}.password"), "is for the SSE kinds; openhands takes api_key".into()));
        }
        if kimi && self.poll_ms() < 100 {
            out.push((format!("{prefix}.poll_ms"), "must be at least 100".into()));
        }
        match &self.url {
            None if self.kind == Some(BridgeKind::AguiProxy) => {
                out.push((format!("{prefix}.url"), "is required: the AG-UI agent's endpoint the runs go to".into()));
            }
            None => out.push((
                format!("{prefix}.url"),
                "is required: the server's base URL, e.g. http://127.0.0.1:4096".into(),
            )),
            Some(u) if u.url().query().is_some() && self.kind != Some(BridgeKind::AguiProxy) => {
                out.push((
                    format!("{prefix}.url"),
                    "give the base URL without a query; the stream path is appended".into(),
                ));
            }
            Some(_) => {}
        }
        match self.kind {
            Some(BridgeKind::AguiProxy) => {
                if self.listen.is_none() {
                    out.push((
                        format!("{prefix}.listen"),
                        "is required: the local address the AG-UI client posts its runs to".into(),
                    ));
                }
                if self.control {
                    // The design record: a read-only channel, `control: { accepts: [] }`.
                    out.push((format!("{prefix}.control"), "AG-UI is a read-only channel: no control gate".into()));
                }
            }
            Some(BridgeKind::Openhands) => {
                if self.listen.is_some() {
                    out.push((format!("{prefix}.listen"), "is for kind = \"agui-proxy\" only".into()));
                }
                if self.poll_ms() == 0 {
                    out.push((format!("{prefix}.poll_ms"), "must be at least 1".into()));
                }
            }
            _ => {
                if self.listen.is_some() {
                    out.push((format!("{prefix}.listen"), "is for kind = \"agui-proxy\" only".into()));
                }
            }
        }
        let moded =
            matches!(self.kind, None | Some(BridgeKind::OpencodeSse | BridgeKind::KilocodeSse | BridgeKind::KimiWs));
        if moded && self.control && self.mode != BridgeMode::Primary {
            // The design record: companion has no control home (the plugin adapter is it).
            out.push((format!("{prefix}.control"), "is honoured in mode = \"primary\" only".into()));
        }
        if self.reconnect_initial_ms == 0 || self.reconnect_max_ms < self.reconnect_initial_ms {
            out.push((
                format!("{prefix}.reconnect_max_ms"),
                "needs 0 < reconnect_initial_ms <= reconnect_max_ms".into(),
            ));
        }
        if self.max_frame_bytes < 1024 || self.max_frame_bytes > 64 << 20 {
            out.push((format!("{prefix}.max_frame_bytes"), "must be between 1024 and 67108864".into()));
        }
        if self.reply_guard_ms == 0 || self.reply_guard_ms >= 10_000 {
            out.push((
                format!("{prefix}.reply_guard_ms"),
                "must be between 1 and 9999 (inside the 10 s ack window)".into(),
            ));
        }
        if self.timeout_ms == 0 {
            out.push((format!("{prefix}.timeout_ms"), "must be at least 1".into()));
        }
        check_headers(&format!("{prefix}.headers"), &self.headers, &mut out);
        out.extend(self.tls.check(&format!("{prefix}.tls")));
        out
    }
}

pub use opencode::Deps;

/// Why a bridge could not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// An OpenCode / Kilo Code observer.
    #[error(transparent)]
    Sse(#[from] opencode::StartError),
    /// An OpenHands observer.
    #[error(transparent)]
    Openhands(#[from] openhands::StartError),
    /// An AG-UI tee proxy.
    #[error(transparent)]
    Agui(#[from] agui::StartError),
}

/// A started bridge.
#[derive(Debug)]
pub struct Spawned {
    /// Its task (it ends at shutdown).
    pub task: tokio::task::JoinHandle<()>,
    /// The address it listens on, for the kinds that take connections (`agui-proxy`).
    pub listen: Option<SocketAddr>,
}

/// Starts `[bridges.<name>]` by its kind; it runs until `shutdown`.
pub fn spawn(
    name: &str,
    cfg: &BridgeConfig,
    deps: Deps,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<Spawned, SpawnError> {
    Ok(match cfg.kind {
        Some(BridgeKind::KimiWs) => Spawned { task: kimi_ws::spawn(name, cfg, deps, shutdown)?, listen: None },
        Some(BridgeKind::Openhands) => Spawned { task: openhands::spawn(name, cfg, deps, shutdown)?, listen: None },
        Some(BridgeKind::AguiProxy) => {
            let (task, at) = agui::spawn(name, cfg, deps, shutdown)?;
            Spawned { task, listen: Some(at) }
        }
        _ => Spawned { task: opencode::spawn(name, cfg, deps, shutdown)?, listen: None },
    })
}

/// The agent identities that take no command, so their relay `hello` and roster entries
/// declare `control: { accepts: [] }` and a command for them is refused as `unsupported`
/// (AEP-0004 §4.2): the identity of every bridge whose asks are not answerable
/// ([`BridgeConfig::answerable`]; the design records of AG-UI, OpenHands, OpenCode, Kilo Code
/// and Kimi), unless it is shared with something that does take commands: another bridge
/// whose gate is on, or a hook vendor (`hooked`: OpenCode's plugin answers its own asks
/// under the identity its companion-mode stream observer shares).
pub fn read_only_agents(
    bridges: &BTreeMap<String, BridgeConfig>,
    can_answer: bool,
    hooked: impl Fn(&str) -> bool,
) -> HashSet<String> {
    let answering: HashSet<String> =
        bridges.values().filter(|b| b.answerable(can_answer)).map(BridgeConfig::agent).collect();
    bridges
        .values()
        .filter(|b| !b.answerable(can_answer))
        .map(BridgeConfig::agent)
        .filter(|a| !a.is_empty() && !answering.contains(a) && !hooked(a))
        .collect()
}

/// Checks every `[bridges.<name>]`: names are tokens, each section is complete.
pub fn check_all(bridges: &BTreeMap<String, BridgeConfig>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (name, b) in bridges {
        let key = format!("bridges.{name}");
        if name.is_empty() || !name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_') {
            out.push((key.clone(), "a bridge name is letters, digits, `-` and `_`".into()));
        }
        out.extend(b.check(&key));
    }
    out
}

/// Standard base64 with padding (RFC 4648 §4), for the basic-auth header.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which identities take no command: AG-UI always; OpenHands, OpenCode, Kilo Code and Kimi
    /// without an effective gate; never an identity a hook vendor or a gated bridge shares.
    #[test]
    fn read_only_identities_follow_the_gates_and_shared_identities_stay_answerable() {
        let b = |kind, mode, control, agent: Option<&str>| BridgeConfig {
            kind: Some(kind),
            mode,
            control,
            agent: agent.map(|a| aep_adapters::otel::generic::VendorName::new(a).unwrap()),
            ..BridgeConfig::default()
        };
        let hooked = |a: &str| aep_adapters::vendors::by_vendor(a).is_some();
        let set = |v: Vec<(&str, BridgeConfig)>, can_answer| {
            let m: BTreeMap<String, BridgeConfig> = v.into_iter().map(|(n, c)| (n.to_owned(), c)).collect();
            let mut out: Vec<String> = read_only_agents(&m, can_answer, hooked).into_iter().collect();
            out.sort();
            out
        };
        use BridgeKind::*;
        use BridgeMode::*;
        let all = || {
            vec![
                ("ui", b(AguiProxy, Companion, true, None)),
                ("oh", b(Openhands, Companion, true, None)),
                ("oc", b(OpencodeSse, Primary, true, None)),
                ("watch", b(OpencodeSse, Companion, false, Some("oc-watch"))),
                ("kimi", b(KimiWs, Primary, true, Some("kimi-web"))),
            ]
        };
        // With answers able to arrive: AG-UI and the companion watcher only.
        assert_eq!(set(all(), true), ["agui", "oc-watch"]);
        // Without (no token, no relay) no gate is effective; `opencode` is still the plugin's.
        assert_eq!(set(all(), false), ["agui", "kimi-web", "oc-watch", "openhands"]);
        // A gated bridge sharing an identity keeps it answerable.
        let shared =
            vec![("a", b(Openhands, Companion, false, Some("oh"))), ("b", b(Openhands, Companion, true, Some("oh")))];
        assert!(set(shared, true).is_empty());
    }

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let cases =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")];
        for (plain, coded) in cases {
            assert_eq!(base64(plain.as_bytes()), coded);
        }
        let b = BridgeConfig { password: "pw".into(), ..BridgeConfig::default() };
        assert_eq!(b.request_headers()["authorization"], "Basic b3BlbmNvZGU6cHc=");
        assert!(BridgeConfig::default().request_headers().is_empty());
    }

    #[test]
    fn a_section_is_typed_and_checked() {
        let b: BridgeConfig = toml::from_str(
            "kind = \"kilocode-sse\"\nurl = \"http://127.0.0.1:4096\"\nmode = \"primary\"\ncontrol = true",
        )
        .unwrap();
        assert_eq!(
            (b.kind, b.mode, b.agent()),
            (Some(BridgeKind::KilocodeSse), BridgeMode::Primary, "kilocode".into())
        );
        assert!(b.check("bridges.k").is_empty());
        assert!(toml::from_str::<BridgeConfig>("kind = \"cursor-sse\"").is_err());
        assert!(toml::from_str::<BridgeConfig>("agent = \"Not A Token\"").is_err());
        let empty = BridgeConfig { control: true, reply_guard_ms: 10_000, ..BridgeConfig::default() };
        let keys: Vec<String> = empty.check("b").into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["b.kind", "b.url", "b.control", "b.reply_guard_ms"]);
        let mut all = BTreeMap::new();
        all.insert("bad name".to_owned(), b);
        assert_eq!(check_all(&all)[0].0, "bridges.bad name");
    }

    #[test]
    fn openhands_and_agui_sections_are_checked_by_kind() {
        let oh: BridgeConfig =
            toml::from_str("kind = \"openhands\"\nurl = \"http://127.0.0.1:8000\"\napi_key = \"k\"\ncontrol = true")
                .unwrap();
        assert!(oh.check("b").is_empty(), "{:?}", oh.check("b"));
        assert_eq!(oh.agent(), "openhands");
        // The key rides as the vendor's header, never as basic auth.
        assert_eq!(oh.request_headers()["x-session-api-key"], "k");
        assert!(!oh.request_headers().contains_key("authorization"));
        let ui: BridgeConfig = toml::from_str(
            "kind = \"agui-proxy\"\nurl = \"http://127.0.0.1:9000/agent?v=1\"\nlisten = \"127.0.0.1:0\"",
        )
        .unwrap();
        assert!(ui.check("b").is_empty(), "{:?}", ui.check("b"));
        assert_eq!(ui.agent(), "agui");
        let keys = |b: BridgeConfig| b.check("b").into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(BridgeConfig { control: true, listen: None, ..ui.clone() }), ["b.listen", "b.control"]);
        assert_eq!(keys(BridgeConfig { listen: ui.listen, poll_ms: Some(0), ..oh.clone() }), ["b.listen", "b.poll_ms"]);
        assert_eq!((oh.poll_ms(), ui.poll_ms()), (15_000, 2_000));
        assert_eq!(keys(BridgeConfig { password: "pw".into(), ..oh.clone() }), ["b.password"]);
        assert_eq!(keys(BridgeConfig { api_key: "k".into(), ..ui.clone() }), ["b.api_key"]);
        assert_eq!(keys(BridgeConfig { cursor_ttl_hours: Some(1), ..ui.clone() }), ["b.cursor_ttl_hours"]);
        assert_eq!(
            (oh.cursor_ttl_hours(), BridgeConfig { cursor_ttl_hours: Some(0), ..oh }.cursor_ttl_hours()),
            (720, 0)
        );
    }

    /// Each observer kind a vendor's spec names is this enum's, for that vendor, with the
    /// spec's reply route.
    #[test]
    fn observer_kinds_are_the_vendor_specs() {
        let mut named = 0;
        for spec in aep_adapters::vendors::SPECS.iter().filter(|s| s.observer().is_some()) {
            let kind: BridgeKind = serde_json::from_value(serde_json::json!(spec.observer())).unwrap();
            assert_eq!(kind.vendor(), spec.id);
            assert!(std::ptr::eq(kind.reply_route().unwrap(), spec.reply_route().unwrap()), "{}", spec.id);
            named += 1;
        }
        assert_eq!(named, 3);
        assert!(BridgeKind::Openhands.reply_route().is_none() && BridgeKind::AguiProxy.reply_route().is_none());
    }

    #[test]
    fn a_kimi_section_takes_its_token_and_poll() {
        let b: BridgeConfig = toml::from_str(
            "kind = \"kimi-ws\"\nurl = \"http://127.0.0.1:58627\"\ntoken_file = \"/h/server.token\"\npoll_ms = 500",
        )
        .unwrap();
        assert_eq!((b.kind, b.agent(), b.poll_ms()), (Some(BridgeKind::KimiWs), "kimi-code".into(), 500));
        assert!(b.check("bridges.k").is_empty());
        assert_eq!(BridgeKind::KimiWs.profile(), None);
        let keys = |b: &BridgeConfig| b.check("b").into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(&BridgeConfig { poll_ms: Some(10), ..b.clone() }), ["b.poll_ms"]);
        assert_eq!(keys(&BridgeConfig { password: "pw".into(), ..b.clone() }), ["b.password"]);
        let sse = BridgeConfig { kind: Some(BridgeKind::OpencodeSse), ..b };
        assert_eq!(keys(&sse), ["b.token"]);
    }
}
