//! `mappings/opencode.json` through this project's OpenCode plugin adapter: one check per
//! `moments` case, the pure `todos` snapshot diff, the bus `fallback`; and, per row of the
//! `sse_modes` block, the SSE channel's mode policy in both modes
//! (`sse_modes.{moment}.companion` / `.primary`, the moment's bus event as the stream
//! serves it; a primary `session.idle` first sees the user message that opened its run).
//!
//! Each moment runs on a fresh [`SessionState`] at the default posture (capture
//! `metadata`, `attention.*` `redacted`). Where the pin says "runtime state decides
//! emission" the check first feeds the moment that creates that state (a prelude,
//! its drafts discarded): `session.idle` closes a run a user `message.updated` opened,
//! and `todo.updated` is compared against an established identical snapshot (the moment
//! alone carries no transition; the `todos` block pins the diff).

use aep_adapters::vendors::kilocode::KILOCODE;
use aep_adapters::vendors::opencode::diff_todos;
use aep_adapters::vendors::opencode::sse::{SseMode, map_sse};
use aep_adapters::vendors::opencode::{OPENCODE, Profile};
use aep_adapters::{HookAdapter, HookCall, MapContext, SessionState};
use serde_json::{Value, json};

use super::compare;
use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    run_plugin(fx, out, "opencode", aep_adapters::vendors::opencode::adapter().as_ref());
}

/// The checks of an OpenCode-shaped pin file (`opencode`, `kilocode`).
pub(crate) fn run_plugin(fx: &Fixtures, out: &mut Checks, stem: &str, adapter: &dyn HookAdapter) {
    let Some(file) = super::load(fx, out, stem, "file") else { return };
    let cx = MapContext::default();
    super::each_case(out, stem, &file, "moments", "no moments table", |out, name, case| {
        out.record(name, check_moment(adapter, case, &cx))
    });
    match file.get("todos") {
        Some(t) => {
            let empty = json!([]);
            let prev = t.pointer("/input/prev").unwrap_or(&empty);
            let next = t.pointer("/input/next").unwrap_or(&empty);
            let drafts = diff_todos(prev, next, &cx);
            out.record(format!("mappings/{stem}: todos"), compare(t.get("expected").unwrap_or(&Value::Null), &drafts));
        }
        None => out.fail(format!("mappings/{stem}: todos"), "no todos block"),
    }
    super::required_fallback(out, stem, &file, |case| check_moment(adapter, case, &cx));
    let profile = if stem == KILOCODE.vendor { KILOCODE } else { OPENCODE };
    run_sse_modes(out, stem, &file, profile, &cx);
}

/// The `sse_modes` rows: each names a `moments` case whose bus event is the stream's input.
fn run_sse_modes(out: &mut Checks, stem: &str, file: &Value, profile: Profile, cx: &MapContext) {
    let Some(modes) = file.pointer("/sse_modes/modes").and_then(Value::as_object) else {
        out.fail(format!("mappings/{stem}: sse_modes"), "no sse_modes.modes table");
        return;
    };
    for (name, row) in modes {
        let event = file.pointer(&format!("/moments/{name}/input/event"));
        for (label, mode) in [("companion", SseMode::Companion), ("primary", SseMode::Primary)] {
            let check = format!("mappings/{stem}: sse_modes.{name}.{label}");
            let Some(event) = event else {
                out.fail(check, format!("no moments.{name}.input.event to feed"));
                continue;
            };
            out.record(check, check_sse(profile, mode, event, row.get(label).unwrap_or(&Value::Null), cx));
        }
    }
}

fn check_sse(profile: Profile, mode: SseMode, event: &Value, expected: &Value, cx: &MapContext) -> Result<(), String> {
    let mut state = SessionState::default();
    if mode == SseMode::Primary {
        for p in prelude(&json!({"kind": "bus", "event": event})) {
            if let Some(ev) = p.get("event") {
                map_sse(profile, mode, ev, &mut state, cx).map_err(|e| format!("prelude: {e}"))?;
            }
        }
    }
    let drafts = map_sse(profile, mode, event, &mut state, cx).map_err(|e| e.to_string())?;
    compare(expected, &drafts)
}

fn check_moment(adapter: &dyn HookAdapter, case: &Value, cx: &MapContext) -> Result<(), String> {
    let input = case.get("input").ok_or("case has no input")?;
    let mut state = SessionState::default();
    for p in prelude(input) {
        adapter.map(&HookCall { event: None, payload: &p }, &mut state, cx).map_err(|e| format!("prelude: {e}"))?;
    }
    let drafts = adapter.map(&HookCall { event: None, payload: input }, &mut state, cx).map_err(|e| e.to_string())?;
    compare(case.get("expected").unwrap_or(&Value::Null), &drafts)
}

/// The moments that establish the runtime state a case's pin presumes.
fn prelude(input: &Value) -> Vec<Value> {
    let ty = input.pointer("/event/type").and_then(Value::as_str).unwrap_or("");
    let props = input.pointer("/event/properties").cloned().unwrap_or(Value::Null);
    let session = props.get("sessionID").and_then(Value::as_str).unwrap_or("");
    match ty {
        "session.idle" => vec![json!({"kind": "bus", "event": {"type": "message.updated",
            "properties": {"info": {"id": "prelude_msg", "sessionID": session, "role": "user"}}}})],
        "todo.updated" => vec![input.clone()],
        _ => Vec::new(),
    }
}
