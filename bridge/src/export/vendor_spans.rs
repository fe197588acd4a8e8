//! The agents' own spans (`/v1/traces`) handed to the span sink, which places them in the
//! session traces ([`aep_projections::spans::VendorSpans`], where the placement rules are).
//! This is the hand-over only: a queue bounded in requests and bytes between the OTLP
//! receivers' tee and the sink; the daemon hands it only what the export ceiling admits
//! (`export::gate`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use tokio::sync::mpsc;

use crate::metrics::Metrics;

/// Hands the agents' `/v1/traces` requests to the span sink: a queue bounded in requests and
/// in bytes (a request's protobuf length, held until the sink has taken it). A request that
/// does not fit is dropped, counted in `aep_bridge_events_dropped_total{sink="otlp_vendor_spans"}`;
/// the sender was already answered 200, as for any tee.
#[derive(Debug, Clone)]
pub struct VendorSpansTee {
    tx: mpsc::Sender<Queued>,
    queued: Arc<AtomicUsize>,
    max_bytes: usize,
    metrics: Arc<Metrics>,
}

/// One queued request; its bytes leave the queue's count when it is dropped.
#[derive(Debug)]
pub struct Queued {
    /// The request.
    pub req: ExportTraceServiceRequest,
    bytes: usize,
    queued: Arc<AtomicUsize>,
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.queued.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

impl VendorSpansTee {
    /// A tee feeding `tx`, holding at most `max_bytes` of requests not yet taken.
    pub fn new(tx: mpsc::Sender<Queued>, max_bytes: usize, metrics: Arc<Metrics>) -> Self {
        Self { tx, queued: Arc::new(AtomicUsize::new(0)), max_bytes, metrics }
    }

    /// Bytes queued and not yet taken by the sink.
    pub fn queued_bytes(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }
}

impl super::tee::OtlpTee for VendorSpansTee {
    fn logs(&self, _: &opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest) {}

    fn traces(&self, req: &ExportTraceServiceRequest) {
        let bytes = prost::Message::encoded_len(req);
        let fits = self
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |q| {
                (q == 0 || q.saturating_add(bytes) <= self.max_bytes).then_some(q + bytes)
            })
            .is_ok();
        // Counted before the send: a failed send drops the `Queued`, which gives them back.
        let sent =
            fits && self.tx.try_send(Queued { req: req.clone(), bytes, queued: Arc::clone(&self.queued) }).is_ok();
        if !sent {
            self.metrics.dropped.inc(&[("sink", "otlp_vendor_spans"), ("severity", "info")]);
        }
    }

    fn metrics(&self, _: &opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest) {}

    fn wants_logs(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tee_queue_is_bounded_in_bytes_until_the_sink_takes_a_request() {
        use crate::export::tee::OtlpTee as _;
        let req = ExportTraceServiceRequest {
            resource_spans: vec![opentelemetry_proto::tonic::trace::v1::ResourceSpans {
                scope_spans: vec![opentelemetry_proto::tonic::trace::v1::ScopeSpans {
                    spans: vec![opentelemetry_proto::tonic::trace::v1::Span {
                        name: "claude_code.interaction".into(),
                        trace_id: vec![7; 16],
                        span_id: vec![1; 8],
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
        };
        let one = prost::Message::encoded_len(&req);
        let metrics = Arc::new(Metrics::default());
        let (tx, mut rx) = mpsc::channel(64);
        let tee = VendorSpansTee::new(tx, 2 * one + one / 2, metrics.clone());
        for _ in 0..3 {
            tee.traces(&req);
        }
        let dropped = || metrics.dropped.get(&[("sink", "otlp_vendor_spans"), ("severity", "info")]);
        assert_eq!((tee.queued_bytes(), dropped()), (2 * one, 1), "the third did not fit");
        let taken = rx.try_recv().unwrap();
        assert_eq!(taken.req, req);
        drop(taken);
        assert_eq!(tee.queued_bytes(), one, "a request taken gives its bytes back");
        tee.traces(&req);
        assert_eq!((tee.queued_bytes(), dropped()), (2 * one, 1));
        // The sink gone: what it had queued is freed with its queue, a new request dropped.
        drop(rx);
        tee.traces(&req);
        assert_eq!((tee.queued_bytes(), dropped()), (0, 2), "a closed queue holds nothing");
    }
}
