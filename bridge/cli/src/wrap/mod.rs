//! `aep-bridge wrap <protocol> -- <agent command...>`: run an agent that speaks a stdio
//! protocol under the byte-transparent tee ([`tee`]) and report its sessions
//! to the running bridge. Exits with the agent's exit code.

use std::ffi::OsString;
use std::time::Duration;

use crate::client::{Endpoint, host_name};
use aep_adapters::MapContext;
use aep_adapters::protocols::{self, STDIO_PROTOCOLS};
use aep_schemas::Capture;
use clap::Args;
use tee::{WrapOptions, run as run_tee};

mod tee;

/// Arguments of `aep-bridge wrap`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "Protocols and who answers their approvals (respond_via):
  acp                 ACP JSON-RPC (e.g. `gemini --acp`, formerly `--experimental-acp`; `qwen --acp`); session/request_permission is
                      the editor's gate: observed read-only, no options or respond_via claimed. The
                      agent is logged under the name its initialize answer gives (agentInfo.name), else `acp`.
  claude-stream-json  Claude Code `-p --output-format stream-json [--input-format stream-json]`;
                      can_use_tool prompts are answered by the process driving Claude Code, not by
                      the tee: observed read-only, the answer recorded via oob.
  codex-app-server    `codex app-server` JSON-RPC (threads, turns, items); approvals are answered by
                      the client driving it: observed read-only, the decision recorded via oob.
  pi-rpc              `pi --mode rpc` (commands in, typed responses and the event stream out); upstream
                      pi raises no approval on this wire: nothing answerable, no respond_via. The
                      session id comes from the client's own get_state; the tee never asks. A client
                      that never asks gets its events at pi's end, as session rpc-{epoch}.")]
pub struct WrapArgs {
    /// The protocol the agent speaks on stdio.
    #[arg(value_parser = clap::builder::PossibleValuesParser::new(STDIO_PROTOCOLS))]
    pub protocol: String,
    /// The agent command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<OsString>,
    /// Collector base URL of the running bridge.
    #[arg(long, env = "AEP_URL")]
    pub url: Option<String>,
    /// Bearer token of the bridge's collector.
    #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Lines the mapper queue holds; further lines are dropped for mapping (never for the
    /// pass-through) while it is full.
    #[arg(long, default_value_t = 4096)]
    pub queue: usize,
    /// Milliseconds queued observations may still be delivered after the agent exits.
    #[arg(long, default_value_t = 2000)]
    pub drain_ms: u64,
    /// Capture ceiling of the mapping (none, metadata, redacted, full).
    #[arg(long, default_value = "metadata")]
    pub capture: Capture,
    /// Capture ceiling of `attention.*` (AEP-0003 §9 rule 1 recommends redacted).
    #[arg(long, default_value = "redacted")]
    pub attention_capture: Capture,
    /// Emit the token/argument delta planes (off by default).
    #[arg(long, env = "AEP_WRAP_DELTAS")]
    pub deltas: bool,
}

/// Runs the tee; the agent's exit code, or a shell-like code when it cannot start.
pub fn run(a: WrapArgs) -> i32 {
    let cx = MapContext { capture: a.capture, attention_capture: a.attention_capture, ..MapContext::default() };
    let opts = WrapOptions {
        protocol: a.protocol,
        command: a.command,
        endpoint: Endpoint::new(a.url, a.token),
        queue: a.queue,
        drain: Duration::from_millis(a.drain_ms),
        post_timeout: Duration::from_secs(2),
        cx,
        opts: protocols::Options { deltas: a.deltas },
        host: host_name(),
    };
    match run_tee(opts) {
        Ok((code, stats)) => {
            if std::env::var_os("AEP_WRAP_STATS").is_some_and(|v| v == "1") {
                use std::sync::atomic::Ordering::Relaxed;
                eprintln!(
                    "aep-bridge wrap: lines={} dropped={} delivered={} failed={} skipped={}",
                    stats.lines.load(Relaxed),
                    stats.dropped.load(Relaxed),
                    stats.delivered.load(Relaxed),
                    stats.failed.load(Relaxed),
                    stats.skipped.load(Relaxed)
                );
            }
            code
        }
        Err(e) => {
            eprintln!("aep-bridge wrap: {e}");
            e.exit_code()
        }
    }
}
