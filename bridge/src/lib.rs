//! aep-bridge, the daemon as a library: turns coding agents' hooks and OTLP telemetry into
//! AEP events and delivers them to a per-session JSONL log, an embedded AEP collector, an
//! upstream relay, and OpenTelemetry/CloudEvents/OCSF exporters.
//!
//! The flow, module by module: receivers (`hooks`, `otlp_in`, the collector's ingest) map
//! what arrives through the pure adapters into drafts; the [`pipeline`] stamps and fans
//! them out to the [`sinks`], the [`collector`] and the exporters ([`export`], [`relay`]);
//! the [`control`] loop holds permission moments until a human answers. [`server`] wires
//! them and serves them. The `aep-bridge` binary is the CLI over this library
//! (and [`client`], the collector client it shares with the `aep-bench` load tools).
//! [`wrap`] is the stdio tee behind `aep-bridge wrap`, delivering to a running bridge;
//! [`bridges`] are the observers of agents' own server streams (`[bridges.<name>]`).

pub mod attention;
pub mod auth;
pub mod bridges;
pub mod client;
pub mod collector;
pub mod commands;
pub mod config;
pub mod control;
pub mod custom;
pub mod env;
pub mod export;
pub mod genai;
pub mod health;
pub mod hooks;
pub mod listener;
pub mod metrics;
pub mod otlp_in;
pub mod otlp_tee;
pub mod pipeline;
pub mod relay;
pub mod server;
pub mod sinks;
pub mod state;
pub mod time;
pub mod transport;
pub mod validate;
pub mod wrap;
