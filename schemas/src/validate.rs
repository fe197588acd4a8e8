//! Validation that names the violated rule: one Event ([`validate_value`]) and the
//! cross-event rules of a stream ([`StreamValidator`]).
//!
//! Rule strings cite the spec section, e.g. `AEP-0001 §5.2`; payload-schema violations
//! cite the section holding the violated schema: `AEP-0002 §5.2` inside a common
//! object, `§5.3` for the mandatory types, `§5.4` for the optional ones, `AEP-0004 §3` /
//! `§5` for acks and commands.

use std::collections::HashMap;

use serde_json::{Map, Value};

use crate::digest::digest;
use crate::event::{AEP_VERSION, Event, category_of};
use crate::gating::{ValueClass, check_form_answer, classify, find_field};
use crate::level::Capture;
use crate::registry::{self, FieldSpec, Scope, Status};

/// One violated rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The violated rule, e.g. `AEP-0001 §5.2`.
    pub rule: &'static str,
    /// A readable explanation.
    pub message: String,
    /// The position of the offending Event in a stream (0-based), when known.
    pub index: Option<usize>,
}

impl Violation {
    fn new(rule: &'static str, message: impl Into<String>) -> Self {
        Self { rule, message: message.into(), index: None }
    }
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.index {
            Some(i) => write!(f, "[{i}] {}: {}", self.rule, self.message),
            None => write!(f, "{}: {}", self.rule, self.message),
        }
    }
}

impl std::error::Error for Violation {}

/// Validates one Event: the envelope (AEP-0001 §5, §6, §8), scoping (§5.2), the payload
/// against its registered schema (AEP-0002 §5, AEP-0004, AEP-0006), and capture honesty
/// (AEP-0001 §8.2(a)). Returns the parsed Event on success, the first violation otherwise.
pub fn validate_value(v: &Value) -> Result<Event, Violation> {
    validate_owned(v.clone())
}

/// [`validate_value`] taking the value by move: the same checks, the same first
/// violation, without copying the value (for callers that no longer need it).
pub fn validate_owned(v: Value) -> Result<Event, Violation> {
    let ev = Event::from_value(v).map_err(|e| Violation::new(e.rule, e.message))?;
    validate_event(&ev)?;
    Ok(ev)
}

/// [`validate_owned`] of an event read straight from JSON
/// ([`crate::event::event_from_str_strict`]): the same checks and the same first violation.
pub fn validate_parsed(parsed: Result<Event, crate::event::EnvelopeError>) -> Result<Event, Violation> {
    let ev = parsed.map_err(|e| Violation::new(e.rule, e.message))?;
    validate_event(&ev)?;
    Ok(ev)
}

/// Validates an already parsed Event (everything [`validate_value`] checks after parsing).
pub fn validate_event(ev: &Event) -> Result<(), Violation> {
    check_envelope(ev)?;
    check_scoping(ev)?;
    check_correlation(ev)?;
    check_payload(ev)?;
    Ok(())
}

/// Correlation attributes some types MUST carry.
fn check_correlation(ev: &Event) -> Result<(), Violation> {
    let ty = ev.r#type.as_str();
    match ty {
        // AEP-0002 §7.1: lifecycle Events after the request carry its id as `subject`;
        // AEP-0004 §6: so does the command answering it.
        "attention.routed"
        | "attention.answered"
        | "attention.resolved"
        | "attention.timeout"
        | "control.attention.respond"
            if ev.subject.is_none() =>
        {
            Err(Violation::new(
                "AEP-0002 §7.1",
                format!("{ty} MUST set `subject` to the id of its attention.requested"),
            ))
        }
        // AEP-0004 §3: an ack's `cause` is the command's id.
        "control.accepted" | "control.rejected" if ev.cause.is_none() => {
            Err(Violation::new("AEP-0004 §3", format!("{ty} MUST set `cause` to the id of the command it answers")))
        }
        _ => Ok(()),
    }
}

fn check_envelope(ev: &Event) -> Result<(), Violation> {
    // AEP-0001 §5.1 #1
    if ev.aep != AEP_VERSION {
        return Err(Violation::new(
            "AEP-0001 §5.1 #1",
            format!("unsupported envelope version {:?} (this validator speaks {AEP_VERSION})", ev.aep),
        ));
    }
    // AEP-0001 §5.1: identifiers are non-empty strings.
    for (name, value) in [
        ("id", Some(ev.id.as_str())),
        ("subject", ev.subject.as_deref()),
        ("session", ev.session.as_deref()),
        ("run", ev.run.as_deref()),
        ("step", ev.step.as_deref()),
        ("cause", ev.cause.as_deref()),
    ] {
        if value == Some("") {
            return Err(Violation::new("AEP-0001 §5.1", format!("`{name}` must be a non-empty string")));
        }
    }
    // AEP-0001 §5.1 #5
    if !is_rfc3339(&ev.time) {
        return Err(Violation::new("AEP-0001 §5.1 #5", format!("`time` {:?} is not an RFC 3339 timestamp", ev.time)));
    }
    // AEP-0001 §5.1 #6
    if !is_uri(&ev.source) {
        return Err(Violation::new("AEP-0001 §5.1 #6", format!("`source` {:?} is not a URI", ev.source)));
    }
    check_type(&ev.r#type)?;
    // AEP-0001 §5.1 #14: W3C Trace Context `traceparent`.
    if let Some(tp) = &ev.traceparent
        && !is_traceparent(tp)
    {
        return Err(Violation::new("AEP-0001 §5.1 #14", format!("`traceparent` {tp:?} is not a W3C traceparent")));
    }
    // AEP-0001 §5.4 extension attributes.
    for (name, value) in &ev.extensions {
        if name.is_empty() || name.len() > 20 || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()) {
            return Err(Violation::new(
                "AEP-0001 §5.4",
                format!("extension attribute name {name:?} does not match [a-z0-9]{{1,20}}"),
            ));
        }
        let scalar = match value {
            Value::String(_) | Value::Bool(_) => true,
            Value::Number(n) => n.is_i64() || n.is_u64(),
            _ => false,
        };
        if !scalar {
            return Err(Violation::new(
                "AEP-0001 §5.4",
                format!("extension attribute `{name}` must be a string, integer or boolean, got {value}"),
            ));
        }
    }
    Ok(())
}

fn is_token(s: &str, dash: bool) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || (dash && b == b'-'))
}

/// Checks the type grammar (AEP-0001 §6) and the closed category set (AEP-0002 §3).
pub fn check_type(ty: &str) -> Result<(), Violation> {
    let tokens: Vec<&str> = ty.split('.').collect();
    let category = if tokens.first() == Some(&"x") {
        // AEP-0001 §6: x.{vendor}.{category}.{rest}, `-` allowed in the vendor token.
        if tokens.len() < 4 || !is_token(tokens[1], true) || !tokens[2..].iter().all(|t| is_token(t, false)) {
            return Err(Violation::new(
                "AEP-0001 §6",
                format!("vendor type {ty:?} must be x.{{vendor}}.{{category}}.{{rest}} in lowercase tokens"),
            ));
        }
        // The envelope schema's vendor pattern admits any token in the category position
        // (`x.codex.otel.*`, `x.antigravity.hook.*` in the Annex A pins): the closed
        // category set binds core types only.
        return Ok(());
    } else {
        if tokens.len() < 2 || !tokens.iter().all(|t| is_token(t, false)) {
            return Err(Violation::new(
                "AEP-0001 §6",
                format!("type {ty:?} must be {{category}}.{{rest}} of lowercase [a-z0-9_] tokens"),
            ));
        }
        tokens[0]
    };
    // AEP-0002 §3: closed set.
    if !registry::is_category(category) {
        return Err(Violation::new("AEP-0002 §3", format!("{category:?} is not one of the thirteen categories")));
    }
    Ok(())
}

/// The emitter-side rule that a core-namespace type is registered (AEP-0001 §10, AEP-0002 §6).
///
/// Not part of [`validate_value`]: consumers and relays MUST tolerate unknown types
/// (AEP-0001 §6), and the envelope schema accepts any grammatical type in a known
/// category, so ingest never rejects on it. Emitters (adapters, their tests) call this.
pub fn check_registered(ty: &str) -> Result<(), Violation> {
    check_type(ty)?;
    if !ty.starts_with("x.") && registry::lookup(ty).is_none() {
        return Err(Violation::new(
            "AEP-0002 §6",
            format!("{ty:?} is not a registered core type; vendor types use x.{{vendor}}.{{category}}.{{rest}}"),
        ));
    }
    Ok(())
}

/// How an Event is scoped (AEP-0001 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scoping {
    /// Carries `session` and `seq`.
    Session,
    /// `agent.*`: omits `session`, `run`, `step`, `seq`.
    Agent,
    /// Foreign-emitter session Event (commands, `attention.routed`): `session`, no `seq`.
    Foreign,
}

/// The scoping of a type: `agent.*` (also `x.{vendor}.agent.*`) is agent-scoped; commands
/// (registry scope `command`, vendor `x.{vendor}.control.*`) and `attention.routed` are
/// foreign-emitter; everything else is session-scoped.
pub fn scoping_of(ty: &str) -> Scoping {
    let category = category_of(ty);
    if category == "agent" {
        return Scoping::Agent;
    }
    if ty == "attention.routed" {
        return Scoping::Foreign;
    }
    match registry::lookup(ty) {
        Some(t) if t.scope == Scope::Command => Scoping::Foreign,
        None if ty.starts_with("x.") && category == "control" => Scoping::Foreign,
        _ => Scoping::Session,
    }
}

fn check_scoping(ev: &Event) -> Result<(), Violation> {
    let ty = ev.r#type.as_str();
    match scoping_of(ty) {
        Scoping::Agent => {
            // AEP-0001 §5.2
            for (name, present) in [
                ("session", ev.session.is_some()),
                ("run", ev.run.is_some()),
                ("step", ev.step.is_some()),
                ("seq", ev.seq.is_some()),
            ] {
                if present {
                    return Err(Violation::new("AEP-0001 §5.2", format!("agent-scoped {ty} must omit `{name}`")));
                }
            }
        }
        Scoping::Foreign => {
            if ev.session.is_none() {
                return Err(Violation::new(
                    "AEP-0001 §5.2",
                    format!("{ty} is addressed to a session and carries `session`"),
                ));
            }
            if ev.seq.is_some() {
                let rule = if ty == "attention.routed" { "AEP-0002 §7.3" } else { "AEP-0004 §2.2" };
                return Err(Violation::new(
                    rule,
                    format!("{ty} is a foreign-emitter session Event and MUST omit `seq` (AEP-0001 §5.2)"),
                ));
            }
        }
        Scoping::Session => {
            if ev.session.is_none() {
                return Err(Violation::new("AEP-0001 §5.2", format!("session-scoped {ty} must carry `session`")));
            }
            if ev.seq.is_none() {
                return Err(Violation::new("AEP-0001 §5.2", format!("session-scoped {ty} must carry `seq`")));
            }
        }
    }
    Ok(())
}

fn payload_rule(ty: &str, status: Status) -> &'static str {
    match ty {
        "control.accepted" | "control.rejected" => "AEP-0004 §3",
        _ if ty.starts_with("control.") => "AEP-0004 §5",
        _ if status == Status::Mandatory => "AEP-0002 §5.3",
        _ => "AEP-0002 §5.4",
    }
}

fn check_payload(ev: &Event) -> Result<(), Violation> {
    let Some(whole @ Value::Object(data)) = &ev.data else { return Ok(()) };
    let capture = ev.capture();
    // AEP-0001 §8.2(a): `none` carries no payload content.
    if capture == Capture::None && !data.is_empty() {
        return Err(Violation::new(
            "AEP-0001 §8.2",
            "capture `none` carries no payload content, but `data` has members",
        ));
    }
    let Some(spec) = registry::lookup(&ev.r#type) else { return Ok(()) };
    let Some(payload) = &spec.payload else { return Ok(()) };
    let rule = payload_rule(&spec.name, spec.status);
    check_node(payload, whole, Path::Root, rule)?;
    honesty(payload, data, capture, Path::Root)?;
    check_form_prose(&ev.r#type, data, rule)?;
    common_prose(payload, whole, Path::Root)?;
    Ok(())
}

/// Schema check of one node; inside a common object the rule becomes AEP-0002 §5.2.
/// A payload path built on the stack and rendered only when a violation is reported.
#[derive(Clone, Copy)]
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => f.write_str("data"),
            Path::Key(p, k) => write!(f, "{p}.{k}"),
            Path::Index(p, i) => write!(f, "{p}[{i}]"),
        }
    }
}

fn check_node(spec: &FieldSpec, v: &Value, path: Path<'_>, rule: &'static str) -> Result<(), Violation> {
    let rule = if spec.common.is_some() { "AEP-0002 §5.2" } else { rule };
    let bad = |m: String| Err(Violation::new(rule, format!("payload schema: {path} {m}")));
    if !spec.types.is_empty() && !spec.types.iter().any(|t| t.matches(v)) {
        let names: Vec<&str> = spec.types.iter().map(|t| t.as_str()).collect();
        return bad(format!("must be {}, got {v}", names.join(" or ")));
    }
    if !spec.enum_values.is_empty() && !v.as_str().is_some_and(|s| spec.enum_values.iter().any(|e| e == s)) {
        return bad(format!("must be one of {}, got {v}", spec.enum_values.join("|")));
    }
    if let Some(c) = &spec.constant
        && v.as_str() != Some(c.as_str())
    {
        return bad(format!("must be {c:?}, got {v}"));
    }
    if let Some(n) = v.as_f64()
        && (spec.minimum.is_some_and(|m| n < m) || spec.maximum.is_some_and(|m| n > m))
    {
        return bad(format!("{n} is out of range"));
    }
    if spec.format.as_deref() == Some("date-time")
        && let Some(s) = v.as_str().filter(|s| !is_rfc3339(s))
    {
        return bad(format!("{s:?} is not an RFC 3339 date-time"));
    }
    if let Value::Object(map) = v {
        for r in &spec.required {
            if !map.contains_key(r) {
                return bad(format!("is missing the REQUIRED member `{r}`"));
            }
        }
        if let Some(c) = &spec.conditional
            && map.get(&c.property).and_then(Value::as_str) == Some(c.equals.as_str())
            && !map.contains_key(&c.then_required)
        {
            return bad(format!("with {}={:?} requires `{}`", c.property, c.equals, c.then_required));
        }
        for (k, child) in map {
            if let Some(s) = spec.property(k) {
                check_node(s, child, Path::Key(&path, k), rule)?;
            }
        }
    }
    if let (Value::Array(items), Some(item_spec)) = (v, spec.items.as_deref()) {
        for (i, item) in items.iter().enumerate() {
            check_node(item_spec, item, Path::Index(&path, i), rule)?;
        }
    }
    Ok(())
}

/// AEP-0001 §8.2(a) / AEP-0002 §5.1 rule 1: no member above the Event's declared capture.
fn honesty(spec: &FieldSpec, map: &Map<String, Value>, capture: Capture, path: Path<'_>) -> Result<(), Violation> {
    for (k, v) in map {
        let Some(s) = spec.property(k) else { continue };
        if s.level() > capture {
            return Err(Violation::new(
                "AEP-0001 §8.2",
                format!("{path}.{k} is gated at `{}` but the Event declares capture `{capture}`", s.level()),
            ));
        }
        honesty_node(s, v, capture, Path::Key(&path, k))?;
    }
    Ok(())
}

fn honesty_node(spec: &FieldSpec, v: &Value, capture: Capture, path: Path<'_>) -> Result<(), Violation> {
    match v {
        Value::Object(m) => honesty(spec, m, capture, path),
        Value::Array(items) => match spec.items.as_deref() {
            Some(item) => {
                items.iter().enumerate().try_for_each(|(i, x)| honesty_node(item, x, capture, Path::Index(&path, i)))
            }
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// AEP-0002 §5.2 prose rules of the common objects that the published schemas leave
/// open: `cost.currency` is an ISO 4217 alpha-3 code, a `citation` names its `source`
/// and populates at most one `offset` variant, a guardrail category has a `name`.
fn common_prose(spec: &FieldSpec, v: &Value, path: Path<'_>) -> Result<(), Violation> {
    let bad = |m: String| Err(Violation::new("AEP-0002 §5.2", format!("{path} {m}")));
    match v {
        Value::Object(map) => {
            match spec.common.as_deref() {
                Some("cost") => {
                    if let Some(c) = map.get("currency").and_then(Value::as_str)
                        && (c.len() != 3 || !c.bytes().all(|b| b.is_ascii_uppercase()))
                    {
                        return bad(format!("currency {c:?} is not an ISO 4217 alpha-3 code"));
                    }
                }
                Some("citation") => {
                    if !map.contains_key("source") {
                        return bad("is a citation without its REQUIRED `source`".into());
                    }
                    if let Some(Value::Object(offset)) = map.get("offset")
                        && ["char", "page", "block"].iter().filter(|k| offset.contains_key(**k)).count() > 1
                    {
                        return bad("populates more than one offset variant (char/page/block)".into());
                    }
                }
                _ => {}
            }
            for (k, child) in map {
                if let Some(s) = spec.property(k) {
                    common_prose(s, child, Path::Key(&path, k))?;
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = spec.items.as_deref() {
                // guardrail.categories[]: `name` is the one non-optional member.
                let categories = is_guardrail_categories(&path);
                for (i, x) in items.iter().enumerate() {
                    if categories && x.is_object() && x.get("name").is_none() {
                        return bad(format!("[{i}] is a guardrail category without its `name`"));
                    }
                    common_prose(item, x, Path::Index(&path, i))?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn is_guardrail_categories(path: &Path<'_>) -> bool {
    matches!(path, Path::Key(parent, "categories") if matches!(parent, Path::Key(_, "guardrail")))
}

/// The AEP-0006 prose rules that a single Event can show: `fields` only on `kind: "form"`,
/// and `values` as a flat map of primitives / arrays of choice-id strings.
fn check_form_prose(ty: &str, data: &Map<String, Value>, rule: &'static str) -> Result<(), Violation> {
    match ty {
        "attention.requested"
            if data.contains_key("fields") && data.get("kind").and_then(Value::as_str) != Some("form") =>
        {
            return Err(Violation::new("AEP-0002 §5.3", "`fields` is present only when kind is \"form\" (AEP-0006)"));
        }
        "attention.answered" | "control.attention.respond" => {
            if let Some(Value::Object(values)) = data.get("answer").and_then(|a| a.get("values")) {
                for (k, v) in values {
                    let flat = match v {
                        Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
                        Value::Array(items) => items.iter().all(Value::is_string),
                        _ => false,
                    };
                    if !flat {
                        return Err(Violation::new(
                            if rule == "AEP-0004 §5" { rule } else { "AEP-0002 §5.3" },
                            format!(
                                "answer.values.{k} must be a string, number, boolean or array of choice ids (AEP-0006)"
                            ),
                        ));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// RFC 3339 `date-time` with the `T` separator (AEP-0001 §5.1 #5); the date must exist.
pub fn is_rfc3339(s: &str) -> bool {
    matches!(s.as_bytes().get(10), Some(b'T' | b't')) && crate::time::parse_rfc3339(s).is_some()
}

/// A URI reference with a scheme (`scheme:rest`, RFC 3986 §3.1), no whitespace.
pub fn is_uri(s: &str) -> bool {
    let Some((scheme, rest)) = s.split_once(':') else { return false };
    let mut sb = scheme.bytes();
    sb.next().is_some_and(|c| c.is_ascii_alphabetic())
        && sb.all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-' | b'.'))
        && !rest.is_empty()
        && !s.bytes().any(|c| c.is_ascii_whitespace() || c.is_ascii_control())
}

/// W3C Trace Context `traceparent` (see [`crate::time::parse_traceparent`]).
pub fn is_traceparent(s: &str) -> bool {
    crate::time::parse_traceparent(s).is_some()
}

/// Per `(source, session)` stream state.
#[derive(Debug, Default)]
struct SessionState {
    /// Highest `(epoch, seq)` seen.
    high: Option<(u64, u64)>,
    /// `session.ended` Event id, once seen.
    ended: Option<String>,
    /// Attention requests raised and not yet closed by resolved/timeout.
    pending: Vec<String>,
    /// Terminal Event id per run.
    run_terminals: HashMap<String, String>,
    /// `fields` of `kind: "form"` requests, by request id.
    forms: HashMap<String, Value>,
}

/// The cross-event rules over one stream (AEP-0001 §7, AEP-0002 §2 convention 5 and §7.2,
/// AEP-0004 §3, AEP-0006). Feed Events in order with [`push`](Self::push); call
/// [`finish`](Self::finish) at the end. State is keyed by `(source, session)` (AEP-0001
/// §5.2) and identical redelivery of an `(source, id)` is deduplicated, never a violation.
#[derive(Debug, Default)]
pub struct StreamValidator {
    seen: HashMap<(String, String), String>,
    sessions: HashMap<(String, String), SessionState>,
    /// Ack decision per (acking source, command id).
    acks: HashMap<(String, String), String>,
}

impl StreamValidator {
    /// A validator that has seen nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many distinct Events were accepted (after dedupe).
    pub fn distinct(&self) -> usize {
        self.seen.len()
    }

    /// Feeds the next Event; returns the stream violations it causes, with `index` unset
    /// (the caller knows its own numbering; see [`push_at`](Self::push_at)).
    pub fn push(&mut self, ev: &Event) -> Vec<Violation> {
        self.check(ev, None)
    }

    /// Feeds the Event at position `index` of the caller's stream; violations carry `index`.
    pub fn push_at(&mut self, index: usize, ev: &Event) -> Vec<Violation> {
        self.check(ev, Some(index))
    }

    fn check(&mut self, ev: &Event, index: Option<usize>) -> Vec<Violation> {
        let mut out = Vec::new();
        let mut flag = |rule: &'static str, message: String| out.push(Violation { rule, message, index });

        // AEP-0001 §7.4: dedupe on (source, id); same key with different content is a collision.
        let key = (ev.source.to_string(), ev.id.clone());
        let fingerprint = digest(&ev.to_value());
        if let Some(prev) = self.seen.get(&key) {
            if *prev != fingerprint {
                flag(
                    "AEP-0001 §7.4",
                    format!(
                        "id {:?} from {} was already used for a different Event (AEP-0001 §5.1 #2)",
                        ev.id, ev.source
                    ),
                );
            }
            return out;
        }
        self.seen.insert(key, fingerprint);

        let Some(session) = ev.session.clone() else { return out };
        let ty = ev.r#type.as_str();

        // AEP-0004 §3: one ack decision per command, keyed by the acking emitter and the command id.
        if matches!(ty, "control.accepted" | "control.rejected")
            && let Some(cmd) = &ev.cause
        {
            let ack_key = (ev.source.to_string(), cmd.clone());
            match self.acks.get(&ack_key) {
                Some(first) if *first != ev.id => flag(
                    "AEP-0004 §3",
                    format!("command {cmd:?} was already acknowledged by {first:?}; {} is a second decision", ev.id),
                ),
                Some(_) => {}
                None => {
                    self.acks.insert(ack_key, ev.id.clone());
                }
            }
        }

        let Some(seq) = ev.seq else { return out };
        let st = self.sessions.entry((ev.source.to_string(), session.clone())).or_default();

        // AEP-0001 §7.2: no regression within an epoch, no epoch reuse.
        let pos = (ev.epoch(), seq);
        if let Some(high) = st.high {
            if pos.0 < high.0 {
                flag(
                    "AEP-0001 §7.2",
                    format!("epoch {} after epoch {} in session {session:?}: epochs are never reused", pos.0, high.0),
                );
            } else if pos.0 == high.0 && pos.1 <= high.1 {
                flag(
                    "AEP-0001 §7.2",
                    format!("seq {} at or below {} within epoch {} in session {session:?}", pos.1, high.1, pos.0),
                );
            }
        }
        if st.high.is_none_or(|h| pos > h) {
            st.high = Some(pos);
        }

        match ty {
            // AEP-0002 §2 convention 5: one terminal per run, all epochs.
            "run.finished" | "run.failed" | "run.cancelled" => {
                if let Some(run) = &ev.run {
                    match st.run_terminals.get(run) {
                        Some(first) => flag(
                            "AEP-0002 §2 convention 5",
                            format!("run {run:?} already reached a terminal ({first}); {ty} is a second one"),
                        ),
                        None => {
                            st.run_terminals.insert(run.clone(), ev.id.clone());
                        }
                    }
                }
            }
            "session.ended" => {
                if let Some(first) = &st.ended {
                    flag(
                        "AEP-0002 §2 convention 5",
                        format!("session {session:?} already ended ({first}); a second session.ended"),
                    );
                } else {
                    st.ended = Some(ev.id.clone());
                }
                // AEP-0002 §7.2: terminal before session.ended.
                for req in std::mem::take(&mut st.pending) {
                    flag(
                        "AEP-0002 §7.2",
                        format!("attention request {req:?} is still pending when session {session:?} ends"),
                    );
                }
            }
            "attention.requested" => {
                st.pending.push(ev.id.clone());
                if let Some(data) = &ev.data
                    && data.get("kind").and_then(Value::as_str) == Some("form")
                    && let Some(fields) = data.get("fields")
                {
                    st.forms.insert(ev.id.clone(), fields.clone());
                }
            }
            "attention.resolved" | "attention.timeout" => {
                if let Some(subject) = &ev.subject {
                    st.pending.retain(|p| p != subject);
                }
            }
            "attention.answered" => {
                // AEP-0006: values must respect the form request's fields.
                let fields = ev.subject.as_ref().and_then(|s| st.forms.get(s));
                let values = ev.data.as_ref().and_then(|d| d.get("answer")).and_then(|a| a.get("values"));
                if let (Some(fields), Some(values)) = (fields, values) {
                    if let Err(e) = check_form_answer(fields, values) {
                        flag("AEP-0002 §5.3", format!("attention.answered values: {e} (AEP-0006)"));
                    } else if ev.capture() < Capture::Redacted {
                        // AEP-0001 §8.2(a) with AEP-0006 type-dependent gating: free text needs redacted+.
                        if let Some(k) = values.as_object().and_then(|m| {
                            m.iter()
                                .find(|(k, v)| {
                                    find_field(fields, k).is_some_and(|f| classify(f, v) == ValueClass::FreeText)
                                })
                                .map(|(k, _)| k.clone())
                        }) {
                            flag(
                                "AEP-0001 §8.2",
                                format!(
                                    "answer.values.{k} is free text, gated at redacted, but capture is {}",
                                    ev.capture()
                                ),
                            );
                        }
                    }
                }
            }
            _ => {}
        }
        out
    }

    /// Ends the stream. Requests still pending in sessions that never ended are legal
    /// ("eventually" stays unbounded, AEP-0002 §7.2), so nothing is reported for them.
    pub fn finish(self) -> Vec<Violation> {
        Vec::new()
    }
}

/// Validates a whole stream: every Event on its own, then the stream rules.
/// Returns every violation found, each with the Event's index.
pub fn validate_stream<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<Violation> {
    let mut sv = StreamValidator::new();
    let mut out = Vec::new();
    for (i, v) in values.into_iter().enumerate() {
        match validate_value(v) {
            Ok(ev) => out.extend(sv.push_at(i, &ev)),
            Err(mut e) => {
                e.index = Some(i);
                out.push(e);
            }
        }
    }
    out.extend(sv.finish());
    out
}

/// Whether a violation's rule satisfies a rule cited in prose, e.g. a fixture's
/// `"AEP-0002 §4.2/§5 payload schema (...)"`: some section reference in `cited` is the
/// violation's reference or an ancestor of it (`§5` covers `§5.4`; `§5.1 #1` does not
/// cover `§5.1 #11`).
pub fn rule_matches(cited: &str, rule: &str) -> bool {
    let mine = section_refs(rule);
    section_refs(cited)
        .iter()
        .any(|(doc, path)| mine.iter().any(|(d, p)| d == doc && p.len() >= path.len() && p[..path.len()] == path[..]))
}

/// Parses section references: `AEP-0001 §5.1 #2 / §7.4` gives
/// `[("0001", ["5","1","#2"]), ("0001", ["7","4"])]`; `convention N` counts as a level.
fn section_refs(text: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut doc: Option<String> = None;
    let words: Vec<&str> = text.split(|c: char| c.is_whitespace() || c == '/' || c == '(' || c == ')').collect();
    let mut i = 0;
    while i < words.len() {
        let w = words[i];
        if let Some(d) = w.strip_prefix("AEP-") {
            if d.len() == 4 && d.bytes().all(|c| c.is_ascii_digit()) {
                doc = Some(d.to_owned());
            }
        } else if let (Some(sec), Some(d)) = (w.strip_prefix('§'), &doc) {
            let sec = sec.trim_end_matches(|c: char| !c.is_ascii_digit());
            if !sec.is_empty() {
                let mut path: Vec<String> = sec.split('.').map(str::to_owned).collect();
                let next = words.get(i + 1).copied().unwrap_or("");
                if next.starts_with('#') && next.len() > 1 {
                    path.push(next.trim_end_matches(|c: char| !c.is_ascii_digit()).to_owned());
                    i += 1;
                } else if next == "convention"
                    && let Some(n) = words.get(i + 2)
                {
                    path.push(format!("convention {n}"));
                    i += 2;
                }
                out.push((d.clone(), path));
            }
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base(ty: &str) -> Value {
        json!({"aep":"0.1","id":"i1","type":ty,"time":"2026-01-02T03:04:05.5+01:00","source":"aep://h/agent/a","agent":"a","session":"s","seq":0})
    }

    fn rule_of(v: Value) -> &'static str {
        validate_value(&v).unwrap_err().rule
    }

    #[test]
    fn owned_validation_agrees_with_borrowed() {
        let mut bad = base("run.started");
        bad["time"] = json!("yesterday");
        for v in [base("run.started"), bad, base("fruit.eaten"), json!([1])] {
            assert_eq!(validate_owned(v.clone()), validate_value(&v));
        }
        assert_eq!(validate_owned(base("run.started")).map(|e| e.r#type).as_deref(), Ok("run.started"));
    }

    #[test]
    fn envelope_rules() {
        assert!(validate_value(&base("run.started")).is_ok());
        let mut v = base("run.started");
        v["aep"] = json!("0.2");
        assert_eq!(rule_of(v), "AEP-0001 §5.1 #1");
        let mut v = base("run.started");
        v["time"] = json!("yesterday");
        assert_eq!(rule_of(v), "AEP-0001 §5.1 #5");
        assert_eq!(rule_of(base("run")), "AEP-0001 §6");
        assert_eq!(rule_of(base("Run.started")), "AEP-0001 §6");
        assert_eq!(rule_of(base("x.v.run")), "AEP-0001 §6");
        assert_eq!(rule_of(base("fruit.eaten")), "AEP-0002 §3");
        // Vendor types take any token in the category position (the envelope schema's
        // pattern; the Annex A pins use x.codex.otel.* and x.antigravity.hook.*).
        assert!(validate_value(&base("x.my-vendor.fruit.eaten")).is_ok());
        // Unknown core-namespace types are tolerated on ingest, refused emitter-side.
        assert!(validate_value(&base("run.exploded")).is_ok());
        assert_eq!(check_registered("run.exploded").unwrap_err().rule, "AEP-0002 §6");
        assert!(check_registered("run.started").is_ok());
        assert!(check_registered("x.v.run.odd").is_ok());
        assert!(validate_value(&base("x.my-vendor.run.odd_thing")).is_ok());
        let mut v = base("run.started");
        v["traceparent"] = json!("00-00000000000000000000000000000000-00f067aa0ba902b7-01");
        assert_eq!(rule_of(v), "AEP-0001 §5.1 #14");
        let mut v = base("run.started");
        v["traceparent"] = json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
        assert!(validate_value(&v).is_ok());
        let mut v = base("run.started");
        v["Ext"] = json!("x");
        assert_eq!(rule_of(v), "AEP-0001 §5.4");
        let mut v = base("run.started");
        v["ext"] = json!(1.5);
        assert_eq!(rule_of(v), "AEP-0001 §5.4");
        let mut v = base("run.started");
        v["ext"] = json!(true);
        assert!(validate_value(&v).is_ok());
    }

    #[test]
    fn scoping_rules() {
        let mut v = base("agent.idle");
        assert_eq!(rule_of(v.clone()), "AEP-0001 §5.2");
        let m = v.as_object_mut().unwrap();
        m.remove("session");
        m.remove("seq");
        assert!(validate_value(&v).is_ok());
        assert_eq!(rule_of(base("control.pause")), "AEP-0004 §2.2");
        assert_eq!(rule_of(base("attention.routed")), "AEP-0002 §7.3");
        let mut v = base("control.pause");
        v.as_object_mut().unwrap().remove("seq");
        assert!(validate_value(&v).is_ok());
        v.as_object_mut().unwrap().remove("session");
        assert_eq!(rule_of(v), "AEP-0001 §5.2");
        let mut v = base("run.started");
        v.as_object_mut().unwrap().remove("seq");
        assert_eq!(rule_of(v), "AEP-0001 §5.2");
    }

    #[test]
    fn correlation_rules() {
        let mut v = base("attention.timeout");
        assert_eq!(rule_of(v.clone()), "AEP-0002 §7.1");
        v["subject"] = json!("req1");
        assert!(validate_value(&v).is_ok());
        let mut v = base("control.accepted");
        assert_eq!(rule_of(v.clone()), "AEP-0004 §3");
        v["cause"] = json!("cmd1");
        assert!(validate_value(&v).is_ok());
        let mut v = base("run.started");
        v["time"] = json!("2026-01-02 03:04:05Z");
        assert_eq!(rule_of(v), "AEP-0001 §5.1 #5");
    }

    #[test]
    fn payload_and_honesty() {
        let mut v = base("tool.denied");
        v["data"] = json!({"tool":{"name":"Bash"},"by":"policy"});
        assert!(validate_value(&v).is_ok());
        v["data"] = json!({"tool":{},"by":"policy"});
        assert_eq!(rule_of(v.clone()), "AEP-0002 §5.2");
        v["data"] = json!({"tool":{"name":"Bash"},"by":"whim"});
        assert_eq!(rule_of(v.clone()), "AEP-0002 §5.3");
        let mut v = base("progress.status");
        v["data"] = json!({"percent":101});
        assert_eq!(rule_of(v.clone()), "AEP-0002 §5.4");
        v["data"] = json!({"message":"hi"});
        assert_eq!(rule_of(v.clone()), "AEP-0001 §8.2");
        v["capture"] = json!("redacted");
        assert!(validate_value(&v).is_ok());
        let mut v = base("tool.failed");
        v["data"] = json!({"tool":{"name":"x"},"error":{"message":"boom"}});
        assert_eq!(rule_of(v.clone()), "AEP-0001 §8.2");
        v["capture"] = json!("none");
        assert_eq!(rule_of(v), "AEP-0001 §8.2");
        let mut v = base("attention.requested");
        v["data"] = json!({"kind":"form","prompt":"p","fields":[{"id":"f","type":"select","label":"1"}]});
        assert_eq!(rule_of(v.clone()), "AEP-0002 §5.2");
        v["data"] = json!({"kind":"input","prompt":"p","fields":[{"id":"f","type":"string","label":"1"}]});
        assert_eq!(rule_of(v), "AEP-0002 §5.3");
        let mut v = base("run.finished");
        v["data"] = json!({"cost":{"currency":"usd","total":1}});
        assert_eq!(rule_of(v.clone()), "AEP-0002 §5.2");
        v["data"] = json!({"cost":{"currency":"EUR","total":1}});
        assert!(validate_value(&v).is_ok());
        let mut v = base("resource.citation.recorded");
        v["data"] = json!({"citations":[{"source":{"id":"d"},"offset":{"char":{"start":0}}}]});
        assert!(validate_value(&v).is_ok());
        v["data"] = json!({"citations":[{"source":{"id":"d"},"offset":{"char":{"start":0},"page":{"page":2}}}]});
        assert_eq!(rule_of(v.clone()), "AEP-0002 §5.2");
        v["data"] = json!({"citations":[{"document_index":0}]});
        assert_eq!(rule_of(v), "AEP-0002 §5.2");
        let mut v = base("assessment.guardrail.recorded");
        v["data"] = json!({"guardrail":{"verdict":"flagged","categories":[{"name":"pii"}]}});
        assert!(validate_value(&v).is_ok());
        v["data"] = json!({"guardrail":{"verdict":"flagged","categories":[{"score":0.5}]}});
        assert_eq!(rule_of(v), "AEP-0002 §5.2");
    }

    fn ev(id: &str, ty: &str, seq: Option<u64>, extra: Value) -> Event {
        let mut v = json!({"aep":"0.1","id":id,"type":ty,"time":"2026-01-01T00:00:00Z","source":"aep://h/agent/a","agent":"a","session":"s"});
        if let Some(s) = seq {
            v["seq"] = json!(s);
        }
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        validate_value(&v).unwrap()
    }

    fn rules(events: &[Event]) -> Vec<&'static str> {
        let mut sv = StreamValidator::new();
        let mut out: Vec<&'static str> = events.iter().flat_map(|e| sv.push(e)).map(|v| v.rule).collect();
        out.extend(sv.finish().into_iter().map(|v| v.rule));
        out
    }

    #[test]
    fn stream_rules() {
        let a = ev("a", "run.started", Some(0), json!({"run":"r"}));
        let b = ev("b", "run.finished", Some(1), json!({"run":"r"}));
        assert!(rules(&[a.clone(), b.clone(), b.clone()]).is_empty(), "identical redelivery is legal");
        let c = ev("c", "run.failed", Some(2), json!({"run":"r","data":{"reason":"x"}}));
        assert_eq!(rules(&[a.clone(), b.clone(), c]), ["AEP-0002 §2 convention 5"]);
        let b2 = ev("b", "run.finished", Some(2), json!({"run":"r2"}));
        assert_eq!(rules(&[b.clone(), b2]), ["AEP-0001 §7.4"]);
        let low = ev("z", "progress.status", Some(1), json!({}));
        assert_eq!(rules(&[a.clone(), b.clone(), low]), ["AEP-0001 §7.2"]);
        let e1 = ev("e1", "progress.status", Some(0), json!({"epoch":2}));
        let e0 = ev("e0", "progress.status", Some(9), json!({"epoch":1}));
        assert_eq!(rules(&[e1.clone(), e0]), ["AEP-0001 §7.2"]);
        let reset = ev("e3", "progress.status", Some(0), json!({"epoch":3}));
        assert!(rules(&[e1, reset]).is_empty());
    }

    #[test]
    fn attention_and_ack_rules() {
        let req = ev("q", "attention.requested", Some(0), json!({"data":{"kind":"input","prompt":"p"}}));
        let end = ev("end", "session.ended", Some(1), json!({}));
        assert_eq!(rules(&[req.clone(), end.clone()]), ["AEP-0002 §7.2"]);
        let to = ev("t", "attention.timeout", Some(1), json!({"subject":"q"}));
        let end2 = ev("end", "session.ended", Some(2), json!({}));
        assert!(rules(&[req, to, end2.clone()]).is_empty());
        let end3 = ev("end3", "session.ended", Some(3), json!({}));
        assert_eq!(rules(&[end2, end3]), ["AEP-0002 §2 convention 5"]);
        let cmd = ev("cmd", "control.pause", None, json!({}));
        let ok = ev("ok", "control.accepted", Some(0), json!({"cause":"cmd"}));
        let no = ev("no", "control.rejected", Some(1), json!({"cause":"cmd","data":{"reason":"busy"}}));
        assert!(rules(&[cmd.clone(), ok.clone(), ok.clone()]).is_empty());
        assert_eq!(rules(&[cmd, ok, no]), ["AEP-0004 §3"]);
    }

    #[test]
    fn form_values_rule_across_events() {
        let req = ev(
            "f",
            "attention.requested",
            Some(0),
            json!({"capture":"redacted","data":{"kind":"form","prompt":"p","fields":[
                {"id":"c","type":"select","label":"C","choices":[{"id":"1","label":"one"}]},
                {"id":"t","type":"string","label":"T"}]}}),
        );
        let good = ev(
            "g",
            "attention.answered",
            Some(1),
            json!({"subject":"f","capture":"redacted","data":{"answer":{"values":{"c":"1","t":"x"}}}}),
        );
        assert!(rules(&[req.clone(), good]).is_empty());
        let bad = ev(
            "g",
            "attention.answered",
            Some(1),
            json!({"subject":"f","capture":"redacted","data":{"answer":{"values":{"c":"9"}}}}),
        );
        assert_eq!(rules(&[req.clone(), bad]), ["AEP-0002 §5.3"]);
        let leak =
            ev("g", "attention.answered", Some(1), json!({"subject":"f","data":{"answer":{"values":{"t":"x"}}}}));
        assert_eq!(rules(&[req, leak]), ["AEP-0001 §8.2"]);
    }

    #[test]
    fn rule_matching() {
        assert!(rule_matches("AEP-0001 §5.2 / AEP-0002 §7.3", "AEP-0002 §7.3"));
        assert!(rule_matches("AEP-0002 §4.2/§5 payload schema (x)", "AEP-0002 §5.4"));
        assert!(!rule_matches("AEP-0002 §5.2 payload schema", "AEP-0002 §5.4"));
        assert!(rule_matches("AEP-0001 §5.1 #2 / §7.4 (dedupe)", "AEP-0001 §7.4"));
        assert!(!rule_matches("AEP-0001 §5.1 #1 (0.1 schema)", "AEP-0001 §5.1 #11"));
        assert!(rule_matches("AEP-0002 §2 convention 5 (terminal exclusivity)", "AEP-0002 §2 convention 5"));
        assert!(!rule_matches("AEP-0002 §2 convention 5", "AEP-0002 §2 convention 4"));
        assert!(rule_matches("AEP-0001 §6 (x.{vendor}.{category}.{rest})", "AEP-0001 §6"));
        assert!(!rule_matches("AEP-0001 §6", "AEP-0002 §6"));
    }
}
