//! The direct Event parser: JSON text straight into an [`Event`], strictly (a repeated key
//! refused at any depth, as [`crate::json::from_str_strict`]), without the intermediate
//! top-level map. A child of `event` so that the writer in `json` never names `Event`.

use super::{EnvelopeError, Event, EventBuilder, MemberKey};
use crate::json::Strict;

/// Parses one Event from JSON text strictly (repeated keys refused at any depth, as
/// [`from_str_strict`](crate::json::from_str_strict)) straight into an [`Event`], without the intermediate top-level map:
/// a core attribute's name is matched where it lies, never allocated or hashed. The outer
/// error is the JSON one (what [`from_str_strict`](crate::json::from_str_strict) refuses, with the same message); the inner
/// one is what [`Event::from_value`] would refuse of the parsed value, the same first error.
pub fn event_from_str_strict(text: &str) -> serde_json::Result<Result<Event, EnvelopeError>> {
    let mut de = serde_json::Deserializer::from_str(text);
    let ev = serde::de::DeserializeSeed::deserialize(EventSeed, &mut de)?;
    de.end()?;
    Ok(ev)
}

/// [`event_from_str_strict`] over bytes (UTF-8 is checked string by string).
pub fn event_from_slice_strict(bytes: &[u8]) -> serde_json::Result<Result<Event, EnvelopeError>> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let ev = serde::de::DeserializeSeed::deserialize(EventSeed, &mut de)?;
    de.end()?;
    Ok(ev)
}

/// The top level of an event: an object read member by member into an [`EventBuilder`];
/// anything else is read strictly and refused as an envelope error.
#[derive(Clone, Copy)]
struct EventSeed;

fn not_an_object() -> EnvelopeError {
    EnvelopeError::new("AEP-0001 §5", "an Event is a JSON object")
}

impl<'de> serde::de::DeserializeSeed<'de> for EventSeed {
    type Value = Result<Event, EnvelopeError>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// A member name, borrowed from the input when it has no escapes.
struct KeySeed;

impl<'de> serde::de::DeserializeSeed<'de> for KeySeed {
    type Value = MemberKey<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> serde::de::Visitor<'de> for KeySeed {
    type Value = MemberKey<'de>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a string key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(MemberKey::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(MemberKey::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(MemberKey::Owned(v))
    }
}

impl<'de> serde::de::Visitor<'de> for EventSeed {
    type Value = Result<Event, EnvelopeError>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(Err(not_an_object()))
    }

    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(Err(not_an_object()))
    }

    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(Err(not_an_object()))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(Err(not_an_object()))
    }

    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(Err(not_an_object()))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Err(not_an_object()))
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Err(not_an_object()))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        // Read strictly all the same: a repeated key inside is a JSON error, as before.
        Strict { reserve: 0 }.visit_seq(seq)?;
        Ok(Err(not_an_object()))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
        let mut b = EventBuilder::default();
        while let Some(key) = access.next_key_seed(KeySeed)? {
            let value = access.next_value_seed(Strict { reserve: 0 })?;
            if let Err(repeated) = b.read(key, value) {
                return Err(serde::de::Error::custom(format!("duplicate object key {:?}", repeated.as_str())));
            }
        }
        Ok(b.finish_read())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the two-step path (strict `Value`, then [`Event::from_value`]) makes of `text`.
    fn two_step(text: &str) -> Result<Result<Event, EnvelopeError>, String> {
        crate::json::from_str_strict(text).map(Event::from_value).map_err(|e| e.to_string())
    }

    fn direct(text: &str) -> Result<Result<Event, EnvelopeError>, String> {
        let s = super::event_from_str_strict(text).map_err(|e| e.to_string());
        let b = super::event_from_slice_strict(text.as_bytes()).map_err(|e| e.to_string());
        assert_eq!(s, b, "str and slice differ on {text:?}");
        s
    }

    #[test]
    fn the_direct_event_parser_refuses_and_accepts_exactly_as_the_two_step_path() {
        let full = r#"{"aep":"0.1","id":"e1","type":"tool.completed","subject":"Bash","time":"2026-11-30T06:00:00Z","source":"aep://h/agent/a/session/s","agent":"a","session":"s","run":"r","step":"st","seq":3,"epoch":1,"cause":"c","traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","severity":"warning","capture":"redacted","x-ext":{"k":[1,2]},"data":{"tool":{"name":"Bash"},"status":"success"},"later":true}"#;
        let ev = direct(full).unwrap().unwrap();
        assert_eq!(ev.extensions.keys().collect::<Vec<_>>(), ["x-ext", "later"]);
        let cases = [
            full,
            r#"{"seq":"x","aep":5}"#,
            r#"{"seq":"x","seq":1}"#,
            r#"{"ext":1,"aep":"0.1","ext":2}"#,
            r#"{"seq":"x","ext":1,"ext":2}"#,
            r#"{"seq":-1,"aep":"0.1","aep":"0.1"}"#,
            r#"{"a\u0065p":"0.1","aep":"0.1"}"#,
            r#"{"e\u0078t":1,"ext":2}"#,
            r#"{"data":{"x":1,"x":2}}"#,
            r#"{"data":[1],"id":"i"}"#,
            r#"{"data":null}"#,
            r#"{"aep":"0.1","id":"i","type":"t.x","time":"t","source":"s"}"#,
            r#"{"aep":"0.1","id":"i","type":"t.x","time":"t","agent":"a"}"#,
            r#"{"aep":"0.1","id":"i","type":"t.x","source":"s","agent":"a"}"#,
            r#"{"severity":"loud"}"#,
            r#"{"capture":"all"}"#,
            r#"{"subject":null}"#,
            r#"{"epoch":1.5}"#,
            r#"[{"a":1,"a":2}]"#,
            "[1]",
            r#""s""#,
            "null",
            "1.5",
            "-2",
            "true",
            "{} x",
            "{",
            r#"{"aep":"0.1","#,
            "",
        ];
        for c in cases {
            assert_eq!(direct(c), two_step(c), "{c}");
        }
        assert!(super::event_from_slice_strict(b"{\"aep\":\"\xff\"}").is_err(), "invalid UTF-8");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]
        /// Objects drawn from core names, extension names and every JSON type, repeats and
        /// all: the direct parser gives the two-step path's answer, error for error.
        #[test]
        fn the_direct_event_parser_agrees_on_any_member_mix(
            members in proptest::collection::vec((0usize..22, 0usize..8), 0..24)
        ) {
            const NAMES: [&str; 22] = ["aep", "id", "type", "subject", "time", "source", "agent", "session",
                "run", "step", "seq", "epoch", "cause", "traceparent", "severity", "capture", "data",
                "ext", "x-b", r"\u0061ep", r"s\u0065q", "z"];
            const VALUES: [&str; 8] = ["\"0.1\"", "3", "-1", "null", "{\"k\":1}", "[true]", "\"info\"", "{\"d\":1,\"d\":2}"];
            let body: Vec<String> =
                members.iter().map(|(k, v)| format!("\"{}\":{}", NAMES[*k], VALUES[*v])).collect();
            let text = format!("{{{}}}", body.join(","));
            proptest::prop_assert_eq!(direct(&text), two_step(&text), "{}", text);
        }
    }
}
