//! Fixture class `mappings/*`: every Annex A mapping pin run through this project's own
//! adapters and compared field by field (type, data, subject), one check per case.
//!
//! Check names: `mappings/{file-stem}: {table}.{case}`, e.g. `mappings/codex: hooks.PreToolUse`.

use aep_adapters::vendors;
use aep_adapters::vendors::OtelVendor;
use aep_adapters::{EventDraft, HookAdapter, HookCall, MapContext, SessionState};
use serde_json::{Value, json};

use crate::{Checks, Fixtures};

pub mod acp;
pub mod agui;
pub mod antigravity;
pub mod claude_code;
pub mod cline;
pub mod kimi_code;
pub mod opencode;
pub mod openhands;
pub mod otel;
pub mod pi;

/// One mapping file's checks, by its stem.
type Runner = fn(&Fixtures, &mut Checks, &str);

/// A mapping file's runner that holds what it runs (a vendor's spec, an OTel profile).
type BoxedRunner = Box<dyn Fn(&Fixtures, &mut Checks, &str)>;

/// The files whose checks need a runner of their own: the protocols' pins (not a vendor's
/// hooks), and vendors whose pins need a prelude, a transcript or another profile. Every
/// other vendor of the vendor list runs the plain hook table through its own adapter, so
/// a vendor added to the list is checked against its pins with nothing to add here.
const RUNNERS: &[(&str, Runner)] = &[
    ("acp", |fx, out, _| acp::run(fx, out)),
    ("agui", |fx, out, _| agui::run(fx, out)),
    ("antigravity", |fx, out, _| antigravity::run(fx, out)),
    ("claude-code", |fx, out, _| claude_code::run(fx, out)),
    ("cline", |fx, out, _| cline::run(fx, out)),
    // The Hermes pins need no prelude: the run is the payload's own `turn_id`, and the
    // clarify overlay is payload-derived.
    ("hermes", |fx, out, stem| run_preluded(fx, out, stem, vendors::hermes::adapter().as_ref(), no_prelude)),
    // The OpenCode plugin adapter on Kilo's profile: same layout and preludes as OpenCode.
    ("kilocode", |fx, out, stem| opencode::run_plugin(fx, out, stem, vendors::kilocode::adapter().as_ref())),
    ("kimi-code", |fx, out, _| kimi_code::run(fx, out)),
    ("opencode", |fx, out, _| opencode::run(fx, out)),
    ("openhands", |fx, out, _| openhands::run(fx, out)),
    ("pi", |fx, out, _| pi::run(fx, out)),
    ("qwen-code", |fx, out, stem| run_preluded(fx, out, stem, vendors::qwen_code::adapter().as_ref(), session_seen)),
];

/// Appends every mapping file's checks, in file-name order: the files of [`RUNNERS`], the
/// hook table of every other vendor in the vendor list, and the OTel pins
/// (`{vendor}-otel.json`) of every vendor with an OTel profile. A vendor or profile whose
/// file the spec does not have is skipped (the required-checks list catches a file that
/// disappears).
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let mut files: Vec<(String, BoxedRunner)> = Vec::new();
    for (stem, runner) in RUNNERS {
        files.push(((*stem).to_owned(), Box::new(*runner)));
    }
    for spec in vendors::SPECS.iter().filter(|s| !RUNNERS.iter().any(|(stem, _)| *stem == s.id)) {
        // A vendor observed only over its own server has no hook table to run.
        let Some(adapter) = spec.adapter else { continue };
        if fx.path(&format!("mappings/{}.json", spec.id)).exists() {
            files.push((
                spec.id.to_owned(),
                Box::new(move |fx, out, stem| run_adapter_table(fx, out, stem, adapter().as_ref())),
            ));
        }
    }
    for v in OtelVendor::all() {
        let stem = format!("{}-otel", v.as_str());
        if fx.path(&format!("mappings/{stem}.json")).exists() {
            files.push((stem, Box::new(move |fx, out, stem| otel::run_otel_pins(fx, out, stem, v))));
        }
    }
    files.sort_by(|a, b| a.0.cmp(&b.0));
    for (stem, runner) in &files {
        runner(fx, out, stem);
    }
}

/// A draft as the pins state it: `{type, data, subject?}`.
pub fn draft_as_pin(d: &EventDraft) -> Value {
    let mut v = json!({ "type": d.r#type, "data": Value::Object(d.data.clone()) });
    if let Some(s) = &d.subject {
        v["subject"] = Value::String(s.clone());
    }
    v
}

/// Compares a pinned `expected` (`{type, data, subject?, $comment?}` or `null`) with drafts.
/// `$`-prefixed keys of the pin are commentary and ignored.
pub fn compare(expected: &Value, drafts: &[EventDraft]) -> Result<(), String> {
    let strip = |v: &Value| -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), v.clone())).collect(),
            ),
            other => other.clone(),
        }
    };
    let want: Vec<Value> = match expected {
        Value::Null => Vec::new(),
        Value::Array(items) => items.iter().map(strip).collect(),
        one => vec![strip(one)],
    };
    if want.len() != drafts.len() {
        return Err(format!(
            "expected {} event(s), got {}: {}",
            want.len(),
            drafts.len(),
            Value::Array(drafts.iter().map(draft_as_pin).collect())
        ));
    }
    for (i, (w, d)) in want.iter().zip(drafts).enumerate() {
        crate::diff(w, &draft_as_pin(d)).map_err(|e| format!("event {i}: {e}"))?;
    }
    Ok(())
}

/// Maps one fixture input through `adapter` with a fresh session state at the default
/// posture (capture metadata, attention.* redacted), as the fixture files pin it.
pub(crate) fn through(adapter: &dyn HookAdapter, input: &Value) -> Result<Vec<EventDraft>, String> {
    adapter
        .map(&HookCall { event: None, payload: input }, &mut SessionState::default(), &MapContext::default())
        .map_err(|e| format!("mapping failed: {e}"))
}

/// Reads `mappings/{stem}.json`; when it cannot, records the failing check
/// `mappings/{stem}: {on_error}` and returns `None`.
pub(crate) fn load(fx: &Fixtures, out: &mut Checks, stem: &str, on_error: &str) -> Option<Value> {
    match fx.json(&format!("mappings/{stem}.json")) {
        Ok(doc) => Some(doc),
        Err(e) => {
            out.fail(format!("mappings/{stem}: {on_error}"), e);
            None
        }
    }
}

/// Calls `each(out, "mappings/{stem}: {table}.{name}", case)` for every entry of the
/// `table` object of `doc`. Without one, records the failing check `mappings/{stem}: {table}`
/// with `missing` and returns `false`.
pub(crate) fn each_case(
    out: &mut Checks,
    stem: &str,
    doc: &Value,
    table: &str,
    missing: &str,
    mut each: impl FnMut(&mut Checks, String, &Value),
) -> bool {
    let Some(cases) = doc.get(table).and_then(Value::as_object) else {
        out.fail(format!("mappings/{stem}: {table}"), missing);
        return false;
    };
    for (name, case) in cases {
        each(out, format!("mappings/{stem}: {table}.{name}"), case);
    }
    true
}

/// The `mappings/{stem}: fallback` check of a file that must pin a `fallback` case.
pub(crate) fn required_fallback(
    out: &mut Checks,
    stem: &str,
    doc: &Value,
    check: impl FnOnce(&Value) -> Result<(), String>,
) {
    let name = format!("mappings/{stem}: fallback");
    match doc.get("fallback") {
        Some(case) => out.record(name, check(case)),
        None => out.fail(name, "no fallback case"),
    }
}

/// Runs a `{hooks, fallback}` fixture file: one check `mappings/{stem}: hooks.{name}` per
/// entry and one `mappings/{stem}: fallback`, each comparing `expected` with what `map`
/// produces for `input`.
pub(crate) fn run_hook_table(
    fx: &Fixtures,
    out: &mut Checks,
    stem: &str,
    map: &dyn Fn(&Value) -> Result<Vec<EventDraft>, String>,
) {
    let Some(doc) = load(fx, out, stem, "load") else { return };
    let pinned = |case: &Value, lacks: &str| match (case.get("input"), case.get("expected")) {
        (Some(input), Some(expected)) => map(input).and_then(|d| compare(expected, &d)),
        _ => Err(format!("{lacks} lacks `input` or `expected`")),
    };
    if !each_case(out, stem, &doc, "hooks", "fixture has no `hooks` object", |out, name, case| {
        out.record(name, pinned(case, "case"))
    }) {
        return;
    }
    if let Some(fb) = doc.get("fallback") {
        out.record(format!("mappings/{stem}: fallback"), pinned(fb, "fallback"));
    }
}

/// [`run_hook_table`] with each input mapped by [`through`] `adapter`.
pub(crate) fn run_adapter_table(fx: &Fixtures, out: &mut Checks, stem: &str, adapter: &dyn HookAdapter) {
    run_hook_table(fx, out, stem, &|input| through(adapter, input));
}

/// The moments (URL event name, payload) a case's pin presumes already happened.
pub(crate) type Prelude = fn(&Value) -> Vec<(Option<String>, Value)>;

/// The prelude of a hook-family pin that is a fact of a session already under way: the same
/// session's `SessionStart` (drafts discarded), so a first sight that synthesizes
/// `session.started` (Qwen Code's headless mode, runtime state like Antigravity's) is behind it.
pub(crate) fn session_seen(case: &Value) -> Vec<(Option<String>, Value)> {
    let session = case.pointer("/input/session_id").cloned().unwrap_or(Value::Null);
    vec![(None, json!({"hook_event_name": "SessionStart", "session_id": session}))]
}

/// The prelude of a pin that presumes nothing.
pub(crate) fn no_prelude(_case: &Value) -> Vec<(Option<String>, Value)> {
    Vec::new()
}

/// Runs a `{hooks, fallback}` file whose cases are checked by [`check`] after their
/// `prelude` (Cline, Antigravity, Hermes): `mappings/{stem}: hooks.{name}` per case and
/// the required `mappings/{stem}: fallback`.
pub(crate) fn run_preluded(fx: &Fixtures, out: &mut Checks, stem: &str, adapter: &dyn HookAdapter, prelude: Prelude) {
    let Some(doc) = load(fx, out, stem, "file") else { return };
    let cx = MapContext::default();
    each_case(out, stem, &doc, "hooks", "no hooks table", |out, name, case| {
        out.record(name, check(adapter, case, &cx, prelude))
    });
    required_fallback(out, stem, &doc, |case| check(adapter, case, &cx, prelude));
}

/// Runs `case.input` (named by `case.hook` when the pin carries one) after the moments
/// `prelude(case)` returns (URL event name, payload)
/// and compares with `case.expected`.
pub(crate) fn check(a: &dyn HookAdapter, case: &Value, cx: &MapContext, prelude: Prelude) -> Result<(), String> {
    let input = case.get("input").ok_or("case has no input")?;
    let hook = case.get("hook").and_then(Value::as_str);
    let mut state = SessionState::default();
    for (event, p) in prelude(case) {
        a.map(&HookCall { event: event.as_deref(), payload: &p }, &mut state, cx)
            .map_err(|e| format!("prelude: {e}"))?;
    }
    let drafts = a.map(&HookCall { event: hook, payload: input }, &mut state, cx).map_err(|e| e.to_string())?;
    check_with_steps(case.get("expected").unwrap_or(&Value::Null), &drafts)
}

/// [`compare`] plus the envelope `step` of every pinned entry that states one.
pub(crate) fn check_with_steps(expected: &Value, drafts: &[EventDraft]) -> Result<(), String> {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("step");
        }
        v
    };
    let (stripped, steps): (Value, Vec<Option<Value>>) = match expected {
        Value::Array(items) => {
            (Value::Array(items.iter().map(strip).collect()), items.iter().map(|i| i.get("step").cloned()).collect())
        }
        Value::Null => (Value::Null, Vec::new()),
        one => (strip(one), vec![one.get("step").cloned()]),
    };
    compare(&stripped, drafts)?;
    for (i, (want, d)) in steps.iter().zip(drafts).enumerate() {
        if let Some(w) = want {
            let got = d.step.clone().map(Value::String).unwrap_or(Value::Null);
            if *w != got {
                return Err(format!("event {i}: step: expected {w}, got {got}"));
            }
        }
    }
    Ok(())
}
