//! The one outbound HTTP client: reqwest on rustls (ring), HTTP/1.1 (ALPN `http/1.1`), connection reuse, a
//! per-request timeout, extra headers on every request, gzip request bodies, and answers
//! classified for [`super::retry::with_retry`].

use std::io::Write as _;
use std::time::{Duration, SystemTime};

use bytes::Bytes;

use super::config::{Headers, TlsConfig};
use super::retry::{Attempt, parse_retry_after, retryable_status};
use super::tls::{TlsError, certificate_error, client_config};

/// How a client sends.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HttpOptions {
    /// Timeout of one request (connect, send, answer); zero means 10 s.
    pub timeout: Duration,
    /// Extra headers on every request.
    pub headers: Headers,
    /// TLS trust and client certificate for `https://`.
    pub tls: TlsConfig,
}

/// Why a client cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The TLS options are unusable.
    #[error("tls.{0}")]
    Tls(#[from] TlsError),
    /// A configured header is not a valid HTTP header.
    #[error("headers: {0:?} is not a valid header")]
    Header(String),
    /// reqwest refused the settings.
    #[error("HTTP client: {0}")]
    Build(#[from] reqwest::Error),
}

/// An HTTP answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// `Retry-After`, parsed (either form).
    pub retry_after: Option<Duration>,
    /// `Content-Type`.
    pub content_type: String,
    /// Body (capped at 4 MiB).
    pub body: Vec<u8>,
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// The server's certificate was refused: retrying will not help.
    #[error("{url}: TLS certificate refused: {reason} (is the server's CA in tls.ca_file?)")]
    Certificate {
        /// The method and URL.
        url: String,
        /// rustls' reason.
        reason: String,
    },
    /// Connection refused, reset, timed out, ...: worth retrying.
    #[error("{url}: {reason}")]
    Transport {
        /// The method and URL.
        url: String,
        /// The error and its causes.
        reason: String,
    },
}

/// Gzips `body`.
pub fn gzip(body: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::with_capacity(body.len() / 4 + 64), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = enc.write_all(body);
    enc.finish().unwrap_or_default()
}

/// An error and its causes on one line.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// The async HTTP client every exporter and the tee use (cheap to clone: one pool).
#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client for `opts` (reads the TLS files now).
    pub fn new(opts: &HttpOptions) -> Result<Self, ClientError> {
        Self::build(opts, true)
    }

    /// A client for long-lived streams (SSE): `opts.timeout` bounds the connect only, an
    /// open stream is never cut by a total request timeout; a dead peer is found by TCP
    /// keepalive (reqwest's default probes) and ends the stream with an error.
    pub fn streaming(opts: &HttpOptions) -> Result<Self, ClientError> {
        Self::build(opts, false)
    }

    fn build(opts: &HttpOptions, total_timeout: bool) -> Result<Self, ClientError> {
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in &opts.headers {
            let name =
                reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|_| ClientError::Header(k.clone()))?;
            let mut value = reqwest::header::HeaderValue::from_str(v).map_err(|_| ClientError::Header(k.clone()))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let timeout = if opts.timeout.is_zero() { Duration::from_secs(10) } else { opts.timeout };
        let mut tls = (*client_config(&opts.tls)?).clone();
        // This client speaks HTTP/1.1 only (reqwest's http2 feature is off): say so in ALPN.
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .user_agent(concat!("aep-bridge/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers);
        if total_timeout {
            builder = builder.timeout(timeout);
        }
        let client = builder
            .connect_timeout(timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            // No HTTP(S)_PROXY: exporters talk to the configured peer directly (a proxy
            // variable meant for the agents must not reroute telemetry, loopback included).
            .no_proxy()
            .build()?;
        Ok(Self { client })
    }

    /// POSTs `body` once (marked `Content-Encoding: gzip` when `gzipped`).
    pub async fn post(&self, url: &str, content_type: &str, body: Bytes, gzipped: bool) -> Result<Reply, SendError> {
        let mut req = self.client.post(url).header("content-type", content_type).body(body);
        if gzipped {
            req = req.header("content-encoding", "gzip");
        }
        let resp = req.send().await.map_err(|e| fail("POST", url, &e))?;
        Ok(reply(resp).await)
    }

    /// GETs `url` once (the whole answer, capped like [`Self::post`]'s).
    pub async fn get(&self, url: &str) -> Result<Reply, SendError> {
        let resp = self.client.get(url).send().await.map_err(|e| fail("GET", url, &e))?;
        Ok(reply(resp).await)
    }

    /// GETs `url` once and returns when the answer's head is in; the body is read with
    /// [`Stream::chunk`], for a caller that bounds it itself (and so can tell an answer
    /// over its bound from a whole one, which [`Self::get`]'s silent cap cannot).
    pub async fn get_stream(&self, url: &str) -> Result<Stream, SendError> {
        let resp = self.client.get(url).send().await.map_err(|e| fail("GET", url, &e))?;
        let content_type =
            resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        Ok(Stream { status: resp.status().as_u16(), content_type, url: url.to_owned(), resp })
    }

    /// POSTs a JSON body once, returning the answer whatever its status.
    pub async fn post_json(&self, url: &str, body: &serde_json::Value) -> Result<Reply, SendError> {
        let req = self.client.post(url).header("content-type", "application/json").body(body.to_string());
        let resp = req.send().await.map_err(|e| fail("POST", url, &e))?;
        Ok(reply(resp).await)
    }

    /// Opens a `text/event-stream` GET (with `Last-Event-ID` when resuming): returns once
    /// the answer's head is in, the body is read with [`Stream::chunk`].
    pub async fn open_stream(&self, url: &str, last_event_id: Option<&str>) -> Result<Stream, SendError> {
        let mut req = self.client.get(url).header("accept", "text/event-stream").header("cache-control", "no-cache");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.map_err(|e| fail("GET", url, &e))?;
        let content_type =
            resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        Ok(Stream { status: resp.status().as_u16(), content_type, url: url.to_owned(), resp })
    }

    /// Sends one request as given (the tee proxy's forwarding: method, headers and body
    /// verbatim; the client's configured headers fill in only what the request lacks) and
    /// returns once the answer's head is in; the body is read with [`Stream::chunk`], as it
    /// comes, never decoded (no content decoding is compiled in).
    pub async fn forward(
        &self,
        method: &str,
        url: &str,
        headers: reqwest::header::HeaderMap,
        body: Bytes,
    ) -> Result<Stream, SendError> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|e| SendError::Transport { url: format!("{method} {url}"), reason: e.to_string() })?;
        let name = method.to_string();
        let resp = self
            .client
            .request(method, url)
            .headers(headers)
            .body(body)
            .send()
            .await
            .map_err(|e| fail(&name, url, &e))?;
        let content_type =
            resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        Ok(Stream { status: resp.status().as_u16(), content_type, url: url.to_owned(), resp })
    }

    /// POSTs once and classifies the answer: 2xx done; 429/502/503/504 and transport
    /// errors retried; a refused certificate and any other status a permanent failure.
    pub async fn attempt(&self, url: &str, content_type: &str, body: Bytes, gzipped: bool) -> Attempt<Reply> {
        classify(url, self.post(url, content_type, body, gzipped).await)
    }
    /// GETs `url` once, reading at most `cap` bytes of the answer: past it the answer is
    /// dropped, or with `tail` (a 200) read to its end keeping only its last 4 KiB, for a
    /// caller that finds what it needs there (a page's `next_page_id`). Unlike
    /// [`Self::get`]'s silent cap, an answer over the bound is told apart from a whole one.
    pub async fn get_bounded(&self, url: &str, cap: usize, tail: bool) -> Bounded {
        const TAIL: usize = 4 << 10;
        let mut s = match self.get_stream(url).await {
            Ok(s) => s,
            Err(e) => return Bounded::Failed(e.to_string()),
        };
        let (mut body, mut over) = (Vec::new(), false);
        loop {
            let chunk = match s.chunk().await {
                Ok(Some(c)) => c,
                Ok(None) => break,
                // The tail is lost with the connection.
                Err(_) if over => return Bounded::Over(None),
                Err(e) => return Bounded::Failed(e.to_string()),
            };
            if !over && body.len() + chunk.len() <= cap {
                body.extend_from_slice(&chunk);
                continue;
            }
            if !tail || s.status != 200 {
                return Bounded::Over(None);
            }
            over = true;
            body.extend_from_slice(&chunk);
            if body.len() > TAIL {
                body.drain(..body.len() - TAIL);
            }
        }
        if over { Bounded::Over(Some(body)) } else { Bounded::Whole(s.status, body) }
    }
}

/// An answer read to a bound ([`HttpClient::get_bounded`]).
#[derive(Debug)]
pub enum Bounded {
    /// The whole answer: its status and body.
    Whole(u16, Vec<u8>),
    /// The answer passed the bound; its last bytes when they were asked for and read.
    Over(Option<Vec<u8>>),
    /// No answer: why.
    Failed(String),
}

/// Classifies one POST's outcome as [`HttpClient::attempt`] does; for a caller that looks at
/// the answer first (the OTLP exporter reads 404/405 as a refused signal).
pub fn classify(url: &str, outcome: Result<Reply, SendError>) -> Attempt<Reply> {
    match outcome {
        Err(e @ SendError::Certificate { .. }) => Attempt::Fail(e.to_string()),
        Err(e) => Attempt::Retry(None, e.to_string()),
        Ok(r) if (200..300).contains(&r.status) => Attempt::Done(r),
        Ok(r) => {
            let msg = format!("POST {url}: HTTP {} {}", r.status, r.snippet());
            if retryable_status(r.status) { Attempt::Retry(r.retry_after, msg) } else { Attempt::Fail(msg) }
        }
    }
}

impl Reply {
    /// The first 200 bytes of the body, as text (an error answer's explanation).
    pub fn snippet(&self) -> String {
        String::from_utf8_lossy(&self.body[..self.body.len().min(200)]).into_owned()
    }
}

/// An open streaming answer ([`HttpClient::open_stream`]).
#[derive(Debug)]
pub struct Stream {
    /// Status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: String,
    url: String,
    resp: reqwest::Response,
}

impl Stream {
    /// The next piece of the body; `None` at its end.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, SendError> {
        self.resp.chunk().await.map_err(|e| fail("GET", &self.url, &e))
    }

    /// The answer's headers.
    pub fn headers(&self) -> &reqwest::header::HeaderMap {
        self.resp.headers()
    }

    /// The first `cap` bytes of the body (an error answer's explanation).
    pub async fn text(self, cap: usize) -> String {
        String::from_utf8_lossy(&read_capped(self.resp, cap).await).into_owned()
    }
}

/// A request error as a [`SendError`], naming the method.
fn fail(method: &str, url: &str, e: &reqwest::Error) -> SendError {
    match certificate_error(e) {
        Some(reason) => SendError::Certificate { url: format!("{method} {url}"), reason },
        None => SendError::Transport { url: format!("{method} {url}"), reason: chain(e) },
    }
}

/// An answer read whole (capped at 4 MiB).
async fn reply(resp: reqwest::Response) -> Reply {
    let status = resp.status().as_u16();
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let retry_after = header("retry-after").as_deref().and_then(|v| parse_retry_after(v, SystemTime::now()));
    let content_type = header("content-type").unwrap_or_default();
    let body = read_capped(resp, 4 << 20).await;
    Reply { status, retry_after, content_type, body }
}

/// Reads at most `cap` bytes of an answer (the rest is dropped with the connection).
async fn read_capped(mut resp: reqwest::Response, cap: usize) -> Vec<u8> {
    let mut out = Vec::new();
    while let Ok(Some(chunk)) = resp.chunk().await {
        let room = cap.saturating_sub(out.len());
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= cap {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_is_retryable_and_bad_headers_are_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/x", l.local_addr().unwrap());
        drop(l);
        let c = HttpClient::new(&HttpOptions { timeout: Duration::from_secs(2), ..HttpOptions::default() }).unwrap();
        assert!(matches!(c.attempt(&url, "text/plain", Bytes::new(), false).await, Attempt::Retry(None, _)));
        let bad = HttpOptions { headers: [("a b".to_owned(), "v".to_owned())].into(), ..HttpOptions::default() };
        assert!(matches!(HttpClient::new(&bad), Err(ClientError::Header(_))));
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&gzip(b"hello")[..]), &mut raw).unwrap();
        assert_eq!(raw, b"hello");
    }
}
