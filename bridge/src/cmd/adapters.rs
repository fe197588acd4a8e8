//! `aep-bridge adapters`: the built-in adapters as manifests with PATH detection,
//! `adapters verify <vendor>` (a synthetic hook through the real `aep-hook` shim, confirmed
//! on the collector's stream), `adapters check <file>` for custom manifests, and the custom
//! manifest loader (`~/.aep/adapters/*.toml`, generic fallback mapping, AEP-0002 Annex A).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::client::{Endpoint, Socket, as_event};

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
    /// AEP families it emits.
    pub families: Vec<String>,
    /// How to wire it.
    pub setup: String,
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
            families: s.families.iter().map(|f| (*f).to_owned()).collect(),
            setup: s.setup.into(),
            origin: "builtin".into(),
        })
        .collect()
}

/// A custom adapter manifest (TOML), mapped through the generic fallback.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct CustomManifest {
    /// Agent identity and vendor token, `[a-z0-9-]+`.
    pub id: String,
    /// Human name.
    pub display_name: String,
    /// Executables to detect on PATH.
    #[serde(default)]
    pub executables: Vec<String>,
    /// Payload field naming the hook.
    #[serde(default = "default_hook_field")]
    pub hook_field: String,
    /// Payload field carrying the session id.
    #[serde(default = "default_session_field")]
    pub session_field: String,
}

fn default_hook_field() -> String {
    "hook_event_name".into()
}

fn default_session_field() -> String {
    "session_id".into()
}

/// Parses and validates a manifest strictly: unknown fields, id grammar, built-in collisions.
pub fn parse_manifest(text: &str) -> Result<CustomManifest, String> {
    let m: CustomManifest = toml::from_str(text).map_err(|e| e.to_string().trim().to_owned())?;
    let mut problems = Vec::new();
    if m.id.is_empty() || !m.id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        problems.push(format!("id {:?}: must match [a-z0-9-]+ (it becomes the agent and x.{{id}}.* token)", m.id));
    }
    if aep_adapters::vendors::by_vendor(&m.id).is_some() {
        problems.push(format!("id {:?} collides with a built-in adapter", m.id));
    }
    if m.display_name.trim().is_empty() {
        problems.push("display_name: must not be empty".into());
    }
    for (k, v) in [("hook_field", &m.hook_field), ("session_field", &m.session_field)] {
        if v.trim().is_empty() {
            problems.push(format!("{k}: must not be empty"));
        }
    }
    for e in &m.executables {
        if e.trim().is_empty() || e.contains('/') {
            problems.push(format!("executables: {e:?} must be a bare command name"));
        }
    }
    if problems.is_empty() { Ok(m) } else { Err(problems.join("; ")) }
}

/// The default custom manifest directory: `$AEP_BRIDGE_DATA_DIR/adapters` or `~/.aep/adapters`.
pub fn default_dir() -> PathBuf {
    let data = std::env::var_os("AEP_BRIDGE_DATA_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".aep")))
        .unwrap_or_else(|| PathBuf::from(".aep"));
    data.join("adapters")
}

/// Valid manifests with their files, and `(file, error)` for the rejected ones.
pub type Loaded = (Vec<(PathBuf, CustomManifest)>, Vec<(PathBuf, String)>);

/// Loads every `*.toml` in `dir` (sorted); invalid ones and duplicate ids come back as
/// `(file, error)` and are skipped. A missing directory is empty.
pub fn load_custom(dir: &Path) -> Loaded {
    let mut ok: Vec<(PathBuf, CustomManifest)> = Vec::new();
    let mut bad = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return (ok, bad) };
    let mut files: Vec<PathBuf> =
        rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "toml")).collect();
    files.sort();
    for f in files {
        match std::fs::read_to_string(&f).map_err(|e| e.to_string()).and_then(|t| parse_manifest(&t)) {
            Ok(m) if ok.iter().any(|(_, o)| o.id == m.id) => {
                bad.push((f, format!("id {:?} is already defined by another manifest", m.id)));
            }
            Ok(m) => ok.push((f, m)),
            Err(e) => bad.push((f, e)),
        }
    }
    (ok, bad)
}

/// The hook adapters of the valid custom manifests in `dir`, on the generic fallback
/// mapping. Their strings are leaked once here (adapters live for the process).
pub fn custom_adapters(dir: &Path) -> Vec<Box<dyn aep_adapters::HookAdapter>> {
    let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
    load_custom(dir)
        .0
        .into_iter()
        .map(|(_, m)| {
            Box::new(aep_adapters::generic::GenericAdapter {
                vendor: leak(&m.id),
                hook_field: leak(&m.hook_field),
                session_field: leak(&m.session_field),
            }) as Box<dyn aep_adapters::HookAdapter>
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
    let dir = args.dir.clone().unwrap_or_else(default_dir);
    let mut all = builtin();
    let (custom, bad) = load_custom(&dir);
    for (f, c) in custom {
        all.push(Manifest {
            id: c.id.clone(),
            display_name: c.display_name.clone(),
            executables: c.executables.clone(),
            hook_channel: format!("command hook (generic: {} / {})", c.hook_field, c.session_field),
            control: "observe-only".into(),
            families: vec![format!("x.{}.*", c.id)],
            setup: format!("run `aep-hook {}` from the agent's hooks", c.id),
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
        if !m.families.is_empty() {
            println!("    emits:    {}", m.families.join(", "));
        }
        println!("    setup:    {}", m.setup);
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
        || load_custom(&default_dir()).0.iter().any(|(_, m)| m.id == vendor);
    if !known {
        eprintln!("aep-bridge adapters verify: unknown vendor {vendor:?}");
        return 2;
    }
    let shim = shim.unwrap_or_else(super::install::default_shim);
    let session = format!("aep-verify-{}", ulid::Ulid::new().to_string().to_ascii_lowercase());
    let started = crate::time::unix_ms(std::time::SystemTime::now());
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
        let fresh = crate::time::parse_rfc3339_nanos(&ev.time).is_some_and(|n| n / 1_000_000 + 1000 >= started);
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
                    crate::cli::EXIT_CONFIG
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

    #[test]
    fn manifests_are_validated_strictly() {
        let ok = parse_manifest("id = \"my-agent\"\ndisplay_name = \"Mine\"\nexecutables = [\"mine\"]\n").unwrap();
        assert_eq!(ok.hook_field, "hook_event_name");
        assert_eq!(ok.session_field, "session_id");
        let e = parse_manifest("id = \"x\"\ndisplay_name = \"X\"\ncolour = 1\n").unwrap_err();
        assert!(e.contains("colour"), "{e}");
        let e = parse_manifest("id = \"My_Agent\"\ndisplay_name = \"X\"\n").unwrap_err();
        assert!(e.contains("[a-z0-9-]+"), "{e}");
        let e = parse_manifest("id = \"codex\"\ndisplay_name = \"X\"\n").unwrap_err();
        assert!(e.contains("built-in"), "{e}");
        assert!(parse_manifest("id = \"a\"\n").is_err(), "display_name is required");
    }

    #[test]
    fn custom_manifests_load_and_map_through_the_generic_fallback() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.toml"),
            "id = \"acme\"\ndisplay_name = \"Acme\"\nhook_field = \"event\"\nsession_field = \"sid\"\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("b.toml"), "id = \"acme\"\ndisplay_name = \"Dup\"\n").unwrap();
        std::fs::write(dir.path().join("c.toml"), "nonsense").unwrap();
        let (ok, bad) = load_custom(dir.path());
        assert_eq!(ok.len(), 1);
        assert_eq!(bad.len(), 2);
        let ads = custom_adapters(dir.path());
        let payload = json!({"event": "ThingDone", "sid": "s-1"});
        let call = aep_adapters::HookCall { event: None, payload: &payload };
        let drafts = ads[0]
            .map(&call, &mut aep_adapters::SessionState::default(), &aep_adapters::MapContext::default())
            .unwrap();
        assert_eq!(drafts[0].r#type, "x.acme.session.thing_done");
        assert_eq!(drafts[0].session.as_deref(), Some("s-1"));
    }
}
