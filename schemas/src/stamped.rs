//! A stamped event with its JSONL line, serialized once and shared by every consumer (the
//! log, the replay buffer, each exporter's queue): the unit the bridge's pipeline moves.

use std::sync::Arc;

use bytes::Bytes;

use crate::Event;

/// An event with its serialized JSONL line (compact JSON and `\n`), built once and shared by every sink.
#[derive(Debug)]
pub struct Stamped {
    /// The event.
    pub event: Event,
    /// `event` as one JSON line ending in `\n`.
    pub line: Bytes,
    /// Its id was minted by this bridge's stamper as it was stamped (not carried in by a
    /// draft or an external emitter), so no event admitted before it can share its
    /// `(source, id)`: the replay buffer's dedupe (AEP-0001 §7.4) need not look it up.
    /// Only a stamper sets it (elsewhere a `Stamped` is made by `new` or `with_line`).
    pub minted: bool,
}

/// A stamped event reads as its Event (the attention book observes either).
impl AsRef<Event> for Stamped {
    fn as_ref(&self) -> &Event {
        &self.event
    }
}

impl Stamped {
    /// Serializes `event` once, into a line of exactly its size (it is held by the replay
    /// buffer and every sink queue): the JSON is written into a reused per-thread buffer
    /// and copied out once, instead of growing a fresh vector by doubling.
    pub fn new(event: Event) -> Self {
        thread_local! {
            static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let line = SCRATCH.with(|scratch| {
            let Ok(mut buf) = scratch.try_borrow_mut() else { return Self::line_of(&event) };
            buf.clear();
            event.write_json(&mut buf);
            buf.push(b'\n');
            let line = Bytes::copy_from_slice(&buf);
            // Do not let one huge event pin its buffer for the life of the thread.
            if buf.capacity() > SCRATCH_KEEP {
                *buf = Vec::new();
            }
            line
        });
        Stamped { event, line, minted: false }
    }

    /// `event` with its `line`, as received or held (its id not minted here).
    pub fn with_line(event: Event, line: Bytes) -> Self {
        Stamped { event, line, minted: false }
    }

    /// `event` in its shared allocation before its line exists (a batch submit serializes
    /// the batch first and fills each line in place before handing the event on). Moving
    /// the event into its `Arc` at once, rather than through a staging vector of whole
    /// events, halves the submit path's copies per record.
    pub fn unlined(event: Event, minted: bool) -> Arc<Self> {
        Arc::new(Stamped { event, line: Bytes::new(), minted })
    }

    fn line_of(event: &Event) -> Bytes {
        let mut line = Vec::new();
        event.write_json(&mut line);
        line.push(b'\n');
        Bytes::from(line)
    }
}

/// Largest serialization buffer a thread keeps between events.
const SCRATCH_KEEP: usize = 256 * 1024;
