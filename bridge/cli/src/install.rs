//! `aep-bridge install <vendor>`: wires an agent's hooks to the bridge by merging the
//! `aep-hook <vendor>` command into the vendor's own settings file (or writing its plugin
//! or extension shim). Idempotent; a `.aep-backup` copy is written before a file changes;
//! the user's other hooks are never touched (our entry is appended to an event's list
//! only when no entry already runs the same command). Settings files are read as JSONC
//! and edited by insertion, so the user's comments, trailing commas and layout stay.
//! What it creates (files, folders) is recorded in the data directory (`crate::ledger`), so
//! `uninstall` takes away exactly that.

use std::path::{Path, PathBuf};

use aep_adapters::spec::{HooksInstall, InstallSpec, TimeUnit, VendorSpec, YamlHooksInstall};
use clap::Args;
use serde_json::{Map, Value, json};

use crate::jsonc;

/// Arguments of `aep-bridge install`.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// The vendor: claude-code, codex, gemini-cli, qwen-code, opencode, kilocode, pi, cline, hermes.
    pub vendor: String,
    /// Install into this project directory (its `.claude/`, `.gemini/`, ... settings).
    #[arg(long, conflicts_with = "user")]
    pub project: Option<PathBuf>,
    /// Install into the user-level settings (the default).
    #[arg(long)]
    pub user: bool,
    /// Show what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The shim command to write (default: the absolute `aep-hook` next to this binary,
    /// else `aep-hook` on PATH).
    #[arg(long)]
    pub shim: Option<String>,
}

/// Where to install.
#[derive(Debug, Clone)]
pub enum Scope {
    /// A project directory.
    Project(PathBuf),
    /// The user's home (settings under it).
    User(PathBuf),
}

/// What one vendor's install writes, resolved to a file.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Merge hook entries into a JSON settings file.
    Hooks {
        /// The settings file.
        file: PathBuf,
        /// The vendor (its hook list, timeouts and held moments).
        spec: &'static VendorSpec,
        /// The hook list of its install spec.
        install: HooksInstall,
    },
    /// Write a shim file verbatim.
    Asset {
        /// The file.
        file: PathBuf,
        /// Its content.
        content: &'static str,
        /// A step the user still has to take, if any.
        note: Option<&'static str>,
        /// The agent's plugin SDK and the config directories it installs it into at start.
        deps: Option<(&'static str, Vec<PathBuf>)>,
    },
    /// Write one hook script per event into a folder.
    Scripts {
        /// The hooks folder.
        dir: PathBuf,
        /// The event file names, each completed by `suffix`.
        events: &'static [&'static str],
        /// The file name suffix.
        suffix: &'static str,
    },
    /// Append a `hooks:` block to a YAML config.
    Yaml {
        /// The config file.
        file: PathBuf,
        /// The vendor (its held moments get the long timeout).
        spec: &'static VendorSpec,
        /// What to wire.
        install: YamlHooksInstall,
    },
}

fn env_dir(name: &str) -> Option<PathBuf> {
    aep_bridge::env::Env::process().var(name).map(PathBuf::from)
}

/// The install plan of `vendor` at `scope`, from the vendor's own folder; `None` for a
/// vendor whose wiring is manual.
pub fn plan(vendor: &str, scope: &Scope) -> Option<Plan> {
    let spec = aep_adapters::vendors::spec(vendor)?;
    let (base, user) = match scope {
        Scope::Project(d) => (d.clone(), false),
        Scope::User(h) => (h.clone(), true),
    };
    Some(match spec.install? {
        InstallSpec::Hooks(install) => {
            let rel = Path::new(if user { install.user_file } else { install.project_file });
            // A user-level config dir named by the vendor's own variable replaces the folder.
            let file = match (user, install.user_dir_env.and_then(env_dir), rel.file_name()) {
                (true, Some(dir), Some(name)) => dir.join(name),
                _ => base.join(rel),
            };
            Plan::Hooks { file, spec, install }
        }
        InstallSpec::Asset(a) => {
            let file = base.join(if user { a.user_file } else { a.project_file });
            // The config directory is the plugin folder's parent (`.opencode/plugins/x.js`).
            let deps = a.deps.map(|d| {
                let mut dirs: Vec<PathBuf> =
                    file.parent().and_then(Path::parent).map(Path::to_path_buf).into_iter().collect();
                if let (false, Some(rel), Some(home)) = (user, d.user_dir_always, home_dir()) {
                    dirs.push(home.join(rel));
                }
                (d.package, dirs)
            });
            let note = if user { a.note } else { a.project_note.or(a.note) };
            Plan::Asset { file, content: a.content, note, deps }
        }
        InstallSpec::HookScripts(h) => Plan::Scripts {
            dir: match (user, h.user_dir_env.and_then(env_dir)) {
                (true, Some(home)) => home.join("hooks"),
                _ => base.join(if user { h.user_dir } else { h.project_dir }),
            },
            events: h.events,
            suffix: h.suffix,
        },
        // The vendor reads hooks from its home only: a project install has nowhere to go.
        InstallSpec::YamlHooks(_) if !user => return None,
        InstallSpec::YamlHooks(install) => {
            let rel = Path::new(install.user_file);
            let file = match (install.user_dir_env.and_then(env_dir), rel.file_name()) {
                (Some(dir), Some(name)) => dir.join(name),
                _ => base.join(rel),
            };
            Plan::Yaml { file, spec, install }
        }
    })
}

fn home_dir() -> Option<PathBuf> {
    env_dir("HOME")
}

/// What [`plugin_deps`] did in one config directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DepsState {
    /// `node_modules/` and `package-lock.json` written (or, dry run, would be): what did not
    /// exist before, outermost first.
    Written(Vec<PathBuf>),
    /// The directory's own lock lists the package already.
    Listed,
    /// The directory has its own `node_modules/` or lock without the package: untouched,
    /// and the agent will try to install it at start.
    Foreign,
}

/// Makes the agent's own dependency check accept `package` as installed in `dir` (it
/// installs it from npm before loading plugins, at every start until that succeeds: ~70 s
/// of retries offline), when the directory has no `node_modules` and no lock of its own;
/// a user's existing lock is never edited.
pub fn plugin_deps(dir: &Path, package: &str, dry_run: bool) -> Result<DepsState, String> {
    let lock = dir.join("package-lock.json");
    let modules = dir.join("node_modules");
    if let Some(text) = read_opt(&lock)? {
        let listed = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v.pointer("/packages/")?.get("dependencies")?.get(package).cloned())
            .is_some();
        return Ok(if listed && modules.is_dir() { DepsState::Listed } else { DepsState::Foreign });
    }
    if modules.exists() {
        return Ok(DepsState::Foreign);
    }
    let mut created = missing_dirs(&modules);
    created.push(lock.clone());
    if !dry_run {
        std::fs::create_dir_all(&modules).map_err(|e| format!("cannot create {}: {e}", modules.display()))?;
        std::fs::write(&lock, deps_lock(package)).map_err(|e| format!("cannot write {}: {e}", lock.display()))?;
    }
    Ok(DepsState::Written(created))
}

/// The `package-lock.json` that makes the agent take `package` as installed.
pub fn deps_lock(package: &str) -> String {
    let doc = json!({"lockfileVersion": 3, "requires": true, "packages": {"": {"dependencies": {package: "*"}}}});
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

/// The shim command prefix: the absolute `aep-hook` next to this binary, else `aep-hook`.
pub fn default_shim() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(if cfg!(windows) { "aep-hook.exe" } else { "aep-hook" })))
        .filter(|p| p.is_file())
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "aep-hook".into())
}

/// Quotes a path for a shell command line when it needs it.
fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"/._-+:@%=,".contains(&b)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The program and the arguments of a hook command line as [`hook_command`] writes it
/// (the program one shell word, plain or single-quoted).
pub fn split_command(cmd: &str) -> Option<(String, &str)> {
    let cmd = cmd.trim();
    let Some(mut rest) = cmd.strip_prefix('\'') else {
        let (p, r) = cmd.split_once(' ').unwrap_or((cmd, ""));
        return Some((p.to_owned(), r.trim_start()));
    };
    let mut program = String::new();
    loop {
        let i = rest.find('\'')?;
        program.push_str(&rest[..i]);
        rest = &rest[i + 1..];
        match rest.strip_prefix("\\''") {
            Some(more) => {
                program.push('\'');
                rest = more;
            }
            None => break,
        }
    }
    (rest.is_empty() || rest.starts_with(' ')).then(|| (program, rest.trim_start()))
}

/// Whether `cmd` is a hook command `install` writes for `vendor`: an `aep-hook` wherever it
/// lives (an install made by another build, or before the binary moved), or `shim`.
pub fn is_ours(cmd: &str, vendor: &str, shim: Option<&str>) -> bool {
    split_command(cmd).is_some_and(|(program, args)| {
        let name = Path::new(&program).file_name().and_then(|n| n.to_str());
        args == vendor && (matches!(name, Some("aep-hook" | "aep-hook.exe")) || shim == Some(program.as_str()))
    })
}

/// The hook command line for `vendor`.
pub fn hook_command(shim: &str, vendor: &str) -> String {
    format!("{} {vendor}", shell_word(shim))
}

/// Merges our hook entry into `doc.hooks[event]` for each event: appended only when no
/// entry of that event already runs `command`. Returns the events that changed. Fails
/// (touching nothing) when the document's shape is not the vendor's hooks shape.
pub fn merge_hooks(
    doc: &mut Value,
    vendor: &VendorSpec,
    install: &HooksInstall,
    command: &str,
) -> Result<Vec<&'static str>, String> {
    let events = install.hooks;
    let Value::Object(root) = doc else { return Err("the settings file is not a JSON object".into()) };
    let hooks = root.entry("hooks").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else { return Err("`hooks` is not an object".into()) };
    for e in events {
        if let Some(v) = hooks.get(e.event)
            && !v.is_array()
        {
            return Err(format!("`hooks.{}` is not an array", e.event));
        }
    }
    let mut changed = Vec::new();
    for e in events {
        let list = hooks.entry(e.event).or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(list) = list else { continue };
        let present = list.iter().any(|group| {
            group.get("hooks").and_then(Value::as_array).is_some_and(|hs| {
                hs.iter().any(|x| x.get("command").and_then(Value::as_str).map(str::trim) == Some(command))
            })
        });
        if present {
            continue;
        }
        let mut group = Map::new();
        if e.matcher {
            group.insert("matcher".into(), json!("*"));
        }
        let timeout = e.timeout(vendor, install.timeout_unit);
        group.insert("hooks".into(), json!([{"type": "command", "command": command, "timeout": timeout}]));
        list.push(Value::Object(group));
        changed.push(e.event);
    }
    Ok(changed)
}

/// What installing did (or would do) to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Nothing to do.
    Unchanged,
    /// A new file.
    Created,
    /// An existing file changed (a backup was written).
    Updated,
}

/// The result of applying a plan.
#[derive(Debug, Clone)]
pub struct Applied {
    /// The file.
    pub file: PathBuf,
    /// What happened.
    pub change: Change,
    /// Hook events added (hooks plans).
    pub added: Vec<&'static str>,
    /// The backup written, if any.
    pub backup: Option<PathBuf>,
    /// The user's file had to be rewritten whole (its content kept, its comments and
    /// layout not), because inserting our entries in place did not reproduce the merge.
    pub rewritten: bool,
    /// Files and folders that did not exist before (or, dry run, would not), outermost first.
    pub created: Vec<PathBuf>,
}

/// The backup path of `file` (`<file>.aep-backup`).
pub fn backup_path(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_owned();
    s.push(".aep-backup");
    PathBuf::from(s)
}

/// What installing makes of one file: its new text, or `None` when it is wired already.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The new text (`None`: nothing to change).
    pub text: Option<String>,
    /// Hook events added.
    pub added: Vec<&'static str>,
    /// The text had to be rewritten whole (see [`Applied::rewritten`]).
    pub rewritten: bool,
}

/// The text a single-file `plan` gives a file whose text is `old` (`None`: absent),
/// touching nothing: `apply` writes it, and `uninstall` checks a backup against it.
pub fn render(plan: &Plan, command: &str, old: Option<&str>) -> Result<Rendered, String> {
    let unchanged = Rendered { text: None, added: Vec::new(), rewritten: false };
    match plan {
        Plan::Hooks { file, spec, install } => {
            // Gemini CLI and Qwen Code read JSONC: comments and trailing commas are theirs to keep.
            let user_text = old.filter(|t| !t.trim().is_empty());
            let mut doc = match user_text {
                Some(t) => jsonc::parse(t)
                    .map_err(|e| format!("{}: not valid JSON or JSONC ({e}); fix or move it first", file.display()))?,
                None => json!({}),
            };
            let before = doc.clone();
            let added =
                merge_hooks(&mut doc, spec, install, command).map_err(|e| format!("{}: {e}", file.display()))?;
            let mut extra = false;
            if install.enable_hooks_config
                && let Value::Object(root) = &mut doc
            {
                let hc = root.entry("hooksConfig").or_insert_with(|| json!({}));
                if let Value::Object(hc) = hc
                    && !hc.contains_key("enabled")
                {
                    hc.insert("enabled".into(), json!(true));
                    extra = true;
                }
            }
            if added.is_empty() && !extra && old.is_some() {
                return Ok(unchanged);
            }
            let edited = user_text.and_then(|t| edit_in_place(t, &before, &doc, &added));
            let rewritten = user_text.is_some() && edited.is_none();
            let text = match edited {
                Some(t) => t,
                None => {
                    let mut t = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
                    t.push('\n');
                    t
                }
            };
            Ok(Rendered { text: Some(text), added, rewritten })
        }
        Plan::Yaml { file, spec, install } => {
            let text = old.unwrap_or_default();
            if text.contains(&yaml_command(command)) {
                return Ok(unchanged);
            }
            if text.lines().any(|l| l.starts_with("hooks:")) {
                return Err(format!(
                    "{} already has a top-level `hooks:` block; add these entries to it by hand:\n{}",
                    file.display(),
                    yaml_hooks(spec, install, command).trim_start_matches("hooks:\n")
                ));
            }
            let mut new_text = text.to_owned();
            if !new_text.is_empty() && !new_text.ends_with('\n') {
                new_text.push('\n');
            }
            new_text.push_str(&yaml_hooks(spec, install, command));
            Ok(Rendered { text: Some(new_text), added: install.events.to_vec(), rewritten: false })
        }
        Plan::Asset { content, .. } if old == Some(*content) => Ok(unchanged),
        Plan::Asset { content, .. } => {
            Ok(Rendered { text: Some((*content).to_owned()), added: Vec::new(), rewritten: false })
        }
        Plan::Scripts { dir, .. } => Err(format!("{}: one file per event, not one file", dir.display())),
    }
}

/// The folders among `dir` and its ancestors that do not exist, outermost first: what
/// `create_dir_all(dir)` creates.
pub fn missing_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).map(Path::to_path_buf).collect();
    out.reverse();
    out
}

/// Applies a plan (writing nothing when `dry_run`).
pub fn apply(plan: &Plan, command: &str, dry_run: bool) -> Result<Applied, String> {
    let file = match plan {
        Plan::Scripts { dir, events, suffix } => return apply_scripts(dir, events, suffix, command, dry_run),
        Plan::Hooks { file, .. } | Plan::Yaml { file, .. } | Plan::Asset { file, .. } => file.clone(),
    };
    let old = read_opt(&file)?;
    let Rendered { text, added, rewritten } = render(plan, command, old.as_deref())?;
    let Some(new_text) = text else {
        return Ok(Applied { file, change: Change::Unchanged, added, backup: None, rewritten, created: Vec::new() });
    };
    let exists = old.is_some();
    let change = if exists { Change::Updated } else { Change::Created };
    let backup = exists.then(|| backup_path(&file));
    let mut created = Vec::new();
    if !exists {
        created = file.parent().map(missing_dirs).unwrap_or_default();
        created.push(file.clone());
    }
    if !dry_run {
        if let Some(b) = &backup {
            std::fs::copy(&file, b).map_err(|e| format!("cannot write the backup {}: {e}", b.display()))?;
        }
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        write_atomic(&file, &new_text)?;
    }
    Ok(Applied { file, change, added, backup, rewritten, created })
}

/// Writes a sibling then renames it over `file`: a crash never leaves a half-written file.
pub fn write_atomic(file: &Path, text: &str) -> Result<(), String> {
    let tmp = {
        let mut s = file.as_os_str().to_owned();
        s.push(".aep-tmp");
        PathBuf::from(s)
    };
    std::fs::write(&tmp, text.as_bytes()).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, file).map_err(|e| format!("cannot replace {}: {e}", file.display()))
}

/// A YAML double-quoted scalar of the hook command.
pub fn yaml_command(command: &str) -> String {
    serde_json::to_string(command).unwrap_or_default()
}

/// The `hooks:` block wiring every event of `install` to `command`.
pub fn yaml_hooks(spec: &VendorSpec, install: &YamlHooksInstall, command: &str) -> String {
    let mut out = String::from("hooks:\n");
    for event in install.events {
        out.push_str(&format!(
            "  {event}:\n    - command: {}\n      timeout: {}\n",
            yaml_command(command),
            spec.hook_timeout(event, TimeUnit::Seconds)
        ));
    }
    out
}

/// The script for one event: the shim reads the payload on stdin and names its hook.
pub fn hook_script(command: &str) -> String {
    format!(
        "#!/bin/sh\n# written by `aep-bridge install`: forwards this hook to aep-bridge (fails open)\nexec {command}\n"
    )
}

/// Writes the missing hook scripts; a same-named file that is not ours is an error (nothing
/// written): the user's hook stays theirs.
fn apply_scripts(
    dir: &Path,
    events: &'static [&'static str],
    suffix: &str,
    command: &str,
    dry_run: bool,
) -> Result<Applied, String> {
    let script = hook_script(command);
    let mut added = Vec::new();
    for event in events {
        let file = dir.join(format!("{event}{suffix}"));
        match read_opt(&file)? {
            Some(t) if t == script => {}
            Some(_) => {
                return Err(format!(
                    "{} exists and is not ours; left as is (add `{command}` to it, or move it and run install again)",
                    file.display()
                ));
            }
            None => added.push(*event),
        }
    }
    let change = match (added.is_empty(), dir.is_dir()) {
        (true, _) => Change::Unchanged,
        (false, true) => Change::Updated,
        (false, false) => Change::Created,
    };
    let mut created = if added.is_empty() { Vec::new() } else { missing_dirs(dir) };
    created.extend(added.iter().map(|event| dir.join(format!("{event}{suffix}"))));
    if !dry_run && !added.is_empty() {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for event in &added {
            let file = dir.join(format!("{event}{suffix}"));
            std::fs::write(&file, script.as_bytes()).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755))
                    .map_err(|e| format!("cannot make {} executable: {e}", file.display()))?;
            }
        }
    }
    Ok(Applied { file: dir.to_path_buf(), change, added, backup: None, rewritten: false, created })
}

/// The user's settings text with our additions inserted (every byte they wrote, comments
/// included, kept), when the insertions reproduce `after` exactly; else `None`.
fn edit_in_place(text: &str, before: &Value, after: &Value, added: &[&str]) -> Option<String> {
    let mut text = text.to_owned();
    let mut put = |path: &[&str], key: Option<&str>, value: &Value| -> Option<()> {
        text = jsonc::insert(&text, jsonc::Insert { path, key, value })?;
        Some(())
    };
    match before.get("hooks") {
        None if !added.is_empty() => put(&[], Some("hooks"), after.get("hooks")?)?,
        None => {}
        Some(old) => {
            for &event in added {
                let list = after.get("hooks")?.get(event)?;
                match old.get(event) {
                    Some(_) => put(&["hooks", event], None, list.as_array()?.last()?)?,
                    None => put(&["hooks"], Some(event), list)?,
                }
            }
        }
    }
    if let Some(enabled) = after.get("hooksConfig").and_then(|h| h.get("enabled"))
        && before.get("hooksConfig").and_then(|h| h.get("enabled")).is_none()
    {
        match before.get("hooksConfig") {
            Some(_) => put(&["hooksConfig"], Some("enabled"), enabled)?,
            None => put(&[], Some("hooksConfig"), after.get("hooksConfig")?)?,
        }
    }
    (jsonc::parse(&text).ok().as_ref() == Some(after)).then_some(text)
}

pub fn read_opt(file: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(file) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", file.display())),
    }
}

/// Vendors `install` covers (those whose folder has an install spec).
pub fn supported() -> Vec<&'static str> {
    aep_adapters::vendors::SPECS.iter().filter(|s| s.install.is_some()).map(|s| s.id).collect()
}

impl Scope {
    /// From `--project DIR` (made absolute), else the home directory; `None` without HOME.
    pub fn from_args(project: Option<&Path>) -> Option<Self> {
        match project {
            Some(d) => Some(Scope::Project(std::path::absolute(d).unwrap_or_else(|_| d.to_path_buf()))),
            None => env_dir("HOME").map(Scope::User),
        }
    }

    /// How the install record names this scope: `user`, or `project:<dir>`.
    pub fn key(&self) -> String {
        match self {
            Scope::User(_) => "user".into(),
            Scope::Project(d) => format!("project:{}", d.display()),
        }
    }

    /// The `--project DIR` or `--user` flag that names this scope.
    pub fn flag(&self) -> String {
        match self {
            Scope::User(_) => "--user".into(),
            Scope::Project(d) => format!("--project {}", shell_word(&d.display().to_string())),
        }
    }
}

/// The data directory that holds the install record (`AEP_BRIDGE_DATA_DIR`, else `~/.aep`).
pub fn data_dir() -> PathBuf {
    aep_bridge::env::Env::process().data_dir()
}

/// The plan of `vendor` at `scope`, or the message (exit 2) saying why there is none.
pub fn plan_or_explain(vendor: &str, scope: &Scope, cmd: &str) -> Result<Plan, String> {
    if let Some(p) = plan(vendor, scope) {
        return Ok(p);
    }
    if let (Some(InstallSpec::YamlHooks(_)), Scope::Project(_)) =
        (aep_adapters::vendors::spec(vendor).and_then(|s| s.install), scope)
    {
        return Err(format!("aep-bridge {cmd}: {vendor} reads hooks from its home only; use --user"));
    }
    Err(format!(
        "aep-bridge {cmd}: no installer for {vendor:?}; supported: {} (see `aep-bridge adapters` for the others' setup)",
        supported().join(", ")
    ))
}

/// Runs the command; returns the exit code.
pub fn run(args: InstallArgs) -> i32 {
    let Some(scope) = Scope::from_args(args.project.as_deref()) else {
        eprintln!("aep-bridge install: HOME is not set; pass --project DIR");
        return 2;
    };
    let p = match plan_or_explain(&args.vendor, &scope, "install") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let shim = args.shim.clone().unwrap_or_else(default_shim);
    let command = hook_command(&shim, &args.vendor);
    match apply(&p, &command, args.dry_run) {
        Ok(a) => {
            let verb = match (&a.change, args.dry_run) {
                (Change::Unchanged, _) => "unchanged",
                (Change::Created, false) => "created",
                (Change::Updated, false) => "updated",
                (Change::Created, true) => "would create",
                (Change::Updated, true) => "would update",
            };
            println!("{}: {verb}", a.file.display());
            if !a.added.is_empty() {
                println!("  hooks -> `{command}`: {}", a.added.join(", "));
            }
            if a.rewritten {
                println!(
                    "  note: the file was rewritten whole; its comments and layout were not kept (see the backup)"
                );
            }
            if let Some(b) = &a.backup {
                println!("  backup: {}{}", b.display(), if args.dry_run { " (not written: dry run)" } else { "" });
            }
            if let Plan::Asset { note: Some(n), .. }
            | Plan::Yaml { install: YamlHooksInstall { note: Some(n), .. }, .. } = &p
            {
                println!("  next: {n}");
            }
            let mut created = a.created.clone();
            let mut used = vec![a.file.clone()];
            if let Plan::Asset { deps: Some((package, dirs)), .. } = &p {
                for dir in dirs {
                    match plugin_deps(dir, package, args.dry_run) {
                        Ok(DepsState::Written(c)) => {
                            println!(
                                "{}: {} (the agent's check takes {package} as installed: it fetches nothing at start; the plugin imports nothing)",
                                dir.join("package-lock.json").display(),
                                if args.dry_run { "would create" } else { "created" }
                            );
                            created.extend(c);
                            used.push(dir.join("package-lock.json"));
                        }
                        Ok(DepsState::Listed) => used.push(dir.join("package-lock.json")),
                        Ok(DepsState::Foreign) => println!(
                            "  note: {} has its own node_modules or lock without {package}: the agent installs it there at start (offline: ~70 s of retries)",
                            dir.display()
                        ),
                        Err(e) => {
                            eprintln!("aep-bridge install: {e}");
                            return 1;
                        }
                    }
                }
            }
            if !args.dry_run {
                let owner = format!("{} {}", args.vendor, scope.key());
                let data = data_dir();
                let recorded = crate::ledger::Ledger::load(&data).and_then(|mut l| {
                    l.claim(&owner, &created, &used);
                    l.save(&data)
                });
                if let Err(e) = recorded {
                    eprintln!(
                        "aep-bridge install: note: what was created is not recorded ({e}); `uninstall` will leave those folders"
                    );
                }
            }
            0
        }
        Err(e) => {
            eprintln!("aep-bridge install: {e}");
            1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_appends_once_and_keeps_foreign_entries() {
        let mut doc = json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "mine"}]}]}, "model": "x"});
        let codex = aep_adapters::vendors::spec("codex").unwrap();
        let Some(InstallSpec::Hooks(plan)) = codex.install else { panic!("codex installs hooks") };
        let first = HooksInstall { hooks: &plan.hooks[..1], ..plan };
        let added = merge_hooks(&mut doc, codex, &first, "/bin/aep-hook codex").unwrap();
        assert_eq!(added, vec!["PreToolUse"]);
        assert_eq!(doc["hooks"]["PreToolUse"].as_array().unwrap().len(), 2);
        assert_eq!(doc["hooks"]["PreToolUse"][0]["hooks"][0]["command"], "mine");
        assert!(merge_hooks(&mut doc, codex, &first, "/bin/aep-hook codex").unwrap().is_empty());
        assert!(merge_hooks(&mut json!({"hooks": {"PreToolUse": {}}}), codex, &first, "c").is_err());
        assert!(merge_hooks(&mut json!([]), codex, &first, "c").is_err());
    }

    /// A text the insertions cannot address (a lone comma the vendors' JSONC readers drop)
    /// is rewritten whole from the merged content, and says so.
    #[test]
    fn an_unaddressable_text_is_rewritten_whole() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("settings.json");
        std::fs::write(&file, "{\"ui\": {,}, // mine\n}").unwrap();
        let spec = aep_adapters::vendors::spec("qwen-code").unwrap();
        let Some(InstallSpec::Hooks(install)) = spec.install else { panic!("qwen-code installs hooks") };
        let a = apply(&Plan::Hooks { file: file.clone(), spec, install }, "aep-hook qwen-code", false).unwrap();
        assert!(a.rewritten);
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_eq!(doc["ui"], json!({}));
        assert_eq!(doc["hooks"]["Stop"][0]["hooks"][0]["command"], "aep-hook qwen-code");
    }

    #[test]
    fn shell_words_quote_only_when_needed() {
        assert_eq!(hook_command("/usr/bin/aep-hook", "codex"), "/usr/bin/aep-hook codex");
        assert_eq!(hook_command("/a b/aep-hook", "pi"), "'/a b/aep-hook' pi");
    }

    #[test]
    fn commands_split_back_into_the_shim_and_the_vendor() {
        for shim in ["/usr/bin/aep-hook", "/a b/aep-hook", "/it's/aep-hook", "aep-hook"] {
            let cmd = hook_command(shim, "codex");
            assert_eq!(split_command(&cmd), Some((shim.to_owned(), "codex")), "{cmd}");
            assert!(is_ours(&cmd, "codex", None), "{cmd}");
            assert!(!is_ours(&cmd, "pi", None), "{cmd}");
        }
        assert!(!is_ours("python3 guard.py", "codex", None));
        assert!(!is_ours("/opt/my-hook codex", "codex", None));
        assert!(is_ours("/opt/my-hook codex", "codex", Some("/opt/my-hook")));
        assert_eq!(split_command("'/a b'x codex"), None);
    }

    /// Cline: one executable script per event; a second run changes nothing; a same-named
    /// file of the user's stops the install before anything is written.
    #[test]
    fn cline_hook_scripts_are_written_once_and_never_over_a_users_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = plan("cline", &Scope::Project(dir.path().to_path_buf())).unwrap();
        let a = apply(&p, "/bin/aep-hook cline", false).unwrap();
        assert_eq!((a.change, a.added.len()), (Change::Created, 9));
        let hooks = dir.path().join(".cline/hooks");
        let script = std::fs::read_to_string(hooks.join("PreToolUse.sh")).unwrap();
        assert!(script.starts_with("#!/bin/sh\n") && script.ends_with("exec /bin/aep-hook cline\n"), "{script}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(hooks.join("TaskStart.sh")).unwrap().permissions().mode();
            assert_eq!(mode & 0o111, 0o111);
        }
        assert_eq!(apply(&p, "/bin/aep-hook cline", false).unwrap().change, Change::Unchanged);
        let other = tempfile::tempdir().unwrap();
        let theirs = other.path().join(".cline/hooks");
        std::fs::create_dir_all(&theirs).unwrap();
        std::fs::write(theirs.join("PostToolUse.sh"), "#!/bin/sh\necho mine\n").unwrap();
        let p = plan("cline", &Scope::Project(other.path().to_path_buf())).unwrap();
        assert!(apply(&p, "/bin/aep-hook cline", false).unwrap_err().contains("is not ours"));
        assert!(!theirs.join("PreToolUse.sh").exists());
        assert_eq!(std::fs::read_to_string(theirs.join("PostToolUse.sh")).unwrap(), "#!/bin/sh\necho mine\n");
    }

    /// Hermes: the block is appended after the user's config (kept byte for byte), once;
    /// a config with its own `hooks:` is not edited; there is no project install.
    #[test]
    fn hermes_hooks_block_is_appended_once_and_a_users_block_is_left_alone() {
        let home = tempfile::tempdir().unwrap();
        assert!(plan("hermes", &Scope::Project(home.path().to_path_buf())).is_none());
        let p = plan("hermes", &Scope::User(home.path().to_path_buf())).unwrap();
        let Plan::Yaml { file, .. } = &p else { panic!("hermes installs a YAML block") };
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, "model:\n  default: x # mine").unwrap();
        let a = apply(&p, "/bin/aep-hook hermes", false).unwrap();
        assert_eq!(a.added.len(), 12);
        let text = std::fs::read_to_string(file).unwrap();
        assert!(text.starts_with("model:\n  default: x # mine\nhooks:\n  on_session_start:\n"), "{text}");
        assert!(
            text.contains("  pre_tool_call:\n    - command: \"/bin/aep-hook hermes\"\n      timeout: 70\n"),
            "{text}"
        );
        assert!(
            text.contains("  post_tool_call:\n    - command: \"/bin/aep-hook hermes\"\n      timeout: 10\n"),
            "{text}"
        );
        assert_eq!(apply(&p, "/bin/aep-hook hermes", false).unwrap().change, Change::Unchanged);
        std::fs::write(file, "hooks:\n  pre_tool_call: []\n").unwrap();
        assert!(apply(&p, "/bin/aep-hook hermes", false).unwrap_err().contains("by hand"));
        assert_eq!(std::fs::read_to_string(file).unwrap(), "hooks:\n  pre_tool_call: []\n");
    }

    /// Codex clamps SessionEnd to 3 s and warns on every run when asked for more.
    #[test]
    fn codex_session_end_timeout_is_within_the_vendors_clamp() {
        let codex = aep_adapters::vendors::spec("codex").unwrap();
        let Some(InstallSpec::Hooks(plan)) = codex.install else { panic!("codex installs hooks") };
        let mut doc = json!({});
        merge_hooks(&mut doc, codex, &plan, "aep-hook codex").unwrap();
        assert_eq!(doc["hooks"]["SessionEnd"][0]["hooks"][0]["timeout"], 3);
        assert_eq!(doc["hooks"]["Stop"][0]["hooks"][0]["timeout"], 10);
    }
}
