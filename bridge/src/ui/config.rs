//! `[ui]`: the web view's section, owned here beside the view it configures;
//! `crate::config` only aggregates it.

use serde::Deserialize;

/// Longest answerer name, in characters.
pub const MAX_NAME: usize = 64;

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
    /// Who answers from a page logged in with the bridge's token: recorded on every answer
    /// (`attention.answered` `by`) so history says who decided, not only "the web view".
    /// One name per token; empty records the view's sender identity alone.
    pub name: String,
    /// How many days back the page's history reaches in the JSONL logs.
    pub history_days: u32,
    /// Most sessions the history index keeps (the most recently written first): one small
    /// summary each, never their events.
    pub history_sessions: usize,
}

impl Default for UiConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            allowed_hosts: Vec::new(),
            name: String::new(),
            history_days: 7,
            history_sessions: 20_000,
        }
    }
}

impl UiConfig {
    /// Problems in this section alone, as `(key, message)` with keys inside `[ui]`.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.name.chars().count() > MAX_NAME || self.name.chars().any(char::is_control) {
            out.push(("name".into(), format!("at most {MAX_NAME} characters, none of them control characters")));
        }
        if self.history_days == 0 || self.history_days > 366 {
            out.push(("history_days".into(), "must be between 1 and 366".into()));
        }
        if self.history_sessions == 0 || self.history_sessions > 1_000_000 {
            out.push(("history_sessions".into(), "must be between 1 and 1000000".into()));
        }
        out
    }

    /// The answerer's name, when one is set.
    pub fn answerer(&self) -> Option<&str> {
        Some(self.name.trim()).filter(|n| !n.is_empty())
    }
}
