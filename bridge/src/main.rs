//! The `aep-bridge` binary.

// The daemon allocates per event on every hot path (decode, map, stamp, serialize);
// callgrind put ~37% of the OTLP path's instructions in glibc malloc/free.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(aep_bridge::cli::main());
}
