//! aep-bridge, the daemon as a library: turns coding agents' hooks and OTLP telemetry into
//! AEP events and delivers them to a per-session JSONL log, an embedded AEP collector, an
//! upstream relay, and OpenTelemetry/CloudEvents/OCSF exporters.
//!
//! The flow, module by module: receivers (`hooks`, `otlp_in`, the collector's ingest) map
//! what arrives through the pure adapters into drafts; the [`pipeline`] stamps them (with
//! the one [`stamp::Stamper`], which the CLI's stdio tee uses too) and fans them out to the
//! [`sinks`], the [`collector`] and the exporters ([`export`], [`relay`]); the `control`
//! loop holds permission moments until a human answers. [`server`] wires them and serves
//! them. [`bridges`] are the observers of agents' own server streams (`[bridges.<name>]`);
//! [`ui`] is the live web view served on the main port. [`guard`] keeps other origins' web
//! pages and rebinding names out of every route, [`health`] answers the probes, [`lock`]
//! keeps one `serve` per data directory, and `notify` speaks to systemd. The `aep-bridge`
//! command (`bridge/cli`) is the CLI over this library, with the clients of a running bridge
//! (`tail`, `timeline`, `respond`, the `wrap` tee) as its own modules.
//!
//! # The facade
//!
//! Public are the modules the CLI, the load tools and the integration tests drive: the
//! daemon ([`server`], [`config`], [`pipeline`], [`sinks`], [`collector`], [`export`]),
//! the one outbound [`transport`] and what the clients share with it ([`env`], [`time`],
//! [`metrics`], [`state`], [`stamp`]). The control loop, the attention book, the hook
//! receiver, the command channel, the token check and the GenAI measurer are internal
//! (`pub(crate)`): they are reached through [`server::Daemon`] and the HTTP and WebSocket
//! surfaces it serves.
//!
//! # Two OpenTelemetry crates, decided
//!
//! - **`opentelemetry-otlp` is not used.** Its span and log exporters consume the SDK's
//!   `SpanData` / `SdkLogRecord`, produced by an SDK tracer or logger as work happens; the
//!   bridge has neither: it synthesizes spans and records after the fact from AEP events
//!   (deterministic ids, past timestamps, vendor spans placed into the session's trace) and
//!   builds the OTLP protobuf types directly (`aep_projections`). For metrics, where the SDK
//!   is used, its `MetricExporter` would bring a second HTTP/gRPC client with its own TLS
//!   and retry settings beside [`transport`] (one rustls setup, one retry policy, the
//!   `OTEL_EXPORTER_OTLP_*` handling, failures counted and shown on `/healthz`); the bridge's
//!   exporter is the SDK's `PushMetricExporter` over opentelemetry-proto's own transform
//!   (`export::otlp_metrics`). Revisit when the crate accepts a caller's client.
//! - **`opentelemetry-prometheus` is kept, knowingly.** Upstream has discontinued it (its
//!   advice: push OTLP to Prometheus's OTLP receiver, which `[export.otlp]` already does).
//!   The bridge still serves the pull endpoint users scrape (`GET /metrics`) and the crate
//!   is the SDK's reader for it; its advisory concerned the `protobuf` crate, which is not
//!   in this build (`prometheus` with default features off, text encoding only). If it
//!   stops following the SDK, the replacement is a text encoder over a `ManualReader`'s
//!   collection in `metrics`, the same shape the crate has.

pub(crate) mod attention;
pub(crate) mod auth;
pub mod bridges;
pub(crate) mod bus_asks;
pub mod collector;
pub(crate) mod commands;
pub mod config;
pub(crate) mod control;
pub mod custom;
pub mod env;
pub mod export;
pub(crate) mod genai;
pub mod guard;
pub mod health;
pub(crate) mod hooks;
pub mod identity;
pub mod lock;
pub mod metrics;
#[cfg(unix)]
pub mod notify;
pub mod otlp_in;
pub mod pipeline;
pub mod relay;
pub mod server;
pub mod sinks;
pub mod stamp;
pub mod state;
pub mod time;
pub mod transport;
pub mod ui;
