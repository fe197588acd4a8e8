//! `aep-bridge respond` (in progress).

use clap::Args;

/// Arguments of `aep-bridge respond`.
#[derive(Debug, Clone, Args)]
pub struct RespondArgs {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command; returns the exit code.
pub fn run(_args: RespondArgs) -> i32 {
    eprintln!("aep-bridge respond: not built yet");
    2
}
