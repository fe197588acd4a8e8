//! Where an exporter takes its events from: a queue the pipeline fills (best effort: what
//! its peer does not take within the retry budget is dropped and counted), or the JSONL
//! logs through a [`Tail`] (durable: it stops reading while its peer is away and resumes
//! from its cursors, [`super::wal`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::wal::{Cursor, Tail};
use crate::pipeline::Stamped;

/// An exporter's source of events.
#[derive(Debug)]
pub(crate) enum Feed {
    /// The pipeline's fan-out.
    Queue(mpsc::Receiver<Arc<Stamped>>),
    /// The JSONL logs.
    Log(Box<Tail>),
}

/// What one [`Feed::next`] took.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// The events.
    pub events: Vec<Arc<Stamped>>,
    /// The feed is closed and drained: this is the last batch.
    pub closed: bool,
    /// Durable feeds: the position to acknowledge in each log read, once the events are
    /// delivered ([`Feed::ack`]).
    pub marks: Vec<(PathBuf, Cursor)>,
    /// Durable feeds: for each event, the index of its log in `marks`.
    pub from: Vec<u32>,
    /// Durable feeds with warm-up: events before a log's cursor, to see and not send.
    pub warm: Vec<Arc<Stamped>>,
}

impl Feed {
    /// Whether the events wait in the log (nothing is lost while the peer is away).
    pub(crate) fn durable(&self) -> bool {
        matches!(self, Feed::Log(_))
    }

    /// Events waiting in memory (the queue's depth; a log has none).
    pub(crate) fn depth(&self) -> i64 {
        match self {
            Feed::Queue(rx) => rx.len() as i64,
            Feed::Log(_) => 0,
        }
    }

    /// Takes the next batch: waits up to `idle` for a first event (an empty batch on
    /// timeout), then up to `linger` more for the batch to reach `max`.
    pub(crate) async fn next(&mut self, max: usize, linger: Duration, idle: Duration) -> Taken {
        match self {
            Feed::Queue(rx) => {
                let (events, closed) = super::next_batch(rx, max, linger, idle).await;
                Taken { events, closed, ..Taken::default() }
            }
            Feed::Log(tail) => {
                let (b, closed) = tail.next(max, linger, idle).await;
                Taken { events: b.events, closed, marks: b.logs, from: b.from, warm: b.warm }
            }
        }
    }

    /// The peer took what `marks` cover.
    pub(crate) async fn ack(&mut self, marks: &[(PathBuf, Cursor)]) {
        if let Feed::Log(tail) = self {
            tail.ack(marks).await;
        }
    }

    /// Writes the cursors down (the end of a durable exporter).
    pub(crate) async fn finish(&mut self) {
        if let Feed::Log(tail) = self {
            tail.save().await;
        }
    }
}
