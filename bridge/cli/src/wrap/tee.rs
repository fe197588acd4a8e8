//! `aep-bridge wrap <protocol> -- <agent...>`: the stdio tee (AEP-0002 Annex A.13, the
//! ACP design record's command-substitution attach, applied to every newline-framed stdio
//! protocol in [`aep_adapters::protocols`]).
//!
//! Transparency is the contract, delivery comes second:
//! - the agent is spawned with piped stdin/stdout and the caller's stderr (inherited, so
//!   untouched); each pump copies every byte it reads to the other side and flushes it
//!   *before* any mapping work, so a line is never delayed, reordered or rewritten;
//! - a copy of each complete line goes to a bounded queue; when the queue is full the line
//!   is dropped for the mapper and counted, never waited for;
//! - each read is numbered (across both pumps) before its write, and the mapper puts the
//!   lines it gathered within a short window back in that order, so an answer never
//!   precedes the request it answers because one pump was descheduled before enqueueing;
//! - one mapper thread maps lines with the pure protocol module, stamps full AEP events and
//!   posts them to the running bridge's collector (`POST /events`, NDJSON, `AEP_TOKEN` as
//!   the bearer). A bridge that is down or refuses costs a counted, dropped batch
//!   (fail-open);
//! - the agent's exit code is the tee's exit code (`128 + signal` when it was killed).
//!   Queued observations get a short grace (`drain`) after the agent exits, then die with
//!   the process;
//! - SIGINT, SIGTERM and SIGHUP sent to the tee are forwarded to the agent, and the tee
//!   keeps waiting for it: the agent decides how to end, its exit code stays the tee's. The
//!   agent runs in its own process group, so a terminal's Ctrl-C (sent to the foreground
//!   group, the tee's) reaches it once, through the tee, not twice.

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{self, Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::thread;
use std::time::{Duration, Instant};

use aep_adapters::protocols::{self, Direction, LineMapper};
use aep_adapters::{EventDraft, MapContext};
use aep_schemas::{AEP_VERSION, Event};

use crate::client::Endpoint;

/// The longest line handed to the mapper; a longer one still passes through, unmapped.
pub const MAX_LINE: usize = 4 << 20;

/// Lines per POST at most.
const BATCH: usize = 256;

/// How the tee runs.
#[derive(Debug, Clone)]
pub struct WrapOptions {
    /// The protocol (see [`protocols::STDIO_PROTOCOLS`]).
    pub protocol: String,
    /// The agent command and its arguments.
    pub command: Vec<OsString>,
    /// The bridge's collector.
    pub endpoint: Endpoint,
    /// Lines the mapper queue holds before new ones are dropped.
    pub queue: usize,
    /// How long queued observations may still be delivered after the agent exits.
    pub drain: Duration,
    /// Per-POST timeout.
    pub post_timeout: Duration,
    /// Capture posture of the mapping.
    pub cx: MapContext,
    /// Protocol opt-ins (deltas).
    pub opts: protocols::Options,
    /// The `host` of the events' `source` URIs.
    pub host: String,
}

/// Why the tee could not run the agent at all (everything after the spawn fails open).
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    /// The protocol is not one the tee speaks.
    #[error("unknown protocol {0:?} (known: {known})", known = protocols::STDIO_PROTOCOLS.join(", "))]
    UnknownProtocol(String),
    /// No agent command was given.
    #[error("no agent command: use `aep-bridge wrap <protocol> -- <agent command...>`")]
    NoCommand,
    /// The agent could not be started.
    #[error("cannot start {cmd}: {err}")]
    Spawn {
        /// The program.
        cmd: String,
        /// The OS error.
        err: io::Error,
    },
}

impl WrapError {
    /// The exit code a shell would give for the same failure (127: not found, 126: not
    /// executable, 64: usage).
    pub fn exit_code(&self) -> i32 {
        match self {
            WrapError::UnknownProtocol(_) | WrapError::NoCommand => 64,
            WrapError::Spawn { err, .. } if err.kind() == io::ErrorKind::NotFound => 127,
            WrapError::Spawn { .. } => 126,
        }
    }
}

/// What the tee counted (printed to stderr only with `AEP_WRAP_STATS=1`, so the agent's
/// own stderr stays exactly its own).
#[derive(Debug, Default)]
pub struct Stats {
    /// Complete lines seen (both directions).
    pub lines: AtomicU64,
    /// Lines dropped for the mapper (queue full or longer than [`MAX_LINE`]).
    pub dropped: AtomicU64,
    /// Events the bridge accepted.
    pub delivered: AtomicU64,
    /// Events lost to a failed or refused POST.
    pub failed: AtomicU64,
    /// Drafts not sent: a session event with no session yet, or not a valid event.
    pub skipped: AtomicU64,
    /// Set once the agent's stdout is drained: the mapper stops at its next idle moment.
    finished: AtomicBool,
}

struct Line {
    dir: Direction,
    /// (read number across both pumps, line within that read): the order the tee saw the
    /// lines complete, which the queue order may not keep (two pumps enqueue independently).
    order: (u64, u32),
    bytes: Vec<u8>,
}

/// How long the mapper gathers lines before putting them back in the tee's order: a pump
/// descheduled between its write and its enqueue must not make an answer precede its request.
const REORDER: Duration = Duration::from_millis(10);

/// Runs the agent under the tee until it exits; returns its exit code.
pub fn run(opts: WrapOptions) -> Result<(i32, Arc<Stats>), WrapError> {
    let epoch = aep_bridge::time::now_ms();
    let mapper = protocols::line_mapper(&opts.protocol, epoch, opts.opts)
        .ok_or_else(|| WrapError::UnknownProtocol(opts.protocol.clone()))?;
    let (program, args) = opts.command.split_first().ok_or(WrapError::NoCommand)?;
    // The handlers are in place before the agent exists: a signal in between is held, then
    // forwarded, never the tee's death.
    let forwarder = signals::Forwarder::install();
    let mut cmd = Command::new(program);
    cmd.args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    #[cfg(unix)]
    if forwarder.is_some() {
        use std::os::unix::process::CommandExt as _;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(|err| WrapError::Spawn { cmd: program.to_string_lossy().into_owned(), err })?;
    let _forwarding = forwarder.map(|f| f.to(child.id()));
    let stats = Arc::new(Stats::default());
    let (tx, rx) = mpsc::sync_channel::<Line>(opts.queue.max(1));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let clock = Arc::new(AtomicU64::new(0));
    let child_in = child.stdin.take();
    let child_out = child.stdout.take();

    // The client -> agent pump runs detached: our stdin may never close (an editor keeps
    // it open), and the agent's exit must not wait for it.
    if let Some(child_in) = child_in {
        let (tx, stats, clock) = (tx.clone(), stats.clone(), clock.clone());
        let _ = thread::Builder::new().name("wrap-stdin".into()).spawn(move || {
            pump(io::stdin().lock(), child_in, Direction::ToAgent, &tx, &stats, &clock);
        });
    }
    let out_pump = child_out.map(|child_out| {
        let (tx, stats, clock) = (tx.clone(), stats.clone(), clock.clone());
        thread::Builder::new().name("wrap-stdout".into()).spawn(move || {
            pump(child_out, io::stdout().lock(), Direction::FromAgent, &tx, &stats, &clock);
        })
    });
    drop(tx);
    {
        let stats = stats.clone();
        let opts = opts.clone();
        let _ = thread::Builder::new().name("wrap-map".into()).spawn(move || {
            deliver(rx, mapper, &opts, epoch, &stats);
            let _ = done_tx.send(());
        });
    }

    let status = child.wait();
    // Everything the agent wrote reaches our stdout before we exit (the pump ends at the
    // agent's EOF; a grandchild holding the pipe open is not waited for beyond the drain).
    if let Some(Ok(h)) = out_pump {
        let deadline = Instant::now() + opts.drain.max(Duration::from_millis(200));
        while !h.is_finished() && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(2));
        }
        if h.is_finished() {
            let _ = h.join();
        }
    }
    // The stdin pump may hold a sender for as long as our stdin is open: the mapper stops at
    // its first idle moment instead, within the drain window at most.
    stats.finished.store(true, Ordering::Relaxed);
    let _ = done_rx.recv_timeout(opts.drain);
    let code = match status {
        Ok(s) => exit_code(s),
        Err(_) => 1,
    };
    Ok((code, stats))
}

/// Forwarding SIGINT, SIGTERM and SIGHUP to the agent (unix; elsewhere nothing is installed).
mod signals {
    /// Handlers installed, waiting for the agent's pid.
    pub struct Forwarder {
        #[cfg(unix)]
        pid: tokio::sync::oneshot::Sender<u32>,
        #[cfg(unix)]
        stop: tokio::sync::oneshot::Sender<()>,
    }

    /// Forwarding to a running agent; dropping it stops forwarding.
    pub struct Forwarding {
        #[cfg(unix)]
        _stop: tokio::sync::oneshot::Sender<()>,
    }

    impl Forwarder {
        /// Installs the handlers (on a small signal thread); `None` when they cannot be.
        #[cfg(unix)]
        pub fn install() -> Option<Self> {
            use tokio::signal::unix::{SignalKind, signal};
            let (pid_tx, pid_rx) = tokio::sync::oneshot::channel::<u32>();
            let (ready_tx, ready_rx) = std::sync::mpsc::channel::<bool>();
            let (stop_fwd, stop_here) = tokio::sync::oneshot::channel::<()>();
            let spawned = std::thread::Builder::new().name("wrap-signals".into()).spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    let _ = ready_tx.send(false);
                    return;
                };
                rt.block_on(async move {
                    let kinds = [
                        (SignalKind::interrupt(), rustix::process::Signal::INT),
                        (SignalKind::terminate(), rustix::process::Signal::TERM),
                        (SignalKind::hangup(), rustix::process::Signal::HUP),
                    ];
                    let mut streams = Vec::new();
                    for (kind, sig) in kinds {
                        match signal(kind) {
                            Ok(s) => streams.push((s, sig)),
                            Err(_) => {
                                let _ = ready_tx.send(false);
                                return;
                            }
                        }
                    }
                    let _ = ready_tx.send(true);
                    let [(mut int, si), (mut term, st), (mut hup, sh)] =
                        <[_; 3]>::try_from(streams).unwrap_or_else(|_| unreachable!("three kinds"));
                    // Signals before the agent exists are held, then forwarded in order.
                    let mut held = Vec::new();
                    let mut pid_rx = pid_rx;
                    let pid = loop {
                        tokio::select! {
                            p = &mut pid_rx => match p { Ok(p) => break p, Err(_) => return },
                            _ = int.recv() => held.push(si),
                            _ = term.recv() => held.push(st),
                            _ = hup.recv() => held.push(sh),
                        }
                    };
                    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return };
                    let send = |sig| {
                        let _ = rustix::process::kill_process(pid, sig);
                    };
                    held.into_iter().for_each(send);
                    let mut stop = stop_here;
                    loop {
                        tokio::select! {
                            _ = &mut stop => return,
                            _ = int.recv() => send(si),
                            _ = term.recv() => send(st),
                            _ = hup.recv() => send(sh),
                        }
                    }
                });
            });
            // The thread always answers (or drops its sender): no timeout to lose a race
            // with on a loaded machine (which left the agent unforwarded in its own group).
            if spawned.is_err() || ready_rx.recv() != Ok(true) {
                return None;
            }
            Some(Self { pid: pid_tx, stop: stop_fwd })
        }

        /// No forwarding outside unix.
        #[cfg(not(unix))]
        pub fn install() -> Option<Self> {
            None
        }

        /// Starts forwarding to the agent `pid`.
        #[cfg(unix)]
        pub fn to(self, pid: u32) -> Forwarding {
            let _ = self.pid.send(pid);
            Forwarding { _stop: self.stop }
        }

        /// No forwarding outside unix.
        #[cfg(not(unix))]
        pub fn to(self, _pid: u32) -> Forwarding {
            Forwarding {}
        }
    }
}

#[cfg(unix)]
fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code().or_else(|| s.signal().map(|sig| 128 + sig)).unwrap_or(1)
}

#[cfg(not(unix))]
fn exit_code(s: std::process::ExitStatus) -> i32 {
    s.code().unwrap_or(1)
}

/// Copies `from` to `to` byte for byte (each read written and flushed before anything
/// else), then hands each complete line to the mapper queue without ever blocking on it.
/// Ends at EOF, or when `to` refuses a write: dropping `from` then gives the writer on the
/// other side the same broken pipe it would have had without the tee.
fn pump(
    mut from: impl Read,
    mut to: impl Write,
    dir: Direction,
    tx: &SyncSender<Line>,
    stats: &Stats,
    clock: &AtomicU64,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut oversize = false;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        // Numbered before the write: whatever this read causes on the other side reads later.
        let tick = clock.fetch_add(1, Ordering::Relaxed);
        let chunk = &buf[..n];
        if to.write_all(chunk).and_then(|()| to.flush()).is_err() {
            break;
        }
        for (i, piece) in chunk.split(|b| *b == b'\n').enumerate() {
            if i > 0 {
                // `piece` follows a newline: the line before it is complete.
                let complete = std::mem::take(&mut line);
                stats.lines.fetch_add(1, Ordering::Relaxed);
                if oversize {
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    oversize = false;
                } else if !complete.iter().all(u8::is_ascii_whitespace) {
                    let order = (tick, u32::try_from(i).unwrap_or(u32::MAX));
                    match tx.try_send(Line { dir, order, bytes: complete }) {
                        Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                        Err(TrySendError::Full(_)) => {
                            stats.dropped.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
            if !oversize {
                if line.len() + piece.len() > MAX_LINE {
                    oversize = true;
                    line = Vec::new();
                } else {
                    line.extend_from_slice(piece);
                }
            }
        }
    }
    // A last line without a newline is not a complete frame: it passed through, unmapped.
}

/// The tee's stamping: the bridge's one stamper ([`aep_bridge::stamp::Stamper`], sessions
/// numbered from 1), under the agent each session was first seen with.
struct Stamper {
    stamper: aep_bridge::stamp::Stamper,
    /// The agent of sessions first seen from now on (and of agent-scoped events).
    agent: Cow<'static, str>,
    /// The agent each session was first seen with: a session never changes agent.
    sessions: HashMap<String, Cow<'static, str>>,
}

/// The agent name as a `'static` borrow, so every event's `agent` is a free copy: a tee
/// leaks its protocol's name once and at most one name the wire gives (the mappers keep the
/// first), a few bytes per process.
fn leak(agent: &str) -> &'static str {
    Box::leak(agent.to_owned().into_boxed_str())
}

impl Stamper {
    fn new(agent: &str, host: String, epoch: u64) -> Self {
        let stamper = aep_bridge::stamp::stamper(epoch, host).first_seq(1);
        Stamper { stamper, agent: Cow::Borrowed(leak(agent)), sessions: HashMap::new() }
    }

    /// Adopts the agent the wire named (ACP's `agentInfo.name`) for sessions first seen from
    /// now on.
    fn adopt_agent(&mut self, agent: &str) {
        if agent != self.agent {
            self.agent = Cow::Borrowed(leak(agent));
        }
    }

    /// The event of `d`; `None` for a session-scoped draft without a session yet.
    fn stamp(&mut self, d: EventDraft) -> Option<Event> {
        // AEP-0001 §5.2: `agent.*` events (a vendor's `x.{vendor}.agent.*` too) belong to the
        // agent, not a session.
        let agent = if aep_schemas::event::is_agent_scoped(&d.r#type) {
            self.agent.clone()
        } else {
            let session = d.session.as_ref()?;
            match self.sessions.get(session) {
                Some(a) => a.clone(),
                None => {
                    self.sessions.insert(session.clone(), self.agent.clone());
                    self.agent.clone()
                }
            }
        };
        Some(self.stamper.stamp(agent, d, aep_bridge::time::now_ms()).0)
    }
}

/// The mapper thread: maps queued lines, stamps, validates, and posts NDJSON batches.
fn deliver(rx: Receiver<Line>, mut mapper: Box<dyn LineMapper>, opts: &WrapOptions, epoch: u64, stats: &Stats) {
    let agent = match opts.endpoint.http_agent(Some(opts.post_timeout)) {
        Ok(a) => a,
        Err(e) => {
            // Fail open: the agent runs on, its events are counted as not delivered.
            eprintln!("aep-bridge wrap: {e}; events are not reported");
            ureq::Agent::config_builder().http_status_as_error(false).build().new_agent()
        }
    };
    let url = format!("{}/events", opts.endpoint.base);
    let mut stamper = Stamper::new(mapper.agent(), opts.host.clone(), epoch);
    // The agent's output is over: what the mapper still holds goes out last.
    let finish = |mapper: &mut Box<dyn LineMapper>, stamper: &mut Stamper| {
        let mut body = String::new();
        let n = stamp_into(mapper.finish(&opts.cx), stamper, &mut body, stats);
        if n > 0 {
            post(&agent, &url, opts, &body, n, stats);
        }
    };
    loop {
        let first = match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) if stats.finished.load(Ordering::Relaxed) => {
                return finish(&mut mapper, &mut stamper);
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => return finish(&mut mapper, &mut stamper),
        };
        let mut lines = vec![first];
        let window = Instant::now() + REORDER;
        let mut gone = false;
        while lines.len() < BATCH {
            match rx.recv_timeout(window.saturating_duration_since(Instant::now())) {
                Ok(l) => lines.push(l),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => {
                    gone = true;
                    break;
                }
            }
        }
        lines.sort_by_key(|l| l.order);
        let mut body = String::new();
        let mut n = 0u64;
        for line in lines {
            let drafts = mapper.map_line(line.dir, &line.bytes, &opts.cx);
            stamper.adopt_agent(mapper.agent());
            n += stamp_into(drafts, &mut stamper, &mut body, stats);
        }
        if n > 0 {
            post(&agent, &url, opts, &body, n, stats);
        }
        if gone {
            return finish(&mut mapper, &mut stamper);
        }
    }
}

/// Stamps drafts and appends the valid events to an NDJSON `body`; returns how many.
fn stamp_into(drafts: Vec<EventDraft>, stamper: &mut Stamper, body: &mut String, stats: &Stats) -> u64 {
    let mut n = 0;
    for d in drafts {
        match stamper.stamp(d).map(|ev| serde_json::to_value(&ev)) {
            // Validated here so one bad draft never costs the whole batch its 202.
            Some(Ok(v)) if aep_schemas::validate::validate_value(&v).is_ok() => {
                body.push_str(&v.to_string());
                body.push('\n');
                n += 1;
            }
            _ => {
                stats.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    n
}

/// POSTs one NDJSON batch of `n` events; a refusal or an unreachable bridge costs the batch.
fn post(agent: &ureq::Agent, url: &str, opts: &WrapOptions, body: &str, n: u64, stats: &Stats) {
    let mut req = agent.post(url).header("content-type", "application/x-ndjson").header("aep-version", AEP_VERSION);
    if let Some(t) = &opts.endpoint.token {
        req = req.header("authorization", &format!("Bearer {t}"));
    }
    match req.send(body.as_bytes()) {
        Ok(r) if r.status().as_u16() == 202 => stats.delivered.fetch_add(n, Ordering::Relaxed),
        _ => stats.failed.fetch_add(n, Ordering::Relaxed),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pump_copies_bytes_and_queues_complete_lines_only() {
        let input: &[u8] = b"{\"a\":1}\r\npartial-no-newline";
        let mut out = Vec::new();
        let (tx, rx) = mpsc::sync_channel(8);
        let stats = Stats::default();
        pump(input, &mut out, Direction::FromAgent, &tx, &stats, &AtomicU64::new(0));
        assert_eq!(out, input, "byte for byte");
        let lines: Vec<Vec<u8>> = rx.try_iter().map(|l| l.bytes).collect();
        assert_eq!(lines, vec![b"{\"a\":1}\r".to_vec()]);
        assert_eq!(stats.lines.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let input = b"1\n2\n3\n\n".repeat(3);
        let mut out = Vec::new();
        let (tx, rx) = mpsc::sync_channel(2);
        let stats = Stats::default();
        pump(&input[..], &mut out, Direction::ToAgent, &tx, &stats, &AtomicU64::new(0));
        assert_eq!(out, input);
        assert_eq!(rx.try_iter().count(), 2);
        // 12 complete lines, 3 blank (never queued), 2 queued: 7 dropped.
        assert_eq!(stats.lines.load(Ordering::Relaxed), 12);
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn an_oversize_line_passes_through_unmapped() {
        let mut input = vec![b'x'; MAX_LINE + 10];
        input.extend_from_slice(b"\n{}\n");
        let mut out = Vec::new();
        let (tx, rx) = mpsc::sync_channel(8);
        let stats = Stats::default();
        pump(&input[..], &mut out, Direction::FromAgent, &tx, &stats, &AtomicU64::new(0));
        assert_eq!(out.len(), input.len());
        let lines: Vec<Vec<u8>> = rx.try_iter().map(|l| l.bytes).collect();
        assert_eq!(lines, vec![b"{}".to_vec()]);
        assert_eq!(stats.dropped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn the_stamper_numbers_sessions_and_links_causes() {
        let mut st = Stamper::new("acp", "h".into(), 9);
        let mut req = EventDraft::new("attention.requested", aep_schemas::Capture::Redacted);
        req.session = Some("s".into());
        req.correlation_key = Some("k".into());
        let req = st.stamp(req).unwrap();
        let mut ans = EventDraft::new("attention.resolved", aep_schemas::Capture::Redacted);
        ans.session = Some("s".into());
        ans.cause_key = Some("k".into());
        let ans = st.stamp(ans).unwrap();
        assert_eq!((req.seq, ans.seq, ans.epoch), (Some(1), Some(2), Some(9)));
        assert_eq!(ans.cause.as_deref(), Some(req.id.as_str()));
        assert_eq!(ans.subject.as_deref(), Some(req.id.as_str()));
        // The session's `source`, built once and shared by its events.
        assert_eq!(&*req.source, "aep://h/agent/acp/session/s");
        assert!(Arc::ptr_eq(&req.source, &ans.source));
        assert!(st.stamp(EventDraft::new("run.started", aep_schemas::Capture::Metadata)).is_none(), "no session");
        // Agent-scoped events go out without a session (and take no position of one).
        let mut settled = EventDraft::new("x.pi.agent.settled", aep_schemas::Capture::Metadata);
        settled.session = Some("s".into());
        settled.run = Some("r".into());
        let e = st.stamp(settled).unwrap();
        assert_eq!(
            (e.session.as_deref(), e.seq, e.run.as_deref(), &*e.source),
            (None, None, None, "aep://h/agent/acp")
        );
        aep_schemas::validate::validate_event(&e).unwrap();
        let mut next = EventDraft::new("run.started", aep_schemas::Capture::Metadata);
        next.session = Some("s".into());
        assert_eq!(st.stamp(next).unwrap().seq, Some(3), "the session's numbering goes on without a gap");
    }
}
