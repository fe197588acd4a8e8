//! The `attr-match` filter dialect (AEP-0003 §6): a JSON object whose members are
//! predicates on envelope context attributes or extension attributes, matched as a
//! conjunction. Parsing fails closed: anything the grammar does not allow is an
//! `invalid-filter` error, never a match-all (§6.2 rule 1, §6.5).
//!
//! Parsing compiles the filter into typed predicates (severity and capture become bit
//! sets, type patterns become prefixes) so [`Filter::matches`] does no allocation and no
//! parsing per Event.

use serde_json::{Map, Number, Value};

use crate::event::{CORE_ATTRIBUTES, Event};
use crate::level::{Capture, Severity};

/// The error code of every parse failure (AEP-0003 §6.5).
pub const INVALID_FILTER: &str = "invalid-filter";

/// A rejected filter: which member, and why (AEP-0003 §6.5 `invalid-filter`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid-filter: {key}: {reason}")]
pub struct FilterError {
    /// The offending filter member (`$` for the filter itself).
    pub key: String,
    /// A readable explanation.
    pub reason: String,
}

impl FilterError {
    fn new(key: &str, reason: impl Into<String>) -> Self {
        Self { key: key.to_owned(), reason: reason.into() }
    }

    /// The closed-set error code to answer with: always `invalid-filter` (AEP-0003 §6.5).
    pub fn code(&self) -> &'static str {
        INVALID_FILTER
    }
}

/// A string-valued core attribute a filter may address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StrAttr {
    Id,
    Subject,
    Source,
    Agent,
    Session,
    Run,
    Step,
    Cause,
}

impl StrAttr {
    fn get(self, ev: &Event) -> Option<&str> {
        match self {
            StrAttr::Id => Some(&ev.id),
            StrAttr::Source => Some(&ev.source),
            StrAttr::Agent => Some(&ev.agent),
            StrAttr::Subject => ev.subject.as_deref(),
            StrAttr::Session => ev.session.as_deref(),
            StrAttr::Run => ev.run.as_deref(),
            StrAttr::Step => ev.step.as_deref(),
            StrAttr::Cause => ev.cause.as_deref(),
        }
    }
}

/// One `type` pattern (AEP-0003 §6.2 rule 3).
#[derive(Debug, Clone, PartialEq, Eq)]
enum TypePattern {
    /// The exact type.
    Exact(Box<str>),
    /// `p.*`, stored as `p.`: matches types strictly beginning with `p` and a dot.
    Prefix(Box<str>),
}

impl TypePattern {
    fn matches(&self, ty: &str) -> bool {
        match self {
            TypePattern::Exact(t) => **t == *ty,
            TypePattern::Prefix(p) => ty.len() > p.len() && ty.starts_with(&**p),
        }
    }
}

/// One compiled filter member.
#[derive(Debug, Clone, PartialEq)]
enum Predicate {
    /// `type`: any of the patterns.
    Type(Vec<TypePattern>),
    /// A string core attribute: any of the values; absent never matches.
    Str(StrAttr, Vec<Box<str>>),
    /// `epoch` (default `0`): any of the values.
    Epoch(Vec<u64>),
    /// `severity` (default `info`): bit `i` allows `Severity::ALL[i]`.
    Severity(u8),
    /// `capture` (default `metadata`): bit `i` allows `Capture::ALL[i]`.
    Capture(u8),
    /// An extension attribute: any of the scalars, compared exactly; absent never matches.
    Extension(Box<str>, Vec<Value>),
}

impl Predicate {
    fn matches(&self, ev: &Event) -> bool {
        match self {
            Predicate::Type(pats) => pats.iter().any(|p| p.matches(&ev.r#type)),
            Predicate::Str(attr, vals) => attr.get(ev).is_some_and(|v| vals.iter().any(|w| **w == *v)),
            // AEP-0003 §6.2 rule 5: defaults apply before matching.
            Predicate::Epoch(vals) => vals.contains(&ev.epoch()),
            Predicate::Severity(mask) => mask & (1 << ev.severity() as u8) != 0,
            Predicate::Capture(mask) => mask & (1 << ev.capture() as u8) != 0,
            Predicate::Extension(name, vals) => ev.extensions.get(&**name).is_some_and(|v| vals.contains(v)),
        }
    }
}

/// A parsed `attr-match` filter (AEP-0003 §6). The default (and `{}`) matches every Event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    predicates: Vec<Predicate>,
}

impl Filter {
    /// The filter that matches every Event (`{}`).
    pub fn all() -> Self {
        Self::default()
    }

    /// `true` for the empty filter, which matches every Event.
    pub fn is_all(&self) -> bool {
        self.predicates.is_empty()
    }

    /// Parses and validates a filter object. Fails closed (AEP-0003 §6.2 rule 1, §6.5):
    /// a non-object, an unfilterable or ill-formed key, a value outside the grammar
    /// (wrong JSON type, empty inclusion array, `*` glob outside `type`, unknown level,
    /// unknown comparison operator) is an error.
    pub fn parse(v: &Value) -> Result<Filter, FilterError> {
        let Value::Object(map) = v else {
            return Err(FilterError::new("$", "a filter is a JSON object"));
        };
        Self::parse_map(map)
    }

    /// [`Filter::parse`] from an already-destructured object.
    pub fn parse_map(map: &Map<String, Value>) -> Result<Filter, FilterError> {
        let mut predicates = Vec::with_capacity(map.len());
        for (key, value) in map {
            predicates.push(parse_member(key, value)?);
        }
        // Cheap, selective predicates first: `type` and severity reject most Events.
        predicates.sort_by_key(|p| match p {
            Predicate::Type(_) | Predicate::Severity(_) | Predicate::Capture(_) | Predicate::Epoch(_) => 0,
            Predicate::Str(..) => 1,
            Predicate::Extension(..) => 2,
        });
        Ok(Filter { predicates })
    }

    /// `true` when every member matches the Event (conjunction, AEP-0003 §6.1).
    pub fn matches(&self, ev: &Event) -> bool {
        self.predicates.iter().all(|p| p.matches(ev))
    }
}

impl std::str::FromStr for Filter {
    type Err = FilterError;
    /// Parses a filter from JSON text.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let v: Value = serde_json::from_str(s).map_err(|e| FilterError::new("$", format!("not JSON: {e}")))?;
        Filter::parse(&v)
    }
}

impl<'de> serde::Deserialize<'de> for Filter {
    /// Deserializes a filter object (e.g. from configuration), failing closed like [`Filter::parse`].
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(deserializer)?;
        Filter::parse(&v).map_err(serde::de::Error::custom)
    }
}

/// `true` for a syntactically legal extension attribute name: `[a-z0-9]{1,20}` and not a
/// core attribute name (AEP-0001 §5.4).
pub fn is_extension_name(name: &str) -> bool {
    (1..=20).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && !CORE_ATTRIBUTES.contains(&name)
}

fn parse_member(key: &str, value: &Value) -> Result<Predicate, FilterError> {
    let str_attr = |a: StrAttr| -> Result<Predicate, FilterError> {
        let vals = scalars(key, value, |v| match v {
            Value::String(s) => no_glob(key, s).map(|()| Box::<str>::from(s.as_str())),
            other => Err(FilterError::new(key, format!("expected a string, got {other}"))),
        })?;
        Ok(Predicate::Str(a, vals))
    };
    match key {
        "type" => Ok(Predicate::Type(scalars(key, value, |v| type_pattern(key, v))?)),
        "id" => str_attr(StrAttr::Id),
        "subject" => str_attr(StrAttr::Subject),
        "source" => str_attr(StrAttr::Source),
        "agent" => str_attr(StrAttr::Agent),
        "session" => str_attr(StrAttr::Session),
        "run" => str_attr(StrAttr::Run),
        "step" => str_attr(StrAttr::Step),
        "cause" => str_attr(StrAttr::Cause),
        "epoch" => Ok(Predicate::Epoch(scalars(key, value, |v| {
            v.as_u64().ok_or_else(|| FilterError::new(key, format!("expected an integer >= 0, got {v}")))
        })?)),
        "severity" => severity(key, value).map(Predicate::Severity),
        "capture" => {
            let levels = scalars(key, value, |v| level::<Capture>(key, v))?;
            Ok(Predicate::Capture(levels.iter().fold(0, |m, c| m | (1 << *c as u8))))
        }
        // AEP-0003 §6.2 rule 1: `time`, `seq`, `aep`, `traceparent`, `data` are not filterable.
        "time" | "seq" | "aep" | "traceparent" | "data" => {
            Err(FilterError::new(key, "not filterable (AEP-0003 §6.2 rule 1)"))
        }
        _ if is_extension_name(key) => Ok(Predicate::Extension(
            key.into(),
            scalars(key, value, |v| match v {
                Value::String(s) => no_glob(key, s).map(|()| v.clone()),
                Value::Bool(_) => Ok(v.clone()),
                Value::Number(n) if is_integer(n) => Ok(v.clone()),
                other => Err(FilterError::new(key, format!("expected a string, integer or boolean, got {other}"))),
            })?,
        )),
        _ => Err(FilterError::new(
            key,
            "neither a filterable core attribute nor a legal extension name `[a-z0-9]{1,20}` (AEP-0003 §6.2 rule 1)",
        )),
    }
}

/// A scalar or a non-empty inclusion array of scalars (AEP-0003 §6.1), each parsed by `one`.
fn scalars<T>(
    key: &str,
    value: &Value,
    mut one: impl FnMut(&Value) -> Result<T, FilterError>,
) -> Result<Vec<T>, FilterError> {
    match value {
        Value::Array(items) if items.is_empty() => Err(FilterError::new(key, "an inclusion array needs one element")),
        Value::Array(items) => items.iter().map(|i| one(i).map_err(|e| in_array(e, i))).collect(),
        other => Ok(vec![one(other)?]),
    }
}

fn in_array(mut e: FilterError, item: &Value) -> FilterError {
    if item.is_array() || item.is_object() {
        e.reason = format!("inclusion arrays hold scalars, got {item}");
    }
    e
}

fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64()
}

/// Patterns are only legal on `type` (AEP-0003 §6.2 rule 3): a glob-shaped value on any
/// other key is refused rather than silently compared as a literal.
fn no_glob(key: &str, s: &str) -> Result<(), FilterError> {
    if s.ends_with('*') {
        return Err(FilterError::new(key, format!("{s:?}: patterns are only allowed on `type`")));
    }
    Ok(())
}

fn type_pattern(key: &str, v: &Value) -> Result<TypePattern, FilterError> {
    let Value::String(s) = v else {
        return Err(FilterError::new(key, format!("expected a type or type pattern string, got {v}")));
    };
    // AEP-0003 §6.2 rule 3: `p.*` with a non-empty `p`; `*` alone is not a pattern.
    if let Some(prefix) = s.strip_suffix(".*") {
        if prefix.is_empty() || prefix.contains('*') || prefix.ends_with('.') {
            return Err(FilterError::new(key, format!("{s:?} is not a type pattern")));
        }
        return Ok(TypePattern::Prefix(format!("{prefix}.").into()));
    }
    if s.is_empty() || s.contains('*') {
        return Err(FilterError::new(key, format!("{s:?} is neither a type nor a `prefix.*` pattern")));
    }
    Ok(TypePattern::Exact(s.as_str().into()))
}

fn level<T: std::str::FromStr<Err = crate::level::UnknownLevel>>(key: &str, v: &Value) -> Result<T, FilterError> {
    let Value::String(s) = v else {
        return Err(FilterError::new(key, format!("expected a level string, got {v}")));
    };
    s.parse().map_err(|e: crate::level::UnknownLevel| FilterError::new(key, e.to_string()))
}

/// `severity`: equality, inclusion, or `{gte, lte}` over the AEP-0001 §8.1 order,
/// inclusive bounds (AEP-0003 §6.2 rule 4). Compiled to a bit set of allowed levels.
fn severity(key: &str, value: &Value) -> Result<u8, FilterError> {
    let Value::Object(cmp) = value else {
        let levels = scalars(key, value, |v| level::<Severity>(key, v))?;
        return Ok(levels.iter().fold(0, |m, s| m | (1 << *s as u8)));
    };
    if cmp.is_empty() {
        return Err(FilterError::new(key, "a severity comparison needs `gte` and/or `lte`"));
    }
    let (mut lo, mut hi) = (Severity::Debug, Severity::Critical);
    for (op, v) in cmp {
        match op.as_str() {
            "gte" => lo = level(key, v)?,
            "lte" => hi = level(key, v)?,
            other => return Err(FilterError::new(key, format!("unknown comparison `{other}` (only gte, lte)"))),
        }
    }
    Ok(Severity::ALL.iter().filter(|s| (lo..=hi).contains(*s)).fold(0, |m, s| m | (1 << *s as u8)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(extra: Value) -> Event {
        let mut base =
            json!({"aep":"0.1","id":"e1","type":"tool.completed","time":"t","source":"aep://h/x","agent":"codex"});
        for (k, v) in extra.as_object().unwrap() {
            base[k] = v.clone();
        }
        Event::from_value(base).unwrap()
    }

    fn m(filter: Value, extra: Value) -> bool {
        Filter::parse(&filter).unwrap().matches(&ev(extra))
    }

    #[test]
    fn types_and_patterns() {
        assert!(m(json!({"type": "tool.completed"}), json!({})));
        assert!(m(json!({"type": ["attention.*", "tool.*"]}), json!({})));
        assert!(!m(json!({"type": "attention.*"}), json!({})));
        assert!(!m(json!({"type": "tool.*"}), json!({"type": "tool"})));
        assert!(!m(json!({"type": "tool.*"}), json!({"type": "toolbox.x"})));
        assert!(m(json!({"type": "x.acme.*"}), json!({"type": "x.acme.run.y"})));
    }

    #[test]
    fn severity_capture_epoch_defaults() {
        assert!(!m(json!({"severity": {"gte": "notice"}}), json!({})));
        assert!(m(json!({"severity": {"gte": "notice"}}), json!({"severity": "error"})));
        assert!(m(json!({"severity": {"lte": "info"}}), json!({})));
        assert!(!m(json!({"severity": {"gte": "debug", "lte": "notice"}}), json!({"severity": "warning"})));
        assert!(m(json!({"severity": ["info", "error"]}), json!({})));
        assert!(m(json!({"capture": "metadata", "epoch": 0}), json!({})));
        assert!(!m(json!({"capture": "full"}), json!({"capture": "redacted"})));
        assert!(m(json!({"epoch": [1, 2]}), json!({"epoch": 2})));
    }

    #[test]
    fn strings_extensions_absent_and_conjunction() {
        assert!(m(json!({"agent": ["claude-code", "codex"]}), json!({})));
        assert!(!m(json!({"session": "s1"}), json!({})));
        assert!(m(json!({"session": "s1", "agent": "codex"}), json!({"session": "s1"})));
        assert!(!m(json!({"session": "s1", "agent": "pi"}), json!({"session": "s1"})));
        assert!(m(json!({"acmezone": ["eu", 3]}), json!({"acmezone": 3})));
        assert!(!m(json!({"acmezone": "3"}), json!({"acmezone": 3})));
        assert!(!m(json!({"acmeflag": true}), json!({})));
        assert!(m(json!({}), json!({})));
    }

    #[test]
    fn fails_closed() {
        for bad in [
            json!([]),
            json!({"seq": 1}),
            json!({"data": {}}),
            json!({"traceparent": "x"}),
            json!({"Agent": "x"}),
            json!({"averyveryverylongextensionname": 1}),
            json!({"type": "*"}),
            json!({"type": ".*"}),
            json!({"type": "a*"}),
            json!({"type": 3}),
            json!({"agent": "claude*"}),
            json!({"agent": []}),
            json!({"agent": null}),
            json!({"agent": ["a", ["b"]]}),
            json!({"session": 5}),
            json!({"epoch": -1}),
            json!({"epoch": 1.5}),
            json!({"severity": {"gt": "info"}}),
            json!({"severity": {}}),
            json!({"severity": "loud"}),
            json!({"severity": {"gte": 2}}),
            json!({"capture": {"gte": "none"}}),
            json!({"acmex": {"a": 1}}),
            json!({"acmex": 0.5}),
        ] {
            let err = Filter::parse(&bad).expect_err(&bad.to_string());
            assert_eq!(err.code(), "invalid-filter");
        }
        assert!("{\"type\": \"tool.*\"}".parse::<Filter>().is_ok());
        assert!("{".parse::<Filter>().is_err());
        let f: Filter = serde_json::from_str(r#"{"agent": "codex"}"#).unwrap();
        assert!(f.matches(&ev(json!({}))));
        assert!(serde_json::from_str::<Filter>(r#"{"seq": 1}"#).is_err());
    }
}
