//! Pure projections of AEP events to the formats observability stacks already read
//! (AEP-0005): CloudEvents (both ways), OTLP LogRecords, synthesized OTLP spans, OCSF.
//!
//! Outputs are `serde_json::Value`s in each target's JSON encoding (OTLP in OTLP/JSON);
//! the exporters in the bridge turn OTLP/JSON into protobuf where a peer wants that.

pub mod ce;
pub mod ocsf;
pub mod otlp_logs;
pub mod spans;
