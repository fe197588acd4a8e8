//! The OCSF sink (AEP-0005 §4): Events that have an OCSF class become OCSF records,
//! appended to a JSONL file and/or POSTed as a JSON array per batch.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use aep_projections::ocsf::{OcsfOptions, to_ocsf};
use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::config::{OcsfConfig, RetryConfig};
use super::{Stats, count_dropped, next_batch};
use crate::metrics::Metrics;
use crate::pipeline::Stamped;
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

/// Runs the sink until its queue closes and is flushed.
pub(crate) async fn run(
    mut rx: mpsc::Receiver<Arc<Stamped>>,
    cfg: OcsfConfig,
    client: Option<(HttpClient, HttpUrl)>,
    policy: RetryConfig,
    metrics: Arc<Metrics>,
    stats: Arc<Stats>,
    shutdown: CancellationToken,
) {
    let opts = OcsfOptions { max_capture: cfg.max_capture };
    let linger = Duration::from_millis(cfg.batch_timeout_ms);
    loop {
        let (batch, closed) = next_batch(&mut rx, cfg.batch_size, linger, Duration::from_secs(3600)).await;
        metrics.queue_depth.set(SINK, rx.len() as i64);
        // Events with no OCSF class (AEP-0005 §4.2) are handed to the sink but produce nothing.
        let records: Vec<serde_json::Value> = batch.iter().filter_map(|s| to_ocsf(&s.event, &opts)).collect();
        let mut ok = true;
        if !records.is_empty() && !cfg.file.is_empty() {
            let mut lines = Vec::with_capacity(records.len() * 512);
            for r in &records {
                if serde_json::to_writer(&mut lines, r).is_ok() {
                    lines.push(b'\n');
                }
            }
            if let Err(e) = append(cfg.file.clone(), lines).await {
                ok = false;
                tracing::error!(sink = SINK, path = %cfg.file, error = %e, "OCSF file write failed.");
            }
        }
        if let Some((client, endpoint)) = client.as_ref().filter(|_| !records.is_empty()) {
            let body = Bytes::from(serde_json::to_vec(&records).unwrap_or_default());
            let d = with_retry(&policy, &shutdown, || {
                client.attempt(endpoint.as_str(), "application/json", body.clone(), false)
            })
            .await;
            stats.add_retries(d.retries);
            if let Err(e) = d.result {
                ok = false;
                tracing::error!(sink = SINK, error = %e, records = records.len(), "OCSF export failed; dropped.");
            }
        }
        if ok {
            metrics.events_out.add(&[("sink", SINK)], batch.len() as u64);
            stats.add_delivered(records.len());
        } else {
            metrics.sink_errors.inc(&[("sink", SINK)]);
            count_dropped(SINK, &metrics, &batch);
            stats.add_failed(records.len());
        }
        if closed {
            return;
        }
    }
}
