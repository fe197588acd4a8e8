//! One folder per vendor: its README (mapping table, deviations, honest gaps) is the module
//! doc, `mod.rs` the hook mapping, `spec.rs` everything the bridge does around it (the
//! manifest, held moments and reply shapes, the vendor's own server with its observer and
//! reply route, the install plan; see [`crate::spec`]), `observer.rs` the observer of the
//! vendor's own server when the bridge attaches to one (see [`crate::observer`]), and, for
//! vendors that export OTLP logs, `otel/` the OTel profile (with its detection and
//! model-call fields). Adding a vendor touches its folder and the [`SPECS`] list: the hook
//! adapters, the observers, the OTel profiles and their detection order, and the
//! model-call lookup are all derived from that list here.

use std::sync::LazyLock;

use serde_json::{Map, Value};

use crate::HookAdapter;
use crate::otel::content::ContentTable;
use crate::otel::usage::{ModelCall, ModelCallFields, model_call_in};
use crate::otel::{OtelProfile, OtelRecord, ProfileSelector};
use crate::spec::VendorSpec;

pub mod antigravity;
pub mod claude_code;
pub mod cline;
pub mod codex;
pub mod copilot_cli;
pub mod droid;
pub mod gemini_cli;
pub mod hermes;
pub(crate) mod hook_family;
pub mod kilocode;
pub mod kimi_code;
pub mod opencode;
pub mod openhands;
pub mod otel_route;
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
    &copilot_cli::spec::SPEC,
    &droid::spec::SPEC,
    &gemini_cli::spec::SPEC,
    &hermes::spec::SPEC,
    &kilocode::spec::SPEC,
    &kimi_code::spec::SPEC,
    &opencode::spec::SPEC,
    &openhands::spec::SPEC,
    &pi::spec::SPEC,
    &qwen_code::spec::SPEC,
    &vscode::spec::SPEC,
];

/// The built-in vendor `id`, if any.
pub fn spec(id: &str) -> Option<&'static VendorSpec> {
    SPECS.iter().copied().find(|s| s.id == id)
}

/// The vendor's neutral reply to one hook call (what its agent gets when nothing is
/// decided); `None` for a vendor that is not built in, or a call that names no hook.
///
/// What the hook shim answers when the bridge does not. Each adapter is called directly,
/// not through [`SPECS`]: a program that needs only this links each vendor's hook naming and
/// neutral reply, not its mapping, OTel profile and control spec (the shim pays, on every
/// tool call, for the pages and relocations of everything it links). A test keeps it equal
/// to what [`SPECS`]' adapters answer.
pub fn neutral_reply(vendor: &str, call: &crate::HookCall<'_>) -> Option<crate::NeutralReply> {
    fn of(a: &impl HookAdapter, call: &crate::HookCall<'_>) -> Option<crate::NeutralReply> {
        Some(a.neutral_reply(&a.hook_name(call).ok()?))
    }
    match vendor {
        antigravity::VENDOR => of(&antigravity::AntigravityAdapter, call),
        claude_code::VENDOR => of(&claude_code::ClaudeCodeAdapter, call),
        cline::VENDOR => of(&cline::ClineAdapter, call),
        codex::VENDOR => of(&codex::CodexAdapter, call),
        copilot_cli::VENDOR => of(&copilot_cli::CopilotCliAdapter, call),
        droid::VENDOR => of(&droid::DroidAdapter, call),
        gemini_cli::VENDOR => of(&gemini_cli::GeminiCliAdapter, call),
        hermes::VENDOR => of(&hermes::HermesAdapter, call),
        "kilocode" => of(&opencode::PluginAdapter::new(kilocode::KILOCODE), call),
        kimi_code::VENDOR => of(&kimi_code::KimiCodeAdapter, call),
        "opencode" => of(&opencode::PluginAdapter::new(opencode::OPENCODE), call),
        pi::VENDOR => of(&pi::PiAdapter::default(), call),
        qwen_code::VENDOR => of(&qwen_code::QwenCodeAdapter, call),
        vscode::VENDOR => of(&vscode::VscodeAdapter, call),
        _ => None,
    }
}

/// The vendor of another agent that ran `vendor`'s hook wiring, when this call is not
/// `vendor`'s own ([`HookAdapter::ran_by_other`]); `env` looks the hook process's environment
/// up. Called directly, as [`neutral_reply`], so the hook shim links no mapping code; only
/// the vendors whose wiring other agents run are listed (the rest: every call their own). A
/// test keeps it equal to what [`SPECS`]' adapters answer.
pub fn ran_by_other(
    vendor: &str,
    call: &crate::HookCall<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<&'static str> {
    match vendor {
        claude_code::VENDOR => claude_code::ClaudeCodeAdapter.ran_by_other(call, env),
        _ => None,
    }
}

/// Every built-in hook adapter (of the vendors that have hooks).
pub fn all() -> Vec<Box<dyn HookAdapter>> {
    SPECS.iter().filter_map(|s| s.adapter).map(|a| a()).collect()
}

/// The built-in hook adapter for `vendor`, if it has one.
pub fn by_vendor(vendor: &str) -> Option<Box<dyn HookAdapter>> {
    spec(vendor)?.adapter.map(|a| a())
}

/// The OTel profiles of the vendors that have one, in [`SPECS`] order.
static OTEL_PROFILES: LazyLock<Vec<&'static dyn OtelProfile>> =
    LazyLock::new(|| SPECS.iter().filter_map(|s| s.otel).collect());

/// Every built-in OTel profile, in [`SPECS`] order (the detection order).
pub fn otel_profiles() -> &'static [&'static dyn OtelProfile] {
    &OTEL_PROFILES
}

/// Every content table the ceiling gate over forwarded OTLP applies: the shared ones (GenAI,
/// OTel general, OpenInference) and each profiled vendor's, in [`SPECS`] order.
pub fn content_tables() -> impl Iterator<Item = &'static ContentTable> {
    crate::otel::content::SHARED.iter().copied().chain(otel_profiles().iter().map(|p| p.content()))
}

/// The profile selector over the built-in profiles, with an optional forced one.
pub fn otel_selector(forced: Option<OtelVendor>) -> ProfileSelector {
    ProfileSelector { forced: forced.map(OtelVendor::profile), candidates: otel_profiles() }
}

/// The model-call fields of `vendor` (empty for a vendor without a profile).
pub fn model_call_fields(vendor: &str) -> &'static [ModelCallFields] {
    otel_profiles().iter().find(|p| p.vendor() == vendor).map_or(&[], |p| p.model_calls())
}

/// The model call a companion event of type `ty` with payload `data` reports, if it is one
/// (the GenAI metrics and the run spans' usage read it).
pub fn model_call<'a>(ty: &'a str, data: &'a Map<String, Value>) -> Option<ModelCall<'a>> {
    model_call_in(ty, data, model_call_fields)
}

/// A vendor that has an OTel profile, as config names it (`[otlp_in.profiles]`: a
/// `service.name` forced onto `codex`, `vscode`, `claude-code`, `gemini-cli` or `qwen-code`).
/// Parsed against the registry, so a new vendor's profile is nameable with no table to edit.
#[derive(Clone, Copy)]
pub struct OtelVendor(&'static dyn OtelProfile);

impl OtelVendor {
    /// The profiled vendor `id`, if any.
    pub fn named(id: &str) -> Option<Self> {
        otel_profiles().iter().copied().find(|p| p.vendor() == id).map(Self)
    }

    /// The first profile (in registry order) that claims `rec`.
    pub fn detect(rec: &OtelRecord) -> Option<Self> {
        otel_profiles().iter().copied().find(|p| p.claims(rec)).map(Self)
    }

    /// Every profiled vendor.
    pub fn all() -> impl Iterator<Item = Self> {
        otel_profiles().iter().copied().map(Self)
    }

    /// The agent identity token.
    pub fn as_str(self) -> &'static str {
        self.0.vendor()
    }

    /// The profile.
    pub fn profile(self) -> &'static dyn OtelProfile {
        self.0
    }
}

impl PartialEq for OtelVendor {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for OtelVendor {}

impl std::fmt::Debug for OtelVendor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for OtelVendor {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::named(s).ok_or_else(|| {
            let names: Vec<&str> = Self::all().map(Self::as_str).collect();
            format!("unknown OTel profile `{s}` (expected one of {})", names.join(", "))
        })
    }
}

impl serde::Serialize for OtelVendor {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for OtelVendor {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::InstallSpec;

    /// The listing, the held set and the install plan agree for every vendor: the adapter
    /// is the vendor the spec names, every moment that may be held is wired by the install
    /// (with the long timeout), and every other wired moment gets the short one.
    #[test]
    fn detects_profiles_from_the_registry() {
        use std::sync::Arc;
        let with = |svc: &str, scope: &str| OtelRecord {
            resource: Arc::new(Map::from_iter([("service.name".to_owned(), Value::from(svc))])),
            scope_name: scope.into(),
            ..Default::default()
        };
        let detect = |svc: &str, scope: &str| OtelVendor::detect(&with(svc, scope)).map(OtelVendor::as_str);
        assert_eq!(detect("codex_exec", ""), Some("codex"));
        assert_eq!(detect("codex-app-server", ""), Some("codex"));
        assert_eq!(detect("copilot-chat", ""), Some("vscode"));
        assert_eq!(detect("claude-code", ""), Some("claude-code"));
        assert_eq!(detect("x", "com.anthropic.claude_code.events"), Some("claude-code"));
        assert_eq!(detect("gemini-cli", ""), Some("gemini-cli"));
        assert_eq!(detect("x", "gemini-cli"), Some("gemini-cli"));
        assert_eq!(detect("qwen-code", "qwen-code"), Some("qwen-code"));
        assert_eq!(detect("gemini", ""), None);
        assert_eq!(detect("Codex_Exec", ""), Some("codex"));
        assert_eq!(detect("VSCode", ""), Some("vscode"));
        assert_eq!(detect("Claude-Code", ""), Some("claude-code"));
        assert_eq!(detect("claude-codex", ""), None);
        assert_eq!(detect("cod", ""), None);
        assert_eq!(detect("é", ""), None);
        let names: Vec<&str> = OtelVendor::all().map(OtelVendor::as_str).collect();
        assert_eq!(names, ["claude-code", "codex", "gemini-cli", "qwen-code", "vscode"]);
        for v in OtelVendor::all() {
            assert_eq!(serde_json::to_value(v).unwrap(), Value::from(v.as_str()));
            assert_eq!(v.as_str().parse::<OtelVendor>(), Ok(v));
            assert_eq!(model_call_fields(v.as_str()), v.profile().model_calls());
            assert!(!v.profile().model_calls().is_empty(), "{} reports model calls", v.as_str());
        }
        assert!("pi".parse::<OtelVendor>().unwrap_err().contains("expected one of claude-code, codex"));
        let forced = otel_selector(OtelVendor::named("vscode"));
        assert_eq!(forced.select(&with("codex_exec", "")).map(|p| p.vendor()), Some("vscode"));
        assert_eq!(otel_selector(None).select(&with("codex_exec", "")).map(|p| p.vendor()), Some("codex"));
    }

    #[test]
    fn listing_held_set_and_install_plan_agree() {
        let mut ids: Vec<&str> = SPECS.iter().map(|s| s.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), SPECS.len(), "duplicate vendor ids");
        let observers: Vec<&str> = SPECS.iter().filter_map(|s| s.observer()).map(|o| o.id).collect();
        assert_eq!(observers, ["kilocode", "kimi-code", "opencode", "openhands"], "each vendor's own observer");
        for s in SPECS {
            if let Some(o) = s.observer() {
                assert_eq!(o.id, s.id, "{}: the observer's identity", s.id);
            }
            if let Some(a) = s.adapter {
                assert_eq!(a().vendor(), s.id, "{}: adapter identity", s.id);
            } else {
                assert!(s.observer().is_some() && s.install.is_none(), "{}: no hooks, observed only", s.id);
            }
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
            if let Some(r) = s.reply_route() {
                let (path, described) = (r.path, r.describe());
                assert!(path.contains("{session}"), "{}: {path}", s.id);
                assert!(!r.options.is_empty() && described.contains(path), "{}: {described}", s.id);
            }
        }
    }
}
