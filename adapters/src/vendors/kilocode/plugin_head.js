// aep-bridge: Kilo Code plugin shim (AEP-0002 Annex A.8; Kilo Code is an OpenCode fork).
//
// Kilo loads every `*.js` of `.kilocode/plugins/` (and `~/.config/kilo/plugins/`) by itself:
// nothing to register. The module default-exports `{ id, server }` (the fork's plugin module
// shape). Runs inside Kilo's Bun runtime: ESM, global fetch, no Node built-ins. Every moment
// is POSTed as JSON to `${AEP_BRIDGE_URL}/hooks/kilocode/{moment}`:
//
//   bus            {kind:"bus", event}                         (the `event` hook; events naming a session)
//   tool.before    {kind:"tool.before", input, output}         (tool.execute.before)
//   tool.after     {kind:"tool.after", input, output}          (tool.execute.after)
//   permission.ask {kind:"permission.ask", permission}         (held open, bounded; <=7.4.5)
//
// Every body also carries `serverUrl` (PluginInput.serverUrl) when Kilo provides it, and
// `oneShot: true` under `kilo run` (see ONE_SHOT): on
// >=7.4.6 the asks ride the bus (permission.asked, question.asked) and the bridge answers
// through the server's reply routes, so it needs the address.
//
// Fail-open by construction: any error, timeout or non-2xx reply does nothing. Outputs
// are never mutated, except permission.ask's `output.status`, and only when the bridge's
// reply carries {"status":"allow"} or {"status":"deny"}; anything else leaves Kilo's own
// prompt in charge.
//
// Environment: AEP_BRIDGE_URL (default http://127.0.0.1:8787), AEP_TOKEN (bearer, when
// set), AEP_HOOK_TIMEOUT_MS (default 1500), AEP_PERMISSION_WAIT_MS (default 60000, the
// held wait, above the bridge's own attention window; capped at 300000).

const VENDOR = "kilocode";
