// aep-bridge: pi extension shim (AEP-0002 Annex A.12).
//
// Load it by explicit path (the `extensions` array in settings.json, or `pi -e <path>`).
// The default export is pi's extension factory. It registers NOTIFICATION handlers only
// (never tool_call, tool_result, context, input, before_provider_*, session_before_*):
// observe-only by non-subscription. Every handler returns nothing and never awaits the
// bridge; moments are POSTed in order, as JSON, to
// `${AEP_BRIDGE_URL}/hooks/pi/{event.type}` with the body
// `{session: {id, file, cwd}, event}` (identity read in-process from ctx.sessionManager).
//
// Fail-open: any error, timeout or refusal is dropped. No Node built-ins, global fetch,
// bounded timeouts (AbortController), bounded queue.
//
// Environment: AEP_BRIDGE_URL (default http://127.0.0.1:8787), AEP_TOKEN (bearer, when
// set), AEP_HOOK_TIMEOUT_MS (default 1500), AEP_PI_DELTAS=1 to also forward the stream
// updates message_update / tool_execution_update (the bridge maps them only when its own
// deltas opt-in is on).

type Ctx = {
  sessionManager?: {
    getSessionId?: () => string;
    getSessionFile?: () => string | undefined;
    getCwd?: () => string;
  };
};
type Pi = { on: (event: string, handler: (event: any, ctx: Ctx) => void) => void };

const env = (name: string): string | undefined => {
  try {
    const p = (globalThis as any).process;
    if (p && p.env && p.env[name]) return p.env[name];
  } catch {}
  return undefined;
};

const bounded = (raw: string | undefined, fallback: number, max: number): number => {
  const n = Number(raw);
  return Number.isFinite(n) && n > 0 ? Math.min(n, max) : fallback;
};

const BASE = (env("AEP_BRIDGE_URL") || "http://127.0.0.1:8787").replace(/\/+$/, "");
const TOKEN = env("AEP_TOKEN");
const TIMEOUT_MS = bounded(env("AEP_HOOK_TIMEOUT_MS"), 1500, 10000);
const DELTAS = env("AEP_PI_DELTAS") === "1";
const MAX_QUEUE = 1000;

const NOTIFICATIONS = [
  "session_start",
  "session_info_changed",
  "session_compact",
  "session_tree",
  "session_shutdown",
  "agent_start",
  "agent_end",
  "agent_settled",
  "turn_start",
  "turn_end",
  "message_start",
  "message_end",
  "tool_execution_start",
  "tool_execution_end",
  "model_select",
  "thinking_level_select",
];
const STREAM_UPDATES = ["message_update", "tool_execution_update"];

async function post(moment: string, body: unknown): Promise<void> {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  try {
    const headers: Record<string, string> = { "content-type": "application/json" };
    if (TOKEN) headers.authorization = `Bearer ${TOKEN}`;
    const res = await fetch(`${BASE}/hooks/pi/${encodeURIComponent(moment)}`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
      signal: ctl.signal,
    });
    await res.text().catch(() => undefined);
  } catch {
    // fail-open: a dead bridge never breaks the agent
  } finally {
    clearTimeout(timer);
  }
}

let chain: Promise<void> = Promise.resolve();
let pending = 0;

function forward(name: string, event: any, ctx: Ctx): void {
  try {
    if (pending >= MAX_QUEUE) return;
    const sm = ctx && ctx.sessionManager;
    const session = {
      id: sm && sm.getSessionId ? sm.getSessionId() : undefined,
      file: sm && sm.getSessionFile ? sm.getSessionFile() : undefined,
      cwd: sm && sm.getCwd ? sm.getCwd() : undefined,
    };
    // serialize now: the event object may be mutated by pi after the handler returns
    const body = JSON.parse(JSON.stringify({ session, event }));
    const moment = (event && typeof event.type === "string" && event.type) || name;
    pending += 1;
    chain = chain
      .then(() => post(moment, body))
      .catch(() => undefined)
      .finally(() => {
        pending -= 1;
      });
  } catch {
    // fail-open
  }
}

export default function aepBridge(pi: Pi): void {
  const names = DELTAS ? NOTIFICATIONS.concat(STREAM_UPDATES) : NOTIFICATIONS;
  for (const name of names) {
    try {
      pi.on(name, (event: any, ctx: Ctx): void => {
        forward(name, event, ctx);
      });
    } catch {
      // an event this pi version does not know: skip it
    }
  }
}
