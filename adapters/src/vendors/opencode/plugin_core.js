
const env = (name) => {
  try {
    if (typeof process !== "undefined" && process.env && process.env[name]) return process.env[name];
    if (typeof Bun !== "undefined" && Bun.env && Bun.env[name]) return Bun.env[name];
  } catch {}
  return undefined;
};

const bounded = (raw, fallback, max) => {
  const n = Number(raw);
  return Number.isFinite(n) && n > 0 ? Math.min(n, max) : fallback;
};

const BASE = (env("AEP_BRIDGE_URL") || "http://127.0.0.1:8787").replace(/\/+$/, "");
const TOKEN = env("AEP_TOKEN");
const HOOK_TIMEOUT_MS = bounded(env("AEP_HOOK_TIMEOUT_MS"), 1500, 10000);
const PERMISSION_WAIT_MS = bounded(env("AEP_PERMISSION_WAIT_MS"), 60000, 300000);
const MAX_QUEUE = 1000;
// How long the instance's shutdown waits for the moments still queued (see `dispose`).
const FLUSH_MS = Math.min(HOOK_TIMEOUT_MS * 2, 10000);

// The one-shot `run` command (in this process; not a client attached to a server with
// --attach) answers every permission ask itself, at once (auto-reject unless told to allow):
// every body says so (`oneShot: true`), and the bridge records those decisions as the agent's own.
const ONE_SHOT = (() => {
  try {
    const args = typeof process !== "undefined" && Array.isArray(process.argv) ? process.argv.slice(2).map(String) : [];
    const command = args.find((a) => !a.startsWith("-"));
    return command === "run" && !args.some((a) => a === "--attach" || a.startsWith("--attach="));
  } catch {
    return false;
  }
})();

// One POST with its own deadline; resolves to the parsed JSON reply or undefined.
async function post(moment, body, timeoutMs) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), timeoutMs);
  try {
    const headers = { "content-type": "application/json" };
    if (TOKEN) headers.authorization = `Bearer ${TOKEN}`;
    const res = await fetch(`${BASE}/hooks/${VENDOR}/${encodeURIComponent(moment)}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: ctl.signal,
    });
    const text = await res.text();
    if (!res.ok || !text) return undefined;
    try {
      return JSON.parse(text);
    } catch {
      return undefined;
    }
  } catch {
    return undefined; // fail-open: a dead bridge never breaks the agent
  } finally {
    clearTimeout(timer);
  }
}

// Observation moments go out in order without holding the agent: a serial chain,
// bounded (when the bridge is slow or down, excess moments are dropped, never queued forever).
let chain = Promise.resolve();
let pending = 0;
function forward(moment, body) {
  if (pending >= MAX_QUEUE) return chain;
  pending += 1;
  chain = chain
    .then(() => post(moment, body, HOOK_TIMEOUT_MS))
    .catch(() => undefined)
    .finally(() => {
      pending -= 1;
    });
  return chain;
}

const server = async (input) => {
  let serverUrl;
  try {
    if (input && input.serverUrl) serverUrl = String(input.serverUrl);
  } catch {}
  const withServer = (body) => {
    const out = serverUrl ? { ...body, serverUrl } : { ...body };
    if (ONE_SHOT) out.oneShot = true;
    return out;
  };
  return hooks(withServer);
};

// The session a bus event belongs to (the adapter's rule); the server's own machinery
// (server.heartbeat, plugin.added, catalog.updated, ...) names none and maps to no event.
const sessionOf = (event) => {
  const p = (event && event.properties) || {};
  const info = p.info || {};
  return p.sessionID || info.sessionID || (String(event && event.type).startsWith("session.") ? info.id : undefined);
};

const hooks = (withServer) => ({
  event: async ({ event }) => {
    try {
      if (sessionOf(event)) forward("bus", withServer({ kind: "bus", event }));
    } catch {}
  },
  "tool.execute.before": async (input, output) => {
    try {
      forward("tool.before", withServer({ kind: "tool.before", input, output: { args: output && output.args } }));
    } catch {}
  },
  "tool.execute.after": async (input, output) => {
    try {
      forward("tool.after", withServer({ kind: "tool.after", input, output }));
    } catch {}
  },
  "permission.ask": async (permission, output) => {
    try {
      // after the moments already queued (the card follows its tool.before; waiting for
      // them is itself bounded), then held
      await Promise.race([chain, new Promise((r) => setTimeout(r, HOOK_TIMEOUT_MS))]);
      const body = withServer({ kind: "permission.ask", permission });
      const reply = await post("permission.ask", body, PERMISSION_WAIT_MS);
      const status = reply && reply.status;
      if (status === "allow" || status === "deny") output.status = status;
    } catch {}
  },
  // Awaited as the instance shuts down (the event hook is not awaited): the moments still
  // queued go out first, within one bounded wait, so a one-shot `run` that exits right
  // after its last bus event does not drop its session's end.
  dispose: async () => {
    let timer;
    try {
      await Promise.race([chain, new Promise((r) => (timer = setTimeout(r, FLUSH_MS)))]);
    } catch {
    } finally {
      clearTimeout(timer);
    }
  },
});
