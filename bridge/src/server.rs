//! `aep-bridge serve`: wires config, pipeline, sinks and receivers together, binds the
//! listeners, and shuts down in stages within a grace period.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use aep_adapters::MapContext;
use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use aep_receivers::listener::{self, OnRefused, Protocol};

use crate::config::Config;
use crate::export::tee::{self, OtlpTee, Tees};
use crate::hooks::BridgeHooks;
use crate::metrics::Metrics;
use crate::pipeline::{Pipeline, PipelineBuilder, SinkTx};
use crate::relay::RelayStatus;
use crate::{collector, relay, sinks, state};

/// Errors that stop `serve` from starting.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A listener could not bind. Checked after the data directory's lock, so the port is
    /// not held by a bridge on this directory: the hint is for a bridge of its own.
    #[error(
        "cannot listen on {addr} ({flag}): {source}; another program holds this address (another \
         aep-bridge with its own data directory? `aep-bridge doctor --url` says); pass a different \
         {flag} (0 picks a free port)"
    )]
    Bind {
        /// The address.
        addr: String,
        /// The flag to change.
        flag: &'static str,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The data directory or its state file is unusable.
    #[error("data directory {path}: {message}")]
    DataDir {
        /// The directory.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// Another `serve` uses the data directory.
    #[error(transparent)]
    Locked(#[from] crate::lock::LockError),
}

/// Shared state of the HTTP app.
#[derive(Clone)]
pub struct AppState {
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Upstream relay liveness.
    pub relay: Arc<RelayStatus>,
    /// Whether the relay is required for `ok`.
    pub relay_required: bool,
    /// Failing sinks and state.
    pub health: Arc<crate::health::Health>,
}

async fn metrics_page(State(s): State<AppState>) -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], s.metrics.render())
}

/// Everything the main port serves.
pub struct AppParts {
    /// Health and metrics state.
    pub state: AppState,
    /// The hook receiver's handler.
    pub hooks: Arc<BridgeHooks>,
    /// Largest hook body accepted, bytes.
    pub max_hook_body: usize,
    /// The OTLP receivers' handler (OTLP/HTTP on this port).
    pub otlp: Arc<crate::otlp_in::BridgeOtlp>,
    /// The embedded collector and the pipeline its emitters submit to, when enabled.
    pub collector: Option<(Arc<collector::Collector>, Pipeline)>,
    /// The web view (`/`, `/ui/*`), when enabled.
    pub ui: Option<Arc<crate::ui::Ui>>,
    /// What keeps other origins' web pages and rebinding names out (every route).
    pub guard: Arc<crate::guard::Guard>,
}

/// The bridge's HTTP app: `/livez`, `/readyz`, `/healthz`, `/metrics`, `/hooks/*`, OTLP/HTTP `/v1/*` and, when
/// enabled, the collector (`/events`, `/stream`, `/socket`, `/.well-known/aep`) and the web
/// view (`/`, `/ui/*`), every route behind the [`crate::guard`]. Served on
/// the main listener and on the extra OTLP/HTTP one; testable without a socket.
pub fn app(parts: AppParts) -> Router {
    let g = &parts.guard;
    let probes = crate::health::Probes {
        health: parts.state.health.clone(),
        relay: parts.state.relay.clone(),
        relay_required: parts.state.relay_required,
    };
    let mut app = Router::new()
        .route("/metrics", get(metrics_page))
        .with_state(parts.state)
        .merge(crate::health::router(probes))
        // OTLP/HTTP and the collector's emit take JSON or protobuf only (415 otherwise, counted
        // by their receivers); the hooks took any body type, so they get the ingest check.
        .merge(crate::guard::ingest_layer(aep_receivers::hooks::router(parts.hooks, parts.max_hook_body), g))
        .merge(aep_receivers::otlp::router(parts.otlp));
    if let Some((collector, pipeline)) = parts.collector {
        app = app.merge(collector::router(collector, pipeline));
    }
    if let Some(ui) = parts.ui {
        app = app.merge(crate::ui::router(ui));
    }
    crate::guard::guard_layer(app, g)
}

/// The names a request's `Host` may carry besides IP addresses and `localhost`: this
/// bridge's host name, `server.allowed_hosts` and (older files) `ui.allowed_hosts`.
pub fn allowed_hosts(cfg: &Config) -> Vec<String> {
    let mut hosts = vec![host_name(cfg)];
    hosts.extend(cfg.server.allowed_hosts.iter().chain(&cfg.ui.allowed_hosts).cloned());
    hosts
}

/// The running bridge's bound addresses.
#[derive(Debug, Clone)]
pub struct Bound {
    /// The main HTTP listener.
    pub http: SocketAddr,
    /// The OTLP/gRPC listener, when enabled.
    pub otlp_grpc: Option<SocketAddr>,
    /// The extra OTLP/HTTP listener, when enabled.
    pub otlp_http: Option<SocketAddr>,
    /// The listeners of `[bridges.<name>]` that take connections (`agui-proxy`), by name.
    pub bridges: std::collections::BTreeMap<String, SocketAddr>,
    /// Whether the web view is served (`[ui]` and `[collector]` both on).
    pub ui: bool,
    /// How far the sinks that report it have got, by sink name: `jsonl` (when on).
    /// Something to wait on for "this event reached the log" instead of polling the files.
    /// (The GenAI metrics need no wait: they are recorded as an event is stamped, before
    /// the request that brought it is answered.)
    pub progress: std::collections::BTreeMap<&'static str, Arc<crate::pipeline::Progress>>,
}

impl Bound {
    /// The one start-up line naming every address, the web view's included.
    pub fn line(&self, data_dir: &std::path::Path, epoch: u64) -> String {
        let opt = |a: Option<SocketAddr>| a.map(|a| a.to_string()).unwrap_or_else(|| "off".into());
        // A wildcard bind is reached on loopback from this machine.
        let mut page = self.http;
        if page.ip().is_unspecified() {
            page.set_ip(if page.is_ipv4() {
                std::net::Ipv4Addr::LOCALHOST.into()
            } else {
                std::net::Ipv6Addr::LOCALHOST.into()
            });
        }
        let ui = if self.ui { format!("http://{page}/") } else { "off".into() };
        format!(
            "aep-bridge listening: http={} otlp-grpc={} otlp-http={} data={} epoch={epoch} ui={ui}",
            self.http,
            opt(self.otlp_grpc),
            opt(self.otlp_http),
            data_dir.display()
        )
    }
}

async fn bind(addr: SocketAddr, flag: &'static str) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr: addr.to_string(), flag, source })
}

pub use crate::identity::host_name;

/// The capture posture adapters apply at the source, from `[capture]`.
pub fn map_context(cfg: &Config) -> MapContext {
    let mut cx =
        MapContext { capture: cfg.capture.max, attention_capture: cfg.capture.attention, ..MapContext::default() };
    cx.redact.pii = cfg.capture.pii;
    cx.redact.home =
        if cfg.capture.home.is_empty() { cfg.env.var(crate::env::HOME) } else { Some(cfg.capture.home.clone()) };
    cx.redact.secret_names = cfg.capture.secret_names.clone();
    cx.redact.secret_values =
        cfg.capture.secret_names.iter().filter_map(|n| cfg.env.var(n)).filter(|v| v.len() >= 4).collect();
    cx
}

/// Every forward of the agents' own OTLP (the tee, their metrics, their spans), each behind
/// the capture ceiling of where it goes (`export::gate`): nothing above the ceiling leaves,
/// whoever produced it (AEP-0001 §8.2 (b), AEP-0005 §3.3).
fn gated_tees(
    cfg: &Config,
    metrics: &Arc<Metrics>,
    tee: Option<Arc<dyn OtlpTee>>,
    vendor_metrics: Option<Arc<dyn OtlpTee>>,
    vendor_spans: Option<Arc<dyn OtlpTee>>,
) -> Vec<Arc<dyn OtlpTee>> {
    use crate::export::gate::{GatedTee, ceiling};
    use aep_projections::capture_gate::CaptureGate;
    let redact = map_context(cfg).redact;
    let gate = |c| Arc::new(CaptureGate::new(c, redact.clone()));
    let max = cfg.capture.max;
    let tee_ceiling = ceiling(cfg.otlp_in.tee_max_capture.unwrap_or(max), max);
    let export_ceiling = ceiling(cfg.export.otlp.max_capture, max);
    let mut out = Vec::new();
    if let Some(t) = tee {
        tracing::info!(ceiling = tee_ceiling.as_str(), "OTLP tee capture ceiling.");
        out.push(GatedTee::wrap(t, gate(tee_ceiling), tee::http::SINK, metrics));
    }
    // One gate for both: they go to the same `[export.otlp]` peer.
    let export_gate = gate(export_ceiling);
    if let Some(t) = vendor_metrics {
        out.push(GatedTee::wrap(t, export_gate.clone(), "otlp_vendor_metrics", metrics));
    }
    if let Some(t) = vendor_spans {
        out.push(GatedTee::wrap(t, export_gate, "otlp_vendor_spans", metrics));
    }
    out
}

/// The bound listeners of `serve`, bound before anything starts so a port clash fails first.
struct Listeners {
    http: TcpListener,
    otlp_grpc: Option<TcpListener>,
    otlp_http: Option<TcpListener>,
}

impl Listeners {
    async fn bind(cfg: &Config) -> Result<Self, ServeError> {
        let http = bind(cfg.server.listen, "--listen").await?;
        let otlp_grpc = match cfg.server.otlp_grpc {
            None => None,
            Some(a) => Some(bind(a, "--otlp-grpc").await?),
        };
        let otlp_http = match cfg.server.otlp_http {
            None => None,
            Some(a) => Some(bind(a, "--otlp-http").await?),
        };
        Ok(Self { http, otlp_grpc, otlp_http })
    }
}

/// Runs the bridge until SIGINT/SIGTERM or `shutdown` is cancelled. `on_bound` sees the
/// bound addresses once every listener is up.
pub async fn serve(
    cfg: Config,
    shutdown: CancellationToken,
    on_bound: impl FnOnce(&Bound, u64),
) -> Result<(), ServeError> {
    // One serve per data directory, decided before the ports: a second serve on this
    // directory is told who holds it, not sent looking for another port. Held to the end.
    let _lock = crate::lock::DataDirLock::acquire(&cfg.data_dir())?;
    // Registered now, before the start-up line: a SIGTERM sent the moment a supervisor (or
    // a user) reads it stops the bridge gracefully; registered in the spawned task, it
    // could arrive before that task first ran and take the default action (killed, unflushed).
    let signals = stop_signals();
    let listeners = Listeners::bind(&cfg).await?;
    let daemon = Daemon::build(cfg, shutdown.clone())?;
    let stop = shutdown.clone();
    tokio::spawn(async move {
        signals.await;
        stop.cancel();
    });
    daemon.run(listeners, shutdown, on_bound).await
}

/// What every step of [`Daemon::build`] reads: the config and what is settled before
/// anything starts (the data directory and this run's epoch, the metrics and the health
/// report, the token and whether an answer can reach a held moment).
struct Ground {
    cfg: Config,
    data_dir: PathBuf,
    epoch: u64,
    metrics: Arc<Metrics>,
    health: Arc<crate::health::Health>,
    /// Upstream relay liveness, for `/healthz`.
    relay: Arc<RelayStatus>,
    /// The one bearer token of every ingress, when set.
    token: Option<String>,
    /// Whether moments are held: only when an answer can arrive, over an authenticated
    /// binding (a token for the embedded collector, or an upstream relay). Otherwise every
    /// hook answers at once and the agent's own dialog decides.
    can_answer: bool,
    /// The capture posture adapters apply at the source.
    cx: MapContext,
    shutdown: CancellationToken,
}

/// The pipeline's outlets: the sinks' tasks and threads, which end once it closes.
struct Outlets {
    jsonl_thread: Option<std::thread::JoinHandle<()>>,
    progress: std::collections::BTreeMap<&'static str, Arc<crate::pipeline::Progress>>,
    relay_tasks: Vec<tokio::task::JoinHandle<()>>,
    export_tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The spans sink's tee, for the OTLP receivers (the agents' own spans).
    vendor_spans: Option<crate::export::vendor_spans::VendorSpansTee>,
}

impl Ground {
    /// The data directory (created) and this run's epoch (bumped there), the metrics (with
    /// their OTLP delivery when `[export.otlp]` has an endpoint) and the health report.
    fn open(
        cfg: Config,
        shutdown: CancellationToken,
    ) -> Result<(Self, Option<crate::export::otlp_metrics::Delivery>), ServeError> {
        // Who the bridge runs for, on every OTLP resource it exports (its metrics' too).
        let cfg = crate::identity::stamped(cfg);
        let data_dir: PathBuf = cfg.data_dir();
        let dd_err = |message: String| ServeError::DataDir { path: data_dir.display().to_string(), message };
        std::fs::create_dir_all(&data_dir).map_err(|e| dd_err(e.to_string()))?;
        let now_secs = crate::time::now_ms() / 1000;
        // A full disk must not stop the bridge from starting: the epoch is then kept in place
        // or seeded from the clock, and /healthz says the state is not durable.
        let (epoch, epoch_warning) = match state::bump_epoch(&data_dir, now_secs).map_err(|e| dd_err(e.to_string()))? {
            state::Epoch { value, not_durable: None } => (value, None),
            state::Epoch { value, not_durable: Some(e) } => {
                tracing::error!(epoch = value, error = %e, "The epoch could not be written durably; continuing.");
                (value, Some(e))
            }
        };
        // The bridge's metrics also go over OTLP when `[export.otlp]` has an endpoint.
        let (metrics, delivery) = match crate::export::otlp_metrics::setup(&cfg.export) {
            Some((reader, delivery)) => (Arc::new(Metrics::with_reader(reader)), Some(delivery)),
            None => (Arc::new(Metrics::default()), None),
        };
        let health = Arc::new(crate::health::Health::default());
        if let Some(e) = &epoch_warning {
            health.failing("state", e);
        }
        let token = (!cfg.server.token.is_empty()).then(|| cfg.server.token.clone());
        // A token that may answer (the operator's, or an access entry with `answer`).
        let answerer = cfg.access.iter().any(|a| a.roles.contains(&aep_receivers::access::Role::Answer));
        let can_answer = token.is_some() || cfg.relay.url.is_some() || answerer;
        let cx = map_context(&cfg);
        let relay = Arc::new(RelayStatus::default());
        let g = Self { cfg, data_dir, epoch, metrics, health, relay, token, can_answer, cx, shutdown };
        Ok((g, delivery))
    }

    /// The collector's gate: the operator's token (`server.token`) and the access list's;
    /// whose each session is, kept in `{data}/state/tenants.jsonl` once the list names
    /// tenants (the hub's own sessions are `[fleet] team`'s); resends recognised against
    /// the JSONL logs, so a restarted hub does not write an edge's resend twice.
    fn gate(&self) -> collector::Gate {
        use aep_receivers::{access::Access, resend, tenancy::Tenancy};
        let local = Some(self.cfg.fleet.team.as_str());
        let tenancy = match self.cfg.access.is_empty() {
            true => Tenancy::memory(local),
            false => Tenancy::open(&self.data_dir.join("state").join("tenants.jsonl"), local),
        };
        let dir = self.data_dir.clone();
        let seed: Option<resend::Seed> = self.cfg.jsonl.enabled.then(|| {
            Box::new(move |agent: &str, session: &str, source: &str| {
                resend::log_tail(&crate::sinks::jsonl::log_path(&dir, agent, Some(session)), source)
            }) as resend::Seed
        });
        collector::Gate {
            access: Arc::new(Access::new(self.token.clone(), &self.cfg.access)),
            tenancy: Arc::new(tenancy),
            resends: resend::HighWater::new(seed),
        }
    }

    /// The bridge's metrics pushed over OTLP, and with them the agents' own `/v1/metrics`,
    /// unchanged (the forward is a tee of the OTLP receivers).
    fn start_metrics_export(
        &self,
        delivery: Option<crate::export::otlp_metrics::Delivery>,
    ) -> (Option<crate::export::otlp_metrics::VendorForward>, Option<tokio::task::JoinHandle<()>>) {
        let Some(mut d) = delivery else { return (None, None) };
        let vendor = d.vendor_forward();
        let run =
            d.run(self.cfg.export.retry.clone(), self.metrics.clone(), self.health.clone(), self.shutdown.clone());
        (vendor, Some(tokio::spawn(run)))
    }

    /// The built-in adapters plus custom manifests (`{data}/adapters/*.toml`, on the generic
    /// fallback mapping).
    fn hook_adapters(&self) -> Vec<Box<dyn aep_adapters::HookAdapter>> {
        let mut adapters = aep_adapters::vendors::all();
        adapters.extend(crate::custom::custom_adapters(&self.data_dir.join("adapters")));
        adapters
    }

    /// The command channel, which exists before anything that can receive a command: the
    /// collector and the relay binding send, the control loop owns the inbox. The
    /// read-only observers' identities honour no command (unless a hook vendor shares one).
    fn command_channel(
        &self,
        adapters: &[Box<dyn aep_adapters::HookAdapter>],
    ) -> (crate::commands::Commands, crate::commands::Inbox) {
        let read_only = crate::bridges::read_only_agents(&self.cfg.bridges, self.can_answer, |agent| {
            adapters.iter().any(|a| a.vendor() == agent)
        });
        crate::commands::channel_with(read_only)
    }

    /// The pipeline, fanning out in this order: the JSONL log, the collector (a tap, when
    /// on), the relay, the exporters, the GenAI metrics (a tap, measured as each event is
    /// stamped).
    fn pipeline(
        &self,
        collector: &Arc<collector::Collector>,
        commands: &crate::commands::Commands,
    ) -> (Pipeline, Outlets) {
        let cfg = &self.cfg;
        let mut builder =
            PipelineBuilder::new(self.epoch, crate::identity::source_authority(cfg), self.metrics.clone())
                .notice_wait(Duration::from_millis(cfg.pipeline.notice_wait_ms));
        let mut outlets = Outlets {
            jsonl_thread: None,
            progress: Default::default(),
            relay_tasks: Vec::new(),
            export_tasks: Vec::new(),
            vendor_spans: None,
        };
        // The JSONL logs, read back by the durable exporters.
        let wal = cfg.jsonl.enabled.then(|| crate::export::wal::Wal::new(&self.data_dir, self.metrics.clone()));
        if cfg.jsonl.enabled {
            let (tx, rx) = mpsc::channel(cfg.pipeline.queue_capacity);
            let progress = Arc::new(crate::pipeline::Progress::default());
            outlets.progress.insert("jsonl", progress.clone());
            outlets.jsonl_thread = Some(sinks::jsonl::spawn(
                rx,
                self.data_dir.clone(),
                cfg.jsonl.clone(),
                self.metrics.clone(),
                Some(progress.clone()),
                Some(self.health.clone()),
                wal.clone(),
            ));
            builder = builder.sink(SinkTx::durable_lines("jsonl", tx).with_progress(progress));
        }
        if cfg.collector.enabled {
            builder = builder.tap(collector.clone());
        }
        if let Some((sink, task)) = self.relay_sink(commands) {
            outlets.relay_tasks.push(task);
            builder = builder.sink(sink);
        }
        let (export_sinks, export_tasks, vendor_spans) = crate::export::spawn(
            &cfg.export,
            crate::export::ExportContext {
                wal,
                fleet: Arc::new(crate::identity::of(cfg)),
                ..crate::export::ExportContext::memory(
                    cfg.pipeline.queue_capacity,
                    self.metrics.clone(),
                    self.health.clone(),
                    self.shutdown.clone(),
                )
            },
        );
        for s in export_sinks {
            builder = builder.sink(s);
        }
        outlets.export_tasks = export_tasks;
        outlets.vendor_spans = vendor_spans;
        let genai = crate::genai::GenAiMetrics::new(&self.metrics.meter("aep-bridge"));
        builder = builder.tap(Arc::new(crate::genai::GenAiTap::new(genai)));
        (builder.build(), outlets)
    }

    /// The upstream relay binding (`[relay] url`), which also delivers commands.
    fn relay_sink(&self, commands: &crate::commands::Commands) -> Option<(SinkTx, tokio::task::JoinHandle<()>)> {
        let cfg = &self.cfg;
        let relay_url = cfg.relay.url.as_ref()?;
        let (tx, rx) = mpsc::channel(cfg.pipeline.queue_capacity);
        let relay_token = if cfg.relay.token.is_empty() { self.token.clone() } else { Some(cfg.relay.token.clone()) };
        let mut opts = relay::RelayOptions::new(relay_url.as_str(), relay_token);
        match crate::transport::tls::client_config(&cfg.relay.tls) {
            Ok(tls) => opts.tls = Some(tls),
            Err(e) => tracing::error!(error = %e, "relay.tls unusable; wss:// uses the built-in roots only."),
        }
        opts.accepts = commands.accepts();
        opts.commands = Some(commands.clone());
        let task = tokio::spawn(relay::run(rx, opts, self.relay.clone(), self.metrics.clone(), self.shutdown.clone()));
        Some((SinkTx::new("relay", tx), task))
    }

    /// The OTLP receivers' handler: log records through the vendor profiles into the
    /// pipeline, and every accepted request to the tees (the `[otlp_in] tee` forward, the
    /// agents' own metrics and spans).
    fn otlp_receiver(
        &self,
        pipeline: &Pipeline,
        vendor_metrics: Option<crate::export::otlp_metrics::VendorForward>,
        vendor_spans: Option<crate::export::vendor_spans::VendorSpansTee>,
    ) -> (Arc<crate::otlp_in::BridgeOtlp>, tokio::task::JoinHandle<()>) {
        let cfg = &self.cfg;
        let forward = tee::http::from_config(
            cfg.otlp_in.tee.as_ref(),
            &cfg.otlp_in.tee_headers,
            &cfg.otlp_in.tee_tls,
            &self.metrics,
        );
        // Each forward of the agents' own telemetry behind its capture ceiling; the agents'
        // own spans go into their session traces.
        let tees = gated_tees(
            cfg,
            &self.metrics,
            forward,
            vendor_metrics.map(|v| Arc::new(v) as Arc<dyn OtlpTee>),
            vendor_spans.map(|v| Arc::new(v) as Arc<dyn OtlpTee>),
        );
        crate::otlp_in::BridgeOtlp::new(
            pipeline.clone(),
            self.cx.clone(),
            cfg.otlp_in.mode,
            crate::otlp_in::profile_overrides(&cfg.otlp_in),
            cfg.pipeline.queue_capacity,
            Tees::of(tees),
            self.token.clone(),
            aep_receivers::otlp::DecodeBudget::new(cfg.otlp_in.max_decode_bytes),
        )
    }

    /// The control loop (on the command inbox) and the hook receiver's handler holding its
    /// moments on it, with the opt-in gates, what `doctor`'s probe is told, the reply routes
    /// of the plugins' bus asks and the idle close.
    fn hooks(
        &self,
        pipeline: &Pipeline,
        adapters: Vec<Box<dyn aep_adapters::HookAdapter>>,
        inbox: crate::commands::Inbox,
    ) -> (Arc<BridgeHooks>, Arc<crate::control::ControlLoop>) {
        let cfg = &self.cfg;
        let attention = Arc::new(crate::attention::AttentionBook::default());
        let (control, _control_task) = crate::control::ControlLoop::start(
            pipeline.clone(),
            attention.clone(),
            self.cx.clone(),
            Duration::from_secs(cfg.control.attention_timeout_secs),
            inbox,
        );
        let mut hooks = BridgeHooks::new(pipeline.clone(), adapters, self.cx.clone(), self.token.clone())
            .with_control(attention, control.clone(), self.can_answer)
            .with_gates(cfg.control.gates.clone())
            .with_about(serde_json::json!({
                "data_dir": self.data_dir,
                "logs": cfg.jsonl.enabled,
                "version": env!("CARGO_PKG_VERSION"),
                "pid": std::process::id(),
            }));
        // The asks of plugins that forward their server's bus, answered over its reply route.
        match crate::transport::HttpClient::new(&crate::transport::HttpOptions::default()) {
            Ok(rest) => {
                hooks = hooks.with_reply_routes(crate::bridges::reply::Replies::new(rest, Duration::from_secs(8)))
            }
            Err(e) => tracing::error!(error = %e, "No reply route for the plugins' bus asks."),
        }
        let idle = Some(Duration::from_secs(cfg.hooks.idle_session_secs));
        let hooks = Arc::new(hooks.with_idle_close(idle));
        // The stall record of the nonce window: a beat while the runtime runs.
        let (beating, stop) = (hooks.clone(), self.shutdown.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(crate::auth::BEAT_MS));
            every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = every.tick() => beating.beat(),
                }
            }
        });
        (hooks, control)
    }

    /// One connection budget for every listener (the HTTP ports, OTLP/gRPC, the observers
    /// that listen): all of them full still fit the open-file limit. Refusals are counted.
    fn listen_limits(&self) -> (listener::Limits, OnRefused) {
        let cfg = &self.cfg;
        let listening = 1
            + usize::from(cfg.server.otlp_http.is_some())
            + usize::from(cfg.server.otlp_grpc.is_some())
            + cfg.bridges.values().filter(|b| b.listen.is_some()).count();
        let limits = cfg.server.limits().fitted_to_file_limit(listening);
        let m = self.metrics.clone();
        let on_refused: OnRefused =
            Arc::new(move |p: Protocol| m.rejected.inc(&[("receiver", p.label()), ("reason", "connections")]));
        (limits, on_refused)
    }

    /// `[bridges.<name>]`: the observers of agents' own event streams; returns the
    /// addresses of those that take connections, by name. One that cannot start is logged
    /// and the others run.
    fn start_observers(
        &self,
        pipeline: &Pipeline,
        control: &Arc<crate::control::ControlLoop>,
        hooks: &BridgeHooks,
        listen: (listener::Limits, OnRefused),
    ) -> std::collections::BTreeMap<String, SocketAddr> {
        let deps = crate::bridges::Deps {
            pipeline: pipeline.clone(),
            control: control.clone(),
            book: hooks.attention().clone(),
            cx: self.cx.clone(),
            can_answer: self.can_answer,
            hook_sessions: hooks.hook_sessions().clone(),
            data_dir: Some(self.data_dir.clone()),
            listen,
        };
        let mut listeners = std::collections::BTreeMap::new();
        for (name, b) in &self.cfg.bridges {
            match crate::bridges::spawn(name, b, deps.clone(), self.shutdown.clone()) {
                Ok(s) => {
                    if let Some(a) = s.listen {
                        listeners.insert(name.clone(), a);
                    }
                }
                Err(e) => tracing::error!(error = %e, "Bridge not started."),
            }
        }
        listeners
    }

    /// The HTTP [`app`] over the parts built: the probes and metrics, the hook and OTLP/HTTP
    /// receivers, the collector and the web view when on, every route behind the guard.
    fn app(
        &self,
        hooks: Arc<BridgeHooks>,
        otlp: &Arc<crate::otlp_in::BridgeOtlp>,
        collector: &Arc<collector::Collector>,
        pipeline: &Pipeline,
    ) -> Router {
        let cfg = &self.cfg;
        app(AppParts {
            state: AppState {
                metrics: self.metrics.clone(),
                relay: self.relay.clone(),
                relay_required: cfg.relay.required,
                health: self.health.clone(),
            },
            hooks,
            max_hook_body: cfg.server.max_hook_body,
            otlp: otlp.clone(),
            collector: cfg.collector.enabled.then(|| (collector.clone(), pipeline.clone())),
            // The view reads the collector's stream and routes through it: on with it only.
            ui: (cfg.ui.enabled && cfg.collector.enabled).then(|| {
                crate::ui::Ui::new(
                    collector.clone(),
                    pipeline.clone(),
                    Some(&self.data_dir),
                    &crate::identity::source_authority(cfg),
                    self.epoch,
                    &cfg.ui,
                    cfg.jsonl.enabled.then(|| self.data_dir.join("logs")),
                    &allowed_hosts(cfg),
                )
            }),
            guard: crate::guard::Guard::new(&allowed_hosts(cfg), self.token.clone(), self.metrics.clone()),
        })
    }
}

/// The bridge, built from its config and not yet listening: the pipeline with its sinks,
/// the receivers' handlers, the collector, the control loop and the observers, and the
/// HTTP [`app`] they serve. `serve` builds one and runs it on its listeners; a test builds
/// the same one and drives [`Daemon::app`] without a socket.
pub struct Daemon {
    cfg: Config,
    epoch: u64,
    data_dir: PathBuf,
    app: Router,
    metrics: Arc<Metrics>,
    pipeline: Pipeline,
    collector: Arc<collector::Collector>,
    otlp: Arc<crate::otlp_in::BridgeOtlp>,
    otlp_task: tokio::task::JoinHandle<()>,
    export_tasks: Vec<tokio::task::JoinHandle<()>>,
    relay_tasks: Vec<tokio::task::JoinHandle<()>>,
    otlp_metrics_task: Option<tokio::task::JoinHandle<()>>,
    jsonl_thread: Option<std::thread::JoinHandle<()>>,
    progress: std::collections::BTreeMap<&'static str, Arc<crate::pipeline::Progress>>,
    bridge_listeners: std::collections::BTreeMap<String, SocketAddr>,
    limits: listener::Limits,
    on_refused: OnRefused,
    /// What the probes and systemd's watchdog read.
    health: Arc<crate::health::Health>,
}

impl Daemon {
    /// Builds everything `cfg` asks for: bumps the epoch in the data directory, starts the
    /// sinks, exporters, control loop and `[bridges]` observers (they stop with
    /// `shutdown`). Must run inside a tokio runtime.
    ///
    /// Each step is a method of [`Ground`] (what every step reads), in the order the parts
    /// depend on each other: a receiver exists only once the pipeline it feeds does, and
    /// anything that can receive a command only once the command channel does.
    pub fn build(cfg: Config, shutdown: CancellationToken) -> Result<Self, ServeError> {
        let (g, metrics_delivery) = Ground::open(cfg, shutdown)?;
        let (vendor_metrics, otlp_metrics_task) = g.start_metrics_export(metrics_delivery);
        let adapters = g.hook_adapters();
        let (commands, inbox) = g.command_channel(&adapters);
        let collector =
            collector::Collector::new(g.cfg.collector.clone(), g.gate(), g.metrics.clone(), Some(commands.clone()));
        let (pipeline, mut outlets) = g.pipeline(&collector, &commands);
        let (otlp, otlp_task) = g.otlp_receiver(&pipeline, vendor_metrics, outlets.vendor_spans.take());
        // Control flows only on authenticated bindings (AEP-0004 §4.1): without a token the
        // collector refuses commands in-band before they reach the control loop. The
        // collector and the relay hold the only senders from here on.
        drop(commands);
        let (hooks, control) = g.hooks(&pipeline, adapters, inbox);
        let (limits, on_refused) = g.listen_limits();
        let bridge_listeners = g.start_observers(&pipeline, &control, &hooks, (limits, on_refused.clone()));
        tokio::spawn(crate::hooks::run_idle_close(hooks.clone(), g.shutdown.clone()));
        tokio::spawn(crate::health::watch(g.health.clone(), outlets.progress.clone(), g.shutdown.clone()));
        let app = g.app(hooks, &otlp, &collector, &pipeline);
        let Ground { cfg, data_dir, epoch, metrics, health, .. } = g;
        Ok(Self {
            cfg,
            epoch,
            data_dir,
            app,
            metrics,
            pipeline,
            collector,
            otlp,
            otlp_task,
            export_tasks: outlets.export_tasks,
            relay_tasks: outlets.relay_tasks,
            otlp_metrics_task,
            jsonl_thread: outlets.jsonl_thread,
            progress: outlets.progress,
            bridge_listeners,
            limits,
            on_refused,
            health,
        })
    }

    /// The HTTP app the main port (and the extra OTLP/HTTP port) serves.
    pub fn app(&self) -> Router {
        self.app.clone()
    }

    /// This run's epoch (AEP-0001 §5.3).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The pipeline every receiver submits to.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Serves the listeners until `shutdown`, then stops in stages within the grace period.
    async fn run(
        self,
        listeners: Listeners,
        shutdown: CancellationToken,
        on_bound: impl FnOnce(&Bound, u64),
    ) -> Result<(), ServeError> {
        let Self { cfg, epoch, data_dir, app, metrics, pipeline, collector, otlp, otlp_task, .. } = self;
        let bound = Bound {
            http: listeners
                .http
                .local_addr()
                .map_err(|e| ServeError::DataDir { path: data_dir.display().to_string(), message: e.to_string() })?,
            otlp_grpc: listeners.otlp_grpc.as_ref().and_then(|l| l.local_addr().ok()),
            otlp_http: listeners.otlp_http.as_ref().and_then(|l| l.local_addr().ok()),
            bridges: self.bridge_listeners,
            ui: cfg.ui.enabled && cfg.collector.enabled,
            progress: self.progress,
        };
        if !bound.http.ip().is_loopback() {
            // AEP-0003 §8.1: off-host bindings need TLS; this listener speaks plain HTTP.
            tracing::warn!(http = %bound.http, "Listening off-host without TLS: terminate TLS in front of the bridge (AEP-0003 §8.1).");
        }
        on_bound(&bound, epoch);
        tracing::info!(http = %bound.http, epoch, "Bridge started.");
        // Under systemd (`Type=notify`): ready now, and its watchdog petted while the loops turn.
        #[cfg(unix)]
        if let Some(n) = crate::notify::Notifier::from_env(&cfg.env) {
            n.start(self.health.clone(), shutdown.clone());
        }

        let mut servers = Vec::new();
        // One budget for every listener: all of them full still fit the open-file limit.
        let (limits, on_refused) = (self.limits, self.on_refused);
        servers.push(tokio::spawn(listener::serve(
            listeners.http,
            app.clone(),
            limits,
            Protocol::Http,
            on_refused.clone(),
            shutdown.clone(),
        )));
        if let Some(l) = listeners.otlp_http {
            // The extra OTLP/HTTP port serves the same app (the OTLP paths live on both).
            servers.push(tokio::spawn(listener::serve(
                l,
                app.clone(),
                limits,
                Protocol::Http,
                on_refused.clone(),
                shutdown.clone(),
            )));
        }
        if let Some(l) = listeners.otlp_grpc {
            let cfg = aep_receivers::otlp::GrpcConfig {
                max_concurrency: cfg.otlp_in.max_grpc_concurrency.max(1),
                connections: limits,
                ..Default::default()
            };
            let h: Arc<dyn aep_receivers::otlp::OtlpHandler> = otlp.clone();
            servers.push(tokio::spawn(aep_receivers::otlp::serve_grpc(l, h, cfg, on_refused, shutdown.clone())));
        }

        shutdown.cancelled().await;
        let grace = Duration::from_millis(cfg.server.shutdown_grace_ms);
        let deadline = Instant::now() + grace;
        let left = || deadline.saturating_duration_since(Instant::now());
        tracing::info!(grace_ms = cfg.server.shutdown_grace_ms, "Shutting down: stopping receivers.");
        collector.close();
        for s in servers {
            let _ = tokio::time::timeout(left(), s).await;
        }
        // Receivers are down: let the OTLP queue drain into the pipeline, then close it.
        // The router holds the OTLP handler: drop it so the OTLP queue closes and drains.
        drop(app);
        drop(otlp);
        let _ = tokio::time::timeout(left(), otlp_task).await;
        // Lines an export cut short (its client gone mid-export) still held: written first.
        let _ = tokio::time::timeout(left(), pipeline.flush_held()).await;
        pipeline.close();
        drop(pipeline);
        let mut unfinished = Vec::new();
        for t in self.export_tasks {
            if tokio::time::timeout(left(), t).await.is_err() {
                unfinished.push("exporter (flush)");
            }
        }
        for t in self.relay_tasks {
            if tokio::time::timeout(left(), t).await.is_err() {
                unfinished.push("relay (closing frame)");
            }
        }
        if let Some(t) = self.otlp_metrics_task {
            // The provider's shutdown runs the last collection through the exporter, then drops it.
            let m = metrics.clone();
            let _ = tokio::task::spawn_blocking(move || m.shutdown()).await;
            if tokio::time::timeout(left(), t).await.is_err() {
                unfinished.push("otlp metrics (last collection)");
            }
        }
        if let Some(t) = self.jsonl_thread {
            let joined = tokio::task::spawn_blocking(move || t.join());
            if tokio::time::timeout(left(), joined).await.is_err() {
                unfinished.push("jsonl (flush and fsync)");
            }
        }
        if !unfinished.is_empty() {
            tracing::warn!(unfinished = ?unfinished, "Shutdown grace period ran out before everything finished.");
            eprintln!("aep-bridge: warning: shutdown grace period ran out; unfinished: {}", unfinished.join(", "));
        }
        Ok(())
    }
}

/// Resolves at the first SIGINT (Ctrl-C) or SIGTERM. The handlers are installed when this is
/// called, not when the future is first polled, so no signal in between is missed.
fn stop_signals() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{Signal, SignalKind, signal};
        // A kind that could not be installed never fires (the other still does).
        async fn recv(s: Option<Signal>) {
            match s {
                Some(mut s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        let term = signal(SignalKind::terminate()).ok();
        let int = signal(SignalKind::interrupt()).ok();
        async move {
            tokio::select! {
                () = recv(term) => {}
                () = recv(int) => {}
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use http_body_util::BodyExt as _;
    use tower::ServiceExt as _;

    /// A SIGTERM sent after `stop_signals` is called but before its future first runs (the
    /// start-up line read and answered at once, on a busy machine) is a stop, not the default
    /// action's kill of the whole process (this test binary included).
    #[cfg(unix)]
    #[tokio::test]
    async fn a_stop_signal_before_the_first_poll_is_caught() {
        use rustix::process::{Signal, getpid, kill_process};
        let stop = stop_signals();
        kill_process(getpid(), Signal::TERM).unwrap();
        // A bound on a delivery the kernel makes at once: only a broken handler waits it out.
        tokio::time::timeout(Duration::from_secs(30), stop).await.expect("the SIGTERM never reached the handler");
    }

    /// The app over a pipeline without sinks: the routes, their status codes and what they
    /// count, without binding a socket.
    fn test_app(collector: bool) -> (Router, Arc<Metrics>) {
        test_app_with(collector, false)
    }

    fn test_app_with(collector: bool, relay_required: bool) -> (Router, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::default());
        let cfg = Config::default();
        let c = collector::Collector::new(cfg.collector.clone(), collector::Gate::token(None), metrics.clone(), None);
        let pipeline = PipelineBuilder::new(1, "test", metrics.clone()).tap(c.clone()).build();
        let (otlp, _task) = crate::otlp_in::BridgeOtlp::new(
            pipeline.clone(),
            map_context(&cfg),
            cfg.otlp_in.mode,
            Default::default(),
            cfg.pipeline.queue_capacity,
            None,
            None,
            aep_receivers::otlp::DecodeBudget::new(cfg.otlp_in.max_decode_bytes),
        );
        let hooks = Arc::new(BridgeHooks::new(pipeline.clone(), aep_adapters::vendors::all(), map_context(&cfg), None));
        let state =
            AppState { metrics: metrics.clone(), relay: Arc::default(), relay_required, health: Arc::default() };
        let app = app(AppParts {
            state,
            hooks,
            max_hook_body: cfg.server.max_hook_body,
            otlp,
            collector: collector.then_some((c, pipeline)),
            ui: None,
            guard: crate::guard::Guard::new(&[], None, metrics.clone()),
        });
        (app, metrics)
    }

    async fn call(app: &Router, req: Request<Body>) -> (StatusCode, String) {
        let res = app.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    fn post(uri: &str, content_type: &str, body: impl Into<Body>) -> Request<Body> {
        Request::post(uri).header("content-type", content_type).body(body.into()).unwrap()
    }

    #[tokio::test]
    async fn every_route_answers_without_a_socket() {
        let (app, metrics) = test_app(true);
        let (st, body) = call(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
        assert_eq!((st, body.as_str()), (StatusCode::OK, r#"{"ok":true,"relay":false}"#));
        let hook = r#"{"session_id":"s1","hook_event_name":"SessionStart","source":"startup"}"#;
        let (st, body) = call(&app, post("/hooks/claude-code", "application/json", hook)).await;
        assert_eq!(st, StatusCode::OK, "{body}");
        assert_eq!(metrics.events_in.get(&[("input", "hook"), (crate::metrics::AGENT, "claude-code")]), 1);
        let (st, body) = call(&app, post("/hooks/nobody", "application/json", hook)).await;
        assert_eq!(st, StatusCode::NOT_FOUND, "{body}");
        let (st, body) = call(&app, post("/v1/logs", "application/x-protobuf", vec![0xff, 0xff, 0xff])).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
        let (st, body) = call(&app, post("/v1/logs", "text/plain", "x")).await;
        assert_eq!(st, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{body}");
        let (st, body) = call(&app, Request::get("/.well-known/aep").body(Body::empty()).unwrap()).await;
        assert_eq!(st, StatusCode::OK);
        assert!(body.contains(r#""role":"collector""#), "{body}");
        let (st, body) = call(&app, Request::get("/metrics").body(Body::empty()).unwrap()).await;
        assert_eq!(st, StatusCode::OK);
        assert!(
            body.contains(r#"aep_bridge_events_in_total{gen_ai_agent_name="claude-code",input="hook"} 1"#),
            "{body}"
        );
    }

    #[tokio::test]
    async fn the_collector_routes_exist_only_when_enabled() {
        let (app, _) = test_app(false);
        let (st, _) = call(&app, Request::get("/.well-known/aep").body(Body::empty()).unwrap()).await;
        assert_eq!(st, StatusCode::NOT_FOUND);
        let (st, _) = call(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
        assert_eq!(st, StatusCode::OK);
        // A required relay that is not connected makes the bridge unhealthy.
        let (app, _) = test_app_with(true, true);
        let (st, body) = call(&app, Request::get("/healthz").body(Body::empty()).unwrap()).await;
        assert_eq!((st, body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, r#"{"ok":false,"relay":false}"#));
    }
}
