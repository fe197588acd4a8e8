//! The CloudEvents HTTP sink (AEP-0005 §1): structured mode, one event per POST
//! (`application/cloudevents+json`), or batch mode, one JSON array per POST
//! (`application/cloudevents-batch+json`), with the shared retry policy. Events above
//! `max_capture` are down-levelled first (AEP-0001 §8.2): this sink is a re-emitter hop.

use std::sync::Arc;
use std::time::Duration;

use aep_projections::ce::{CE_BATCH_CONTENT_TYPE, CE_CONTENT_TYPE, to_cloudevent, to_cloudevents_batch};
use aep_schemas::downlevel::downlevel;
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::config::{CeMode, CloudEventsConfig, RetryConfig};
use super::{Stats, count_dropped, next_batch};
use crate::metrics::Metrics;
use crate::pipeline::Stamped;
use crate::transport::config::HttpUrl;
use crate::transport::{HttpClient, with_retry};

const SINK: &str = "cloudevents";

struct Sender {
    client: HttpClient,
    endpoint: HttpUrl,
    policy: RetryConfig,
    metrics: Arc<Metrics>,
    stats: Arc<Stats>,
    shutdown: CancellationToken,
}

impl Sender {
    /// POSTs one body with retries and accounts for it.
    async fn deliver(&self, content_type: &str, body: Bytes, events: &[Arc<Stamped>]) {
        let d = with_retry(&self.policy, &self.shutdown, || {
            self.client.attempt(self.endpoint.as_str(), content_type, body.clone(), false)
        })
        .await;
        self.stats.add_retries(d.retries);
        match d.result {
            Ok(_) => {
                self.metrics.events_out.add(&[("sink", SINK)], events.len() as u64);
                self.stats.add_delivered(events.len());
            }
            Err(e) => {
                self.metrics.sink_errors.inc(&[("sink", SINK)]);
                count_dropped(SINK, &self.metrics, events);
                self.stats.add_failed(events.len());
                tracing::error!(sink = SINK, error = %e, events = events.len(), "CloudEvents export failed; dropped.");
            }
        }
    }
}

/// Runs the sink until its queue closes and is flushed.
pub(crate) async fn run(
    mut rx: mpsc::Receiver<Arc<Stamped>>,
    cfg: CloudEventsConfig,
    endpoint: HttpUrl,
    client: HttpClient,
    policy: RetryConfig,
    metrics: Arc<Metrics>,
    stats: Arc<Stats>,
    shutdown: CancellationToken,
) {
    let metrics2 = metrics.clone();
    let tx = Sender { client, endpoint, policy, metrics: metrics2, stats, shutdown };
    let linger = match cfg.mode {
        CeMode::Batch => Duration::from_millis(cfg.batch_timeout_ms),
        CeMode::Structured => Duration::ZERO,
    };
    loop {
        let (batch, closed) = next_batch(&mut rx, cfg.batch_size, linger, Duration::from_secs(3600)).await;
        metrics.queue_depth.set(SINK, rx.len() as i64);
        match cfg.mode {
            CeMode::Structured => {
                for s in &batch {
                    let ev = downlevel(&s.event, cfg.max_capture);
                    let body = Bytes::from(serde_json::to_vec(&to_cloudevent(&ev)).unwrap_or_default());
                    let one = std::slice::from_ref(s);
                    tx.deliver(CE_CONTENT_TYPE, body, one).await;
                }
            }
            CeMode::Batch if !batch.is_empty() => {
                let events: Vec<aep_schemas::Event> =
                    batch.iter().map(|s| downlevel(&s.event, cfg.max_capture)).collect();
                let body = Bytes::from(serde_json::to_vec(&to_cloudevents_batch(&events)).unwrap_or_default());
                tx.deliver(CE_BATCH_CONTENT_TYPE, body, &batch).await;
            }
            CeMode::Batch => {}
        }
        if closed {
            return;
        }
    }
}
