//! `[collector]`: the embedded collector's section, owned here beside the collector it
//! configures; `crate::config` only aggregates it.

use serde::Deserialize;

/// `[collector]`: the embedded AEP collector endpoint.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CollectorConfig {
    /// Serve `/events`, `/stream`, `/socket`, `/.well-known/aep` (default true).
    pub enabled: bool,
    /// Replay buffer depth per session.
    pub replay_buffer: usize,
    /// Bytes the replay buffers hold over all sessions, at most (oldest evicted first).
    pub replay_bytes: usize,
    /// SSE `: ping` heartbeat interval, seconds.
    pub heartbeat_secs: u64,
    /// Largest `POST /events` body, bytes.
    pub max_body: usize,
    /// Per-subscriber queue depth before debug/info events are dropped (AEP-0003 §8.4).
    pub subscriber_queue: usize,
    /// Bytes of event lines one consumer (an SSE stream, a WebSocket connection) may have
    /// queued: past it debug/info events are dropped for it and a notice+ event cuts it
    /// (AEP-0003 §8.4), so a stalled consumer of large events holds bounded memory.
    pub subscriber_bytes: usize,
}

impl Default for CollectorConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            replay_buffer: 1024,
            replay_bytes: 64 * 1024 * 1024,
            heartbeat_secs: 15,
            max_body: 4 * 1024 * 1024,
            subscriber_queue: 4096,
            subscriber_bytes: 8 * 1024 * 1024,
        }
    }
}

impl CollectorConfig {
    /// Problems in this section alone, as `(key, message)` with keys inside `[collector]`:
    /// the section judges its own values; `config` prefixes the keys and adds the checks
    /// across sections.
    pub fn check(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.replay_buffer == 0 {
            out.push(("replay_buffer".into(), "must be at least 1".into()));
        }
        out
    }
}
