// aep-bridge: OpenCode plugin shim (AEP-0002 Annex A.7).
//
// Drop into .opencode/plugins/ (or list it in the config's plugin array). Runs inside
// OpenCode's Bun runtime: ESM, global fetch, no Node built-ins. Every moment is POSTed as
// JSON to `${AEP_BRIDGE_URL}/hooks/opencode/{moment}`:
//
//   bus            {kind:"bus", event}                         (the `event` hook; events naming a session)
//   tool.before    {kind:"tool.before", input, output}         (tool.execute.before)
//   tool.after     {kind:"tool.after", input, output}          (tool.execute.after)
//   permission.ask {kind:"permission.ask", permission}         (held open, bounded)
//
// Every body also carries `serverUrl` (PluginInput.serverUrl) when OpenCode provides it, and
// `oneShot: true` under `opencode run` (see ONE_SHOT): the
// live server (1.18.33) no longer fires permission.ask, its asks ride the bus
// (permission.asked) and the bridge answers through the server's reply route.
//
// Fail-open by construction: any error, timeout or non-2xx reply does nothing. Outputs
// are never mutated, except permission.ask's `output.status`, and only when the bridge's
// reply carries {"status":"allow"} or {"status":"deny"}; anything else leaves OpenCode's
// own prompt in charge.
//
// Environment: AEP_BRIDGE_URL (default http://127.0.0.1:8787), AEP_TOKEN (bearer, when
// set), AEP_HOOK_TIMEOUT_MS (default 1500), AEP_PERMISSION_WAIT_MS (default 60000, the
// held wait, above the bridge's own attention window; capped at 300000).

const VENDOR = "opencode";
