//! `[ui]`: the web view's section, owned here beside the view it configures;
//! `crate::config` only aggregates it.

use serde::Deserialize;

/// `[ui]`: the web view on the main port (served only while the collector is on: it reads
/// the collector's stream and answers through its command routing).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UiConfig {
    /// Serve the page at `/` (on by default: it is loopback-only unless the bridge listens
    /// elsewhere, and behind the token when one is set).
    pub enabled: bool,
    /// Host names the page may be reached by besides IP addresses, `localhost` and
    /// `server.host` (a reverse proxy's name): any other `Host` is refused, so a web page
    /// that rebinds its own name to this address cannot read the view. Kept for older
    /// files: `server.allowed_hosts` names them for every route, the view's included.
    pub allowed_hosts: Vec<String>,
}

impl Default for UiConfig {
    fn default() -> Self {
        Self { enabled: true, allowed_hosts: Vec::new() }
    }
}
