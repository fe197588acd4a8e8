//! `aep-bench collector`: NDJSON batches to `POST /events` of a bridge served in this
//! process, first with no subscriber (the baseline), then with `--subscribers` SSE clients
//! on `/stream`. Every event carries the bench clock at POST time in the extension
//! attribute `benchts`, so each subscriber measures POST-to-receipt delay per event.

use std::io::BufRead as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;

use super::{InProcess, bench_config, line, metric_sum, percentile, rate, scrape, verdict};

/// Arguments of `aep-bench collector`.
#[derive(Debug, Clone, Args)]
pub struct CollectorArgs {
    /// Events posted per phase.
    #[arg(long, default_value_t = 100_000)]
    pub events: u64,
    /// SSE subscribers attached to `/stream` in the measured phase.
    #[arg(long, default_value_t = 10)]
    pub subscribers: usize,
    /// Events per `POST /events` (one NDJSON body).
    #[arg(long, default_value_t = 500)]
    pub batch: usize,
    /// Sessions the events are spread over.
    #[arg(long, default_value_t = 8)]
    pub sessions: usize,
}

const TS_KEY: &str = "\"benchts\":\"";

struct Gen {
    sessions: Vec<String>,
    seqs: Vec<u64>,
    next: u64,
}

impl Gen {
    fn new(n: usize) -> Self {
        Gen { sessions: (0..n).map(|i| format!("bench-{i:04}")).collect(), seqs: vec![0; n], next: 0 }
    }

    /// One NDJSON body of `n` events stamped with `ts` (µs on the bench clock).
    fn body(&mut self, n: u64, ts: u64) -> String {
        let mut out = String::with_capacity(n as usize * 480);
        let ms = aep_bridge::time::unix_ms(std::time::SystemTime::now());
        let time = aep_bridge::time::rfc3339_ms(ms);
        for _ in 0..n {
            let k = self.next;
            self.next += 1;
            let si = (k % self.sessions.len() as u64) as usize;
            let s = &self.sessions[si];
            let seq = self.seqs[si];
            self.seqs[si] += 1;
            let id = aep_schemas::ids::ulid_from_parts(ms, u128::from(k) + 1);
            out.push_str(&format!(
                r#"{{"aep":"0.1","id":"{id}","type":"tool.completed","subject":"Bash","time":"{time}","source":"aep://bench-host/agent/claude-code/session/{s}","agent":"claude-code","session":"{s}","run":"run-{run:04}","seq":{seq},"epoch":0,"severity":"info","capture":"metadata","benchts":"{ts}","data":{{"tool":{{"name":"Bash","call_id":"toolu_{k:016x}"}},"status":"success","duration_ms":{dur}}}}}"#,
                run = seq / 16,
                dur = 40 + k % 100
            ));
            out.push('\n');
        }
        out
    }
}

fn micros(base: Instant) -> u64 {
    base.elapsed().as_micros() as u64
}

/// Posts `events` in batches; returns the seconds from the first POST to the last 202.
fn post_all(
    agent: &ureq::Agent,
    url: &str,
    g: &mut Gen,
    events: u64,
    batch: u64,
    base: Instant,
) -> anyhow::Result<f64> {
    let t = Instant::now();
    let mut left = events;
    while left > 0 {
        let n = batch.min(left);
        let body = g.body(n, micros(base));
        let mut resp = agent
            .post(&format!("{url}/events"))
            .header("content-type", "application/x-ndjson")
            .header("aep-version", "0.1")
            .send(body.as_bytes())?;
        let text = resp.body_mut().read_to_string().unwrap_or_default();
        anyhow::ensure!(resp.status().as_u16() == 202, "POST /events answered {}: {text}", resp.status());
        left -= n;
    }
    Ok(t.elapsed().as_secs_f64())
}

struct Sub {
    received: Arc<AtomicU64>,
    handle: std::thread::JoinHandle<anyhow::Result<Vec<f64>>>,
}

fn subscribe(url: &str, base: Instant, connected: Arc<AtomicUsize>) -> Sub {
    let received = Arc::new(AtomicU64::new(0));
    let r = received.clone();
    let url = format!("{url}/stream");
    let spawned = std::thread::Builder::new().name("bench-sse".into()).spawn(move || -> anyhow::Result<Vec<f64>> {
        let agent = super::agent();
        let resp = agent.get(&url).header("accept", "text/event-stream").call()?;
        anyhow::ensure!(resp.status().as_u16() == 200, "GET /stream answered {}", resp.status());
        connected.fetch_add(1, Ordering::AcqRel);
        let reader = resp.into_body().into_with_config().limit(u64::MAX).reader();
        let mut reader = std::io::BufReader::with_capacity(1 << 16, reader);
        let mut delays = Vec::new();
        let mut buf = Vec::with_capacity(1024);
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            if !buf.starts_with(b"data:") {
                continue;
            }
            let now = micros(base);
            if let Some(ts) = find_ts(&buf) {
                delays.push(now.saturating_sub(ts) as f64 / 1e3);
            }
            r.fetch_add(1, Ordering::AcqRel);
        }
        Ok(delays)
    });
    let handle =
        spawned.unwrap_or_else(|e| std::thread::spawn(move || Err(anyhow::anyhow!("cannot start a subscriber: {e}"))));
    Sub { received, handle }
}

fn find_ts(line: &[u8]) -> Option<u64> {
    let key = TS_KEY.as_bytes();
    let at = line.windows(key.len()).position(|w| w == key)? + key.len();
    let digits: &[u8] = &line[at..line[at..].iter().position(|b| *b == b'"').map(|e| at + e)?];
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// Runs the bench.
pub fn run(a: &CollectorArgs) -> anyhow::Result<()> {
    anyhow::ensure!(a.sessions > 0 && a.batch > 0, "--sessions and --batch must be at least 1");
    let mut g = Gen::new(a.sessions);
    // The generated events must be valid AEP, or the numbers mean nothing.
    let probe: serde_json::Value = serde_json::from_str(g.body(1, 0).trim_end())?;
    aep_schemas::validate::validate_value(&probe)
        .map_err(|v| anyhow::anyhow!("bench event invalid: {}: {}", v.rule, v.message))?;
    g = Gen::new(a.sessions);

    // Baseline 0: parse + validate of the same bodies, in this thread, no HTTP, no pipeline.
    let mut pg = Gen::new(a.sessions);
    let t = Instant::now();
    let mut left = a.events;
    while left > 0 {
        let n = (a.batch as u64).min(left);
        let body = pg.body(n, 0);
        for l in body.lines() {
            let v: serde_json::Value = serde_json::from_str(l)?;
            aep_schemas::validate::validate_value(&v).map_err(|v| anyhow::anyhow!("{}", v.message))?;
        }
        left -= n;
    }
    let parse_rate = a.events as f64 / t.elapsed().as_secs_f64();

    let scratch = super::Scratch::new("collector")?;
    let bridge = InProcess::start(bench_config(scratch.path()), 2)?;
    let url = bridge.url();
    let agent = super::agent();
    let base = Instant::now();
    let outcome = (|| -> anyhow::Result<_> {
        // Baseline: the same POSTs with nobody subscribed.
        let b0 = super::threads_cpu(super::is_bridge_thread);
        let bare = post_all(&agent, &url, &mut g, a.events, a.batch as u64, base)?;
        let bare_cpu = super::threads_cpu(super::is_bridge_thread) - b0;
        let connected = Arc::new(AtomicUsize::new(0));
        let subs: Vec<Sub> = (0..a.subscribers).map(|_| subscribe(&url, base, connected.clone())).collect();
        let ok = super::wait_until(Duration::from_secs(10), || {
            connected.load(Ordering::Acquire) >= a.subscribers
                && scrape(&agent, &url)
                    .map(|t| metric_sum(&t, "aep_bridge_subscribers", &[]) >= a.subscribers as u64)
                    .unwrap_or(false)
        });
        anyhow::ensure!(ok, "the SSE subscribers did not attach within 10 s");
        let cpu0 = super::cpu_seconds(None).unwrap_or(0.0);
        let b0 = super::threads_cpu(super::is_bridge_thread);
        let with_subs = post_all(&agent, &url, &mut g, a.events, a.batch as u64, base)?;
        // Let deliveries finish: until every subscriber has everything, or nothing moves for 2 s.
        let mut last = (0u64, Instant::now());
        super::wait_until(Duration::from_secs(60), || {
            let total: u64 = subs.iter().map(|s| s.received.load(Ordering::Acquire)).sum();
            if total != last.0 {
                last = (total, Instant::now());
            }
            total >= a.events * a.subscribers as u64 || last.1.elapsed() > Duration::from_secs(2)
        });
        let cpu = super::cpu_seconds(None).unwrap_or(0.0) - cpu0;
        let bridge_cpu = super::threads_cpu(super::is_bridge_thread) - b0;
        let text = scrape(&agent, &url).unwrap_or_default();
        Ok((bare, bare_cpu, with_subs, bridge_cpu, subs, cpu, text))
    })();
    // Idle keep-alive connections would hold up the bridge's graceful shutdown.
    drop(agent);
    bridge.shutdown();
    let (bare, bare_cpu, with_subs, bridge_cpu, subs, cpu, text) = outcome?;
    let mut counts = Vec::new();
    let mut delays = Vec::new();
    for s in subs {
        let d = s.handle.join().map_err(|_| anyhow::anyhow!("a subscriber thread panicked"))?.context("subscriber")?;
        counts.push(d.len() as u64);
        delays.extend(d);
    }
    delays.sort_by(f64::total_cmp);

    let ingest = a.events as f64 / with_subs;
    let bare_rate = a.events as f64 / bare;
    println!(
        "bench collector: events={} per phase, batch={}, sessions={}, subscribers={} (SSE /stream)",
        a.events, a.batch, a.sessions, a.subscribers
    );
    line(
        &format!("ingest with {} subscribers", a.subscribers),
        &rate(ingest, "ev/s"),
        &format!("target >= 50k ev/s: {}", verdict(ingest >= 50_000.0)),
    );
    line(
        "  bridge threads only",
        &rate(a.events as f64 / bridge_cpu.max(1e-9), "ev/CPU-s"),
        &format!("{bridge_cpu:.2} CPU-s of tokio workers + JSONL (SSE encoding included)"),
    );
    line("baseline: ingest, no subscriber", &rate(bare_rate, "ev/s"), &format!("ratio {:.2}x", ingest / bare_rate));
    line(
        "  bridge threads only",
        &rate(a.events as f64 / bare_cpu.max(1e-9), "ev/CPU-s"),
        &format!("{bare_cpu:.2} CPU-s"),
    );
    line(
        "baseline: parse+validate only",
        &rate(parse_rate, "ev/s"),
        &format!("one thread, no HTTP; ingest at {:.2}x of it", ingest / parse_rate),
    );
    line(
        "delivery delay POST -> subscriber",
        &format!("p50 {:.2} ms", percentile(&delays, 50.0)),
        &format!("p99 {:.2} ms  max {:.2} ms", percentile(&delays, 99.0), percentile(&delays, 100.0)),
    );
    let (min, max) = (counts.iter().min().copied().unwrap_or(0), counts.iter().max().copied().unwrap_or(0));
    let dropped = metric_sum(&text, "aep_bridge_events_dropped_total", &[]);
    line(
        "delivered per subscriber",
        &format!("{min}..{max}"),
        &format!("of {} posted; sink drops {dropped}; whole process {cpu:.2} CPU-s (clients included)", a.events),
    );
    anyhow::ensure!(max > 0 || a.subscribers == 0, "no subscriber received anything");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_events_are_valid_and_carry_the_clock() {
        let mut g = Gen::new(2);
        let body = g.body(3, 1234);
        for l in body.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            aep_schemas::validate::validate_value(&v).unwrap();
            assert_eq!(find_ts(format!("data: {l}").as_bytes()), Some(1234));
        }
        assert_eq!(body.lines().count(), 3);
    }
}
