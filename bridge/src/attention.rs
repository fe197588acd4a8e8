//! The attention book: open `attention.requested` events per session, so the bridge can
//! settle them when the agent's own surface answered and close every one still open
//! before `session.ended` (AEP-0002 §7.2: pending requests are closed before the session
//! ends). A permission request whose tool then ran (`tool.completed` for the same tool)
//! was granted in the agent's own dialog: `attention.answered` (its allowing option,
//! `via: oob`) then `attention.resolved` answered, as the agents' own records of such a
//! decision say (an `accept` from the user's dialog). A failed or denied tool outcome
//! does not say how the request was settled: `attention.resolved` dismissed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use aep_adapters::EventDraft;
use aep_schemas::Capture;
use serde_json::{Map, Value, json};

use crate::pipeline::Stamped;

/// One open attention request.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The request's event id (the lifecycle's `subject`, AEP-0002 §7.1).
    pub id: String,
    /// The agent that raised it.
    pub agent: String,
    /// Its session.
    pub session: String,
    /// Its run, if any.
    pub run: Option<String>,
    /// The tool it is about (its `subject`), if any.
    pub tool: Option<String>,
    /// `data.kind`.
    pub kind: String,
    /// `data.prompt` as emitted (already gated at the source).
    pub prompt: Option<String>,
    /// `data.options` as emitted.
    pub options: Value,
    /// `data.fields` for forms.
    pub fields: Value,
    /// When it was raised (Unix ms).
    pub since_ms: u64,
}

/// Open requests per `(agent, session)`.
#[derive(Debug, Default)]
pub struct AttentionBook {
    open: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    by_session: HashMap<(String, String), Vec<Pending>>,
    /// Requests opened before publication ([`AttentionBook::open`]): their own
    /// `attention.requested`, observed later (possibly after they were answered), opens nothing.
    preopened: HashSet<String>,
}

impl Pending {
    /// The request an `attention.requested` with id `id` and payload `data` raises.
    pub fn from_request(
        id: String,
        agent: &str,
        session: String,
        run: Option<String>,
        subject: Option<String>,
        data: &Map<String, Value>,
        since_ms: u64,
    ) -> Self {
        Pending {
            id,
            agent: agent.to_owned(),
            session,
            run,
            tool: subject,
            kind: data.get("kind").and_then(Value::as_str).unwrap_or("other").to_owned(),
            prompt: data.get("prompt").and_then(Value::as_str).map(str::to_owned),
            options: data.get("options").cloned().unwrap_or(Value::Null),
            fields: data.get("fields").cloned().unwrap_or(Value::Null),
            since_ms,
        }
    }

    /// A lifecycle draft about this request (AEP-0002 §7.1): its session and run, `subject`
    /// = the request id, `cause` = the request (callers answering a command re-point it).
    pub fn lifecycle(&self, ty: &str, capture: Capture) -> EventDraft {
        let mut d = EventDraft::new(ty, capture);
        d.session = Some(self.session.clone());
        d.run = self.run.clone();
        d.subject = Some(self.id.clone());
        d.cause = Some(self.id.clone());
        d
    }

    /// `attention.answered` with the request's allowing option (`allow`, or the first
    /// option whose id starts with `allow`, `accept` or `approve`), answered in the agent's
    /// own surface (`via: oob`, AEP-0008).
    pub fn allowed_oob(&self) -> EventDraft {
        let mut d = self.lifecycle("attention.answered", Capture::Metadata);
        let ids = self.options.as_array().into_iter().flatten().filter_map(|o| o.get("id")?.as_str());
        let allowing = |id: &&str| ["allow", "accept", "approve"].iter().any(|w| id.starts_with(w));
        let option = ids.clone().find(|id| *id == "allow").or_else(|| ids.clone().find(allowing));
        let answer = match option {
            Some(o) => json!({ "option": o }),
            None => json!({}),
        };
        d.data.insert("answer".into(), answer);
        d.data.insert("via".into(), json!("oob"));
        d
    }

    /// `attention.resolved` with `resolution` and the wait so far.
    pub fn resolved(&self, now_ms: u64, resolution: &str) -> EventDraft {
        let mut d = self.lifecycle("attention.resolved", Capture::Metadata);
        d.data.insert("resolution".into(), json!(resolution));
        d.data.insert("latency_ms".into(), json!(now_ms.saturating_sub(self.since_ms)));
        d
    }
}

impl AttentionBook {
    /// Rewrites a batch of drafts before it is stamped: before a tool outcome that settles a
    /// pending permission request for the same tool, `attention.answered` + `attention.resolved`
    /// answered (the tool ran: it was allowed) or `attention.resolved` dismissed (it failed or
    /// was denied); before `session.ended`, `attention.resolved` dismissed for every request
    /// still open.
    pub fn settle(&self, agent: &str, drafts: &mut Vec<EventDraft>, now_ms: u64) -> Vec<String> {
        let mut settled = Vec::new();
        let Ok(mut book) = self.open.lock() else { return settled };
        let open = &mut book.by_session;
        let mut out = Vec::with_capacity(drafts.len());
        for d in drafts.drain(..) {
            if let Some(session) = d.session.clone() {
                let key = (agent.to_owned(), session);
                if let Some(list) = open.get_mut(&key) {
                    match d.r#type.as_str() {
                        "tool.completed" | "tool.failed" | "tool.denied" => {
                            let tool = d.subject.clone().or_else(|| {
                                d.data
                                    .get("tool")
                                    .and_then(|t| t.get("name"))
                                    .and_then(Value::as_str)
                                    .map(str::to_owned)
                            });
                            if let Some(i) =
                                list.iter().position(|p| p.kind == "permission" && p.tool.is_some() && p.tool == tool)
                            {
                                let p = list.remove(i);
                                settled.push(p.id.clone());
                                if d.r#type == "tool.completed" {
                                    out.push(p.allowed_oob());
                                    out.push(p.resolved(now_ms, "answered"));
                                } else {
                                    out.push(p.resolved(now_ms, "dismissed"));
                                }
                            }
                        }
                        "session.ended" => {
                            for p in list.drain(..) {
                                settled.push(p.id.clone());
                                out.push(p.resolved(now_ms, "dismissed"));
                            }
                        }
                        _ => {}
                    }
                }
            }
            out.push(d);
        }
        *drafts = out;
        settled
    }

    /// Opens a request before its `attention.requested` is published: an answer may be
    /// applied (and the request closed) before [`Self::observe`] sees the request itself.
    pub fn open(&self, p: Pending) {
        let Ok(mut book) = self.open.lock() else { return };
        book.preopened.insert(p.id.clone());
        book.by_session.entry((p.agent.clone(), p.session.clone())).or_default().push(p);
    }

    /// Records what was stamped: opens requests, closes those resolved or timed out.
    pub fn observe(&self, stamped: &[Arc<Stamped>], now_ms: u64) {
        let Ok(mut book) = self.open.lock() else { return };
        let Book { by_session: open, preopened } = &mut *book;
        for s in stamped {
            let ev = &s.event;
            let Some(session) = ev.session.clone() else { continue };
            let key = (ev.agent.to_string(), session.clone());
            match ev.r#type.as_str() {
                "attention.requested" => {
                    if preopened.remove(&ev.id) {
                        continue;
                    }
                    let empty = Map::new();
                    let data = ev.data.as_ref().and_then(Value::as_object).unwrap_or(&empty);
                    let p = Pending::from_request(
                        ev.id.clone(),
                        &ev.agent,
                        session,
                        ev.run.clone(),
                        ev.subject.clone(),
                        data,
                        now_ms,
                    );
                    open.entry(key).or_default().push(p);
                }
                "attention.resolved" | "attention.timeout" => {
                    if let Some(list) = open.get_mut(&key) {
                        let target = ev.subject.as_deref().or(ev.cause.as_deref());
                        list.retain(|p| Some(p.id.as_str()) != target);
                        if list.is_empty() {
                            open.remove(&key);
                        }
                    }
                }
                "session.ended" => {
                    open.remove(&key);
                }
                _ => {}
            }
        }
    }

    /// A snapshot of every open request.
    pub fn pending(&self) -> Vec<Pending> {
        self.open.lock().map(|b| b.by_session.values().flatten().cloned().collect()).unwrap_or_default()
    }

    /// Removes one request (answered or timed out by the control loop).
    pub fn take(&self, id: &str) -> Option<Pending> {
        let mut book = self.open.lock().ok()?;
        book.preopened.remove(id);
        for list in book.by_session.values_mut() {
            if let Some(i) = list.iter().position(|p| p.id == id) {
                return Some(list.remove(i));
            }
        }
        None
    }

    /// Looks one request up.
    pub fn get(&self, id: &str) -> Option<Pending> {
        self.open.lock().ok()?.by_session.values().flatten().find(|p| p.id == id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draft(ty: &str, subject: Option<&str>) -> EventDraft {
        let mut d = EventDraft::new(ty, Capture::Metadata);
        d.session = Some("s".into());
        d.subject = subject.map(str::to_owned);
        d
    }

    fn stamped(ty: &str, id: &str, subject: Option<&str>) -> Arc<Stamped> {
        Arc::new(Stamped::new(aep_schemas::Event {
            aep: "0.1".into(),
            id: id.into(),
            r#type: ty.into(),
            agent: "cc".into(),
            session: Some("s".into()),
            subject: subject.map(str::to_owned),
            data: Some(json!({"kind": "permission", "options": [{"id": "allow"}, {"id": "deny"}]})),
            ..Default::default()
        }))
    }

    #[test]
    fn a_tool_result_settles_and_session_end_closes_the_rest() {
        let book = AttentionBook::default();
        book.observe(
            &[stamped("attention.requested", "A1", Some("Bash")), stamped("attention.requested", "A2", Some("Write"))],
            1000,
        );
        let mut batch = vec![draft("tool.completed", Some("Bash"))];
        book.settle("cc", &mut batch, 1500);
        assert_eq!(
            batch.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(),
            ["attention.answered", "attention.resolved", "tool.completed"]
        );
        // The tool ran: the person allowed it in the agent's own dialog.
        assert_eq!(batch[0].data["answer"], json!({"option": "allow"}));
        assert_eq!(batch[0].data["via"], "oob");
        assert_eq!(batch[1].subject.as_deref(), Some("A1"));
        assert_eq!(batch[1].data["resolution"], "answered");
        assert_eq!(batch[1].data["latency_ms"], 500);
        book.observe(&[stamped("attention.resolved", "R1", Some("A1"))], 1500);
        let mut end = vec![draft("session.ended", None)];
        book.settle("cc", &mut end, 2000);
        assert_eq!(end.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["attention.resolved", "session.ended"]);
        assert_eq!(end[0].subject.as_deref(), Some("A2"));
        let mut again = vec![draft("tool.completed", Some("Bash"))];
        book.settle("cc", &mut again, 2000);
        assert_eq!(again.len(), 1, "nothing left to settle");
        // A failed tool says nothing certain of how its request was settled.
        book.observe(&[stamped("attention.requested", "A3", Some("Read"))], 3000);
        let mut failed = vec![draft("tool.failed", Some("Read"))];
        book.settle("cc", &mut failed, 3100);
        assert_eq!(failed.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["attention.resolved", "tool.failed"]);
        assert_eq!(failed[0].data["resolution"], "dismissed");
    }
}
