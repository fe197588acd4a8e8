//! The one WebSocket client connect: the relay client and the observers' links open their
//! sockets through [`connect`], and the blocking CLI client
//! builds its upgrade request with [`request`].
//!
//! One place decides the upgrade request (the URL, the section's extra headers, the bearer
//! token, in that order so the token wins), the TLS (the transport's rustls configuration
//! from [`super::tls`], [`tls_for`]), the read bound (a message or frame over
//! [`WsOptions::max_message`] fails the read with `Capacity` before it is buffered), the
//! connect timeout, and how a failure reads: a refused certificate and an HTTP answer to
//! the upgrade are told apart, and a request that cannot be built is permanent.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream, tungstenite};

use super::config::{Headers, TlsConfig};
use super::tls::{TlsError, certificate_error, client_config};

/// An open client socket (`ws://` or `wss://`).
pub type WsStream = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How to open a socket.
#[derive(Debug, Clone)]
pub struct WsOptions {
    /// Extra upgrade request headers (a section's `headers`, a subprotocol).
    pub headers: Headers,
    /// Sent as `Authorization: Bearer <token>`, over any such extra header.
    pub bearer: Option<String>,
    /// The rustls client configuration for `wss://` ([`tls_for`]); `None`: tungstenite's
    /// own, on the Mozilla roots.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The largest message (and frame) read, bytes; `None`: tungstenite's defaults.
    pub max_message: Option<usize>,
    /// How long the TCP connect, the TLS handshake and the upgrade may take together.
    pub timeout: Duration,
}

impl WsOptions {
    /// No extra headers, no token, the default TLS and bounds, `timeout` to connect.
    pub fn new(timeout: Duration) -> Self {
        Self { headers: Headers::new(), bearer: None, tls: None, max_message: None, timeout }
    }
}

/// Why a socket could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    /// The URL or a header cannot make an upgrade request: retrying will not help.
    #[error("{url}: {reason}")]
    Request {
        /// The socket URL.
        url: String,
        /// What is wrong (a header is named, its value never shown).
        reason: String,
    },
    /// The server's certificate was refused (a `ca_file` is likely missing).
    #[error("{url}: TLS certificate refused: {reason}")]
    Certificate {
        /// The socket URL.
        url: String,
        /// rustls' reason.
        reason: String,
    },
    /// The server answered the upgrade with an HTTP status instead.
    #[error("{url}: HTTP {status}")]
    Status {
        /// The socket URL.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The connection or the handshake failed otherwise.
    #[error("{url}: {source}")]
    Connect {
        /// The socket URL.
        url: String,
        /// tungstenite's error.
        source: tungstenite::Error,
    },
    /// Nothing came back within the connect timeout.
    #[error("{url}: no answer within {timeout:?}")]
    Timeout {
        /// The socket URL.
        url: String,
        /// The timeout.
        timeout: Duration,
    },
}

impl WsError {
    /// Whether retrying cannot help (the request itself is bad).
    pub fn is_permanent(&self) -> bool {
        matches!(self, WsError::Request { .. })
    }
}

/// `http(s)://` as `ws(s)://` (other schemes as given), without a trailing `/`: the socket
/// base of a server configured by its HTTP URL.
pub fn ws_url(base: &str) -> String {
    let b = base.trim_end_matches('/');
    if let Some(r) = b.strip_prefix("http://") {
        format!("ws://{r}")
    } else if let Some(r) = b.strip_prefix("https://") {
        format!("wss://{r}")
    } else {
        b.to_owned()
    }
}

/// The upgrade request for `url`: `headers`, then `bearer` as `Authorization`.
pub fn request(url: &str, headers: &Headers, bearer: Option<&str>) -> Result<Request, WsError> {
    let bad = |reason: String| WsError::Request { url: url.to_owned(), reason };
    let mut req = url.into_client_request().map_err(|e| bad(format!("not a WebSocket URL: {e}")))?;
    let bearer = bearer.map(|t| ("authorization", format!("Bearer {t}")));
    for (k, v) in headers.iter().map(|(k, v)| (k.as_str(), v.clone())).chain(bearer) {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| bad(format!("bad header name {k:?}")))?;
        let value =
            HeaderValue::from_str(&v).map_err(|_| bad(format!("the value of header {k:?} is not header-safe")))?;
        req.headers_mut().insert(name, value);
    }
    Ok(req)
}

/// The transport's rustls configuration for `tls` when `url` is `wss://`; `None` for `ws://`.
pub fn tls_for(url: &str, tls: &TlsConfig) -> Result<Option<Arc<rustls::ClientConfig>>, TlsError> {
    if url.starts_with("wss://") { client_config(tls).map(Some) } else { Ok(None) }
}

/// Opens the socket at `url` (`ws://` or `wss://`) as `opts` say.
pub async fn connect(url: &str, opts: &WsOptions) -> Result<WsStream, WsError> {
    let req = request(url, &opts.headers, opts.bearer.as_deref())?;
    let config = opts.max_message.map(|n| WebSocketConfig::default().max_message_size(Some(n)).max_frame_size(Some(n)));
    let connector = opts.tls.clone().map(Connector::Rustls);
    let connecting = tokio_tungstenite::connect_async_tls_with_config(req, config, false, connector);
    let url = url.to_owned();
    match tokio::time::timeout(opts.timeout, connecting).await {
        Ok(Ok((ws, _))) => Ok(ws),
        Ok(Err(tungstenite::Error::Http(resp))) => Err(WsError::Status { url, status: resp.status().as_u16() }),
        Ok(Err(e)) => match certificate_error(&e) {
            Some(reason) => Err(WsError::Certificate { url, reason }),
            None => Err(WsError::Connect { url, source: e }),
        },
        Err(_) => Err(WsError::Timeout { url, timeout: opts.timeout }),
    }
}

#[cfg(test)]
mod tests {
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio::io::AsyncWriteExt as _;
    use tokio::net::TcpListener;
    use tokio_tungstenite::tungstenite::Message;

    use super::*;

    #[test]
    fn urls_map_and_requests_carry_headers_and_the_bearer_last() {
        assert_eq!(ws_url("http://h:1/p/"), "ws://h:1/p");
        assert_eq!(ws_url("https://h"), "wss://h");
        assert_eq!(ws_url("wss://h/socket"), "wss://h/socket");
        let h: Headers =
            [("x-a".to_owned(), "1".to_owned()), ("authorization".to_owned(), "Basic x".to_owned())].into();
        let req = request("ws://h/s", &h, Some("t0k")).unwrap();
        assert_eq!(req.headers()["x-a"], "1");
        assert_eq!(req.headers()["authorization"], "Bearer t0k");
        let e = request("ws://h/s", &Headers::new(), Some("bad\ntoken")).unwrap_err();
        assert!(e.is_permanent() && !e.to_string().contains("token"), "{e}");
        assert!(request("not a url", &Headers::new(), None).unwrap_err().is_permanent());
        assert!(tls_for("ws://h", &TlsConfig::default()).unwrap().is_none());
        assert!(tls_for("wss://h", &TlsConfig::default()).unwrap().is_some());
    }

    #[tokio::test]
    // The fake server's handshake callback has tungstenite's signature, large error and all.
    #[allow(clippy::result_large_err)]
    async fn connect_sends_the_headers_bounds_reads_and_tells_failures_apart() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        let server = tokio::spawn(async move {
            // A WebSocket peer: records the bearer, then sends a message over the bound.
            let (tcp, _) = listener.accept().await.unwrap();
            let mut seen = None;
            let mut ws = tokio_tungstenite::accept_hdr_async(tcp, |req: &Request, resp| {
                seen = req.headers().get("authorization").map(|v| v.to_str().unwrap().to_owned());
                Ok(resp)
            })
            .await
            .unwrap();
            ws.send(Message::text("x".repeat(2048))).await.unwrap();
            // A plain HTTP server refusing the upgrade.
            let (mut tcp, _) = listener.accept().await.unwrap();
            tcp.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").await.unwrap();
            // A server that never answers.
            let (_silent, _) = listener.accept().await.unwrap();
            let _ = ws.next().await;
            seen
        });
        let url = format!("ws://{at}/s");
        let opts =
            WsOptions { bearer: Some("t0k".into()), max_message: Some(1024), ..WsOptions::new(Duration::from_secs(5)) };
        let mut ws = connect(&url, &opts).await.unwrap();
        assert!(matches!(ws.next().await, Some(Err(tungstenite::Error::Capacity(_)))));
        let e = connect(&url, &opts).await.unwrap_err();
        assert!(matches!(e, WsError::Status { status: 404, .. }), "{e}");
        let quick = WsOptions { timeout: Duration::from_millis(200), ..opts };
        let e = connect(&url, &quick).await.unwrap_err();
        assert!(matches!(e, WsError::Timeout { .. }) && !e.is_permanent(), "{e}");
        drop(ws);
        assert_eq!(server.await.unwrap().as_deref(), Some("Bearer t0k"));
    }
}
