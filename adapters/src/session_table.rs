//! The hook receiver's memory of sessions, pure: one mapping state per `(vendor, session)`
//! (least recently used dropped past [`MAX_SESSIONS`]), the AEP session generations of a
//! vendor session resumed after its end, the idle close of sessions a vendor never ends,
//! and the checks a hook call passes before its drafts are admitted. The caller keeps the
//! table behind its own lock and hands the time in (Unix ms).

use std::collections::HashMap;

use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState};

/// Most `(vendor, session)` mapping states kept; beyond it the least recently used is dropped
/// (a dropped state only loses synthesized-run memory and, for a session its vendor never
/// ends, the idle close; never an event).
pub const MAX_SESSIONS: usize = 10_000;

/// Longest hook name accepted (the longest real one, `UserPromptSubmit`-like names, is ~30).
pub const MAX_HOOK_NAME: usize = 64;

/// Longest session id accepted (real ones are UUIDs, ULIDs or `ses_...` ids).
pub const MAX_SESSION_ID: usize = 256;

/// One `(vendor, session)` mapping state and when it was last used.
#[derive(Debug, Default)]
struct Slot {
    state: SessionState,
    /// The LRU tick of the last call.
    tick: u64,
    /// When the last call came (the caller's clock, Unix ms).
    last_ms: u64,
    /// The event time of the last call's drafts (the vendor's timestamp when it gave one).
    last_time: Option<String>,
}

/// Per vendor session: the AEP session generation and whether it has ended.
#[derive(Debug, Clone, Copy, Default)]
struct Lifetime {
    generation: u32,
    ended: bool,
}

/// The mapping states and session lifetimes of every `(vendor, session)` seen.
#[derive(Debug, Default)]
pub struct SessionTable {
    map: HashMap<(String, String), Slot>,
    lifetimes: HashMap<(String, String), Lifetime>,
    tick: u64,
}

impl SessionTable {
    /// Maps one hook call (`hook` is its name) through `adapter` with its session's state,
    /// heard at `now_ms`; the drafts carry their AEP session's generation and the session's
    /// drift record ([`crate::drift`]), and what drifted is returned for the caller's counter.
    pub fn map(
        &mut self,
        adapter: &dyn HookAdapter,
        call: &HookCall<'_>,
        hook: &str,
        now_ms: u64,
        cx: &MapContext,
    ) -> Result<(Vec<EventDraft>, crate::drift::Observed), AdapterError> {
        let session = adapter.session_id(call).unwrap_or_default();
        let key = (adapter.vendor().to_owned(), session);
        self.tick += 1;
        let tick = self.tick;
        if !self.map.contains_key(&key)
            && self.map.len() >= MAX_SESSIONS
            && let Some(oldest) = self.map.iter().min_by_key(|(_, slot)| slot.tick).map(|(k, _)| k.clone())
        {
            self.map.remove(&oldest);
        }
        if !self.lifetimes.contains_key(&key) && self.lifetimes.len() >= MAX_SESSIONS * 4 {
            self.lifetimes.clear();
        }
        let slot = self.map.entry(key.clone()).or_default();
        slot.tick = tick;
        slot.last_ms = now_ms;
        let mut drafts = adapter.map(call, &mut slot.state, cx)?;
        // What the adapter was not written for: recorded once per session, returned for the
        // caller to count.
        let mut observed = crate::drift::observe(adapter, hook, call.payload, &mut slot.state, cx);
        if let Some(record) = observed.draft.take() {
            crate::drift::place(&mut drafts, record);
        }
        if let Some(t) = drafts.iter().rev().find_map(|d| d.time.clone()) {
            slot.last_time = Some(t);
        } else if !drafts.is_empty() {
            slot.last_time = None;
        }
        let life = self.lifetimes.entry(key).or_default();
        apply_lifetime(life, &mut drafts, adapter.resumes_session(hook));
        Ok((drafts, observed))
    }

    /// Ends the sessions silent for `idle_ms` at `now_ms` whose adapter (found by vendor)
    /// says their vendor never will, each once, stamped at the last moment the session was
    /// heard from. Their mapping state is dropped, so a later call is a first sight: a
    /// continuation (`{id}.2`, lineage to the ended one). Returns each ended session's
    /// drafts with its vendor.
    pub fn close_idle<'a>(
        &mut self,
        adapter_of: impl Fn(&str) -> Option<&'a dyn HookAdapter>,
        now_ms: u64,
        idle_ms: u64,
        cx: &MapContext,
    ) -> Vec<(&'static str, Vec<EventDraft>)> {
        let due: Vec<_> = self
            .map
            .iter()
            .filter(|(_, slot)| now_ms.saturating_sub(slot.last_ms) >= idle_ms)
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for key in due {
            let Some(adapter) = adapter_of(key.0.as_str()) else { continue };
            let Some(slot) = self.map.get_mut(&key) else { continue };
            let mut drafts = adapter.close_idle(&key.1, &mut slot.state, cx);
            if drafts.is_empty() {
                continue;
            }
            let time = slot.last_time.clone().unwrap_or_else(|| aep_schemas::time::format_rfc3339_ms(slot.last_ms));
            for d in &mut drafts {
                d.time.get_or_insert_with(|| time.clone());
            }
            self.map.remove(&key);
            apply_lifetime(self.lifetimes.entry(key).or_default(), &mut drafts, true);
            out.push((adapter.vendor(), drafts));
        }
        out
    }
}

/// The AEP session name of generation `g` of a vendor session: the vendor id itself, then
/// `{id}.{g}` for continuations.
fn generation_name(id: &str, g: u32) -> String {
    if g <= 1 { id.to_owned() } else { format!("{id}.{g}") }
}

/// Applies session lifetimes to a batch. A vendor that resumes a session after it ended
/// (reusing the session id, as a `--resume` does) would otherwise emit a second
/// `session.ended` for one AEP session (AEP-0002 §2 convention 5); the continuation
/// becomes a new AEP session `{id}.{n}` whose `session.started` names the previous one as
/// `parent` (lineage), so an observer still sees one conversation. A call that does not
/// `resume` (a late completion after the session's end, see
/// [`HookAdapter::resumes_session`]) stays on the ended session: Events after a terminal
/// are legal there (AEP-0002 §2 #5).
fn apply_lifetime(life: &mut Lifetime, drafts: &mut [EventDraft], resume: bool) {
    if life.generation == 0 {
        life.generation = 1;
    }
    if life.ended && resume && !drafts.is_empty() {
        life.generation += 1;
        life.ended = false;
    }
    if life.generation > 1 {
        for d in drafts.iter_mut() {
            if let Some(s) = &d.session {
                let prev = generation_name(s, life.generation - 1);
                let name = generation_name(s, life.generation);
                if d.r#type == "session.started" && !d.data.contains_key("parent") {
                    d.data.insert("parent".into(), serde_json::json!({ "session": prev }));
                }
                d.session = Some(name);
            }
        }
    }
    if drafts.iter().any(|d| d.r#type == "session.ended") {
        life.ended = true;
    }
}

/// A hook name becomes part of an event type (`x.{vendor}.{category}.{hook}`, AEP-0001 §6):
/// it must be a short token, or the bridge would mint types its own validator rejects.
pub fn check_hook_name(hook: &str) -> Result<(), String> {
    let ok = !hook.is_empty()
        && hook.len() <= MAX_HOOK_NAME
        && hook.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-' | b':'));
    if ok {
        return Ok(());
    }
    let shown: String = hook.chars().take(MAX_HOOK_NAME).flat_map(char::escape_default).collect();
    Err(format!(
        "hook name {shown:?} is not a token of at most {MAX_HOOK_NAME} ASCII letters, digits, '_', '.', '-' or ':'"
    ))
}

/// Every event but `agent.*` belongs to a session (AEP-0001 §5.1): a payload whose session id
/// is missing, empty, oversized or carries control characters is refused, not emitted sessionless.
pub fn check_sessions(drafts: &[EventDraft]) -> Result<(), String> {
    for d in drafts {
        if aep_schemas::event::is_agent_scoped(&d.r#type) {
            continue;
        }
        match d.session.as_deref() {
            None | Some("") => return Err("the hook payload names no session (session id missing or empty)".into()),
            Some(s) if s.len() > MAX_SESSION_ID || s.chars().any(char::is_control) => {
                return Err(format!("session id is longer than {MAX_SESSION_ID} bytes or contains control characters"));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Capture;

    fn d(ty: &str) -> EventDraft {
        let mut d = EventDraft::new(ty, Capture::Metadata);
        d.session = Some("s".into());
        d
    }

    #[test]
    fn a_resumed_session_becomes_a_linked_continuation() {
        let mut life = Lifetime::default();
        let mut a = vec![d("session.started"), d("session.ended")];
        apply_lifetime(&mut life, &mut a, true);
        assert_eq!(a[1].session.as_deref(), Some("s"));
        let mut b = vec![d("session.started")];
        apply_lifetime(&mut life, &mut b, true);
        assert_eq!(b[0].session.as_deref(), Some("s.2"));
        assert_eq!(b[0].data["parent"]["session"], "s");
        let mut c = vec![d("run.started")];
        apply_lifetime(&mut life, &mut c, true);
        assert_eq!(c[0].session.as_deref(), Some("s.2"));
    }

    #[test]
    fn hook_names_and_session_ids_are_checked() {
        assert!(check_hook_name("PreToolUse").is_ok() && check_hook_name("session.idle").is_ok());
        assert!(check_hook_name("").is_err() && check_hook_name("a b").is_err());
        assert!(check_hook_name(&"x".repeat(MAX_HOOK_NAME + 1)).is_err());
        assert!(check_sessions(&[d("run.started")]).is_ok());
        let mut none = d("run.started");
        none.session = None;
        assert!(check_sessions(&[none.clone()]).unwrap_err().contains("names no session"));
        none.r#type = "agent.started".into();
        assert!(check_sessions(&[none]).is_ok(), "agent-scoped events take no session");
        let mut ctl = d("run.started");
        ctl.session = Some("a\nb".into());
        assert!(check_sessions(&[ctl]).unwrap_err().contains("control characters"));
    }
}
