//! Where the real OTLP collector the benches and the integration tests compare with is
//! installed.

/// Path of `rotel-agent` (the real OTLP collector the benches and tests compare with):
/// `$ROTEL_AGENT`, then `PATH`, then the binary inside the `rotel` wheel (`pip install
/// rotel` does not put it on `PATH`).
pub fn rotel_agent() -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    if let Some(p) = std::env::var_os("ROTEL_AGENT") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    if let Some(p) = std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).map(|d| d.join("rotel-agent")).find(|p| p.is_file()))
    {
        return Some(p);
    }
    let out = std::process::Command::new("python3")
        .args(["-c", "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && p.is_file()).then_some(p)
}

/// What `rotel-agent start` prints once its OTLP listeners are bound (it binds them before
/// it starts the agent, which logs this first): the line to wait for before sending to it.
pub const ROTEL_STARTED: &str = "Starting Rotel.";
