//! The capture ceiling over the agents' own OTLP: what the bridge forwards of their spans,
//! logs and metrics (their spans into the session traces, their metrics beside the bridge's,
//! everything through the tee) leaves no content above the ceiling, whoever produced it
//! (AEP-0001 §8.2 (b), AEP-0005 §3.3 and §6: the exporter is the egress boundary of the
//! capture model).
//!
//! Each attribute (of resources, scopes, spans, span events, links, log records and metric
//! data points) is judged by its key against the content tables
//! ([`aep_adapters::otel::content`]: every vendor's, the GenAI conventions', the general
//! OTel ones'; a key that is content for one producer is content for all, the highest level
//! winning), and by its value when no table names it:
//!
//! - a listed key leaves verbatim at its level or above, is removed below it, and at a
//!   `redacted` ceiling a `Text` one passes the AEP-0003 §9.4 pipeline (the gate is then a
//!   redacting re-emitter, AEP-0001 §8.2 (e)); a credential-named key (`token`,
//!   `api_key`, `authorization`, ...) or an operator-listed secret name is drop-only at
//!   `full`;
//! - an unknown value whose text (strings, bytes and map keys, nested included) is longer than
//!   [`LONG_TEXT`] bytes is free text at `redacted`: removed at `metadata`, redacted at
//!   `redacted`. At `none` every unknown value with any text is removed (numbers and
//!   booleans stay).
//!
//! Log bodies are judged like an unknown value (the GenAI event model's message records by
//! their tables' entry), and removed outright at `none` (AEP-0005 §3.3); a map body's entries
//! are judged like attributes. A span's status message is error text (`redacted`, like
//! `error_info.message`); a span or event name longer than [`LONG_TEXT`] is judged like
//! free text (names are structural by convention, so short ones stay at every ceiling).
//!
//! What is removed is named, never shown: each item that lost something gets
//! `aep.capture.withheld`, the removed keys (`(body)`, `(name)`, `(status.message)` for the
//! fields), and each resource states the ceiling it was gated at in `aep.capture`. At `full`
//! the gate does nothing.
//!
//! [`LONG_TEXT`] is 64 bytes: every structural value recorded from the real agents fits
//! (UUIDs 36, trace ids 32, SHA-256 hex user ids 64, model names, enum tokens, timestamps,
//! the longest tool call id 52), while a prompt, a command line, a path under a home
//! directory or an error sentence is usually longer. A short one is caught only by its
//! table entry: the tables, not the length, are the rule; the length is the backstop for
//! keys no table knows yet.

use std::borrow::Cow;
use std::collections::HashMap;

use aep_adapters::otel::content::{ContentKind, ContentTable, Key};
use aep_schemas::Capture;
use aep_schemas::redact::{self, RedactConfig};
use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
use opentelemetry_proto::tonic::logs::v1::LogRecord;
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::{Exemplar, Metric};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::Span;

/// Unknown values with more text than this (bytes) are free text (see the module doc).
pub const LONG_TEXT: usize = 64;
/// The attribute naming what an item lost.
pub const WITHHELD: &str = "aep.capture.withheld";
/// The resource attribute stating the ceiling the gate applied.
pub const CAPTURE: &str = "aep.capture";
/// A span or event name that was removed is replaced by this.
pub const NAME_WITHHELD: &str = "withheld";
/// `aep.capture.withheld` entry for a removed log body.
pub const BODY: &str = "(body)";
/// `aep.capture.withheld` entry for a removed span or event name.
pub const NAME: &str = "(name)";
/// `aep.capture.withheld` entry for a removed span status message.
pub const STATUS_MESSAGE: &str = "(status.message)";

/// What may happen to one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rule {
    level: Capture,
    kind: ContentKind,
}

impl Rule {
    /// The stricter of two rules (`DropOnly` sorts after `Text`).
    fn merge(self, o: Rule) -> Rule {
        Rule { level: self.level.max(o.level), kind: self.kind.max(o.kind) }
    }
}

/// Free text: a value no table names but long, a log body, an error message.
const FREE_TEXT: Rule = Rule { level: Capture::Redacted, kind: ContentKind::Text };
/// A credential-named key.
const CREDENTIAL: Rule = Rule { level: Capture::Full, kind: ContentKind::DropOnly };

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Keep,
    Redact,
    Withhold,
}

/// What one call changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gated {
    /// Attributes, bodies, names and status messages removed.
    pub withheld: u64,
    /// Values the redaction pipeline changed.
    pub redacted: u64,
}

impl std::ops::AddAssign for Gated {
    fn add_assign(&mut self, o: Gated) {
        self.withheld += o.withheld;
        self.redacted += o.redacted;
    }
}

/// The ceiling gate over OTLP requests (see the module doc).
#[derive(Debug, Clone)]
pub struct CaptureGate {
    ceiling: Capture,
    redact: RedactConfig,
    exact: HashMap<&'static str, Rule>,
    patterns: Vec<(Key, Rule)>,
    bodies: HashMap<&'static str, Rule>,
}

impl CaptureGate {
    /// A gate at `ceiling` over every built-in content table (the shared ones and each
    /// vendor's, through the vendor list), redacting with `redact` at `redacted`.
    pub fn new(ceiling: Capture, redact: RedactConfig) -> Self {
        Self::with_tables(ceiling, redact, aep_adapters::vendors::content_tables())
    }

    /// A gate over the given tables only.
    pub fn with_tables<'a>(
        ceiling: Capture,
        redact: RedactConfig,
        tables: impl IntoIterator<Item = &'a ContentTable>,
    ) -> Self {
        let mut gate = Self { ceiling, redact, exact: HashMap::new(), patterns: Vec::new(), bodies: HashMap::new() };
        for t in tables {
            for a in t.attrs {
                let rule = Rule { level: a.level, kind: a.kind };
                match a.key {
                    Key::Exact(k) => {
                        let r = gate.exact.get(k).map_or(rule, |r| r.merge(rule));
                        gate.exact.insert(k, r);
                    }
                    key => gate.patterns.push((key, rule)),
                }
            }
            for b in t.bodies {
                let rule = Rule { level: b.level, kind: b.kind };
                let r = gate.bodies.get(b.event).map_or(rule, |r| r.merge(rule));
                gate.bodies.insert(b.event, r);
            }
        }
        gate
    }

    /// The ceiling.
    pub fn ceiling(&self) -> Capture {
        self.ceiling
    }

    /// Whether the gate lets everything through unchanged (`full`).
    pub fn is_open(&self) -> bool {
        self.ceiling == Capture::Full
    }

    /// The rule a key's table entries (and the credential rule) give it, if any.
    fn rule(&self, key: &str) -> Option<Rule> {
        let mut rule = self.exact.get(key).copied();
        for (k, r) in &self.patterns {
            if k.matches(key) {
                rule = Some(rule.map_or(*r, |x| x.merge(*r)));
            }
        }
        let configured = self.redact.secret_names.iter().any(|n| !n.is_empty() && n.eq_ignore_ascii_case(key));
        if configured || redact::is_credential_key(key) {
            rule = Some(rule.map_or(CREDENTIAL, |x| x.merge(CREDENTIAL)));
        }
        rule
    }

    /// Text an unknown value may hold before it counts as free text.
    fn threshold(&self) -> usize {
        if self.ceiling == Capture::None { 0 } else { LONG_TEXT }
    }

    fn verdict(&self, rule: Option<Rule>, text: usize, threshold: usize) -> Verdict {
        let rule = match rule {
            Some(r) => r,
            None if text > threshold => FREE_TEXT,
            None => return Verdict::Keep,
        };
        match self.ceiling {
            Capture::Full => Verdict::Keep,
            c if c < rule.level => Verdict::Withhold,
            Capture::Redacted if rule.kind == ContentKind::Text => Verdict::Redact,
            _ => Verdict::Keep,
        }
    }

    /// Gates one attribute list; the removed keys go to `withheld`.
    fn attrs(&self, attrs: &mut Vec<KeyValue>, withheld: &mut Vec<String>, g: &mut Gated) {
        attrs.retain_mut(|kv| {
            if kv.key == WITHHELD {
                // Ours to write: a sender's own would be unjudged text.
                return false;
            }
            let text = kv.value.as_ref().map_or(0, text_len);
            match self.verdict(self.rule(&kv.key), text, self.threshold()) {
                Verdict::Keep => true,
                Verdict::Redact => match kv.value.as_mut() {
                    Some(v) if !has_bytes(v) => {
                        if redact_value(v, &self.redact, false) {
                            g.redacted += 1;
                        }
                        true
                    }
                    // Bytes cannot pass the pipeline: they are withheld instead.
                    _ => withhold(&kv.key, withheld, g),
                },
                Verdict::Withhold => withhold(&kv.key, withheld, g),
            }
        });
    }

    /// Gates one attribute list and marks it with what it lost.
    fn attrs_marked(&self, attrs: &mut Vec<KeyValue>, g: &mut Gated) {
        let mut withheld = Vec::new();
        self.attrs(attrs, &mut withheld, g);
        mark(attrs, withheld);
    }

    /// Gates a name (span, event): structural unless long.
    fn name(&self, name: &mut String, withheld: &mut Vec<String>, g: &mut Gated) {
        match self.verdict(None, name.len(), LONG_TEXT) {
            Verdict::Keep => {}
            Verdict::Redact => {
                if let Cow::Owned(r) = redact::redact_cow(name, &self.redact) {
                    *name = r;
                    g.redacted += 1;
                }
            }
            Verdict::Withhold => {
                NAME_WITHHELD.clone_into(name);
                withhold(NAME, withheld, g);
            }
        }
    }

    fn resource(&self, resource: &mut Option<Resource>, g: &mut Gated) {
        let r = resource.get_or_insert_with(Resource::default);
        r.attributes.retain(|kv| kv.key != CAPTURE);
        self.attrs_marked(&mut r.attributes, g);
        r.attributes.push(string_kv(CAPTURE, self.ceiling.as_str()));
    }

    /// Gates a traces request in place.
    pub fn traces(&self, req: &mut ExportTraceServiceRequest) -> Gated {
        let mut g = Gated::default();
        if self.is_open() {
            return g;
        }
        for rs in &mut req.resource_spans {
            self.resource(&mut rs.resource, &mut g);
            for ss in &mut rs.scope_spans {
                if let Some(scope) = ss.scope.as_mut() {
                    self.attrs_marked(&mut scope.attributes, &mut g);
                }
                for span in &mut ss.spans {
                    self.span(span, &mut g);
                }
            }
        }
        g
    }

    fn span(&self, span: &mut Span, g: &mut Gated) {
        let mut withheld = Vec::new();
        self.name(&mut span.name, &mut withheld, g);
        if let Some(status) = span.status.as_mut().filter(|s| !s.message.is_empty()) {
            match self.verdict(Some(FREE_TEXT), status.message.len(), 0) {
                Verdict::Keep => {}
                Verdict::Redact => {
                    if let Cow::Owned(r) = redact::redact_cow(&status.message, &self.redact) {
                        status.message = r;
                        g.redacted += 1;
                    }
                }
                Verdict::Withhold => {
                    status.message.clear();
                    withhold(STATUS_MESSAGE, &mut withheld, g);
                }
            }
        }
        self.attrs(&mut span.attributes, &mut withheld, g);
        mark(&mut span.attributes, withheld);
        for ev in &mut span.events {
            let mut withheld = Vec::new();
            self.name(&mut ev.name, &mut withheld, g);
            self.attrs(&mut ev.attributes, &mut withheld, g);
            mark(&mut ev.attributes, withheld);
        }
        for link in &mut span.links {
            self.attrs_marked(&mut link.attributes, g);
        }
    }

    /// Gates a logs request in place.
    pub fn logs(&self, req: &mut ExportLogsServiceRequest) -> Gated {
        let mut g = Gated::default();
        if self.is_open() {
            return g;
        }
        for rl in &mut req.resource_logs {
            self.resource(&mut rl.resource, &mut g);
            for sl in &mut rl.scope_logs {
                if let Some(scope) = sl.scope.as_mut() {
                    self.attrs_marked(&mut scope.attributes, &mut g);
                }
                for rec in &mut sl.log_records {
                    self.record(rec, &mut g);
                }
            }
        }
        g
    }

    fn record(&self, rec: &mut LogRecord, g: &mut Gated) {
        let mut withheld = Vec::new();
        let body_rule = self.body_rule(rec);
        if let Some(body) = rec.body.as_mut() {
            let verdict = if self.ceiling == Capture::None {
                // AEP-0005 §3.3: no body at `none`.
                Verdict::Withhold
            } else if body_rule.is_none()
                && let Some(any_value::Value::KvlistValue(map)) = body.value.as_mut()
            {
                // A map body: its entries are judged like attributes.
                let mut inner = Vec::new();
                self.attrs(&mut map.values, &mut inner, g);
                withheld.extend(inner.into_iter().map(|k| format!("{BODY}.{k}")));
                Verdict::Keep
            } else {
                self.verdict(body_rule, text_len(body), self.threshold())
            };
            match verdict {
                Verdict::Keep => {}
                Verdict::Redact if !has_bytes(body) => {
                    if redact_value(body, &self.redact, false) {
                        g.redacted += 1;
                    }
                }
                Verdict::Redact | Verdict::Withhold => {
                    rec.body = None;
                    withhold(BODY, &mut withheld, g);
                }
            }
        }
        self.attrs(&mut rec.attributes, &mut withheld, g);
        mark(&mut rec.attributes, withheld);
    }

    /// The body rule of a record named by a table's body entry.
    fn body_rule(&self, rec: &LogRecord) -> Option<Rule> {
        if self.bodies.is_empty() {
            return None;
        }
        let name = Some(rec.event_name.as_str()).filter(|n| !n.is_empty()).or_else(|| {
            rec.attributes.iter().find(|kv| kv.key == "event.name").and_then(|kv| {
                match kv.value.as_ref()?.value.as_ref()? {
                    any_value::Value::StringValue(s) => Some(s.as_str()),
                    _ => None,
                }
            })
        })?;
        self.bodies.get(name).copied()
    }

    /// Gates a metrics request in place (data point and exemplar attributes; names,
    /// descriptions and units are the instrument's, not content).
    pub fn metrics(&self, req: &mut ExportMetricsServiceRequest) -> Gated {
        let mut g = Gated::default();
        if self.is_open() {
            return g;
        }
        for rm in &mut req.resource_metrics {
            self.resource(&mut rm.resource, &mut g);
            for sm in &mut rm.scope_metrics {
                if let Some(scope) = sm.scope.as_mut() {
                    self.attrs_marked(&mut scope.attributes, &mut g);
                }
                for m in &mut sm.metrics {
                    self.metric(m, &mut g);
                }
            }
        }
        g
    }

    fn metric(&self, m: &mut Metric, g: &mut Gated) {
        let exemplars = |ex: &mut Vec<Exemplar>, g: &mut Gated| {
            for e in ex {
                self.attrs_marked(&mut e.filtered_attributes, g);
            }
        };
        match m.data.as_mut() {
            Some(Data::Gauge(d)) => d.data_points.iter_mut().for_each(|p| {
                self.attrs_marked(&mut p.attributes, g);
                exemplars(&mut p.exemplars, g);
            }),
            Some(Data::Sum(d)) => d.data_points.iter_mut().for_each(|p| {
                self.attrs_marked(&mut p.attributes, g);
                exemplars(&mut p.exemplars, g);
            }),
            Some(Data::Histogram(d)) => d.data_points.iter_mut().for_each(|p| {
                self.attrs_marked(&mut p.attributes, g);
                exemplars(&mut p.exemplars, g);
            }),
            Some(Data::ExponentialHistogram(d)) => d.data_points.iter_mut().for_each(|p| {
                self.attrs_marked(&mut p.attributes, g);
                exemplars(&mut p.exemplars, g);
            }),
            Some(Data::Summary(d)) => d.data_points.iter_mut().for_each(|p| self.attrs_marked(&mut p.attributes, g)),
            None => {}
        }
        // Metadata the instrument attaches to the metric itself.
        self.attrs_marked(&mut m.metadata, g);
    }
}

fn withhold(key: &str, withheld: &mut Vec<String>, g: &mut Gated) -> bool {
    withheld.push(key.to_owned());
    g.withheld += 1;
    false
}

/// Appends the marker naming what the item lost, when it lost anything.
fn mark(attrs: &mut Vec<KeyValue>, withheld: Vec<String>) {
    if withheld.is_empty() {
        return;
    }
    let values = withheld.into_iter().map(|k| AnyValue { value: Some(any_value::Value::StringValue(k)) }).collect();
    attrs.push(KeyValue {
        key: WITHHELD.to_owned(),
        value: Some(AnyValue { value: Some(any_value::Value::ArrayValue(ArrayValue { values })) }),
        ..Default::default()
    });
}

fn string_kv(key: &str, v: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.to_owned())) }),
        ..Default::default()
    }
}

/// The text a value holds: string and bytes lengths and map keys, nested included.
pub fn text_len(v: &AnyValue) -> usize {
    match v.value.as_ref() {
        Some(any_value::Value::StringValue(s)) => s.len(),
        Some(any_value::Value::BytesValue(b)) => b.len(),
        Some(any_value::Value::ArrayValue(a)) => a.values.iter().map(text_len).sum(),
        Some(any_value::Value::KvlistValue(l)) => {
            l.values.iter().map(|kv| kv.key.len() + kv.value.as_ref().map_or(0, text_len)).sum()
        }
        _ => 0,
    }
}

fn has_bytes(v: &AnyValue) -> bool {
    match v.value.as_ref() {
        Some(any_value::Value::BytesValue(b)) => !b.is_empty(),
        Some(any_value::Value::ArrayValue(a)) => a.values.iter().any(has_bytes),
        Some(any_value::Value::KvlistValue(l)) => l.values.iter().filter_map(|kv| kv.value.as_ref()).any(has_bytes),
        _ => false,
    }
}

/// Runs the §9.4 pipeline over every string in `v` (a map entry under a credential-named
/// key is replaced outright, as `redact_value` does for JSON); whether anything changed.
fn redact_value(v: &mut AnyValue, cfg: &RedactConfig, forced: bool) -> bool {
    match v.value.as_mut() {
        Some(any_value::Value::StringValue(s)) => {
            if forced {
                let changed = !s.is_empty() && s != redact::SECRET;
                if changed {
                    redact::SECRET.clone_into(s);
                }
                changed
            } else if let Cow::Owned(r) = redact::redact_cow(s, cfg) {
                *s = r;
                true
            } else {
                false
            }
        }
        Some(any_value::Value::ArrayValue(a)) => {
            a.values.iter_mut().fold(false, |changed, x| redact_value(x, cfg, forced) | changed)
        }
        Some(any_value::Value::KvlistValue(l)) => l.values.iter_mut().fold(false, |changed, kv| {
            let forced = forced || redact::is_credential_key(&kv.key);
            kv.value.as_mut().is_some_and(|x| redact_value(x, cfg, forced)) | changed
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests;
