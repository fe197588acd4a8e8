//! `aep-bridge bench` (in progress).

use clap::Args;

/// Arguments of `aep-bridge bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// Remaining arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub rest: Vec<String>,
}

/// Runs the command; returns the exit code.
pub fn run(_args: BenchArgs) -> i32 {
    eprintln!("aep-bridge bench: not built yet");
    2
}
