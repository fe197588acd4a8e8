//! `aep-bridge install` (in progress).

use clap::Args;

/// Arguments of `aep-bridge install`.
#[derive(Debug, Clone, Args)]
pub struct InstallArgs {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command; returns the exit code.
pub fn run(_args: InstallArgs) -> i32 {
    eprintln!("aep-bridge install: not built yet");
    2
}
