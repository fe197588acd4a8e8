//! `aep-bridge tail` (in progress).

use clap::Args;

/// Arguments of `aep-bridge tail`.
#[derive(Debug, Clone, Args)]
pub struct TailArgs {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command; returns the exit code.
pub fn run(_args: TailArgs) -> i32 {
    eprintln!("aep-bridge tail: not built yet");
    2
}
