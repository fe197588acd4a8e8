//! `aep-bridge service` in a temp home: the unit `install` writes (checked by
//! `systemd-analyze verify` where that tool is), the token kept out of argv, `status`, and
//! `uninstall` removing exactly what `install` wrote. Nothing is started: `--no-start`, and
//! `uninstall` stops only a unit the manager loaded from the file it removes.
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;

fn run(home: &Path, args: &[&str], token: Option<&str>) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
    cmd.args(args).env("HOME", home).env_remove("XDG_CONFIG_HOME").env_remove("AEP_TOKEN");
    if let Some(t) = token {
        cmd.env("AEP_TOKEN", t);
    }
    let out = cmd.output().expect("run aep-bridge");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `systemd-analyze verify` on `unit`: `Some(output)` when the tool ran, `None` (with the
/// reason printed) when it is not installed here.
fn verify(unit: &Path) -> Option<(bool, String)> {
    match Command::new("systemd-analyze").arg("verify").arg(unit).output() {
        Ok(o) => Some((
            o.status.success(),
            format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr)),
        )),
        Err(e) => {
            println!("SKIP systemd-analyze verify: the tool is not here ({e}); the unit's content is asserted instead");
            None
        }
    }
}

#[test]
fn install_writes_a_verified_unit_with_the_token_in_a_file_and_uninstall_removes_it_all() {
    let home = tempfile::tempdir().unwrap();
    // A folder of the user's on the unit's path: it stays.
    std::fs::create_dir_all(home.path().join(".config")).unwrap();
    let before = aep_testkit::tree(home.path());

    let (code, out, err) = run(home.path(), &["service", "install", "--dry-run"], Some("t0ken"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("would write") && out.contains("ExecStart="), "{out}");
    assert_eq!(aep_testkit::tree(home.path()), before, "a dry run writes nothing");

    let (code, out, err) = run(home.path(), &["service", "install", "--no-start"], Some("t0ken"));
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("next: systemctl --user daemon-reload && systemctl --user enable --now aep-bridge.service"),
        "{out}"
    );
    let unit = home.path().join(".config/systemd/user/aep-bridge.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    let token_file = home.path().join(".config/aep-bridge/token");
    let bin = Path::new(env!("CARGO_BIN_EXE_aep-bridge")).canonicalize().unwrap();
    let exec = format!("\nExecStart={} serve --token-file {}\n", bin.display(), token_file.display());
    assert!(text.contains(&exec), "want {exec:?} in:\n{text}");
    for line in ["\nRestart=on-failure\n", "\nWantedBy=default.target\n", "\nType=notify\n", "\nWatchdogSec=30\n"] {
        assert!(text.contains(line), "want {line:?} in:\n{text}");
    }
    assert!(!text.contains("t0ken"), "the token is in the unit:\n{text}");
    assert_eq!(std::fs::read_to_string(&token_file).unwrap(), "t0ken\n");
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the token file is the user's alone");
    }
    if let Some((ok, report)) = verify(&unit) {
        assert!(ok, "systemd-analyze verify failed:\n{report}\n{text}");
    }

    // Installing again is a no-op; a changed set-up is refused until uninstalled.
    let (code, out, _) = run(home.path(), &["service", "install", "--no-start"], Some("t0ken"));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("unchanged"), "{out}");
    let (code, _, err) = run(home.path(), &["service", "install", "--no-start"], None);
    assert_eq!(code, 1);
    assert!(err.contains("service uninstall` first"), "{err}");

    let (code, out, _) = run(home.path(), &["service", "status"], None);
    assert!(out.contains(&format!("{}: installed, runs {}", unit.display(), bin.display())), "{out}");
    // Not started here: whatever the manager says (or cannot, without a user session), not active.
    assert_eq!(code, 3, "{out}");

    let (code, out, err) = run(home.path(), &["service", "uninstall", "--dry-run"], None);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("would be removed"), "{out}");
    assert!(unit.is_file());

    let (code, out, err) = run(home.path(), &["service", "uninstall"], None);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(aep_testkit::tree(home.path()), before, "uninstall left or took something:\n{out}");
    let (code, out, _) = run(home.path(), &["service", "uninstall"], None);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to remove"), "{out}");
    let (code, out, _) = run(home.path(), &["service", "status"], None);
    assert_eq!(code, 3);
    assert!(out.contains("not there"), "{out}");
}

/// A token file of the user's is named by path and never removed; without any token the
/// unit runs watch-only and says so.
#[test]
fn a_users_token_file_is_used_in_place_and_kept() {
    let home = tempfile::tempdir().unwrap();
    let mine = home.path().join("my-token");
    std::fs::write(&mine, "abc\n").unwrap();
    let m = mine.display().to_string();
    let (code, out, err) = run(home.path(), &["service", "install", "--no-start", "--token-file", &m], None);
    assert_eq!(code, 0, "{out}{err}");
    let unit = home.path().join(".config/systemd/user/aep-bridge.service");
    assert!(std::fs::read_to_string(&unit).unwrap().contains(&format!("--token-file {m}\n")));
    assert!(!home.path().join(".config/aep-bridge").exists());
    let (code, _, _) = run(home.path(), &["service", "uninstall"], None);
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(&mine).unwrap(), "abc\n");
    assert!(!home.path().join(".config").exists(), "the folders install made are gone");

    let (code, out, _) = run(home.path(), &["service", "install", "--no-start"], None);
    assert_eq!(code, 0);
    assert!(out.contains("no token (watch-only)"), "{out}");
    assert!(!std::fs::read_to_string(&unit).unwrap().contains("--token-file"));
}

/// On a machine whose user service manager does not answer (a container, a CI runner, an SSH
/// session without lingering: this machine), `install` writes the unit, then says so with
/// what to do next (run `serve` by hand, the systemd route, or remove the unit) instead of
/// the manager's raw error alone; `uninstall` then removes it. Where a user manager answers,
/// installing without `--no-start` would start a real service: skipped there.
#[test]
fn install_without_a_user_service_manager_says_what_to_do_next() {
    if Command::new("systemctl").args(["--user", "show-environment"]).output().is_ok_and(|o| o.status.success()) {
        println!("SKIP: a user service manager answers here; this test needs one that does not");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let (code, out, err) = run(home.path(), &["service", "install"], None);
    assert_eq!(code, 1, "{out}{err}");
    assert!(home.path().join(".config/systemd/user/aep-bridge.service").is_file(), "the unit is written");
    for want in [
        "no user service manager answers here",
        "next: run the bridge without a service manager",
        "aep-bridge serve",
        "aep-bridge service uninstall",
    ] {
        assert!(err.contains(want), "missing {want:?} in:\n{err}");
    }
    let (code, out, err) = run(home.path(), &["service", "uninstall"], None);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!home.path().join(".config/systemd/user/aep-bridge.service").exists());
}
