//! `aep-bridge config validate` and `serve` with a bad file: every problem at once, exit 64.

use std::process::Command;

fn bridge() -> Command {
    Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
}

#[test]
fn invalid_config_reports_every_problem_and_exits_64() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[server]\nlisten = \"nowhere\"\n[jsonl]\nfsync = \"sometimes\"\n[control.gates]\ncodex = []\n[bogus]\n",
    )
    .unwrap();
    let out = bridge().args(["config", "validate"]).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    for key in ["server.listen", "jsonl", "control.gates.codex", "bogus"] {
        assert!(err.contains(key), "{key} missing from:\n{err}");
    }
    // `serve` refuses the same file with the same code, before binding anything.
    let out = bridge().arg("serve").arg("--config").arg(&bad).env("AEP_BRIDGE_DATA_DIR", dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    // A flag with a bad value is a config problem too.
    let out = bridge().args(["serve", "--max-capture", "everything", "--data-dir"]).arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--max-capture"));
    // Typed flags: every bad address or URL is named by its flag, all at once.
    let out = bridge()
        .args(["serve", "--listen", "nowhere", "--otlp-grpc", "4317", "--relay", "ftp://relay", "--data-dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    for says in [
        "--listen: \"nowhere\" is not an address",
        "--otlp-grpc: \"4317\"",
        "--relay: \"ftp://relay\" must start with ws://",
    ] {
        assert!(err.contains(says), "{says} missing from:\n{err}");
    }
}

/// `config validate` loads as `serve` does: a file that is fine alone but off-host through
/// the environment without a token is refused by both; a token from the environment makes
/// an off-host file valid for both.
#[test]
fn config_validate_loads_the_environment_and_flags_like_serve() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.toml");
    std::fs::write(&plain, "[jsonl]\nenabled = true\n").unwrap();
    let clean = |c: &mut Command| {
        c.env_remove("AEP_BRIDGE_TOKEN").env_remove("AEP_TOKEN").env_remove("AEP_BRIDGE_CONFIG");
    };
    let mut cmd = bridge();
    clean(&mut cmd);
    let out = cmd.args(["config", "validate"]).arg(&plain).env("AEP_BRIDGE_LISTEN", "0.0.0.0:8787").output().unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("off-host"), "{}", String::from_utf8_lossy(&out.stderr));
    let mut cmd = bridge();
    clean(&mut cmd);
    let out = cmd.args(["config", "validate", "--listen", "nowhere"]).arg(&plain).output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--listen"), "{}", String::from_utf8_lossy(&out.stderr));
    let wide = dir.path().join("wide.toml");
    std::fs::write(&wide, "[server]\nlisten = \"0.0.0.0:0\"\notlp_grpc = \"\"\notlp_http = \"\"\n").unwrap();
    let mut cmd = bridge();
    clean(&mut cmd);
    let out = cmd.args(["config", "validate"]).arg(&wide).env("AEP_TOKEN", "from-the-env").output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    // And `serve` starts on it (it used to check the file before taking the token).
    let mut cmd = bridge();
    clean(&mut cmd);
    let mut child = cmd
        .args(["serve", "--config"])
        .arg(&wide)
        .arg("--data-dir")
        .arg(dir.path())
        .env("AEP_TOKEN", "from-the-env")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.take().unwrap()), &mut line);
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert!(line.contains("aep-bridge listening"), "{line}{}", String::from_utf8_lossy(&out.stderr));
    // The web view's address, on loopback for a wildcard bind.
    assert!(line.trim_end().split(' ').any(|w| w.starts_with("ui=http://127.0.0.1:") && w.ends_with('/')), "{line}");
}

#[test]
fn the_example_file_validates() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../aep-bridge.example.toml");
    let out = bridge().args(["config", "validate", example]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
}

/// AEP-0003 §8.1: `serve --listen 0.0.0.0` without a token does not start (exit 64).
#[test]
fn serve_refuses_an_off_host_listener_without_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let out = bridge()
        .args(["serve", "--listen", "0.0.0.0:0", "--otlp-grpc", "", "--otlp-http", "", "--data-dir"])
        .arg(dir.path())
        .env_remove("AEP_BRIDGE_TOKEN")
        .env_remove("AEP_TOKEN")
        .env_remove("AEP_BRIDGE_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("off-host") && err.contains("--token"), "{err}");
}

/// The token need not be in argv. `AEP_TOKEN` (the shim's variable) or
/// `--token-file` satisfies the off-host rule; an unreadable token file does not start.
#[test]
fn serve_takes_its_token_from_the_environment_or_a_file() {
    use std::io::BufRead as _;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-token");
    let out = bridge()
        .args(["serve", "--listen", "127.0.0.1:0", "--otlp-grpc", "", "--otlp-http", "", "--token-file"])
        .arg(&missing)
        .arg("--data-dir")
        .arg(dir.path())
        .env_remove("AEP_BRIDGE_TOKEN")
        .env_remove("AEP_BRIDGE_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--token-file"));
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "from-a-file\n").unwrap();
    for (env, file) in [(Some("from-env"), None), (None, Some(&token_file))] {
        let mut cmd = bridge();
        cmd.args(["serve", "--listen", "0.0.0.0:0", "--otlp-grpc", "", "--otlp-http", "", "--data-dir"])
            .arg(dir.path())
            .env_remove("AEP_BRIDGE_TOKEN")
            .env_remove("AEP_TOKEN")
            .env_remove("AEP_BRIDGE_CONFIG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        if let Some(v) = env {
            cmd.env("AEP_TOKEN", v);
        }
        if let Some(f) = file {
            cmd.arg("--token-file").arg(f);
        }
        let mut child = cmd.spawn().unwrap();
        let mut err = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut started = false;
        let mut line = String::new();
        while err.read_line(&mut line).unwrap_or(0) > 0 {
            if line.contains("aep-bridge listening") {
                started = true;
                break;
            }
            line.clear();
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(started, "env {env:?} file {file:?}: {line}");
    }
}

/// What a newcomer meets: the top-level help says what the tool does, and every
/// subcommand's help ends with an example.
#[test]
fn every_subcommand_help_shows_an_example() {
    let out = bridge().arg("--help").output().unwrap();
    let top = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(top.lines().next().unwrap_or_default().contains("coding agent"), "{top}");
    let commands: Vec<String> = top
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|c| c != "help" && c != "config")
        .collect();
    assert!(commands.len() >= 10, "{commands:?}");
    for c in commands {
        let out = bridge().args([c.as_str(), "--help"]).output().unwrap();
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(help.contains("Example:\n  $ aep-bridge "), "`aep-bridge {c} --help` has no example:\n{help}");
    }
}
