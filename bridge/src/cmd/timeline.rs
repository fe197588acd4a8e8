//! `aep-bridge timeline` (in progress).

use clap::Args;

/// Arguments of `aep-bridge timeline`.
#[derive(Debug, Clone, Args)]
pub struct TimelineArgs {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command; returns the exit code.
pub fn run(_args: TimelineArgs) -> i32 {
    eprintln!("aep-bridge timeline: not built yet");
    2
}
