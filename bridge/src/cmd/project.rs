//! `aep-bridge project` (in progress).

use clap::Args;

/// Arguments of `aep-bridge project`.
#[derive(Debug, Clone, Args)]
pub struct ProjectArgs {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command; returns the exit code.
pub fn run(_args: ProjectArgs) -> i32 {
    eprintln!("aep-bridge project: not built yet");
    2
}
