//! The generic fallback adapter: every hook maps to `x.{vendor}.session.{snake_case(hook)}`
//! (AEP-0001 §6 vendor namespace, AEP-0002 Annex A fallback rule). Used for custom
//! adapter manifests and as the shared fallback of the built-in adapters.

use serde_json::Value;

use crate::{AdapterError, EventDraft, HookAdapter, HookCall, MapContext, SessionState, snake_case};

/// A fallback-only adapter for a vendor the bridge has no built-in mapping for.
#[derive(Debug, Clone)]
pub struct GenericAdapter {
    /// The vendor token (`[a-z0-9-]+`).
    pub vendor: &'static str,
    /// Payload field naming the hook, e.g. `hook_event_name`.
    pub hook_field: &'static str,
    /// Payload field carrying the session id, e.g. `session_id`.
    pub session_field: &'static str,
}

impl GenericAdapter {
    /// A generic adapter reading `hook_event_name` and `session_id`.
    pub fn new(vendor: &'static str) -> Self {
        Self { vendor, hook_field: "hook_event_name", session_field: "session_id" }
    }
}

/// The fallback draft for an unknown hook of `vendor`: `x.{vendor}.session.{snake_case(hook)}`
/// with an empty payload (vendor fields carry content of unknown sensitivity, so nothing
/// rides along at any ceiling).
pub fn fallback_draft(vendor: &str, hook: &str, cx: &MapContext) -> EventDraft {
    let ty = format!("x.{vendor}.session.{}", snake_case(hook));
    let capture = cx.ceiling_for(&ty).min(cx.capture);
    EventDraft::new(ty, capture)
}

/// Reads a string field of an object payload.
pub fn str_field<'a>(payload: &'a Value, field: &str) -> Option<&'a str> {
    payload.get(field).and_then(Value::as_str)
}

impl HookAdapter for GenericAdapter {
    fn vendor(&self) -> &'static str {
        self.vendor
    }

    fn hook_name(&self, call: &HookCall<'_>) -> Result<String, AdapterError> {
        if let Some(e) = call.event {
            return Ok(e.to_owned());
        }
        str_field(call.payload, self.hook_field)
            .map(str::to_owned)
            .ok_or(AdapterError::NoHookName { field: self.hook_field })
    }

    fn session_id(&self, call: &HookCall<'_>) -> Option<String> {
        str_field(call.payload, self.session_field).map(str::to_owned)
    }

    fn map(
        &self,
        call: &HookCall<'_>,
        _state: &mut SessionState,
        cx: &MapContext,
    ) -> Result<Vec<EventDraft>, AdapterError> {
        if !call.payload.is_object() {
            return Err(AdapterError::NotAnObject);
        }
        let hook = self.hook_name(call)?;
        let mut d = fallback_draft(self.vendor, &hook, cx);
        d.session = self.session_id(call);
        Ok(vec![d])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_every_hook_to_the_vendor_namespace() {
        let a = GenericAdapter::new("acme");
        let p = json!({"hook_event_name": "SomeFutureHook", "session_id": "s1", "secret": "x"});
        let out = a
            .map(&HookCall { event: None, payload: &p }, &mut SessionState::default(), &MapContext::default())
            .unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].r#type, "x.acme.session.some_future_hook");
        assert_eq!(out[0].session.as_deref(), Some("s1"));
        assert!(out[0].data.is_empty());
        let bad = json!([1]);
        assert_eq!(
            a.map(&HookCall { event: None, payload: &bad }, &mut SessionState::default(), &MapContext::default()),
            Err(AdapterError::NotAnObject)
        );
    }
}
