//! The one outbound transport: every exporter, the OTLP tee, the relay client and the
//! bridges' streams leave the process through here.
//!
//! - [`http`]: one async HTTP client (reqwest on rustls with the ring provider), gzip
//!   request bodies, extra headers, per-request timeouts, answers classified for retry.
//! - [`retry`]: one retry policy: exponential backoff with jitter, `Retry-After` in both
//!   forms, gRPC `RetryInfo`, a total time budget, prompt give-up on shutdown.
//! - [`tls`]: one rustls `ClientConfig` from a [`TlsConfig`] (the Mozilla roots from
//!   webpki-roots plus an optional extra CA bundle, an optional client certificate for
//!   mTLS), shared by HTTPS, gRPC and `wss://`. Verification cannot be turned off.
//! - [`reconnect`]: one reconnect supervisor for the long-lived links (the relay client,
//!   the bridges' streams and sockets): the retry policy's curve, reset after a stable
//!   connection, prompt stop on shutdown.
//! - [`ws`]: one WebSocket client connect (upgrade headers and bearer, the rustls setup
//!   above, read bounds, a connect timeout, failures told apart).
//! - [`link`]: long-lived inbound links (an SSE stream, a WebSocket) kept up by the
//!   supervisor, reporting their messages over one bounded channel: the observers' links.
//! - [`proxy`]: a forwarding tee proxy whose event streams are reported as such links.
//! - [`config`]: the small config types ([`TlsConfig`], headers) the exporters', the tee's
//!   and the relay's sections reuse, and the URL / header checks of `config validate`.

pub mod config;
pub mod http;
pub mod link;
pub mod proxy;
pub mod reconnect;
pub mod retry;
pub mod tls;
pub mod ws;

pub use config::{Headers, TlsConfig};
pub use http::{HttpClient, HttpOptions, Reply};
pub use reconnect::{Ended, Link, Policy, Retry, supervise};
pub use retry::{Attempt, Delivery, RetryConfig, with_retry};
pub use ws::{WsError, WsOptions, WsStream};
