//! The OTLP tees: whatever wants every OTLP request the receivers take, as received (logs,
//! traces, metrics; over gRPC or HTTP, protobuf or JSON). The receivers' handler
//! (`otlp_in`) hands each accepted request to one [`OtlpTee`]; the exporters implement it:
//! the forward to an upstream OTLP/HTTP receiver ([`http`], `[otlp_in] tee`), the agents'
//! own metrics beside the bridge's (`otlp_metrics`), and their own spans placed in their
//! session traces (`vendor_spans`).

use std::sync::Arc;

use aep_receivers::otlp::{ExportLogsServiceRequest, ExportMetricsServiceRequest, ExportTraceServiceRequest};

pub mod http;

/// Something else that wants every OTLP request as received (the tee, the forwards of the
/// agents' metrics and spans; the daemon puts each behind its capture ceiling, `export::gate`).
pub trait OtlpTee: Send + Sync {
    /// A logs request as received.
    fn logs(&self, req: &ExportLogsServiceRequest);
    /// A traces request as received.
    fn traces(&self, req: &ExportTraceServiceRequest);
    /// A metrics request as received.
    fn metrics(&self, req: &ExportMetricsServiceRequest);
    /// Whether it needs logs requests at all (when none does, logs take the receivers'
    /// fast path, decoded straight into records).
    fn wants_logs(&self) -> bool {
        true
    }
}

/// Several tees, each handed every request (the HTTP tee, the metrics forward, the spans sink).
pub struct Tees(pub Vec<Arc<dyn OtlpTee>>);

impl Tees {
    /// `None` for no tee, the tee itself for one, a fan-out for more.
    pub fn of(tees: Vec<Arc<dyn OtlpTee>>) -> Option<Arc<dyn OtlpTee>> {
        match tees.len() {
            0 => None,
            1 => tees.into_iter().next(),
            _ => Some(Arc::new(Tees(tees))),
        }
    }
}

impl OtlpTee for Tees {
    fn logs(&self, req: &ExportLogsServiceRequest) {
        self.0.iter().for_each(|t| t.logs(req));
    }
    fn traces(&self, req: &ExportTraceServiceRequest) {
        self.0.iter().for_each(|t| t.traces(req));
    }
    fn metrics(&self, req: &ExportMetricsServiceRequest) {
        self.0.iter().for_each(|t| t.metrics(req));
    }
    fn wants_logs(&self) -> bool {
        self.0.iter().any(|t| t.wants_logs())
    }
}
