//! A direct protobuf reader for `ExportLogsServiceRequest`: the wire bytes become the adapters'
//! [`OtelRecord`]s in one pass, without building (and then dropping) the prost message tree.
//!
//! It reads only the common shape of a logs export. Anything else — a field it does not know,
//! a singular message field sent twice (prost would merge it), a group, an interned string
//! index, nesting deeper than [`MAX_DEPTH`], bad UTF-8, a malformed varint or length, an id of
//! the wrong size — makes it answer `None`, and the caller decodes with prost, whose result
//! (or error) is authoritative. It therefore never accepts a body prost would reject, and
//! whatever it accepts yields the same records as [`into_otel_records`](super::into_otel_records).

use std::sync::Arc;

use aep_adapters::otel::{Attributes, Body, OtelRecord};
use bytes::Bytes;
use serde_json::{Map, Value};

/// Deepest `AnyValue` nesting read here; deeper bodies go to prost.
pub const MAX_DEPTH: usize = 32;

/// The log records of a protobuf `ExportLogsServiceRequest`, or `None` when the body is
/// outside the shape read here (see the module doc) and must be decoded with prost.
///
/// Every value is checked here as prost would check it (structure, UTF-8, nesting), but
/// record attribute values stay deferred: ranges of `body` that become JSON only when a
/// profile reads them ([`Attributes::push_deferred`]).
pub fn log_records(body: Bytes) -> Option<Vec<OtelRecord>> {
    let mut cx = Cx { keys: KeyCache::default(), body: body.clone(), attrs: Vec::new() };
    // First the structure (resources and scopes, each record's bytes), then the records into
    // a vector of their exact number (growing it would move every record read so far).
    let mut pending = Pending::default();
    let mut r = Rd::new(&body);
    while !r.done() {
        match r.key()? {
            (1, LEN) => resource_logs(r.len_delimited()?, &mut pending, &mut cx)?,
            _ => return None,
        }
    }
    let mut out = Vec::with_capacity(pending.records.len());
    for &(rec, scope) in &pending.records {
        let (resource, name, version) = &pending.scopes[scope];
        out.push(log_record(rec, resource, name, version, &mut cx)?);
    }
    Some(out)
}

/// The structure of a request: each record's bytes with the index of the scope (and
/// resource) it was sent under.
#[derive(Default)]
struct Pending<'a> {
    records: Vec<(&'a [u8], usize)>,
    scopes: Vec<Scope>,
}

/// A scope's resource attributes, name and version.
type Scope = (Arc<Map<String, Value>>, Arc<str>, Arc<str>);

/// An attribute as read: its key and the range of its value in the body (`None`: no value).
type ReadAttr = (Arc<str>, Option<(usize, usize)>);

/// What the readers below share over one request.
struct Cx {
    keys: KeyCache,
    /// The whole request body, which deferred values point into.
    body: Bytes,
    /// One record's attributes as read (key, value range), reused from record to record so
    /// each record's list is allocated once at its final size.
    attrs: Vec<ReadAttr>,
}

impl Cx {
    /// Where `part` (a subslice of the body) starts in the body.
    fn offset(&self, part: &[u8]) -> usize {
        part.as_ptr() as usize - self.body.as_ptr() as usize
    }
}

/// The text of wire bytes, `None` when they are not UTF-8 (what prost refuses). SIMD for
/// the long strings agents send (prompts, request texts, tool output: most of the bytes);
/// a short one is checked in place, without the SIMD code's dispatch.
#[inline]
fn utf8(b: &[u8]) -> Option<&str> {
    if b.len() < 64 { std::str::from_utf8(b).ok() } else { simdutf8::basic::from_utf8(b).ok() }
}

/// Builds a deferred attribute value (checked when it was read off the wire).
fn decode_deferred(b: &[u8]) -> Value {
    if let Some(s) = lone_string(b) {
        return utf8(s).map_or(Value::Null, |s| Value::String(s.to_owned()));
    }
    lone_scalar(b).unwrap_or_else(|| any_value::<true>(b, 0).unwrap_or(Value::Null))
}

/// An `AnyValue` that is empty or exactly one `int_value` or `bool_value`: after short
/// strings the shape of nearly every attribute agents send (counts, durations, flags, the
/// unset ones), built without the general walk. `None`: any other shape.
#[inline]
fn lone_scalar(b: &[u8]) -> Option<Value> {
    let Some((&tag, rest)) = b.split_first() else { return Some(Value::Null) };
    let mut r = Rd::new(rest);
    let v = r.varint()?;
    if !r.done() {
        return None;
    }
    match tag {
        0x10 => Some(Value::Bool(v != 0)),
        0x18 => Some(Value::from(v as i64)),
        _ => None,
    }
}

/// The text of a deferred attribute value that is one short string (checked when it was
/// read off the wire), borrowed from the wire bytes.
fn peek_str(b: &[u8]) -> Option<&str> {
    utf8(lone_string(b)?)
}

/// Checks an attribute's `AnyValue` as prost would, without building it (a short ASCII
/// string, nearly every attribute, needs no more than a glance).
fn check_value(v: &[u8]) -> Option<()> {
    match lone_string(v) {
        Some(text) if text.is_ascii() => Some(()),
        _ => any_value::<false>(v, 0).map(drop),
    }
}

/// The bytes of an `AnyValue` that is exactly one short `string_value` (tag, one-byte
/// length, the text): the shape of nearly every attribute, read without the general walk.
#[inline]
fn lone_string(b: &[u8]) -> Option<&[u8]> {
    match b {
        [0x0a, n, text @ ..] if *n < 0x80 && usize::from(*n) == text.len() => Some(text),
        _ => None,
    }
}

/// Attribute keys shared across the records of one request. The records of a batch usually
/// carry the same keys in the same order, so the key at position `i` is compared with the
/// one the previous record had there and, when equal, shared: no allocation and no second
/// UTF-8 check (the bytes equal an already checked string).
///
/// A mixed batch (records of several kinds, whose keys differ from position 1 on) misses
/// that first guess; this thread's [`Interner`] then still finds the key among those seen
/// before (in this request or an earlier one).
#[derive(Default)]
pub(crate) struct KeyCache(Vec<Arc<str>>);

impl KeyCache {
    /// The key at position `i` from wire bytes; `None` when they are not UTF-8.
    pub(crate) fn key(&mut self, i: usize, k: &[u8]) -> Option<Arc<str>> {
        if let Some(prev) = self.0.get(i)
            && prev.as_bytes() == k
        {
            return Some(Arc::clone(prev));
        }
        let key = intern(k)?;
        self.remember(i, &key);
        Some(key)
    }

    /// Any other string of the request that repeats from record to record (scope names,
    /// severity texts, event names), shared.
    fn text(&mut self, b: &[u8]) -> Option<Arc<str>> {
        intern(b)
    }

    /// The key at position `i` from a decoded string (shared through this thread's
    /// [`Interner`] too, like the keys read from protobuf).
    pub(crate) fn owned(&mut self, i: usize, k: String) -> Arc<str> {
        if let Some(prev) = self.0.get(i)
            && **prev == *k
        {
            return Arc::clone(prev);
        }
        let key = intern_str(k);
        self.remember(i, &key);
        key
    }

    fn remember(&mut self, i: usize, key: &Arc<str>) {
        if i < self.0.len() {
            self.0[i] = Arc::clone(key);
        } else if i == self.0.len() {
            self.0.push(Arc::clone(key));
        }
    }
}

/// Strings seen earlier, shared instead of allocated again: a table indexed by a cheap hash
/// of the length and the first and last eight bytes, two-way (a string is looked for in its
/// slot and the slot's neighbour, so two strings that hash alike, such as Qwen Code's
/// `prompt_id` and `response_id`, both stay instead of evicting each other on every record;
/// a hit is confirmed on the bytes).
pub(crate) struct Interner(Vec<Option<Arc<str>>>);

impl Default for Interner {
    fn default() -> Self {
        Self(vec![None; INTERNED])
    }
}

/// Slots of an [`Interner`] (a power of two).
const INTERNED: usize = 1024;

/// Longest string an [`Interner`] keeps (longer ones are allocated each time): with
/// [`INTERNED`] slots, a thread's table holds at most 128 KiB of strings, whatever it is sent.
const MAX_INTERNED: usize = 128;

thread_local! {
    /// The strings this thread interned, kept from request to request (attribute keys, scope
    /// names and event names repeat across the requests of one exporter).
    static INTERNER: std::cell::RefCell<Interner> = std::cell::RefCell::new(Interner::default());
}

/// The string of `b` (`None` when it is not UTF-8), shared with earlier ones when short.
fn intern(b: &[u8]) -> Option<Arc<str>> {
    intern_with(b, || utf8(b).map(Arc::from))
}

/// The string `s` (already text: decoded from JSON or by prost), shared like [`intern`]'s.
fn intern_str(s: String) -> Arc<str> {
    intern_with(s.as_bytes(), || Some(Arc::from(s.as_str()))).unwrap_or_else(|| Arc::from(s))
}

/// The string of `b` from this thread's [`Interner`], else made by `make`: a string past
/// [`MAX_INTERNED`] (or met while the table is borrowed) is made each time.
fn intern_with(b: &[u8], make: impl FnOnce() -> Option<Arc<str>>) -> Option<Arc<str>> {
    if b.len() > MAX_INTERNED {
        return make();
    }
    INTERNER.with(|i| match i.try_borrow_mut() {
        Ok(mut i) => i.get_or(b, make),
        Err(_) => make(),
    })
}

impl Interner {
    /// The string of `b`, shared when seen before; `None` when `b` is not UTF-8 (what
    /// [`intern`] does with this thread's table).
    #[cfg(test)]
    fn get(&mut self, b: &[u8]) -> Option<Arc<str>> {
        self.get_or(b, || utf8(b).map(Arc::from))
    }

    /// The string of `b`, shared when seen before, else made by `make` (and remembered).
    fn get_or(&mut self, b: &[u8], make: impl FnOnce() -> Option<Arc<str>>) -> Option<Arc<str>> {
        let i = slot_of(b);
        for j in [i, i ^ 1] {
            if let Some(s) = &self.0[j]
                && s.as_bytes() == b
            {
                return Some(Arc::clone(s));
            }
        }
        let s = make()?;
        // The new string takes its own slot; what held it moves to the neighbour (an empty
        // one is taken first), so the two latest strings of a slot are kept.
        if self.0[i].is_some() && self.0[i ^ 1].is_none() {
            self.0[i ^ 1] = Some(Arc::clone(&s));
        } else {
            let displaced = self.0[i].replace(Arc::clone(&s));
            if displaced.is_some() {
                self.0[i ^ 1] = displaced;
            }
        }
        Some(s)
    }
}

fn slot_of(b: &[u8]) -> usize {
    let n = b.len();
    let (head, tail) = match (b.first_chunk::<8>(), b.last_chunk::<8>()) {
        (Some(h), Some(t)) => (u64::from_le_bytes(*h), u64::from_le_bytes(*t)),
        _ => (b.iter().fold(0u64, |h, &c| (h << 8) | u64::from(c)), 0),
    };
    let h = (head ^ tail.rotate_left(29) ^ n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // The top bits of the product (the best mixed): as many as index the table.
    (h >> (64 - INTERNED.trailing_zeros())) as usize
}

const VARINT: u8 = 0;
const I64: u8 = 1;
const LEN: u8 = 2;
const I32: u8 = 5;

struct Rd<'a> {
    b: &'a [u8],
}

impl<'a> Rd<'a> {
    fn new(b: &'a [u8]) -> Self {
        Self { b }
    }

    fn done(&self) -> bool {
        self.b.is_empty()
    }

    /// A varint as prost reads it: at most 10 bytes, the 10th at most 1.
    #[inline]
    fn varint(&mut self) -> Option<u64> {
        // Keys and most lengths are one byte.
        if let Some((&b, rest)) = self.b.split_first()
            && b < 0x80
        {
            self.b = rest;
            return Some(u64::from(b));
        }
        self.varint_slow()
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for (i, &byte) in self.b.iter().enumerate().take(10) {
            if i == 9 && byte > 1 {
                return None;
            }
            v |= u64::from(byte & 0x7f) << (7 * i);
            if byte < 0x80 {
                self.b = &self.b[i + 1..];
                return Some(v);
            }
        }
        None
    }

    /// Field number and wire type; `None` for a key prost would refuse (or a group).
    #[inline]
    fn key(&mut self) -> Option<(u32, u8)> {
        let k = self.varint()?;
        let k = u32::try_from(k).ok()?;
        let (field, wt) = (k >> 3, (k & 7) as u8);
        (field != 0 && matches!(wt, VARINT | I64 | LEN | I32)).then_some((field, wt))
    }

    #[inline]
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.b.len() {
            return None;
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Some(head)
    }

    #[inline]
    fn len_delimited(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.take(n)
    }

    #[inline]
    fn str(&mut self) -> Option<&'a str> {
        utf8(self.len_delimited()?)
    }

    fn fixed64(&mut self) -> Option<u64> {
        self.take(8)?.try_into().ok().map(u64::from_le_bytes)
    }

    fn fixed32(&mut self) -> Option<u32> {
        self.take(4)?.try_into().ok().map(u32::from_le_bytes)
    }
}

fn resource_logs<'a>(b: &'a [u8], out: &mut Pending<'a>, cx: &mut Cx) -> Option<()> {
    let mut r = Rd::new(b);
    let mut resource: Option<Map<String, Value>> = None;
    // Scope blocks may precede the resource on the wire: keep them until the end.
    let mut scopes: Vec<&[u8]> = Vec::new();
    while !r.done() {
        match r.key()? {
            (1, LEN) if resource.is_none() => resource = Some(resource_attrs(r.len_delimited()?)?),
            (2, LEN) => scopes.push(r.len_delimited()?),
            (3, LEN) => {
                r.str()?;
            }
            _ => return None,
        }
    }
    let resource = Arc::new(resource.unwrap_or_default());
    for s in scopes {
        scope_logs(s, &resource, out, cx)?;
    }
    Some(())
}

fn resource_attrs(b: &[u8]) -> Option<Map<String, Value>> {
    let mut r = Rd::new(b);
    let mut m = Map::new();
    while !r.done() {
        match r.key()? {
            (1, LEN) => {
                let (k, v) = key_value(r.len_delimited()?, 0)?;
                m.insert(k, v);
            }
            (2, VARINT) => {
                r.varint()?;
            }
            _ => return None,
        }
    }
    Some(m)
}

fn scope_logs<'a>(b: &'a [u8], resource: &Arc<Map<String, Value>>, out: &mut Pending<'a>, cx: &mut Cx) -> Option<()> {
    let mut r = Rd::new(b);
    let mut scope: Option<(&str, &str)> = None;
    let index = out.scopes.len();
    while !r.done() {
        match r.key()? {
            (1, LEN) if scope.is_none() => scope = Some(instrumentation_scope(r.len_delimited()?)?),
            (2, LEN) => out.records.push((r.len_delimited()?, index)),
            (3, LEN) => {
                r.str()?;
            }
            _ => return None,
        }
    }
    // The scope may follow its records on the wire.
    let (name, version) = scope.unwrap_or_default();
    out.scopes.push((Arc::clone(resource), cx.keys.text(name.as_bytes())?, cx.keys.text(version.as_bytes())?));
    Some(())
}

fn instrumentation_scope(b: &[u8]) -> Option<(&str, &str)> {
    let mut r = Rd::new(b);
    let (mut name, mut version) = ("", "");
    while !r.done() {
        match r.key()? {
            (1, LEN) => name = r.str()?,
            (2, LEN) => version = r.str()?,
            // Scope attributes are validated, not kept (the neutral record has no slot for them).
            (3, LEN) => {
                let (k, _) = key_value_raw::<false>(r.len_delimited()?, 0)?;
                utf8(k)?;
            }
            (4, VARINT) => {
                r.varint()?;
            }
            _ => return None,
        }
    }
    Some((name, version))
}

fn log_record(
    b: &[u8],
    resource: &Arc<Map<String, Value>>,
    scope_name: &Arc<str>,
    scope_version: &Arc<str>,
    cx: &mut Cx,
) -> Option<OtelRecord> {
    let mut r = Rd::new(b);
    let mut rec = OtelRecord {
        resource: Arc::clone(resource),
        scope_name: Arc::clone(scope_name),
        scope_version: Arc::clone(scope_version),
        ..Default::default()
    };
    cx.attrs.clear();
    let (mut trace_id, mut span_id): (&[u8], &[u8]) = (&[], &[]);
    let mut body_seen = false;
    while !r.done() {
        match r.key()? {
            (1, I64) => rec.time_unix_nano = r.fixed64()?,
            (11, I64) => rec.observed_time_unix_nano = r.fixed64()?,
            (2, VARINT) => rec.severity_number = r.varint()? as i32,
            (3, LEN) => rec.severity_text = cx.keys.text(r.len_delimited()?)?,
            (5, LEN) if !body_seen => {
                // Checked now (prost would refuse what this refuses), built only if read.
                body_seen = true;
                let b = r.len_delimited()?;
                check_value(b)?;
                rec.body = Body::deferred(cx.body.slice_ref(b), decode_deferred);
            }
            (6, LEN) => {
                let (k, v) = key_value_deferred(r.len_delimited()?)?;
                let k = cx.keys.key(cx.attrs.len(), k)?;
                let v = v.map(|v| (cx.offset(v), v.len()));
                cx.attrs.push((k, v));
            }
            (7, VARINT) => {
                r.varint()?;
            }
            (8, I32) => rec.flags = r.fixed32()?,
            (9, LEN) => trace_id = r.len_delimited()?,
            (10, LEN) => span_id = r.len_delimited()?,
            (12, LEN) => {
                let n = r.len_delimited()?;
                rec.event_name = if n.is_empty() { None } else { Some(cx.keys.text(n)?) };
            }
            _ => return None,
        }
    }
    rec.attributes = Attributes::deferred(cx.attrs.len(), cx.body.clone(), decode_deferred, peek_str);
    for (k, v) in cx.attrs.drain(..) {
        match v {
            Some((at, len)) => rec.attributes.push_deferred(k, at, len)?,
            None => rec.attributes.push(k, Value::Null),
        }
    }
    // Wrong-size ids are a 400 (decode::check_ids_logs): prost's path words the error.
    rec.trace_id = hex_id(trace_id, 16)?;
    rec.span_id = hex_id(span_id, 8)?;
    Some(rec)
}

/// `Some(None)` for an absent or all-zero id, `Some(Some(hex))` for a set one, `None` for a
/// wrong length.
fn hex_id(id: &[u8], len: usize) -> Option<Option<String>> {
    if id.is_empty() {
        return Some(None);
    }
    (id.len() == len).then(|| id.iter().any(|b| *b != 0).then(|| hex_lower(id)))
}

/// Lowercase hex, as `hex::encode` (whose char iterator costs more than the table lookup).
pub(crate) fn hex_lower(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = Vec::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(DIGITS[usize::from(b >> 4)]);
        s.push(DIGITS[usize::from(b & 0xf)]);
    }
    // Hex digits are ASCII: the check cannot fail.
    String::from_utf8(s).unwrap_or_default()
}

/// A `KeyValue` with its key as raw bytes (the caller checks the UTF-8); a repeated key
/// field (prost: the last wins, the first still validated) is left to prost.
fn key_value_raw<const BUILD: bool>(b: &[u8], depth: usize) -> Option<(&[u8], Value)> {
    let mut r = Rd::new(b);
    let mut key: Option<&[u8]> = None;
    let mut value: Option<Value> = None;
    while !r.done() {
        match r.key()? {
            (1, LEN) if key.is_none() => key = Some(r.len_delimited()?),
            (2, LEN) if value.is_none() => value = Some(any_value::<BUILD>(r.len_delimited()?, depth)?),
            _ => return None,
        }
    }
    Some((key.unwrap_or_default(), value.unwrap_or(Value::Null)))
}

/// A record attribute's `KeyValue`: the key's raw bytes and the checked (not built) bytes
/// of its `AnyValue`, `None` when it has none.
fn key_value_deferred(b: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    // The usual shape, key then value with one-byte lengths, read without the field loop.
    if let [0x0a, kl, rest @ ..] = b
        && *kl < 0x80
        && let Some((key, [0x12, vl, value @ ..])) = rest.split_at_checked(usize::from(*kl))
        && *vl < 0x80
        && usize::from(*vl) == value.len()
    {
        check_value(value)?;
        return Some((key, Some(value)));
    }
    let mut r = Rd::new(b);
    let mut key: Option<&[u8]> = None;
    let mut value: Option<&[u8]> = None;
    while !r.done() {
        match r.key()? {
            (1, LEN) if key.is_none() => key = Some(r.len_delimited()?),
            (2, LEN) if value.is_none() => {
                let v = r.len_delimited()?;
                check_value(v)?;
                value = Some(v);
            }
            _ => return None,
        }
    }
    Some((key.unwrap_or_default(), value))
}

fn key_value(b: &[u8], depth: usize) -> Option<(String, Value)> {
    let (k, v) = key_value_raw::<true>(b, depth)?;
    Some((utf8(k)?.to_owned(), v))
}

/// `AnyValue` -> JSON, as [`any_value`](super::convert::any_value). With `BUILD` false the
/// value is only checked (everything prost would refuse is refused) and `null` stands in for it.
fn any_value<const BUILD: bool>(b: &[u8], depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let mut r = Rd::new(b);
    let mut out: Option<Value> = None;
    while !r.done() {
        if out.is_some() {
            // A repeated oneof member: prost's merge rules decide.
            return None;
        }
        out = Some(match r.key()? {
            (1, LEN) if BUILD => Value::String(r.str()?.to_owned()),
            (1, LEN) => {
                // Checked only: most values are short ASCII, which needs no full UTF-8 walk.
                let b = r.len_delimited()?;
                if !b.is_ascii() {
                    utf8(b)?;
                }
                Value::Null
            }
            (2, VARINT) => Value::Bool(r.varint()? != 0),
            (3, VARINT) => Value::from(r.varint()? as i64),
            (4, I64) => {
                serde_json::Number::from_f64(f64::from_bits(r.fixed64()?)).map(Value::Number).unwrap_or(Value::Null)
            }
            (5, LEN) => {
                let mut a = Rd::new(r.len_delimited()?);
                let mut items = Vec::new();
                while !a.done() {
                    match a.key()? {
                        (1, LEN) => {
                            let v = any_value::<BUILD>(a.len_delimited()?, depth + 1)?;
                            if BUILD {
                                items.push(v);
                            }
                        }
                        _ => return None,
                    }
                }
                Value::Array(items)
            }
            (6, LEN) => {
                let mut l = Rd::new(r.len_delimited()?);
                let mut m = Map::new();
                while !l.done() {
                    match l.key()? {
                        (1, LEN) => {
                            let (k, v) = key_value_raw::<BUILD>(l.len_delimited()?, depth + 1)?;
                            let k = utf8(k)?;
                            if BUILD {
                                m.insert(k.to_owned(), v);
                            }
                        }
                        _ => return None,
                    }
                }
                Value::Object(m)
            }
            (7, LEN) => {
                let b = r.len_delimited()?;
                if BUILD { Value::String(hex_lower(b)) } else { Value::Null }
            }
            _ => return None,
        });
    }
    Some(out.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::otlp::decode;
    use opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Av;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, InstrumentationScope, KeyValue, KeyValueList};
    use opentelemetry_proto::tonic::logs::v1::{LogRecord, ResourceLogs, ScopeLogs};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use prost::Message as _;

    /// Two strings that hash to the same slot are both kept: interning them in turn gives
    /// the same allocations every time (Qwen Code's `prompt_id` and `response_id`, in every
    /// model response and tool call, used to evict each other and be allocated again).
    #[test]
    fn strings_that_share_a_slot_are_both_kept() {
        assert_eq!(slot_of(b"prompt_id"), slot_of(b"response_id"), "the recorded pair collides");
        let mut interner = Interner::default();
        let (a, b) = (interner.get(b"prompt_id").unwrap(), interner.get(b"response_id").unwrap());
        for _ in 0..3 {
            assert!(Arc::ptr_eq(&a, &interner.get(b"prompt_id").unwrap()));
            assert!(Arc::ptr_eq(&b, &interner.get(b"response_id").unwrap()));
        }
        // A third string of the slot displaces the older of the two; all three read back right.
        let third = (0..100_000)
            .map(|i| format!("k{i}"))
            .find(|k| slot_of(k.as_bytes()) == slot_of(b"prompt_id"))
            .expect("a third string of that slot");
        for k in ["prompt_id", "response_id", third.as_str(), "prompt_id", third.as_str(), "response_id"] {
            assert_eq!(&*interner.get(k.as_bytes()).unwrap(), k);
        }
    }

    /// Keys decoded from OTLP/JSON (or by prost) are shared through the interner too, from
    /// request to request, as the protobuf reader's are; a long one is allocated each time.
    #[test]
    fn decoded_keys_are_shared_across_requests() {
        let (a, b) = (
            KeyCache::default().owned(0, "gen_ai.request.model".into()),
            KeyCache::default().owned(3, "gen_ai.request.model".into()),
        );
        assert!(Arc::ptr_eq(&a, &b));
        assert!(Arc::ptr_eq(&a, &KeyCache::default().key(1, b"gen_ai.request.model").unwrap()));
        let long = "k".repeat(MAX_INTERNED + 1);
        let (c, d) = (KeyCache::default().owned(0, long.clone()), KeyCache::default().owned(0, long.clone()));
        assert!(!Arc::ptr_eq(&c, &d) && *c == *long);
    }

    /// The interner spreads keys over every slot of its table: a hash that indexed only a
    /// quarter of it made keys collide, and each record that alternated between two of them
    /// allocated both again. The attribute keys recorded from Qwen Code (61) mostly get a
    /// slot each.
    #[test]
    fn the_interner_uses_its_whole_table() {
        let slots: std::collections::HashSet<usize> =
            (0..20_000).map(|i| slot_of(format!("gen_ai.attr.{i}").as_bytes())).collect();
        assert!(slots.len() > INTERNED * 9 / 10, "{} of {INTERNED} slots used", slots.len());
        let keys = [
            "action_type",
            "approval_mode",
            "auth_type",
            "cached_content_token_count",
            "content_length",
            "core_tools_enabled",
            "debug_mode",
            "decision",
            "docs_scanned",
            "docs_selected",
            "duration_ms",
            "error",
            "error_message",
            "error_type",
            "event.name",
            "event.timestamp",
            "extension",
            "file_filtering_respect_git_ignore",
            "function_args",
            "function_name",
            "hooks",
            "http.status_code",
            "ide_enabled",
            "input_token_count",
            "interactive_shell_enabled",
            "lines",
            "mcp_server_name",
            "mcp_servers",
            "mcp_servers_count",
            "mcp_tools",
            "mcp_tools_count",
            "metadata",
            "mimetype",
            "model",
            "operation",
            "output_format",
            "output_token_count",
            "prompt",
            "prompt_id",
            "prompt_length",
            "query_length",
            "request_text",
            "response_id",
            "response_text",
            "sandbox_enabled",
            "service.name",
            "service.version",
            "session.id",
            "skills",
            "status",
            "status_code",
            "strategy",
            "subagent_name",
            "subagents",
            "success",
            "thoughts_token_count",
            "tool_name",
            "tool_type",
            "total_token_count",
            "truncate_tool_output_lines",
            "truncate_tool_output_threshold",
        ];
        let used: std::collections::HashSet<usize> = keys.iter().map(|k| slot_of(k.as_bytes())).collect();
        assert!(used.len() + 3 >= keys.len(), "{} slots for {} keys", used.len(), keys.len());
    }

    fn kv(k: &str, v: Av) -> KeyValue {
        KeyValue { key: k.into(), value: Some(AnyValue { value: Some(v) }), ..Default::default() }
    }

    fn record(i: u8) -> LogRecord {
        LogRecord {
            time_unix_nano: 0,
            observed_time_unix_nano: 1_796_011_451_385_634_826 + u64::from(i),
            severity_number: 9,
            severity_text: "INFO".into(),
            event_name: "event otel/src/x.rs:1".into(),
            body: Some(AnyValue { value: Some(Av::StringValue("béd ✓".into())) }),
            attributes: vec![
                kv("event.name", Av::StringValue("codex.tool_result".into())),
                kv("i", Av::IntValue(-3)),
                kv("big", Av::IntValue(i64::MAX)),
                kv("d", Av::DoubleValue(1.5)),
                kv("nan", Av::DoubleValue(f64::NAN)),
                kv("t", Av::BoolValue(true)),
                kv("b", Av::BytesValue(vec![0xab, i])),
                kv(
                    "a",
                    Av::ArrayValue(ArrayValue {
                        values: vec![AnyValue { value: Some(Av::BoolValue(false)) }, AnyValue { value: None }],
                    }),
                ),
                kv(
                    "m",
                    Av::KvlistValue(KeyValueList {
                        values: vec![
                            kv("k", Av::IntValue(1)),
                            kv("k", Av::IntValue(2)),
                            kv("z", Av::StringValue("".into())),
                        ],
                    }),
                ),
                KeyValue { key: "none".into(), value: None, ..Default::default() },
                kv("", Av::StringValue("an empty key".into())),
                kv("i", Av::IntValue(4)),
            ],
            dropped_attributes_count: 2,
            flags: 0x101,
            trace_id: if i.is_multiple_of(2) { vec![i + 1; 16] } else { vec![0; 16] },
            span_id: if i.is_multiple_of(3) { Vec::new() } else { vec![i; 8] },
        }
    }

    /// Records whose keys shift position between records (the key cache must not mix them up).
    fn shifted(i: u8) -> LogRecord {
        let mut r = record(i);
        if !i.is_multiple_of(2) {
            r.attributes.insert(0, kv("first", Av::StringValue("x".into())));
        }
        r.attributes.truncate(usize::from(3 + i));
        r
    }

    fn request() -> ExportLogsServiceRequest {
        ExportLogsServiceRequest {
            resource_logs: vec![
                ResourceLogs {
                    resource: Some(Resource {
                        attributes: vec![
                            kv("service.name", Av::StringValue("codex_exec".into())),
                            kv("host.name", Av::StringValue("vm".into())),
                        ],
                        dropped_attributes_count: 1,
                        ..Default::default()
                    }),
                    scope_logs: vec![
                        ScopeLogs {
                            scope: Some(InstrumentationScope {
                                name: "codex_otel.log_only".into(),
                                version: "1".into(),
                                attributes: vec![kv("x", Av::StringValue("y".into()))],
                                dropped_attributes_count: 0,
                            }),
                            log_records: (0..4).map(record).collect(),
                            schema_url: "https://opentelemetry.io/schemas/1.30.0".into(),
                        },
                        ScopeLogs {
                            scope: None,
                            log_records: vec![LogRecord::default(), shifted(1), shifted(2), shifted(3), shifted(4)],
                            ..Default::default()
                        },
                    ],
                    schema_url: "s".into(),
                },
                ResourceLogs { resource: None, scope_logs: vec![ScopeLogs::default()], ..Default::default() },
            ],
        }
    }

    /// The records prost and [`into_otel_records`](crate::otlp::into_otel_records) give.
    fn via_prost(body: &[u8]) -> Result<Vec<OtelRecord>, decode::DecodeError> {
        decode::logs(body, decode::Format::Protobuf).map(crate::otlp::into_otel_records)
    }

    #[test]
    fn hex_is_lowercase_and_complete() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex_lower(&all), hex::encode(&all));
        assert_eq!(hex_lower(&[]), "");
    }

    /// The scalar shortcut builds what the general walk builds, and declines every other
    /// shape (two members, a double, a string, a truncated varint) so the walk decides.
    #[test]
    fn lone_scalars_are_what_the_general_walk_builds() {
        let enc = |v: Option<Av>| AnyValue { value: v }.encode_to_vec();
        let scalars = [
            enc(None),
            enc(Some(Av::IntValue(0))),
            enc(Some(Av::IntValue(3761))),
            enc(Some(Av::IntValue(-1))),
            enc(Some(Av::IntValue(i64::MIN))),
            enc(Some(Av::IntValue(i64::MAX))),
            enc(Some(Av::BoolValue(true))),
            enc(Some(Av::BoolValue(false))),
            vec![0x10, 0x02],
            vec![0x10, 0x80, 0x01],
        ];
        for b in &scalars {
            assert_eq!(lone_scalar(b), any_value::<true>(b, 0), "{b:02x?}");
            assert_eq!(decode_deferred(b), any_value::<true>(b, 0).unwrap(), "{b:02x?}");
        }
        let mut twice = enc(Some(Av::IntValue(1)));
        twice.extend(enc(Some(Av::BoolValue(true))));
        let others = [
            twice,
            enc(Some(Av::DoubleValue(1.5))),
            enc(Some(Av::StringValue("x".into()))),
            enc(Some(Av::BytesValue(vec![1]))),
            vec![0x18, 0x80],
            vec![0x18],
        ];
        for b in &others {
            assert_eq!(lone_scalar(b), None, "{b:02x?}");
        }
    }

    #[test]
    fn same_records_as_prost() {
        let body = request().encode_to_vec();
        let fast = log_records(Bytes::from(body.clone())).expect("the common shape is read directly");
        assert_eq!(fast.len(), 9);
        assert_eq!(Ok(fast), via_prost(&body));
        assert_eq!(log_records(Bytes::new()), Some(Vec::new()));
    }

    #[test]
    fn declines_what_it_does_not_read_and_never_accepts_what_prost_refuses() {
        let good = request().encode_to_vec();
        // Every truncation and every single-byte corruption: when the direct reader answers,
        // it must agree with prost exactly (records, and acceptance).
        let mut cases: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
        for i in 0..good.len() {
            for x in [0x00u8, 0x01, 0x7f, 0x80, 0xff] {
                let mut b = good.clone();
                b[i] ^= x;
                cases.push(b);
            }
        }
        let mut declined = 0;
        for b in &cases {
            match log_records(Bytes::from(b.clone())) {
                Some(fast) => assert_eq!(Ok(fast), via_prost(b), "body {b:02x?}"),
                None => declined += 1,
            }
        }
        assert!(declined > 0 && declined < cases.len(), "{declined} of {}", cases.len());
    }

    #[test]
    fn wrong_id_sizes_and_unusual_fields_go_to_prost() {
        let mut req = request();
        req.resource_logs[0].scope_logs[0].log_records[0].span_id = vec![1; 7];
        let body = req.encode_to_vec();
        assert_eq!(log_records(Bytes::from(body.clone())), None);
        assert!(via_prost(&body).is_err(), "prost's path answers 400");

        let mut req = request();
        req.resource_logs[0].scope_logs[0].log_records[0].attributes[0].key_strindex = 3;
        assert_eq!(log_records(Bytes::from(req.encode_to_vec())), None);

        // Nesting past MAX_DEPTH.
        let mut v = AnyValue { value: Some(Av::IntValue(1)) };
        for _ in 0..=MAX_DEPTH + 1 {
            v = AnyValue { value: Some(Av::ArrayValue(ArrayValue { values: vec![v] })) };
        }
        let mut req = request();
        req.resource_logs[0].scope_logs[0].log_records[0].body = Some(v);
        let body = req.encode_to_vec();
        assert_eq!(log_records(Bytes::from(body.clone())), None);
        assert!(via_prost(&body).is_ok());

        // A repeated singular message (prost merges) and bad UTF-8 in a key.
        let mut body = request().encode_to_vec();
        let extra = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs { resource: Some(Resource::default()), ..Default::default() }],
        }
        .encode_to_vec();
        body.extend_from_slice(&extra);
        assert!(log_records(Bytes::from(body.clone())).is_some(), "a second ResourceLogs is just another entry");
        let bad = ExportLogsServiceRequest {
            resource_logs: vec![ResourceLogs {
                resource: Some(Resource { attributes: vec![kv("k\u{7f}", Av::BoolValue(true))], ..Default::default() }),
                ..Default::default()
            }],
        };
        let mut b = bad.encode_to_vec();
        let at = b.iter().position(|&c| c == 0x7f).unwrap();
        b[at] = 0xff;
        assert_eq!(log_records(Bytes::from(b.clone())), None);
        assert!(via_prost(&b).is_err());
    }
}
