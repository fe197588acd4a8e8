//! The CloudEvents HTTP sink (AEP-0005 §1): structured mode, one event per POST
//! (`application/cloudevents+json`), or batch mode, one JSON array per POST
//! (`application/cloudevents-batch+json`), with the shared retry policy. Events above
//! `max_capture` are down-levelled first (AEP-0001 §8.2): this sink is a re-emitter hop.

use std::sync::Arc;
use std::time::Duration;

use aep_projections::ce::{CE_BATCH_CONTENT_TYPE, CE_CONTENT_TYPE, to_cloudevent};
use aep_schemas::downlevel::downlevel;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::config::{CeMode, CloudEventsConfig, RetryConfig};
use super::feed::Feed;
use super::fleet::Identity;
use super::{Stats, count_dropped};
use crate::health::Health;
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
    health: Arc<Health>,
    shutdown: CancellationToken,
    /// Events wait in the log: a peer that stays away holds the batch, never drops it.
    durable: bool,
}

impl Sender {
    /// POSTs one body with retries and accounts for it; `false` when it was not taken and
    /// stays in the log (a durable sink at shutdown).
    async fn deliver(&self, content_type: &str, body: Bytes, events: &[Arc<Stamped>]) -> bool {
        let d = loop {
            let d = with_retry(&self.policy, &self.shutdown, || {
                self.client.attempt(self.endpoint.as_str(), content_type, body.clone(), false)
            })
            .await;
            self.stats.add_retries(d.retries);
            match &d.result {
                Err(e) if d.transient && self.durable => {
                    if self.shutdown.is_cancelled() {
                        return false;
                    }
                    super::note_stall(SINK, self.endpoint.as_str(), e, &self.metrics, &self.health);
                    if !super::pause(&self.policy, &self.shutdown).await {
                        return false;
                    }
                }
                _ => break d,
            }
        };
        match d.result {
            Ok(_) => {
                self.metrics.events_out.add(&[("sink", SINK)], events.len() as u64);
                self.stats.add_delivered(events.len());
                self.health.recovered(SINK);
            }
            Err(e) => {
                self.metrics.sink_errors.inc(&[("sink", SINK)]);
                count_dropped(SINK, &self.metrics, events);
                self.stats.add_failed(events.len());
                tracing::error!(sink = SINK, error = %e, events = events.len(), "CloudEvents export failed; dropped.");
            }
        }
        true
    }
}

/// Runs the sink until its feed closes and is flushed.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    mut feed: Feed,
    cfg: CloudEventsConfig,
    endpoint: HttpUrl,
    client: HttpClient,
    policy: RetryConfig,
    metrics: Arc<Metrics>,
    stats: Arc<Stats>,
    health: Arc<Health>,
    fleet: Arc<Identity>,
    shutdown: CancellationToken,
) {
    let durable = feed.durable();
    let tx = Sender { client, endpoint, policy, metrics: metrics.clone(), stats, health, shutdown, durable };
    let linger = match cfg.mode {
        CeMode::Batch => Duration::from_millis(cfg.batch_timeout_ms),
        CeMode::Structured => Duration::ZERO,
    };
    let ce = |s: &Stamped| {
        let mut v = to_cloudevent(&downlevel(&s.event, cfg.max_capture));
        fleet.stamp_cloudevent(&mut v);
        v
    };
    loop {
        let t = feed.next(cfg.batch_size, linger, Duration::from_secs(3600)).await;
        metrics.queue_depth.set(SINK, feed.depth());
        let batch = &t.events;
        let taken = match cfg.mode {
            CeMode::Structured => {
                let mut all = true;
                for s in batch {
                    let body = Bytes::from(serde_json::to_vec(&ce(s)).unwrap_or_default());
                    if !tx.deliver(CE_CONTENT_TYPE, body, std::slice::from_ref(s)).await {
                        all = false;
                        break;
                    }
                }
                all
            }
            CeMode::Batch if !batch.is_empty() => {
                let events: Vec<serde_json::Value> = batch.iter().map(|s| ce(s)).collect();
                let body = Bytes::from(serde_json::to_vec(&events).unwrap_or_default());
                tx.deliver(CE_BATCH_CONTENT_TYPE, body, batch).await
            }
            CeMode::Batch => true,
        };
        if !taken {
            // Shutdown while the peer is away: the batch stays in the log (a structured
            // batch is sent again from its first event; those before it were taken).
            feed.finish().await;
            return;
        }
        feed.ack(&t.marks).await;
        if t.closed {
            feed.finish().await;
            return;
        }
    }
}
