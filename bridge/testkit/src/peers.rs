//! Where the real Go peers of the collector-config tests are: the project's OpenTelemetry
//! Collector distribution, Jaeger v2 and Prometheus 3, built from their Go modules by
//! `.ci/peers-go` into a cache folder keyed by the versions in
//! `collector-config/peers-go.env`. A test that finds none prints a SKIP naming that
//! command, as the PyPI peers' tests do; CI builds them first, so CI never skips.

use std::path::PathBuf;

/// `collector-config/peers-go.env`: the versions `.ci/peers-go` builds.
const VERSIONS: &str = include_str!("../../../collector-config/peers-go.env");

/// One Go peer: its name in `.ci/peers-go`, the variable that overrides its path, its
/// binary.
#[derive(Clone, Copy, Debug)]
pub struct GoPeer {
    /// The argument of `.ci/peers-go` and the `KEY` in `peers-go.env` (upper-cased).
    pub name: &'static str,
    /// Folder prefix in the cache (`PREFIX-VERSION/`).
    prefix: &'static str,
    /// The binary in that folder.
    binary: &'static str,
    /// The environment variable that names the binary directly.
    pub env: &'static str,
}

/// The project's Collector distribution (`collector-config/otelcol-builder.yaml`).
pub const OTELCOL: GoPeer =
    GoPeer { name: "otelcol", prefix: "otelcol-aep", binary: "otelcol-aep", env: "AEP_OTELCOL" };
/// Jaeger v2 (`cmd/jaeger`).
pub const JAEGER: GoPeer = GoPeer { name: "jaeger", prefix: "jaeger", binary: "jaeger", env: "AEP_JAEGER" };
/// Prometheus 3, the OTLP receiver built in.
pub const PROMETHEUS3: GoPeer =
    GoPeer { name: "prometheus", prefix: "prometheus", binary: "prometheus", env: "AEP_PROMETHEUS3" };

impl GoPeer {
    /// The version `.ci/peers-go` builds (`v0.148.0`, ...).
    pub fn version(&self) -> &'static str {
        let key = self.name.to_ascii_uppercase();
        VERSIONS
            .lines()
            .filter_map(|l| l.trim().split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.trim())
            .unwrap_or_else(|| panic!("collector-config/peers-go.env has no {key}"))
    }

    /// The binary: `$ENV` when set, else `$AEP_PEERS_CACHE` (default `~/.cache/aep-peers`)
    /// `/PREFIX-VERSION/BINARY`; `None` when it is not there.
    pub fn path(&self) -> Option<PathBuf> {
        if let Some(p) = std::env::var_os(self.env) {
            return Some(PathBuf::from(p)).filter(|p| p.is_file());
        }
        let cache = std::env::var_os("AEP_PEERS_CACHE")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/aep-peers")))?;
        let p = cache.join(format!("{}-{}", self.prefix, self.version())).join(self.binary);
        p.is_file().then_some(p)
    }

    /// The binary, or `None` after printing `SKIP {test}: ...` with the command that builds
    /// it.
    pub fn or_skip(&self, test: &str) -> Option<PathBuf> {
        let found = self.path();
        if found.is_none() {
            eprintln!(
                "SKIP {test}: {} {} is not built (needs Go; run .ci/peers-go {}, or set {} to its binary)",
                self.binary,
                self.version(),
                self.name,
                self.env
            );
        }
        found
    }
}

/// GETs `url` with `query` as its URL-encoded query string (a PromQL expression, say) on a
/// worker thread; returns status and body.
pub async fn get_query(url: String, query: Vec<(String, String)>) -> (u16, String) {
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        let mut req = agent.get(&url);
        for (k, v) in &query {
            req = req.query(k, v);
        }
        let mut resp = req.call().expect("request failed");
        (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap_or_default())
    })
    .await
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_peer_has_a_version() {
        for p in [OTELCOL, JAEGER, PROMETHEUS3] {
            assert!(p.version().starts_with('v'), "{}: {}", p.name, p.version());
        }
    }
}
