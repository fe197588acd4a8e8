//! The backend behind the gateway: an OTLP/gRPC receiver in the bench process (gzip
//! accepted, as rotel and the Collector send) that keeps every log record by its
//! `(aep.source, aep.event_id)` and every span by its span id, with how often each
//! arrived, so "delivered" and "duplicates" are exact.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::logs::v1::logs_service_server::{LogsService, LogsServiceServer};
use opentelemetry_proto::tonic::collector::logs::v1::{ExportLogsServiceRequest, ExportLogsServiceResponse};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;

/// What arrived.
#[derive(Debug, Default)]
pub(super) struct Taken {
    /// Log records by `(aep.source, aep.event_id)`: arrivals.
    pub(super) logs: HashMap<(String, String), u32>,
    /// Log records without an `aep.event_id`.
    pub(super) logs_without_id: u64,
    /// Spans by span id: arrivals.
    pub(super) spans: HashMap<Vec<u8>, u32>,
    /// Metric data points (every kind).
    pub(super) metric_points: u64,
    /// The `host.name`s metrics came from.
    pub(super) metric_hosts: HashSet<String>,
    /// Requests without the tenant header (`x-scope-orgid`).
    pub(super) untenanted: u64,
    /// Requests.
    pub(super) requests: u64,
}

/// The sink: cheap to clone, shared with its gRPC services.
#[derive(Clone, Default)]
pub(super) struct Sink {
    pub(super) taken: Arc<Mutex<Taken>>,
}

fn str_attr(attrs: &[KeyValue], key: &str) -> Option<String> {
    match attrs.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

impl Sink {
    fn note<T>(&self, req: &tonic::Request<T>, t: &mut Taken) {
        t.requests += 1;
        if req.metadata().get("x-scope-orgid").is_none() {
            t.untenanted += 1;
        }
    }

    /// Serves the sink on `127.0.0.1:0` on `rt`; returns its address.
    pub(super) fn start(&self, rt: &tokio::runtime::Runtime) -> anyhow::Result<SocketAddr> {
        let l = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = l.local_addr()?;
        let gz = tonic::codec::CompressionEncoding::Gzip;
        // Big batches from a gateway catching up after an outage.
        let max = 64 << 20;
        let server = tonic::transport::Server::builder()
            .add_service(LogsServiceServer::new(self.clone()).accept_compressed(gz).max_decoding_message_size(max))
            .add_service(TraceServiceServer::new(self.clone()).accept_compressed(gz).max_decoding_message_size(max))
            .add_service(MetricsServiceServer::new(self.clone()).accept_compressed(gz).max_decoding_message_size(max))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(l));
        rt.spawn(server);
        Ok(addr)
    }
}

#[tonic::async_trait]
impl LogsService for Sink {
    async fn export(
        &self,
        req: tonic::Request<ExportLogsServiceRequest>,
    ) -> Result<tonic::Response<ExportLogsServiceResponse>, tonic::Status> {
        let mut t = self.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.note(&req, &mut t);
        for r in req.get_ref().resource_logs.iter().flat_map(|r| &r.scope_logs).flat_map(|s| &s.log_records) {
            match (str_attr(&r.attributes, "aep.source"), str_attr(&r.attributes, "aep.event_id")) {
                (Some(src), Some(id)) => *t.logs.entry((src, id)).or_default() += 1,
                _ => t.logs_without_id += 1,
            }
        }
        Ok(tonic::Response::new(ExportLogsServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl TraceService for Sink {
    async fn export(
        &self,
        req: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let mut t = self.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.note(&req, &mut t);
        for s in req.get_ref().resource_spans.iter().flat_map(|r| &r.scope_spans).flat_map(|s| &s.spans) {
            *t.spans.entry(s.span_id.clone()).or_default() += 1;
        }
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

#[tonic::async_trait]
impl MetricsService for Sink {
    async fn export(
        &self,
        req: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        let mut t = self.taken.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.note(&req, &mut t);
        for rm in &req.get_ref().resource_metrics {
            if let Some(h) = rm.resource.as_ref().and_then(|r| str_attr(&r.attributes, "host.name")) {
                t.metric_hosts.insert(h);
            }
            for m in rm.scope_metrics.iter().flat_map(|s| &s.metrics) {
                t.metric_points += match &m.data {
                    Some(Data::Gauge(g)) => g.data_points.len(),
                    Some(Data::Sum(s)) => s.data_points.len(),
                    Some(Data::Histogram(h)) => h.data_points.len(),
                    Some(Data::ExponentialHistogram(h)) => h.data_points.len(),
                    Some(Data::Summary(s)) => s.data_points.len(),
                    None => 0,
                } as u64;
            }
        }
        Ok(tonic::Response::new(ExportMetricsServiceResponse { partial_success: None }))
    }
}
