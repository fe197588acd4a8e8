//! Bearer-token checks shared by every authenticated surface (hooks, OTLP, collector).

pub use aep_receivers::access::{bearer_ok, constant_time_eq};

/// How far a MAC-authenticated request's nonce (a ULID) may be from the bridge's clock.
pub const NONCE_WINDOW_MS: u64 = 60_000;

/// Most nonces remembered; past it the oldest are forgotten first.
const MAX_NONCES: usize = 100_000;

/// How often the bridge notes that it runs ([`Stalls::beat`]).
pub const BEAT_MS: u64 = 500;

/// A gap between beats longer than the beat by this much is a stall.
const STALL_SLACK_MS: u64 = 1_000;

/// Most stall credit a nonce gets: a bridge stopped longer than this (a laptop asleep for a
/// night) refuses what was minted before it, as without the credit.
pub const MAX_STALL_CREDIT_MS: u64 = 3_600_000;

/// Stalls remembered (the oldest forgotten first).
const MAX_STALLS: usize = 64;

/// When this process did not run: stopped (SIGSTOP, a suspended laptop) or starved on a
/// machine far past its cores. A hook call written to the bridge's socket during a stall is
/// read after it with a nonce as old as the stall, though the shim sent it at once; its
/// window is stretched by the stall time since its mint, so the call is logged rather than
/// refused as a replay (each nonce is still taken once).
#[derive(Debug, Default)]
pub struct Stalls {
    inner: std::sync::Mutex<StallBook>,
}

/// The last beat (none yet: no stall can be known) and the stalls seen, as (start, end).
#[derive(Debug, Default)]
struct StallBook {
    last: Option<u64>,
    gaps: std::collections::VecDeque<(u64, u64)>,
}

impl Stalls {
    /// Notes that the bridge runs at `now_ms`; a gap since the last beat longer than
    /// [`BEAT_MS`] plus a slack is recorded as a stall.
    pub fn beat(&self, now_ms: u64) {
        let mut b = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(last) = b.last.filter(|l| now_ms > l.saturating_add(BEAT_MS + STALL_SLACK_MS)) {
            if b.gaps.len() == MAX_STALLS {
                b.gaps.pop_front();
            }
            b.gaps.push_back((last.saturating_add(BEAT_MS), now_ms));
        }
        b.last = Some(b.last.map_or(now_ms, |l| l.max(now_ms)));
    }

    /// Milliseconds of stall between `from_ms` and `now_ms`, counting one still under way
    /// (no beat yet since the process ran again), at most [`MAX_STALL_CREDIT_MS`].
    pub fn between(&self, from_ms: u64, now_ms: u64) -> u64 {
        let b = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let open = b
            .last
            .filter(|l| now_ms > l.saturating_add(BEAT_MS + STALL_SLACK_MS))
            .map(|l| (l.saturating_add(BEAT_MS), now_ms));
        let overlap = |(s, e): (u64, u64)| e.min(now_ms).saturating_sub(s.max(from_ms));
        let total: u64 = b.gaps.iter().copied().chain(open).map(overlap).sum();
        total.min(MAX_STALL_CREDIT_MS)
    }
}

/// Nonces of MAC-authenticated hook calls seen within [`NONCE_WINDOW_MS`] (stretched by the
/// bridge's own stalls since each was minted): each is taken once, so a captured request
/// cannot be replayed.
#[derive(Debug, Default)]
pub struct Nonces {
    seen: std::sync::Mutex<Seen>,
    stalls: Stalls,
}

/// Nonces in the order they were taken (with their mint time), and as a set.
type Seen = (std::collections::VecDeque<(u64, String)>, std::collections::HashSet<String>);

impl Nonces {
    /// The bridge's stall record, beaten by its runtime.
    pub fn stalls(&self) -> &Stalls {
        &self.stalls
    }

    /// Whether a nonce minted at `minted` is still within its window at `now_ms`.
    fn within(&self, minted: u64, now_ms: u64) -> bool {
        let credit =
            if minted.saturating_add(NONCE_WINDOW_MS) < now_ms { self.stalls.between(minted, now_ms) } else { 0 };
        minted.saturating_add(NONCE_WINDOW_MS).saturating_add(credit) >= now_ms
    }

    /// `true` the first time `nonce`, a ULID minted within the window of `now_ms`, is seen.
    pub fn fresh(&self, nonce: &str, now_ms: u64) -> bool {
        let Ok(id) = ulid::Ulid::from_string(nonce) else { return false };
        let minted = id.timestamp_ms();
        if !self.within(minted, now_ms) || minted > now_ms.saturating_add(NONCE_WINDOW_MS) {
            return false;
        }
        let mut g = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (order, set) = &mut *g;
        while let Some((t, _)) = order.front() {
            if self.within(*t, now_ms) && order.len() < MAX_NONCES {
                break;
            }
            if let Some((_, old)) = order.pop_front() {
                set.remove(&old);
            }
        }
        if !set.insert(nonce.to_owned()) {
            return false;
        }
        order.push_back((minted, nonce.to_owned()));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nonce(ms: u64, r: u128) -> String {
        ulid::Ulid::from_parts(ms, r).to_string()
    }

    /// A call written during a 114 s stop of the bridge (SIGSTOP) and read after it is
    /// taken; one minted as long before a bridge that ran all along is refused; a replay of
    /// the late call is refused too, and the credit ends at its bound.
    #[test]
    fn the_window_is_stretched_by_the_bridges_own_stalls_only() {
        let t0 = 1_800_000_000_000u64;
        let running = Nonces::default();
        let stopped = Nonces::default();
        let mut t = t0;
        while t <= t0 + 10_000 {
            running.stalls().beat(t);
            stopped.stalls().beat(t);
            t += BEAT_MS;
        }
        // The shim mints its nonce at t0 + 10.2 s; `stopped` is stopped from t0 + 10 s to t0 + 124 s.
        let late = nonce(t0 + 10_200, 1);
        let now = t0 + 124_000;
        while t < now {
            running.stalls().beat(t);
            t += BEAT_MS;
        }
        assert!(!running.fresh(&late, now), "113.8 s old on a bridge that ran: refused");
        // Read before the runtime's first beat after the stop: the open stall counts.
        assert!(stopped.fresh(&late, now), "the stop is credited");
        assert!(!stopped.fresh(&late, now + 1), "each nonce is taken once");
        stopped.stalls().beat(now);
        let other = nonce(t0 + 10_300, 2);
        assert!(stopped.fresh(&other, now + 200), "the recorded stall counts as the open one did");
        assert_eq!(stopped.stalls().between(t0 + 10_200, now), now - (t0 + 10_000 + BEAT_MS));
        // A nonce minted after the stall gets no credit from it.
        let after = nonce(now + 1_000, 3);
        let later = now + 1_000 + NONCE_WINDOW_MS + 1;
        let mut t = now;
        while t <= later {
            stopped.stalls().beat(t);
            t += BEAT_MS;
        }
        assert!(!stopped.fresh(&after, later), "no stall since its mint");
        // No beat yet (a handler without a runtime beating it): no credit at all.
        let unbeaten = Nonces::default();
        assert!(!unbeaten.fresh(&nonce(t0, 4), t0 + NONCE_WINDOW_MS + 1));
        // The credit's bound: a night asleep.
        let night = Stalls::default();
        night.beat(t0);
        night.beat(t0 + 8 * 3_600_000);
        assert_eq!(night.between(t0, t0 + 8 * 3_600_000), MAX_STALL_CREDIT_MS);
    }

    #[test]
    fn equal_only_when_equal_whatever_the_lengths() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(constant_time_eq(b"", b""));
        for (a, b) in [
            (&b"s3cret"[..], &b"s3creT"[..]),
            (b"s3cre", b"s3cret"),
            (b"s3crets3cret", b"s3cret"),
            (b"", b"x"),
            (b"x", b""),
        ] {
            assert!(!constant_time_eq(a, b), "{a:?} {b:?}");
        }
        assert!(bearer_ok(None, None));
        assert!(!bearer_ok(Some("t"), None));
        assert!(bearer_ok(Some("t"), Some("t")));
    }
}
