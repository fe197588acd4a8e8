//! Sinks: each consumes a bounded queue of stamped events and ends, after flushing,
//! when the queue closes.

pub mod jsonl;
