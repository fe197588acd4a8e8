//! The AEP 0.1 type registry: the thirteen categories (AEP-0002 §3), every registered
//! type with its status and scope (AEP-0002 §4, §6; AEP-0004 §5), and each payload's
//! field tree with per-field `x-aep-capture` levels (AEP-0002 §5).
//!
//! The data lives in `registry/types.aep`, this project's own compact text form written
//! from the spec prose (its header documents the grammar). It is embedded with
//! `include_str!` and parsed once on first use. The conformance runner's `registry`
//! class proves it agrees with the spec's published JSON Schemas.
//!
//! One deliberate choice: where the prose and the published schema differ on a
//! requiredness (`citation.source` is REQ in AEP-0002 §5.2 prose, optional in the
//! schema), the registry mirrors the schema so the two stay in exact parity, and
//! [`crate::validate`] enforces the prose rule separately (rule `AEP-0002 §5.2`).

use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use serde_json::Value;

use crate::level::Capture;

/// The closed category set of 0.1 (AEP-0002 §3), in the spec's table order.
pub const CATEGORIES: [&str; 13] = [
    "agent",
    "session",
    "run",
    "progress",
    "tool",
    "delegation",
    "attention",
    "resource",
    "error",
    "state",
    "assessment",
    "message",
    "control",
];

/// A registered type's status (AEP-0002 §1, §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Consumers MUST understand it (AEP-0002 §4.1).
    Mandatory,
    /// Registered with defined semantics; consumers SHOULD handle it (§4.2).
    Optional,
    /// Name reserved, schema deferred (§4.3).
    Reserved,
}

impl Status {
    /// The registry spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Mandatory => "mandatory",
            Status::Optional => "optional",
            Status::Reserved => "reserved",
        }
    }
}

/// A registered type's scope (AEP-0002 §6; AEP-0001 §5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Session-scoped: carries `session` and `seq`.
    Session,
    /// Agent-scoped: omits `session`, `run`, `step`, `seq`.
    Agent,
    /// A foreign-emitter control command: carries `session`, omits `seq` (AEP-0004 §2.2).
    Command,
}

impl Scope {
    /// The registry spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Session => "session",
            Scope::Agent => "agent",
            Scope::Command => "command",
        }
    }
}

/// A JSON type a field may take (the JSON Schema `type` keyword).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JsonType {
    /// A JSON string.
    String,
    /// A JSON number with no fractional part.
    Integer,
    /// Any JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// A JSON object.
    Object,
    /// A JSON array.
    Array,
}

impl JsonType {
    /// The JSON Schema spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            JsonType::String => "string",
            JsonType::Integer => "integer",
            JsonType::Number => "number",
            JsonType::Boolean => "boolean",
            JsonType::Object => "object",
            JsonType::Array => "array",
        }
    }

    /// Whether `v` is of this JSON type (`integer` accepts numbers without a fraction).
    pub fn matches(self, v: &Value) -> bool {
        match self {
            JsonType::String => v.is_string(),
            JsonType::Integer => match v {
                Value::Number(n) => n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
                _ => false,
            },
            JsonType::Number => v.is_number(),
            JsonType::Boolean => v.is_boolean(),
            JsonType::Object => v.is_object(),
            JsonType::Array => v.is_array(),
        }
    }

    fn parse(s: &str) -> Option<JsonType> {
        Some(match s {
            "string" => JsonType::String,
            "integer" => JsonType::Integer,
            "number" => JsonType::Number,
            "boolean" => JsonType::Boolean,
            "object" => JsonType::Object,
            "array" => JsonType::Array,
            _ => return None,
        })
    }
}

impl fmt::Display for JsonType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A conditional requirement: when member `property` equals `equals`, `then_required` is REQUIRED.
///
/// The one conditional in 0.1: a `field_spec` of `type: "select"` requires `choices` (AEP-0006).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conditional {
    /// The member whose value is tested.
    pub property: String,
    /// The value that triggers the requirement.
    pub equals: String,
    /// The member that becomes REQUIRED.
    pub then_required: String,
}

/// One node of a payload's field tree (the payload root itself is an object node).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSpec {
    /// Allowed JSON types; empty means unconstrained (e.g. an enum-only field).
    pub types: Vec<JsonType>,
    /// The `x-aep-capture` annotation, when present; read the effective level with [`FieldSpec::level`].
    pub capture: Option<Capture>,
    /// `true` for the AEP-0002 §5.3 `[metadata*]` exceptions (prompt, option/field/choice labels,
    /// `answer.values`): present at `metadata` only as a structural placeholder.
    pub exception: bool,
    /// REQUIRED member names of an object.
    pub required: Vec<String>,
    /// Known members of an object, in spec order. Payload objects are open: unknown members are legal.
    pub properties: Vec<(String, FieldSpec)>,
    /// The item schema of an array.
    pub items: Option<Box<FieldSpec>>,
    /// Closed string values, when the field is an enum.
    pub enum_values: Vec<String>,
    /// Inclusive numeric lower bound.
    pub minimum: Option<f64>,
    /// Inclusive numeric upper bound.
    pub maximum: Option<f64>,
    /// A required constant value.
    pub constant: Option<String>,
    /// A string format (`date-time`).
    pub format: Option<String>,
    /// A conditional requirement on this object's members.
    pub conditional: Option<Conditional>,
    /// The AEP-0002 §5.2 common object this node is an instance of (`cost`, `field_spec`, ...).
    pub common: Option<String>,
}

impl FieldSpec {
    /// The effective capture level: the annotation, `metadata` when absent (AEP-0002 §5.1 rule 4).
    pub fn level(&self) -> Capture {
        self.capture.unwrap_or(Capture::Metadata)
    }

    /// The spec of a known member.
    pub fn property(&self, name: &str) -> Option<&FieldSpec> {
        self.properties.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }

    /// Whether `name` is a REQUIRED member.
    pub fn is_required(&self, name: &str) -> bool {
        self.required.iter().any(|r| r == name)
    }
}

/// One registered type (AEP-0002 §4, AEP-0004 §5).
#[derive(Debug, Clone, PartialEq)]
pub struct TypeSpec {
    /// The bare type name, e.g. `tool.completed`.
    pub name: String,
    /// mandatory / optional / reserved.
    pub status: Status,
    /// session / agent / command.
    pub scope: Scope,
    /// The payload (`data`) schema; `None` when deferred (reserved types).
    pub payload: Option<FieldSpec>,
}

impl TypeSpec {
    /// The category (first dot token).
    pub fn category(&self) -> &str {
        self.name.split('.').next().unwrap_or("")
    }
}

/// The whole parsed registry.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Registry {
    /// Categories with their scope, in file order.
    pub categories: Vec<(String, Scope)>,
    /// Every registered type, in file order.
    pub types: Vec<TypeSpec>,
    /// Type name to position in `types`.
    index: HashMap<String, usize>,
}

static REGISTRY: LazyLock<Registry> = LazyLock::new(|| {
    // The embedded file is part of this crate; a parse failure is a build-time bug
    // caught by the unit tests, never input-derived. Fall back to empty rather than panic.
    parse(include_str!("registry/types.aep")).unwrap_or_default()
});

/// The registry.
pub fn registry() -> &'static Registry {
    &REGISTRY
}

/// The registered type named `ty`, if any (vendor `x.*` types are never registered).
pub fn lookup(ty: &str) -> Option<&'static TypeSpec> {
    REGISTRY.index.get(ty).and_then(|&i| REGISTRY.types.get(i))
}

/// Every registered type.
pub fn types() -> &'static [TypeSpec] {
    &REGISTRY.types
}

/// Whether `c` is one of the thirteen categories (AEP-0002 §3).
pub fn is_category(c: &str) -> bool {
    CATEGORIES.contains(&c)
}

/// The spec of a payload member addressed by a dotted path of member names (`answer.text`;
/// `[]` steps into array items, e.g. `documents.[].content`).
pub fn field(ty: &str, path: &str) -> Option<&'static FieldSpec> {
    let mut node = lookup(ty)?.payload.as_ref()?;
    for step in path.split('.') {
        node = if step == "[]" { node.items.as_deref()? } else { node.property(step)? };
    }
    Some(node)
}

/// A registry text that does not follow the `types.aep` grammar.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("registry line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

struct Line<'a> {
    no: usize,
    indent: usize,
    text: &'a str,
}

/// Parses a registry text in the `types.aep` grammar.
pub fn parse(text: &str) -> Result<Registry, ParseError> {
    let lines: Vec<Line<'_>> = text
        .lines()
        .enumerate()
        .filter_map(|(i, raw)| {
            let trimmed = raw.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('#') {
                return None;
            }
            Some(Line { no: i + 1, indent: raw.len() - trimmed.len(), text: trimmed.trim_end() })
        })
        .collect();
    let err = |line: usize, message: String| ParseError { line, message };

    // First pass: collect defs (name -> body lines, re-based to indent 0).
    let mut defs: Vec<(String, Vec<BodyLine>)> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        if l.indent == 0 && l.text.starts_with("def ") {
            let name = l.text[4..].trim().to_owned();
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].indent > 0 {
                if lines[i].indent < 2 {
                    return Err(err(lines[i].no, "def members are indented by two spaces".into()));
                }
                body.push((lines[i].no, lines[i].indent - 2, lines[i].text.to_owned()));
                i += 1;
            }
            defs.push((name, body));
        } else {
            i += 1;
        }
    }

    let mut reg = Registry::default();
    let mut i = 0;
    while i < lines.len() {
        let l = &lines[i];
        if l.indent != 0 {
            return Err(err(l.no, format!("unexpected indented line {:?}", l.text)));
        }
        let words: Vec<&str> = l.text.split_whitespace().collect();
        match words.first().copied() {
            Some("category") => {
                let [_, name, scope] = words[..] else {
                    return Err(err(l.no, "expected `category NAME SCOPE`".into()));
                };
                reg.categories.push((name.to_owned(), parse_scope(name, scope).map_err(|m| err(l.no, m))?));
                i += 1;
            }
            Some("def") => {
                i += 1;
                while i < lines.len() && lines[i].indent > 0 {
                    i += 1;
                }
            }
            Some("type") => {
                let (name, status, scope, has_payload) = match words[..] {
                    [_, n, st, sc] => (n, st, sc, true),
                    [_, n, st, sc, "-"] => (n, st, sc, false),
                    _ => return Err(err(l.no, "expected `type NAME STATUS SCOPE [-]`".into())),
                };
                let status = match status {
                    "mandatory" => Status::Mandatory,
                    "optional" => Status::Optional,
                    "reserved" => Status::Reserved,
                    other => return Err(err(l.no, format!("unknown status {other:?}"))),
                };
                let scope = parse_scope(name, scope).map_err(|m| err(l.no, m))?;
                let mut body = Vec::new();
                i += 1;
                while i < lines.len() && lines[i].indent > 0 {
                    if lines[i].indent < 2 {
                        return Err(err(lines[i].no, "members are indented by two spaces".into()));
                    }
                    body.push((lines[i].no, lines[i].indent - 2, lines[i].text.to_owned()));
                    i += 1;
                }
                let payload = if has_payload {
                    let body = expand(&body, &defs, 0)?;
                    let mut root = FieldSpec { types: vec![JsonType::Object], ..FieldSpec::default() };
                    let mut pos = 0;
                    parse_members(&body, &mut pos, 0, &mut root)?;
                    Some(root)
                } else {
                    if !body.is_empty() {
                        return Err(err(l.no, "a type without payload (`-`) has no members".into()));
                    }
                    None
                };
                if reg.index.insert(name.to_owned(), reg.types.len()).is_some() {
                    return Err(err(l.no, format!("type {name} registered twice")));
                }
                reg.types.push(TypeSpec { name: name.to_owned(), status, scope, payload });
            }
            _ => return Err(err(l.no, format!("unknown directive {:?}", l.text))),
        }
    }
    Ok(reg)
}

fn parse_scope(name: &str, s: &str) -> Result<Scope, String> {
    match s {
        "session" => Ok(Scope::Session),
        "agent" => Ok(Scope::Agent),
        "command" => Ok(Scope::Command),
        other => Err(format!("{name}: unknown scope {other:?}")),
    }
}

type BodyLine = (usize, usize, String);

/// Expands `..DEF` splices and `use=DEF` member lists into plain member lines.
/// Lines coming from a `use=DEF` are tagged by appending ` common=DEF` to the using line.
fn expand(body: &[BodyLine], defs: &[(String, Vec<BodyLine>)], depth: usize) -> Result<Vec<BodyLine>, ParseError> {
    if depth > 8 {
        return Err(ParseError { line: body.first().map_or(0, |b| b.0), message: "def nesting too deep".into() });
    }
    let find = |no: usize, name: &str| {
        defs.iter()
            .find(|(n, _)| n == name)
            .map(|(_, b)| b)
            .ok_or_else(|| ParseError { line: no, message: format!("unknown def {name:?}") })
    };
    let mut out = Vec::new();
    for (no, indent, text) in body {
        if let Some(name) = text.strip_prefix("..") {
            let def = find(*no, name.trim())?;
            for (dno, dind, dtext) in expand(def, defs, depth + 1)? {
                out.push((dno, dind + indent, dtext));
            }
        } else if let Some(name) = text.split_whitespace().find_map(|w| w.strip_prefix("use=")) {
            let def = find(*no, name)?;
            out.push((*no, *indent, text.replace(&format!("use={name}"), &format!("common={name}"))));
            for (dno, dind, dtext) in expand(def, defs, depth + 1)? {
                out.push((dno, dind + indent + 2, dtext));
            }
        } else {
            out.push((*no, *indent, text.clone()));
        }
    }
    Ok(out)
}

fn parse_members(body: &[BodyLine], pos: &mut usize, indent: usize, parent: &mut FieldSpec) -> Result<(), ParseError> {
    while *pos < body.len() {
        let (no, ind, text) = &body[*pos];
        if *ind < indent {
            return Ok(());
        }
        if *ind > indent {
            return Err(ParseError { line: *no, message: format!("unexpected indent at {text:?}") });
        }
        let (name, required, mut spec) = parse_field(*no, text)?;
        *pos += 1;
        if *pos < body.len() && body[*pos].1 > indent {
            parse_members(body, pos, indent + 2, &mut spec)?;
        }
        if name == "[]" {
            if parent.items.is_some() {
                return Err(ParseError { line: *no, message: "two item specs".into() });
            }
            parent.items = Some(Box::new(spec));
        } else {
            if required {
                parent.required.push(name.clone());
            }
            parent.properties.push((name, spec));
        }
    }
    Ok(())
}

fn parse_field(no: usize, text: &str) -> Result<(String, bool, FieldSpec), ParseError> {
    let err = |message: String| ParseError { line: no, message };
    let mut words = text.split_whitespace();
    let raw_name = words.next().ok_or_else(|| err("empty member line".into()))?;
    let (name, required) = match raw_name.strip_suffix('!') {
        Some(n) => (n.to_owned(), true),
        None => (raw_name.to_owned(), false),
    };
    let types = words.next().ok_or_else(|| err(format!("{name}: missing type")))?;
    let mut spec = FieldSpec::default();
    if types != "any" {
        for t in types.split('|') {
            spec.types.push(JsonType::parse(t).ok_or_else(|| err(format!("{name}: unknown type {t:?}")))?);
        }
    }
    for w in words {
        if let Some(level) = w.strip_prefix('@') {
            let (level, star) = match level.strip_suffix('*') {
                Some(l) => (l, true),
                None => (level, false),
            };
            spec.capture = Some(level.parse().map_err(|e: crate::level::UnknownLevel| err(e.to_string()))?);
            spec.exception = star;
        } else if let Some((k, v)) = w.split_once('=') {
            let num = |v: &str| v.parse::<f64>().map_err(|_| err(format!("{name}: {k} is not a number")));
            match k {
                "enum" => spec.enum_values = v.split(',').map(str::to_owned).collect(),
                "min" => spec.minimum = Some(num(v)?),
                "max" => spec.maximum = Some(num(v)?),
                "const" => spec.constant = Some(v.to_owned()),
                "format" => spec.format = Some(v.to_owned()),
                "common" => spec.common = Some(v.to_owned()),
                "when" => {
                    let mut parts = v.split(':');
                    let (Some(p), Some(e), Some(r), None) = (parts.next(), parts.next(), parts.next(), parts.next())
                    else {
                        return Err(err(format!("{name}: when=PROP:VALUE:REQ expected")));
                    };
                    spec.conditional =
                        Some(Conditional { property: p.into(), equals: e.into(), then_required: r.into() });
                }
                other => return Err(err(format!("{name}: unknown key {other:?}"))),
            }
        } else {
            return Err(err(format!("{name}: unexpected word {w:?}")));
        }
    }
    Ok((name, required, spec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_registry_parses_completely() {
        let reg = parse(include_str!("registry/types.aep")).unwrap();
        assert_eq!(reg.categories.len(), 13);
        let names: Vec<&str> = reg.categories.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, CATEGORIES);
        assert_eq!(reg.types.iter().filter(|t| t.status == Status::Mandatory).count(), 14);
        assert!(reg.types.iter().all(|t| is_category(t.category())));
        assert_eq!(&reg, registry());
    }

    #[test]
    fn lookup_and_nested_fields() {
        let t = lookup("tool.completed").unwrap();
        assert_eq!((t.status, t.scope), (Status::Mandatory, Scope::Session));
        let p = t.payload.as_ref().unwrap();
        assert_eq!(p.required, ["tool"]);
        assert_eq!(p.property("result").unwrap().level(), Capture::Full);
        assert_eq!(p.property("result").unwrap().types, [JsonType::Object, JsonType::String]);
        assert_eq!(field("tool.completed", "tool.name").unwrap().level(), Capture::Metadata);
        assert_eq!(field("tool.completed", "cost.currency").map(|_| ()), Some(()));
        assert!(field("tool.completed", "cost").unwrap().is_required("currency"));
        assert_eq!(field("resource.retrieval.returned", "documents.[].content").unwrap().level(), Capture::Full);
        assert!(field("attention.requested", "prompt").unwrap().exception);
        assert!(field("attention.requested", "fields.[].choices.[].label").unwrap().exception);
        let fs = field("attention.requested", "fields.[]").unwrap();
        assert_eq!(fs.conditional.as_ref().unwrap().then_required, "choices");
        assert_eq!(fs.common.as_deref(), Some("field_spec"));
        assert_eq!(lookup("control.cancel").unwrap().scope, Scope::Command);
        assert_eq!(lookup("agent.presence").unwrap().scope, Scope::Agent);
        assert!(lookup("message.agent.replied").unwrap().payload.is_none());
        assert!(lookup("x.acme.tool.thing").is_none());
        // Unannotated nodes default to metadata (AEP-0002 §5.1 rule 4).
        assert_eq!(field("attention.requested", "respond_via.[]").unwrap().capture, None);
        assert_eq!(field("attention.requested", "respond_via.[]").unwrap().level(), Capture::Metadata);
    }

    #[test]
    fn grammar_errors_name_the_line() {
        let e = parse("category agent agent\n\ntype a.b sometimes session\n").unwrap_err();
        assert_eq!(e.line, 3);
        let e = parse("type a.b optional session\n  x strnig\n").unwrap_err();
        assert!(e.message.contains("strnig"));
        let e = parse("type a.b optional session\n  x object use=nope\n").unwrap_err();
        assert!(e.message.contains("nope"));
        let ok = parse("def d\n  k! integer @metadata min=1\ntype a.b optional session\n  ..d\n").unwrap();
        let p = ok.types[0].payload.as_ref().unwrap();
        assert_eq!(p.required, ["k"]);
        assert_eq!(p.property("k").unwrap().minimum, Some(1.0));
    }
}
