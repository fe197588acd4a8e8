//! Structured agent protocols observed without hooks (AEP-0002 Annex A.13, A.14): one folder
//! per protocol, each with its README (mapping table, deviations, honest gaps) as the module
//! doc. Each folder holds the pure moment -> drafts mapping the Annex A fixture pins and,
//! for the stdio protocols, a [`LineMapper`]: the stateful tee side (request/response joins,
//! run and session identity) that `aep-bridge wrap` drives line by line; AG-UI, spoken over
//! HTTP, has an observer the bridge's tee proxy drives. (OpenHands' agent server speaks its
//! vendor's own protocol: its mapping and observer are its vendor folder's.)
//!
//! Everything here is pure: no I/O, no clock, no randomness. The tee's restart generation
//! (which qualifies run ids) is handed in by the caller.

use crate::{EventDraft, MapContext};

pub mod acp;
pub mod agui;
pub mod claude_stream_json;
pub mod codex_app_server;
pub mod pi_rpc;

/// The protocols' observers (after the vendors' in [`crate::observers::observers`]): a
/// protocol any agent may speak over its own server, observed the same way whatever the agent.
pub static OBSERVERS: &[&crate::observer::ObserverSpec] = &[&agui::observer::OBSERVER];

/// Which way a teed line travelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client (editor, driver) -> agent: the agent's stdin.
    ToAgent,
    /// Agent -> client: the agent's stdout.
    FromAgent,
}

impl Direction {
    /// The other way.
    pub fn flip(self) -> Self {
        match self {
            Direction::ToAgent => Direction::FromAgent,
            Direction::FromAgent => Direction::ToAgent,
        }
    }
}

/// Who may answer an approval this protocol raises (AEP-0008 `respond_via`), as the tee
/// declares it in `aep-bridge wrap --help` and its README.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answerable {
    /// The client owns the gate: the bridge observes it and never answers (`respond_via`
    /// absent, outcomes `via: "oob"`).
    ObserveOnly,
    /// The protocol lets the driver answer, but a tee is not the driver: observed, the
    /// answer comes from the wrapped client (`respond_via: ["oob"]`).
    DriverOwned,
}

/// The stateful side of a stdio protocol: maps one complete teed line (without its newline)
/// to drafts carrying their `session` and `run`. A line that is not JSON, or not a shape the
/// protocol defines, maps to nothing: the pass-through never depends on it.
pub trait LineMapper: Send {
    /// The envelope `agent` of the drafts mapped so far: the protocol's vendor, or (ACP) the
    /// agent's own name once the wire gave it. The caller reads it after each line.
    fn agent(&self) -> &str;
    /// Maps one line seen travelling `dir`.
    fn map_line(&mut self, dir: Direction, line: &[u8], cx: &MapContext) -> Vec<EventDraft>;
    /// The agent's output ended: drafts the mapper still holds, if it can place them now
    /// (pi's events that waited for a session no response named). Nothing by default.
    fn finish(&mut self, _cx: &MapContext) -> Vec<EventDraft> {
        Vec::new()
    }
}

/// The stdio protocols `aep-bridge wrap` speaks, by CLI name.
pub const STDIO_PROTOCOLS: &[&str] =
    &[acp::PROTOCOL, claude_stream_json::PROTOCOL, codex_app_server::PROTOCOL, pi_rpc::PROTOCOL];

/// A fresh tee for `protocol` (see [`STDIO_PROTOCOLS`]); `epoch` is the tee's restart
/// generation, qualifying the run ids it mints from wire ids.
pub fn line_mapper(protocol: &str, epoch: u64, opts: Options) -> Option<Box<dyn LineMapper>> {
    match protocol {
        acp::PROTOCOL => Some(Box::new(acp::Tee::new(epoch, opts))),
        claude_stream_json::PROTOCOL => Some(Box::new(claude_stream_json::Tee::new(opts))),
        codex_app_server::PROTOCOL => Some(Box::new(codex_app_server::Tee::new(opts))),
        pi_rpc::PROTOCOL => Some(Box::new(pi_rpc::Tee::new(epoch, opts))),
        _ => None,
    }
}

pub(crate) use crate::translate::debug;
pub use crate::translate::{Options, content_text, dotted, family_leaf, snake_acronyms};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_two_segment_types() {
        assert_eq!(dotted("fs/read_text_file"), "fs.read.text.file");
        assert_eq!(dotted("initialize"), "initialize.event");
        assert_eq!(dotted("current_mode_update"), "current.mode.update");
        assert_eq!(dotted("//"), "unknown.event");
        assert_eq!(family_leaf("TEXT_MESSAGE_CONTENT"), "text_message.content");
        assert_eq!(family_leaf("RAW"), "raw.event");
        assert_eq!(family_leaf("user_reject_observation"), "user_reject.observation");
        assert_eq!(snake_acronyms("ACPToolCallEvent"), "acp_tool_call_event");
        assert_eq!(snake_acronyms("MessageEvent"), "message_event");
        assert_eq!(snake_acronyms("HTTPError2Event"), "http_error2_event");
    }

    #[test]
    fn content_lists_join_their_text_parts() {
        let v = serde_json::json!([{"type": "text", "text": "a"}, {"type": "image", "data": "x"}, {"type": "text", "text": "b"}]);
        assert_eq!(content_text(&v).as_deref(), Some("a\nb"));
        assert_eq!(content_text(&serde_json::json!(3)), None);
    }
}
