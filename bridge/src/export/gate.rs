//! The capture ceiling on the agents' own telemetry where it leaves: a tee wrapper that
//! hands its tee a copy of each OTLP request gated by [`CaptureGate`] (the pure gate and its
//! rules are in `aep_projections::capture_gate`, the vendors' content tables in their
//! folders). The daemon wraps every tee that forwards what the agents sent: the HTTP tee
//! (`[otlp_in] tee_max_capture`), the forward of their metrics and the hand-over of their
//! spans to the span sink (`[export.otlp] max_capture`). Each ceiling is capped by
//! `[capture] max`: nothing above the bridge's own ceiling leaves, whoever produced it.
//!
//! At `full` the wrapped tee gets the request itself (no copy). Every value removed or
//! redacted is counted in `aep_bridge_capture_gated_total{sink, action}`.

use std::sync::Arc;

use aep_projections::capture_gate::{CaptureGate, Gated};
use aep_receivers::otlp::{ExportLogsServiceRequest, ExportMetricsServiceRequest, ExportTraceServiceRequest};
use aep_schemas::Capture;

use crate::export::tee::OtlpTee;
use crate::metrics::Metrics;

/// A tee that sees only what its ceiling admits.
pub struct GatedTee {
    inner: Arc<dyn OtlpTee>,
    gate: Arc<CaptureGate>,
    sink: &'static str,
    metrics: Arc<Metrics>,
}

impl GatedTee {
    /// `inner` behind `gate`; `sink` labels its counts.
    pub fn new(inner: Arc<dyn OtlpTee>, gate: Arc<CaptureGate>, sink: &'static str, metrics: Arc<Metrics>) -> Self {
        Self { inner, gate, sink, metrics }
    }

    /// `inner` behind a gate at `ceiling`, or `inner` itself at `full`.
    pub fn wrap(
        inner: Arc<dyn OtlpTee>,
        gate: Arc<CaptureGate>,
        sink: &'static str,
        metrics: &Arc<Metrics>,
    ) -> Arc<dyn OtlpTee> {
        if gate.is_open() { inner } else { Arc::new(Self::new(inner, gate, sink, metrics.clone())) }
    }

    fn count(&self, g: Gated) {
        if g.withheld > 0 {
            self.metrics.capture_gated.add(&[("sink", self.sink), ("action", "withheld")], g.withheld);
        }
        if g.redacted > 0 {
            self.metrics.capture_gated.add(&[("sink", self.sink), ("action", "redacted")], g.redacted);
        }
    }
}

impl std::fmt::Debug for GatedTee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatedTee").field("sink", &self.sink).field("ceiling", &self.gate.ceiling()).finish()
    }
}

impl OtlpTee for GatedTee {
    fn logs(&self, req: &ExportLogsServiceRequest) {
        let mut req = req.clone();
        self.count(self.gate.logs(&mut req));
        self.inner.logs(&req);
    }

    fn traces(&self, req: &ExportTraceServiceRequest) {
        let mut req = req.clone();
        self.count(self.gate.traces(&mut req));
        self.inner.traces(&req);
    }

    fn metrics(&self, req: &ExportMetricsServiceRequest) {
        let mut req = req.clone();
        self.count(self.gate.metrics(&mut req));
        self.inner.metrics(&req);
    }

    fn wants_logs(&self) -> bool {
        self.inner.wants_logs()
    }
}

/// The ceiling a forward of the agents' telemetry applies: its own, never above the
/// bridge's (`[capture] max`).
pub fn ceiling(own: Capture, bridge: Capture) -> Capture {
    own.min(bridge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Seen(Mutex<Vec<ExportTraceServiceRequest>>);

    impl OtlpTee for Seen {
        fn logs(&self, _: &ExportLogsServiceRequest) {}
        fn traces(&self, req: &ExportTraceServiceRequest) {
            self.0.lock().unwrap().push(req.clone());
        }
        fn metrics(&self, _: &ExportMetricsServiceRequest) {}
        fn wants_logs(&self) -> bool {
            false
        }
    }

    fn req() -> ExportTraceServiceRequest {
        let kv = |k: &str, v: &str| KeyValue {
            key: k.into(),
            value: Some(AnyValue { value: Some(any_value::Value::StringValue(v.into())) }),
            ..Default::default()
        };
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                scope_spans: vec![ScopeSpans {
                    spans: vec![Span {
                        name: "claude_code.interaction".into(),
                        attributes: vec![kv("user_prompt", "delete the tests"), kv("session.id", "s-1")],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        }
    }

    #[test]
    fn the_wrapped_tee_sees_the_gated_copy_and_the_count_says_so() {
        let seen = Arc::new(Seen::default());
        let metrics = Arc::new(Metrics::default());
        let gate = Arc::new(CaptureGate::new(Capture::Metadata, Default::default()));
        let tee = GatedTee::wrap(seen.clone(), gate, "otlp-tee", &metrics);
        assert!(!tee.wants_logs(), "the inner tee's answer");
        tee.traces(&req());
        let got = seen.0.lock().unwrap().pop().unwrap();
        let attrs = &got.resource_spans[0].scope_spans[0].spans[0].attributes;
        assert!(attrs.iter().all(|kv| kv.key != "user_prompt"));
        assert!(attrs.iter().any(|kv| kv.key == "session.id"));
        assert_eq!(metrics.capture_gated.get(&[("sink", "otlp-tee"), ("action", "withheld")]), 1);
    }

    #[test]
    fn the_readme_lists_every_content_key() {
        let readme = include_str!("../../../README.md");
        let section = readme.split("## What leaves the machine").nth(1).unwrap().split("\n## ").next().unwrap();
        for t in aep_adapters::vendors::content_tables() {
            for a in t.attrs {
                let key = a.key.as_str();
                let written = match a.key {
                    aep_adapters::otel::content::Key::Exact(_) => format!("`{key}`"),
                    aep_adapters::otel::content::Key::Indexed(_) => format!("`{key}N*`"),
                    aep_adapters::otel::content::Key::Prefix(_) => format!("`{key}*`"),
                };
                assert!(
                    section.contains(&written),
                    "{written} ({}) missing from the README's ceiling section",
                    t.source
                );
            }
            for b in t.bodies {
                assert!(section.contains(&format!("`{}`", b.event)), "{} body missing from the README", b.event);
            }
        }
    }

    #[test]
    fn at_full_the_tee_is_not_wrapped() {
        let seen: Arc<dyn OtlpTee> = Arc::new(Seen::default());
        let gate = Arc::new(CaptureGate::new(Capture::Full, Default::default()));
        let tee = GatedTee::wrap(seen.clone(), gate, "otlp-tee", &Arc::new(Metrics::default()));
        assert!(Arc::ptr_eq(&tee, &seen));
        assert_eq!(ceiling(Capture::Full, Capture::Metadata), Capture::Metadata, "never above the bridge's");
    }
}
