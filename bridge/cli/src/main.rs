//! The `aep-bridge` command line: `serve` (the main job) and the client and offline tools.
//!
//! The daemon is the `aep_bridge` library; this binary is its CLI and depends on it, never
//! the reverse. Each client command is a module here (its clap `Args` and a `run`
//! returning the exit code); the load tools are the separate `aep-bench` binary.

mod adapters;
mod client;
mod doctor;
mod import;
mod install;
mod jsonc;
mod ledger;
mod project;
mod respond;
mod service;
mod tail;
mod timeline;
mod uninstall;
mod wrap;

// The daemon allocates per event on every hot path (decode, map, stamp, serialize);
// callgrind put ~37% of the OTLP path's instructions in glibc malloc/free. Built without
// transparent huge pages (the workspace's `no_thp` feature): with them, the OTLP load test
// held ~90 MiB at peak and 17 MiB idle; without, ~55 MiB and 11 MiB, at the same CPU cost.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::io::{BufReader, Read};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use aep_bridge::config::Config;
use aep_bridge::transport::config::parse_off_if_empty;

/// Exit code for an invalid configuration or usage (EX_USAGE).
pub const EXIT_CONFIG: i32 = 64;

/// aep-bridge: an OpenTelemetry-native bridge from AI coding agents to AEP.
#[derive(Debug, Parser)]
#[command(name = "aep-bridge", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the bridge: hook receiver, OTLP receivers, embedded collector, JSONL log.
    #[command(
        after_help = "Example:\n  $ aep-bridge serve                       # 127.0.0.1:8787 (hooks, OTLP/HTTP, collector), OTLP/gRPC :4317\n  $ OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 aep-bridge serve   # and export to a collector"
    )]
    Serve(ServeArgs),
    /// Validate an AEP JSONL stream (a file or `-` for stdin); exits 1 on any failure.
    ///
    /// Beside the spec checks it reports agent-completeness warnings as
    /// `warning[completeness]: ...` lines: a run whose session ends before its terminal, a
    /// run's second terminal, a tool request without exactly one later outcome
    /// (completed/failed/denied, paired by call id, else cause, else tool name), an
    /// outcome before its request or without one (in a stream that carries that tool's
    /// requests), a run terminal without its start, a tool event after its run ended.
    /// Warnings are not spec violations (arrival is never
    /// guaranteed) and leave the exit code at 0 unless `--strict` is given.
    #[command(after_help = "Example:\n  $ aep-bridge validate --strict ~/.aep/logs/claude-code/<session>.jsonl")]
    Validate {
        /// The JSONL file, or `-`.
        file: String,
        /// Treat completeness warnings as failures: exit 1 when there is any.
        #[arg(long)]
        strict: bool,
    },
    /// Follow the embedded collector's SSE stream, one line per event (resumes after a disconnect).
    #[command(after_help = "Example:\n  $ aep-bridge tail --from all --filter '{\"type\":\"tool.*\"}'")]
    Tail(tail::TailArgs),
    /// A run/tool/attention tree of one session with durations.
    #[command(after_help = "Example:\n  $ aep-bridge timeline <session>")]
    Timeline(timeline::TimelineArgs),
    /// Answer an attention request (a control sender).
    #[command(after_help = "Example:\n  $ aep-bridge pending\n  $ aep-bridge respond <request-id> --option allow")]
    Respond(respond::RespondArgs),
    /// Cancel a run (or a whole session) through the control loop.
    #[command(after_help = "Example:\n  $ aep-bridge cancel <session> <run> --reason \"wrong branch\"")]
    Cancel(respond::CancelArgs),
    /// List open attention requests (from the collector's replay).
    #[command(after_help = "Example:\n  $ aep-bridge pending --json")]
    Pending(respond::PendingArgs),
    /// Project AEP JSONL to CloudEvents, OTLP logs, OTLP spans or OCSF (stdout).
    #[command(after_help = "Example:\n  $ aep-bridge project otlp-spans ~/.aep/logs/codex/<session>.jsonl")]
    Project(project::ProjectArgs),
    /// List the built-in adapters (or verify one).
    #[command(after_help = "Example:\n  $ aep-bridge adapters verify claude-code")]
    Adapters(adapters::AdaptersArgs),
    /// Wire an agent's hooks to the bridge.
    #[command(after_help = "Example:\n  $ aep-bridge install claude-code --project . --dry-run")]
    Install(install::InstallArgs),
    /// Take out exactly what `install` added (the user's own hooks and comments stay).
    #[command(after_help = "Example:\n  $ aep-bridge uninstall claude-code --project . --dry-run")]
    Uninstall(uninstall::UninstallArgs),
    /// Check the set-up: the bridge, the token, each agent's wiring, the export, the data dir.
    #[command(
        after_help = "Example:\n  $ aep-bridge doctor --project .          # AEP_TOKEN and AEP_URL as the agents have them"
    )]
    Doctor(doctor::DoctorArgs),
    /// Run `serve` as a user service (systemd user unit; launchd agent on macOS).
    #[command(
        after_help = "Example:\n  $ aep-bridge service install --token-file ~/.config/aep-bridge/token\n  $ aep-bridge service status"
    )]
    Service(service::ServiceArgs),
    /// Run an agent that speaks a stdio protocol (ACP, Claude Code stream-json, Codex app-server) under a
    /// byte-transparent tee that reports its sessions to the running bridge.
    #[command(after_help = "Example:\n  $ aep-bridge wrap acp -- gemini --acp")]
    Wrap(wrap::WrapArgs),
    /// Import the agents' own history (Claude Code transcripts, Codex rollouts) as AEP sessions.
    #[command(after_help = "Example:\n  $ aep-bridge import --since 2026-01-01 --dry-run")]
    Import(import::ImportArgs),
    /// Configuration tools.
    Config {
        /// What to do with the configuration.
        #[command(subcommand)]
        action: ConfigAction,
    },
}

/// `aep-bridge config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Check the configuration exactly as `serve` would load it (the file, the `AEP_BRIDGE_*`
    /// and `OTEL_EXPORTER_OTLP_*` variables, the same flags) and report every problem at
    /// once (exit 64 when invalid).
    Validate {
        /// The file (the same as `--config`; default `AEP_BRIDGE_CONFIG`, else none).
        file: Option<PathBuf>,
        /// What `serve` takes besides the file.
        #[command(flatten)]
        serve: ServeArgs,
    },
}

/// How the daemon process runs. Each flag has an `AEP_BRIDGE_*` env twin; flags override the file.
#[derive(Debug, Clone, Args, Default)]
pub struct ServeArgs {
    /// Configuration file (aep-bridge.toml).
    #[arg(long, env = "AEP_BRIDGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory for JSONL logs and state (default ~/.aep).
    #[arg(long, env = "AEP_BRIDGE_DATA_DIR")]
    pub data_dir: Option<String>,
    /// The one HTTP port (hooks, collector, OTLP/HTTP, /healthz, /metrics). Default 127.0.0.1:8787.
    #[arg(long, env = "AEP_BRIDGE_LISTEN")]
    pub listen: Option<String>,
    /// OTLP/gRPC listener ("" disables). Default 127.0.0.1:4317.
    #[arg(long, env = "AEP_BRIDGE_OTLP_GRPC")]
    pub otlp_grpc: Option<String>,
    /// Extra OTLP/HTTP listener ("" disables). Default 127.0.0.1:4318.
    #[arg(long, env = "AEP_BRIDGE_OTLP_HTTP")]
    pub otlp_http: Option<String>,
    /// Bearer token; enables control. Without it the collector is watch-only. Prefer
    /// `--token-file` or the environment (`AEP_BRIDGE_TOKEN`, else `AEP_TOKEN`, the one the
    /// shim reads): a flag's value is visible to every user in `ps`.
    #[arg(long, env = "AEP_BRIDGE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the bearer token from this file (its first line).
    #[arg(long, env = "AEP_BRIDGE_TOKEN_FILE", conflicts_with = "token")]
    pub token_file: Option<PathBuf>,
    /// Upstream AEP relay base URL.
    #[arg(long, env = "AEP_BRIDGE_RELAY")]
    pub relay: Option<String>,
    /// Capture ceiling: none, metadata, redacted, full. Default metadata.
    #[arg(long, env = "AEP_BRIDGE_MAX_CAPTURE")]
    pub max_capture: Option<String>,
    /// Replay buffer depth per session.
    #[arg(long, env = "AEP_BRIDGE_REPLAY_BUFFER")]
    pub replay_buffer: Option<usize>,
}

impl ServeArgs {
    /// Loads the file (if any), then the `OTEL_EXPORTER_OTLP_*` variables (where the file
    /// leaves a key unset), then applies the flags; every problem is reported at once.
    pub fn load(&self) -> Result<Config, aep_bridge::config::ConfigErrors> {
        use aep_bridge::config::{ConfigErrors, ConfigProblem};
        let text = match &self.config {
            Some(path) => std::fs::read_to_string(path).map_err(|e| {
                ConfigErrors(vec![ConfigProblem { key: path.display().to_string(), message: e.to_string() }])
            })?,
            None => String::new(),
        };
        let env = aep_bridge::env::Env::process();
        let (mut cfg, mut problems) = Config::layer_from_toml_with_env(&text, &env)?;
        if let Some(v) = &self.data_dir {
            cfg.server.data_dir = v.clone();
        }
        let mut flag = |key: &str, r: Result<(), String>| {
            if let Err(message) = r {
                problems.push(ConfigProblem { key: key.into(), message });
            }
        };
        if let Some(v) = &self.listen {
            flag("--listen", aep_bridge::config::parse_listen(v).map(|a| cfg.server.listen = a));
        }
        if let Some(v) = &self.otlp_grpc {
            flag("--otlp-grpc", aep_bridge::config::parse_optional_listen(v).map(|a| cfg.server.otlp_grpc = a));
        }
        if let Some(v) = &self.otlp_http {
            flag("--otlp-http", aep_bridge::config::parse_optional_listen(v).map(|a| cfg.server.otlp_http = a));
        }
        if let Some(v) = &self.relay {
            flag("--relay", parse_off_if_empty(v).map(|u| cfg.relay.url = u));
        }
        if let Some(v) = &self.token {
            cfg.server.token = v.clone();
        } else if let Some(path) = &self.token_file {
            match std::fs::read_to_string(path) {
                Ok(text) => cfg.server.token = text.lines().next().unwrap_or("").trim().to_owned(),
                Err(e) => problems
                    .push(ConfigProblem { key: "--token-file".into(), message: format!("{}: {e}", path.display()) }),
            }
        } else if cfg.server.token.is_empty()
            && let Some(v) = env.var(aep_bridge::env::AEP_TOKEN)
        {
            // The variable the shim, `tail` and `respond` read: one export serves them all.
            cfg.server.token = v.trim().to_owned();
        }
        if let Some(v) = &self.max_capture {
            match v.parse() {
                Ok(c) => {
                    cfg.capture.max = c;
                    // The attention ceiling never exceeds an explicit lower global ceiling.
                    cfg.capture.attention = cfg.capture.attention.min(c.max(aep_schemas::Capture::Metadata));
                }
                Err(e) => problems.push(ConfigProblem { key: "--max-capture".into(), message: format!("{e}") }),
            }
        }
        if let Some(v) = self.replay_buffer {
            cfg.collector.replay_buffer = v;
        }
        problems.extend(cfg.check());
        if problems.is_empty() { Ok(cfg) } else { Err(ConfigErrors(problems)) }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AEP_BRIDGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}

/// Parses the command line and runs it; returns the process exit code.
fn run() -> i32 {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve(args),
        Command::Validate { file, strict } => validate(&file, strict),
        Command::Config { action: ConfigAction::Validate { file, serve } } => config_validate(file, serve),
        Command::Tail(a) => tail::run(a),
        Command::Timeline(a) => timeline::run(a),
        Command::Respond(a) => respond::run(a),
        Command::Cancel(a) => respond::run_cancel(a),
        Command::Pending(a) => respond::run_pending(a),
        Command::Project(a) => project::run(a),
        Command::Adapters(a) => adapters::run(a),
        Command::Install(a) => install::run(a),
        Command::Uninstall(a) => uninstall::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Service(a) => service::run(a),
        Command::Wrap(a) => wrap::run(a),
        Command::Import(a) => import::run(a),
    }
}

fn serve(args: ServeArgs) -> i32 {
    init_tracing();
    let cfg = match args.load() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aep-bridge: {e}");
            return EXIT_CONFIG;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("aep-bridge: cannot start the runtime: {e}");
            return 1;
        }
    };
    let data_dir = cfg.data_dir();
    let result =
        rt.block_on(aep_bridge::server::serve(cfg, tokio_util::sync::CancellationToken::new(), |bound, epoch| {
            println!("{}", bound.line(&data_dir, epoch));
        }));
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("aep-bridge: {e}");
            1
        }
    }
}

fn validate(file: &str, strict: bool) -> i32 {
    let reader: Box<dyn Read> = if file == "-" {
        Box::new(std::io::stdin())
    } else {
        match std::fs::File::open(file) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("aep-bridge validate: cannot open {file}: {e}");
                return 2;
            }
        }
    };
    let report = match aep_schemas::report::validate_report(BufReader::new(reader)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("aep-bridge validate: {e}");
            return 2;
        }
    };
    for f in &report.failures {
        println!("{f}");
    }
    for w in &report.warnings {
        println!("warning[completeness]: {w}");
    }
    let verdict =
        if report.failures.is_empty() { "valid".to_owned() } else { format!("{} failure(s)", report.failures.len()) };
    let warned = match report.warnings.len() {
        0 => String::new(),
        n => format!(", {n} completeness warning(s){}", if strict { " (--strict: failing)" } else { "" }),
    };
    if report.unfinished {
        println!("note: the last line has no newline yet (its writer is still appending it): not checked");
    }
    println!("{file}: {} events, {verdict}{warned}", report.events);
    i32::from(!report.failures.is_empty() || (strict && !report.warnings.is_empty()))
}

fn config_validate(file: Option<PathBuf>, mut args: ServeArgs) -> i32 {
    if file.is_some() {
        args.config = file;
    }
    let what = match &args.config {
        Some(path) => path.display().to_string(),
        None => "built-in defaults".to_owned(),
    };
    match args.load() {
        Ok(_) => {
            println!("{what}: valid (with the environment and flags, as `serve` loads it)");
            0
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            EXIT_CONFIG
        }
    }
}

fn main() {
    std::process::exit(run());
}
