//! OpenCode around its mapping: manifest, the held `permission.ask` and its reply shape,
//! the server's permission reply route (the bus asks nothing holds open, raised from the
//! plugin's `bus` moment or the stream [`super::observer`]), the plugin asset
//! `aep-bridge install opencode` writes.

use serde_json::{Value, json};

use crate::spec::{AssetInstall, ControlSpec, Decision, Held, InstallSpec, PluginDeps, ServerSpec, VendorSpec};

/// The OpenCode plugin shim (ESM, fetch only, fail-open): its head (the comment and the
/// vendor), the body it shares with Kilo Code's (a fork's plugin API: one copy of the
/// queue, the held ask and the flush at shutdown), and OpenCode's export.
pub const PLUGIN: &str =
    concat!(include_str!("plugin_head.js"), include_str!("plugin_core.js"), include_str!("plugin_tail.js"));

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
    server: Some(ServerSpec { observer: Some(&super::observer::OBSERVER), reply_route: Some(ROUTE) }),
    otel: None,
    adapter: Some(super::adapter),
};

/// The plugin applies `{status: allow|deny}` (a denial with the guidance as `message`).
pub(crate) fn reply(_held: &Held<'_>, d: &Decision) -> Option<Value> {
    let mut r = json!({"status": if d.allows() { "allow" } else { "deny" }});
    if let (false, Some(t)) = (d.allows(), &d.text) {
        r["message"] = json!(t);
    }
    Some(r)
}

pub use super::route::{BUS, REPLY_OPTIONS, ROUTE, settled};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_plugin_is_its_head_the_shared_body_and_its_one_export() {
        let kilo = crate::vendors::kilocode::spec::PLUGIN;
        for (plugin, vendor, export) in [
            (PLUGIN, "opencode", "export const AepBridge = server;"),
            (kilo, "kilocode", r#"export default { id: "aep-bridge", server };"#),
        ] {
            assert_eq!(plugin.matches("const VENDOR = ").count(), 1, "{vendor}");
            assert!(plugin.contains(&format!("const VENDOR = \"{vendor}\";")), "{vendor}");
            let exports: Vec<&str> = plugin.lines().filter(|l| l.starts_with("export ")).collect();
            assert_eq!(exports, [export], "{vendor}: one export, the loader's shape");
            assert!(
                plugin.contains("const server = async (input) =>") && plugin.contains("dispose: async"),
                "{vendor}"
            );
        }
    }

    #[test]
    fn a_bus_reply_settles_its_ask_and_nothing_else_does() {
        let replied =
            json!({"type": "permission.replied", "properties": {"permissionID": "per_1", "response": "once"}});
        assert_eq!(settled(&replied), Some("per_1"));
        let question = json!({"type": "question.replied", "properties": {"requestID": "que_2"}});
        assert_eq!(settled(&question), Some("que_2"));
        let renamed = json!({"type": "permission.replied", "properties": {"requestID": "per_3"}});
        assert_eq!(settled(&renamed), Some("per_3"));
        for other in [
            json!({"type": "permission.asked", "properties": {"id": "per_1", "permissionID": "per_1"}}),
            json!({"type": "permission.replied", "properties": {}}),
            json!({"type": "permission.replied", "properties": {"permissionID": 7}}),
            json!({"properties": {"permissionID": "per_1"}}),
        ] {
            assert_eq!(settled(&other), None, "{other}");
        }
        // From the plugin: only on its bus moment, the event under `event`.
        let moment = json!({"kind": "bus", "event": replied, "serverUrl": "http://127.0.0.1:4096/"});
        assert_eq!(ROUTE.settled_by("bus", &moment), Some("per_1"));
        assert_eq!(ROUTE.settled_by("tool.after", &moment), None);
        assert_eq!(ROUTE.server_of(&moment), Some("http://127.0.0.1:4096/"));
        assert!(ROUTE.asks_on("bus") && !ROUTE.asks_on("permission.ask"));
    }

    #[test]
    fn the_reply_carries_the_option_only() {
        assert_eq!(ROUTE.path_for("ses_1", "per_1"), "/session/ses_1/permissions/per_1");
        // Encoded segments are inserted verbatim, never re-read as placeholders.
        assert_eq!(ROUTE.path_for("{id}", "x"), "/session/{id}/permissions/x");
        assert_eq!(ROUTE.body("always", None), json!({"response": "always"}));
        assert_eq!(ROUTE.body("reject", Some("not there")), json!({"response": "reject"}));
        assert!(!ROUTE.takes_text());
        assert_eq!(ROUTE.accepted(b"not json"), Ok(()), "a 2xx is the ack");
        assert_eq!(ROUTE.option_list(), "once, always or reject");
        let mut d = crate::EventDraft::new("attention.requested", aep_schemas::Capture::Metadata);
        ROUTE.decorate(&mut d);
        assert_eq!(
            Value::Object(d.data),
            json!({"options": [{"id": "once", "label": "Allow once"}, {"id": "always", "label": "Always allow"},
                {"id": "reject", "label": "Reject"}], "respond_via": ["control"]})
        );
    }
}
