//! The OCSF sink (AEP-0005 §4): Events that have an OCSF class become OCSF records,
//! appended to a JSONL file and/or POSTed as a JSON array per batch.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use aep_projections::ocsf::{OcsfOptions, to_ocsf};
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::config::{OcsfConfig, RetryConfig};
use super::feed::Feed;
use super::fleet::Identity;
use super::{Stats, count_dropped};
use crate::health::Health;
use crate::metrics::Metrics;
use crate::transport::config::HttpUrl;
use crate::transport::{HttpClient, with_retry};

const SINK: &str = "ocsf";

/// Appends lines to `path` on the blocking pool.
async fn append(path: String, lines: Vec<u8>) -> std::io::Result<()> {
    tokio::task::spawn_blocking(move || {
        if let Some(dir) = std::path::Path::new(&path).parent()
            && !dir.as_os_str().is_empty()
        {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        f.write_all(&lines)?;
        f.flush()
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Runs the sink until its feed closes and is flushed. From a durable feed, a batch whose
/// file append or peer fails for a while is held and retried (the file: a full disk), and
/// acknowledged in the log once written and taken.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run(
    mut feed: Feed,
    cfg: OcsfConfig,
    client: Option<(HttpClient, HttpUrl)>,
    policy: RetryConfig,
    metrics: Arc<Metrics>,
    stats: Arc<Stats>,
    health: Arc<Health>,
    fleet: Arc<Identity>,
    shutdown: CancellationToken,
) {
    let durable = feed.durable();
    let opts = OcsfOptions { max_capture: cfg.max_capture };
    let linger = Duration::from_millis(cfg.batch_timeout_ms);
    loop {
        let t = feed.next(cfg.batch_size, linger, Duration::from_secs(3600)).await;
        metrics.queue_depth.set(SINK, feed.depth());
        let batch = &t.events;
        // Events with no OCSF class (AEP-0005 §4.2) are handed to the sink but produce nothing.
        let records: Vec<serde_json::Value> = batch
            .iter()
            .filter_map(|s| to_ocsf(&s.event, &opts))
            .map(|mut r| {
                fleet.stamp_ocsf(&mut r);
                r
            })
            .collect();
        let mut ok = true;
        if !records.is_empty() && !cfg.file.is_empty() {
            let mut lines = Vec::with_capacity(records.len() * 512);
            for r in &records {
                if serde_json::to_writer(&mut lines, r).is_ok() {
                    lines.push(b'\n');
                }
            }
            loop {
                match append(cfg.file.clone(), lines.clone()).await {
                    Ok(()) => break,
                    Err(e) if durable => {
                        let e = format!("{}: {e}", cfg.file);
                        super::note_stall(SINK, &cfg.file, &e, &metrics, &health);
                        if !super::pause(&policy, &shutdown).await {
                            feed.finish().await;
                            return;
                        }
                    }
                    Err(e) => {
                        ok = false;
                        tracing::error!(sink = SINK, path = %cfg.file, error = %e, "OCSF file write failed.");
                        break;
                    }
                }
            }
        }
        if let Some((client, endpoint)) = client.as_ref().filter(|_| !records.is_empty()) {
            let body = Bytes::from(serde_json::to_vec(&records).unwrap_or_default());
            let d = loop {
                let d = with_retry(&policy, &shutdown, || {
                    client.attempt(endpoint.as_str(), "application/json", body.clone(), false)
                })
                .await;
                stats.add_retries(d.retries);
                match &d.result {
                    Err(e) if d.transient && durable => {
                        if shutdown.is_cancelled() {
                            // The batch stays in the log (its file lines are written again).
                            feed.finish().await;
                            return;
                        }
                        super::note_stall(SINK, endpoint.as_str(), e, &metrics, &health);
                        if !super::pause(&policy, &shutdown).await {
                            feed.finish().await;
                            return;
                        }
                    }
                    _ => break d,
                }
            };
            if let Err(e) = d.result {
                ok = false;
                tracing::error!(sink = SINK, error = %e, records = records.len(), "OCSF export failed; dropped.");
            } else {
                health.recovered(SINK);
            }
        }
        if ok {
            metrics.events_out.add(&[("sink", SINK)], batch.len() as u64);
            stats.add_delivered(records.len());
        } else {
            metrics.sink_errors.inc(&[("sink", SINK)]);
            count_dropped(SINK, &metrics, batch);
            stats.add_failed(records.len());
        }
        feed.ack(&t.marks).await;
        if t.closed {
            feed.finish().await;
            return;
        }
    }
}
