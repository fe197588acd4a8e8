//! aep-bridge: turns coding agents' hooks and OTLP telemetry into AEP events and delivers
//! them to a per-session JSONL log, an embedded AEP collector, an upstream relay, and
//! OpenTelemetry/CloudEvents/OCSF sinks.
//!
//! `main.rs` is tiny; the CLI lives in [`cli`], the daemon in [`server`].

pub mod attention;
pub mod cli;
pub mod cmd;
pub mod collector;
pub mod config;
pub mod control;
pub mod export;
pub mod hooks;
pub mod metrics;
pub mod otlp_in;
pub mod otlp_tee;
pub mod pipeline;
pub mod relay;
pub mod server;
pub mod sinks;
pub mod state;
pub mod time;
pub mod validate;
