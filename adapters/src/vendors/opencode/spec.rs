//! OpenCode around its mapping: manifest, the held `permission.ask` and its reply shape,
//! the plugin asset `aep-bridge install opencode` writes.

use serde_json::{Value, json};

use crate::spec::{AssetInstall, ControlSpec, Decision, Held, InstallSpec, PluginDeps, VendorSpec};

/// The OpenCode plugin shim (ESM, fetch only, fail-open).
pub const PLUGIN: &str = include_str!("plugin.js");

/// The moments the plugin holds (its `permission.ask` hook; `permission_ask` is the
/// same moment as the plugin's URL names it).
pub const HELD: &[&str] = &["permission.ask", "permission_ask"];

/// OpenCode.
pub static SPEC: VendorSpec = VendorSpec {
    id: "opencode",
    display_name: "OpenCode",
    executables: &["opencode"],
    hook_channel: "plugin (Bun, fetch to /hooks/opencode)",
    families: &["session", "run", "tool", "attention", "progress"],
    setup: "aep-bridge install opencode [--project DIR]",
    control: ControlSpec { held: HELD, gate: None, reply: Some(reply) },
    install: Some(InstallSpec::Asset(AssetInstall {
        project_file: ".opencode/plugins/aep-bridge.js",
        user_file: ".config/opencode/plugins/aep-bridge.js",
        content: PLUGIN,
        note: None,
        project_note: None,
        deps: Some(PluginDeps { package: "@opencode-ai/plugin", user_dir_always: Some(".config/opencode") }),
    })),
    otel: None,
    adapter: super::adapter,
};

/// The plugin applies `{status: allow|deny}` (a denial with the guidance as `message`).
pub(crate) fn reply(_held: &Held<'_>, d: &Decision) -> Option<Value> {
    let mut r = json!({"status": if d.allows() { "allow" } else { "deny" }});
    if let (false, Some(t)) = (d.allows(), &d.text) {
        r["message"] = json!(t);
    }
    Some(r)
}
