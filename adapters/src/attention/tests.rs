use super::*;

fn draft(ty: &str, subject: Option<&str>) -> EventDraft {
    let mut d = EventDraft::new(ty, Capture::Metadata);
    d.session = Some("s".into());
    d.subject = subject.map(str::to_owned);
    d
}

fn event(ty: &str, id: &str, subject: Option<&str>) -> Box<Event> {
    Box::new(Event {
        aep: "0.1".into(),
        id: id.into(),
        r#type: ty.into(),
        agent: "cc".into(),
        session: Some("s".into()),
        subject: subject.map(str::to_owned),
        data: Some(json!({"kind": "permission", "options": [{"id": "allow"}, {"id": "deny"}]})),
        ..Default::default()
    })
}

#[test]
fn a_tool_result_settles_and_session_end_closes_the_rest() {
    let book = AttentionBook::default();
    book.observe(
        &[event("attention.requested", "A1", Some("Bash")), event("attention.requested", "A2", Some("Write"))],
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
    book.observe(&[event("attention.resolved", "R1", Some("A1"))], 1500);
    let mut end = vec![draft("session.ended", None)];
    book.settle("cc", &mut end, 2000);
    assert_eq!(end.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["attention.resolved", "session.ended"]);
    assert_eq!(end[0].subject.as_deref(), Some("A2"));
    let mut again = vec![draft("tool.completed", Some("Bash"))];
    book.settle("cc", &mut again, 2000);
    assert_eq!(again.len(), 1, "nothing left to settle");
    // A failed tool says nothing certain of how its request was settled.
    book.observe(&[event("attention.requested", "A3", Some("Read"))], 3000);
    let mut failed = vec![draft("tool.failed", Some("Read"))];
    book.settle("cc", &mut failed, 3100);
    assert_eq!(failed.iter().map(|d| d.r#type.as_str()).collect::<Vec<_>>(), ["attention.resolved", "tool.failed"]);
    assert_eq!(failed[0].data["resolution"], "dismissed");
}

fn pending(kind: &str, fields: Value) -> Pending {
    Pending {
        id: "R".into(),
        agent: "claude-code".into(),
        session: "s".into(),
        run: None,
        tool: Some("Bash".into()),
        kind: kind.into(),
        prompt: None,
        options: json!([{"id": "allow", "label": "Allow"}, {"id": "deny", "label": "Deny"}]),
        fields,
        since_ms: 0,
    }
}

#[test]
fn text_answers_follow_aep_0008() {
    let p = pending("permission", Value::Null);
    assert_eq!(p.apply(&json!({"option": "allow"})).unwrap().option.as_deref(), Some("allow"));
    assert_eq!(
        p.apply(&json!({"text": "  ALLOW "})).unwrap(),
        Decision { option: Some("allow".into()), ..Default::default() }
    );
    assert_eq!(p.apply(&json!({"text": "deny"})).unwrap().option.as_deref(), Some("deny"));
    let guided = p.apply(&json!({"text": "use cargo instead"})).unwrap();
    assert_eq!((guided.option.as_deref(), guided.text.as_deref()), (Some("deny"), Some("use cargo instead")));
    assert!(p.apply(&json!({"option": "maybe"})).is_err());
    assert!(p.apply(&json!({})).is_err());
}

/// The vendor's reply to an applied answer, as the hook path builds it.
fn vendor_reply(vendor: &str, hook: &str, payload: &Value, a: &Decision) -> Vec<u8> {
    let spec = crate::vendors::spec(vendor).unwrap();
    spec.control.reply_bytes(&crate::spec::Held { hook, payload }, a)
}

#[test]
fn forms_validate_values_and_map_back_to_labels() {
    let fields = json!([{"id": "1", "type": "select", "label": "1", "required": true, "other": true,
        "choices": [{"id": "1", "label": "1"}, {"id": "2", "label": "2"}]}]);
    let p = pending("form", fields);
    assert!(p.apply(&json!({"values": {}})).is_err(), "missing required field");
    let a = p.apply(&json!({"values": {"1": "2"}})).unwrap();
    let input =
        json!({"questions": [{"question": "Which db?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}]});
    let reply: Value =
        serde_json::from_slice(&vendor_reply("claude-code", "PermissionRequest", &json!({"tool_input": input}), &a))
            .unwrap();
    assert_eq!(reply["hookSpecificOutput"]["decision"]["behavior"], "allow");
    assert_eq!(reply["hookSpecificOutput"]["decision"]["updatedInput"]["answers"]["Which db?"], "SQLite");
    assert_eq!(reply["hookSpecificOutput"]["decision"]["updatedInput"]["questions"][0]["question"], "Which db?");
}

#[test]
fn gated_vendors_reply_in_their_own_shape() {
    let deny = Decision { option: Some("deny".into()), text: Some("not now".into()), values: None };
    let allow = Decision { option: Some("allow".into()), ..Default::default() };
    let ask = Decision { option: Some("ask".into()), ..Default::default() };
    let r = |v: &str, h: &str, a: &Decision| -> Value {
        serde_json::from_slice(&vendor_reply(v, h, &json!({}), a)).unwrap()
    };
    assert_eq!(r("vscode", "PreToolUse", &ask)["hookSpecificOutput"]["permissionDecision"], "ask");
    assert_eq!(r("vscode", "PreToolUse", &deny)["hookSpecificOutput"]["permissionDecisionReason"], "not now");
    assert_eq!(r("kimi-code", "PreToolUse", &allow), json!({}));
    assert_eq!(r("hermes", "pre_tool_call", &deny), json!({"action": "block", "message": "not now"}));
    assert_eq!(r("pi", "tool_call", &deny), json!({"block": true, "reason": "not now"}));
    let hermes = crate::vendors::spec("hermes").unwrap();
    assert!(hermes.control.may_hold("pre_tool_call") && !hermes.control.may_hold("post_tool_call"));
    assert_eq!(crate::spec::tool_of(&json!({"toolName": "bash"})), Some("bash"));
}

#[test]
fn permission_replies_in_each_vendor_shape() {
    let deny = Decision { option: Some("deny".into()), text: Some("no".into()), values: None };
    let cc: Value = serde_json::from_slice(&vendor_reply("codex", "PermissionRequest", &json!({}), &deny)).unwrap();
    assert_eq!(
        cc,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "deny", "message": "no"}}})
    );
    let allow = Decision { option: Some("allow".into()), ..Default::default() };
    let oc: Value = serde_json::from_slice(&vendor_reply("opencode", "permission.ask", &json!({}), &allow)).unwrap();
    assert_eq!(oc, json!({"status": "allow"}));
}
