//! The `aep-bridge` binary.

fn main() {
    std::process::exit(aep_bridge::cli::main());
}
