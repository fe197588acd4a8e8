//! The `aep-bridge` binary.

// The daemon allocates per event on every hot path (decode, map, stamp, serialize);
// callgrind put ~37% of the OTLP path's instructions in glibc malloc/free. Built without
// transparent huge pages (the workspace's `no_thp` feature): with them, the OTLP load test
// held ~90 MiB at peak and 17 MiB idle; without, ~55 MiB and 11 MiB, at the same CPU cost.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(aep_bridge::cli::main());
}
