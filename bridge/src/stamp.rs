//! The daemon's stamping: the one [`Stamper`] (pure, in the adapters crate) with ULID ids
//! minted here, where the randomness is. The pipeline stamps with it, and so does the
//! CLI's stdio tee.

use std::time::{Duration, SystemTime};

pub use aep_adapters::stamp::{CAUSE_MEMORY, MintIds, source_uri};

/// The one stamper, its ids monotonic ULIDs.
pub type Stamper<M = ()> = aep_adapters::stamp::Stamper<Ulids, M>;

/// A stamper for this process lifetime's `epoch`, naming `host` in `source` URIs, minting
/// monotonic ULIDs.
pub fn stamper<M: Default>(epoch: u64, host: impl Into<String>) -> Stamper<M> {
    Stamper::new(epoch, host, Ulids(ulid::Generator::new()))
}

/// Event ids as monotonic ULIDs from one generator (random within a millisecond).
pub struct Ulids(ulid::Generator);

impl MintIds for Ulids {
    fn mint(&mut self, now_ms: u64) -> String {
        mint(&mut self.0, SystemTime::UNIX_EPOCH + Duration::from_millis(now_ms))
    }
}

/// A fresh ULID for `now`: unique, and monotonic within one generator (the replay buffer
/// relies on a minted id never repeating, see `Stamped::minted`).
pub fn mint(ids: &mut ulid::Generator, now: SystemTime) -> String {
    first_from(now, |at| ids.generate_from_datetime(at).ok())
}

/// The text of the first ULID `generate` makes at `now` or a later millisecond. A generator
/// refuses a millisecond once its 80-bit counter (started at a random value) has run out in
/// it; the next millisecond starts a fresh one, so ids stay unique and in order. (A fixed
/// fallback value would repeat for every id minted in that millisecond.)
fn first_from(now: SystemTime, mut generate: impl FnMut(SystemTime) -> Option<ulid::Ulid>) -> String {
    let mut at = now;
    loop {
        if let Some(u) = generate(at) {
            return aep_schemas::ids::ulid_string(u.0);
        }
        at += std::time::Duration::from_millis(1);
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use aep_adapters::EventDraft;
    use aep_schemas::Capture;

    use super::*;

    /// The daemon's stamper mints ULIDs, in order within one millisecond.
    #[test]
    fn the_daemon_stamper_mints_ordered_ulids() {
        let mut st: Stamper = stamper(1, "h");
        let ids: Vec<String> = (0..3)
            .map(|_| {
                st.stamp(Cow::Borrowed("x"), EventDraft::new("run.started", Capture::Metadata), 1_700_000_000_000).0.id
            })
            .collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        assert!(ids.iter().all(|id| ulid::Ulid::from_string(id).unwrap().timestamp_ms() == 1_700_000_000_000));
    }

    /// A generator that has run out within a millisecond yields an id of the next one: the
    /// ids stay unique and ordered (a fixed fallback made every such id the same).
    #[test]
    fn an_exhausted_millisecond_mints_in_the_next() {
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_000);
        let mut ids = ulid::Generator::new();
        let before = mint(&mut ids, now);
        let mut asked = Vec::new();
        let id = first_from(now, |at| {
            asked.push(crate::time::unix_ms(at));
            (asked.len() == 3).then(|| ulid::Ulid::from_parts(crate::time::unix_ms(at), 7))
        });
        assert_eq!(asked, [1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_002]);
        assert_eq!(ulid::Ulid::from_string(&id).unwrap().timestamp_ms(), 1_700_000_000_002);
        assert!(id > before);
    }
}
