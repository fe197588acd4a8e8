//! I/O in: the hook HTTP endpoint, the OTLP gRPC and HTTP receivers, and the embedded
//! collector's ingest, and the bounded accept loop every listener shares. Receivers decode and check what arrives and hand it to the bridge
//! through small handler traits; they hold no pipeline logic of their own.

pub mod access;
pub mod hook_order;
pub mod hooks;
pub mod listener;
pub mod otlp;
pub mod resend;
pub mod tenancy;
pub mod throttle;
