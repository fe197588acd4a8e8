//! What `aep-bridge adapters` says a vendor emits (`VendorSpec::families`) is tested against
//! what its mapping emits on the payloads recorded from the real agent (`tests/data/`): a
//! family the mapping produces must be listed. Listing more is allowed (the recordings do
//! not cover every hook).

mod common;

use std::collections::BTreeSet;

use aep_adapters::MapContext;
use aep_schemas::Capture;

#[test]
fn every_family_a_recorded_session_emits_is_listed() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let cx = MapContext { capture: Capture::Full, ..MapContext::default() };
    let mut missing = Vec::new();
    let mut checked = 0;
    for dir in std::fs::read_dir(data).unwrap() {
        let dir = dir.unwrap().path();
        let vendor = dir.file_name().unwrap().to_string_lossy().into_owned();
        let spec = aep_adapters::vendors::spec(&vendor).unwrap_or_else(|| panic!("no vendor {vendor}"));
        let mut emitted = BTreeSet::new();
        for file in std::fs::read_dir(&dir).unwrap() {
            let file = file.unwrap().path();
            if file.extension().is_some_and(|e| e == "jsonl") {
                let text = std::fs::read_to_string(&file).unwrap();
                let adapter = (spec.adapter.unwrap_or_else(|| panic!("{vendor} has no hooks")))();
                // Recordings of `{hook, payload}` (the hook name from the URL), or of bare
                // payloads that name their own hook.
                let drafts = if text.starts_with("{\"hook\"") {
                    common::replay(&*adapter, &common::load(&text), &cx)
                } else {
                    common::drive(&*adapter, &text, &cx)
                };
                for d in drafts {
                    if !d.r#type.starts_with("x.") {
                        emitted.insert(d.r#type.split('.').next().unwrap_or_default().to_owned());
                    }
                }
            }
        }
        for family in emitted {
            checked += 1;
            if !spec.families.contains(&family.as_str()) {
                missing.push(format!("{vendor}: emits {family}.* but lists {:?}", spec.families));
            }
        }
    }
    assert!(checked > 10, "the recordings were read");
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}
