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
}

#[test]
fn the_example_file_validates() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/aep-bridge.example.toml");
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
        .env_remove("AEP_BRIDGE_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("off-host") && err.contains("--token"), "{err}");
}
