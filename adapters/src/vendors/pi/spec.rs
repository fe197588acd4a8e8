//! pi around its mapping: manifest, the opt-in gate on `tool_call` and its reply shape,
//! the extension asset `aep-bridge install pi` writes.

use serde_json::{Value, json};

use crate::spec::{AssetInstall, ControlSpec, Decision, Gate, Held, InstallSpec, VendorSpec};

/// The pi extension shim (compiles under `tsc --strict`).
pub const EXTENSION: &str = include_str!("extension.ts");

/// pi.
pub static SPEC: VendorSpec = VendorSpec {
    id: super::VENDOR,
    display_name: "pi",
    executables: &["pi"],
    hook_channel: "extension (notification handlers, fetch to /hooks/pi)",
    families: &["session", "run", "tool", "message"],
    setup: "aep-bridge install pi [--project DIR]",
    control: ControlSpec {
        held: &[],
        gate: Some(Gate { moment: "tool_call", extra_options: &[] }),
        reply: Some(reply),
    },
    // pi auto-discovers extensions here (project-local ones behind project trust).
    install: Some(InstallSpec::Asset(AssetInstall {
        project_file: ".pi/extensions/aep-bridge.ts",
        user_file: ".pi/agent/extensions/aep-bridge.ts",
        content: EXTENSION,
        note: None,
        // Headless pi (`-p`, `--mode rpc`) never asks and silently skips an untrusted
        // project's extensions.
        project_note: Some(
            "pi loads a project's extensions once it trusts the project: answer its trust prompt (or `/trust`), or run headless pi with `--approve` (`-a`)",
        ),
        deps: None,
    })),
    server: None,
    otel: None,
    adapter: Some(super::adapter),
};

/// Allow is "no objection" (`{}`); a denial blocks the call with the reason.
fn reply(_held: &Held<'_>, d: &Decision) -> Option<Value> {
    Some(if d.allows() { json!({}) } else { json!({"block": true, "reason": d.reason()}) })
}
