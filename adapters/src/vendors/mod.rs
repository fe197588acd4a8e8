//! One folder per vendor: its README (mapping table, deviations, honest gaps) is the module
//! doc, `mod.rs` the hook mapping, `spec.rs` everything the bridge does around it (the
//! manifest, held moments and reply shapes, the install plan; see [`crate::spec`]), and,
//! for vendors that export OTLP logs, `otel/` the OTel profile. Adding a vendor touches
//! its folder and the [`SPECS`] list.

use crate::HookAdapter;
use crate::spec::VendorSpec;

pub mod antigravity;
pub mod claude_code;
pub mod cline;
pub mod codex;
pub mod gemini_cli;
pub mod hermes;
pub(crate) mod hook_family;
pub mod kilocode;
pub mod kimi_code;
pub mod opencode;
pub mod pi;
pub(crate) mod plugin_common;
pub mod qwen_code;
pub mod vscode;

/// Every built-in vendor, sorted by id.
pub static SPECS: &[&VendorSpec] = &[
    &antigravity::spec::SPEC,
    &claude_code::spec::SPEC,
    &cline::spec::SPEC,
    &codex::spec::SPEC,
    &gemini_cli::spec::SPEC,
    &hermes::spec::SPEC,
    &kilocode::spec::SPEC,
    &kimi_code::spec::SPEC,
    &opencode::spec::SPEC,
    &pi::spec::SPEC,
    &qwen_code::spec::SPEC,
    &vscode::spec::SPEC,
];

/// The built-in vendor `id`, if any.
pub fn spec(id: &str) -> Option<&'static VendorSpec> {
    SPECS.iter().copied().find(|s| s.id == id)
}

/// Every built-in hook adapter.
pub fn all() -> Vec<Box<dyn HookAdapter>> {
    SPECS.iter().map(|s| (s.adapter)()).collect()
}

/// The built-in adapter for `vendor`, if any.
pub fn by_vendor(vendor: &str) -> Option<Box<dyn HookAdapter>> {
    spec(vendor).map(|s| (s.adapter)())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::InstallSpec;

    /// The listing, the held set and the install plan agree for every vendor: the adapter
    /// is the vendor the spec names, every moment that may be held is wired by the install
    /// (with the long timeout), and every other wired moment gets the short one.
    #[test]
    fn listing_held_set_and_install_plan_agree() {
        let mut ids: Vec<&str> = SPECS.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), SPECS.len(), "duplicate vendor ids");
        for s in SPECS {
            assert_eq!((s.adapter)().vendor(), s.id, "{}: adapter identity", s.id);
            let c = &s.control;
            assert_eq!(
                c.reply.is_some(),
                !c.held.is_empty() || c.gate.is_some(),
                "{}: a reply shape iff something is held",
                s.id
            );
            let described = c.describe();
            for h in c.held {
                assert!(described.contains(h), "{}: listing omits held {h}", s.id);
            }
            if c.held.is_empty() && c.gate.is_none() {
                assert_eq!(described, "observe-only");
            }
            if let Some(InstallSpec::Hooks(plan)) = &s.install {
                for h in c.held.iter().chain(c.gate.as_ref().map(|g| &g.moment)) {
                    assert!(plan.hooks.iter().any(|e| e.event == *h), "{}: held {h} is not wired by install", s.id);
                }
                for e in plan.hooks {
                    let t = e.timeout(s, crate::spec::TimeUnit::Seconds);
                    let want = if c.may_hold(e.event) {
                        crate::spec::HELD_HOOK_TIMEOUT_SECS
                    } else {
                        crate::spec::HOOK_TIMEOUT_SECS
                    }
                    .min(e.max_secs.unwrap_or(u64::MAX));
                    assert_eq!(t, want, "{}: {}", s.id, e.event);
                }
            }
            if s.setup.starts_with("aep-bridge install") {
                assert!(s.install.is_some(), "{}: the listing says install covers it", s.id);
            }
            if s.install.is_some() {
                assert!(s.setup.contains("aep-bridge install"), "{}: the listing hides the installer", s.id);
            }
        }
    }
}
