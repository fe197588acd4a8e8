//! `aep-bridge adapters` (in progress).

use clap::Args;

/// Arguments of `aep-bridge adapters`.
#[derive(Debug, Clone, Args)]
pub struct AdaptersArgs {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command; returns the exit code.
pub fn run(_args: AdaptersArgs) -> i32 {
    eprintln!("aep-bridge adapters: not built yet");
    2
}
