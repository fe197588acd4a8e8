//! `aep-bridge uninstall <vendor>`: takes out what `install` put in and nothing else.
//!
//! A settings file that is still exactly what `install` made of its backup gets that
//! backup back, byte for byte; one `install` created gets deleted. A file edited since has
//! only our entries taken out, in place, so the user's own hooks and comments stay (a
//! backup is written first, as `install` does). Plugin files and hook scripts go when they
//! are ours; folders and plugin SDK stand-ins go when the install record says `install`
//! created them and no other install relies on them, so a folder the user had stays.
//! Running it again changes nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::Value;

use crate::install::{self, Plan, Scope, read_opt};
use crate::jsonc::{self, Seg};
use crate::ledger::Ledger;

/// Arguments of `aep-bridge uninstall`.
#[derive(Debug, Clone, Args)]
pub struct UninstallArgs {
    /// The vendor, as given to `install`.
    pub vendor: String,
    /// Uninstall from this project directory.
    #[arg(long, conflicts_with = "user")]
    pub project: Option<PathBuf>,
    /// Uninstall from the user-level settings (the default).
    #[arg(long)]
    pub user: bool,
    /// Show what would change; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also take out entries running this shim (`aep-hook` entries go wherever it lives).
    #[arg(long)]
    pub shim: Option<String>,
}

/// What uninstalling did (or would do) to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Undone {
    /// Nothing of ours there.
    Unchanged,
    /// Put back as it was before `install` (its backup).
    Restored,
    /// Removed: `install` created it, or it is our plugin or hook script.
    Deleted,
    /// Our entries taken out in place (the user edited it since `install`).
    Edited,
}

/// One file's outcome.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The file.
    pub file: PathBuf,
    /// What happened.
    pub undone: Undone,
    /// The backup written before an in-place edit.
    pub backup: Option<PathBuf>,
}

/// A path segment that owns its key.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

fn segs(path: &[Step]) -> Vec<Seg<'_>> {
    path.iter()
        .map(|s| match s {
            Step::Key(k) => Seg::Key(k),
            Step::Index(i) => Seg::Index(*i),
        })
        .collect()
}

/// Takes the value at `path` out of `doc`.
fn remove_value(doc: &mut Value, path: &[Step]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = doc;
    for s in parents {
        node = match (s, node) {
            (Step::Key(k), Value::Object(m)) => match m.get_mut(k) {
                Some(v) => v,
                None => return,
            },
            (Step::Index(i), Value::Array(a)) => match a.get_mut(*i) {
                Some(v) => v,
                None => return,
            },
            _ => return,
        };
    }
    match (last, node) {
        (Step::Key(k), Value::Object(m)) => {
            m.remove(k);
        }
        (Step::Index(i), Value::Array(a)) if *i < a.len() => {
            a.remove(*i);
        }
        _ => {}
    }
}

/// The commands of ours in a hooks document.
pub(crate) fn our_commands(doc: &Value, vendor: &str, shim: Option<&str>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(Value::Object(hooks)) = doc.get("hooks") else { return out };
    for groups in hooks.values().filter_map(Value::as_array) {
        for hs in groups.iter().filter_map(|g| g.get("hooks")?.as_array()) {
            for cmd in hs.iter().filter_map(|h| h.get("command")?.as_str()) {
                if install::is_ours(cmd, vendor, shim) {
                    out.insert(cmd.trim().to_owned());
                }
            }
        }
    }
    out
}

/// The settings text with our hook entries taken out in place: a group of ours goes
/// whole, an event left with none of the user's goes, and `hooks` with it when nothing
/// is left (then Gemini's `hooksConfig: {"enabled": true}` too, which only served them).
fn strip_hooks(text: &str, vendor: &str, shim: Option<&str>, hooks_config: bool) -> Result<String, String> {
    let doc = jsonc::parse(text).map_err(|e| e.to_string())?;
    let Some(Value::Object(hooks)) = doc.get("hooks") else { return Ok(text.to_owned()) };
    let ours = |h: &Value| h.get("command").and_then(Value::as_str).is_some_and(|c| install::is_ours(c, vendor, shim));
    let mut cuts: Vec<Vec<Step>> = Vec::new();
    let mut events_left = 0;
    let mut event_cuts = Vec::new();
    for (event, list) in hooks {
        let Value::Array(groups) = list else {
            events_left += 1;
            continue;
        };
        let whole = |g: &Value| {
            g.get("hooks").and_then(Value::as_array).is_some_and(|hs| !hs.is_empty() && hs.iter().all(ours))
        };
        if !groups.is_empty() && groups.iter().all(whole) {
            event_cuts.push(vec![Step::Key("hooks".into()), Step::Key(event.clone())]);
            continue;
        }
        events_left += 1;
        // Last first: a removal never shifts an index still to be removed.
        for (g, group) in groups.iter().enumerate().rev() {
            let at = |rest: Vec<Step>| {
                let mut p = vec![Step::Key("hooks".into()), Step::Key(event.clone()), Step::Index(g)];
                p.extend(rest);
                p
            };
            if whole(group) {
                cuts.push(at(Vec::new()));
            } else if let Some(hs) = group.get("hooks").and_then(Value::as_array) {
                for (j, _) in hs.iter().enumerate().rev().filter(|(_, h)| ours(h)) {
                    cuts.push(at(vec![Step::Key("hooks".into()), Step::Index(j)]));
                }
            }
        }
    }
    if events_left == 0 && !event_cuts.is_empty() {
        cuts = vec![vec![Step::Key("hooks".into())]];
        if hooks_config && doc.get("hooksConfig") == Some(&serde_json::json!({"enabled": true})) {
            cuts.push(vec![Step::Key("hooksConfig".into())]);
        }
    } else {
        cuts.extend(event_cuts);
    }
    let mut want = doc;
    let mut out = text.to_owned();
    for path in &cuts {
        remove_value(&mut want, path);
        out = jsonc::remove(&out, &segs(path)).ok_or("an entry could not be addressed in the text")?;
    }
    if jsonc::parse(&out).ok().as_ref() != Some(&want) {
        return Err("taking the entries out in place did not give the expected settings".into());
    }
    Ok(out)
}

/// The hook commands in a YAML block `install` wrote (`- command: "..."` lines).
pub(crate) fn yaml_commands(text: &str, vendor: &str, shim: Option<&str>) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.trim_start().strip_prefix("- command: "))
        .filter_map(|q| serde_json::from_str::<String>(q.trim()).ok())
        .filter(|c| install::is_ours(c, vendor, shim))
        .collect()
}

/// The file as it was before `install` when it is still exactly what `install` made of it:
/// `Some(Some(backup))`, `Some(None)` for a file `install` created; `None` otherwise.
fn before_install(plan: &Plan, file: &Path, current: &str, commands: &BTreeSet<String>) -> Option<Option<String>> {
    let command = commands.first().filter(|_| commands.len() == 1)?;
    let made = |old: Option<&str>| install::render(plan, command, old).ok().and_then(|r| r.text);
    if let Ok(Some(b)) = read_opt(&install::backup_path(file))
        && made(Some(&b)).as_deref() == Some(current)
    {
        return Some(Some(b));
    }
    (made(None).as_deref() == Some(current)).then_some(None)
}

/// Undoes one settings file (hooks or YAML); `strip` takes our entries out of a text.
fn undo_settings(
    plan: &Plan,
    file: &Path,
    commands: impl Fn(&str) -> BTreeSet<String>,
    strip: impl Fn(&str) -> Result<String, String>,
    dry_run: bool,
) -> Result<Outcome, String> {
    let done = |undone, backup| Ok(Outcome { file: file.to_path_buf(), undone, backup });
    let Some(current) = read_opt(file)? else { return done(Undone::Unchanged, None) };
    let found = commands(&current);
    if found.is_empty() {
        return done(Undone::Unchanged, None);
    }
    let backup = install::backup_path(file);
    match before_install(plan, file, &current, &found) {
        Some(None) => {
            if !dry_run {
                std::fs::remove_file(file).map_err(|e| format!("cannot remove {}: {e}", file.display()))?;
            }
            done(Undone::Deleted, None)
        }
        Some(Some(original)) => {
            // An older install's entries may still be in it (a backup taken at an upgrade).
            let text = if commands(&original).is_empty() { original } else { strip(&original)? };
            if !dry_run {
                install::write_atomic(file, &text)?;
                std::fs::remove_file(&backup).map_err(|e| format!("cannot remove {}: {e}", backup.display()))?;
            }
            done(Undone::Restored, None)
        }
        None => {
            let text = strip(&current).map_err(|e| {
                format!("{}: {e}; left as is: remove the entries running `{}` by hand", file.display(), join(&found))
            })?;
            if !dry_run {
                std::fs::copy(file, &backup)
                    .map_err(|e| format!("cannot write the backup {}: {e}", backup.display()))?;
                install::write_atomic(file, &text)?;
            }
            done(Undone::Edited, Some(backup))
        }
    }
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().map(String::as_str).collect::<Vec<_>>().join("`, `")
}

/// Whether a plugin file is one of ours (this version's or an earlier one: they all open
/// with the same marker line).
fn our_asset(text: &str, content: &str) -> bool {
    text == content || text.starts_with("// aep-bridge:")
}

/// Undoes a plan (writing nothing when `dry_run`).
pub fn unapply(plan: &Plan, vendor: &str, shim: Option<&str>, dry_run: bool) -> Result<Vec<Outcome>, String> {
    match plan {
        Plan::Hooks { file, install: spec, .. } => {
            let commands = |t: &str| jsonc::parse(t).map(|d| our_commands(&d, vendor, shim)).unwrap_or_default();
            let strip = |t: &str| strip_hooks(t, vendor, shim, spec.enable_hooks_config);
            if let Some(t) = read_opt(file)?
                && !t.trim().is_empty()
                && let Err(e) = jsonc::parse(&t)
            {
                return Err(format!("{}: not valid JSON or JSONC ({e}); left as is", file.display()));
            }
            Ok(vec![undo_settings(plan, file, commands, strip, dry_run)?])
        }
        Plan::Yaml { file, spec, install: yaml } => {
            let commands = |t: &str| yaml_commands(t, vendor, shim);
            let strip = |t: &str| {
                let found = yaml_commands(t, vendor, shim);
                let block = found.iter().map(|c| install::yaml_hooks(spec, yaml, c)).find(|b| t.contains(b.as_str()));
                match block {
                    Some(b) => Ok(t.replacen(&b, "", 1)),
                    None => Err("the `hooks:` block was edited since install".to_owned()),
                }
            };
            Ok(vec![undo_settings(plan, file, commands, strip, dry_run)?])
        }
        Plan::Asset { file, content, .. } => {
            let done = |undone| Ok(vec![Outcome { file: file.clone(), undone, backup: None }]);
            match read_opt(file)? {
                Some(t) if our_asset(&t, content) => {}
                _ => return done(Undone::Unchanged),
            }
            let backup = install::backup_path(file);
            // A backup of the user's own file is theirs again; one of an older plugin is ours.
            let theirs = read_opt(&backup)?;
            if !dry_run {
                match &theirs {
                    Some(t) if !our_asset(t, content) => install::write_atomic(file, t)?,
                    _ => std::fs::remove_file(file).map_err(|e| format!("cannot remove {}: {e}", file.display()))?,
                }
                if theirs.is_some() {
                    std::fs::remove_file(&backup).map_err(|e| format!("cannot remove {}: {e}", backup.display()))?;
                }
            }
            done(if theirs.as_deref().is_some_and(|t| !our_asset(t, content)) {
                Undone::Restored
            } else {
                Undone::Deleted
            })
        }
        Plan::Scripts { dir, events, suffix } => {
            let mut out = Vec::new();
            for event in *events {
                let file = dir.join(format!("{event}{suffix}"));
                let ours = read_opt(&file)?.is_some_and(|t| {
                    t.lines()
                        .rev()
                        .find_map(|l| l.strip_prefix("exec "))
                        .is_some_and(|c| install::is_ours(c, vendor, shim) && t == install::hook_script(c))
                });
                if ours {
                    if !dry_run {
                        std::fs::remove_file(&file).map_err(|e| format!("cannot remove {}: {e}", file.display()))?;
                    }
                    out.push(Outcome { file, undone: Undone::Deleted, backup: None });
                }
            }
            Ok(out)
        }
    }
}

/// Removes a path `install` created and nothing relies on now: a folder when it is empty,
/// a plugin SDK lock when it is still the one `install` wrote. `false` when it stays.
fn remove_created(path: &Path, dry_run: bool) -> bool {
    if path.is_dir() {
        let empty = std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none());
        return empty && (dry_run || std::fs::remove_dir(path).is_ok());
    }
    let ours = read_opt(path).ok().flatten().is_some_and(|t| {
        aep_adapters::vendors::SPECS.iter().any(|s| {
            matches!(s.install, Some(aep_adapters::spec::InstallSpec::Asset(a))
                if a.deps.is_some_and(|d| t == install::deps_lock(d.package)))
        })
    });
    ours && (dry_run || std::fs::remove_file(path).is_ok())
}

/// Runs the command; returns the exit code.
pub fn run(args: UninstallArgs) -> i32 {
    let Some(scope) = Scope::from_args(args.project.as_deref()) else {
        eprintln!("aep-bridge uninstall: HOME is not set; pass --project DIR");
        return 2;
    };
    let plan = match install::plan_or_explain(&args.vendor, &scope, "uninstall") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let outcomes = match unapply(&plan, &args.vendor, args.shim.as_deref(), args.dry_run) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("aep-bridge uninstall: {e}");
            return 1;
        }
    };
    let would = if args.dry_run { "would be " } else { "" };
    for o in &outcomes {
        let what = match o.undone {
            Undone::Unchanged => "unchanged (nothing of aep-bridge's in it)".to_owned(),
            Undone::Restored => format!("{would}restored as it was before install"),
            Undone::Deleted => format!("{would}removed"),
            Undone::Edited => format!("{would}updated: aep-bridge's entries taken out, yours kept"),
        };
        println!("{}: {what}", o.file.display());
        if let Some(b) = &o.backup {
            println!("  backup: {}{}", b.display(), if args.dry_run { " (not written: dry run)" } else { "" });
        }
    }
    let data = install::data_dir();
    let mut ledger = match Ledger::load(&data) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("aep-bridge uninstall: {e}; the folders install created are left");
            return 1;
        }
    };
    let owner = format!("{} {}", args.vendor, scope.key());
    let mut removed = 0;
    for path in ledger.release(&owner) {
        if path.exists() && remove_created(&path, args.dry_run) {
            println!("{}: {would}removed (install created it)", path.display());
            removed += 1;
        }
    }
    if !args.dry_run
        && let Err(e) = ledger.save(&data)
    {
        eprintln!("aep-bridge uninstall: {e}");
        return 1;
    }
    if removed == 0 && outcomes.iter().all(|o| o.undone == Undone::Unchanged) {
        println!("nothing of aep-bridge's to remove for {} ({})", args.vendor, scope.flag());
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Edited since install: ours go (whole groups, lone entries, emptied events), the
    /// user's entries, keys and comments stay.
    #[test]
    fn entries_are_taken_out_in_place() {
        let text = r#"{
  // mine
  "hooks": {
    "Stop": [
      {"hooks": [{"type": "command", "command": "echo mine"}]},
      {"hooks": [{"type": "command", "command": "/x/aep-hook codex", "timeout": 10}]}
    ],
    "PreToolUse": [
      {"matcher": "*", "hooks": [{"type": "command", "command": "'/a b/aep-hook' codex"}]}
    ],
    "PostToolUse": [
      {"hooks": [{"type": "command", "command": "echo two"}, {"type": "command", "command": "aep-hook codex"}]}
    ]
  },
  "model": "x" /* last */
}
"#;
        let out = strip_hooks(text, "codex", None, false).unwrap();
        assert_eq!(
            jsonc::parse(&out).unwrap(),
            serde_json::json!({"hooks": {
                "Stop": [{"hooks": [{"type": "command", "command": "echo mine"}]}],
                "PostToolUse": [{"hooks": [{"type": "command", "command": "echo two"}]}]
            }, "model": "x"})
        );
        assert!(out.contains("// mine") && out.contains("/* last */"), "{out}");
        assert_eq!(strip_hooks(&out, "codex", None, false).unwrap(), out);
    }

    /// Nothing of the user's in `hooks`: the key goes, and Gemini's enablement with it.
    #[test]
    fn a_hooks_object_of_ours_alone_goes_whole() {
        let text = "{\"ui\": 1, \"hooks\": {\"A\": [{\"hooks\": [{\"command\": \"aep-hook gemini-cli\"}]}]}, \"hooksConfig\": {\"enabled\": true}}";
        let out = strip_hooks(text, "gemini-cli", None, true).unwrap();
        assert_eq!(jsonc::parse(&out).unwrap(), serde_json::json!({"ui": 1}));
    }
}
