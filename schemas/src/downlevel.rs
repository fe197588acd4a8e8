//! Capture down-leveling at a hop (AEP-0001 §8.2, AEP-0002 §5.1) (in progress).

use serde_json::{Map, Value};

use crate::event::Event;
use crate::level::Capture;

/// Down-levels `ev` to at most `ceiling` (AEP-0001 §8.2(b), (e)).
pub fn downlevel(ev: &Event, ceiling: Capture) -> Event {
    let _ = ceiling;
    ev.clone()
}

/// Drops payload members of type `ty` whose capture level exceeds `level` (AEP-0002 §5.1 rule 1).
pub fn prune_payload(ty: &str, data: &mut Map<String, Value>, level: Capture) {
    let _ = (ty, data, level);
}
