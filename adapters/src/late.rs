//! Hook calls dropped to keep a session's order, and what depends on them.
//!
//! The hook receiver drops a late call that a later call of its session has overtaken
//! (`aep_receivers::hook_order`): written now, it would follow what happened after it. A
//! dropped `tool.requested` leaves its outcome, still to come, without a request: the log
//! would tell a tool that finished without ever being asked for, which no consumer can pair
//! (AEP-0002 §2 convention 1) and `validate --strict` flags. The spec's answer to a lost
//! Event is a gap (AEP-0001 §7.2: gaps are legal, regressions are not; AEP-0002 §4.1 and §2
//! convention 5: neither a request's outcome nor a run's terminal is guaranteed to arrive),
//! so the whole pair becomes the gap: the outcome of a dropped request, and the terminal of
//! a run whose `run.started` was dropped, are dropped as well. What was already written
//! stays (a request whose outcome was the dropped call stays without one: the honest
//! record of a loss, which `validate --strict` reports as `tool-no-outcome`).
//!
//! Pure: the time of a drop comes in as an argument (Unix ms), for the rate of its log line.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::EventDraft;

/// Most sessions with dropped calls remembered (least recently touched forgotten first).
const MAX_SESSIONS: usize = 1024;
/// Most dropped call and run ids remembered per session.
const MAX_IDS: usize = 256;
/// One log line per this interval at most (ms), with the count since the last.
pub const LOG_EVERY_MS: u64 = 10_000;

/// The requests and runs of dropped calls, per `(vendor, session)`.
#[derive(Default)]
pub struct LateCalls {
    sessions: Mutex<HashMap<(String, String), Dropped>>,
    log: Mutex<LogGate>,
}

#[derive(Default)]
struct Dropped {
    calls: HashSet<String>,
    runs: HashSet<String>,
    touched: u64,
}

#[derive(Default)]
struct LogGate {
    /// When the last log line was due (Unix ms).
    last: Option<u64>,
    unlogged: u64,
    tick: u64,
}

fn call_id(d: &EventDraft) -> Option<&str> {
    d.data.get("tool")?.get("call_id")?.as_str().filter(|s| !s.is_empty())
}

impl LateCalls {
    /// Remembers what the drafts of a dropped call opened in `session`: its tool requests
    /// (by call id) and its runs, at `now_ms`. Returns whether a log line is due (at most
    /// one per [`LOG_EVERY_MS`]) and how many calls were dropped since the last.
    pub fn dropped(&self, vendor: &str, session: &str, drafts: &[EventDraft], now_ms: u64) -> Option<u64> {
        let calls: Vec<String> =
            drafts.iter().filter(|d| d.r#type == "tool.requested").filter_map(call_id).map(str::to_owned).collect();
        let runs: Vec<String> =
            drafts.iter().filter(|d| d.r#type == "run.started").filter_map(|d| d.run.clone()).collect();
        let tick = {
            let Ok(mut g) = self.log.lock() else { return None };
            g.tick += 1;
            g.tick
        };
        if (!calls.is_empty() || !runs.is_empty())
            && let Ok(mut sessions) = self.sessions.lock()
        {
            let key = (vendor.to_owned(), session.to_owned());
            if !sessions.contains_key(&key)
                && sessions.len() >= MAX_SESSIONS
                && let Some(oldest) = sessions.iter().min_by_key(|(_, d)| d.touched).map(|(k, _)| k.clone())
            {
                sessions.remove(&oldest);
            }
            let d = sessions.entry(key).or_default();
            d.touched = tick;
            for c in calls {
                if d.calls.len() < MAX_IDS {
                    d.calls.insert(c);
                }
            }
            for r in runs {
                if d.runs.len() < MAX_IDS {
                    d.runs.insert(r);
                }
            }
        }
        let mut g = self.log.lock().ok()?;
        g.unlogged += 1;
        if g.last.is_some_and(|t| now_ms.saturating_sub(t) < LOG_EVERY_MS) {
            return None;
        }
        g.last = Some(now_ms);
        Some(std::mem::take(&mut g.unlogged))
    }

    /// Removes from `drafts` (a call of `session`) the outcomes of dropped requests and the
    /// terminals of dropped runs; returns how many it removed.
    pub fn filter(&self, vendor: &str, session: &str, drafts: &mut Vec<EventDraft>) -> usize {
        let Ok(mut sessions) = self.sessions.lock() else { return 0 };
        if sessions.is_empty() {
            return 0;
        }
        let key = (vendor.to_owned(), session.to_owned());
        let Some(d) = sessions.get_mut(&key) else { return 0 };
        let before = drafts.len();
        drafts.retain(|x| match x.r#type.as_str() {
            "tool.completed" | "tool.failed" | "tool.denied" => !call_id(x).is_some_and(|c| d.calls.remove(c)),
            "run.finished" | "run.failed" | "run.cancelled" => !x.run.as_ref().is_some_and(|r| d.runs.remove(r)),
            _ => true,
        });
        if d.calls.is_empty() && d.runs.is_empty() {
            sessions.remove(&key);
        }
        before - drafts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aep_schemas::Capture;

    fn d(ty: &str, run: Option<&str>, call: Option<&str>) -> EventDraft {
        let mut d = EventDraft::new(ty, Capture::Metadata);
        d.session = Some("s".into());
        d.run = run.map(str::to_owned);
        if let Some(c) = call {
            d.data.insert("tool".into(), serde_json::json!({"name": "Bash", "call_id": c}));
        }
        d
    }

    #[test]
    fn the_outcome_of_a_dropped_request_and_the_terminal_of_a_dropped_run_are_dropped_too() {
        let late = LateCalls::default();
        let due = late.dropped(
            "v",
            "s",
            &[d("run.started", Some("r1"), None), d("tool.requested", Some("r1"), Some("c1"))],
            0,
        );
        assert_eq!(due, Some(1), "the first drop is logged");
        assert_eq!(late.dropped("v", "s", &[], LOG_EVERY_MS - 1), None, "the next within the interval is not");
        assert_eq!(late.dropped("v", "s", &[], LOG_EVERY_MS), Some(2), "then one line counts both");
        let mut later = vec![
            d("tool.completed", Some("r1"), Some("c2")),
            d("tool.completed", Some("r1"), Some("c1")),
            d("run.finished", Some("r1"), None),
        ];
        assert_eq!(late.filter("other", "s", &mut later), 0, "another vendor's session");
        assert_eq!(late.filter("v", "s", &mut later), 2);
        assert_eq!(later.len(), 1);
        assert_eq!(call_id(&later[0]), Some("c2"));
        // Each is dropped once: a second outcome of c1 is not this rule's business.
        let mut again = vec![d("tool.completed", Some("r1"), Some("c1"))];
        assert_eq!(late.filter("v", "s", &mut again), 0);
    }
}
