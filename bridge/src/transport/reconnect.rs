//! The one reconnect supervisor: every long-lived outbound link (the relay client, each
//! observer's streams and sockets, [`super::link`]) is run by [`supervise`] under a
//! [`Policy`], instead of a loop of its own.
//!
//! A link is a [`Link`]: [`Link::session`] opens one connection and runs it until it ends,
//! saying whether to stop or to reconnect and whether the connection was *established*
//! (its handshake answered, frames delivered). Between sessions the supervisor waits the
//! transport's one backoff curve ([`RetryConfig`]: exponential, jittered, capped), starts
//! the curve over after an established connection that stayed up
//! [`Policy::stable_after`] (so a peer that accepts and drops at once is not hammered at
//! the first wait), logs every reconnect (the first failure in a row at `warn`, the next
//! ones at `debug`: a peer that is down for hours does not fill the log), and once the
//! stop token is cancelled drops the session or the wait at once.
//!
//! Where the links differ, the difference is a parameter, not a copy:
//! - the relay is a sink, not an observer: it drains through shutdown (its outbox, then a
//!   `closing` frame), so it is supervised without a stop token (`stop = None`) and keeps
//!   queueing events while it waits ([`Link::pause`]; a shutdown cuts that wait short for
//!   a last delivery attempt);
//! - an observer's link also ends when its observer closes it (the server no longer has
//!   what it watched), during a session or a wait: its `session` and `pause` race that
//!   command;
//! - an SSE server's `retry:` advice raises the next wait, within the cap
//!   ([`Retry::wait_at_least`]).
//!
//! The curve ([`Backoff`]) is pure and also paces the blocking `aep-bridge tail` client.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::retry::{RetryConfig, random_unit};

/// How a link reconnects: the wait curve and when a connection counts as stable.
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The wait curve: the transport's one backoff. Its `max_elapsed_ms` is unused: a link
    /// is reconnected for as long as the bridge runs.
    pub backoff: RetryConfig,
    /// How long an established connection must have stayed up (counted from its connect)
    /// for the next wait to start the curve over.
    pub stable_after: Duration,
}

/// The default [`Policy::stable_after`]: long enough that a peer accepting and dropping
/// connections is backed off, short against a connection's usual life.
pub const STABLE_AFTER: Duration = Duration::from_secs(10);

impl Policy {
    /// Doubling waits from `initial_ms` to `max_ms`, spread by `jitter` (a fraction, 0..=1),
    /// started over after a connection stable for [`STABLE_AFTER`].
    pub fn new(initial_ms: u64, max_ms: u64, jitter: f64) -> Self {
        Self {
            backoff: RetryConfig { initial_ms, max_ms, max_elapsed_ms: 0, multiplier: 2.0, jitter },
            stable_after: STABLE_AFTER,
        }
    }
}

/// The reconnect curve's state: failures in a row since the last stable connection.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: Policy,
    failures: u32,
}

impl Backoff {
    /// A curve at its start.
    pub fn new(policy: Policy) -> Self {
        Self { policy, failures: 0 }
    }

    /// Connections in a row that ended unstable (0 at the start and after a stable one).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The wait before the next connection, after one that was established for `up`
    /// (`None`: never established). `at_least` is the peer's own advice, honoured up to the
    /// cap; `rand` in `[0, 1)` spreads the computed wait by the policy's jitter.
    pub fn next(&mut self, up: Option<Duration>, at_least: Option<Duration>, rand: f64) -> Duration {
        if up.is_some_and(|u| u >= self.policy.stable_after) {
            self.failures = 0;
        }
        let b = &self.policy.backoff;
        let mut wait = b.backoff_jittered(self.failures, rand);
        if let Some(hint) = at_least {
            wait = wait.max(hint.min(Duration::from_millis(b.max_ms)));
        }
        self.failures = self.failures.saturating_add(1);
        wait
    }
}

/// Why a session ended and the link wants to reconnect.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retry {
    /// What went wrong; `None` when the peer closed cleanly.
    pub error: Option<String>,
    /// The connection got far enough to count as up (its handshake answered, frames delivered).
    pub established: bool,
    /// The peer's own advice for the next wait (SSE `retry:`).
    pub at_least: Option<Duration>,
}

impl Retry {
    /// The connection failed: `error` says how.
    pub fn failed(error: impl Into<String>) -> Self {
        Self { error: Some(error.into()), ..Self::default() }
    }

    /// The peer closed the connection cleanly.
    pub fn closed() -> Self {
        Self::default()
    }

    /// Marks whether the connection was established before it ended.
    pub fn was_established(mut self, established: bool) -> Self {
        self.established = established;
        self
    }

    /// The peer's advice for the next wait, if it gave one.
    pub fn wait_at_least(mut self, at_least: Option<Duration>) -> Self {
        self.at_least = at_least;
        self
    }
}

/// How one session of a link ended.
#[derive(Debug)]
pub enum Ended<T> {
    /// The link is done: the supervisor returns `T`.
    Stop(T),
    /// Reconnect after the policy's wait.
    Retry(Retry),
}

/// A long-lived outbound connection the supervisor keeps up.
pub trait Link: Send {
    /// What the link ends with when it stops on its own (not by the stop token).
    type Output: Send;

    /// One connection, from connect to its end.
    fn session(&mut self) -> impl Future<Output = Ended<Self::Output>> + Send;

    /// What the link does while it waits to reconnect at `until`: by default nothing.
    /// `None` reconnects (at `until`, or earlier when the link has a reason); `Some`
    /// stops the link with that output.
    fn pause(&mut self, until: Instant) -> impl Future<Output = Option<Self::Output>> + Send {
        async move {
            tokio::time::sleep_until(until).await;
            None
        }
    }
}

/// Runs `link` session after session under `policy` until it stops on its own
/// (`Some(output)`) or `stop` is cancelled (`None`, at once: the session or the wait in
/// progress is dropped). Without a stop token the link handles shutdown itself. `name`
/// labels the link in the log.
pub async fn supervise<L: Link>(
    name: &str,
    policy: &Policy,
    stop: Option<&CancellationToken>,
    link: &mut L,
) -> Option<L::Output> {
    let never = CancellationToken::new();
    let stop = stop.unwrap_or(&never);
    let mut backoff = Backoff::new(policy.clone());
    loop {
        let started = Instant::now();
        let ended = tokio::select! {
            biased;
            _ = stop.cancelled() => return None,
            ended = link.session() => ended,
        };
        let retry = match ended {
            Ended::Stop(out) => return Some(out),
            Ended::Retry(r) => r,
        };
        // A lost connection is news; the same failure again and again is not.
        let first = retry.established || backoff.failures() == 0;
        let wait = backoff.next(retry.established.then(|| started.elapsed()), retry.at_least, random_unit());
        let (wait_ms, attempt) = (wait.as_millis() as u64, backoff.failures());
        match &retry.error {
            None => tracing::info!(link = name, wait_ms, "The connection closed; reconnecting."),
            Some(error) if first => tracing::warn!(link = name, error, wait_ms, "The connection failed; reconnecting."),
            Some(error) => {
                tracing::debug!(link = name, error, wait_ms, attempt, "The connection failed again; reconnecting.")
            }
        }
        tokio::select! {
            biased;
            _ = stop.cancelled() => return None,
            out = link.pause(Instant::now() + wait) => {
                if let Some(out) = out {
                    return Some(out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    fn policy(initial_ms: u64, max_ms: u64) -> Policy {
        Policy { stable_after: Duration::from_secs(10), ..Policy::new(initial_ms, max_ms, 0.0) }
    }

    fn ms(n: &[u64]) -> Vec<Duration> {
        n.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn waits_grow_to_the_cap_and_start_over_after_a_stable_connection() {
        let mut b = Backoff::new(policy(100, 1000));
        let waits: Vec<Duration> = (0..6).map(|_| b.next(None, None, 0.5)).collect();
        assert_eq!(waits, ms(&[100, 200, 400, 800, 1000, 1000]));
        assert_eq!(b.failures(), 6);
        // Established but dropped before `stable_after`: a flap, the curve goes on.
        assert_eq!(b.next(Some(Duration::from_secs(9)), None, 0.5), Duration::from_millis(1000));
        // Stable: the next wait is the first one again.
        assert_eq!(b.next(Some(Duration::from_secs(10)), None, 0.5), Duration::from_millis(100));
        assert_eq!(b.next(None, None, 0.5), Duration::from_millis(200));
    }

    #[test]
    fn the_peers_advice_raises_a_wait_within_the_cap_and_jitter_spreads_it() {
        let mut b = Backoff::new(policy(100, 1000));
        assert_eq!(b.next(None, Some(Duration::from_millis(700)), 0.5), Duration::from_millis(700));
        // Advice below the curve does not shorten it, above the cap is cut to it.
        assert_eq!(b.next(None, Some(Duration::from_millis(10)), 0.5), Duration::from_millis(200));
        assert_eq!(b.next(None, Some(Duration::from_secs(60)), 0.5), Duration::from_millis(1000));
        let mut j = Backoff::new(Policy::new(1000, 10_000, 0.5));
        let w = j.next(None, None, 0.0);
        assert_eq!(w, Duration::from_millis(500), "jitter 0.5 at rand 0 halves the wait");
    }

    /// A link whose sessions are scripted: each records when it started, then runs for its
    /// duration (paused time) and ends as told.
    struct Scripted {
        script: Vec<(Duration, Ended<&'static str>)>,
        starts: Arc<Mutex<Vec<Instant>>>,
    }

    impl Link for Scripted {
        type Output = &'static str;

        async fn session(&mut self) -> Ended<&'static str> {
            self.starts.lock().unwrap().push(Instant::now());
            if self.script.is_empty() {
                // Out of script: a connection that stays up until stopped.
                std::future::pending::<()>().await;
            }
            let (runs_for, ends) = self.script.remove(0);
            tokio::time::sleep(runs_for).await;
            ends
        }
    }

    fn gaps(starts: &[Instant], ends: &[Duration]) -> Vec<Duration> {
        // The wait before each session: its start less the previous start and session time.
        starts.windows(2).zip(ends).map(|(w, ran)| w[1] - w[0] - *ran).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn the_driver_backs_off_resets_after_a_stable_session_and_returns_a_stop() {
        let fail = || Ended::Retry(Retry::failed("refused"));
        let stable = Ended::Retry(Retry::closed().was_established(true));
        let flap = Ended::Retry(Retry::failed("dropped").was_established(true));
        let script = vec![
            (Duration::ZERO, fail()),
            (Duration::ZERO, fail()),
            (Duration::ZERO, fail()),
            (Duration::from_secs(30), stable),
            (Duration::from_secs(1), flap),
            (Duration::ZERO, Ended::Stop("done")),
        ];
        let ran: Vec<Duration> = script.iter().map(|(d, _)| *d).collect();
        let starts = Arc::new(Mutex::new(Vec::new()));
        let mut link = Scripted { script, starts: starts.clone() };
        let out = supervise("test", &policy(100, 1000), Some(&CancellationToken::new()), &mut link).await;
        assert_eq!(out, Some("done"));
        let starts = starts.lock().unwrap().clone();
        // 100, 200, 400 while failing; the stable session starts over at 100; the flap
        // (up 1 s < 10 s) goes on to 200.
        assert_eq!(gaps(&starts, &ran), ms(&[100, 200, 400, 100, 200]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_ends_a_session_or_a_wait_at_once() {
        let stop = CancellationToken::new();
        let t0 = Instant::now();
        // A session that never ends on its own.
        let mut up = Scripted { script: Vec::new(), starts: Arc::default() };
        let s = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            s.cancel();
        });
        assert_eq!(supervise("test", &policy(100, 1000), Some(&stop), &mut up).await, None);
        assert_eq!(t0.elapsed(), Duration::from_secs(3));
        // A wait of an hour, stopped a second in.
        let stop = CancellationToken::new();
        let t0 = Instant::now();
        let starts = Arc::new(Mutex::new(Vec::new()));
        let mut down = Scripted { script: vec![(Duration::ZERO, Ended::Retry(Retry::failed("x")))], starts };
        let s = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            s.cancel();
        });
        assert_eq!(supervise("test", &policy(3_600_000, 3_600_000), Some(&stop), &mut down).await, None);
        assert_eq!(t0.elapsed(), Duration::from_secs(1));
        // Already stopped: no session is started.
        let mut idle = Scripted { script: Vec::new(), starts: Arc::default() };
        assert_eq!(supervise("test", &policy(100, 1000), Some(&stop), &mut idle).await, None);
        assert!(idle.starts.lock().unwrap().is_empty());
    }

    /// A link that handles shutdown itself (the relay's shape): its pause ends early.
    struct Draining {
        stop: CancellationToken,
        sessions: u32,
    }

    impl Link for Draining {
        type Output = u32;

        async fn session(&mut self) -> Ended<u32> {
            self.sessions += 1;
            if self.stop.is_cancelled() {
                return Ended::Stop(self.sessions);
            }
            Ended::Retry(Retry::failed("down"))
        }

        async fn pause(&mut self, until: Instant) -> Option<u32> {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => {}
                _ = self.stop.cancelled() => {}
            }
            None
        }
    }

    #[tokio::test(start_paused = true)]
    async fn without_a_stop_token_the_link_decides_and_its_pause_may_end_early() {
        let stop = CancellationToken::new();
        let mut link = Draining { stop: stop.clone(), sessions: 0 };
        let s = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            s.cancel();
        });
        let t0 = Instant::now();
        // Waits of an hour: the shutdown at 5 s cuts the first short for one last session.
        let out = supervise("test", &policy(3_600_000, 3_600_000), None, &mut link).await;
        assert_eq!((out, t0.elapsed()), (Some(2), Duration::from_secs(5)));
    }
}
