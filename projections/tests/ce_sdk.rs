//! The forward CloudEvents map checked by an independent implementation: the official
//! CloudEvents Rust SDK deserializes our structured-mode JSON (AEP-0005 §5 item 2).

use aep_projections::ce::{from_cloudevent, to_cloudevent, to_cloudevents_batch};
use aep_schemas::Event;
use cloudevents::event::{Data, ExtensionValue};
use cloudevents::{AttributesReader, Event as CeEvent};
use serde_json::{Value, json};

fn events() -> Vec<Event> {
    [
        json!({"aep":"0.1","id":"01K0000000000000000000TEST","type":"tool.completed","subject":"Bash",
            "time":"2026-07-03T10:15:04.221Z","source":"aep://host-a/agent/claude-code/session/s1",
            "agent":"claude-code","session":"s1","run":"r1","step":"turn-1","seq":3,"epoch":0,"cause":"c0",
            "severity":"info","capture":"metadata",
            "traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","acmeregion":"eu-1","acmeflag":true,
            "data":{"tool":{"name":"Bash","call_id":"t1"},"status":"success","gen_ai.usage.input_tokens":142}}),
        json!({"aep":"0.1","id":"min","type":"progress.status","time":"2026-07-03T10:16:01+02:00",
            "source":"aep://host-a/agent/bash-floor","agent":"bash-floor","session":"s_min","seq":0}),
        json!({"aep":"0.1","id":"v1","type":"x.acme.session.config_change","time":"2026-07-03T10:15:11Z",
            "source":"urn:acme:relay","agent":"acme","session":"s9","seq":9,"epoch":2,"severity":"debug",
            "capture":"none","acmecount":42}),
    ]
    .into_iter()
    .map(|v| Event::from_value(v).unwrap())
    .collect()
}

fn sdk(ce: &Value) -> CeEvent {
    serde_json::from_value(ce.clone()).unwrap_or_else(|e| panic!("the CloudEvents SDK rejects {ce}: {e}"))
}

#[test]
fn sdk_reads_every_forward_mapped_event() {
    for ev in events() {
        let ce = to_cloudevent(&ev);
        let parsed = sdk(&ce);
        assert_eq!(parsed.specversion().as_str(), "1.0");
        assert_eq!(parsed.id(), ev.id);
        assert_eq!(parsed.source().as_str(), &*ev.source);
        assert_eq!(parsed.ty(), format!("dev.aep.{}", ev.r#type));
        assert_eq!(parsed.subject(), ev.subject.as_deref());
        assert_eq!(parsed.time().map(|t| t.timestamp_millis()), Some(millis(&ev.time)));

        // Every mapped attribute and AEP extension is a CE extension with its JSON type intact.
        let ext = |name: &str| parsed.extension(name).cloned();
        assert_eq!(ext("aepversion"), Some(ExtensionValue::String(ev.aep.to_string())));
        assert_eq!(ext("aepagentid"), Some(ExtensionValue::String(ev.agent.to_string())));
        assert_eq!(ext("aepsessionid"), ev.session.clone().map(ExtensionValue::String));
        assert_eq!(ext("aeprunid"), ev.run.clone().map(ExtensionValue::String));
        assert_eq!(ext("aepsequence"), ev.seq.map(|s| ExtensionValue::Integer(s as i64)));
        assert_eq!(ext("aepepoch"), ev.epoch.map(|s| ExtensionValue::Integer(s as i64)));
        assert_eq!(ext("aepseverity"), ev.severity.map(|s| ExtensionValue::String(s.as_str().into())));
        assert_eq!(ext("aepcapture"), ev.capture.map(|s| ExtensionValue::String(s.as_str().into())));
        assert_eq!(ext("traceparent"), ev.traceparent.clone().map(ExtensionValue::String));
        for (k, v) in &ev.extensions {
            let want = match v {
                Value::String(s) => ExtensionValue::String(s.clone()),
                Value::Bool(b) => ExtensionValue::Boolean(*b),
                Value::Number(n) => ExtensionValue::Integer(n.as_i64().unwrap()),
                other => panic!("non-scalar extension {other}"),
            };
            assert_eq!(ext(k), Some(want), "extension {k}");
        }
        // No extension the SDK sees is unaccounted for: the AEP names never leak.
        let expected_ext = ce.as_object().unwrap().len()
            - ["specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"]
                .iter()
                .filter(|k| ce.get(**k).is_some())
                .count();
        assert_eq!(parsed.iter_extensions().count(), expected_ext);

        match (&ev.data, parsed.data()) {
            (Some(d), Some(Data::Json(j))) => assert_eq!(j, d),
            (None, None) => {}
            (want, got) => panic!("data mismatch: {want:?} vs {got:?}"),
        }
        assert_eq!(parsed.datacontenttype(), ev.data.as_ref().map(|_| "application/json"));

        // The SDK's own serialization maps back to the original Event. The SDK rewrites
        // `time` in UTC (`+02:00` becomes `Z`), so `time` is compared as an instant.
        let reserialized = serde_json::to_value(&parsed).unwrap();
        let (mut back, diags) = from_cloudevent(&reserialized).unwrap();
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(millis(&back.time), millis(&ev.time));
        back.time.clone_from(&ev.time);
        assert_eq!(back.to_value(), ev.to_value());
    }
}

#[test]
fn sdk_reads_a_batch() {
    let batch = to_cloudevents_batch(&events());
    let parsed: Vec<CeEvent> = serde_json::from_value(batch).unwrap();
    assert_eq!(parsed.len(), 3);
    assert_eq!(parsed[2].ty(), "dev.aep.x.acme.session.config_change");
}

#[test]
fn sdk_rejects_what_we_must_not_emit() {
    // The oracle is strict enough to catch a broken forward map.
    let mut ce = to_cloudevent(&events()[0]);
    ce.as_object_mut().unwrap().remove("id");
    assert!(serde_json::from_value::<CeEvent>(ce).is_err());
    let mut ce = to_cloudevent(&events()[0]);
    ce["specversion"] = json!("9.9");
    assert!(serde_json::from_value::<CeEvent>(ce).is_err());
}

/// Milliseconds since the epoch of an RFC 3339 time, via the projection's own parser.
fn millis(t: &str) -> i64 {
    let ns = aep_projections::otlp_logs::rfc3339_to_unix_nanos(t).unwrap();
    (ns / 1_000_000) as i64
}
