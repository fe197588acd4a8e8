//! The live web view the bridge serves at `/`: the sessions of the last days with their run,
//! tool and attention tree, tokens and cost, search and filters, and an attention inbox
//! answerable from the page. A team that runs many agents watches and answers them in one
//! place, with nothing to install.
//!
//! - The page and its script are embedded in the binary (no build step, no CDN). Sessions
//!   come from the JSONL logs ([`History`]: one summary per session, paged by time, agent
//!   and text), kept current by the collector's own SSE stream (AEP-0003 §3.3).
//! - Answers are `control.attention.respond` commands with the sender identity
//!   [`SENDER`] (and the login's name, `[ui] name`, as `data.by`), routed by the
//!   collector's one command path ([`crate::collector::submit_command`]), exactly as a
//!   `/socket` sender's are.
//! - Safe by construction: the token never rides a URL; a login exchanges it once for a
//!   random cookie session; answers need a same-origin request and the page's nonce; a
//!   strict Content-Security-Policy; event fields are rendered as text only.

mod config;
mod history;
mod http;
mod sessions;

pub use config::UiConfig;
pub use history::{History, Summary};
pub use http::{MAX_BODY, Ui, router};
pub use sessions::{MAX_SESSIONS, Sessions};

/// The web view's sender identity on the commands it sends (AEP-0004 §2.2: `agent` names
/// the sender), which is how history records who answered.
pub const SENDER: &str = "aep-web";
