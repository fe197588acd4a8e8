//! `mappings/kimi-code.json` through this project's Kimi Code adapter: one check per hook
//! entry plus the fallback. The file pins the pure per-hook layer
//! ([`kimi_code::map_pinned`]); the permission-pair companions are envelope wiring the
//! fixture leaves to smokes. Each `ws_modes` row is checked in both modes through the web
//! channel's mode policy ([`kimi_code::web::map_ws`]): `ws_modes.{row}.companion` / `.primary`.

use aep_adapters::HookCall;
use aep_adapters::MapContext;
use aep_adapters::common::hook_name;
use aep_adapters::vendors::kimi_code;
use aep_adapters::vendors::kimi_code::web::{WsMode, map_ws};
use serde_json::Value;

use crate::{Checks, Fixtures};

/// Appends this file's checks.
pub fn run(fx: &Fixtures, out: &mut Checks) {
    let cx = MapContext::default();
    super::run_hook_table(fx, out, "kimi-code", &|input| {
        let hook =
            hook_name(&HookCall { event: None, payload: input }, "hook_event_name").map_err(|e| e.to_string())?;
        Ok(kimi_code::map_pinned(&hook, input, &cx))
    });
    let Ok(doc) = fx.json("mappings/kimi-code.json") else { return };
    let Some(modes) = doc.pointer("/ws_modes/modes").and_then(Value::as_object) else {
        out.fail("mappings/kimi-code: ws_modes", "no ws_modes.modes table");
        return;
    };
    for (name, row) in modes {
        for (label, mode) in [("companion", WsMode::Companion), ("primary", WsMode::Primary)] {
            let result = match row.get("input") {
                Some(input) => super::compare(row.get(label).unwrap_or(&Value::Null), &map_ws(mode, input, &cx)),
                None => Err("row has no input".to_owned()),
            };
            out.record(format!("mappings/kimi-code: ws_modes.{name}.{label}"), result);
        }
    }
}
