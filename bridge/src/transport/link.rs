//! Long-lived inbound links: an SSE stream or a WebSocket the bridge reads from a server
//! (an observer's links). Each link is one task, kept up by the reconnect supervisor
//! ([`super::reconnect`]: jittered exponential backoff, reset by a connection that
//! delivered frames and stayed up; an SSE server's `retry:` advice raises the wait),
//! reporting [`Msg::Up`], each message and [`Msg::Down`] over one bounded channel (so a
//! slow reader slows the reading), and taking commands ([`Cmd`]: write a message, drop the
//! connection, close for good).
//!
//! An SSE link is a `GET` of `text/event-stream` (its answer awaited at most `timeout_ms`;
//! `Last-Event-ID` when the server numbers its frames), parsed by the bounded parser
//! (`aep_adapters::observer::sse`: an oversized frame is dropped and counted, the stream
//! goes on). A WebSocket link is `ws(s)://` over the transport's rustls configuration,
//! bounded per message (`max_frame_bytes`: a larger one ends the connection, as WebSocket
//! framing cannot skip it), its first message written before anything is read. Silence
//! past `idle_timeout_ms` ends a connection; a socket the observer asked pings for is
//! pinged every third of it. A secret read from a file is read again at every connect.

use std::sync::Arc;
use std::time::Duration;

use aep_adapters::observer::sse::Parser;
use aep_adapters::observer::{LinkKind, Open, Secret};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_util::sync::CancellationToken;

use super::reconnect::{Ended, Link, Policy, Retry, supervise};
use super::ws::{self, WsOptions};
use super::{Headers, HttpClient, HttpOptions, TlsConfig};

/// The longest SSE line accepted (a frame's data may span several lines up to the frame cap).
const MAX_LINE: usize = 1 << 20;

/// What a link tells its reader (each names the link).
pub enum Msg {
    /// Connected, with the secret it connected with.
    Up(String, Option<String>),
    /// One message.
    Frame(String, String),
    /// The connection ended.
    Down(String, Down),
}

/// Why a link's connection ended.
pub enum Down {
    /// The server closed it (with its WebSocket close code, if any), or the stream ended.
    Closed(Option<u16>),
    /// It failed: why.
    Failed(String),
    /// A message passed the bound.
    Oversized(String),
}

impl Down {
    /// As an observer is told.
    pub fn as_input(&self) -> aep_adapters::observer::Down<'_> {
        match self {
            Down::Closed(code) => aep_adapters::observer::Down::Closed(*code),
            Down::Failed(e) => aep_adapters::observer::Down::Failed(e),
            Down::Oversized(e) => aep_adapters::observer::Down::Oversized(e),
        }
    }
}

/// What a link is told.
pub enum Cmd {
    /// Write a text message.
    Send(String),
    /// Drop the connection (it reconnects).
    Reset,
    /// Stop for good.
    Close,
}

/// How to reach a server's links: what every link of one reader shares.
pub struct LinkOptions {
    /// The reader's name, for the log (`bridges.<name>`).
    pub name: String,
    /// The server's base URL (`http(s)://`; sockets at its `ws(s)://` twin).
    pub base: String,
    /// Headers of every connect.
    pub headers: Headers,
    /// A secret the connects carry, read again at every connect.
    pub secret: Option<Secret>,
    /// TLS options for `https://` and `wss://`.
    pub tls: TlsConfig,
    /// Connect timeout, and the wait for a stream's answer.
    pub timeout: Duration,
    /// A connection silent this long ends; `None`: never.
    pub idle: Option<Duration>,
    /// The largest message (SSE frame, WebSocket message), bytes.
    pub max_frame: usize,
    /// The reconnect policy.
    pub policy: Policy,
}

/// What the links of one reader share.
pub struct LinkCfg {
    opts: LinkOptions,
    http: HttpOptions,
    wss: Option<Arc<rustls::ClientConfig>>,
    /// Where the links report.
    pub tx: mpsc::Sender<Msg>,
}

impl LinkCfg {
    /// The shared configuration of links reporting to `tx`.
    pub fn new(opts: LinkOptions, tx: mpsc::Sender<Msg>) -> Result<Self, super::tls::TlsError> {
        let wss = ws::tls_for(&ws::ws_url(&opts.base), &opts.tls)?;
        let http = HttpOptions { timeout: opts.timeout, headers: opts.headers.clone(), tls: opts.tls.clone() };
        Ok(Self { opts, http, wss, tx })
    }

    /// The secret's definition, if the links carry one.
    pub fn secret_def(&self) -> Option<&Secret> {
        self.opts.secret.as_ref()
    }

    /// The secret now: the configured one, else its file's content.
    fn secret(&self) -> Result<Option<String>, String> {
        let Some(s) = &self.opts.secret else { return Ok(None) };
        if !s.value.is_empty() {
            return Ok(Some(s.value.clone()));
        }
        let Some(file) = &s.file else { return Ok(None) };
        let path = match (file.strip_prefix("~/"), std::env::var_os("HOME")) {
            (Some(rest), Some(home)) => std::path::PathBuf::from(home).join(rest),
            _ => std::path::PathBuf::from(file),
        };
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        match text.trim() {
            "" => Err(format!("{} is empty", path.display())),
            t => Ok(Some(t.to_owned())),
        }
    }

    /// The headers of a link's connect with `secret`.
    fn headers(&self, secret: Option<&str>) -> Headers {
        let mut h = self.opts.headers.clone();
        if let (Some(s), Some(v)) = (&self.opts.secret, secret) {
            for (name, prefix) in s.link {
                h.insert((*name).to_owned(), format!("{prefix}{v}"));
            }
        }
        h
    }
}

/// One link.
struct LinkTask {
    cfg: Arc<LinkCfg>,
    open: Open,
    rx: mpsc::UnboundedReceiver<Cmd>,
    parser: Parser,
    /// The SSE client and the secret it carries.
    client: Option<(Option<String>, HttpClient)>,
    frames: u64,
}

/// How a connection ended.
enum End {
    /// Reconnect; the runtime is told why.
    Down(Down),
    /// The link is done (closed by the runtime, gone, or the runtime is gone).
    Stop,
}

/// Runs link `open` until it is closed, gone, or `shutdown`.
pub async fn run(cfg: Arc<LinkCfg>, open: Open, rx: mpsc::UnboundedReceiver<Cmd>, shutdown: CancellationToken) {
    let name = format!("{} {}", cfg.opts.name, open.link);
    let parser = Parser::new(MAX_LINE.min(cfg.opts.max_frame.max(1024)), cfg.opts.max_frame);
    let policy = cfg.opts.policy.clone();
    let mut task = LinkTask { cfg, open, rx, parser, client: None, frames: 0 };
    supervise(&name, &policy, Some(&shutdown), &mut task).await;
}

impl LinkTask {
    async fn report(&self, m: Msg) -> Result<(), End> {
        self.cfg.tx.send(m).await.map_err(|_| End::Stop)
    }

    async fn frame(&mut self, text: String) -> Result<(), End> {
        self.frames += 1;
        self.report(Msg::Frame(self.open.link.clone(), text)).await
    }

    /// Takes the runtime's command while connected: `Ok(Some(text))` to write.
    fn command(cmd: Option<Cmd>) -> Result<Option<String>, End> {
        match cmd {
            Some(Cmd::Send(t)) => Ok(Some(t)),
            Some(Cmd::Reset) => Err(End::Down(Down::Failed("dropped by the observer".into()))),
            Some(Cmd::Close) | None => Err(End::Stop),
        }
    }

    async fn sse(&mut self, secret: Option<String>) -> Result<(), End> {
        let failed = |e: String| End::Down(Down::Failed(e));
        if self.client.as_ref().is_none_or(|(s, _)| *s != secret) {
            let opts = HttpOptions { headers: self.cfg.headers(secret.as_deref()), ..self.cfg.http.clone() };
            self.client = Some((secret.clone(), HttpClient::streaming(&opts).map_err(|e| failed(e.to_string()))?));
        }
        let Some((_, client)) = &self.client else { return Ok(()) };
        let url = format!("{}{}", self.cfg.opts.base, self.open.path);
        // A server that takes the connection but never answers (one may do so to a request
        // arriving while it boots) is retried, not waited on forever.
        let mut stream =
            match tokio::time::timeout(self.cfg.opts.timeout, client.open_stream(&url, self.parser.last_id())).await {
                Ok(r) => r.map_err(|e| failed(e.to_string()))?,
                Err(_) => return Err(failed(format!("GET {url}: no answer within {:?}", self.cfg.opts.timeout))),
            };
        if stream.status != 200 {
            let status = stream.status;
            return Err(failed(format!("GET {url}: HTTP {status}: {}", stream.text(300).await.trim())));
        }
        if !stream.content_type.starts_with("text/event-stream") {
            return Err(failed(format!("GET {url}: not an event stream ({:?})", stream.content_type)));
        }
        self.report(Msg::Up(self.open.link.clone(), secret)).await?;
        tracing::info!(link = %self.cfg.opts.name, key = %self.open.link, url = %url, "Link connected.");
        let (mut frames, mut warned) = (Vec::new(), false);
        loop {
            let idle = self.cfg.opts.idle.unwrap_or(Duration::MAX);
            let chunk = tokio::select! {
                cmd = self.rx.recv() => {
                    Self::command(cmd)?;
                    continue;
                }
                c = tokio::time::timeout(idle, stream.chunk()) => match c {
                    Ok(Ok(Some(c))) => c,
                    Ok(Ok(None)) => return Err(End::Down(Down::Closed(None))),
                    Ok(Err(e)) => return Err(failed(e.to_string())),
                    Err(_) => return Err(failed(format!("GET {url}: silent for {idle:?}"))),
                },
            };
            let dropped = self.parser.dropped();
            self.parser.push(&chunk, &mut frames);
            if self.parser.dropped() > dropped && !warned {
                warned = true;
                tracing::warn!(link = %self.cfg.opts.name, max_frame_bytes = self.cfg.opts.max_frame, "An oversized SSE frame was dropped.");
            }
            for f in std::mem::take(&mut frames) {
                self.frame(f.data).await?;
            }
        }
    }

    async fn socket(&mut self, secret: Option<String>, ping: bool) -> Result<(), End> {
        let failed = |e: String| End::Down(Down::Failed(e));
        let url = format!("{}{}", ws::ws_url(&self.cfg.opts.base), self.open.path);
        let opts = WsOptions {
            headers: self.cfg.headers(secret.as_deref()),
            bearer: None,
            tls: self.cfg.wss.clone(),
            max_message: Some(self.cfg.opts.max_frame),
            timeout: self.cfg.opts.timeout,
        };
        let ws = ws::connect(&url, &opts).await.map_err(|e| {
            if let ws::WsError::Certificate { reason, .. } = &e {
                tracing::error!(link = %self.cfg.opts.name, reason, "TLS certificate refused (tls.ca_file?).");
            }
            failed(e.to_string())
        })?;
        let (mut sink, mut stream) = ws.split();
        if let Some(first) = &self.open.first {
            sink.send(Message::text(first.clone())).await.map_err(|e| failed(format!("{url}: first message: {e}")))?;
        }
        self.report(Msg::Up(self.open.link.clone(), secret)).await?;
        tracing::info!(link = %self.cfg.opts.name, key = %self.open.link, url = %url, "Link connected.");
        let idle = self.cfg.opts.idle;
        let every = idle.filter(|_| ping).map_or(Duration::from_secs(3600), |i| (i / 3).max(Duration::from_millis(50)));
        let mut pings = tokio::time::interval(every);
        pings.tick().await;
        let mut last = Instant::now();
        loop {
            let wait = if ping { Duration::MAX } else { idle.unwrap_or(Duration::MAX) };
            let m = tokio::select! {
                cmd = self.rx.recv() => {
                    match Self::command(cmd) {
                        Ok(Some(t)) => sink.send(Message::text(t)).await.map_err(|e| failed(format!("{url}: {e}")))?,
                        Ok(None) => {}
                        Err(e) => {
                            let _ = sink.send(Message::Close(None)).await;
                            return Err(e);
                        }
                    }
                    continue;
                }
                _ = pings.tick(), if ping && idle.is_some() => {
                    let idle = idle.unwrap_or_default();
                    if last.elapsed() >= idle {
                        return Err(failed(format!("{url}: silent for {idle:?}")));
                    }
                    sink.send(Message::Ping(Default::default())).await.map_err(|e| failed(e.to_string()))?;
                    continue;
                }
                m = tokio::time::timeout(wait, stream.next()) => match m {
                    Ok(m) => m,
                    Err(_) => return Err(failed(format!("{url}: silent for {wait:?}"))),
                },
            };
            last = Instant::now();
            match m {
                None => return Err(End::Down(Down::Closed(None))),
                Some(Err(tungstenite::Error::Capacity(e))) => return Err(End::Down(Down::Oversized(e.to_string()))),
                Some(Err(e)) => return Err(failed(e.to_string())),
                Some(Ok(Message::Text(t))) => self.frame(t.as_str().to_owned()).await?,
                Some(Ok(Message::Binary(b))) => {
                    if let Ok(t) = String::from_utf8(b.to_vec()) {
                        self.frame(t).await?;
                    }
                }
                Some(Ok(Message::Close(f))) => return Err(End::Down(Down::Closed(f.map(|f| u16::from(f.code))))),
                // Pings are answered by the WebSocket layer.
                Some(Ok(_)) => {}
            }
        }
    }
}

impl Link for LinkTask {
    type Output = ();

    async fn session(&mut self) -> Ended<()> {
        let before = self.frames;
        let ended = match self.cfg.secret() {
            Err(e) => Err(End::Down(Down::Failed(format!("the secret file: {e}")))),
            Ok(secret) => match self.open.kind {
                LinkKind::Sse => self.sse(secret).await,
                LinkKind::WebSocket { ping } => self.socket(secret, ping).await,
            },
        };
        self.parser.reset();
        let down = match ended {
            Ok(()) | Err(End::Stop) => return Ended::Stop(()),
            Err(End::Down(d)) => d,
        };
        let retry = match &down {
            Down::Closed(None) => Retry::closed(),
            Down::Closed(Some(code)) => Retry::failed(format!("closed by the server ({code})")),
            Down::Failed(e) | Down::Oversized(e) => Retry::failed(e.clone()),
        };
        let gone = matches!(down, Down::Closed(Some(code)) if Some(code) == self.open.gone_on);
        if self.report(Msg::Down(self.open.link.clone(), down)).await.is_err() || gone {
            return Ended::Stop(());
        }
        // A connection that delivered frames was up; an SSE server's `retry:` advice holds.
        let advice = self.parser.retry_ms().map(Duration::from_millis);
        Ended::Retry(retry.was_established(self.frames > before).wait_at_least(advice))
    }

    /// A link closed while it waits to reconnect stops at once.
    async fn pause(&mut self, until: Instant) -> Option<()> {
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => return None,
                cmd = self.rx.recv() => if matches!(cmd, Some(Cmd::Close) | None) { return Some(()) },
            }
        }
    }
}
