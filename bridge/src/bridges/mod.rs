//! Observers started by `aep-bridge serve` (`[bridges.<name>]`): each attaches to an agent's
//! own server and maps what it streams under its own agent identity. What a server is and
//! how it speaks is its vendor's: `vendor = "<id>"` names an observer of the adapters crate
//! (`aep_adapters::observer`: a pure state machine per vendor, or per protocol, with its
//! own config keys and checks). This module is the plumbing around it, the same
//! for every vendor: the section's common keys ([`BridgeConfig`]), the one runtime
//! ([`runtime`]: links kept up by the reconnect supervisor over the one outbound transport,
//! REST pages, cursors in the state folder, publication), the reply route answering asks
//! around the agent ([`reply`]), and for an observer that listens, the tee proxy
//! (`crate::transport::proxy`) whose event streams are its links.
//!
//! The former `kind = "<name>"` is still read, as a deprecated name of its observer.

pub mod claims;
pub mod reply;
pub(crate) mod runtime;

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use aep_adapters::observer::{ObserverSpec, Setup, Transport};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::transport::config::{Headers, HttpUrl, TlsConfig, check_headers};

/// The channel's mode (the design records' two config-level modes, never guessed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BridgeMode {
    /// Beside a hook or plugin adapter that owns the core types: `x.{vendor}.*` only.
    #[default]
    Companion,
    /// Stream-only deployments: the full mapping.
    Primary,
}

/// `[bridges.<name>]`: one observed server. The keys not listed here are the vendor's own
/// (its observer reads and checks them).
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct BridgeConfig {
    /// The observer: a vendor's id, or a protocol's (required, unless `kind` is given).
    pub vendor: Option<String>,
    /// Deprecated: the observer by its former kind name (`ObserverSpec::kinds`).
    pub kind: Option<String>,
    /// The server's base URL (required); for a tee proxy, the endpoint requests go to.
    pub url: Option<HttpUrl>,
    /// A tee proxy's local address, where its clients send their requests (required there).
    pub listen: Option<SocketAddr>,
    /// `companion` (default) or `primary`, for the observers that have modes.
    pub mode: BridgeMode,
    /// The control gate: the asks the server's reply route answers become answerable (in
    /// `primary` mode, for the observers with modes), when an answer can reach the bridge
    /// (a token or a relay).
    pub control: bool,
    /// The envelope `agent` of the events; default the observer's id.
    pub agent: Option<aep_adapters::otel::generic::VendorName>,
    /// Extra headers on every request to the server.
    pub headers: Headers,
    /// TLS options for an `https://` server.
    pub tls: TlsConfig,
    /// First reconnect wait, milliseconds (then doubling, jittered by 20 %).
    pub reconnect_initial_ms: u64,
    /// Longest reconnect wait, milliseconds.
    pub reconnect_max_ms: u64,
    /// Connect timeout, the wait for a stream's answer, and one REST call, milliseconds.
    pub timeout_ms: u64,
    /// An open link silent this long is taken for dead and reconnected, milliseconds; 0 = never.
    pub idle_timeout_ms: u64,
    /// Largest SSE frame or WebSocket message accepted, bytes.
    pub max_frame_bytes: usize,
    /// How long a reply may take before the command is acked anyway (the write may still
    /// land), milliseconds; inside the 10 s ack window (AEP-0004 §3).
    pub reply_guard_ms: u64,
    /// The vendor's own keys.
    #[serde(flatten)]
    pub own: Own,
}

/// The vendor's own keys of a section: any observer's (the named one checks they are its
/// own); a key no observer has is refused as the section is read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Own(pub Map<String, Value>);

impl<'de> Deserialize<'de> for Own {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Map::<String, Value>::deserialize(d)?;
        let known: Vec<&str> = aep_adapters::observers::observers().flat_map(|o| o.fields.iter().copied()).collect();
        match map.keys().find(|k| !known.contains(&k.as_str())) {
            Some(k) => Err(serde::de::Error::custom(format!("unknown key `{k}`"))),
            None => Ok(Own(map)),
        }
    }
}

impl Default for BridgeConfig {
    fn default() -> Self {
        Self {
            vendor: None,
            kind: None,
            url: None,
            listen: None,
            mode: BridgeMode::Companion,
            control: false,
            agent: None,
            headers: Headers::new(),
            tls: TlsConfig::default(),
            reconnect_initial_ms: 500,
            reconnect_max_ms: 30_000,
            timeout_ms: 5_000,
            idle_timeout_ms: 60_000,
            max_frame_bytes: 4 << 20,
            reply_guard_ms: 8_000,
            own: Own::default(),
        }
    }
}

impl BridgeConfig {
    /// A section for `vendor` with its own keys `own` (a JSON object), the rest default.
    pub fn of(vendor: &str, own: Value) -> Self {
        let own = Own(match own {
            Value::Object(m) => m,
            _ => Map::new(),
        });
        Self { vendor: Some(vendor.to_owned()), own, ..Self::default() }
    }

    /// The observer the section names (by `vendor`, else by its deprecated `kind`).
    pub fn observer(&self) -> Option<&'static ObserverSpec> {
        match (&self.vendor, &self.kind) {
            (Some(v), _) => aep_adapters::observers::observer(v),
            (None, Some(k)) => aep_adapters::observers::observer_by_kind(k),
            (None, None) => None,
        }
    }

    /// Whether this bridge's asks are answerable: its gate is on where its observer honours
    /// one, and an answer can reach the bridge (`can_answer`: a token or a relay).
    pub fn answerable(&self, can_answer: bool) -> bool {
        can_answer && self.observer().is_some_and(|o| o.gated(self.control, self.mode == BridgeMode::Primary))
    }

    /// The agent identity of the events.
    pub fn agent(&self) -> String {
        match (&self.agent, self.observer()) {
            (Some(a), _) => a.as_str().to_owned(),
            (None, Some(o)) => o.id.to_owned(),
            (None, None) => String::new(),
        }
    }

    /// The reconnect policy of the bridge's links: doubling from `reconnect_initial_ms` to
    /// `reconnect_max_ms`, jittered by 20 %.
    pub fn reconnect_policy(&self) -> crate::transport::reconnect::Policy {
        crate::transport::reconnect::Policy::new(self.reconnect_initial_ms, self.reconnect_max_ms, 0.2)
    }

    /// Problems, as `(key, message)` under `prefix` (`bridges.<name>`).
    pub fn check(&self, prefix: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut bad = |key: &str, msg: String| out.push((format!("{prefix}{key}"), msg));
        let ids: Vec<&str> = aep_adapters::observers::observers().map(|o| o.id).collect();
        let o = self.observer();
        match (&self.vendor, &self.kind, o) {
            (None, None, _) => bad(".vendor", format!("is required: one of {}", ids.join(", "))),
            (Some(_), Some(_), _) => bad(".kind", "give vendor only (kind is its deprecated name)".into()),
            (Some(v), None, None) => bad(".vendor", format!("unknown observer {v:?}: one of {}", ids.join(", "))),
            (None, Some(k), None) => {
                bad(".kind", format!("unknown kind {k:?}; give vendor: one of {}", ids.join(", ")))
            }
            _ => {}
        }
        let proxy = o.is_some_and(|o| o.transport == Transport::TeeProxy);
        match &self.url {
            None => {
                bad(".url", "is required: the server's base URL (a tee proxy's: the endpoint it forwards to)".into())
            }
            Some(u) if u.url().query().is_some() && !proxy => {
                bad(".url", "give the base URL without a query; the paths are appended".into())
            }
            Some(_) => {}
        }
        match (proxy, self.listen) {
            (true, None) => bad(".listen", "is required: the local address its clients send their requests to".into()),
            (false, Some(_)) if o.is_some() => bad(".listen", "is for an observer that listens (a tee proxy)".into()),
            _ => {}
        }
        if let Some(o) = o {
            for (key, msg) in (o.check)(&self.own.0) {
                bad(&if key.is_empty() { String::new() } else { format!(".{key}") }, msg);
            }
            match o.gate {
                aep_adapters::observer::Gate::Never if self.control => {
                    bad(".control", format!("{} is a read-only channel: no control gate", o.id))
                }
                // The design records: companion has no control home (the plugin or the hooks are it).
                aep_adapters::observer::Gate::Primary if self.control && self.mode != BridgeMode::Primary => {
                    bad(".control", "is honoured in mode = \"primary\" only".into())
                }
                _ => {}
            }
        }
        if self.reconnect_initial_ms == 0 || self.reconnect_max_ms < self.reconnect_initial_ms {
            bad(".reconnect_max_ms", "needs 0 < reconnect_initial_ms <= reconnect_max_ms".into());
        }
        if self.max_frame_bytes < 1024 || self.max_frame_bytes > 64 << 20 {
            bad(".max_frame_bytes", "must be between 1024 and 67108864".into());
        }
        if self.reply_guard_ms == 0 || self.reply_guard_ms >= 10_000 {
            bad(".reply_guard_ms", "must be between 1 and 9999 (inside the 10 s ack window)".into());
        }
        if self.timeout_ms == 0 {
            bad(".timeout_ms", "must be at least 1".into());
        }
        check_headers(&format!("{prefix}.headers"), &self.headers, &mut out);
        out.extend(self.tls.check(&format!("{prefix}.tls")));
        out
    }
}

/// What an observer needs from the running bridge.
#[derive(Clone)]
pub struct Deps {
    /// Where the drafts go.
    pub pipeline: crate::pipeline::Pipeline,
    /// The control loop (routes and session claims).
    pub control: Arc<crate::control::ControlLoop>,
    /// The attention book (open requests, closed before `session.ended`).
    pub book: Arc<crate::attention::AttentionBook>,
    /// The capture posture of the mapping.
    pub cx: aep_adapters::MapContext,
    /// Whether an answer can reach this bridge at all (a token or a relay, AEP-0004 §4.1).
    pub can_answer: bool,
    /// The sessions the hook receiver's plugin calls delivered (a companion adds nothing for them).
    pub hook_sessions: Arc<claims::HookSessions>,
    /// The bridge's data folder (its `state/` keeps the observers' cursors); `None` keeps nothing.
    pub data_dir: Option<std::path::PathBuf>,
    /// The connection bounds of a listening observer (a tee proxy), shared with the
    /// bridge's other listeners, and who hears of a connection refused over them.
    pub listen: (aep_receivers::listener::Limits, aep_receivers::listener::OnRefused),
}

/// Why a bridge could not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The section is incomplete or names no observer (`config validate` reports it too).
    #[error("bridges.{0}: {1}")]
    Incomplete(String, String),
    /// The HTTP client could not be built.
    #[error("bridges.{0}: {1}")]
    Client(String, crate::transport::http::ClientError),
    /// The TLS options are unusable.
    #[error("bridges.{0}: tls.{1}")]
    Tls(String, crate::transport::tls::TlsError),
    /// A tee proxy could not start.
    #[error("bridges.{0}: {1}")]
    Proxy(String, crate::transport::proxy::ProxyError),
}

/// A started bridge.
#[derive(Debug)]
pub struct Spawned {
    /// Its task (it ends at shutdown).
    pub task: tokio::task::JoinHandle<()>,
    /// The address it listens on, for a tee proxy.
    pub listen: Option<SocketAddr>,
}

/// Starts `[bridges.<name>]` with its observer; it runs until `shutdown`.
pub fn spawn(
    name: &str,
    cfg: &BridgeConfig,
    deps: Deps,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<Spawned, SpawnError> {
    let incomplete = |why: String| SpawnError::Incomplete(name.to_owned(), why);
    let spec = cfg.observer().ok_or_else(|| incomplete("no observer: give vendor = \"<id>\"".into()))?;
    if let (None, Some(kind)) = (&cfg.vendor, &cfg.kind) {
        tracing::warn!(bridge = name, kind, vendor = spec.id, "kind is deprecated: write vendor = \"{}\".", spec.id);
    }
    let gated = cfg.answerable(deps.can_answer);
    if cfg.control && !gated {
        tracing::warn!(
            bridge = name,
            "control = true is not honoured: it needs a token or a relay for answers to arrive (and mode = \"primary\" where the observer has modes)."
        );
    }
    let primary = cfg.mode == BridgeMode::Primary;
    if spec.hook_companion && !primary {
        deps.hook_sessions.watch(&cfg.agent());
    }
    let setup = Setup { table: &cfg.own.0, primary, gated, max_frame: cfg.max_frame_bytes };
    let obs = (spec.build)(&setup).map_err(incomplete)?;
    let (rt, rx) = runtime::Runtime::new(name, cfg, spec, obs, deps.clone(), gated, shutdown.clone())?;
    let listen = match (spec.transport, cfg.listen, &cfg.url) {
        (Transport::Client, ..) => None,
        (Transport::TeeProxy, Some(listen), Some(url)) => {
            let http = crate::transport::HttpOptions {
                timeout: std::time::Duration::from_millis(cfg.timeout_ms),
                headers: cfg.headers.clone(),
                tls: cfg.tls.clone(),
            };
            let (tx, limits) = (rt.sender(), deps.listen.clone());
            let at = crate::transport::proxy::spawn(
                name,
                listen,
                url.as_str(),
                &http,
                cfg.max_frame_bytes,
                tx,
                limits,
                shutdown,
            )
            .map_err(|e| SpawnError::Proxy(name.to_owned(), e))?;
            Some(at)
        }
        (Transport::TeeProxy, ..) => return Err(incomplete("listen and url are required".into())),
    };
    Ok(Spawned { task: tokio::spawn(rt.run(rx)), listen })
}

/// The agent identities that take no command, so their relay `hello` and roster entries
/// declare `control: { accepts: [] }` and a command for them is refused as `unsupported`
/// (AEP-0004 §4.2): the identity of every bridge whose asks are not answerable
/// ([`BridgeConfig::answerable`]), unless it is shared with something that does take
/// commands: another bridge whose gate is on, or a hook vendor (`hooked`: a plugin answers
/// its own asks under the identity its companion-mode stream observer shares).
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

#[cfg(test)]
mod tests;
