//! `aep-conformance --spec DIR [--json PATH|-] [--required FILE] [--only PREFIX]...`

use std::path::PathBuf;

use aep_conformance::cli::{RunOptions, run};

fn main() {
    let mut opts =
        RunOptions { spec: PathBuf::from("../shared/aep-spec"), json: None, required: None, only: Vec::new() };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next().unwrap_or_else(|| {
                eprintln!("aep-conformance: {name} needs a value");
                std::process::exit(64)
            })
        };
        match a.as_str() {
            "--spec" => opts.spec = PathBuf::from(val("--spec")),
            "--json" => opts.json = Some(val("--json")),
            "--required" => opts.required = Some(PathBuf::from(val("--required"))),
            "--only" => opts.only.push(val("--only")),
            "-h" | "--help" => {
                println!("usage: aep-conformance [--spec DIR] [--json PATH|-] [--required FILE] [--only PREFIX]...");
                return;
            }
            other => {
                eprintln!("aep-conformance: unknown argument {other:?} (see --help)");
                std::process::exit(64);
            }
        }
    }
    std::process::exit(run(&opts));
}
