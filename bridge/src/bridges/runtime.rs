//! The one observer runtime: drives a vendor's pure observer
//! (`aep_adapters::observer::Observer`) against its server. One task per bridge owns the
//! observer; it feeds it every input in order and executes the steps it returns:
//! REST pages read over the one outbound transport (each answer fed back before the next
//! step), links opened and written ([`crate::transport::link`]: each kept up by the
//! reconnect supervisor and reporting its frames here over one bounded channel, so a slow
//! pipeline slows the reading; a tee proxy's streams report the same way), drafts published (the attention book and the control loop seeing
//! them), asks raised and settled over the server's reply route ([`super::reply`]), cursors
//! kept in the state folder ([`crate::state::Cursors`]), and ticks when the observer asks
//! for one. The pipeline closing stops it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use aep_adapters::EventDraft;
use aep_adapters::observer::{Answer, Ctx, Input, Level, Observer, ObserverSpec, Step};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::reply::{Ask, Replies};
use super::{BridgeConfig, Deps, SpawnError};
use crate::attention::Pending;
use crate::time::now_ms;
use crate::transport::http::Bounded;
use crate::transport::link::{Cmd, Down, LinkCfg, LinkOptions, Msg};
use crate::transport::{HttpClient, HttpOptions};

/// Messages from the links (and a tee proxy's streams) waiting for the observer at most.
const BACKLOG: usize = 256;
/// The usual bound of a REST answer (the transport's).
const REPLY_BOUND: usize = 4 << 20;

/// The pipeline closed: the bridge is shutting down.
struct Closed;

/// One bridge's observer and what it needs to act.
pub(crate) struct Runtime {
    name: String,
    agent: String,
    spec: &'static ObserverSpec,
    obs: Box<dyn Observer>,
    deps: Deps,
    gated: bool,
    base: String,
    http: HttpOptions,
    /// The REST client (with the secret it carries) and the asks answered over it.
    rest: HttpClient,
    secret: Option<String>,
    replies: Arc<Replies>,
    guard: Duration,
    links: Arc<LinkCfg>,
    /// The open links: their command channel and the close code that ends them.
    open: HashMap<String, (mpsc::UnboundedSender<Cmd>, Option<u16>)>,
    cursors: Option<crate::state::Cursors>,
    shutdown: CancellationToken,
}

impl Runtime {
    /// The runtime of `[bridges.<name>]` and the sender its links (or a proxy's tees) use.
    pub(crate) fn new(
        name: &str,
        cfg: &BridgeConfig,
        spec: &'static ObserverSpec,
        obs: Box<dyn Observer>,
        deps: Deps,
        gated: bool,
        shutdown: CancellationToken,
    ) -> Result<(Self, mpsc::Receiver<Msg>), SpawnError> {
        let err = |e| SpawnError::Client(name.to_owned(), e);
        let base = cfg.url.as_ref().map_or_else(String::new, |u| u.as_str().trim_end_matches('/').to_owned());
        let auth = obs.auth();
        let mut headers = cfg.headers.clone();
        headers.extend(auth.headers.iter().cloned());
        let http = HttpOptions { timeout: Duration::from_millis(cfg.timeout_ms), headers, tls: cfg.tls.clone() };
        let secret = auth.secret.as_ref().map(|s| s.value.clone()).filter(|v| !v.is_empty());
        let rest = HttpClient::new(&with_secret(&http, auth.secret.as_ref(), secret.as_deref())).map_err(err)?;
        let guard = Duration::from_millis(cfg.reply_guard_ms);
        let (tx, rx) = mpsc::channel(BACKLOG);
        let opts = LinkOptions {
            name: format!("bridges.{name}"),
            base: base.clone(),
            headers: http.headers.clone(),
            secret: auth.secret,
            tls: cfg.tls.clone(),
            timeout: http.timeout,
            idle: (cfg.idle_timeout_ms > 0).then(|| Duration::from_millis(cfg.idle_timeout_ms)),
            max_frame: cfg.max_frame_bytes,
            policy: cfg.reconnect_policy(),
        };
        let links = LinkCfg::new(opts, tx).map_err(|e| SpawnError::Tls(name.to_owned(), e))?;
        let cursors = deps.data_dir.as_ref().map(|d| crate::state::Cursors::new(&d.join("state"), spec.id, name));
        let replies = Replies::new(rest.clone(), guard);
        let (agent, links) = (cfg.agent(), Arc::new(links));
        let rt = Self {
            name: name.to_owned(),
            agent,
            spec,
            obs,
            deps,
            gated,
            base,
            http,
            rest,
            secret,
            replies,
            guard,
            links,
            open: HashMap::new(),
            cursors,
            shutdown,
        };
        Ok((rt, rx))
    }

    /// A sender of link messages (a tee proxy's streams).
    pub(crate) fn sender(&self) -> mpsc::Sender<Msg> {
        self.links.tx.clone()
    }

    /// Runs until shutdown or until the pipeline closes.
    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<Msg>) {
        tracing::info!(bridge = %self.name, vendor = self.spec.id, url = %self.base, agent = %self.agent, control = self.gated, "Bridge starting.");
        if self.feed(Input::Start).await.is_err() {
            return;
        }
        loop {
            let wake = self.obs.wake().map(|at| Duration::from_millis(at.saturating_sub(now_ms())));
            let fed = tokio::select! {
                _ = self.shutdown.cancelled() => return,
                m = rx.recv() => match m {
                    Some(Msg::Up(link, secret)) => {
                        self.rekey(secret);
                        self.feed(Input::Up(&link)).await
                    }
                    Some(Msg::Frame(link, text)) => self.feed(Input::Frame(&link, &text)).await,
                    Some(Msg::Down(link, why)) => {
                        if let Down::Closed(Some(code)) = &why
                            && self.open.get(&link).is_some_and(|(_, gone)| *gone == Some(*code))
                        {
                            self.open.remove(&link);
                        }
                        self.feed(Input::Down(&link, why.as_input())).await
                    }
                    None => return,
                },
                () = tokio::time::sleep(wake.unwrap_or_default()), if wake.is_some() => self.feed(Input::Tick).await,
            };
            if fed.is_err() {
                tracing::info!(bridge = %self.name, "The pipeline closed; the bridge stops.");
                return;
            }
        }
    }

    /// Rebuilds the REST client (and the reply book) when a link connected with a new secret.
    fn rekey(&mut self, secret: Option<String>) {
        if secret == self.secret {
            return;
        }
        let opts = with_secret(&self.http, self.links.secret_def(), secret.as_deref());
        let Ok(rest) = HttpClient::new(&opts) else { return };
        if self.secret.is_some() {
            // Asks raised under the old secret keep their (now refused) route: answers to
            // them are nacked `refused`; new asks use the new one.
            tracing::warn!(bridge = %self.name, "The server's secret changed; REST calls use the new one.");
        }
        (self.rest, self.secret) = (rest.clone(), secret);
        self.replies = Replies::new(rest, self.guard);
    }

    /// The observer's steps for one input.
    fn steps(&mut self, input: Input<'_>) -> Vec<Step> {
        let (pipeline, sessions, agent) = (&self.deps.pipeline, &self.deps.hook_sessions, &self.agent);
        let cx = Ctx {
            now: now_ms(),
            map: &self.deps.cx,
            mint: &|| pipeline.mint_id(),
            asks: &*self.replies,
            claimed: &|session| sessions.claimed(agent, session),
        };
        let mut out = Vec::new();
        self.obs.feed(input, &cx, &mut out);
        out
    }

    /// Feeds `input` and executes what it leads to, depth first.
    async fn feed(&mut self, input: Input<'_>) -> Result<(), Closed> {
        let mut queue: VecDeque<Step> = self.steps(input).into();
        while let Some(step) = queue.pop_front() {
            let next = match step {
                Step::Get(g) => {
                    let (url, cap) =
                        (format!("{}{}", self.base, g.path), if g.bound == 0 { REPLY_BOUND } else { g.bound });
                    let got = self.rest.get_bounded(&url, cap, g.tail).await;
                    let answer = match &got {
                        Bounded::Whole(status, body) => Answer::Body(*status, body),
                        Bounded::Over(tail) => Answer::Over(tail.as_deref()),
                        Bounded::Failed(e) => Answer::Failed(e),
                    };
                    self.steps(Input::Answer(g.tag, answer))
                }
                Step::Load(key) => {
                    let saved = self.cursors.as_ref().and_then(|c| c.load(&key, &self.name));
                    self.steps(Input::Loaded(&key, saved))
                }
                Step::Publish(drafts, link) => {
                    self.publish(drafts, link.as_deref()).await?;
                    continue;
                }
                Step::Raise(r) => {
                    self.raise(r.vendor_id, r.draft, r.answerable);
                    continue;
                }
                Step::Settle(s) => {
                    let Some(ask) = self.replies.take(&s.vendor_id) else {
                        tracing::debug!(bridge = %self.name, "A settle of an ask this observer does not track.");
                        self.publish(s.otherwise, None).await?;
                        continue;
                    };
                    let (control, pipeline) = (&self.deps.control, &self.deps.pipeline);
                    let drafts = self.replies.settle(ask, s.resolution, s.answered, control, pipeline).await;
                    self.publish(drafts, None).await?;
                    continue;
                }
                Step::Drop(vendor_id) => {
                    if let Some(ask) = self.replies.take(&vendor_id) {
                        self.deps.control.forget(&ask.pending.id);
                        self.deps.book.take(&ask.pending.id);
                    }
                    continue;
                }
                Step::Open(o) => {
                    let (tx, rx) = mpsc::unbounded_channel();
                    self.open.insert(o.link.clone(), (tx, o.gone_on));
                    tokio::spawn(crate::transport::link::run(self.links.clone(), o, rx, self.shutdown.clone()));
                    continue;
                }
                Step::Close(link) | Step::Reset(link) | Step::Send(link, _) if !self.open.contains_key(&link) => {
                    continue;
                }
                Step::Close(link) => {
                    if let Some((tx, _)) = self.open.remove(&link) {
                        let _ = tx.send(Cmd::Close);
                    }
                    continue;
                }
                Step::Reset(link) => {
                    self.command(&link, Cmd::Reset);
                    continue;
                }
                Step::Send(link, text) => {
                    self.command(&link, Cmd::Send(text));
                    continue;
                }
                Step::Save(key) => {
                    if let (Some(c), Some(v)) = (&self.cursors, self.obs.cursor(&key, &*self.replies)) {
                        c.save(&key, &v, &self.name);
                    }
                    continue;
                }
                Step::Forget(key) => {
                    if let Some(c) = &self.cursors {
                        c.forget(&key, &self.name);
                    }
                    continue;
                }
                Step::Expire { keep, older_than_ms } => {
                    if let Some(c) = self.cursors.clone() {
                        let name = self.name.clone();
                        let ttl = Duration::from_millis(older_than_ms);
                        let _ = tokio::task::spawn_blocking(move || c.expire(&keep, ttl, &name)).await;
                    }
                    continue;
                }
                Step::Log(level, msg) => {
                    match level {
                        Level::Debug => tracing::debug!(bridge = %self.name, "{msg}"),
                        Level::Info => tracing::info!(bridge = %self.name, "{msg}"),
                        Level::Warn => tracing::warn!(bridge = %self.name, "{msg}"),
                    }
                    continue;
                }
            };
            for s in next.into_iter().rev() {
                queue.push_front(s);
            }
        }
        Ok(())
    }

    fn command(&self, link: &str, cmd: Cmd) {
        if let Some((tx, _)) = self.open.get(link) {
            let _ = tx.send(cmd);
        }
    }

    /// Tracks an ask before its request is published: the book opened, and when it is
    /// answerable, the reply route registered with the control loop.
    fn raise(&self, vendor_id: String, d: EventDraft, answerable: bool) {
        let (Some(route), Some(id), Some(session)) =
            (aep_adapters::observers::observer_route(self.spec), d.id, d.session)
        else {
            return;
        };
        let p = Pending::from_request(id, &self.agent, session.clone(), d.run, d.subject, &d.data, now_ms());
        self.deps.book.open(p.clone());
        let base = answerable.then(|| self.base.clone());
        self.replies.raise(Ask::new(vendor_id, session, p, base, route), &self.deps.control, &self.deps.book);
    }

    /// Publishes drafts: what a session end settles is settled, sessions are claimed (gated),
    /// the link's cause links fill and learn, and the book and the control loop see what
    /// was stamped.
    async fn publish(&mut self, mut drafts: Vec<EventDraft>, link: Option<&str>) -> Result<(), Closed> {
        aep_adapters::observer::scoped(&mut drafts);
        if drafts.is_empty() {
            return Ok(());
        }
        let (deps, now) = (&self.deps, now_ms());
        for id in deps.book.settle(&self.agent, &mut drafts, now) {
            deps.control.forget(&id);
            self.replies.take_request(&id);
        }
        if self.gated {
            deps.control.claim(&self.agent, &drafts);
        }
        let keys: Vec<_> = drafts.iter().map(|d| (d.correlation_key.clone(), d.cause_key.clone())).collect();
        if let Some(l) = link.and_then(|l| self.obs.links(l)) {
            l.fill(&mut drafts);
        }
        let stamped =
            deps.pipeline.submit_drafts(self.spec.input, self.agent.clone(), drafts).await.map_err(|_| Closed)?;
        if let Some(l) = link.and_then(|l| self.obs.links(l)) {
            l.record(&keys, &stamped.iter().map(|s| s.event.id.clone()).collect::<Vec<_>>());
        }
        self.deps.book.observe(&stamped, now);
        self.deps.control.observe(&stamped);
        Ok(())
    }
}

/// `opts` with a secret on the headers it rides on for REST.
fn with_secret(
    opts: &HttpOptions,
    secret: Option<&aep_adapters::observer::Secret>,
    value: Option<&str>,
) -> HttpOptions {
    let mut o = opts.clone();
    if let (Some(s), Some(v)) = (secret, value) {
        for (name, prefix) in s.rest {
            o.headers.insert((*name).to_owned(), format!("{prefix}{v}"));
        }
    }
    o
}
