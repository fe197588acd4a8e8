//! `aep-bridge install` over temp dirs: fresh file, user hooks preserved, idempotence,
//! backup written, plugin assets, and the absolute shim path next to the binary.

use std::path::Path;
use std::process::Command;

use serde_json::{Value, json};

fn install(args: &[&str], home: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_aep-bridge"))
        .arg("install")
        .args(args)
        .env("HOME", home)
        .env_remove("CLAUDE_CONFIG_DIR")
        .env_remove("CODEX_HOME")
        .output()
        .expect("run aep-bridge");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The commands registered for `event`.
fn commands(doc: &Value, event: &str) -> Vec<String> {
    doc["hooks"][event]
        .as_array()
        .map(|groups| {
            groups
                .iter()
                .flat_map(|g| g["hooks"].as_array().cloned().unwrap_or_default())
                .filter_map(|h| h["command"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn shim_next_to_binary() -> String {
    Path::new(env!("CARGO_BIN_EXE_aep-bridge")).parent().unwrap().join("aep-hook").display().to_string()
}

#[test]
fn claude_code_fresh_project_gets_every_event_with_the_absolute_shim() {
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let (code, out, err) = install(&["claude-code", "--project", proj.path().to_str().unwrap()], home.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("created"), "{out}");
    let file = proj.path().join(".claude/settings.json");
    let doc = read_json(&file);
    let expect = if Path::new(&shim_next_to_binary()).is_file() {
        format!("{} claude-code", shim_next_to_binary())
    } else {
        "aep-hook claude-code".to_owned()
    };
    for ev in
        ["PreToolUse", "PostToolUse", "SessionStart", "SessionEnd", "Stop", "PermissionRequest", "UserPromptSubmit"]
    {
        assert_eq!(commands(&doc, ev), vec![expect.clone()], "{ev}");
    }
    assert_eq!(doc["hooks"]["PreToolUse"][0]["matcher"], "*");
    assert!(doc["hooks"]["SessionStart"][0].get("matcher").is_none());
    assert!(!proj.path().join(".claude/settings.json.aep-backup").exists(), "no backup for a fresh file");
    // Nothing leaked into the home directory.
    assert!(!home.path().join(".claude").exists());
}

#[test]
fn existing_user_hooks_are_preserved_backed_up_and_a_second_run_changes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let dir = proj.path().join(".qwen");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("settings.json");
    let original = json!({
        "general": {"vimMode": true},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 my_guard.py", "timeout": 5000}]}],
            "CustomThing": [{"hooks": [{"type": "command", "command": "echo hi"}]}]
        }
    });
    let original_text = serde_json::to_string_pretty(&original).unwrap();
    std::fs::write(&file, &original_text).unwrap();
    let p = proj.path().to_str().unwrap();
    let (code, out, err) = install(&["qwen-code", "--project", p, "--shim", "/opt/aep/aep-hook"], home.path());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("updated"), "{out}");
    let doc = read_json(&file);
    assert_eq!(doc["general"]["vimMode"], true);
    assert_eq!(commands(&doc, "PreToolUse"), vec!["python3 my_guard.py", "/opt/aep/aep-hook qwen-code"]);
    assert_eq!(commands(&doc, "CustomThing"), vec!["echo hi"]);
    assert_eq!(commands(&doc, "PermissionRequest"), vec!["/opt/aep/aep-hook qwen-code"]);
    // The backup is the file as it was before the change.
    let backup = dir.join("settings.json.aep-backup");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original_text);

    // Idempotence: the second run reports and changes nothing (bytes identical).
    let after_first = std::fs::read(&file).unwrap();
    std::fs::remove_file(&backup).unwrap();
    let (code, out, _) = install(&["qwen-code", "--project", p, "--shim", "/opt/aep/aep-hook"], home.path());
    assert_eq!(code, 0);
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(std::fs::read(&file).unwrap(), after_first);
    assert!(!backup.exists(), "no backup when nothing changes");
}

#[test]
fn dry_run_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let (code, out, _) = install(&["codex", "--dry-run"], home.path());
    assert_eq!(code, 0);
    assert!(out.contains("would create"), "{out}");
    assert!(out.contains("PreToolUse"), "{out}");
    assert!(!home.path().join(".codex").exists());
}

#[test]
fn user_scope_codex_and_gemini_enablement() {
    let home = tempfile::tempdir().unwrap();
    let (code, _, err) = install(&["codex", "--user", "--shim", "aep-hook"], home.path());
    assert_eq!(code, 0, "{err}");
    let doc = read_json(&home.path().join(".codex/hooks.json"));
    assert_eq!(commands(&doc, "Stop"), vec!["aep-hook codex"]);

    let gem = home.path().join(".gemini");
    std::fs::create_dir_all(&gem).unwrap();
    std::fs::write(gem.join("settings.json"), r#"{"hooksConfig": {"enabled": false}}"#).unwrap();
    let (code, _, _) = install(&["gemini-cli", "--shim", "aep-hook"], home.path());
    assert_eq!(code, 0);
    let doc = read_json(&gem.join("settings.json"));
    assert_eq!(commands(&doc, "BeforeTool"), vec!["aep-hook gemini-cli"]);
    assert_eq!(doc["hooksConfig"]["enabled"], false, "an explicit user choice is not overridden");
}

#[test]
fn plugin_assets_are_written_once() {
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let p = proj.path().to_str().unwrap();
    let (code, _, _) = install(&["opencode", "--project", p], home.path());
    assert_eq!(code, 0);
    let f = proj.path().join(".opencode/plugins/aep-bridge.js");
    let text = std::fs::read_to_string(&f).unwrap();
    assert!(text.contains("/hooks/opencode/") || text.contains("VENDOR = \"opencode\""));
    let (_, out, _) = install(&["opencode", "--project", p], home.path());
    assert!(out.contains("unchanged"), "{out}");
    let (code, _, _) = install(&["pi", "--project", p], home.path());
    assert_eq!(code, 0);
    assert!(proj.path().join(".pi/extensions/aep-bridge.ts").is_file());
}

/// pi 0.80 loads a project's extensions only once it trusts the project; headless (`-p`,
/// `--mode rpc`) it never asks and silently ignores them, so a project install says how.
#[test]
fn a_pi_project_install_names_the_trust_step_and_a_user_install_needs_none() {
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let (code, out, err) = install(&["pi", "--project", proj.path().to_str().unwrap()], home.path());
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("next:") && out.contains("trust") && out.contains("--approve"), "{out}");
    let (code, out, err) = install(&["pi", "--user"], home.path());
    assert_eq!(code, 0, "{err}");
    assert!(home.path().join(".pi/agent/extensions/aep-bridge.ts").is_file());
    assert!(!out.contains("next:"), "a user extension loads everywhere: {out}");
}

/// The package the agent's own start-up check reads as installed in `dir` (OpenCode 1.18.33
/// and Kilo 7.7.7 run `npm install <package>` there unless `node_modules/` exists and the
/// lock's root lists the package).
fn sdk_listed(dir: &Path, package: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join("package-lock.json")) else { return false };
    let lock: Value = serde_json::from_str(&text).unwrap();
    dir.join("node_modules").is_dir()
        && lock.pointer("/packages/").and_then(|r| r["dependencies"].get(package)).is_some()
}

#[test]
fn plugin_installs_leave_nothing_for_the_agent_to_fetch_at_start() {
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let p = proj.path().to_str().unwrap();
    let (code, out, err) = install(&["opencode", "--project", p], home.path());
    assert_eq!(code, 0, "{err}");
    // OpenCode installs into every config directory, the user's included.
    assert!(sdk_listed(&proj.path().join(".opencode"), "@opencode-ai/plugin"), "{out}");
    assert!(sdk_listed(&home.path().join(".config/opencode"), "@opencode-ai/plugin"), "{out}");
    // Kilo only into the directories holding a plugin; it loads the folder by itself.
    let (code, out, err) = install(&["kilocode", "--project", p], home.path());
    assert_eq!(code, 0, "{err}");
    assert!(proj.path().join(".kilocode/plugins/aep-bridge.js").is_file());
    assert!(sdk_listed(&proj.path().join(".kilocode"), "@kilocode/plugin"), "{out}");
    assert!(!home.path().join(".config/kilo").exists(), "{out}");
    assert!(!out.contains("plugin` array") && !out.contains("next:"), "no registration step: {out}");
    let (code, _, _) = install(&["kilocode", "--user"], home.path());
    assert_eq!(code, 0);
    assert!(sdk_listed(&home.path().join(".config/kilo"), "@kilocode/plugin"));
    // A directory with a lock of its own is never edited: the install says what will happen.
    let other = tempfile::tempdir().unwrap();
    let mine = r#"{"packages": {"": {"dependencies": {"left-pad": "1.0.0"}}}}"#;
    std::fs::create_dir_all(other.path().join(".opencode")).unwrap();
    std::fs::write(other.path().join(".opencode/package-lock.json"), mine).unwrap();
    let (code, out, _) = install(&["opencode", "--project", other.path().to_str().unwrap()], home.path());
    assert_eq!(code, 0);
    assert_eq!(std::fs::read_to_string(other.path().join(".opencode/package-lock.json")).unwrap(), mine);
    assert!(out.contains("installs it there at start"), "{out}");
}

/// The Kilo Code 7.7.7 loader's contract for a file plugin, applied by node to the file
/// `aep-bridge install kilocode` writes (its `readV1Plugin` / `resolvePluginId`): a default
/// export object with a non-empty string `id` and a `server` function. Then the hooks it
/// returns: a bus event naming no session is not forwarded, one naming a session is.
#[test]
fn the_kilo_plugin_passes_kilos_loader_and_forwards_only_session_events() {
    let Ok(node) = which_node() else {
        println!("SKIP: node not installed");
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let proj = tempfile::tempdir().unwrap();
    let (code, _, _) = install(&["kilocode", "--project", proj.path().to_str().unwrap()], home.path());
    assert_eq!(code, 0);
    let plugin = proj.path().join(".kilocode/plugins/aep-bridge.js");
    let harness = proj.path().join("harness.mjs");
    std::fs::write(
        &harness,
        r#"
const sent = [];
globalThis.fetch = async (url, init) => { sent.push({ url: String(url), body: JSON.parse(init.body) }); return new Response(""); };
const mod = await import(process.argv[2]);
const D = mod.default;
if (!D || typeof D !== "object") throw new Error("must default export an object with server()");
if (typeof D.server !== "function") throw new Error("must default export an object with server()");
if (typeof D.id !== "string" || !D.id.trim()) throw new Error("Path plugin must export id");
const hooks = await D.server({ serverUrl: new URL("http://127.0.0.1:4096") }, undefined);
await hooks.event({ event: { id: "e1", type: "plugin.added", properties: { name: "x" } } });
await hooks.event({ event: { id: "e2", type: "catalog.updated", properties: {} } });
await hooks.event({ event: { id: "e3", type: "session.status", properties: { sessionID: "ses_1", status: { type: "idle" } } } });
await new Promise((r) => setTimeout(r, 200));
console.log(JSON.stringify({ id: D.id, sent }));
"#,
    )
    .unwrap();
    let out = Command::new(node).arg(&harness).arg(&plugin).output().expect("run node");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(out.stdout.trim_ascii()).unwrap();
    let sent: Vec<&str> =
        v["sent"].as_array().unwrap().iter().map(|s| s["body"]["event"]["type"].as_str().unwrap()).collect();
    assert_eq!(sent, ["session.status"], "{v}");
    assert!(v["sent"][0]["url"].as_str().unwrap().ends_with("/hooks/kilocode/bus"));
    assert_eq!(v["sent"][0]["body"]["serverUrl"], "http://127.0.0.1:4096/");
}

fn which_node() -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .and_then(|p| std::env::split_paths(&p).map(|d| d.join("node")).find(|f| f.is_file()))
        .ok_or(())
}

#[test]
fn refuses_unknown_vendors_and_malformed_settings() {
    let home = tempfile::tempdir().unwrap();
    let (code, _, err) = install(&["nosuch", "--dry-run"], home.path());
    assert_eq!(code, 2);
    assert!(err.contains("supported"), "{err}");
    let proj = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(proj.path().join(".claude")).unwrap();
    let f = proj.path().join(".claude/settings.json");
    std::fs::write(&f, r#"{"hooks": {"Stop": "not a list"}}"#).unwrap();
    let (code, _, err) = install(&["claude-code", "--project", proj.path().to_str().unwrap()], home.path());
    assert_eq!(code, 1);
    assert!(err.contains("hooks.Stop"), "{err}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), r#"{"hooks": {"Stop": "not a list"}}"#, "untouched");
}

/// Gemini CLI and Qwen Code read their settings as JSONC: a file with line and block
/// comments and trailing commas installs, keeps every comment and the user's other keys,
/// and a second run changes nothing.
#[test]
fn jsonc_settings_with_comments_and_trailing_commas_install_and_keep_the_comments() {
    let original = r#"// Personal Gemini settings.
{
  /* The model I use,
     with a block comment. */
  "model": {"name": "gemini-2.5-pro",}, // trailing comma inside
  "ui": {
    "theme": "GitHub", // a line comment after a value
    "url": "http://example.invalid/a//b/*c*/", // comment markers inside a string stay
  },
  "hooks": {
    // my own guard
    "BeforeTool": [
      {"matcher": "run_shell_command", "hooks": [{"type": "command", "command": "python3 guard.py"}]},
    ],
  },
}
"#;
    for (vendor, dir) in [("gemini-cli", ".gemini"), ("qwen-code", ".qwen")] {
        let home = tempfile::tempdir().unwrap();
        let proj = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(proj.path().join(dir)).unwrap();
        let file = proj.path().join(dir).join("settings.json");
        std::fs::write(&file, original).unwrap();
        let p = proj.path().to_str().unwrap();
        let (code, out, err) = install(&[vendor, "--project", p, "--shim", "/opt/aep/aep-hook"], home.path());
        assert_eq!(code, 0, "{vendor}: {out}{err}");
        assert!(out.contains("updated"), "{vendor}: {out}");
        let text = std::fs::read_to_string(&file).unwrap();
        for comment in [
            "// Personal Gemini settings.",
            "/* The model I use,\n     with a block comment. */",
            "// trailing comma inside",
            "// a line comment after a value",
            "// comment markers inside a string stay",
            "// my own guard",
        ] {
            assert!(text.contains(comment), "{vendor}: lost {comment:?}:\n{text}");
        }
        let doc = aep_testkit::read_jsonc(&text);
        assert_eq!(doc["model"]["name"], "gemini-2.5-pro", "{vendor}");
        assert_eq!(doc["ui"]["theme"], "GitHub", "{vendor}");
        assert_eq!(doc["ui"]["url"], "http://example.invalid/a//b/*c*/", "{vendor}");
        let ours = format!("/opt/aep/aep-hook {vendor}");
        let first = if vendor == "gemini-cli" { "BeforeTool" } else { "PreToolUse" };
        let mut want = if vendor == "gemini-cli" { vec!["python3 guard.py".to_owned()] } else { Vec::new() };
        want.push(ours.clone());
        assert_eq!(commands(&doc, first), want, "{vendor}");
        assert_eq!(commands(&doc, "SessionStart"), vec![ours.clone()], "{vendor}");
        if vendor == "gemini-cli" {
            assert_eq!(commands(&doc, "BeforeTool").len(), 2);
            assert_eq!(doc["hooksConfig"]["enabled"], true);
        }
        assert_eq!(std::fs::read_to_string(proj.path().join(dir).join("settings.json.aep-backup")).unwrap(), original);

        let after_first = std::fs::read(&file).unwrap();
        let (code, out, err) = install(&[vendor, "--project", p, "--shim", "/opt/aep/aep-hook"], home.path());
        assert_eq!(code, 0, "{vendor}: {out}{err}");
        assert!(out.contains("unchanged"), "{vendor}: {out}");
        assert_eq!(std::fs::read(&file).unwrap(), after_first, "{vendor}: the second run changes nothing");
    }
}
