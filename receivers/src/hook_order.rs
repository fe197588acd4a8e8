//! The order of a session's hook calls, kept when the bridge falls behind.
//!
//! A bridge that stops answering (stopped, swapping, in a debugger) still has its socket
//! accept: the kernel queues the shims' connections with their whole requests while each
//! shim gives up and lets its agent go on. When the bridge runs again it reads that backlog
//! all at once, and handling the calls concurrently would write a session's events in any
//! order: an outcome before its request, a `run.finished` before its `run.started`.
//!
//! The session's order is the emitter's to keep (AEP-0001 §7.1: `seq` is assigned by the
//! party that owns session order, and regressions are not legal, §7.2). The shim stamps
//! each call with when it sent it (`x-aep-sent`, Unix µs) and when it stops waiting
//! (`x-aep-deadline`, Unix ms). A call whose deadline has passed is *late*: its shim is gone
//! and its siblings of the backlog are probably arriving too. Per session ([`Lanes`]):
//!
//! - a call on time with nothing of its session waiting goes straight through, as before
//!   (calls of one session running at once, as parallel hooks do, are not serialized);
//! - a late call waits until no other late call of its session has arrived for
//!   [`SETTLE_QUIET`] (at most [`SETTLE_MAX`] after the first), and every call of the
//!   session waiting meanwhile is then admitted one at a time in the order the shims sent
//!   them: a backlog is placed in order, late but complete;
//! - a late call sent before one already admitted cannot be placed any more: it is refused
//!   ([`Behind`]), counted and dropped, never written after what followed it. A gap is
//!   legal, a regression is not (AEP-0001 §7.2; AEP-0002 §4.1: arrival is never guaranteed).
//!
//! A call on time is never refused: its shim still waits for the answer, and calls of one
//! session in flight together (hooks an agent runs in parallel, a detached one) are
//! concurrent, their send times microseconds apart and no order to keep.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use tokio::sync::Notify;

/// The request header with the Unix time in microseconds at which the shim sent the call.
pub const SENT_HEADER: &str = "x-aep-sent";
/// The request header with the Unix time in milliseconds after which the shim no longer
/// waits for the reply's headers (it has answered its agent neutrally).
pub const DEADLINE_HEADER: &str = "x-aep-deadline";

/// A late call waits until its session's backlog has been quiet this long.
pub const SETTLE_QUIET: Duration = Duration::from_millis(100);
/// The longest a late call waits for its session's backlog to settle.
pub const SETTLE_MAX: Duration = Duration::from_secs(1);

/// Most sessions remembered; beyond it idle ones are forgotten (oldest first).
const MAX_LANES: usize = 4096;

/// When a call was sent and whether its shim is still waiting, from its headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// When the shim sent it (Unix µs).
    pub sent_us: u64,
    /// Whether its deadline had passed when the bridge read it.
    pub late: bool,
}

impl Timing {
    /// The timing of a call, `None` without the headers (a caller other than the shim) or
    /// with a send time more than a second ahead of `now_ms` (a clock not to order by).
    pub fn from_headers(headers: &HeaderMap, now_ms: u64) -> Option<Self> {
        let num = |name: &str| headers.get(name)?.to_str().ok()?.trim().parse::<u64>().ok();
        let sent_us = num(SENT_HEADER)?;
        if sent_us / 1000 > now_ms.saturating_add(1000) {
            return None;
        }
        let late = num(DEADLINE_HEADER).is_some_and(|d| now_ms > d);
        Some(Self { sent_us, late })
    }
}

/// A late call cannot be placed in its session's order: a call its shim sent later is
/// already admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behind;

/// The per-session order of hook calls (see the module doc).
#[derive(Default)]
pub struct Lanes {
    lanes: Mutex<HashMap<String, Lane>>,
    tickets: AtomicU64,
}

#[derive(Default)]
struct Lane {
    /// The newest send time admitted.
    high: u64,
    /// Calls waiting for their turn: (send time, ticket).
    queue: BTreeSet<(u64, u64)>,
    /// Calls admitted and not yet done.
    active: usize,
    /// The first and the last late arrival of the current backlog.
    first_late: Option<Instant>,
    last_late: Option<Instant>,
    touched: Option<Instant>,
    wake: Arc<Notify>,
}

impl Lane {
    /// When the backlog counts as settled (`None`: no late call waits).
    fn settled_at(&self) -> Option<Instant> {
        let (first, last) = (self.first_late?, self.last_late?);
        Some((last + SETTLE_QUIET).min(first + SETTLE_MAX))
    }

    fn idle(&self) -> bool {
        self.active == 0 && self.queue.is_empty()
    }
}

/// An admitted call's place in its session: the next call of a backlog waits until it is
/// dropped (the call's events are admitted).
pub struct Turn {
    lanes: Arc<Lanes>,
    key: String,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let Ok(mut lanes) = self.lanes.lanes.lock() else { return };
        if let Some(lane) = lanes.get_mut(&self.key) {
            lane.active = lane.active.saturating_sub(1);
            lane.touched = Some(Instant::now());
            lane.wake.notify_waiters();
        }
    }
}

impl Lanes {
    /// Waits for the call's turn in session `key`: at once for a call on time with nothing
    /// of its session waiting, else in send order once the backlog settled. [`Behind`] for
    /// a late call when a call sent after it was already admitted.
    pub async fn enter(self: &Arc<Self>, key: String, timing: Timing) -> Result<Turn, Behind> {
        let ticket = self.tickets.fetch_add(1, Ordering::Relaxed);
        let me = (timing.sent_us, ticket);
        let wake = {
            let Ok(mut lanes) = self.lanes.lock() else { return Ok(self.turn(key)) };
            if lanes.len() >= MAX_LANES && !lanes.contains_key(&key) {
                forget_idle(&mut lanes);
            }
            let lane = lanes.entry(key.clone()).or_default();
            lane.touched = Some(Instant::now());
            if timing.late && timing.sent_us < lane.high {
                return Err(Behind);
            }
            if !timing.late && lane.queue.is_empty() {
                lane.active += 1;
                lane.high = lane.high.max(timing.sent_us);
                return Ok(self.turn(key));
            }
            lane.queue.insert(me);
            if timing.late {
                let now = Instant::now();
                lane.first_late.get_or_insert(now);
                lane.last_late = Some(now);
                // Later calls of the backlog may wait on this one's arrival.
                lane.wake.notify_waiters();
            }
            lane.wake.clone()
        };
        loop {
            let notified = wake.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            let wait_until = {
                let Ok(mut lanes) = self.lanes.lock() else { return Ok(self.turn(key)) };
                let lane = lanes.entry(key.clone()).or_default();
                let settled = lane.settled_at().filter(|t| *t > Instant::now());
                if lane.queue.first() == Some(&me) && lane.active == 0 && settled.is_none() {
                    lane.queue.remove(&me);
                    if lane.queue.is_empty() {
                        lane.first_late = None;
                        lane.last_late = None;
                    }
                    // The next in line may go once this one is done (or refused).
                    lane.wake.notify_waiters();
                    if timing.late && timing.sent_us < lane.high {
                        return Err(Behind);
                    }
                    lane.active += 1;
                    lane.high = lane.high.max(timing.sent_us);
                    return Ok(self.turn(key));
                }
                settled
            };
            match wait_until {
                Some(t) => {
                    let _ = tokio::time::timeout_at(t.into(), notified).await;
                }
                None => notified.await,
            }
        }
    }

    fn turn(self: &Arc<Self>, key: String) -> Turn {
        Turn { lanes: self.clone(), key }
    }

    /// Sessions remembered (tests).
    pub fn len(&self) -> usize {
        self.lanes.lock().map(|l| l.len()).unwrap_or(0)
    }

    /// Whether no session is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Forgets the idle sessions untouched longest, down to three quarters of the cap. A
/// forgotten session forgets its newest send time: a call of it arriving much later is
/// placed at the end instead of refused.
fn forget_idle(lanes: &mut HashMap<String, Lane>) {
    let mut idle: Vec<(Option<Instant>, String)> =
        lanes.iter().filter(|(_, l)| l.idle()).map(|(k, l)| (l.touched, k.clone())).collect();
    idle.sort();
    let excess = lanes.len().saturating_sub(MAX_LANES * 3 / 4);
    for (_, k) in idle.into_iter().take(excess) {
        lanes.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(sent_us: u64, late: bool) -> Timing {
        Timing { sent_us, late }
    }

    #[test]
    fn timing_comes_from_the_headers_and_a_deadline_passed_is_late() {
        let mut h = HeaderMap::new();
        assert_eq!(Timing::from_headers(&h, 5_000), None, "no headers: not ordered");
        h.insert(SENT_HEADER, "4000000".parse().unwrap());
        assert_eq!(Timing::from_headers(&h, 5_000), Some(t(4_000_000, false)));
        h.insert(DEADLINE_HEADER, "4999".parse().unwrap());
        assert_eq!(Timing::from_headers(&h, 5_000), Some(t(4_000_000, true)));
        h.insert(DEADLINE_HEADER, "5000".parse().unwrap());
        assert_eq!(Timing::from_headers(&h, 5_000), Some(t(4_000_000, false)));
        h.insert(SENT_HEADER, "9000000".parse().unwrap());
        assert_eq!(Timing::from_headers(&h, 5_000), None, "a send time from the future orders nothing");
        h.insert(SENT_HEADER, "x".parse().unwrap());
        assert_eq!(Timing::from_headers(&h, 5_000), None);
    }

    #[tokio::test]
    async fn calls_on_time_pass_at_once_and_a_late_one_overtaken_is_behind() {
        let lanes = Arc::new(Lanes::default());
        let a = lanes.enter("s".into(), t(10, false)).await.unwrap();
        // Parallel calls of one session are not serialized.
        let b = lanes.enter("s".into(), t(20, false)).await.unwrap();
        drop((a, b));
        assert!(lanes.enter("s".into(), t(15, true)).await.is_err(), "late and sent before an admitted call");
        // On time, its shim still waits: a concurrent call (a detached hook), never refused.
        assert!(lanes.enter("s".into(), t(15, false)).await.is_ok());
        assert!(lanes.enter("other".into(), t(15, true)).await.is_ok(), "sessions are apart");
    }

    /// A backlog read in any order is admitted in send order, one call at a time, and a
    /// call on time that arrives meanwhile waits behind it.
    #[tokio::test]
    async fn a_backlog_is_admitted_in_send_order() {
        let lanes = Arc::new(Lanes::default());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for sent in [50u64, 10, 40, 20, 30] {
            let (lanes, order) = (lanes.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let turn = lanes.enter("s".into(), t(sent, true)).await.unwrap();
                order.lock().unwrap().push(sent);
                // Still in its turn: nobody else of the session may be admitted now.
                tokio::task::yield_now().await;
                drop(turn);
            }));
            tokio::task::yield_now().await;
        }
        let fresh = {
            let (lanes, order) = (lanes.clone(), order.clone());
            tokio::spawn(async move {
                let _turn = lanes.enter("s".into(), t(60, false)).await.unwrap();
                order.lock().unwrap().push(60);
            })
        };
        for task in tasks {
            task.await.unwrap();
        }
        fresh.await.unwrap();
        assert_eq!(*order.lock().unwrap(), [10, 20, 30, 40, 50, 60]);
        // The backlog is gone: a call on time passes at once again, and one older is behind.
        drop(lanes.enter("s".into(), t(70, false)).await.unwrap());
        assert_eq!(lanes.enter("s".into(), t(65, true)).await.err(), Some(Behind));
    }

    #[tokio::test]
    async fn idle_sessions_are_forgotten_beyond_the_cap() {
        let lanes = Arc::new(Lanes::default());
        for i in 0..MAX_LANES + 10 {
            drop(lanes.enter(format!("s{i}"), t(1, false)).await.unwrap());
        }
        assert!(lanes.len() <= MAX_LANES, "{}", lanes.len());
    }
}
