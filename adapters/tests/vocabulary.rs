//! Every recorded hook payload, of every version kept as test data, is inside its adapter's
//! vocabulary: the runtime drift counter stays at zero on what the project has seen, and a new
//! release's fields come into the vocabulary with their recording.

mod common;

use common::load;

#[test]
fn every_recorded_payload_is_in_its_adapters_vocabulary() {
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut checked = 0;
    let mut drift = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(&data).unwrap().flatten().map(|e| e.path()).collect();
    dirs.sort();
    for dir in dirs {
        let vendor = dir.file_name().unwrap().to_string_lossy().into_owned();
        let Some(adapter) = aep_adapters::vendors::by_vendor(&vendor) else { continue };
        let Some(vocab) = adapter.vocabulary() else { continue };
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
        files.sort();
        for f in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "jsonl")) {
            for (hook, payload) in load(&std::fs::read_to_string(&f).unwrap()) {
                checked += 1;
                for d in aep_adapters::drift::check(vocab, &hook, &payload) {
                    drift.push(format!("{}: {} {}", f.file_name().unwrap().to_string_lossy(), d.kind.as_str(), d.name));
                }
            }
        }
    }
    drift.sort();
    drift.dedup();
    assert!(checked > 100, "only {checked} recorded payloads found");
    assert!(drift.is_empty(), "recorded payloads outside their vocabulary:\n{}", drift.join("\n"));
}
