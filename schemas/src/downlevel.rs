//! Capture down-leveling (AEP-0001 §8.2, AEP-0002 §5.1 rule 3) and payload pruning.
//!
//! [`downlevel`] is the mechanical hop a relay or fan-out applies for a subscriber's
//! ceiling: it drops every annotated member above the new level, degrades the
//! `[metadata*]` exception fields structurally below `redacted`, rewrites `capture`,
//! and never up-levels. By §8.2(e) it never mints the `redacted` provenance claim: a
//! `full` Event held against a `redacted` ceiling lands on `metadata`.
//!
//! [`prune_payload`] is what an emitting adapter calls on a payload it built: drop the
//! registry-annotated members above a level. Members the registry does not know default
//! to `metadata` (AEP-0002 §5.1 rule 4, §5.4 "open" schemas), so they are kept at
//! `metadata`+ and dropped only at `none`. The adapter, which has the source context,
//! stays responsible for the `[metadata*]` content rules (prompt synthesis, AEP-0003 §9.2;
//! form values, [`crate::gating::gate_form_values`]).

use serde_json::{Map, Value};

use crate::event::Event;
use crate::gating::degrade_values_without_context;
use crate::level::Capture;
use crate::redact::{RedactConfig, redact_value_in_place};
use crate::registry::{self, FieldSpec};

/// The level a hop lands on for an Event at `current` under `ceiling` (AEP-0001 §8.2(b), (e)).
pub fn target_level(current: Capture, ceiling: Capture) -> Capture {
    if ceiling >= current {
        current
    } else if ceiling == Capture::Redacted {
        // §8.2(e): only `full` is above a `redacted` ceiling; a mechanical hop cannot mint
        // the redacted provenance claim, so it lands on `metadata`.
        Capture::Metadata
    } else {
        ceiling
    }
}

/// Down-levels `ev` for a hop enforcing `ceiling` (AEP-0001 §8.2).
///
/// - At or below the ceiling already: returned unchanged (never up-levels, §8.2(b)).
/// - `none`: envelope only, `data` removed.
/// - A type without registry annotations (vendor `x.*`, reserved): `data` removed
///   wholesale, the conservative direction, since nothing says which members are content.
/// - Otherwise members above the new level are pruned at every depth, and below
///   `redacted` the `[metadata*]` exceptions degrade structurally (AEP-0002 §5.3):
///   `attention.requested.prompt` becomes `"{agent} requests {kind}: {subject}"`
///   (AEP-0003 §9.2), option/field/choice labels become their ids, and `answer.values`
///   keeps only number and boolean entries.
pub fn downlevel(ev: &Event, ceiling: Capture) -> Event {
    let current = ev.capture();
    let target = target_level(current, ceiling);
    if target == current {
        return ev.clone();
    }
    let mut out = ev.clone();
    out.capture = Some(target);
    out.data = match (&ev.data, target) {
        (_, Capture::None) | (None, _) => None,
        (Some(data), _) => match registry::lookup(&ev.r#type).and_then(|t| t.payload.as_ref()) {
            None => None,
            Some(spec) => {
                let mut data = data.clone();
                let cx = Context { agent: &ev.agent, subject: ev.subject.as_deref(), kind: kind_of(ev) };
                prune_node(spec, &mut data, target, Some(&cx));
                Some(data)
            }
        },
    };
    out
}

/// A **redacting re-emitter** hop (AEP-0001 §8.2(e)): like [`downlevel`], except that a
/// `full` Event held against a `redacted` ceiling lands on `redacted` because this hop
/// applies the AEP-0003 §9.4 pipeline itself to every `redacted`-gated member it keeps
/// (and to the `[metadata*]` exception fields, which carry text at `redacted`+).
/// `full`-gated members are dropped. Every other case is exactly [`downlevel`].
///
/// Unregistered types still lose `data` wholesale: without annotations the hop cannot
/// tell which members are content.
pub fn downlevel_redacting(ev: &Event, ceiling: Capture, cfg: &RedactConfig) -> Event {
    if !(ev.capture() == Capture::Full && ceiling == Capture::Redacted) {
        return downlevel(ev, ceiling);
    }
    let mut out = ev.clone();
    out.capture = Some(Capture::Redacted);
    out.data = match (&ev.data, registry::lookup(&ev.r#type).and_then(|t| t.payload.as_ref())) {
        (Some(data), Some(spec)) => {
            let mut data = data.clone();
            prune_node(spec, &mut data, Capture::Redacted, None);
            redact_gated(spec, &mut data, cfg);
            Some(data)
        }
        _ => None,
    };
    out
}

/// Runs the §9.4 pipeline over every member gated at `redacted` or marked `[metadata*]`.
fn redact_gated(spec: &FieldSpec, value: &mut Value, cfg: &RedactConfig) {
    match value {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                match spec.property(k) {
                    Some(s) if s.level() >= Capture::Redacted || s.exception => redact_value_in_place(v, cfg),
                    Some(s) => redact_gated(s, v, cfg),
                    None => {}
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = spec.items.as_deref() {
                items.iter_mut().for_each(|i| redact_gated(item, i, cfg));
            }
        }
        _ => {}
    }
}

/// Drops the members of a `ty` payload whose capture level exceeds `level`, at every
/// depth (AEP-0002 §5.1 rules 1 and 4). At `none` every member goes. Unknown members
/// and members of unregistered (vendor) types default to `metadata`; the reserved
/// `message.*` types, content-bearing with no schema yet (AEP-0002 §4.3), keep nothing
/// below `redacted`.
pub fn prune_payload(ty: &str, data: &mut Map<String, Value>, level: Capture) {
    if level == Capture::None {
        data.clear();
        return;
    }
    let Some(t) = registry::lookup(ty) else { return };
    match &t.payload {
        Some(spec) => prune_object(spec, data, level, None),
        // AEP-0002 §4.3: the reserved `message.*` names are content-bearing,
        // capture-gated `redacted`+, with their schema deferred: nothing survives below.
        None if level < Capture::Redacted => data.clear(),
        None => {}
    }
}

struct Context<'a> {
    agent: &'a str,
    subject: Option<&'a str>,
    kind: Option<String>,
}

fn kind_of(ev: &Event) -> Option<String> {
    ev.data.as_ref()?.get("kind")?.as_str().map(str::to_owned)
}

/// Prunes one value against its spec. `cx` is `Some` on a hop, where exception fields
/// degrade below `redacted`; `None` for an adapter's [`prune_payload`].
fn prune_node(spec: &FieldSpec, value: &mut Value, level: Capture, cx: Option<&Context<'_>>) {
    match value {
        Value::Object(map) => prune_object(spec, map, level, cx),
        Value::Array(items) => {
            if let Some(item_spec) = spec.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_node(item_spec, item, level, cx);
                    if cx.is_some() && level < Capture::Redacted {
                        degrade_label(item_spec, item, i);
                    }
                }
            }
        }
        _ => {}
    }
}

fn prune_object(spec: &FieldSpec, map: &mut Map<String, Value>, level: Capture, cx: Option<&Context<'_>>) {
    map.retain(|k, _| spec.property(k).is_none_or(|s| s.level() <= level));
    if cx.is_none() || level >= Capture::Redacted {
        for (k, v) in map.iter_mut() {
            if let Some(s) = spec.property(k) {
                prune_node(s, v, level, cx);
            }
        }
        return;
    }
    for (k, v) in map.iter_mut() {
        let Some(s) = spec.property(k) else { continue };
        if s.exception && k == "prompt" {
            // AEP-0003 §9.2 synthesis from structural metadata only.
            if let Some(cx) = cx {
                let kind = cx.kind.as_deref().unwrap_or("attention");
                *v = Value::String(match cx.subject {
                    Some(subject) => format!("{} requests {kind}: {subject}", cx.agent),
                    None => format!("{} requests {kind}", cx.agent),
                });
            }
        } else if s.exception && k == "values" {
            match v.as_object_mut() {
                Some(values) => degrade_values_without_context(values),
                None => *v = Value::Object(Map::new()),
            }
        } else {
            prune_node(s, v, level, cx);
        }
    }
}

/// A `[metadata*]` label inside an object with an `id` becomes the id (the 1-based index
/// when the id is missing): a structural placeholder (AEP-0002 §5.3 options rule).
fn degrade_label(item_spec: &FieldSpec, item: &mut Value, index: usize) {
    if !item_spec.property("label").is_some_and(|l| l.exception) {
        return;
    }
    let Some(obj) = item.as_object_mut() else { return };
    if obj.contains_key("label") {
        let placeholder = match obj.get("id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            None => (index + 1).to_string(),
        };
        obj.insert("label".into(), Value::String(placeholder));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(ty: &str, capture: &str, data: Value) -> Event {
        Event::from_value(json!({"aep":"0.1","id":"e1","type":ty,"subject":"Edit","time":"2026-01-01T00:00:00Z",
            "source":"aep://t/agent/bot","agent":"bot","session":"s","seq":1,"capture":capture,"data":data}))
        .unwrap()
    }

    #[test]
    fn full_at_redacted_ceiling_lands_on_metadata() {
        let e = ev("run.cancelled", "full", json!({"by":"user","reason":"free text","duration_ms":5}));
        let d = downlevel(&e, Capture::Redacted);
        assert_eq!(d.capture, Some(Capture::Metadata));
        assert_eq!(d.data, Some(json!({"by":"user","duration_ms":5})));
        // A redacted source passes a redacted ceiling unchanged.
        let e = ev("run.cancelled", "redacted", json!({"by":"user","reason":"[REDACTED:pii]"}));
        assert_eq!(downlevel(&e, Capture::Redacted), e);
        // Never up-levels.
        let e = ev("run.cancelled", "metadata", json!({"by":"user"}));
        assert_eq!(downlevel(&e, Capture::Full), e);
    }

    #[test]
    fn exceptions_degrade_structurally() {
        let e = ev(
            "attention.requested",
            "redacted",
            json!({"kind":"input","prompt":"What now?","options":[{"id":"y","label":"Yes please"},{"label":"No"}],"context":{"x":1}}),
        );
        let d = downlevel(&e, Capture::Metadata);
        assert_eq!(
            d.data,
            Some(
                json!({"kind":"input","prompt":"bot requests input: Edit","options":[{"id":"y","label":"y"},{"label":"2"}]})
            )
        );
        let e = ev("attention.answered", "redacted", json!({"answer":{"text":"t","values":{"a":"x","b":2,"c":[1]}}}));
        assert_eq!(downlevel(&e, Capture::Metadata).data, Some(json!({"answer":{"values":{"b":2}}})));
    }

    #[test]
    fn redacting_hop_mints_redacted_by_running_the_pipeline() {
        let cfg = RedactConfig::default();
        let e = ev(
            "tool.failed",
            "full",
            json!({"tool":{"name":"Bash","call_id":"ops@example.org"},"error":{"type":"X","message":"mail ops@example.org"}}),
        );
        let d = downlevel_redacting(&e, Capture::Redacted, &cfg);
        assert_eq!(d.capture, Some(Capture::Redacted));
        let data = d.data.unwrap();
        // The redacted-gated message went through the pipeline; metadata ids are untouched.
        assert!(!data["error"]["message"].as_str().unwrap().contains("ops@example.org"));
        assert_eq!(data["tool"]["call_id"], "ops@example.org");
        let e = ev("tool.completed", "full", json!({"tool":{"name":"Bash"},"result":"verbatim","result_redacted":"r"}));
        assert_eq!(
            downlevel_redacting(&e, Capture::Redacted, &cfg).data,
            Some(json!({"tool":{"name":"Bash"},"result_redacted":"r"}))
        );
        // Any other pair is the mechanical hop.
        assert_eq!(downlevel_redacting(&e, Capture::Metadata, &cfg), downlevel(&e, Capture::Metadata));
    }

    #[test]
    fn none_and_unannotated_types_drop_data() {
        let e = ev("run.cancelled", "metadata", json!({"by":"user"}));
        let d = downlevel(&e, Capture::None);
        assert_eq!((d.capture, d.data), (Some(Capture::None), None));
        let e = ev("x.acme.run.blob", "redacted", json!({"k":"v"}));
        let d = downlevel(&e, Capture::Metadata);
        assert_eq!((d.capture, d.data), (Some(Capture::Metadata), None));
    }

    #[test]
    fn prune_payload_nested_and_unknown_members() {
        let mut m = json!({"documents":[{"id":"d","content":"c","content_redacted":"r","extra":1}],"vendor":"v"})
            .as_object()
            .unwrap()
            .clone();
        prune_payload("resource.retrieval.returned", &mut m, Capture::Redacted);
        assert_eq!(
            Value::Object(m.clone()),
            json!({"documents":[{"id":"d","content_redacted":"r","extra":1}],"vendor":"v"})
        );
        prune_payload("resource.retrieval.returned", &mut m, Capture::Metadata);
        assert_eq!(Value::Object(m.clone()), json!({"documents":[{"id":"d","extra":1}],"vendor":"v"}));
        prune_payload("resource.retrieval.returned", &mut m, Capture::None);
        assert!(m.is_empty());
        let mut m = json!({"k":"v"}).as_object().unwrap().clone();
        prune_payload("x.acme.tool.thing", &mut m, Capture::Metadata);
        assert_eq!(m.len(), 1);
        let mut m = json!({"text":"hello"}).as_object().unwrap().clone();
        prune_payload("message.user.submitted", &mut m, Capture::Redacted);
        assert_eq!(m.len(), 1);
        prune_payload("message.user.submitted", &mut m, Capture::Metadata);
        assert!(m.is_empty());
    }
}
