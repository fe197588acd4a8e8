//! Exporters to existing observability stacks (in progress): OTLP logs and synthesized
//! spans, CloudEvents over HTTP, OCSF. Each is a sink on the pipeline's fan-out.

use std::sync::Arc;

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;
use crate::pipeline::SinkTx;

/// `[export]`: which exporters run.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExportConfig {}

impl ExportConfig {
    /// Problems in this section, as `(key, message)`.
    pub fn check(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// Starts every configured exporter; returns the sink queues to add to the pipeline and
/// the tasks to await (each ends after flushing once its queue closes).
pub fn spawn(
    _cfg: &ExportConfig,
    _queue_capacity: usize,
    _metrics: Arc<Metrics>,
    _shutdown: CancellationToken,
) -> (Vec<SinkTx>, Vec<tokio::task::JoinHandle<()>>) {
    (Vec::new(), Vec::new())
}
