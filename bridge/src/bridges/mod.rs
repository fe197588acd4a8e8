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

pub mod kimi_ws;
pub mod opencode;
pub mod reply;
pub mod sse;

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::transport::config::{Headers, HttpUrl, TlsConfig, check_headers};

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
}

impl BridgeKind {
    /// The vendor profile of an OpenCode-shaped SSE mapping (`None` for other kinds).
    pub fn profile(self) -> Option<aep_adapters::vendors::opencode::Profile> {
        match self {
            BridgeKind::OpencodeSse => Some(aep_adapters::vendors::opencode::OPENCODE),
            BridgeKind::KilocodeSse => Some(aep_adapters::vendors::kilocode::KILOCODE),
            BridgeKind::KimiWs => None,
        }
    }

    /// The vendor, the default agent identity of the events.
    pub fn vendor(self) -> &'static str {
        match self {
            BridgeKind::OpencodeSse | BridgeKind::KilocodeSse => self.profile().map_or("", |p| p.vendor),
            BridgeKind::KimiWs => aep_adapters::vendors::kimi_code::VENDOR,
        }
    }
}

/// Starts the observer of `[bridges.<name>]` for its kind; it runs until `shutdown`.
pub fn spawn(
    name: &str,
    cfg: &BridgeConfig,
    deps: opencode::Deps,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<tokio::task::JoinHandle<()>, opencode::StartError> {
    match cfg.kind {
        Some(BridgeKind::KimiWs) => kimi_ws::spawn(name, cfg, deps, shutdown),
        _ => opencode::spawn(name, cfg, deps, shutdown),
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
    /// The server's base URL, e.g. `http://127.0.0.1:4096` (required); the stream is
    /// `{url}/event` (`kimi-ws`: `ws(s)://{host}/api/v1/ws`, REST under `{url}/api/v1`).
    pub url: Option<HttpUrl>,
    /// `companion` (default) or `primary`.
    pub mode: BridgeMode,
    /// The control gate: permission asks become answerable over the server's reply route.
    /// Honoured in `primary` mode only, and only when an answer can reach the bridge (a
    /// token or a relay).
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
    /// `kimi-ws`: how often the server's session list is re-read for new sessions,
    /// milliseconds.
    pub poll_ms: u64,
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
    /// Largest SSE frame (its data) accepted, bytes; a larger one is dropped and counted.
    pub max_frame_bytes: usize,
    /// How long a permission reply may take before the command is acked anyway (the write
    /// may still land), milliseconds; inside the 10 s ack window (AEP-0004 §3).
    pub reply_guard_ms: u64,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            kind: None,
            url: None,
            mode: BridgeMode::Companion,
            control: false,
            agent: None,
            username: "opencode".into(),
            password: String::new(),
            token: String::new(),
            token_file: String::new(),
            poll_ms: 2_000,
            headers: Headers::new(),
            tls: TlsConfig::default(),
            reconnect_initial_ms: 500,
            reconnect_max_ms: 30_000,
            timeout_ms: 5_000,
            idle_timeout_ms: 60_000,
            max_frame_bytes: 4 << 20,
            reply_guard_ms: 8_000,
        }
    }
}

impl BridgeConfig {
    /// The agent identity of the events.
    pub fn agent(&self) -> String {
        match (&self.agent, self.kind) {
            (Some(a), _) => a.as_str().to_owned(),
            (None, Some(k)) => k.vendor().to_owned(),
            (None, None) => String::new(),
        }
    }

    /// The headers of every request: the configured ones plus basic auth.
    pub fn request_headers(&self) -> Headers {
        let mut h = self.headers.clone();
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
                "is required: \"opencode-sse\", \"kilocode-sse\" or \"kimi-ws\"".into(),
            ));
        }
        let kimi = self.kind == Some(BridgeKind::KimiWs);
        if !kimi && (!self.token.is_empty() || !self.token_file.is_empty()) {
            out.push((format!("{prefix}.token"), "token and token_file are for kind = \"kimi-ws\"".into()));
        }
        if kimi && !self.password.is_empty() {
            out.push((format!("{prefix}.password"), "is for the SSE kinds; kimi-ws takes token or token_file".into()));
        }
        if kimi && self.poll_ms < 100 {
            out.push((format!("{prefix}.poll_ms"), "must be at least 100".into()));
        }
        match &self.url {
            None => out.push((
                format!("{prefix}.url"),
                "is required: the server's base URL, e.g. http://127.0.0.1:4096".into(),
            )),
            Some(u) if u.url().query().is_some() => {
                out.push((
                    format!("{prefix}.url"),
                    "give the base URL without a query; the stream path is appended".into(),
                ));
            }
            Some(_) => {}
        }
        if self.control && self.mode != BridgeMode::Primary {
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
    fn a_kimi_section_takes_its_token_and_poll() {
        let b: BridgeConfig = toml::from_str(
            "kind = \"kimi-ws\"\nurl = \"http://127.0.0.1:58627\"\ntoken_file = \"/h/server.token\"\npoll_ms = 500",
        )
        .unwrap();
        assert_eq!((b.kind, b.agent(), b.poll_ms), (Some(BridgeKind::KimiWs), "kimi-code".into(), 500));
        assert!(b.check("bridges.k").is_empty());
        assert_eq!(BridgeKind::KimiWs.profile(), None);
        let keys = |b: &BridgeConfig| b.check("b").into_iter().map(|(k, _)| k).collect::<Vec<_>>();
        assert_eq!(keys(&BridgeConfig { poll_ms: 10, ..b.clone() }), ["b.poll_ms"]);
        assert_eq!(keys(&BridgeConfig { password: "pw".into(), ..b.clone() }), ["b.password"]);
        let sse = BridgeConfig { kind: Some(BridgeKind::OpencodeSse), ..b };
        assert_eq!(keys(&sse), ["b.token"]);
    }
}
