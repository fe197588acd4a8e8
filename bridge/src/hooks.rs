//! The bridge's side of the hook receiver: vendor adapter lookup, per-session mapping
//! state, and admission of the mapped drafts into the pipeline.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aep_adapters::{HookAdapter, HookCall, MapContext, SessionState};
use aep_receivers::hooks::{HookError, HookHandler, HookReply};
use serde_json::Value;

use crate::metrics::Metrics;
use crate::pipeline::Pipeline;

/// Most `(vendor, session)` mapping states kept; beyond it the least recently used is dropped
/// (a dropped state only loses synthesized-run memory, never an event).
const MAX_SESSIONS: usize = 10_000;

/// Maps hook calls and admits the drafts.
pub struct BridgeHooks {
    pipeline: Pipeline,
    adapters: HashMap<&'static str, Box<dyn HookAdapter>>,
    states: Mutex<SessionStates>,
    cx: MapContext,
    token: Option<String>,
    metrics: Arc<Metrics>,
}

#[derive(Default)]
struct SessionStates {
    map: HashMap<(String, String), (SessionState, u64)>,
    tick: u64,
}

impl BridgeHooks {
    /// A handler over these adapters. With `token` set, hook calls must carry it as a bearer token.
    pub fn new(pipeline: Pipeline, adapters: Vec<Box<dyn HookAdapter>>, cx: MapContext, token: Option<String>) -> Self {
        let metrics = pipeline.metrics().clone();
        Self {
            pipeline,
            adapters: adapters.into_iter().map(|a| (a.vendor(), a)).collect(),
            states: Mutex::new(SessionStates::default()),
            cx,
            token,
            metrics,
        }
    }

    /// The vendors this handler serves.
    pub fn vendors(&self) -> Vec<&'static str> {
        let mut v: Vec<_> = self.adapters.keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn map(&self, adapter: &dyn HookAdapter, call: &HookCall<'_>) -> Result<Vec<aep_adapters::EventDraft>, HookError> {
        let session = adapter.session_id(call).unwrap_or_default();
        let key = (adapter.vendor().to_owned(), session);
        let mut states = self.states.lock().map_err(|_| HookError::Unavailable("state lock poisoned".into()))?;
        states.tick += 1;
        let tick = states.tick;
        if !states.map.contains_key(&key) && states.map.len() >= MAX_SESSIONS {
            if let Some(oldest) = states.map.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| k.clone()) {
                states.map.remove(&oldest);
            }
        }
        let (state, last) = states.map.entry(key).or_default();
        *last = tick;
        adapter.map(call, state, &self.cx).map_err(|e| HookError::Unmappable(e.to_string()))
    }
}

impl HookHandler for BridgeHooks {
    fn authorized(&self, token: Option<&str>) -> bool {
        match &self.token {
            None => true,
            Some(want) => token.is_some_and(|t| constant_time_eq(t.as_bytes(), want.as_bytes())),
        }
    }

    async fn handle(&self, vendor: String, event: Option<String>, payload: Value) -> Result<HookReply, HookError> {
        let adapter = self.adapters.get(vendor.as_str()).ok_or_else(|| HookError::UnknownVendor(vendor.clone()))?;
        let call = HookCall { event: event.as_deref(), payload: &payload };
        let hook = adapter.hook_name(&call).map_err(|e| HookError::Unmappable(e.to_string()))?;
        let drafts = self.map(adapter.as_ref(), &call)?;
        self.pipeline
            .submit_drafts("hook", adapter.vendor(), drafts)
            .await
            .map_err(|e| HookError::Unavailable(e.to_string()))?;
        Ok(HookReply::new(adapter.neutral_reply(&hook).as_bytes()))
    }

    fn rejected(&self, vendor: &str, err: &HookError) {
        let vendor = if self.adapters.contains_key(vendor) { vendor } else { "(unknown)" };
        self.metrics.rejected.inc(&[("receiver", "hooks"), ("reason", err.reason()), ("vendor", vendor)]);
        tracing::warn!(vendor, reason = err.reason(), "Hook call refused.");
    }
}

/// Compares secrets without an early exit on the first differing byte.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
