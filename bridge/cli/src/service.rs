//! `aep-bridge service install|uninstall|status`: runs `serve` under the user's service
//! manager, a systemd user unit on Linux and a launchd agent on macOS.
//!
//! The unit runs this binary by its absolute path (a PATH change never swaps the bridge)
//! and reads the token from a file (`--token-file`): argv is visible to every user in `ps`.
//! The unit records, in comments, the files and folders `install` wrote besides it, so
//! `uninstall` removes exactly those. The manager is started or stopped only for a unit it
//! loaded from this very file, so a unit elsewhere is never touched.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, Subcommand};

/// `aep-bridge service ...`
#[derive(Debug, Clone, Args)]
pub struct ServiceArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ServiceAction,
}

/// The service actions.
#[derive(Debug, Clone, Subcommand)]
pub enum ServiceAction {
    /// Write the unit (systemd user unit; launchd agent on macOS), then enable and start it.
    Install(InstallArgs),
    /// Stop the service and remove what `service install` wrote.
    Uninstall {
        /// Show what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Whether the unit is there and the service runs (exit 0 when it does).
    Status,
}

/// Arguments of `aep-bridge service install`.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// The configuration file `serve` runs with.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The file `serve` reads its token from (default `~/.config/aep-bridge/token`, written
    /// from `AEP_TOKEN` when that is set and the file is not there).
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Write the unit only; enable and start nothing.
    #[arg(long)]
    pub no_start: bool,
    /// Show the unit; write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// A service manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Manager {
    Systemd,
    /// Built and unit-tested everywhere; chosen on macOS only.
    Launchd,
}

/// The systemd unit name.
const UNIT: &str = "aep-bridge.service";
/// The launchd label.
const LABEL: &str = "dev.aep.bridge";
/// The comment keys that record what `install` wrote besides the unit.
const WROTE: &str = "aep-bridge-wrote: ";
const CREATED: &str = "aep-bridge-created: ";

/// What the unit runs.
#[derive(Debug, Clone)]
struct Spec {
    /// `aep-bridge serve ...`, absolute binary first.
    argv: Vec<String>,
    /// Files written besides the unit (the token file).
    wrote: Vec<PathBuf>,
    /// Folders created, outermost first.
    created: Vec<PathBuf>,
    /// Where launchd sends the bridge's log.
    log: PathBuf,
}

impl Manager {
    fn native() -> Self {
        if cfg!(target_os = "macos") { Manager::Launchd } else { Manager::Systemd }
    }

    fn file(self, home: &Path, config_home: &Path) -> PathBuf {
        match self {
            Manager::Systemd => config_home.join("systemd/user").join(UNIT),
            Manager::Launchd => home.join("Library/LaunchAgents").join(format!("{LABEL}.plist")),
        }
    }

    fn render(self, spec: &Spec) -> String {
        match self {
            Manager::Systemd => systemd_unit(spec),
            Manager::Launchd => launchd_plist(spec),
        }
    }

    /// The manager's commands to start, stop and ask about the unit at `file`.
    fn start(self, file: &Path) -> Vec<Vec<String>> {
        match self {
            Manager::Systemd => vec![
                argv(&["systemctl", "--user", "daemon-reload"]),
                argv(&["systemctl", "--user", "enable", "--now", UNIT]),
            ],
            Manager::Launchd => vec![argv(&["launchctl", "load", "-w", &file.display().to_string()])],
        }
    }

    fn stop(self, file: &Path) -> Vec<Vec<String>> {
        match self {
            Manager::Systemd => vec![argv(&["systemctl", "--user", "disable", "--now", UNIT])],
            Manager::Launchd => vec![argv(&["launchctl", "unload", "-w", &file.display().to_string()])],
        }
    }

    /// Whether the manager has loaded the unit from `file` (not a same-named one elsewhere).
    fn loaded_from(self, file: &Path) -> bool {
        match self {
            Manager::Systemd => output(&["systemctl", "--user", "show", "-p", "FragmentPath", "--value", UNIT])
                .is_ok_and(|o| Path::new(o.trim()) == file),
            Manager::Launchd => {
                // `launchctl list <label>` prints the job's ProgramArguments, not its file:
                // the plist is ours when it is the one at `file` and the label is loaded.
                file.is_file() && output(&["launchctl", "list", LABEL]).is_ok()
            }
        }
    }

    /// Whether the user's service manager answers here: `Err` says why not (no systemd, no
    /// user session bus: a container, a CI runner, an SSH session without lingering).
    fn reachable(self) -> Result<(), String> {
        match self {
            Manager::Systemd => output(&["systemctl", "--user", "show-environment"]).map(drop),
            Manager::Launchd => Ok(()),
        }
    }

    /// What to do when the unit is written but the manager could not start it.
    fn next_steps(self, file: &Path, why: Result<(), String>) -> String {
        let by_hand = "run the bridge without a service manager: `aep-bridge serve` in a terminal (tmux, \
                       screen), or `nohup aep-bridge serve >> ~/.aep/serve.log 2>&1 &`";
        let start = self.start(file).iter().map(|c| c.join(" ")).collect::<Vec<_>>().join(" && ");
        match (self, why) {
            (Manager::Systemd, Err(why)) => format!(
                "{} is written, but no user service manager answers here ({why})\n  next: {by_hand}\n  \
                 or, on a machine with systemd, from a login session (or after `loginctl enable-linger $USER`): \
                 {start}\n  or remove the unit: aep-bridge service uninstall",
                file.display()
            ),
            (Manager::Systemd, Ok(())) => format!(
                "{} is written but did not start\n  next: `journalctl --user -u {UNIT} -n 50` and \
                 `aep-bridge service status` say why; fix it, then {start}",
                file.display()
            ),
            (Manager::Launchd, _) => format!(
                "{} is written but did not load\n  next: `launchctl list {LABEL}` and the log at \
                 ~/Library/Logs/aep-bridge.log say why; fix it, then {start}; or {by_hand}",
                file.display()
            ),
        }
    }

    /// `active`/`inactive`/... from the manager, or why it could not say.
    fn state(self) -> Result<String, String> {
        match self {
            Manager::Systemd => match Command::new("systemctl").args(["--user", "is-active", UNIT]).output() {
                Ok(o) => {
                    let state = String::from_utf8_lossy(&o.stdout).trim().to_owned();
                    let err = String::from_utf8_lossy(&o.stderr).trim().to_owned();
                    if state.is_empty() { Err(err) } else { Ok(state) }
                }
                Err(e) => Err(format!("systemctl: {e}")),
            },
            Manager::Launchd => output(&["launchctl", "list", LABEL])
                .map(|o| if o.contains("\"PID\"") { "active".to_owned() } else { "loaded, not running".to_owned() })
                .map_err(|e| if e.contains("Could not find") { "inactive".into() } else { e }),
        }
    }
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_owned()).collect()
}

/// A command's stdout when it exits 0, else its stderr (or why it did not run).
fn output(a: &[&str]) -> Result<String, String> {
    let o = Command::new(a[0]).args(&a[1..]).output().map_err(|e| format!("{}: {e}", a[0]))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).trim().to_owned())
    }
}

/// One word of a systemd command line: quoted when it must be, `%` and `$` escaped (the
/// unit file would read them as specifiers and variables).
fn systemd_word(s: &str) -> String {
    let s = s.replace('%', "%%").replace('$', "$$");
    if !s.is_empty() && !s.bytes().any(|b| b.is_ascii_whitespace() || matches!(b, b'"' | b'\'' | b'\\' | b';')) {
        s
    } else {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

fn records(spec: &Spec, prefix: &str, suffix: &str) -> String {
    let mut out = String::new();
    for (key, paths) in [(WROTE, &spec.wrote), (CREATED, &spec.created)] {
        for p in paths.iter() {
            out.push_str(&format!("{prefix}{key}{}{suffix}\n", p.display()));
        }
    }
    out
}

fn systemd_unit(spec: &Spec) -> String {
    let exec: Vec<String> = spec.argv.iter().map(|a| systemd_word(a)).collect();
    format!(
        "# Written by `aep-bridge service install`; `aep-bridge service uninstall` removes it\n\
         # and what these lines name.\n{}\
         [Unit]\n\
         Description=aep-bridge: coding agents' hooks and telemetry as AEP events\n\
         \n\
         [Service]\n\
         # serve says READY=1 once it listens, and pets the watchdog while its loops turn\n\
         # (what /livez reports): a bridge that stops turning is restarted; a full disk or\n\
         # a refused export signal is not cured by a restart and does not trigger one.\n\
         Type=notify\n\
         NotifyAccess=main\n\
         WatchdogSec=30\n\
         ExecStart={}\n\
         Restart=on-failure\n\
         RestartSec=2\n\
         \n\
         [Install]\n\
         WantedBy=default.target\n",
        records(spec, "# ", ""),
        exec.join(" ")
    )
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn launchd_plist(spec: &Spec) -> String {
    let args: String = spec.argv.iter().map(|a| format!("    <string>{}</string>\n", xml(a))).collect();
    let log = xml(&spec.log.display().to_string());
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <!DOCTYPE plist PUBLIC \"-//Apple//DTD PLIST 1.0//EN\" \"http://www.apple.com/DTDs/PropertyList-1.0.dtd\">\n\
         <!-- Written by `aep-bridge service install`; `aep-bridge service uninstall` removes it and what these lines name. -->\n{}\
         <plist version=\"1.0\">\n<dict>\n\
         \x20 <key>Label</key>\n  <string>{LABEL}</string>\n\
         \x20 <key>ProgramArguments</key>\n  <array>\n{args}  </array>\n\
         \x20 <key>RunAtLoad</key>\n  <true/>\n\
         \x20 <key>KeepAlive</key>\n  <dict>\n    <key>SuccessfulExit</key>\n    <false/>\n  </dict>\n\
         \x20 <key>StandardErrorPath</key>\n  <string>{log}</string>\n\
         </dict>\n</plist>\n",
        records(spec, "<!-- ", " -->")
    )
}

/// The paths a unit's record comments name: (written files, created folders).
fn recorded(text: &str) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut wrote = Vec::new();
    let mut created = Vec::new();
    for line in text.lines() {
        let line = line.trim().trim_start_matches("# ").trim_start_matches("<!-- ").trim_end_matches(" -->");
        if let Some(p) = line.strip_prefix(WROTE) {
            wrote.push(PathBuf::from(p));
        } else if let Some(p) = line.strip_prefix(CREATED) {
            created.push(PathBuf::from(p));
        }
    }
    (wrote, created)
}

struct Paths {
    home: PathBuf,
    config_home: PathBuf,
}

fn paths() -> Option<Paths> {
    let env = aep_bridge::env::Env::process();
    let home = env.home()?;
    let config_home = env.var("XDG_CONFIG_HOME").map(PathBuf::from).unwrap_or_else(|| home.join(".config"));
    Some(Paths { home, config_home })
}

/// Runs the command; returns the exit code.
pub fn run(args: ServiceArgs) -> i32 {
    let Some(p) = paths() else {
        eprintln!("aep-bridge service: HOME is not set");
        return 2;
    };
    let m = Manager::native();
    let file = m.file(&p.home, &p.config_home);
    match args.action {
        ServiceAction::Install(a) => install(m, &p, &file, &a),
        ServiceAction::Uninstall { dry_run } => uninstall(m, &file, dry_run),
        ServiceAction::Status => status(m, &file),
    }
}

/// Runs each command; the first failure, as a message.
fn run_all(cmds: &[Vec<String>]) -> Result<(), String> {
    for c in cmds {
        let a: Vec<&str> = c.iter().map(String::as_str).collect();
        output(&a).map_err(|e| format!("`{}`: {e}", c.join(" ")))?;
    }
    Ok(())
}

fn install(m: Manager, p: &Paths, file: &Path, a: &InstallArgs) -> i32 {
    let fail = |e: String| {
        eprintln!("aep-bridge service install: {e}");
        1
    };
    let exe = match std::env::current_exe().and_then(|e| e.canonicalize()) {
        Ok(e) => e,
        Err(e) => return fail(format!("cannot tell where this binary is: {e}")),
    };
    let mut argv = vec![exe.display().to_string(), "serve".to_owned()];
    if let Some(c) = &a.config {
        match c.canonicalize() {
            Ok(c) => argv.extend(["--config".to_owned(), c.display().to_string()]),
            Err(e) => return fail(format!("{}: {e}", c.display())),
        }
    }
    let mut created: Vec<PathBuf> = file.parent().map(crate::install::missing_dirs).unwrap_or_default();
    let mut wrote = Vec::new();
    let token = aep_bridge::env::Env::process().var(aep_bridge::env::AEP_TOKEN);
    let token_file = match (&a.token_file, &token) {
        (Some(f), _) => match f.canonicalize() {
            Ok(f) => Some(f),
            Err(e) => return fail(format!("the token file {}: {e}", f.display())),
        },
        (None, Some(t)) => {
            let f = p.config_home.join("aep-bridge/token");
            match crate::install::read_opt(&f) {
                Ok(Some(have)) if have.lines().next().unwrap_or("").trim() != t.trim() => {
                    return fail(format!(
                        "{} holds another token than AEP_TOKEN: pass it as --token-file, or remove it",
                        f.display()
                    ));
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    for d in f.parent().map(crate::install::missing_dirs).unwrap_or_default() {
                        if !created.contains(&d) {
                            created.push(d);
                        }
                    }
                    wrote.push(f.clone());
                }
                Err(e) => return fail(e),
            }
            Some(f)
        }
        (None, None) => None,
    };
    if let Some(f) = &token_file {
        argv.extend(["--token-file".to_owned(), f.display().to_string()]);
    }
    // Installed before: what that install wrote is still to be removed by `uninstall`.
    let old = crate::install::read_opt(file).ok().flatten();
    let (was_wrote, was_created) = old.as_deref().map(recorded).unwrap_or_default();
    let mut recorded_wrote = was_wrote;
    recorded_wrote.extend(wrote.iter().cloned());
    created.extend(was_created);
    created.sort();
    created.dedup();
    let spec = Spec { argv, wrote: recorded_wrote, created, log: p.home.join("Library/Logs/aep-bridge.log") };
    let text = m.render(&spec);
    if a.dry_run {
        println!("{}: would write:\n{text}", file.display());
        return 0;
    }
    if let Some(old) = old {
        if old != text {
            return fail(format!(
                "{} exists: `aep-bridge service uninstall` first (it removes what the last install wrote)",
                file.display()
            ));
        }
        println!("{}: unchanged", file.display());
    } else {
        for d in &spec.created {
            if let Err(e) = std::fs::create_dir_all(d) {
                return fail(format!("cannot create {}: {e}", d.display()));
            }
        }
        if let (Some(f), Some(t)) = (wrote.first(), &token)
            && let Err(e) = write_secret(f, t)
        {
            return fail(e);
        }
        if let Err(e) = crate::install::write_atomic(file, &text) {
            return fail(e);
        }
        println!("{}: created", file.display());
        for f in &wrote {
            println!("{}: created (the token, from AEP_TOKEN; mode 0600)", f.display());
        }
    }
    if token_file.is_none() {
        println!("  note: no token (watch-only): set AEP_TOKEN or pass --token-file, then install again");
    }
    if a.no_start {
        println!("  next: {}", m.start(file).iter().map(|c| c.join(" ")).collect::<Vec<_>>().join(" && "));
        return 0;
    }
    match run_all(&m.start(file)) {
        Ok(()) => {
            println!("started: {}", if m == Manager::Systemd { UNIT } else { LABEL });
            0
        }
        Err(e) => fail(format!("{e}\n{}", m.next_steps(file, m.reachable()))),
    }
}

/// Writes `token` to `file`, readable by the user alone.
fn write_secret(file: &Path, token: &str) -> Result<(), String> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let mut f = o.open(file).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    f.write_all(format!("{}\n", token.trim()).as_bytes()).map_err(|e| format!("cannot write {}: {e}", file.display()))
}

fn uninstall(m: Manager, file: &Path, dry_run: bool) -> i32 {
    let text = match crate::install::read_opt(file) {
        Ok(Some(t)) => t,
        Ok(None) => {
            println!("nothing to remove: {} is not there", file.display());
            return 0;
        }
        Err(e) => {
            eprintln!("aep-bridge service uninstall: {e}");
            return 1;
        }
    };
    let (wrote, mut created) = recorded(&text);
    let would = if dry_run { "would be " } else { "" };
    if m.loaded_from(file) {
        if dry_run {
            println!("{}: {would}stopped and disabled", if m == Manager::Systemd { UNIT } else { LABEL });
        } else if let Err(e) = run_all(&m.stop(file)) {
            eprintln!("aep-bridge service uninstall: cannot stop the service ({e}); left in place");
            return 1;
        }
    }
    let mut gone = vec![file.to_path_buf()];
    gone.extend(wrote.into_iter().filter(|f| f.is_file()));
    for f in &gone {
        if !dry_run && let Err(e) = std::fs::remove_file(f) {
            eprintln!("aep-bridge service uninstall: cannot remove {}: {e}", f.display());
            return 1;
        }
        println!("{}: {would}removed", f.display());
    }
    // Deepest first; a folder something else was put in since stays.
    created.sort();
    for d in created.iter().rev() {
        let empty = std::fs::read_dir(d).is_ok_and(|mut r| r.next().is_none() || (dry_run && is_only(d, &gone)));
        if empty && (dry_run || std::fs::remove_dir(d).is_ok()) {
            println!("{}: {would}removed (install created it)", d.display());
            gone.push(d.clone());
        }
    }
    if m == Manager::Systemd && !dry_run && Command::new("systemctl").arg("--version").output().is_ok() {
        // The manager forgets the unit now; without a user session this fails and is moot.
        let _ = output(&["systemctl", "--user", "daemon-reload"]);
    }
    0
}

/// Whether everything in `dir` is among `gone` (a dry run's view of a folder emptied).
fn is_only(dir: &Path, gone: &[PathBuf]) -> bool {
    std::fs::read_dir(dir).is_ok_and(|r| r.flatten().all(|e| gone.contains(&e.path())))
}

fn status(m: Manager, file: &Path) -> i32 {
    let Ok(Some(text)) = crate::install::read_opt(file) else {
        println!("{}: not there (`aep-bridge service install` writes it)", file.display());
        return 3;
    };
    let exec = text
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .map(str::to_owned)
        .unwrap_or_else(|| "(see the file)".into());
    println!("{}: installed, runs {exec}", file.display());
    match m.state() {
        Ok(s) => {
            println!("{}: {s}", if m == Manager::Systemd { UNIT } else { LABEL });
            if s == "active" { 0 } else { 3 }
        }
        Err(e) => {
            println!("the service manager cannot say: {e}");
            3
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> Spec {
        Spec {
            argv: argv(&["/opt/a b/aep-bridge", "serve", "--token-file", "/h/.config/aep-bridge/100%"]),
            wrote: vec![PathBuf::from("/h/.config/aep-bridge/100%")],
            created: vec![PathBuf::from("/h/.config/aep-bridge")],
            log: PathBuf::from("/h/Library/Logs/aep-bridge.log"),
        }
    }

    #[test]
    fn the_unit_quotes_escapes_and_records_what_it_wrote() {
        let unit = systemd_unit(&spec());
        assert!(
            unit.contains("\nExecStart=\"/opt/a b/aep-bridge\" serve --token-file /h/.config/aep-bridge/100%%\n"),
            "{unit}"
        );
        assert!(unit.contains("\nRestart=on-failure\n"), "{unit}");
        assert_eq!(
            recorded(&unit),
            (vec![PathBuf::from("/h/.config/aep-bridge/100%")], vec![PathBuf::from("/h/.config/aep-bridge")])
        );
    }

    #[test]
    fn the_plist_runs_the_same_argv_and_records_the_same_paths() {
        let plist = launchd_plist(&spec());
        assert!(plist.contains("<string>/opt/a b/aep-bridge</string>\n    <string>serve</string>"), "{plist}");
        assert!(plist.contains("<key>SuccessfulExit</key>\n    <false/>"), "{plist}");
        assert_eq!(recorded(&plist), recorded(&systemd_unit(&spec())));
    }
}
