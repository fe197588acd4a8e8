//! `aep-bridge tail`: follows the collector's SSE stream (AEP-0003 §3.3), one readable line
//! per event, and resumes after a disconnect (`Last-Event-ID`, or `from` positions when
//! several sessions are in flight, AEP-0003 §7) with a capped reconnect backoff (the
//! transport's reconnect curve).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::time::{Duration, Instant};

use aep_schemas::Event;
use clap::Args;
use serde_json::{Value, json};

use crate::client::{Dedupe, Endpoint, SseItem, SseParser, event_line, paint, stdout_color};
use aep_bridge::transport::RetryConfig;
use aep_bridge::transport::reconnect::{Backoff, Policy};

/// Arguments of `aep-bridge tail`.
#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// Collector base URL.
    #[arg(long, env = "AEP_URL")]
    pub url: Option<String>,
    /// Bearer token.
    #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// attr-match filter JSON (AEP-0003 §6), e.g. '{"type":"tool.*"}'.
    #[arg(long)]
    pub filter: Option<String>,
    /// Capture ceiling for delivery: none, metadata, redacted, full.
    #[arg(long)]
    pub capture: Option<String>,
    /// Group by session and run with indentation.
    #[arg(long)]
    pub timeline: bool,
    /// Start position: `all` replays everything the collector holds first.
    #[arg(long)]
    pub from: Option<String>,
    /// Exit when the stream ends instead of reconnecting.
    #[arg(long)]
    pub once: bool,
    /// Exit after printing this many events.
    #[arg(long)]
    pub limit: Option<u64>,
    /// Print each event's raw JSON instead of the readable line.
    #[arg(long)]
    pub json: bool,
}

/// Resume state: the last position per session (AEP-0003 §7).
#[derive(Debug, Default)]
struct Positions(BTreeMap<String, (u64, u64)>);

impl Positions {
    fn note(&mut self, ev: &Event) {
        if let (Some(s), Some(seq)) = (&ev.session, ev.seq) {
            let p = (ev.epoch(), seq);
            let e = self.0.entry(s.clone()).or_insert(p);
            if p > *e {
                *e = p;
            }
        }
    }
}

/// The `/stream` request for a (re)connection: query and `Last-Event-ID`.
fn request_url(args: &TailArgs, base: &str, pos: &Positions) -> (String, Option<String>) {
    let mut q: Vec<(String, String)> = Vec::new();
    if let Some(f) = &args.filter {
        q.push(("filter".into(), f.clone()));
    }
    if let Some(c) = &args.capture {
        q.push(("capture".into(), c.clone()));
    }
    let mut last_id = None;
    if pos.0.is_empty() {
        if let Some(f) = &args.from {
            q.push(("from".into(), f.clone()));
        }
    } else if pos.0.len() == 1 && args.from.is_none() {
        // One session: the standard SSE resume header (AEP-0003 §3.3 rule 3).
        let (s, (e, n)) = pos.0.iter().next().map(|(s, p)| (s.clone(), *p)).unwrap_or_default();
        last_id = Some(format!("{s}:{e}:{n}"));
    } else {
        // Several sessions: exact multi-session resume via `from` (it takes precedence).
        let arr: Vec<Value> = pos.0.iter().map(|(s, (e, n))| json!({"session": s, "epoch": e, "seq": n})).collect();
        q.push(("from".into(), Value::Array(arr).to_string()));
    }
    let qs: Vec<String> = q.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    let url = if qs.is_empty() { format!("{base}/stream") } else { format!("{base}/stream?{}", qs.join("&")) };
    (url, last_id)
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    aep_schemas::ids::percent_encode(s)
}

/// Line layout for `--timeline`: a header when the session or run changes, then indentation.
#[derive(Default)]
struct Grouper {
    session: Option<String>,
    run: Option<String>,
}

impl Grouper {
    fn lines(&mut self, ev: &Event, color: bool, line: String) -> Vec<String> {
        let mut out = Vec::new();
        if ev.session != self.session {
            self.session = ev.session.clone();
            self.run = None;
            let s = ev.session.as_deref().unwrap_or("(agent-scoped)");
            out.push(paint(color, "1;34", &format!("── session {s} ({})", ev.agent)));
        }
        if ev.run.is_some() && ev.run != self.run {
            self.run = ev.run.clone();
            out.push(paint(color, "32", &format!("  ▸ run {}", ev.run.as_deref().unwrap_or(""))));
        }
        let indent = if ev.step.is_some() {
            "      "
        } else if ev.run.is_some() {
            "    "
        } else {
            "  "
        };
        out.push(format!("{indent}{line}"));
        out
    }
}

enum End {
    Limit,
    Stream,
}

/// Runs the command; returns the exit code.
pub fn run(args: TailArgs) -> i32 {
    if let Some(f) = &args.filter
        && serde_json::from_str::<Value>(f).is_err()
    {
        eprintln!("aep-bridge tail: --filter is not JSON");
        return 2;
    }
    let ep = Endpoint::new(args.url.clone(), args.token.clone());
    let color = stdout_color();
    let agent = match ep.http_agent(None) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("aep-bridge tail: {e}");
            return 2;
        }
    };
    let mut pos = Positions::default();
    let mut seen = Dedupe::new(50_000);
    let mut printed = 0u64;
    let mut group = Grouper::default();
    // The transport's reconnect curve, unjittered (one client, no herd): 250 ms doubling to
    // 10 s, back to the start after any answered stream (a person is watching).
    let curve = RetryConfig { initial_ms: 250, max_ms: 10_000, max_elapsed_ms: 0, multiplier: 2.0, jitter: 0.0 };
    let mut backoff = Backoff::new(Policy { backoff: curve, stable_after: Duration::ZERO });
    let mut down = Outage::default();
    loop {
        let started = Instant::now();
        let mut answered = false;
        let (url, last_id) = request_url(&args, &ep.base, &pos);
        let mut req = agent.get(&url).header("accept", "text/event-stream");
        if let Some(t) = &ep.token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        if let Some(id) = &last_id {
            req = req.header("last-event-id", id);
        }
        match req.call() {
            Ok(resp) if resp.status().as_u16() == 200 => {
                answered = true;
                down.over(&ep.base);
                let reader = BufReader::new(resp.into_body().into_reader());
                match consume(reader, &args, color, &mut pos, &mut seen, &mut printed, &mut group) {
                    End::Limit => return 0,
                    End::Stream if args.once => return 0,
                    End::Stream => eprintln!("aep-bridge tail: stream ended; resuming"),
                }
            }
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let body = resp.body_mut().read_to_string().unwrap_or_default();
                eprintln!("aep-bridge tail: {url}: HTTP {status} {}", body.trim());
                // Refusals are not transient: auth and a bad filter do not heal by retrying.
                if matches!(status, 400 | 401 | 403) || args.once {
                    return 1;
                }
            }
            Err(e) => {
                if args.once {
                    eprintln!("aep-bridge tail: {}: {e}", ep.base);
                    return 1;
                }
                if let Some(line) = down.failed(&ep.base, &e.to_string(), Instant::now()) {
                    eprintln!("{line}");
                }
            }
        }
        std::thread::sleep(backoff.next(answered.then(|| started.elapsed()), None, 0.0));
    }
}

/// A bridge that does not answer: said once with what to do, then again only when the
/// error changes or once a minute, so a `tail` left running beside a stopped bridge does not
/// fill the terminal; said when it answers again.
#[derive(Debug, Default)]
struct Outage {
    /// The error last said, and since when the bridge has not answered.
    since: Option<(String, Instant, Instant)>,
}

impl Outage {
    /// How often a lasting outage is said again.
    const REMIND: Duration = Duration::from_secs(60);

    /// The line to print for a failed connection at `now`, if any.
    fn failed(&mut self, base: &str, err: &str, now: Instant) -> Option<String> {
        match &mut self.since {
            None => {
                self.since = Some((err.to_owned(), now, now));
                Some(format!(
                    "aep-bridge tail: {base}: {err}\n  the bridge is not answering: start it (`aep-bridge serve`, or \
                     `aep-bridge service install`), or point --url/AEP_URL at it; retrying until it answers (Ctrl-C to stop)"
                ))
            }
            Some((said, first, last)) if *said != err || now.duration_since(*last) >= Self::REMIND => {
                *said = err.to_owned();
                *last = now;
                Some(format!(
                    "aep-bridge tail: {base}: {err} (not answering for {}s; still retrying)",
                    now.duration_since(*first).as_secs()
                ))
            }
            Some(_) => None,
        }
    }

    /// The bridge answered: says so after an outage.
    fn over(&mut self, base: &str) {
        if self.since.take().is_some() {
            eprintln!("aep-bridge tail: {base}: connected");
        }
    }
}

fn consume(
    reader: impl BufRead,
    args: &TailArgs,
    color: bool,
    pos: &mut Positions,
    seen: &mut Dedupe,
    printed: &mut u64,
    group: &mut Grouper,
) -> End {
    let mut parser = SseParser::default();
    let stdout = std::io::stdout();
    for line in reader.lines() {
        let Ok(line) = line else { break };
        match parser.line(&line) {
            None => {}
            Some(SseItem::Comment(c)) => {
                if let Some(rest) = c.strip_prefix("replay-exhausted") {
                    eprintln!(
                        "aep-bridge tail: replay exhausted for{rest}: events before it are gone from the buffer (see the JSONL log)"
                    );
                }
            }
            Some(SseItem::Message(m)) => {
                let Ok(ev) = Event::from_json(&m.data) else { continue };
                pos.note(&ev);
                if !seen.first(&ev) {
                    continue;
                }
                let text = if args.json { m.data.clone() } else { event_line(&ev, color) };
                let lines = if args.timeline && !args.json { group.lines(&ev, color, text) } else { vec![text] };
                let mut out = stdout.lock();
                for l in lines {
                    if writeln!(out, "{l}").is_err() {
                        return End::Limit;
                    }
                }
                let _ = out.flush();
                *printed += 1;
                if args.limit.is_some_and(|n| *printed >= n) {
                    return End::Limit;
                }
            }
        }
    }
    End::Stream
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> TailArgs {
        TailArgs {
            url: None,
            token: None,
            filter: Some("{\"type\":\"tool.*\"}".into()),
            capture: None,
            timeline: false,
            from: None,
            once: false,
            limit: None,
            json: false,
        }
    }

    /// A stopped bridge is said once with the next step, then only when the error changes
    /// or a minute passed, not on every retry.
    #[test]
    fn an_outage_is_said_once_then_once_a_minute() {
        let mut o = Outage::default();
        let t0 = Instant::now();
        let first = o.failed("http://h", "refused", t0).unwrap();
        assert!(first.contains("aep-bridge serve") && first.contains("retrying"), "{first}");
        for s in 1..60 {
            assert_eq!(o.failed("http://h", "refused", t0 + Duration::from_secs(s)), None);
        }
        assert!(o.failed("http://h", "refused", t0 + Duration::from_secs(60)).unwrap().contains("60s"));
        assert!(o.failed("http://h", "timed out", t0 + Duration::from_secs(61)).is_some(), "a new error is said");
        o.over("http://h");
        assert!(o.failed("http://h", "refused", t0 + Duration::from_secs(62)).unwrap().contains("aep-bridge serve"));
    }

    #[test]
    fn resume_uses_last_event_id_for_one_session_and_from_for_several() {
        let mut p = Positions::default();
        p.0.insert("s1".into(), (0, 4));
        let (url, id) = request_url(&args(), "http://h", &p);
        assert_eq!(id.as_deref(), Some("s1:0:4"));
        assert!(url.starts_with("http://h/stream?filter=%7B"), "{url}");
        p.0.insert("s2".into(), (1, 2));
        let (url, id) = request_url(&args(), "http://h", &p);
        assert_eq!(id, None);
        assert!(url.contains("from=%5B%7B%22session%22%3A%22s1%22"), "{url}");
    }
}
