//! The attention lifecycle (AEP-0002 §7), vendor-neutral and pure: an open request
//! ([`Pending`]), the answer a command applies to it ([`Pending::apply`], AEP-0006 and
//! AEP-0008), the lifecycle drafts that follow it, and the book of open requests per
//! session ([`AttentionBook`]).
//!
//! The book lets the bridge settle requests when the agent's own surface answered and
//! close every one still open before `session.ended` (AEP-0002 §7.2: pending requests are
//! closed before the session ends). A permission request whose tool then ran
//! (`tool.completed` for the same tool) was granted in the agent's own dialog:
//! `attention.answered` (its allowing option, `via: oob`) then `attention.resolved`
//! answered, as a vendor's own record of the decision says where one exists (a
//! `tool_decision` of `accept`, `source = user_temporary`). A failed or denied tool
//! outcome does not say how the request was settled: `attention.resolved` dismissed.
//!
//! Time comes in as an argument (Unix ms); the book's lock is the only shared state, so
//! the daemon's hook receiver, control loop and observers can hold one book between them.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use aep_schemas::{Capture, Event};
use serde_json::{Map, Value, json};

use crate::spec::Decision;
use crate::{EventDraft, MapContext};

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

    /// `attention.answered` with the applied answer `a`, caused by command `cmd`, gated at
    /// the attention ceiling of `cx` (AEP-0002 §5.3: the text and the form values only at
    /// `redacted` and above, through the §9.4 redaction).
    pub fn answered(&self, a: &Decision, cmd: &str, cx: &MapContext) -> EventDraft {
        let ceiling = cx.attention_capture.min(cx.capture.max(cx.attention_capture));
        let mut answer = Map::new();
        if let Some(o) = &a.option {
            answer.insert("option".into(), json!(o));
        }
        // answer.text is redacted-gated (AEP-0002 §5.3): only at redacted+, through §9.4.
        let mut level = Capture::Metadata;
        if let Some(t) = &a.text
            && ceiling >= Capture::Redacted
        {
            answer.insert("text".into(), json!(aep_schemas::redact::redact_text(t, &cx.redact)));
            level = Capture::Redacted;
        }
        if let Some(v) = &a.values {
            let mut gated = aep_schemas::gating::gate_form_values(&self.fields, v, ceiling);
            if ceiling >= Capture::Redacted {
                for val in gated.values_mut() {
                    aep_schemas::redact::redact_value_in_place(val, &cx.redact);
                }
                if gated.len() != aep_schemas::gating::gate_form_values(&self.fields, v, Capture::Metadata).len() {
                    level = Capture::Redacted;
                }
            }
            answer.insert("values".into(), Value::Object(gated));
        }
        let mut d = self.lifecycle("attention.answered", level);
        d.cause = Some(cmd.to_owned());
        d.data.insert("answer".into(), Value::Object(answer));
        d
    }

    /// The decision an answer makes on this request (AEP-0008 text rule, AEP-0006 values
    /// rule), or why it does not fit the request.
    pub fn apply(&self, answer: &Value) -> Result<Decision, String> {
        let option = answer.get("option").and_then(Value::as_str);
        let text = answer.get("text").and_then(Value::as_str).map(str::trim).filter(|t| !t.is_empty());
        let values = answer.get("values");
        if self.kind == "form" {
            if let Some(v) = values {
                aep_schemas::gating::check_form_values(&self.fields, v)?;
                return Ok(Decision { values: v.as_object().cloned(), ..Default::default() });
            }
            // AEP-0006 degradation: a single-field form answered by option or text.
            let fields = self.fields.as_array().map(Vec::as_slice).unwrap_or(&[]);
            if fields.len() == 1
                && let Some(id) = fields[0].get("id").and_then(Value::as_str)
                && let Some(a) = option.or(text)
            {
                let mut m = Map::new();
                m.insert(id.to_owned(), json!(a));
                let v = Value::Object(m);
                aep_schemas::gating::check_form_values(&self.fields, &v)?;
                return Ok(Decision { values: v.as_object().cloned(), ..Default::default() });
            }
            return Err("a form request needs `answer.values`".into());
        }
        let options: Vec<(&str, &str)> = self
            .options
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|o| {
                        Some((o.get("id")?.as_str()?, o.get("label").and_then(Value::as_str).unwrap_or("")))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(o) = option {
            if options.iter().any(|(id, _)| *id == o) {
                return Ok(Decision { option: Some(o.to_owned()), text: text.map(str::to_owned), values: None });
            }
            return Err(format!("option {o:?} is not one of the request's options"));
        }
        let Some(t) = text else { return Err("the answer has neither `option` nor `text`".into()) };
        // AEP-0008: text naming an option (id, or exactly one label; trimmed, case-insensitive) IS that option.
        if let Some((id, _)) = options.iter().find(|(id, _)| id.eq_ignore_ascii_case(t)) {
            return Ok(Decision { option: Some((*id).to_owned()), ..Default::default() });
        }
        let by_label: Vec<&(&str, &str)> = options.iter().filter(|(_, l)| l.eq_ignore_ascii_case(t)).collect();
        if by_label.len() == 1 {
            return Ok(Decision { option: Some(by_label[0].0.to_owned()), ..Default::default() });
        }
        // Any other text on a permission request applies the refusing option with the text
        // as the reason, never the permissive one.
        if self.kind == "permission" {
            let refusing = options
                .iter()
                .map(|(id, _)| *id)
                .find(|id| matches!(*id, "deny" | "reject" | "rejected" | "no" | "decline"))
                .ok_or_else(|| "free text on a permission request with no refusing option".to_owned())?;
            return Ok(Decision { option: Some(refusing.to_owned()), text: Some(t.to_owned()), values: None });
        }
        Ok(Decision { text: Some(t.to_owned()), ..Default::default() })
    }
}

/// Who answered, for `attention.answered` `by` (AEP-0002 §5.3, a responder label): the
/// person a sender names on the command (`data.by`, e.g. the web view's logged-in name, at
/// most 64 characters and no control characters), else the sender's own identity
/// (AEP-0004 §2.2: `agent` names the sender).
pub fn responder(cmd: &Event) -> String {
    cmd.data
        .as_ref()
        .and_then(|d| d.get("by"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|b| !b.is_empty() && b.chars().count() <= 64 && !b.chars().any(char::is_control))
        .map_or_else(|| cmd.agent.to_string(), str::to_owned)
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
    /// Takes the events as the caller holds them (anything that reads as an [`Event`]).
    pub fn observe<E: AsRef<Event>>(&self, stamped: &[impl std::ops::Deref<Target = E>], now_ms: u64) {
        let Ok(mut book) = self.open.lock() else { return };
        let Book { by_session: open, preopened } = &mut *book;
        for s in stamped {
            let ev: &Event = (**s).as_ref();
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
mod tests;
