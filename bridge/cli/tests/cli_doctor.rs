//! `aep-bridge doctor` against a real `serve` and real settings in a temp home: a healthy
//! set-up passes, and each seeded fault is the one problem reported, with its fix.

use aep_testkit as common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

const TOKEN: &str = "s3cret-token";

/// A bridge with a token, a home with two agents wired to a shim that exists, and a port
/// that accepts connections standing in for the OTLP collector.
struct Setup {
    bridge: Running,
    home: tempfile::TempDir,
    proj: tempfile::TempDir,
    shim: PathBuf,
    collector: std::net::TcpListener,
}

/// The shim this build wired: the real `aep-hook` beside the binary when the workspace
/// built it, else an executable stand-in (doctor checks the file the wiring names exists
/// and is executable; it does not run it).
fn shim(home: &Path) -> PathBuf {
    let real = Path::new(env!("CARGO_BIN_EXE_aep-bridge")).with_file_name("aep-hook");
    if real.is_file() {
        return real;
    }
    let f = home.join("bin/aep-hook");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(&f, "#!/bin/sh\nexit 0\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    f
}

fn run(home: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
    cmd.env_clear().env("HOME", home).env("NO_COLOR", "1").args(args);
    if let Some(path) = std::env::var_os("PATH") {
        cmd.env("PATH", path);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run aep-bridge");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

impl Setup {
    async fn new() -> Self {
        let home = tempfile::tempdir().unwrap();
        let proj = tempfile::tempdir().unwrap();
        let mut cfg = config(&home.path().join(".aep"));
        cfg.server.token = TOKEN.into();
        let bridge = start(cfg).await;
        let shim = shim(home.path());
        let s = shim.display().to_string();
        let p = proj.path().display().to_string();
        for args in [
            vec!["install", "claude-code", "--user", "--shim", &s],
            vec!["install", "gemini-cli", "--project", &p, "--shim", &s],
        ] {
            let (code, out, err) = run(home.path(), &args, &[]);
            assert_eq!(code, 0, "{args:?}: {out}{err}");
        }
        let collector = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        Setup { bridge, home, proj, shim, collector }
    }

    /// `doctor` with the healthy environment, `env` on top of it (an empty value unsets).
    async fn doctor(&self, extra: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let url = self.bridge.url();
        let otlp = format!("http://{}", self.collector.local_addr().unwrap());
        let data = self.bridge.data.display().to_string();
        let proj = self.proj.path().display().to_string();
        let mut all: Vec<(String, String)> = [
            ("AEP_URL", url.as_str()),
            ("AEP_BRIDGE_URL", url.as_str()),
            ("AEP_TOKEN", TOKEN),
            ("AEP_BRIDGE_DATA_DIR", data.as_str()),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", otlp.as_str()),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
        for (k, v) in env {
            all.retain(|(x, _)| x != k);
            if !v.is_empty() {
                all.push(((*k).to_owned(), (*v).to_owned()));
            }
        }
        let mut args = vec!["doctor".to_owned(), "--project".to_owned(), proj];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        let home = self.home.path().to_path_buf();
        tokio::task::spawn_blocking(move || {
            let env: Vec<(&str, &str)> = all.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&home, &args, &env)
        })
        .await
        .unwrap()
    }
}

/// The `FAIL` lines of a report, each with the fix line after it.
fn fails(out: &str) -> Vec<String> {
    let lines: Vec<&str> = out.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("FAIL"))
        .map(|(i, l)| {
            let fix = lines.get(i + 1).copied().unwrap_or_default();
            assert!(fix.trim_start().starts_with("fix: "), "a problem without a fix:\n{out}");
            format!("{l}\n{fix}")
        })
        .collect()
}

/// A port nothing listens on (bound, then let go).
fn closed_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    format!("http://{a}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_set_up_passes() {
    let s = Setup::new().await;
    let (code, out, err) = s.doctor(&[], &[]).await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(fails(&out).is_empty(), "{out}");
    for want in [
        "ok    bridge: ",
        "ok    token: the bridge takes the shim's MAC",
        "wiring claude-code: ",
        "wiring gemini-cli: ",
        "ok    export: OTLP logs, traces, metrics to 127.0.0.1:",
        "ok    data dir: ",
    ] {
        assert!(out.contains(want), "missing {want:?}:\n{out}");
    }
    assert!(out.contains(&format!("wired to {}", s.shim.display())), "{out}");
    assert!(out.trim_end().ends_with("all good"), "{out}");
    // The probes (one with the token, one with a wrong one on purpose) are not refused
    // hooks in the bridge's counters or log.
    let metrics = metrics(&s.bridge).await;
    assert!(!metrics.lines().any(|l| l.starts_with("aep_bridge_requests_rejected_total{")), "{metrics}");
    s.bridge.shutdown().await;
}

/// The bridge's `/metrics` text.
async fn metrics(bridge: &Running) -> String {
    let url = format!("{}/metrics", bridge.url());
    tokio::task::spawn_blocking(move || {
        let agent = ureq::Agent::config_builder().http_status_as_error(false).build().new_agent();
        agent
            .get(&url)
            .header("authorization", &format!("Bearer {TOKEN}"))
            .call()
            .unwrap()
            .body_mut()
            .read_to_string()
            .unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_bridges_data_dir_is_checked_at_every_level_it_writes() {
    let s = Setup::new().await;
    let data = s.bridge.data.clone();
    // Doctor's own default (`~/.aep` in its home) is not where this bridge writes: the
    // bridge tells the authenticated probe.
    let (code, out, _) = s.doctor(&[], &[("AEP_BRIDGE_DATA_DIR", "")]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("ok    data dir: {} (the running bridge's, pid ", data.display())), "{out}");

    // A level below the top one that `serve` cannot write in (a file where its folder goes;
    // permissions would not stop root, which CI runs as): each is the one problem reported.
    for level in ["logs/codex", "state", "logs"] {
        let at = data.join(level);
        let _ = std::fs::remove_dir_all(&at);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(&at, "x").unwrap();
        let (code, out, _) = s.doctor(&[], &[("AEP_BRIDGE_DATA_DIR", "")]).await;
        assert_eq!(code, 1, "{level}: {out}");
        let f = fails(&out);
        assert_eq!(f.len(), 1, "{level}: {out}");
        assert!(
            f[0].starts_with("FAIL  data dir: ") && f[0].contains(&format!("{} is not a folder", at.display())),
            "{out}"
        );
        std::fs::remove_file(&at).unwrap();
        std::fs::create_dir_all(&at).unwrap();
    }
    // A session log the bridge appends to that cannot be opened for appending.
    let log = data.join("logs/codex/s-1.jsonl");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(data.join("nowhere/s-1.jsonl"), &log).unwrap();
    let (code, out, _) = s.doctor(&[], &[("AEP_BRIDGE_DATA_DIR", "")]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert!(f.len() == 1 && f[0].contains("1 session log(s) in") && f[0].contains("s-1.jsonl"), "{out}");
    std::fs::remove_file(&log).unwrap();
    let (code, out, _) = s.doctor(&[], &[("AEP_BRIDGE_DATA_DIR", "")]).await;
    assert_eq!(code, 0, "{out}");
    s.bridge.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_seeded_fault_is_the_one_problem_reported_with_its_fix() {
    let s = Setup::new().await;
    let home = s.home.path();
    let down = closed_port();

    // 1. The bridge is down (nothing listens at the URL): the token is not checked.
    let (code, out, _) = s.doctor(&[], &[("AEP_URL", &down), ("AEP_BRIDGE_URL", &down)]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 1, "{out}");
    assert!(f[0].starts_with("FAIL  bridge: nothing answers at") && f[0].contains("aep-bridge serve"), "{out}");
    assert!(out.contains("skip  token: "), "{out}");

    // 1b. The shim posts elsewhere than the bridge doctor reached (AEP_BRIDGE_URL unset:
    // the default port).
    let (code, out, _) = s.doctor(&[], &[("AEP_BRIDGE_URL", "")]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 1, "{out}");
    assert!(f[0].contains("the shim posts to http://127.0.0.1:8787 (the default"), "{out}");
    assert!(f[0].contains(&format!("fix: `export AEP_BRIDGE_URL={}`", s.bridge.url())), "{out}");

    // 2. The shim's token is not the bridge's.
    let (code, out, _) = s.doctor(&[], &[("AEP_TOKEN", "another")]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 1, "{out}");
    assert!(f[0].starts_with("FAIL  token: the bridge refuses the shim's MAC"), "{out}");
    assert!(f[0].contains("export the bridge's token as AEP_TOKEN"), "{out}");

    // 3. Codex is set up (its hooks file, with the user's own hook) but not wired.
    let codex = home.join(".codex/hooks.json");
    std::fs::create_dir_all(codex.parent().unwrap()).unwrap();
    std::fs::write(&codex, r#"{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}]}}"#)
        .unwrap();
    let (code, out, _) = s.doctor(&[], &[]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 1, "{out}");
    assert!(f[0].starts_with("FAIL  wiring codex: ") && f[0].contains("not wired to aep-bridge"), "{out}");
    assert!(f[0].contains("fix: aep-bridge install codex --user"), "{out}");

    // 4. Its wiring names a shim that is not there (a moved or deleted binary).
    let (code, o, e) = run(home, &["install", "codex", "--user", "--shim", "/nonexistent/aep-hook"], &[]);
    assert_eq!(code, 0, "{o}{e}");
    let (code, out, _) = s.doctor(&[], &[]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 1, "{out}");
    assert!(f[0].contains("runs /nonexistent/aep-hook, which does not exist"), "{out}");
    assert!(f[0].contains("aep-bridge uninstall codex --user && aep-bridge install codex --user"), "{out}");
    // The fix it prints, followed, clears it.
    let shim = s.shim.display().to_string();
    assert_eq!(run(home, &["uninstall", "codex", "--user"], &[]).0, 0);
    assert_eq!(run(home, &["install", "codex", "--user", "--shim", &shim], &[]).0, 0);
    let (code, out, _) = s.doctor(&[], &[]).await;
    assert_eq!(code, 0, "{out}");

    // 5. The data dir is not a folder `serve` could write in (a file stands where it goes;
    // permissions would not stop root, which CI runs as); the bridge is down, so doctor
    // checks the one this configuration names.
    let file = home.join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let under = file.join("aep").display().to_string();
    let env = [("AEP_BRIDGE_DATA_DIR", under.as_str()), ("AEP_URL", &down), ("AEP_BRIDGE_URL", &down)];
    let (code, out, _) = s.doctor(&[], &env).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 2, "{out}");
    assert!(f[1].starts_with("FAIL  data dir: ") && f[1].contains("is not a folder"), "{out}");
    assert!(f[1].contains("(this configuration's)"), "{out}");
    //    ... or has less room than asked for (no file system here has a petabyte free).
    let (code, out, _) = s.doctor(&["--min-free-mb", "1000000000"], &[]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 1, "{out}");
    assert!(f[0].contains("MiB free, below 1000000000 MiB"), "{out}");

    // 6. The OTLP endpoint the export is configured with does not accept connections.
    let (code, out, _) = s.doctor(&[], &[("OTEL_EXPORTER_OTLP_ENDPOINT", &down)]).await;
    assert_eq!(code, 1, "{out}");
    let f = fails(&out);
    assert_eq!(f.len(), 1, "{out}");
    assert!(
        f[0].starts_with("FAIL  export: OTLP logs, traces, metrics to") && f[0].contains("cannot connect"),
        "{out}"
    );
    s.bridge.shutdown().await;
}
