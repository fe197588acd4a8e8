//! Login throttling: growing delays after wrong tokens, per client and overall, and a
//! refusal log that cannot flood.
//!
//! A token guessed at the web view's login is a token for every ingress, so guessing must
//! be slow whoever guesses: each client (its address) gets a few free failures, then waits
//! 1 s, 2 s, 4 s, ... up to [`Policy::max_ms`] before its next attempt is even looked at;
//! all clients together get a larger free allowance and the same doubling, so many
//! addresses (or every local user, all `127.0.0.1`) do not add up to speed. While a wait
//! runs, an attempt is answered "too many attempts" without its token being compared, right
//! or wrong, so the answer says nothing about the token. A client's failures are forgotten
//! after it logs in, or after [`Policy::forget_ms`] without one.
//!
//! Time comes in as milliseconds (any monotonic clock), so the rules are tested without
//! waiting.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;

/// Milliseconds on a monotonic clock that starts with the process: the waits are not
/// stretched or cut short by the wall clock being set.
pub fn mono_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    u64::try_from(START.get_or_init(std::time::Instant::now).elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One limiter's numbers.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    /// Failures let through before the first wait.
    pub free: u32,
    /// The first wait, doubled after each further failure.
    pub base_ms: u64,
    /// The longest wait.
    pub max_ms: u64,
    /// Failures are forgotten this long after the last one.
    pub forget_ms: u64,
}

/// Per client: 3 free failures, then 1 s doubling up to 60 s, forgotten after 15 min.
pub const PER_CLIENT: Policy = Policy { free: 3, base_ms: 1_000, max_ms: 60_000, forget_ms: 15 * 60_000 };
/// All clients together: 10 free failures, then 1 s doubling up to 30 s.
pub const OVERALL: Policy = Policy { free: 10, base_ms: 1_000, max_ms: 30_000, forget_ms: 15 * 60_000 };

/// Most clients remembered; past it the quietest are forgotten first (an attacker with
/// many addresses still meets the overall limit).
const MAX_CLIENTS: usize = 4096;

/// Refusals are logged at most once per this interval, with counts.
pub const LOG_EVERY_MS: u64 = 10_000;

/// One key's failures.
#[derive(Debug, Default, Clone, Copy)]
struct Record {
    failures: u32,
    last_ms: u64,
    wait_until_ms: u64,
}

impl Record {
    fn fail(&mut self, p: Policy, now: u64) {
        if now.saturating_sub(self.last_ms) > p.forget_ms {
            self.failures = 0;
        }
        self.failures = self.failures.saturating_add(1);
        self.last_ms = now;
        if self.failures > p.free {
            let doublings = (self.failures - p.free - 1).min(30);
            let wait = p.base_ms.saturating_mul(1 << doublings).min(p.max_ms);
            self.wait_until_ms = now.saturating_add(wait);
        }
    }
}

/// What the caller does with an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Compare the token.
    Check,
    /// Refuse without comparing; retry after this many milliseconds.
    Wait(u64),
}

#[derive(Debug, Default)]
struct State {
    clients: HashMap<IpAddr, Record>,
    overall: Record,
    /// Refusals since the last log line: wrong tokens, attempts made to wait.
    unlogged: (u64, u64),
    last_log_ms: Option<u64>,
}

/// The login limiter (one per web view).
#[derive(Debug)]
pub struct LoginThrottle {
    client: Policy,
    overall: Policy,
    state: Mutex<State>,
}

impl Default for LoginThrottle {
    fn default() -> Self {
        Self::new(PER_CLIENT, OVERALL)
    }
}

impl LoginThrottle {
    /// A limiter with these policies.
    pub fn new(client: Policy, overall: Policy) -> Self {
        Self { client, overall, state: Mutex::default() }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `client`'s attempt at `now` may be looked at; a refusal is counted for the log.
    pub fn admit(&self, client: Option<IpAddr>, now: u64) -> Verdict {
        let mut s = self.state();
        let mine = client.and_then(|c| s.clients.get(&c)).map_or(0, |r| r.wait_until_ms);
        let until = mine.max(s.overall.wait_until_ms);
        if until > now {
            s.unlogged.1 += 1;
            return Verdict::Wait(until - now);
        }
        Verdict::Check
    }

    /// A wrong token from `client` at `now`.
    pub fn failed(&self, client: Option<IpAddr>, now: u64) {
        let mut s = self.state();
        s.unlogged.0 += 1;
        let (cp, op) = (self.client, self.overall);
        s.overall.fail(op, now);
        let Some(c) = client else { return };
        if !s.clients.contains_key(&c) && s.clients.len() >= MAX_CLIENTS {
            s.clients.retain(|_, r| now.saturating_sub(r.last_ms) <= cp.forget_ms);
            if s.clients.len() >= MAX_CLIENTS
                && let Some(quietest) = s.clients.iter().min_by_key(|(_, r)| r.last_ms).map(|(k, _)| *k)
            {
                s.clients.remove(&quietest);
            }
        }
        s.clients.entry(c).or_default().fail(cp, now);
    }

    /// `client` logged in: its own failures are forgotten (the overall count stays).
    pub fn succeeded(&self, client: Option<IpAddr>) {
        if let Some(c) = client {
            self.state().clients.remove(&c);
        }
    }

    /// The counts to log now, `(wrong tokens, made to wait)`, at most once per
    /// [`LOG_EVERY_MS`] and only when there is something new; the counts restart.
    pub fn log_due(&self, now: u64) -> Option<(u64, u64)> {
        let mut s = self.state();
        if s.unlogged == (0, 0) || s.last_log_ms.is_some_and(|t| now.saturating_sub(t) < LOG_EVERY_MS) {
            return None;
        }
        s.last_log_ms = Some(now);
        Some(std::mem::take(&mut s.unlogged))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 1)));
    const B: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)));

    /// Guesses `client` makes as fast as it is let, from `start` to `end`; how many were
    /// looked at and how many made to wait.
    fn hammer(t: &LoginThrottle, client: Option<IpAddr>, start: u64, end: u64, step: u64) -> (u32, u32) {
        let (mut checked, mut waited) = (0, 0);
        let mut now = start;
        while now < end {
            match t.admit(client, now) {
                Verdict::Check => {
                    checked += 1;
                    t.failed(client, now);
                }
                Verdict::Wait(_) => waited += 1,
            }
            now += step;
        }
        (checked, waited)
    }

    #[test]
    fn a_client_gets_a_few_free_failures_then_doubling_waits() {
        let t = LoginThrottle::default();
        for i in 0..3 {
            assert_eq!(t.admit(A, 0), Verdict::Check, "free failure {i}");
            t.failed(A, 0);
        }
        assert_eq!(t.admit(A, 0), Verdict::Check, "the third failure set no wait yet");
        t.failed(A, 0);
        assert_eq!(t.admit(A, 0), Verdict::Wait(1_000));
        assert_eq!(t.admit(A, 1_000), Verdict::Check);
        t.failed(A, 1_000);
        assert_eq!(t.admit(A, 1_000), Verdict::Wait(2_000));
        t.failed(A, 3_000);
        assert_eq!(t.admit(A, 3_000), Verdict::Wait(4_000));
        // Another client is not made to wait for it (the overall limit is not reached).
        assert_eq!(t.admit(B, 3_000), Verdict::Check);
        // Logging in forgets the client's failures.
        t.succeeded(A);
        assert_eq!(t.admit(A, 3_000), Verdict::Check);
    }

    #[test]
    fn the_wait_is_capped_and_failures_are_forgotten_after_a_quiet_spell() {
        let t = LoginThrottle::new(PER_CLIENT, Policy { free: u32::MAX, ..OVERALL });
        for _ in 0..40 {
            t.failed(A, 0);
        }
        assert_eq!(t.admit(A, 0), Verdict::Wait(PER_CLIENT.max_ms));
        let later = PER_CLIENT.forget_ms + 1;
        assert_eq!(t.admit(A, later), Verdict::Check);
        t.failed(A, later);
        assert_eq!(t.admit(A, later), Verdict::Check, "a failure after a quiet spell is a first one");
    }

    /// An hour of guessing as fast as answers come (every 10 ms): one client is looked at
    /// about once a minute, and a thousand clients together about once per 30 s.
    #[test]
    fn guessing_for_an_hour_gets_a_few_hundred_looks_at_most() {
        let hour = 3_600_000;
        let t = LoginThrottle::default();
        let (checked, waited) = hammer(&t, A, 0, hour, 10);
        assert!(checked <= 3 + 7 + hour as u32 / 60_000, "{checked} looked at");
        assert!(waited > 350_000, "{waited}");
        let t = LoginThrottle::default();
        let mut checked = 0;
        let mut now = 0;
        while now < hour {
            let c = Some(IpAddr::V4(std::net::Ipv4Addr::from(u32::try_from(now / 10 % 1000).unwrap())));
            if t.admit(c, now) == Verdict::Check {
                checked += 1;
                t.failed(c, now);
            }
            now += 10;
        }
        assert!(checked <= 10 + 6 + hour as u32 / 30_000, "{checked} looked at across a thousand clients");
    }

    #[test]
    fn the_log_says_it_once_per_interval_with_counts() {
        let t = LoginThrottle::default();
        assert_eq!(t.log_due(0), None, "nothing to say");
        let (checked, waited) = hammer(&t, A, 0, 5_000, 5);
        assert_eq!(t.log_due(5_000), Some((u64::from(checked), u64::from(waited))));
        hammer(&t, A, 5_000, 9_000, 5);
        assert_eq!(t.log_due(9_000), None, "within the interval");
        let due = t.log_due(15_000).unwrap();
        assert!(due.1 > 0, "{due:?}");
        assert_eq!(t.log_due(40_000), None, "nothing new");
    }
}
