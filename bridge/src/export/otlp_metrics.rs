//! The bridge's metrics over OTLP: the GenAI instruments and the bridge's own
//! counters, collected by the SDK's `PeriodicReader` beside the Prometheus reader and sent
//! to `[export.otlp]` (`/v1/metrics`, or `MetricsService/Export` over gRPC) through the one
//! outbound transport.
//!
//! The SDK's reader runs on its own thread and waits on each export: the exporter here only
//! converts the collection to an `ExportMetricsServiceRequest` (opentelemetry-proto's own
//! transform) and hands it to a bounded queue; a tokio task delivers it with the transport's
//! retry policy. When the queue is full (the peer down for several intervals) the new
//! collection is skipped and logged; with cumulative temporality (the default) the next
//! delivered collection is whole again.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, Temporality};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::config::{ExportConfig, MetricsTemporality, Signal};
use super::otlp::{OtlpClient, OtlpRequest, Outlet};
use crate::health::Health;
use crate::metrics::Metrics;
use crate::transport::RetryConfig;

/// Collections waiting for delivery; past it a new collection is dropped (and logged).
const QUEUE: usize = 4;

/// The SDK side: converts each collection and queues it.
#[derive(Debug)]
pub struct OtlpMetricExporter {
    /// Taken at shutdown, so the delivery task sees its queue close once drained.
    tx: std::sync::Mutex<Option<mpsc::Sender<ExportMetricsServiceRequest>>>,
    temporality: Temporality,
}

impl PushMetricExporter for OtlpMetricExporter {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let req = ExportMetricsServiceRequest::from(metrics);
        let tx = self.tx.lock().ok().and_then(|t| t.clone());
        let Some(tx) = tx else { return Err(OTelSdkError::AlreadyShutdown) };
        tx.try_send(req).map_err(|e| {
            tracing::warn!(error = %e, "OTLP metrics queue full or closed: a collection is skipped.");
            OTelSdkError::InternalFailure(e.to_string())
        })
    }

    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }

    fn shutdown_with_timeout(&self, _timeout: Duration) -> OTelSdkResult {
        if let Ok(mut t) = self.tx.lock() {
            t.take();
        }
        Ok(())
    }

    fn temporality(&self) -> Temporality {
        self.temporality
    }
}

/// Vendor metrics requests waiting for delivery; past it one is dropped (and logged).
const VENDOR_QUEUE: usize = 64;

/// The delivery side, started with [`Delivery::run`] once the runtime is up.
#[derive(Debug)]
pub struct Delivery {
    rx: mpsc::Receiver<ExportMetricsServiceRequest>,
    vendor_rx: mpsc::Receiver<ExportMetricsServiceRequest>,
    vendor_tx: Option<mpsc::Sender<ExportMetricsServiceRequest>>,
    client: OtlpClient,
}

/// The agents' own OTLP metrics (`/v1/metrics` into the bridge), forwarded to the same
/// metrics endpoint as the bridge's, through the same delivery; the daemon hands it only
/// what the export ceiling admits (`export::gate`).
#[derive(Debug)]
pub struct VendorForward {
    tx: mpsc::Sender<ExportMetricsServiceRequest>,
}

impl super::tee::OtlpTee for VendorForward {
    fn logs(&self, _: &opentelemetry_proto::tonic::collector::logs::v1::ExportLogsServiceRequest) {}
    fn traces(&self, _: &opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest) {}
    fn metrics(&self, req: &ExportMetricsServiceRequest) {
        if self.tx.try_send(req.clone()).is_err() {
            tracing::warn!("Vendor metrics forward queue full or closed: a request is skipped.");
        }
    }
    fn wants_logs(&self) -> bool {
        false
    }
}

/// The reader to install on the meter provider and its delivery, or `None` when the
/// metrics signal is off (no endpoint, `metrics = false`) or its client cannot be built.
pub fn setup(cfg: &ExportConfig) -> Option<(PeriodicReader<OtlpMetricExporter>, Delivery)> {
    let o = &cfg.otlp;
    let settings = o.for_signal(Signal::Metrics)?;
    let client = match OtlpClient::new(&settings) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "OTLP metrics exporter not started.");
            eprintln!("aep-bridge: error: export.otlp: {e}; the OTLP metrics exporter is off");
            return None;
        }
    };
    let (tx, rx) = mpsc::channel(QUEUE);
    let temporality = match o.metrics_temporality {
        MetricsTemporality::Cumulative => Temporality::Cumulative,
        MetricsTemporality::Delta => Temporality::Delta,
    };
    let exporter = OtlpMetricExporter { tx: std::sync::Mutex::new(Some(tx)), temporality };
    let reader =
        PeriodicReader::builder(exporter).with_interval(Duration::from_millis(o.metrics_interval_ms.max(100))).build();
    let (vendor_tx, vendor_rx) = mpsc::channel(VENDOR_QUEUE);
    Some((reader, Delivery { rx, vendor_rx, vendor_tx: Some(vendor_tx), client }))
}

impl Delivery {
    /// The tee that forwards the agents' own metrics requests through this delivery (one;
    /// later calls return `None`).
    pub fn vendor_forward(&mut self) -> Option<VendorForward> {
        self.vendor_tx.take().map(|tx| VendorForward { tx })
    }

    /// Delivers every queued collection until the exporter is gone (the meter provider shut
    /// down) and the queue is drained; a failed delivery is counted (`sink_errors`), named on
    /// `/healthz` until one succeeds, and the next one goes on. A peer that refuses metrics
    /// (gRPC `UNIMPLEMENTED`, HTTP 404/405) turns the export off for the process: logged
    /// once, counted in `export_disabled`, named on `/healthz`; later collections are skipped.
    pub async fn run(
        mut self,
        policy: RetryConfig,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
        shutdown: CancellationToken,
    ) {
        const SINK: &str = "otlp_metrics";
        let stats = Arc::new(super::Stats::default());
        let mut outlet = Outlet::new(SINK, Signal::Metrics, self.client.url(), metrics, stats, health);
        self.vendor_tx = None;
        let (mut own_open, mut vendor_open) = (true, true);
        while own_open || vendor_open {
            let req = tokio::select! {
                r = self.rx.recv(), if own_open => match r {
                    Some(r) => r,
                    None => { own_open = false; continue; }
                },
                r = self.vendor_rx.recv(), if vendor_open => match r {
                    Some(r) => r,
                    None => { vendor_open = false; continue; }
                },
            };
            if outlet.is_off() {
                continue;
            }
            let points: usize =
                req.resource_metrics.iter().flat_map(|r| &r.scope_metrics).map(|s| s.metrics.len()).sum();
            let outcome = self.client.send(OtlpRequest::Metrics(req), &policy, &shutdown).await;
            outlet.account(outcome, &[], points as u64, points);
        }
    }
}
