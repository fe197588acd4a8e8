//! Pure OTel-inbound profiles: vendor LogRecords (already decoded by the receiver into the
//! neutral [`OtelRecord`]) become AEP event drafts, following AEP-0002 Annex A (A.2 and A.5,
//! the OTel channels) and the pins `mappings/codex-otel.json` and `mappings/vscode-otel.json`.
//!
//! This module knows nothing about protobuf, tonic or HTTP: the receiver converts each
//! `LogRecord` (with its resource and scope) into an [`OtelRecord`] whose attributes are
//! flattened to JSON (the pins' own form), and calls [`OtelProfile::map_record`].
//!
//! Two modes ([`Mode`]): **companion** (the default) puts everything in the channel-visible
//! `x.<vendor>.otel.*` family and never emits core types, so a co-observing hook adapter stays
//! the sole core-type authority; **primary** (hook-less deployments) emits the core subset
//! each profile documents. Names a profile does not know fall to `x.<vendor>.otel.unknown`
//! carrying only the event name (foreign records are never guessed at).
//!
//! Capture: every profile forwards only the attributes it lists, each with its capture level
//! (AEP-0003 §9 rule 1); unlisted attributes (content of unknown sensitivity) never ride along,
//! at any ceiling. `redacted` fields pass the AEP-0003 §9.4 pipeline; vendor redaction
//! markers (`[REDACTED]`, `<REDACTED>`) mean the vendor did not log the content, so nothing
//! is forwarded (the double gate).

pub mod content;
pub mod generic;
pub mod usage;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use aep_schemas::Capture;
use serde_json::{Map, Value};

use crate::{EventDraft, MapContext};

/// One OTel LogRecord with its resource and scope, in a transport-neutral form.
///
/// Attribute values are flattened to JSON: strings, booleans, integers (`intValue`),
/// doubles, arrays and maps as JSON arrays and objects; `bytesValue` as lowercase hex.
/// Record attributes are an [`Attributes`] list (looked up by key, no hashing per record);
/// resource attributes, shared by every record of a `ResourceLogs`, stay a JSON object.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OtelRecord {
    /// Resource attributes (`service.name`, `host.name`, `session.id`, ...), shared by every
    /// record of one `ResourceLogs`.
    pub resource: Arc<Map<String, Value>>,
    /// Instrumentation scope name (e.g. `com.anthropic.claude_code.events`); empty when unset.
    /// Shared: every record of a scope (and a receiver's batch) holds the same string.
    pub scope_name: Arc<str>,
    /// Instrumentation scope version; empty when unset.
    pub scope_version: Arc<str>,
    /// The `LogRecord.event_name` field as sent (Codex puts a source location here).
    pub event_name: Option<Arc<str>>,
    /// The record's attributes.
    pub attributes: Attributes,
    /// The record body, flattened like an attribute value (read it with [`Body::get`]).
    pub body: Body,
    /// `time_unix_nano` (0 when unset, as Codex sends it).
    pub time_unix_nano: u64,
    /// `observed_time_unix_nano` (0 when unset).
    pub observed_time_unix_nano: u64,
    /// `severity_number` (0 when unset).
    pub severity_number: i32,
    /// `severity_text`; empty when unset.
    pub severity_text: Arc<str>,
    /// Trace id as 32 lowercase hex digits; `None` when absent or all zero.
    pub trace_id: Option<String>,
    /// Span id as 16 lowercase hex digits; `None` when absent or all zero.
    pub span_id: Option<String>,
    /// `LogRecord.flags` (the low byte carries the W3C trace flags).
    pub flags: u32,
}

/// A record's body: given as JSON, or a range of the request bytes turned into JSON only
/// when read. Most profiles never read it (the event name and the payload come from the
/// attributes), so a receiver that checked its encoding leaves it on the wire.
#[derive(Clone, Default)]
pub struct Body {
    value: std::cell::OnceCell<Option<Value>>,
    wire: Option<(bytes::Bytes, DecodeValue)>,
}

impl Body {
    /// A body already built (`None`: the record has none).
    pub fn given(v: Option<Value>) -> Self {
        Self { value: std::cell::OnceCell::from(v), wire: None }
    }

    /// A body whose value is `wire` (one checked `AnyValue`), built by `decode` when read.
    pub fn deferred(wire: bytes::Bytes, decode: DecodeValue) -> Self {
        Self { value: std::cell::OnceCell::new(), wire: Some((wire, decode)) }
    }

    /// The body, built (once) if it was deferred.
    pub fn get(&self) -> Option<&Value> {
        self.value.get_or_init(|| self.wire.as_ref().map(|(b, decode)| decode(b))).as_ref()
    }
}

impl From<Value> for Body {
    fn from(v: Value) -> Self {
        Self::given(Some(v))
    }
}

impl From<Option<Value>> for Body {
    fn from(v: Option<Value>) -> Self {
        Self::given(v)
    }
}

impl PartialEq for Body {
    /// The same value, however each is held.
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl std::fmt::Debug for Body {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// A record's attributes in wire order: a small list searched by key (records carry a few
/// dozen attributes at most, so a scan beats hashing every key on the way in). A later
/// duplicate key wins, as in most SDKs' maps. Keys are shared (`Arc<str>`): a receiver
/// decoding a batch gives every record with the same key the same allocation.
///
/// Values are JSON, either given ([`Attributes::push`]) or *deferred*
/// ([`Attributes::push_deferred`]): a receiver that has already checked the wire encoding
/// leaves each value as a range of the request body and a decoder, and a value becomes JSON
/// only when a profile reads it. Profiles forward a handful of listed attributes per record
/// (AEP-0003 §9 rule 1), so most values are never built at all.
#[derive(Clone, Default)]
pub struct Attributes {
    entries: Vec<(Arc<str>, Slot)>,
    wire: Option<Deferred>,
}

/// The shared source of deferred values: the wire bytes and the functions that read one
/// value's bytes.
#[derive(Clone)]
struct Deferred {
    bytes: bytes::Bytes,
    decode: DecodeValue,
    peek: PeekStr,
}

/// Turns the wire bytes of one checked value into JSON (infallible: the receiver checked
/// the encoding before deferring it).
pub type DecodeValue = fn(&[u8]) -> Value;

/// The text of one checked value's wire bytes when it is a plain string, borrowed from them
/// (no JSON built); `None` when it is anything else (then [`DecodeValue`] decides).
pub type PeekStr = fn(&[u8]) -> Option<&str>;

/// One value: built (boxed, so an unread deferred value costs its range and one word) or
/// a range of the wire bytes.
#[derive(Clone)]
struct Slot {
    value: std::cell::OnceCell<Box<Value>>,
    /// The value's range in the wire bytes, when deferred.
    at: u32,
    len: u32,
}

impl Slot {
    fn given(v: Value) -> Self {
        Self { value: std::cell::OnceCell::from(Box::new(v)), at: 0, len: 0 }
    }
}

impl Attributes {
    /// An empty list with room for `n` attributes whose deferred values are ranges of `wire`,
    /// turned into JSON by `decode` when read (and read as text by `peek`).
    pub fn deferred(n: usize, wire: bytes::Bytes, decode: DecodeValue, peek: PeekStr) -> Self {
        Self { entries: Vec::with_capacity(n), wire: Some(Deferred { bytes: wire, decode, peek }) }
    }

    fn position(&self, key: &str) -> Option<usize> {
        // Length and last byte first: most keys differ there, and the full comparison is a
        // call (this runs for every listed field of every record).
        let (len, last) = (key.len(), key.as_bytes().last());
        self.entries.iter().rposition(|(k, _)| k.len() == len && k.as_bytes().last() == last && &**k == key)
    }

    /// A hash of which key allocations this list holds, in order, and the bytes of its keys;
    /// `None` past [`MAX_MEMO_KEYS`] or [`MAX_MEMO_KEY_BYTES`]. Receivers share key
    /// allocations across records (and requests), so records of one kind from one exporter
    /// give the same fingerprint.
    fn key_fingerprint(&self) -> Option<u64> {
        if self.entries.len() > MAX_MEMO_KEYS {
            return None;
        }
        let (mut h, mut bytes) = (self.entries.len() as u64, 0usize);
        for (k, _) in &self.entries {
            bytes += k.len();
            h = (h.rotate_left(5) ^ (k.as_ptr() as usize as u64)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
        (bytes <= MAX_MEMO_KEY_BYTES).then_some(h)
    }

    /// Whether this list's keys are exactly `keys`, allocation for allocation (a live `Arc`'s
    /// address is its own, so equal addresses mean equal keys).
    fn same_keys(&self, keys: &[Arc<str>]) -> bool {
        self.entries.len() == keys.len() && self.entries.iter().zip(keys).all(|((k, _), m)| Arc::ptr_eq(k, m))
    }

    fn slot_bytes(&self, slot: &Slot) -> Option<(&[u8], DecodeValue)> {
        let w = self.wire.as_ref()?;
        let at = slot.at as usize;
        Some((w.bytes.get(at..at + slot.len as usize)?, w.decode))
    }

    /// The value of entry `i`, built (once) when deferred.
    fn value_at(&self, i: usize) -> &Value {
        let slot = &self.entries[i].1;
        slot.value.get_or_init(|| Box::new(self.slot_bytes(slot).map(|(b, decode)| decode(b)).unwrap_or(Value::Null)))
    }

    /// The value of `key` (the last one when the key repeats).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.position(key).map(|i| self.value_at(i))
    }

    /// The value of `key` when it is a string, as [`Attributes::get`] then [`Value::as_str`]; a
    /// deferred plain string is read straight from the wire bytes (nothing built or cached).
    pub fn get_str(&self, key: &str) -> Option<&str> {
        let i = self.position(key)?;
        let slot = &self.entries[i].1;
        if slot.value.get().is_none()
            && let Some(w) = self.wire.as_ref()
            && let Some(b) = w.bytes.get(slot.at as usize..slot.at as usize + slot.len as usize)
            && let Some(s) = (w.peek)(b)
        {
            return Some(s);
        }
        self.value_at(i).as_str()
    }

    /// The value of `key` as an owned value: a deferred one is built straight into the result
    /// (no cached copy to clone), a given one is cloned.
    pub fn get_owned(&self, key: &str) -> Option<Value> {
        self.position(key).map(|i| self.owned_at(i))
    }

    /// The value of entry `i` as an owned value (see [`Attributes::get_owned`]).
    fn owned_at(&self, i: usize) -> Value {
        let slot = &self.entries[i].1;
        match (slot.value.get(), self.slot_bytes(slot)) {
            (Some(v), _) => (**v).clone(),
            (None, Some((b, decode))) => decode(b),
            (None, None) => Value::Null,
        }
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_some()
    }

    /// Appends an attribute (it shadows an earlier one of the same key).
    pub fn push(&mut self, key: impl Into<Arc<str>>, value: Value) {
        self.entries.push((key.into(), Slot::given(value)));
    }

    /// Appends an attribute whose value is `wire[at..at + len]`, built only when read; `None`
    /// (nothing appended) when this list has no wire bytes or the range is outside them.
    pub fn push_deferred(&mut self, key: Arc<str>, at: usize, len: usize) -> Option<()> {
        let w = self.wire.as_ref()?;
        let end = at.checked_add(len)?;
        if end > w.bytes.len() {
            return None;
        }
        let (at, len) = (u32::try_from(at).ok()?, u32::try_from(len).ok()?);
        self.entries.push((key, Slot { value: std::cell::OnceCell::new(), at, len }));
        Some(())
    }

    /// Sets `key`, replacing an earlier value of the same key.
    pub fn insert(&mut self, key: impl Into<Arc<str>>, value: Value) {
        let key = key.into();
        match self.entries.iter_mut().rev().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = Slot::given(value),
            None => self.entries.push((key, Slot::given(value))),
        }
    }

    /// Removes every attribute.
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of entries (duplicates included).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no attributes.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entries in wire order (duplicates included); deferred values are built.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        (0..self.entries.len()).map(|i| (&*self.entries[i].0, self.value_at(i)))
    }

    /// The attributes as a JSON object (a later duplicate key wins).
    pub fn to_map(&self) -> Map<String, Value> {
        self.iter().map(|(k, v)| (k.to_owned(), v.clone())).collect()
    }
}

impl PartialEq for Attributes {
    /// Same keys and values in the same order, however each value is held.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl std::fmt::Debug for Attributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<K: Into<Arc<str>>> FromIterator<(K, Value)> for Attributes {
    fn from_iter<I: IntoIterator<Item = (K, Value)>>(iter: I) -> Self {
        Self { entries: iter.into_iter().map(|(k, v)| (k.into(), Slot::given(v))).collect(), wire: None }
    }
}

impl From<Map<String, Value>> for Attributes {
    fn from(m: Map<String, Value>) -> Self {
        m.into_iter().collect()
    }
}

impl std::ops::Index<&str> for Attributes {
    type Output = Value;
    /// The value of `key`, or `null` when absent.
    fn index(&self, key: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(key).unwrap_or(&NULL)
    }
}

impl OtelRecord {
    /// A resource attribute as a string.
    pub fn resource_str(&self, key: &str) -> Option<&str> {
        self.resource.get(key).and_then(Value::as_str)
    }

    /// An attribute as a string.
    pub fn attr_str(&self, key: &str) -> Option<&str> {
        self.attributes.get_str(key)
    }

    /// The resource `host.name`, when set: the host part of the envelope `source`
    /// (`aep://{host.name}/agent/{vendor}/session/{session}`, design record "Identity").
    pub fn host_name(&self) -> Option<&str> {
        self.resource_str("host.name")
    }

    /// The resource `service.name`, when set.
    pub fn service_name(&self) -> Option<&str> {
        self.resource_str("service.name")
    }
}

/// Which events a profile emits (design record "Modes"); `companion` / `primary` in config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Everything in `x.<vendor>.otel.*`; core types never emitted (the default).
    #[default]
    Companion,
    /// The profile's documented core subset, for deployments without a hook adapter.
    Primary,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "companion" => Ok(Mode::Companion),
            "primary" => Ok(Mode::Primary),
            other => Err(format!("unknown OTel profile mode `{other}` (expected companion or primary)")),
        }
    }
}

/// A vendor's OTel LogRecord mapping (AEP-0002 Annex A, OTel channels).
pub trait OtelProfile: Send + Sync {
    /// The agent identity (`codex`, `vscode`, `claude-code`); also the `x.<vendor>.otel.*` token.
    fn vendor(&self) -> &'static str;

    /// The vendor event name of a record, normalised (e.g. Claude Code's bare names as is),
    /// or `None` when the record names no event.
    fn event_name(&self, rec: &OtelRecord) -> Option<String> {
        record_event_name(rec)
    }

    /// Whether a record is this vendor's, from its resource `service.name` and scope name
    /// (profile detection when the config forces none). Claims of two profiles never
    /// overlap: the registry asks them in list order and takes the first.
    fn claims(&self, rec: &OtelRecord) -> bool;

    /// Where this vendor's records carry a model call's figures ([`usage`]).
    fn model_calls(&self) -> &'static [usage::ModelCallFields] {
        &[]
    }

    /// The content-bearing attributes of this vendor's telemetry (spans, span events, log
    /// records, metrics), with the ceiling each needs to leave the machine: what the ceiling
    /// gate over the forwarded OTLP reads ([`content`]).
    fn content(&self) -> &'static content::ContentTable {
        &content::ContentTable::EMPTY
    }

    /// The AEP session id this record belongs to.
    fn session_id<'r>(&self, rec: &'r OtelRecord) -> Option<&'r str>;

    /// Maps one record to zero or more drafts (with `session`, `time` and `traceparent` set).
    /// Profiles are stateless: each record maps on its own (the pipeline links causes).
    fn map_record(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode) -> Vec<EventDraft>;

    /// [`OtelProfile::map_record`], appending the drafts to `out` (a batch reuses one vector
    /// instead of allocating one per record).
    fn map_record_into(&self, rec: &OtelRecord, cx: &MapContext, mode: Mode, out: &mut Vec<EventDraft>) {
        out.extend(self.map_record(rec, cx, mode));
    }
}

/// Chooses the profile for each record: a forced one (one vendor per process, the design
/// record's deployment shape) or the first of the candidates that claims the record. The
/// candidates are the vendor registry's ([`crate::vendors::otel_selector`]); this module
/// names no vendor.
#[derive(Clone, Copy)]
pub struct ProfileSelector {
    /// When set, every record maps through this profile.
    pub forced: Option<&'static dyn OtelProfile>,
    /// The profiles asked, in order, when none is forced.
    pub candidates: &'static [&'static dyn OtelProfile],
}

impl ProfileSelector {
    /// The profile for `rec`, or `None` when no profile is forced and none claims it.
    pub fn select(&self, rec: &OtelRecord) -> Option<&'static dyn OtelProfile> {
        self.forced.or_else(|| self.candidates.iter().copied().find(|p| p.claims(rec)))
    }
}

impl std::fmt::Debug for ProfileSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileSelector")
            .field("forced", &self.forced.map(|p| p.vendor()))
            .field("candidates", &self.candidates.iter().map(|p| p.vendor()).collect::<Vec<_>>())
            .finish()
    }
}

/// Whether a `service.name` starts with `prefix`, ASCII case-insensitively (no lowercased
/// copy: detection runs once per run of records).
pub fn service_starts_with(rec: &OtelRecord, prefix: &str) -> bool {
    let service = rec.service_name().unwrap_or("").as_bytes();
    service.len() >= prefix.len() && service[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Whether a `service.name` is one of `names`, ASCII case-insensitively.
pub fn service_is(rec: &OtelRecord, names: &[&str]) -> bool {
    let service = rec.service_name().unwrap_or("").as_bytes();
    names.iter().any(|n| service.eq_ignore_ascii_case(n.as_bytes()))
}

/// A draft with the vendor (agent identity) whose profile produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct MappedDraft {
    /// The agent identity (`codex`, `vscode`, `claude-code`).
    pub vendor: &'static str,
    /// The draft.
    pub draft: EventDraft,
}

/// What [`map_batch`] made of a batch of records.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BatchOutcome {
    /// Drafts in record order.
    pub drafts: Vec<MappedDraft>,
    /// Records no profile claimed (no forced vendor and an unrecognised `service.name`):
    /// the receiver reports them as rejected in `partial_success`.
    pub unmatched: u64,
    /// The `service.name` of the first unmatched record, for the rejection message.
    pub first_unmatched_service: Option<String>,
    /// Drafts left out because their record named no session (and they are not `agent.*`).
    pub sessionless: u64,
    /// The drift of the batch: each record whose event name its profile does not know, with
    /// its vendor and the agent version its resource names (`service.version`).
    pub drift: Vec<OtelDrift>,
    /// The agent version (`service.version`) each profiled resource of the batch names, once
    /// per run of records of one resource.
    pub versions: Vec<(&'static str, String)>,
}

/// One record's drift (see [`crate::drift`]).
#[derive(Debug, Clone, PartialEq)]
pub struct OtelDrift {
    /// The agent identity.
    pub vendor: &'static str,
    /// The agent version its resource names.
    pub version: Option<String>,
    /// What drifted.
    pub drift: crate::drift::Drift,
}

/// The resource and scope of the previous record and the profile selected for them.
type LastSelected<'r> = (&'r Arc<Map<String, Value>>, &'r Arc<str>, Option<&'static dyn OtelProfile>);

/// Maps a batch of records: selects each record's profile and collects the drafts.
pub fn map_batch(records: &[OtelRecord], selector: &ProfileSelector, cx: &MapContext, mode: Mode) -> BatchOutcome {
    let mut out = BatchOutcome { drafts: Vec::with_capacity(records.len()), ..Default::default() };
    let mut scratch = Vec::new();
    // Records of one resource and scope share the same allocations (the receivers share
    // them per `ResourceLogs` / scope): the profile is selected once per run of them.
    let mut last: Option<LastSelected<'_>> = None;
    for rec in records {
        let selected = match last {
            Some((res, scope, p)) if Arc::ptr_eq(res, &rec.resource) && Arc::ptr_eq(scope, &rec.scope_name) => p,
            _ => {
                let p = selector.select(rec);
                last = Some((&rec.resource, &rec.scope_name, p));
                if let (Some(p), Some(v)) = (p, rec.resource_str("service.version")) {
                    let seen = out.versions.last().is_some_and(|(pv, lv)| *pv == p.vendor() && lv == v);
                    if !seen {
                        out.versions.push((p.vendor(), v.to_owned()));
                    }
                }
                p
            }
        };
        let Some(profile) = selected else {
            out.unmatched += 1;
            if out.first_unmatched_service.is_none() {
                out.first_unmatched_service = Some(rec.service_name().unwrap_or("").to_owned());
            }
            continue;
        };
        let vendor = profile.vendor();
        scratch.clear();
        profile.map_record_into(rec, cx, mode, &mut scratch);
        for draft in scratch.drain(..) {
            // AEP-0001 §5.1: every event but `agent.*` belongs to a session. A record that
            // names none (Codex's own "flushing OTEL metrics" line, no attributes at all)
            // carries no session activity: it is left out, not emitted sessionless.
            if draft.session.as_deref().is_none_or(str::is_empty) && !aep_schemas::event::is_agent_scoped(&draft.r#type)
            {
                out.sessionless += 1;
                continue;
            }
            if let Some(drift) = crate::drift::otel_drift(vendor, &draft) {
                let version = rec.resource_str("service.version").map(str::to_owned);
                out.drift.push(OtelDrift { vendor, version, drift });
            }
            out.drafts.push(MappedDraft { vendor, draft });
        }
    }
    out
}

/// The event name of a record: the `LogRecord.event_name` field when it is a plausible name,
/// else the `event.name` attribute. Codex writes a source location such as
/// `event otel/src/events/session_telemetry.rs:737` into the field, which is not a name.
pub fn record_event_name(rec: &OtelRecord) -> Option<String> {
    record_event_name_ref(rec).map(str::to_owned)
}

/// [`record_event_name`], borrowed.
pub fn record_event_name_ref(rec: &OtelRecord) -> Option<&str> {
    if let Some(n) = rec.event_name.as_deref()
        && is_plausible_name(n)
    {
        return Some(n);
    }
    rec.attr_str("event.name").filter(|n| !n.is_empty())
}

fn is_plausible_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= 256 && n.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// How a listed attribute is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Forwarded verbatim when the ceiling allows its level.
    Plain,
    /// Free text: passes the §9.4 pipeline at `redacted`; verbatim at `full`; vendor
    /// redaction markers are never forwarded.
    Text,
}

/// One forwarded attribute: key, capture level, kind.
pub(crate) type Field = (&'static str, Capture, Kind);

/// A metadata-grade field.
pub(crate) const fn meta(key: &'static str) -> Field {
    (key, Capture::Metadata, Kind::Plain)
}

/// Free text gated at `redacted`.
pub(crate) const fn redacted(key: &'static str) -> Field {
    (key, Capture::Redacted, Kind::Text)
}

/// Content gated at `full` (verbatim).
pub(crate) const fn full(key: &'static str) -> Field {
    (key, Capture::Full, Kind::Plain)
}

/// Vendor markers meaning "content not logged".
fn is_vendor_redaction_marker(s: &str) -> bool {
    matches!(s.trim(), "[REDACTED]" | "<REDACTED>" | "REDACTED" | "[redacted]" | "<redacted>")
}

/// Copies the listed attributes of `rec` that `ceiling` admits into `data` (AEP-0003 §9 rule 1).
pub(crate) fn copy_fields(
    rec: &OtelRecord,
    fields: &[Field],
    ceiling: Capture,
    cx: &MapContext,
    data: &mut Map<String, Value>,
) {
    for &(key, level, kind) in fields {
        if level > ceiling {
            continue;
        }
        let Some(v) = rec.attributes.get_owned(key) else { continue };
        if let Some(v) = gate_owned(v, level, kind, ceiling, cx) {
            data.insert(key.to_owned(), v);
        }
    }
}

/// A value as forwarded at `ceiling` (moved into the result, not copied), or `None` when
/// it must not be forwarded.
fn gate_owned(v: Value, level: Capture, kind: Kind, ceiling: Capture, cx: &MapContext) -> Option<Value> {
    if level > ceiling || v.is_null() {
        return None;
    }
    if let Value::String(s) = &v
        && kind == Kind::Text
        && is_vendor_redaction_marker(s)
    {
        return None;
    }
    // AEP-0003 §9.4: redacted-level text passes the pipeline when the ceiling is `redacted`;
    // at `full` it is verbatim.
    if level == Capture::Redacted && ceiling == Capture::Redacted {
        return Some(aep_schemas::redact::redact_value(&v, &cx.redact));
    }
    Some(v)
}

/// Text gated at `redacted` as a string, or `None` when the ceiling or vendor forbids it.
pub(crate) fn gated_text(v: Option<&Value>, ceiling: Capture, cx: &MapContext) -> Option<String> {
    let v = v?;
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Null => return None,
        other => other.to_string(),
    };
    match gate_owned(Value::String(s), Capture::Redacted, Kind::Text, ceiling, cx)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// Envelope bits every draft of a record carries: session, vendor time, traceparent.
pub(crate) fn stamp(d: &mut EventDraft, rec: &OtelRecord, session: Option<&str>) {
    d.session = session.map(str::to_owned);
    let nanos = if rec.time_unix_nano != 0 { rec.time_unix_nano } else { rec.observed_time_unix_nano };
    d.time = (nanos != 0).then(|| rfc3339_from_unix_nanos(nanos));
    if let (Some(t), Some(s)) = (&rec.trace_id, &rec.span_id) {
        // `00-{trace}-{span}-{flags:02x}`, built without the formatting machinery (per record).
        let mut tp = String::with_capacity(7 + t.len() + s.len());
        tp.push_str("00-");
        tp.push_str(t);
        tp.push('-');
        tp.push_str(s);
        tp.push('-');
        let flags = (rec.flags & 0xff) as u8;
        for nibble in [flags >> 4, flags & 0xf] {
            tp.push(char::from(b"0123456789abcdef"[usize::from(nibble)]));
        }
        d.traceparent = Some(tp);
    }
}

/// `x.<vendor>.otel.<suffix>`, without the formatting machinery (once per record).
fn otel_type(vendor: &str, suffix: &str) -> String {
    let mut ty = String::with_capacity(8 + vendor.len() + suffix.len());
    ty.push_str("x.");
    ty.push_str(vendor);
    ty.push_str(".otel.");
    ty.push_str(suffix);
    ty
}

/// The companion-family draft `x.<vendor>.otel.<suffix>` with the listed fields.
pub(crate) fn companion(
    vendor: &str,
    suffix: &str,
    rec: &OtelRecord,
    fields: &'static [Field],
    common: &'static [Field],
    cx: &MapContext,
) -> EventDraft {
    let ty = otel_type(vendor, suffix);
    let ceiling = cx.ceiling_for(&ty);
    let mut d = EventDraft::new(ty, ceiling);
    if fields.len() + common.len() > MAX_LISTED {
        d.data = Map::with_capacity(fields.len() + common.len());
        copy_fields(rec, fields, ceiling, cx, &mut d.data);
        copy_fields(rec, common, ceiling, cx, &mut d.data);
        return d;
    }
    // Where each listed attribute the ceiling admits sits in the record, looked up once, so
    // the payload map is allocated at its final size (most records carry a few of the
    // listed fields: a map sized for all of them would be mostly empty).
    let (at, present) = listed_positions(&rec.attributes, fields, common, ceiling);
    let listed = |i: usize| nth_listed(fields, common, i);
    let Some(mut data) = layout(fields, common, present) else {
        // A layout that repeats a key: inserted one by one (a later value wins in place).
        d.data = Map::with_capacity(present.count_ones() as usize);
        for i in bits(present) {
            let (key, level, kind) = listed(i);
            if let Some(v) = gate_owned(rec.attributes.owned_at(at[i]), level, kind, ceiling, cx) {
                d.data.insert(key.to_owned(), v);
            }
        }
        return d;
    };
    // The layout's slots are the present fields in list order: fill them in place.
    let mut gated_out = 0u32;
    for ((n, slot), i) in data.values_mut().enumerate().zip(bits(present)) {
        let (_, level, kind) = listed(i);
        match gate_owned(rec.attributes.owned_at(at[i]), level, kind, ceiling, cx) {
            Some(v) => *slot = v,
            None => gated_out |= 1 << n,
        }
    }
    if gated_out != 0 {
        let mut n = 0;
        data.retain(|_, _| {
            n += 1;
            gated_out & (1 << (n - 1)) == 0
        });
    }
    d.data = data;
    d
}

/// Field `i` of `fields` then `common`.
fn nth_listed(fields: &[Field], common: &[Field], i: usize) -> Field {
    if i < fields.len() { fields[i] } else { common[i - fields.len()] }
}

/// The set bits of `mask`, lowest first.
fn bits(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        let i = mask.trailing_zeros() as usize;
        mask &= mask.wrapping_sub(1);
        (i < 32).then_some(i)
    })
}

/// Key layouts of companion payloads already built on this thread, by field lists (their
/// static addresses) and which of their fields a record carries.
type Layouts = HashMap<LayoutKey, Option<Map<String, Value>>, foldhash::fast::FixedState>;

/// The two field lists (address and length) and the bits of the present fields.
type LayoutKey = ((usize, usize), (usize, usize), u32);

/// Most layouts kept per thread (a few dozen occur per vendor); past it the memo restarts.
const MAX_LAYOUTS: usize = 4096;

thread_local! {
    static LAYOUTS: RefCell<Layouts> = RefCell::new(Layouts::default());
}

/// The payload map of a companion event whose present listed fields are `present` (bits
/// over `fields` then `common`): those keys in list order, every value `Null`; `None` when
/// two of them are the same key. A memo per thread of maps built once: serde_json's
/// order-keeping map hashes each inserted key with SipHash, and a clone copies the stored
/// hashes instead (Claude Code's companions carry a dozen keys or more per record).
fn layout(fields: &'static [Field], common: &'static [Field], present: u32) -> Option<Map<String, Value>> {
    let key = ((fields.as_ptr() as usize, fields.len()), (common.as_ptr() as usize, common.len()), present);
    LAYOUTS.with(|memo| {
        let mut memo = memo.borrow_mut();
        if let Some(m) = memo.get(&key) {
            return m.clone();
        }
        if memo.len() >= MAX_LAYOUTS {
            memo.clear();
        }
        let mut m = Map::with_capacity(present.count_ones() as usize);
        for i in bits(present) {
            m.insert(nth_listed(fields, common, i).0.to_owned(), Value::Null);
        }
        let m = (m.len() == present.count_ones() as usize).then_some(m);
        memo.insert(key, m.clone());
        m
    })
}

/// Most attributes one companion event lists (its own and the common ones); longer lists
/// take the general path.
const MAX_LISTED: usize = 32;

/// Where the listed fields sit in a record's attributes: entry `at[i]` holds listed field `i`
/// when bit `i` of the mask is set.
type Found = ([usize; MAX_LISTED], u32);

/// Finds the listed fields that `ceiling` admits in `attrs`, one scan per field.
fn find_listed(attrs: &Attributes, fields: &[Field], common: &[Field], ceiling: Capture) -> Found {
    let (mut at, mut present) = ([usize::MAX; MAX_LISTED], 0u32);
    for (i, &(key, level, _)) in fields.iter().chain(common).enumerate() {
        if level <= ceiling
            && let Some(p) = attrs.position(key)
        {
            at[i] = p;
            present |= 1 << i;
        }
    }
    (at, present)
}

/// The positions found for one key sequence, with the keys themselves (held, so their
/// addresses cannot be reused by other strings while the entry lives).
struct Positions {
    keys: Vec<Arc<str>>,
    found: Found,
}

/// Field lists (address and length of each), the ceiling and the key fingerprint.
type PositionsKey = ((usize, usize), (usize, usize), Capture, u64);

/// Most key sequences remembered per thread (a few dozen occur per vendor); past it the memo
/// restarts.
const MAX_POSITIONS: usize = 512;

/// Most keys, and largest total of key bytes, a remembered sequence holds: with
/// [`MAX_POSITIONS`] entries a thread keeps at most 3 MiB alive (keys and their lists),
/// whatever it is sent. Agents' records carry a few dozen short keys.
const MAX_MEMO_KEYS: usize = 128;
const MAX_MEMO_KEY_BYTES: usize = 4096;

thread_local! {
    static POSITIONS: RefCell<HashMap<PositionsKey, Positions, foldhash::fast::FixedState>> =
        RefCell::new(HashMap::default());
}

/// [`find_listed`], remembered per key sequence: the records of one kind from one exporter
/// carry the same keys in the same order (the same allocations, shared by the receiver), so
/// after the first, finding the listed fields costs a hash of the key addresses and a
/// comparison of them instead of a string scan per listed field.
fn listed_positions(attrs: &Attributes, fields: &'static [Field], common: &'static [Field], ceiling: Capture) -> Found {
    let Some(fingerprint) = attrs.key_fingerprint() else {
        return find_listed(attrs, fields, common, ceiling);
    };
    let key =
        ((fields.as_ptr() as usize, fields.len()), (common.as_ptr() as usize, common.len()), ceiling, fingerprint);
    POSITIONS.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return find_listed(attrs, fields, common, ceiling);
        };
        if let Some(p) = memo.get(&key)
            && attrs.same_keys(&p.keys)
        {
            return p.found;
        }
        let found = find_listed(attrs, fields, common, ceiling);
        if memo.len() >= MAX_POSITIONS {
            memo.clear();
        }
        let keys = attrs.entries.iter().map(|(k, _)| Arc::clone(k)).collect();
        memo.insert(key, Positions { keys, found });
        found
    })
}

/// The `x.<vendor>.otel.unknown` draft: only the event name rides along (design record, non-goals).
pub(crate) fn unknown(vendor: &str, name: Option<&str>, cx: &MapContext) -> EventDraft {
    let ty = otel_type(vendor, "unknown");
    let mut d = EventDraft::new(ty.clone(), cx.ceiling_for(&ty));
    if let Some(n) = name {
        let n: String = n.chars().take(256).collect();
        d.data.insert("event.name".into(), Value::String(n));
    }
    d
}

/// A boolean attribute that vendors send as `true`, `"true"`, `"True"` or `1`.
pub(crate) fn as_bool(v: Option<&Value>) -> Option<bool> {
    match v? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Some(true),
            "false" | "0" | "no" => Some(false),
            _ => None,
        },
        Value::Number(n) => n.as_i64().map(|i| i != 0),
        _ => None,
    }
}

/// A non-negative integer attribute sent as a number or a decimal string (`"412"`).
pub(crate) fn as_u64(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.is_finite()).map(|f| f as u64)),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    }
}

/// A non-empty string attribute.
pub(crate) fn non_empty(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// `{"name": tool, "call_id"?: id}`, the core `tool` object (metadata-grade).
pub(crate) fn tool_object(name: &str, call_id: Option<&str>) -> Value {
    let mut t = Map::new();
    t.insert("name".into(), Value::String(name.to_owned()));
    if let Some(id) = call_id {
        t.insert("call_id".into(), Value::String(id.to_owned()));
    }
    Value::Object(t)
}

/// Formats Unix nanoseconds as RFC 3339 UTC with millisecond precision.
pub fn rfc3339_from_unix_nanos(nanos: u64) -> String {
    aep_schemas::time::format_rfc3339_ms(nanos / 1_000_000)
}

/// Which attributes of a tool-result record carry the tool outcome.
pub(crate) struct ToolResultKeys {
    /// The tool name.
    pub name: &'static str,
    /// The call id.
    pub call_id: &'static str,
    /// The error class (a low-cardinality token, structural at metadata).
    pub error_type: &'static str,
    /// The error message (redacted-gated).
    pub error_message: &'static str,
}

/// A tool-result record -> `tool.completed` / `tool.failed` (error class structural, its
/// message only at `redacted`+ through §9.4). `None` without a tool name or success flag.
pub(crate) fn tool_outcome(rec: &OtelRecord, keys: &ToolResultKeys, cx: &MapContext) -> Option<EventDraft> {
    let tool = non_empty(rec.attributes.get(keys.name))?;
    let ok = as_bool(rec.attributes.get("success"))?;
    let ty = if ok { "tool.completed" } else { "tool.failed" };
    let ceiling = cx.ceiling_for(ty);
    let mut d = EventDraft::new(ty, ceiling);
    d.data.insert("tool".into(), tool_object(tool, non_empty(rec.attributes.get(keys.call_id))));
    d.subject = Some(tool.to_owned());
    if !ok {
        let mut err = serde_json::Map::new();
        let class = non_empty(rec.attributes.get(keys.error_type)).unwrap_or("tool_error");
        err.insert("type".into(), Value::String(class.to_owned()));
        if let Some(msg) = gated_text(rec.attributes.get(keys.error_message), ceiling, cx) {
            err.insert("message".into(), Value::String(msg));
        }
        d.data.insert("error".into(), Value::Object(err));
    }
    if let Some(ms) = as_u64(rec.attributes.get("duration_ms")) {
        d.data.insert("duration_ms".into(), ms.into());
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_unix_nanos() {
        assert_eq!(rfc3339_from_unix_nanos(0), "1970-01-01T00:00:00.000Z");
        // 2026-11-30T04:04:11.385Z (a Codex observed time from the captures)
        assert_eq!(rfc3339_from_unix_nanos(1_796_011_451_385_634_826), "2026-11-30T04:04:11.385Z");
        assert_eq!(rfc3339_from_unix_nanos(951_782_400_000_000_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339_from_unix_nanos(u64::MAX), "2554-07-21T23:34:33.709Z");
        assert_eq!(rfc3339_from_unix_nanos(1_234_567_890_123_456_789), "2009-02-13T23:31:30.123Z");
    }

    /// Listed fields for the layout test: two lists, a key repeated across them, every
    /// level and both kinds.
    static OWN: &[Field] = &[
        ("model", Capture::Metadata, Kind::Plain),
        ("prompt", Capture::Full, Kind::Text),
        ("tokens", Capture::Metadata, Kind::Plain),
        ("error", Capture::Redacted, Kind::Text),
    ];
    static COMMON: &[Field] =
        &[("session.id", Capture::Metadata, Kind::Plain), ("user.email", Capture::Redacted, Kind::Text)];
    static REPEATS: &[Field] = &[("tokens", Capture::Metadata, Kind::Plain), ("user.email", Capture::Full, Kind::Text)];

    /// What `companion` built before layouts: each admitted field inserted in list order.
    fn inserted_one_by_one(
        rec: &OtelRecord,
        lists: [&[Field]; 2],
        cx: &MapContext,
        ceiling: Capture,
    ) -> Vec<(String, Value)> {
        let mut m = Map::new();
        for &(key, level, kind) in lists.iter().flat_map(|l| l.iter()) {
            if level <= ceiling
                && let Some(v) = rec.attributes.get_owned(key)
                && let Some(v) = gate_owned(v, level, kind, ceiling, cx)
            {
                m.insert(key.to_owned(), v);
            }
        }
        m.into_iter().collect()
    }

    #[test]
    fn payload_layouts_give_the_one_by_one_maps_in_order() {
        // Each attribute absent, present, null, or a vendor redaction marker.
        let values = [None, Some(json!("v")), Some(Value::Null), Some(json!("[REDACTED]")), Some(json!(7))];
        let keys = ["model", "prompt", "tokens", "error", "session.id", "user.email"];
        let mut checked = 0;
        for ceiling in [Capture::Metadata, Capture::Redacted, Capture::Full] {
            let cx = MapContext { capture: ceiling, attention_capture: ceiling, ..MapContext::default() };
            for combo in 0..values.len().pow(keys.len() as u32) {
                let mut rec = OtelRecord::default();
                let mut c = combo;
                // Pushed in reverse list order: where a record carries a key does not matter.
                for key in keys.iter().rev() {
                    if let Some(v) = &values[c % values.len()] {
                        rec.attributes.push(*key, v.clone());
                    }
                    c /= values.len();
                }
                for lists in [[OWN, COMMON], [OWN, REPEATS]] {
                    let d = companion("t", "s", &rec, lists[0], lists[1], &cx);
                    let got: Vec<(String, Value)> = d.data.into_iter().collect();
                    assert_eq!(got, inserted_one_by_one(&rec, lists, &cx, ceiling), "{ceiling:?} {combo}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 3 * 5usize.pow(6) * 2);
    }

    /// The positions of the listed fields are remembered per sequence of key allocations:
    /// what is remembered is what a scan finds, a record with the same allocations is
    /// answered from the memo, and equal strings in other allocations are another sequence.
    #[test]
    fn listed_positions_are_remembered_per_key_allocations() {
        let keys: Vec<Arc<str>> =
            ["tokens", "model", "extra", "session.id", "model", "user.email"].into_iter().map(Arc::from).collect();
        let record = |order: &[usize], v: i64| {
            let mut rec = OtelRecord::default();
            for &i in order {
                rec.attributes.push(Arc::clone(&keys[i]), json!(v));
            }
            rec
        };
        let orders: [&[usize]; 4] = [&[0, 1, 2, 3, 4, 5], &[5, 3, 2, 1, 0], &[1, 3], &[]];
        let ceilings = [Capture::Metadata, Capture::Redacted, Capture::Full];
        for round in 0..3 {
            for order in orders {
                let rec = record(order, round);
                for ceiling in ceilings {
                    let scanned = find_listed(&rec.attributes, OWN, COMMON, ceiling);
                    assert_eq!(listed_positions(&rec.attributes, OWN, COMMON, ceiling), scanned, "{order:?}");
                }
            }
        }
        assert_eq!(POSITIONS.with(|m| m.borrow().len()), orders.len() * ceilings.len());
        // Mark every remembered answer: a record of the same allocations gets the mark back.
        POSITIONS.with(|m| m.borrow_mut().values_mut().for_each(|p| p.found.1 |= 1 << 31));
        let again = record(orders[0], 9);
        assert_eq!(
            listed_positions(&again.attributes, OWN, COMMON, Capture::Full).1 >> 31,
            1,
            "answered from the memo"
        );
        let mut fresh = OtelRecord::default();
        for &i in orders[0] {
            fresh.attributes.push(&*keys[i], json!(9));
        }
        assert!(!fresh.attributes.same_keys(&keys) && again.attributes.same_keys(&keys));
        let found = listed_positions(&fresh.attributes, OWN, COMMON, Capture::Full);
        assert_eq!(found, find_listed(&fresh.attributes, OWN, COMMON, Capture::Full), "scanned, not the mark");
        // Keys past the byte bound are never remembered.
        let mut long = OtelRecord::default();
        long.attributes.push("k".repeat(MAX_MEMO_KEY_BYTES + 1), json!(1));
        assert_eq!(long.attributes.key_fingerprint(), None);
        let mut many = OtelRecord::default();
        (0..=MAX_MEMO_KEYS).for_each(|_| many.attributes.push(Arc::clone(&keys[0]), json!(1)));
        assert_eq!(many.attributes.key_fingerprint(), None);
        many.attributes.entries.pop();
        assert!(many.attributes.key_fingerprint().is_some());
    }

    #[test]
    fn stamps_time_and_traceparent() {
        let rec = OtelRecord {
            observed_time_unix_nano: 1_796_011_451_385_634_826,
            trace_id: Some("f265d907520a2f7507b8e0326c8769db".into()),
            span_id: Some("00f067aa0ba902b7".into()),
            flags: 0x1ab,
            ..Default::default()
        };
        let mut d = EventDraft::new("x.codex.otel.turn_ttft", Capture::Metadata);
        stamp(&mut d, &rec, Some("s1"));
        assert_eq!(d.traceparent.as_deref(), Some("00-f265d907520a2f7507b8e0326c8769db-00f067aa0ba902b7-ab"));
        assert_eq!(d.time.as_deref(), Some("2026-11-30T04:04:11.385Z"));
        assert_eq!(d.session.as_deref(), Some("s1"));
    }

    /// Codex's own "flushing OTEL metrics" log line, as the real CLI exports it (recorded in
    /// captures/codex/c01_exec_json, request 0007): no attributes, so no session.
    #[test]
    fn records_without_a_session_emit_nothing() {
        let resource = Arc::new(Map::from_iter([("service.name".to_owned(), json!("codex_exec"))]));
        let flush = OtelRecord {
            resource: resource.clone(),
            scope_name: "codex_otel.log_only".into(),
            event_name: Some("event otel/src/metrics/client.rs:330".into()),
            body: json!("flushing OTEL metrics").into(),
            observed_time_unix_nano: 1_796_011_454_376_911_375,
            severity_number: 5,
            severity_text: "DEBUG".into(),
            ..Default::default()
        };
        let mut prompt = flush.clone();
        prompt.event_name = Some("event otel/src/events/session_telemetry.rs:737".into());
        prompt.attributes.insert("event.name", json!("codex.user_prompt"));
        prompt.attributes.insert("conversation.id", json!("019a-conv"));
        for mode in [Mode::Companion, Mode::Primary] {
            let out = map_batch(
                &[flush.clone(), prompt.clone()],
                &crate::vendors::otel_selector(None),
                &MapContext::default(),
                mode,
            );
            assert_eq!(out.sessionless, 1, "{mode:?}");
            assert_eq!(out.unmatched, 0);
            assert!(mode == Mode::Primary || !out.drafts.is_empty(), "the prompt is a companion event");
            assert!(out.drafts.iter().all(|d| d.draft.session.as_deref() == Some("019a-conv")), "{mode:?}: {out:?}");
        }
    }

    #[test]
    fn event_name_skips_source_locations() {
        let mut rec = OtelRecord {
            event_name: Some("event otel/src/events/session_telemetry.rs:737".into()),
            ..Default::default()
        };
        rec.attributes.insert("event.name", json!("codex.tool_result"));
        assert_eq!(record_event_name(&rec).as_deref(), Some("codex.tool_result"));
        rec.event_name = Some("codex.user_prompt".into());
        assert_eq!(record_event_name(&rec).as_deref(), Some("codex.user_prompt"));
        rec.event_name = None;
        rec.attributes.clear();
        assert_eq!(record_event_name(&rec), None);
    }

    #[test]
    fn maps_a_mixed_batch() {
        let rec = |svc: &str, name: &str, sess: &str| OtelRecord {
            resource: Arc::new(Map::from_iter([("service.name".to_owned(), json!(svc))])),
            attributes: Attributes::from_iter([
                ("event.name".to_owned(), json!(name)),
                ("conversation.id".to_owned(), json!(sess)),
                ("session.id".to_owned(), json!(sess)),
            ]),
            ..Default::default()
        };
        let batch = [
            rec("codex_exec", "codex.turn_ttft", "c1"),
            rec("my-agent", "my_agent.api_request", "g1"),
            rec("claude-code", "compaction", "s1"),
        ];
        let out = map_batch(&batch, &crate::vendors::otel_selector(None), &MapContext::default(), Mode::Companion);
        let got: Vec<_> = out.drafts.iter().map(|m| (m.vendor, m.draft.r#type.as_str())).collect();
        assert_eq!(got, [("codex", "x.codex.otel.turn_ttft"), ("claude-code", "x.claude-code.otel.compaction")]);
        assert_eq!(out.unmatched, 1);
        assert_eq!(out.first_unmatched_service.as_deref(), Some("my-agent"));
    }

    #[test]
    fn gates_text_by_ceiling_and_vendor_marker() {
        let cx = MapContext::default();
        assert_eq!(gated_text(Some(&json!("hello")), Capture::Metadata, &cx), None);
        assert_eq!(gated_text(Some(&json!("[REDACTED]")), Capture::Full, &cx), None);
        assert_eq!(gated_text(Some(&json!("hello")), Capture::Full, &cx).as_deref(), Some("hello"));
        let red = gated_text(Some(&json!("mail me at a@b.example")), Capture::Redacted, &cx).unwrap();
        assert!(!red.contains("a@b.example"), "{red}");
    }

    #[test]
    fn parses_lenient_scalars() {
        assert_eq!(as_bool(Some(&json!("True"))), Some(true));
        assert_eq!(as_bool(Some(&json!(false))), Some(false));
        assert_eq!(as_bool(Some(&json!("maybe"))), None);
        assert_eq!(as_u64(Some(&json!("412"))), Some(412));
        assert_eq!(as_u64(Some(&json!(63))), Some(63));
        assert_eq!(as_u64(Some(&json!("-1"))), None);
    }
}
