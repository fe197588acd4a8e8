//! Pure projections of AEP events to the formats observability stacks already read
//! (AEP-0005): CloudEvents (both ways), OTLP LogRecords, synthesized OTLP spans, OCSF, the
//! GenAI measurements a metrics pipeline records ([`genai`]), and the summary of a session
//! a web view lists ([`summary`]).
//!
//! CloudEvents and OCSF are `serde_json::Value`s in their JSON encodings; the OTLP
//! projections return `opentelemetry-proto` messages ([`otlp`]), ready to encode.

pub mod capture_gate;
pub mod ce;
pub mod genai;
pub mod ocsf;
pub mod otlp;
pub mod otlp_logs;
pub mod spans;
pub mod summary;
