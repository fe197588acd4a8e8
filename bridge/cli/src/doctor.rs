//! `aep-bridge doctor`: checks a set-up end to end, one line per check and a fix for each
//! problem; exit 1 when there is any.
//!
//! - config: the configuration loads as `serve` would load it.
//! - bridge: `GET /healthz` at `--url`/`AEP_URL` answers with `ok` (a failing sink, such
//!   as the JSONL log on a full disk, is named there), and it is where the shim posts
//!   (`AEP_BRIDGE_URL`, else the default port).
//! - token: a hook POST signed the way the shim signs it with `AEP_TOKEN` (a MAC, never the
//!   token) is taken; with a token, one signed with a wrong key is refused (else the bridge
//!   runs without one, and the shim ignores its unproven replies). The probe posts to the
//!   doctor's own path (`/hooks/aep-doctor`): the bridge maps nothing, logs no warning, and
//!   tells a caller whose credentials pass where it writes.
//! - wiring: each agent whose settings exist (user level, and `--project`) runs an
//!   `aep-hook` that exists, on every event `install` wires.
//! - export: each configured OTLP endpoint accepts a connection.
//! - data dir: the running bridge's (else the configured one), writable at every level the
//!   bridge writes to (the folder, `logs/`, each agent's `logs/<agent>/` and its session
//!   logs, `state/`), with space left.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use serde_json::Value;

use crate::install::{self, Plan, Scope, read_opt};

/// Arguments of `aep-bridge doctor`.
#[derive(Debug, Clone, Args)]
pub struct DoctorArgs {
    /// The bridge's base URL (default: the shim's `AEP_BRIDGE_URL`, else http://127.0.0.1:8787).
    #[arg(long, env = "AEP_URL")]
    pub url: Option<String>,
    /// The token the shim signs with (the agents' `AEP_TOKEN`).
    #[arg(long, env = "AEP_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Also check the agents' wiring in this project (default: the current directory).
    #[arg(long)]
    pub project: Option<PathBuf>,
    /// The configuration `serve` runs with (the data directory and the OTLP export).
    #[arg(long, env = "AEP_BRIDGE_CONFIG")]
    pub config: Option<PathBuf>,
    /// The data directory `serve` writes to (default `~/.aep`).
    #[arg(long, env = "AEP_BRIDGE_DATA_DIR")]
    pub data_dir: Option<String>,
    /// Free space below which the data directory counts as nearly full, in MiB.
    #[arg(long, default_value_t = 256)]
    pub min_free_mb: u64,
}

/// One check's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    Ok,
    /// Not a problem, worth knowing.
    Note,
    /// A problem, with its fix.
    Fail(String),
    /// Not checked (what it needs failed already).
    Skip,
}

/// The report, printed as it goes.
#[derive(Default)]
struct Report {
    problems: usize,
}

impl Report {
    fn line(&mut self, name: &str, verdict: Verdict, what: impl std::fmt::Display) {
        let tag = match &verdict {
            Verdict::Ok => "ok  ",
            Verdict::Note => "note",
            Verdict::Fail(_) => "FAIL",
            Verdict::Skip => "skip",
        };
        println!("{tag}  {name}: {what}");
        if let Verdict::Fail(fix) = verdict {
            self.problems += 1;
            println!("      fix: {fix}");
        }
    }
}

/// How long one network check may take.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Runs the command; returns the exit code.
pub fn run(args: DoctorArgs) -> i32 {
    let mut r = Report::default();
    let env = aep_bridge::env::Env::process();
    let serve = crate::ServeArgs { config: args.config.clone(), data_dir: args.data_dir.clone(), ..Default::default() };
    let cfg = match serve.load() {
        Ok(cfg) => {
            let what = args.config.as_ref().map_or("built-in defaults".to_owned(), |p| p.display().to_string());
            r.line("config", Verdict::Ok, format!("{what} loads"));
            Some(cfg)
        }
        Err(e) => {
            r.line("config", Verdict::Fail("`aep-bridge config validate` lists every problem".into()), e);
            None
        }
    };

    let shim_url = env.var("AEP_BRIDGE_URL");
    let url = args.url.clone().filter(|u| !u.is_empty()).or_else(|| shim_url.clone());
    let ep = crate::client::Endpoint::new(url, args.token.clone());
    let up = check_bridge(&mut r, &ep);
    // The shim and the plugins post to AEP_BRIDGE_URL, else the default port.
    let (shim_target, whence) = match (&shim_url, env.raw("AEP_BRIDGE_URL")) {
        (Some(s), _) => (s.trim_end_matches('/').to_owned(), "AEP_BRIDGE_URL"),
        (None, Some(_)) => ("nowhere".to_owned(), "AEP_BRIDGE_URL is set but empty"),
        (None, None) => (crate::client::DEFAULT_URL.to_owned(), "the default: AEP_BRIDGE_URL is not set"),
    };
    if shim_target != ep.base {
        r.line(
            "bridge",
            Verdict::Fail(format!("`export AEP_BRIDGE_URL={}` where the agents run", ep.base)),
            format!("the shim posts to {shim_target} ({whence}), not to {}", ep.base),
        );
    }
    let about = if up {
        let about = check_token(&mut r, &ep);
        check_drift(&mut r, &ep);
        about
    } else {
        r.line("token", Verdict::Skip, "the bridge does not answer");
        None
    };

    let this_shim = install::default_shim();
    let mut scopes: Vec<Scope> = Scope::from_args(None).into_iter().collect();
    let project = args.project.clone().or_else(|| std::env::current_dir().ok());
    scopes.extend(Scope::from_args(project.as_deref()));
    let mut seen = std::collections::HashSet::new();
    let mut wired = 0;
    for scope in &scopes {
        for vendor in install::supported() {
            let Some(plan) = install::plan(vendor, scope) else { continue };
            if !seen.insert(plan_path(&plan).to_path_buf()) {
                continue; // the project is the home: same file
            }
            if let Some((verdict, what)) = check_wiring(vendor, scope, &plan, &this_shim) {
                wired += 1;
                r.line(&format!("wiring {vendor}"), verdict, what);
            }
        }
    }
    if wired == 0 {
        r.line("wiring", Verdict::Note, "no agent's settings found (user level or this project)");
    }

    match &cfg {
        Some(cfg) => check_export(&mut r, cfg),
        None => r.line("export", Verdict::Skip, "the configuration does not load"),
    }
    let ours = cfg.as_ref().map_or_else(|| env.data_dir(), aep_bridge::config::Config::data_dir);
    // The running bridge's data dir when it told us (it may run with another config or
    // environment than this shell's); else the one `serve` would use here.
    let running = about.as_ref().and_then(|a| a.get("data_dir")?.as_str().map(PathBuf::from));
    match running {
        Some(theirs) => {
            let pid =
                about.as_ref().and_then(|a| a.get("pid")?.as_u64()).map_or(String::new(), |p| format!(", pid {p}"));
            if theirs != ours && args.data_dir.is_some() {
                r.line(
                    "data dir",
                    Verdict::Note,
                    format!("the running bridge{pid} writes to {}, not {}", theirs.display(), ours.display()),
                );
            }
            check_data_dir(&mut r, &theirs, args.min_free_mb, &format!("the running bridge's{pid}"));
        }
        None if up => {
            check_data_dir(&mut r, &ours, args.min_free_mb, "this configuration's; the bridge did not say its own")
        }
        None => check_data_dir(&mut r, &ours, args.min_free_mb, "this configuration's"),
    }

    match r.problems {
        0 => println!("all good"),
        n => println!("{n} problem(s)"),
    }
    i32::from(r.problems > 0)
}

/// `GET /healthz`; `true` when the bridge answers (healthy or not).
fn check_bridge(r: &mut Report, ep: &crate::client::Endpoint) -> bool {
    let start = "start it (`aep-bridge serve`, or `aep-bridge service install`), or point --url/AEP_URL at it";
    let agent = match ep.http_agent(Some(TIMEOUT)) {
        Ok(a) => a,
        Err(e) => {
            r.line("bridge", Verdict::Fail(start.into()), e);
            return false;
        }
    };
    let url = format!("{}/healthz", ep.base);
    let mut resp = match agent.get(&url).call() {
        Ok(resp) => resp,
        Err(e) => {
            r.line("bridge", Verdict::Fail(start.into()), format!("nothing answers at {} ({e})", ep.base));
            return false;
        }
    };
    let status = resp.status().as_u16();
    let body: Option<Value> = resp.body_mut().read_to_string().ok().and_then(|t| serde_json::from_str(&t).ok());
    match body.as_ref().and_then(|b| Some((b.get("ok")?.as_bool()?, b.get("failing")))) {
        Some((true, _)) => {
            r.line("bridge", Verdict::Ok, format!("{url}: ok"));
            // Exporters a backend refused a signal to: off until restart, everything else flows.
            if let Some(off) = body.as_ref().and_then(|b| b.get("disabled")).and_then(Value::as_object) {
                for (part, why) in off {
                    r.line("bridge", Verdict::Note, format!("{part} is off: {}", why.as_str().unwrap_or_default()));
                }
            }
        }
        Some((false, failing)) => {
            let parts: Vec<String> = failing
                .and_then(Value::as_object)
                .map(|m| m.iter().map(|(k, v)| format!("{k}: {}", v.as_str().unwrap_or_default())).collect())
                .unwrap_or_default();
            let what = if parts.is_empty() {
                "a required relay is not connected".to_owned()
            } else {
                format!("failing: {}", parts.join("; "))
            };
            let fix = if parts.is_empty() {
                "check the relay URL ([relay] url, --relay) and that the relay is up".to_owned()
            } else {
                "free space or fix permissions under the data directory (see the data dir check below); the bridge recovers by itself".to_owned()
            };
            r.line("bridge", Verdict::Fail(fix), format!("{url}: HTTP {status}, {what}"));
        }
        None => r.line(
            "bridge",
            Verdict::Fail("something else listens there: point --url/AEP_URL at the bridge".into()),
            format!("{url}: HTTP {status}, not aep-bridge's health answer"),
        ),
    }
    true
}

/// The status and body of a probe POST signed as the shim signs it, under `key` (none:
/// unsigned).
fn signed_post(ep: &crate::client::Endpoint, key: Option<&str>) -> Result<(u16, String), String> {
    let agent = ep.http_agent(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    // Not JSON: a call that passes the credential check is refused right after it, unmapped.
    let body = b"aep-bridge doctor";
    let probe = aep_receivers::hooks::DOCTOR_PROBE;
    let mut req = agent.post(&format!("{}/hooks/{probe}", ep.base)).header("content-type", "application/json");
    if let Some(k) = key {
        let nonce = ulid::Ulid::new().to_string();
        let mac = aep_schemas::digest::request_mac(k, &nonce, body);
        req = req.header("authorization", &format!("AEP-HMAC {mac}")).header("x-aep-nonce", &nonce);
    }
    let mut resp = req.send(&body[..]).map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    Ok((status, resp.body_mut().read_to_string().unwrap_or_default()))
}

/// Checks the shim's credentials against the bridge; returns what the bridge told the probe
/// about itself once they passed (an older bridge answers 400 and tells nothing).
fn check_token(r: &mut Report, ep: &crate::client::Endpoint) -> Option<Value> {
    let same = "export the bridge's token as AEP_TOKEN where the agents run (the bridge reads --token-file, AEP_BRIDGE_TOKEN or AEP_TOKEN)";
    let token = ep.token.as_deref();
    let (status, body) = match signed_post(ep, token) {
        Ok(got) => got,
        Err(e) => {
            r.line("token", Verdict::Fail("check that the bridge is up".into()), e);
            return None;
        }
    };
    let about = (status == 200).then(|| serde_json::from_str::<Value>(&body).ok()).flatten();
    match (status, token) {
        (401 | 403, Some(_)) => {
            r.line("token", Verdict::Fail(same.into()), "the bridge refuses the shim's MAC: AEP_TOKEN is not its token")
        }
        (401 | 403, None) => r.line(
            "token",
            Verdict::Fail(same.into()),
            "the bridge wants a token and AEP_TOKEN is not set: every hook is refused",
        ),
        (200 | 400, None) => {
            r.line("token", Verdict::Ok, "none on either side (watch-only: answering agents needs a token)")
        }
        (200 | 400, Some(t)) => {
            let wrong = format!("{t}-not");
            match signed_post(ep, Some(&wrong)) {
                Ok((401 | 403, _)) => r.line("token", Verdict::Ok, "the bridge takes the shim's MAC under AEP_TOKEN"),
                Ok(_) => r.line(
                    "token",
                    Verdict::Fail(
                        "start the bridge with the same token (`--token-file`, or AEP_TOKEN in its environment)".into(),
                    ),
                    "the bridge runs without a token while AEP_TOKEN is set: the shim ignores its unproven replies",
                ),
                Err(e) => r.line("token", Verdict::Fail("check that the bridge is up".into()), e),
            }
        }
        (s, _) => r.line(
            "token",
            Verdict::Fail("point --url/AEP_URL at aep-bridge".into()),
            format!("a hook POST got HTTP {s}, not the bridge's answer"),
        ),
    }
    about.filter(|a| a.is_object())
}

/// What the running bridge counted as drift (`aep_bridge_drift_total`): agents sending hook
/// events, fields or OTel event names their adapters do not know. A note, not a failure: the
/// session still maps (the unknown parts through the vendor namespace).
fn check_drift(r: &mut Report, ep: &crate::client::Endpoint) {
    let Ok(agent) = ep.http_agent(Some(TIMEOUT)) else { return };
    let Ok(mut resp) = agent.get(&format!("{}/metrics", ep.base)).call() else { return };
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let series = drift_series(&text);
    if series.is_empty() {
        r.line("drift", Verdict::Ok, "no hook event, field or OTel event name its adapter does not know");
    } else {
        r.line(
            "drift",
            Verdict::Note,
            format!(
                "{} (the names are in the bridge's log and each session's x.<vendor>.session.drift records)",
                series.join("; ")
            ),
        );
    }
}

/// `vendor version: n kind` for each `aep_bridge_drift_total` series of a Prometheus text.
pub(crate) fn drift_series(text: &str) -> Vec<String> {
    let label = |l: &str, k: &str| {
        l.split_once(&format!("{k}=\""))
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(v, _)| v.to_owned())
            .unwrap_or_default()
    };
    text.lines()
        .filter(|l| l.starts_with("aep_bridge_drift_total{"))
        .filter_map(|l| {
            let n = l.rsplit(' ').next()?;
            Some(format!("{} {}: {n} {}", label(l, "vendor"), label(l, "version"), label(l, "kind")))
        })
        .collect()
}

/// The file (or folder) a plan writes.
fn plan_path(plan: &Plan) -> &Path {
    match plan {
        Plan::Hooks { file, .. } | Plan::Yaml { file, .. } | Plan::Asset { file, .. } => file,
        Plan::Scripts { dir, .. } => dir,
    }
}

/// Where `program` resolves (PATH for a bare name), when it is an executable file.
fn resolve(program: &str) -> Option<PathBuf> {
    let p = Path::new(program);
    let exec = |p: &Path| {
        let Ok(m) = std::fs::metadata(p) else { return false };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        }
        #[cfg(not(unix))]
        {
            m.is_file()
        }
    };
    if p.components().count() > 1 {
        return exec(p).then(|| p.to_path_buf());
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(p)).find(|f| exec(f))
}

/// The wiring check of one agent at one scope; `None` when its settings are not there.
fn check_wiring(vendor: &str, scope: &Scope, plan: &Plan, this_shim: &str) -> Option<(Verdict, String)> {
    let place = plan_path(plan).display().to_string();
    let wire = format!("aep-bridge install {vendor} {}", scope.flag());
    let not_wired = |what: &str| Some((Verdict::Fail(wire.clone()), format!("{place}: {what}")));
    // What the settings name: the shim commands, and the events left without one.
    let (commands, missing): (Vec<String>, Vec<String>) = match plan {
        Plan::Hooks { file, install: spec, .. } => {
            let text = read_opt(file).ok()??;
            let Ok(doc) = crate::jsonc::parse(&text) else {
                return Some((
                    Verdict::Fail(format!("fix the file, then `{wire}`")),
                    format!("{place}: not valid JSON"),
                ));
            };
            if spec.enable_hooks_config && doc.pointer("/hooksConfig/enabled") == Some(&Value::Bool(false)) {
                return Some((
                    Verdict::Fail("set `hooksConfig.enabled` to true (or remove it)".into()),
                    format!("{place}: hooks are switched off (hooksConfig.enabled: false)"),
                ));
            }
            let cmds = crate::uninstall::our_commands(&doc, vendor, None);
            let missing = spec
                .hooks
                .iter()
                .filter(|e| {
                    let list = doc.pointer(&format!("/hooks/{}", e.event)).and_then(Value::as_array);
                    !list.is_some_and(|groups| {
                        groups.iter().filter_map(|g| g.get("hooks")?.as_array()).flatten().any(|h| {
                            h.get("command").and_then(Value::as_str).is_some_and(|c| install::is_ours(c, vendor, None))
                        })
                    })
                })
                .map(|e| e.event.to_owned())
                .collect();
            (cmds.into_iter().collect(), missing)
        }
        Plan::Yaml { file, install: spec, .. } => {
            let text = read_opt(file).ok()??;
            let cmds = crate::uninstall::yaml_commands(&text, vendor, None);
            let missing = if cmds.is_empty() {
                spec.events.iter().map(|e| (*e).to_owned()).collect()
            } else {
                spec.events.iter().filter(|e| !text.contains(&format!("\n  {e}:\n"))).map(|e| (*e).to_owned()).collect()
            };
            (cmds.into_iter().collect(), missing)
        }
        Plan::Asset { file, content, .. } => {
            // The agent's config folder (`.opencode/` for `.opencode/plugins/x.js`).
            file.parent()?.parent().filter(|d| d.is_dir())?;
            return match read_opt(file).ok()? {
                None => not_wired("the aep-bridge plugin is not there"),
                Some(t) if t != *content => Some((
                    Verdict::Fail(format!("`{wire}` (the old file is kept as a backup)")),
                    format!("{place}: the plugin is from another aep-bridge version"),
                )),
                Some(_) => Some((Verdict::Ok, format!("{place}: the plugin posts to AEP_BRIDGE_URL"))),
            };
        }
        Plan::Scripts { dir, events, suffix } => {
            dir.parent().filter(|d| d.is_dir())?;
            let mut cmds = std::collections::BTreeSet::new();
            let mut missing = Vec::new();
            for e in *events {
                let text = read_opt(&dir.join(format!("{e}{suffix}"))).ok().flatten().unwrap_or_default();
                match text.lines().rev().find_map(|l| l.strip_prefix("exec ")) {
                    Some(c) if install::is_ours(c, vendor, None) => {
                        cmds.insert(c.trim().to_owned());
                    }
                    _ => missing.push((*e).to_owned()),
                }
            }
            (cmds.into_iter().collect(), missing)
        }
    };
    if commands.is_empty() {
        return not_wired("not wired to aep-bridge");
    }
    let reinstall = format!("aep-bridge uninstall {vendor} {0} && aep-bridge install {vendor} {0}", scope.flag());
    let mut shims = Vec::new();
    for c in &commands {
        let Some((program, _)) = install::split_command(c) else { continue };
        if resolve(&program).is_none() {
            return Some((
                Verdict::Fail(reinstall),
                format!("{place}: runs {program}, which does not exist or is not executable"),
            ));
        }
        shims.push(program);
    }
    if !missing.is_empty() {
        return Some((
            Verdict::Fail(wire),
            format!("{place}: {} event(s) not wired: {}", missing.len(), missing.join(", ")),
        ));
    }
    let shims = shims.join(", ");
    if shims != this_shim && Path::new(this_shim).is_absolute() {
        return Some((Verdict::Note, format!("{place}: wired to {shims}, not this build's {this_shim}")));
    }
    Some((Verdict::Ok, format!("{place}: wired to {shims}")))
}

/// The `host:port` of an endpoint URL (the scheme's port when it names none).
fn host_port(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?']).next()?;
    let authority = authority.rsplit('@').next()?;
    let has_port = authority.rsplit_once(':').is_some_and(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
        && !authority.ends_with(']');
    Some(if has_port {
        authority.to_owned()
    } else {
        format!("{authority}:{}", if scheme == "https" { 443 } else { 80 })
    })
}

fn check_export(r: &mut Report, cfg: &aep_bridge::config::Config) {
    use aep_bridge::export::config::Signal;
    let mut by_addr: std::collections::BTreeMap<String, Vec<&str>> = std::collections::BTreeMap::new();
    for (signal, name) in [(Signal::Logs, "logs"), (Signal::Traces, "traces"), (Signal::Metrics, "metrics")] {
        if let Some(s) = cfg.export.otlp.for_signal(signal)
            && let Some(a) = host_port(&s.url)
        {
            by_addr.entry(a).or_default().push(name);
        }
    }
    if by_addr.is_empty() {
        r.line("export", Verdict::Ok, "no OTLP export configured");
        return;
    }
    for (addr, signals) in by_addr {
        let what = format!("OTLP {} to {addr}", signals.join(", "));
        let connected = std::net::ToSocketAddrs::to_socket_addrs(&addr)
            .map_err(|e| e.to_string())
            .and_then(|mut a| a.next().ok_or_else(|| "no address".to_owned()))
            .and_then(|a| std::net::TcpStream::connect_timeout(&a, TIMEOUT).map_err(|e| e.to_string()));
        match connected {
            Ok(_) => r.line("export", Verdict::Ok, format!("{what}: reachable")),
            Err(e) => r.line(
                "export",
                Verdict::Fail(
                    "start the collector there, or fix OTEL_EXPORTER_OTLP_ENDPOINT / [export.otlp] endpoint".into(),
                ),
                format!("{what}: cannot connect ({e})"),
            ),
        }
    }
}

/// Free bytes for an unprivileged writer on the file system holding `dir`.
#[cfg(unix)]
fn free_bytes(dir: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(not(unix))]
fn free_bytes(_dir: &Path) -> Option<u64> {
    None
}

/// The folders `serve` writes under the data dir `dir`, the deepest last: the dir (its
/// lock, the web view's sessions), `logs/` and each agent's `logs/<agent>/` (the session
/// logs), `state/` (the epoch, the observers' cursors).
fn written_folders(dir: &Path) -> Vec<PathBuf> {
    let logs = dir.join("logs");
    let mut folders = vec![dir.to_path_buf(), logs.clone(), dir.join("state")];
    if let Ok(agents) = std::fs::read_dir(&logs) {
        // Every entry: the bridge writes only folders here, so a file is one an agent's
        // logs cannot go in.
        let mut each: Vec<PathBuf> = agents.flatten().map(|e| e.path()).collect();
        each.sort();
        folders.extend(each);
    }
    folders
}

/// Why `folder` (or, when it does not exist yet, the nearest parent `serve` creates it in)
/// cannot take a new file; `None` when it can. A real write: permission bits say nothing of
/// a read-only mount or an ACL.
fn unwritable(folder: &Path) -> Option<String> {
    let existing = folder.ancestors().find(|d| d.exists()).unwrap_or(folder);
    if !existing.is_dir() {
        return Some(format!("{} is not a folder", existing.display()));
    }
    let probe = existing.join(format!(".aep-doctor-{}", ulid::Ulid::new()));
    match std::fs::write(&probe, b"") {
        Ok(()) => {
            let _ = std::fs::remove_file(&probe);
            None
        }
        Err(e) => Some(format!("cannot write in {} ({e})", existing.display())),
    }
}

/// The session logs in `folder` that cannot be appended to (opened for appending, nothing
/// written): a session whose log is read-only loses every later event.
fn unappendable(folder: &Path) -> Vec<PathBuf> {
    let Ok(files) = std::fs::read_dir(folder) else { return Vec::new() };
    files
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && !p.is_dir())
        .filter(|p| std::fs::OpenOptions::new().append(true).open(p).is_err())
        .collect()
}

fn check_data_dir(r: &mut Report, dir: &Path, min_free_mb: u64, whose: &str) {
    let name = "data dir";
    let place = dir.display();
    let other = "fix its permissions, or give `serve` another one (--data-dir / AEP_BRIDGE_DATA_DIR)";
    let folders = written_folders(dir);
    let mut bad: Vec<String> = folders.iter().filter_map(|f| unwritable(f)).collect();
    bad.dedup();
    // The agents' folders (under `logs/`) hold the session logs.
    for folder in folders.iter().filter(|f| f.parent() == Some(dir.join("logs").as_path())) {
        let files = unappendable(folder);
        if let Some(first) = files.first() {
            bad.push(format!(
                "{} session log(s) in {} cannot be opened for appending (first: {})",
                files.len(),
                folder.display(),
                first.display()
            ));
        }
    }
    if !bad.is_empty() {
        return r.line(name, Verdict::Fail(other.into()), format!("{place} ({whose}): {}", bad.join("; ")));
    }
    let existing = dir.ancestors().find(|d| d.exists()).unwrap_or(dir);
    let created = if existing == dir { "" } else { " (`serve` creates it)" };
    let levels = folders.iter().filter(|f| f.exists()).count();
    let what = if levels > 1 { format!("writable at all {levels} levels") } else { "writable".to_owned() };
    match free_bytes(existing) {
        Some(free) if free < min_free_mb << 20 => r.line(
            name,
            Verdict::Fail("free some space, or give `serve` another data dir (--data-dir)".into()),
            format!("{place}: {} MiB free, below {min_free_mb} MiB: the JSONL log stops when it is full", free >> 20),
        ),
        Some(free) => r.line(name, Verdict::Ok, format!("{place} ({whose}): {what}, {} MiB free{created}", free >> 20)),
        None => r.line(name, Verdict::Ok, format!("{place} ({whose}): {what}{created}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_series_read_back_from_the_exposition() {
        let text = "# TYPE aep_bridge_drift_total counter\naep_bridge_drift_total{kind=\"hook_field\",vendor=\"droid\",version=\"0.226.0\"} 3\nother 1\n";
        assert_eq!(drift_series(text), ["droid 0.226.0: 3 hook_field"]);
        assert!(drift_series("").is_empty());
    }

    #[test]
    fn endpoints_give_their_host_and_port() {
        assert_eq!(host_port("http://127.0.0.1:4318/v1/logs").as_deref(), Some("127.0.0.1:4318"));
        assert_eq!(host_port("https://otel.example").as_deref(), Some("otel.example:443"));
        assert_eq!(host_port("http://u:p@[::1]:4317").as_deref(), Some("[::1]:4317"));
        assert_eq!(host_port("http://[::1]").as_deref(), Some("[::1]:80"));
        assert_eq!(host_port("nope"), None);
    }
}
