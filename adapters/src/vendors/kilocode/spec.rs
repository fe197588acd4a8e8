//! Kilo Code around its mapping: manifest, the held `permission.ask` (OpenCode's reply
//! shape), the server's reply route (OpenCode's, whose body also takes a `message`), the
//! plugin asset `aep-bridge install kilocode` writes.

use crate::observer::ObserverSpec;
use crate::spec::{AssetInstall, ControlSpec, InstallSpec, PluginDeps, ReplyRoute, ServerSpec, VendorSpec};
use crate::vendors::opencode::observer::SseObserver;

/// The Kilo Code plugin shim: its head, the body OpenCode's plugin has too (Kilo Code is
/// an OpenCode fork), and the fork's module shape (a default `{ id, server }`).
pub const PLUGIN: &str =
    concat!(include_str!("plugin_head.js"), include_str!("../opencode/plugin_core.js"), include_str!("plugin_tail.js"));

/// Kilo Code.
pub static SPEC: VendorSpec = VendorSpec {
    id: "kilocode",
    display_name: "Kilo Code",
    executables: &["kilo", "kilocode"],
    hook_channel: "plugin (Bun, fetch to /hooks/kilocode)",
    families: &["session", "run", "tool", "attention", "progress"],
    setup: "aep-bridge install kilocode [--project DIR]",
    control: ControlSpec {
        held: crate::vendors::opencode::spec::HELD,
        gate: None,
        reply: Some(crate::vendors::opencode::spec::reply),
    },
    install: Some(InstallSpec::Asset(AssetInstall {
        project_file: ".kilocode/plugins/aep-bridge.js",
        user_file: ".config/kilo/plugins/aep-bridge.js",
        content: PLUGIN,
        // Kilo loads every file of its `plugins/` folders by itself: nothing to register.
        note: None,
        project_note: None,
        deps: Some(PluginDeps { package: "@kilocode/plugin", user_dir_always: None }),
    })),
    server: Some(ServerSpec { observer: Some(&OBSERVER), reply_route: Some(ROUTE) }),
    otel: None,
    adapter: Some(super::adapter),
};

/// Kilo Code's observer (`vendor = "kilocode"`, formerly `kind = "kilocode-sse"`): OpenCode's
/// stream observer on Kilo Code's profile and reply route.
pub static OBSERVER: ObserverSpec = ObserverSpec {
    id: "kilocode",
    kinds: &["kilocode-sse"],
    build: |s| SseObserver::build(super::KILOCODE, &ROUTE, s),
    ..crate::vendors::opencode::observer::BASE
};

/// Kilo Code's reply route (`>=7.4.6`): OpenCode's, whose body also takes the guidance as
/// `message` (a rejection's reason).
pub const ROUTE: ReplyRoute = ReplyRoute { text_field: Some("message"), ..crate::vendors::opencode::spec::ROUTE };

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_reply_carries_free_text_as_message() {
        assert!(ROUTE.takes_text());
        assert_eq!(
            ROUTE.body("reject", Some("use the fixture")),
            json!({"response": "reject", "message": "use the fixture"})
        );
        assert_eq!(ROUTE.body("once", None), json!({"response": "once"}));
        assert_eq!(ROUTE.path_for("k1", "per_9"), "/session/k1/permissions/per_9");
        let replied = json!({"kind": "bus", "event": {"type": "question.replied", "properties": {"requestID": "q_1"}}});
        assert_eq!(ROUTE.settled_by("bus", &replied), Some("q_1"));
    }
}
