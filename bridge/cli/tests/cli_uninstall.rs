//! `aep-bridge uninstall` over temp homes and projects, through the real binary: for every
//! vendor `install` covers, install then uninstall gives back every file byte for byte and
//! every folder that was there (and only those); a file edited since install keeps the
//! user's edits; a second run changes nothing.

use std::path::Path;
use std::process::Command;

/// Runs `aep-bridge <args>` with `home` as HOME and no vendor folder variables.
fn bridge(args: &[&str], home: &Path) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aep-bridge"));
    cmd.args(args).env("HOME", home);
    for v in ["CLAUDE_CONFIG_DIR", "CODEX_HOME", "CLINE_DIR", "HERMES_HOME", "AEP_BRIDGE_DATA_DIR", "XDG_CONFIG_HOME"] {
        cmd.env_remove(v);
    }
    let out = cmd.output().expect("run aep-bridge");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn write(base: &Path, rel: &str, text: &str) {
    let f = base.join(rel);
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(f, text).unwrap();
}

/// A Claude Code / Codex hooks file as a user keeps it: strict JSON (those agents read no
/// comments), four-space indent, their own hooks on an event we wire too.
const STRICT: &str = r#"{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 guard.py", "timeout": 5}]}
        ],
        "MyOwnEvent": []
    }
}
"#;

/// A Gemini CLI / Qwen Code settings file: JSONC with line and block comments, trailing
/// commas, and the user's own hook.
const JSONC: &str = r#"// Personal settings.
{
  /* The model I use,
     with a block comment. */
  "model": {"name": "gemini-2.5-pro",}, // trailing comma inside
  "hooks": {
    // my own guard
    "BeforeTool": [
      {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "python3 guard.py"}]},
    ],
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 guard.py"}]}
    ]
  },
}
"#;

/// The user's own files for `vendor` under `base` (a project or a home), and folders of
/// theirs that must outlive an uninstall.
fn seed(vendor: &str, base: &Path, user: bool) {
    match vendor {
        "claude-code" => write(base, ".claude/settings.json", STRICT),
        "codex" => write(base, ".codex/hooks.json", STRICT),
        "gemini-cli" => write(base, ".gemini/settings.json", JSONC),
        "qwen-code" => write(base, ".qwen/settings.json", JSONC),
        "opencode" if user => write(base, ".config/opencode/opencode.jsonc", "{\n  // mine\n  \"theme\": \"x\",\n}\n"),
        "opencode" => write(base, ".opencode/plugins/mine.js", "export default {}\n"),
        // An empty folder of the user's: nothing but a record can tell it from one we made.
        "kilocode" if user => std::fs::create_dir_all(base.join(".config/kilo/plugins")).unwrap(),
        "kilocode" => std::fs::create_dir_all(base.join(".kilocode")).unwrap(),
        "pi" if user => write(base, ".pi/agent/settings.json", "{\"theme\": \"dark\"}\n"),
        "pi" => std::fs::create_dir_all(base.join(".pi/extensions")).unwrap(),
        "cline" => write(base, ".cline/hooks/PreCompact.sh", "#!/bin/sh\necho mine\n"),
        "hermes" => write(base, ".hermes/config.yaml", "# my hermes\nmodel:\n  default: x # mine\n"),
        "copilot-cli" if user => write(base, ".copilot/settings.json", STRICT),
        // Copilot's hooks folder with a hook file of the user's beside ours.
        "copilot-cli" => write(base, ".github/hooks/mine.json", STRICT),
        "droid" => write(base, ".factory/settings.json", STRICT),
        other => panic!("no seed for {other}: add one"),
    }
}

/// The vendors `install` covers, as it lists them.
fn supported(home: &Path) -> Vec<String> {
    let (_, _, err) = bridge(&["install", "nosuch", "--dry-run"], home);
    let list = err.split("supported: ").nth(1).unwrap().split(" (").next().unwrap();
    list.split(", ").map(str::to_owned).collect()
}

#[test]
fn install_then_uninstall_gives_every_file_and_folder_back() {
    let vendors = supported(tempfile::tempdir().unwrap().path());
    assert!(vendors.len() >= 9, "{vendors:?}");
    for vendor in &vendors {
        for user in [false, true] {
            if vendor == "hermes" && !user {
                continue; // it reads hooks from its home only
            }
            for seeded in [true, false] {
                let case = format!("{vendor} user={user} seeded={seeded}");
                let home = tempfile::tempdir().unwrap();
                let proj = tempfile::tempdir().unwrap();
                let base = if user { home.path() } else { proj.path() };
                if seeded {
                    seed(vendor, base, user);
                }
                let before = (aep_testkit::tree(home.path()), aep_testkit::tree(proj.path()));
                let p = proj.path().to_str().unwrap();
                let scope: Vec<&str> = if user { vec!["--user"] } else { vec!["--project", p] };
                let mut args = vec!["install", vendor.as_str(), "--shim", "/opt/aep/aep-hook"];
                args.extend(&scope);
                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                let installed = (aep_testkit::tree(home.path()), aep_testkit::tree(proj.path()));
                assert_ne!(installed, before, "{case}: install changed nothing");

                // A dry run says what it would do and does none of it.
                let mut args = vec!["uninstall", vendor.as_str(), "--dry-run"];
                args.extend(&scope);
                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                assert!(out.contains("would be"), "{case}: {out}");
                assert_eq!(
                    (aep_testkit::tree(home.path()), aep_testkit::tree(proj.path())),
                    installed,
                    "{case}: the dry run wrote"
                );

                // Without --shim: entries of an `aep-hook` anywhere are ours.
                let mut args = vec!["uninstall", vendor.as_str()];
                args.extend(&scope);
                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                let after = (aep_testkit::tree(home.path()), aep_testkit::tree(proj.path()));
                assert_eq!(after, before, "{case}: uninstall did not give everything back:\n{out}");

                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                assert!(out.contains("nothing of aep-bridge's to remove"), "{case}: {out}");
                assert_eq!(
                    (aep_testkit::tree(home.path()), aep_testkit::tree(proj.path())),
                    before,
                    "{case}: the second run changed files"
                );
            }
        }
    }
}

/// Changed after install (their own hook after ours, a new comment, a new key): uninstall
/// takes out ours only, writes a backup first, and a second run changes nothing.
#[test]
fn a_settings_file_edited_since_install_keeps_the_users_edits() {
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let p = proj.path().to_str().unwrap();
    write(proj.path(), ".gemini/settings.json", JSONC);
    let (code, out, err) = bridge(&["install", "gemini-cli", "--project", p], home.path());
    assert_eq!(code, 0, "{out}{err}");
    let file = proj.path().join(".gemini/settings.json");
    let installed = std::fs::read_to_string(&file).unwrap();
    let edited =
        installed.replacen("{\n", "{\n  // added after install\n  \"ui\": {\"theme\": \"GitHub\"},\n", 1).replacen(
            "\"BeforeTool\": [\n",
            "\"BeforeTool\": [\n      {\"hooks\": [{\"type\": \"command\", \"command\": \"echo later\"}]},\n",
            1,
        );
    assert_ne!(edited, installed);
    std::fs::write(&file, &edited).unwrap();

    let (code, out, err) = bridge(&["uninstall", "gemini-cli", "--project", p], home.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("taken out, yours kept"), "{out}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("aep-hook"), "{text}");
    for kept in ["// Personal settings.", "// my own guard", "// added after install", "with a block comment. */"] {
        assert!(text.contains(kept), "lost {kept:?}:\n{text}");
    }
    let doc = aep_testkit::read_jsonc(&text);
    let mut want = aep_testkit::read_jsonc(JSONC);
    want["ui"] = serde_json::json!({"theme": "GitHub"});
    // Install switched hooks on; the user's own hooks still rely on that, so it stays.
    want["hooksConfig"] = serde_json::json!({"enabled": true});
    want["hooks"]["BeforeTool"]
        .as_array_mut()
        .unwrap()
        .insert(0, serde_json::json!({"hooks": [{"type": "command", "command": "echo later"}]}));
    assert_eq!(doc, want, "{text}");
    let backup = proj.path().join(".gemini/settings.json.aep-backup");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), edited, "the backup is the file before uninstall");

    let (code, out, _) = bridge(&["uninstall", "gemini-cli", "--project", p], home.path());
    assert_eq!(code, 0);
    assert!(out.contains("nothing of aep-bridge's to remove"), "{out}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}

/// Another program's file at our hook script's name, or a settings file we cannot read,
/// is left alone.
#[test]
fn what_is_not_ours_is_left_alone() {
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let p = proj.path().to_str().unwrap();
    write(proj.path(), ".cline/hooks/TaskStart.sh", "#!/bin/sh\nexec my-own-tool\n");
    write(proj.path(), ".claude/settings.json", "{\"hooks\": ");
    let before = aep_testkit::tree(proj.path());
    let (code, out, err) = bridge(&["uninstall", "cline", "--project", p], home.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("nothing of aep-bridge's to remove"), "{out}");
    let (code, _, err) = bridge(&["uninstall", "claude-code", "--project", p], home.path());
    assert_eq!(code, 1);
    assert!(err.contains("not valid JSON"), "{err}");
    assert_eq!(aep_testkit::tree(proj.path()), before);
    let (code, _, err) = bridge(&["uninstall", "nosuch"], home.path());
    assert_eq!(code, 2);
    assert!(err.contains("supported"), "{err}");
}
