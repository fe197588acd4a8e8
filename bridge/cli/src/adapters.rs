//! `aep-bridge adapters`: the built-in adapters as manifests with PATH detection,
//! `adapters verify <vendor>` (a synthetic hook through the real `aep-hook` shim, confirmed
//! on the collector's stream), `adapters check <file>` for custom manifests, and the custom
//! manifest loader (`~/.aep/adapters/*.toml`, generic fallback mapping, AEP-0002 Annex A).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde::Serialize;
use serde_json::{Value, json};

use crate::client::{Endpoint, Socket, as_event};
use aep_bridge::custom::{default_dir, load_custom, parse_manifest};

/// Arguments of `aep-bridge adapters`.
#[derive(Debug, Clone, Args)]
pub struct AdaptersArgs {
    /// What to do (default: list).
    #[command(subcommand)]
    pub action: Option<AdaptersAction>,
    /// Machine output: a JSON array of manifests.
    #[arg(long)]
    pub json: bool,
    /// Directory of custom adapter manifests (default `~/.aep/adapters`).
    #[arg(long, env = "AEP_ADAPTERS_DIR")]
    pub dir: Option<PathBuf>,
}

/// `aep-bridge adapters ...`
#[derive(Debug, Clone, Subcommand)]
pub enum AdaptersAction {
    /// Send a synthetic hook through the `aep-hook` shim and confirm it reached the collector.
    Verify {
        /// The vendor id.
        vendor: String,
        /// Collector base URL.
        #[arg(long, env = "AEP_URL")]
        url: Option<String>,
        /// Bearer token.
        #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// How long to wait for the event, in ms.
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u64,
        /// The shim to run (default: `aep-hook` next to this binary, else on PATH).
        #[arg(long)]
        shim: Option<String>,
    },
    /// Validate a custom adapter manifest (TOML); exits 64 when invalid.
    Check {
        /// The manifest file.
        file: PathBuf,
    },
}

/// A built-in adapter's manifest.
#[derive(Debug, Clone, Serialize)]
pub struct Manifest {
    /// Agent identity and `x.{id}.*` token.
    pub id: String,
    /// Human name.
    pub display_name: String,
    /// Executables whose presence on PATH means "installed".
    pub executables: Vec<String>,
    /// How hooks reach the bridge.
    pub hook_channel: String,
    /// What control the adapter supports.
    pub control: String,
    /// The `[bridges.<name>] kind` observing the vendor's own server, if one is built.
    pub observer: Option<String>,
    /// How an answer is written to the vendor's server around the agent, if it takes one.
    pub reply_route: Option<String>,
    /// AEP families it emits.
    pub families: Vec<String>,
    /// How to wire it.
    pub setup: String,
    /// What the bridge checks for drift (hook events and fields the adapter was written against).
    pub drift: String,
    /// `builtin` or the manifest file.
    pub origin: String,
}

/// Manifests of the built-in adapters, read from each vendor's folder (its spec).
pub fn builtin() -> Vec<Manifest> {
    aep_adapters::vendors::SPECS
        .iter()
        .map(|s| Manifest {
            id: s.id.into(),
            display_name: s.display_name.into(),
            executables: s.executables.iter().map(|e| (*e).to_owned()).collect(),
            hook_channel: s.hook_channel.into(),
            control: s.control.describe(),
            observer: s.observer().map(|o| o.id.to_owned()),
            reply_route: s.reply_route().map(aep_adapters::spec::ReplyRoute::describe),
            families: s.families.iter().map(|f| (*f).to_owned()).collect(),
            setup: s.setup.into(),
            drift: match s.adapter.and_then(|a| a().vocabulary()) {
                Some(v) => format!(
                    "hook events outside the {} known and new fields of the {} recorded are counted (aep_bridge_drift_total)",
                    v.events.len(),
                    v.fields.len()
                ),
                None => "not checked (no recorded vocabulary)".into(),
            },
            origin: "builtin".into(),
        })
        .collect()
}

/// The first executable of `names` found on PATH.
pub fn detect(names: &[String]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for n in names {
            let p = dir.join(n);
            if is_executable(&p) {
                return Some(p);
            }
        }
    }
    None
}

fn is_executable(p: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        p.is_file()
    }
}

fn list(args: &AdaptersArgs) -> i32 {
    let dir = args.dir.clone().unwrap_or_else(|| default_dir(&aep_bridge::env::Env::process()));
    let mut all = builtin();
    let (custom, bad) = load_custom(&dir);
    for (f, c) in custom {
        all.push(Manifest {
            id: c.id.clone(),
            display_name: c.display_name.clone(),
            executables: c.executables.clone(),
            hook_channel: format!("command hook (generic: {} / {})", c.hook_field, c.session_field),
            control: "observe-only".into(),
            observer: None,
            reply_route: None,
            families: vec![format!("x.{}.*", c.id)],
            setup: format!("run `aep-hook {}` from the agent's hooks", c.id),
            drift: "not checked (no recorded vocabulary)".into(),
            origin: f.display().to_string(),
        });
    }
    for (f, e) in &bad {
        eprintln!("aep-bridge adapters: skipping {}: {e}", f.display());
    }
    if args.json {
        let arr: Vec<Value> = all
            .iter()
            .map(|m| {
                let mut v = serde_json::to_value(m).unwrap_or(Value::Null);
                let found = detect(&m.executables);
                v["status"] = json!(if found.is_some() { "detected" } else { "not-found" });
                if let Some(p) = found {
                    v["path"] = json!(p.display().to_string());
                }
                v
            })
            .collect();
        println!("{}", Value::Array(arr));
        return 0;
    }
    for m in &all {
        let status = match detect(&m.executables) {
            Some(p) => format!("detected ({})", p.display()),
            None => "not found".into(),
        };
        println!("{:<12} {:<24} {status}", m.id, m.display_name);
        println!("    hooks:    {}", m.hook_channel);
        println!("    control:  {}", m.control);
        if let Some(o) = &m.observer {
            println!("    observer: [bridges.<name>] vendor = \"{o}\"");
        }
        if let Some(r) = &m.reply_route {
            println!("    reply:    {r}");
        }
        if !m.families.is_empty() {
            println!("    emits:    {}", m.families.join(", "));
        }
        println!("    setup:    {}", m.setup);
        println!("    drift:    {}", m.drift);
        if m.origin != "builtin" {
            println!("    manifest: {}", m.origin);
        }
    }
    0
}

/// A synthetic hook payload every adapter can map: an unknown hook name (the
/// `x.{vendor}.session.*` fallback) carrying the session under the common field names.
fn synthetic_payload(session: &str) -> Value {
    json!({
        "hook_event_name": "AepVerify", "hook": "AepVerify", "hookName": "AepVerify", "kind": "AepVerify",
        "session_id": session, "sessionId": session, "sessionID": session, "taskId": session,
        "conversationId": session, "thread_id": session,
        "session": {"id": session},
    })
}

fn verify(ep: &Endpoint, vendor: &str, timeout: Duration, shim: Option<String>) -> i32 {
    let known = aep_adapters::vendors::by_vendor(vendor).is_some()
        || load_custom(&default_dir(&aep_bridge::env::Env::process())).0.iter().any(|(_, m)| m.id == vendor);
    if !known {
        eprintln!("aep-bridge adapters verify: unknown vendor {vendor:?}");
        return 2;
    }
    let shim = shim.unwrap_or_else(crate::install::default_shim);
    let session = format!("aep-verify-{}", ulid::Ulid::new().to_string().to_ascii_lowercase());
    let started = aep_bridge::time::now_ms();
    let mut sock = match Socket::connect(ep, "consumer", "aep-cli", json!({})) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("aep-bridge adapters verify: {e}");
            return 1;
        }
    };
    if let Err(e) = sock.subscribe("verify", json!({"agent": vendor}), Some(json!("all"))) {
        eprintln!("aep-bridge adapters verify: {e}");
        return 1;
    }
    let payload = synthetic_payload(&session).to_string();
    let child = std::process::Command::new(&shim)
        .arg(vendor)
        .arg("AepVerify")
        .env("AEP_BRIDGE_URL", &ep.base)
        .env("AEP_TOKEN", ep.token.clone().unwrap_or_default())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => {
            eprintln!("aep-bridge adapters verify: cannot run the shim {shim:?}: {e}");
            return 1;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(payload.as_bytes());
    }
    let _ = child.wait();
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            println!("FAIL {vendor}: no event from the shim reached {} within {} ms", ep.base, timeout.as_millis());
            return 1;
        }
        let v = match sock.recv(left) {
            Ok(Some(v)) => v,
            Ok(None) => continue,
            Err(e) => {
                eprintln!("aep-bridge adapters verify: {e}");
                return 1;
            }
        };
        let Some(ev) = as_event(&v) else { continue };
        let fresh = aep_bridge::time::parse_rfc3339_nanos(&ev.time).is_some_and(|n| n / 1_000_000 + 1000 >= started);
        // Our session, or (for a vendor whose payload names its session elsewhere) an
        // agent-scoped fallback event of the synthetic hook minted after we started.
        let ours = ev.session.as_deref() == Some(session.as_str());
        if ours || (fresh && ev.session.is_none() && ev.r#type.ends_with(".aep_verify")) {
            println!("ok {vendor}: {shim} -> {} -> {} ({})", ep.base, ev.r#type, ev.session.as_deref().unwrap_or("-"));
            return 0;
        }
    }
}

/// Runs the command; returns the exit code.
pub fn run(args: AdaptersArgs) -> i32 {
    match &args.action {
        None => list(&args),
        Some(AdaptersAction::Verify { vendor, url, token, timeout_ms, shim }) => {
            let ep = Endpoint::new(url.clone(), token.clone());
            verify(&ep, vendor, Duration::from_millis(*timeout_ms), shim.clone())
        }
        Some(AdaptersAction::Check { file }) => {
            match std::fs::read_to_string(file).map_err(|e| e.to_string()).and_then(|t| parse_manifest(&t)) {
                Ok(m) => {
                    println!("{}: valid (adapter {:?}, {})", file.display(), m.id, m.display_name);
                    0
                }
                Err(e) => {
                    eprintln!("{}: {e}", file.display());
                    crate::EXIT_CONFIG
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_adapter_has_a_manifest() {
        let ids: Vec<String> = builtin().into_iter().map(|m| m.id).collect();
        for a in aep_adapters::vendors::all() {
            assert!(ids.iter().any(|i| i == a.vendor()), "{}", a.vendor());
        }
    }
}
