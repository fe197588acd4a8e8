//! The AEP 0.1 model, pure: the Event envelope, the type registry with capture levels,
//! validation that names the violated rule (per event, and per stream with the
//! completeness warnings over a reader the caller opens), capture down-level, the
//! redaction pipeline, digests, form-values gating, attr-match filters, ids and sequencing.
//!
//! No I/O, no clock, no randomness: time and id seeds come in from the caller.

pub mod command;
pub mod completeness;
pub mod digest;
pub mod downlevel;
pub mod event;
pub mod filter;
pub mod gating;
pub mod ids;
pub mod json;
pub mod jsonl;
pub mod level;
pub mod received;
pub mod redact;
pub mod registry;
pub mod report;
pub mod sequence;
pub mod subscription;
pub mod time;
pub mod validate;

pub use event::{AEP_VERSION, EnvelopeError, Event};
pub use level::{Capture, Severity};
