//! `aep-bridge uninstall` over temp homes and projects, through the real binary: for every
//! vendor `install` covers, install then uninstall gives back every file byte for byte and
//! every folder that was there (and only those); a file edited since install keeps the
//! user's edits; a second run changes nothing.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

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

/// Every file (with its bytes) and folder (`None`) under `root`, by relative path.
fn tree(root: &Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(rel, None);
                todo.push(p);
            } else {
                out.insert(rel, Some(std::fs::read(&p).unwrap()));
            }
        }
    }
    out
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
                let before = (tree(home.path()), tree(proj.path()));
                let p = proj.path().to_str().unwrap();
                let scope: Vec<&str> = if user { vec!["--user"] } else { vec!["--project", p] };
                let mut args = vec!["install", vendor.as_str(), "--shim", "/opt/aep/aep-hook"];
                args.extend(&scope);
                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                let installed = (tree(home.path()), tree(proj.path()));
                assert_ne!(installed, before, "{case}: install changed nothing");

                // A dry run says what it would do and does none of it.
                let mut args = vec!["uninstall", vendor.as_str(), "--dry-run"];
                args.extend(&scope);
                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                assert!(out.contains("would be"), "{case}: {out}");
                assert_eq!((tree(home.path()), tree(proj.path())), installed, "{case}: the dry run wrote");

                // Without --shim: entries of an `aep-hook` anywhere are ours.
                let mut args = vec!["uninstall", vendor.as_str()];
                args.extend(&scope);
                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                let after = (tree(home.path()), tree(proj.path()));
                assert_eq!(after, before, "{case}: uninstall did not give everything back:\n{out}");

                let (code, out, err) = bridge(&args, home.path());
                assert_eq!(code, 0, "{case}: {out}{err}");
                assert!(out.contains("nothing of aep-bridge's to remove"), "{case}: {out}");
                assert_eq!((tree(home.path()), tree(proj.path())), before, "{case}: the second run changed files");
            }
        }
    }
}

/// Reads JSONC the way the vendors do, independently of the installer: comments and
/// trailing commas dropped by a character walk, then strict JSON.
fn read_jsonc(text: &str) -> Value {
    let c: Vec<char> = text.chars().collect();
    let (mut out, mut i, mut in_string) = (String::new(), 0, false);
    while i < c.len() {
        let next = c.get(i + 1).copied();
        if in_string {
            out.push(c[i]);
            if c[i] == '\\' {
                out.extend(next);
                i += 1;
            } else if c[i] == '"' {
                in_string = false;
            }
        } else if c[i] == '/' && next == Some('/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
            continue;
        } else if c[i] == '/' && next == Some('*') {
            i += 2;
            while i + 1 < c.len() && !(c[i] == '*' && c[i + 1] == '/') {
                i += 1;
            }
            i += 1;
        } else if c[i] == ',' && out_next_closes(&c[i + 1..]) {
            // a trailing comma: dropped
        } else {
            in_string = c[i] == '"';
            out.push(c[i]);
        }
        i += 1;
    }
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSONC ({e}):\n{out}"))
}

/// Whether the next significant character (skipping whitespace and comments) closes a
/// container.
fn out_next_closes(rest: &[char]) -> bool {
    let mut i = 0;
    while i < rest.len() {
        match (rest[i], rest.get(i + 1)) {
            (c, _) if c.is_whitespace() => i += 1,
            ('/', Some('/')) => {
                while i < rest.len() && rest[i] != '\n' {
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                i += 2;
                while i + 1 < rest.len() && !(rest[i] == '*' && rest[i + 1] == '/') {
                    i += 1;
                }
                i += 2;
            }
            (c, _) => return c == '}' || c == ']',
        }
    }
    false
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
    let doc = read_jsonc(&text);
    let mut want = read_jsonc(JSONC);
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
    let before = tree(proj.path());
    let (code, out, err) = bridge(&["uninstall", "cline", "--project", p], home.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("nothing of aep-bridge's to remove"), "{out}");
    let (code, _, err) = bridge(&["uninstall", "claude-code", "--project", p], home.path());
    assert_eq!(code, 1);
    assert!(err.contains("not valid JSON"), "{err}");
    assert_eq!(tree(proj.path()), before);
    let (code, _, err) = bridge(&["uninstall", "nosuch"], home.path());
    assert_eq!(code, 2);
    assert!(err.contains("supported"), "{err}");
}
