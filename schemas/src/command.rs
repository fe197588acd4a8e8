//! Command Events as a sender builds them (AEP-0004 §2): seq-less, the sender's own
//! identity as `agent` and `source`, a fresh id, and for an answer the request it answers
//! as `subject` and `cause` (§5, §6). Both of the bridge's senders (the web view and the
//! `respond`/`cancel` CLI) build theirs here; the id and the time come from the caller.

use serde_json::{Value, json};

/// A command to send: what it says, before the sender's envelope.
#[derive(Debug, Clone)]
pub struct Command<'a> {
    /// `control.attention.respond`, `control.cancel`, ...
    pub r#type: &'a str,
    /// The session it is for.
    pub session: &'a str,
    /// The run it is for, if any.
    pub run: Option<&'a str>,
    /// The request it answers (`subject` and `cause`, AEP-0004 §5, §6), if any.
    pub answers: Option<&'a str>,
    /// Its capture level (AEP-0004 §5: free text is `redacted` at least).
    pub capture: &'a str,
    /// Its `data`.
    pub data: Value,
}

/// Who sends a command: its `agent` and `source` (AEP-0004 §2.2: `agent` names the sender).
#[derive(Debug, Clone, Copy)]
pub struct Sender<'a> {
    /// The sender's agent name.
    pub agent: &'a str,
    /// Its `source` URI.
    pub source: &'a str,
}

impl Command<'_> {
    /// The Event: `id` and `time` (RFC 3339) from the caller, no `seq` (AEP-0004 §2).
    pub fn event(self, from: Sender<'_>, id: &str, time: &str) -> Value {
        let mut ev = json!({
            "aep": crate::AEP_VERSION,
            "id": id,
            "type": self.r#type,
            "time": time,
            "source": from.source,
            "agent": from.agent,
            "session": self.session,
            "capture": self.capture,
            "data": self.data,
        });
        if let Some(r) = self.run {
            ev["run"] = json!(r);
        }
        if let Some(s) = self.answers {
            ev["subject"] = json!(s);
            ev["cause"] = json!(s);
        }
        ev
    }
}

/// The `answer` of a `control.attention.respond` (AEP-0004 §5) from what a sender was
/// given, and its capture: `values` (a form, AEP-0006), `option` with optional `text` (an
/// explicit choice and the words that go with it, e.g. a denial's reason), or `text` alone
/// (AEP-0008: the target maps it). Free text is user-authored: `redacted` minimum.
pub fn answer(a: Option<&Value>) -> Result<(Value, &'static str), String> {
    let Some(a) = a.and_then(Value::as_object) else {
        return Err("`answer` needs option, text or values".into());
    };
    let text = a.get("text").and_then(Value::as_str).filter(|t| !t.trim().is_empty());
    if a.get("text").is_some_and(|t| !t.is_string()) {
        return Err("`answer.text` is a string".into());
    }
    if let Some(values) = a.get("values") {
        if !values.is_object() {
            return Err("`answer.values` maps field ids to answers".into());
        }
        return Ok((json!({ "values": values }), "redacted"));
    }
    match (a.get("option"), text) {
        (Some(Value::String(o)), None) => Ok((json!({ "option": o }), "metadata")),
        (Some(Value::String(o)), Some(t)) => Ok((json!({ "option": o, "text": t }), "redacted")),
        (Some(_), _) => Err("`answer.option` is an option id string".into()),
        (None, Some(t)) => Ok((json!({ "text": t }), "redacted")),
        (None, None) => Err("`answer` needs option, text or values".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer's command validates as an AEP command: seq-less, linked to the request.
    #[test]
    fn an_answer_is_a_valid_seqless_linked_command() {
        let (ans, capture) = answer(Some(&json!({"option": "deny", "text": "not now"}))).unwrap();
        assert_eq!(capture, "redacted", "free text raises the capture");
        let cmd = Command {
            r#type: "control.attention.respond",
            session: "s",
            run: None,
            answers: Some("01JAAAAAAAAAAAAAAAAAAAAAAA"),
            capture,
            data: json!({ "answer": ans }),
        };
        let from = Sender { agent: "aep-web", source: "aep://h/agent/aep-web" };
        let ev = cmd.event(from, "01JBBBBBBBBBBBBBBBBBBBBBBB", "2026-01-02T03:04:05.000Z");
        let valid = crate::validate::validate_value(&ev).unwrap();
        assert_eq!((valid.seq, valid.subject.as_deref()), (None, Some("01JAAAAAAAAAAAAAAAAAAAAAAA")));
        assert_eq!(ev["cause"], ev["subject"]);
        assert!(answer(Some(&json!({"values": [1]}))).is_err());
    }

    #[test]
    fn answers_say_what_they_send() {
        let a = |v: Value| answer(Some(&v));
        assert_eq!(
            a(json!({"option": "deny", "text": "use staging"})).unwrap(),
            (json!({"option": "deny", "text": "use staging"}), "redacted")
        );
        assert_eq!(a(json!({"option": "allow", "text": "  "})).unwrap(), (json!({"option": "allow"}), "metadata"));
        assert_eq!(a(json!({"text": "yes go ahead"})).unwrap(), (json!({"text": "yes go ahead"}), "redacted"));
        assert_eq!(a(json!({"values": {"1": "x"}, "option": "o"})).unwrap().0, json!({"values": {"1": "x"}}));
        assert!(a(json!({"option": 3})).is_err());
        assert!(a(json!({"text": 3})).is_err());
        assert!(a(json!({})).is_err());
        assert!(answer(None).is_err());
    }
}
