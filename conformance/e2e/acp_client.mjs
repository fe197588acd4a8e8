#!/usr/bin/env node
// An editor-equivalent ACP client built on the real `@agentclientprotocol/sdk` (pinned in
// package.json): spawns the agent command it is given (in the e2e suite: `aep-bridge wrap acp
// -- <agent>`), keeps a byte copy of everything it wrote to and read from the agent, and plays
// the editor: initialize (fs capability on, as an editor offers it),
// authenticate when the agent offers the configured method, session/new, then each prompt in
// turn, answering session/request_permission itself (the editor owns the gate) and
// fs/read_text_file from disk (a missing file is an error, as in an editor).
//
// Usage: node acp_client.mjs --sdk DIR --cwd DIR --report FILE --wrote FILE --read FILE
//          [--auth METHOD] [--permission OPTION_KIND] --prompt TEXT [--prompt TEXT ...] -- CMD ARGS...
// The report (JSON): initialize/session results, each prompt's stopReason, the permission
// requests and the answers given, fs reads, session/update kinds, the command's exit code.
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { PassThrough, Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const argv = process.argv.slice(2);
const dash = argv.indexOf("--");
if (dash < 0) throw new Error("usage: acp_client.mjs [options] -- CMD ARGS...");
const cmd = argv.slice(dash + 1);
const opts = { prompt: [] };
for (let i = 0; i < dash; i += 2) {
  const k = argv[i].replace(/^--/, "");
  if (k === "prompt") opts.prompt.push(argv[i + 1]);
  else opts[k] = argv[i + 1];
}
// The SDK's own entry point (its package.json `exports`, 2.x: `dist/v1/stable/acp.js`).
const sdkDir = path.join(opts.sdk, "@agentclientprotocol/sdk");
const pkg = JSON.parse(fs.readFileSync(path.join(sdkDir, "package.json"), "utf8"));
const acp = await import(pathToFileURL(path.join(sdkDir, pkg.exports?.["."]?.import || pkg.main)).href);
const { methods } = acp;

const report = { prompts: [], permissions: [], reads: [], updates: {}, errors: [] };
const wrote = fs.openSync(opts.wrote, "w");
const read = fs.openSync(opts.read, "w");
const child = spawn(cmd[0], cmd.slice(1), { cwd: opts.cwd, stdio: ["pipe", "pipe", "inherit"] });
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

// The byte copies: what the editor wrote and what it read, before any decoding.
const toAgent = new Writable({
  write(chunk, _enc, cb) {
    fs.writeSync(wrote, chunk);
    child.stdin.write(chunk, cb);
  },
  final(cb) {
    child.stdin.end(cb);
  },
});
// The SDK reads a copy: when its connection ends it cancels its reader, and the agent's own
// stdout stays drained until the agent exits (an agent that writes while shutting down, as
// Qwen Code 0.24 does, must not meet a closed pipe: EPIPE would be the client's doing).
const fromAgent = new PassThrough();
child.stdout.on("data", (chunk) => {
  fs.writeSync(read, chunk);
  if (!fromAgent.destroyed) fromAgent.write(chunk);
});
child.stdout.on("end", () => fromAgent.end());
const stream = acp.ndJsonStream(Writable.toWeb(toAgent), Readable.toWeb(fromAgent));

// The editor's side (SDK 2.x: a client app with per-method handlers).
const editor = acp
  .client({ name: "aep-e2e-editor" })
  .onRequest(methods.client.session.requestPermission, ({ params: p }) => {
    const want = opts.permission || "allow_once";
    const option = p.options.find((o) => o.kind === want) || p.options[0];
    report.permissions.push({ toolCallId: p.toolCall?.toolCallId, title: p.toolCall?.title,
      options: p.options.map((o) => o.kind), chose: option.optionId });
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  })
  .onNotification(methods.client.session.update, ({ params: n }) => {
    const k = n.update.sessionUpdate;
    report.updates[k] = (report.updates[k] || 0) + 1;
  })
  .onRequest(methods.client.fs.readTextFile, ({ params: p }) => {
    report.reads.push(p.path);
    try {
      return { content: fs.readFileSync(p.path, "utf8") };
    } catch (e) {
      throw acp.RequestError.resourceNotFound(p.path);
    }
  })
  .onRequest(methods.client.fs.writeTextFile, ({ params: p }) => {
    fs.writeFileSync(p.path, p.content);
    return {};
  });

try {
  await editor.connectWith(stream, async (agent) => {
    report.initialize = await agent.request(methods.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: true, writeTextFile: true }, terminal: false },
      clientInfo: { name: "aep-e2e-editor", version: "0" },
    });
    const authMethods = (report.initialize.authMethods || []).map((m) => m.id);
    if (opts.auth && authMethods.includes(opts.auth)) {
      await agent.request(methods.agent.authenticate, { methodId: opts.auth });
      report.authenticated = opts.auth;
    }
    const s = await agent.request(methods.agent.session.new, { cwd: opts.cwd, mcpServers: [] });
    report.sessionId = s.sessionId;
    for (const text of opts.prompt) {
      const r = await agent.request(methods.agent.session.prompt, { sessionId: s.sessionId, prompt: [{ type: "text", text }] });
      report.prompts.push({ text, stopReason: r.stopReason });
    }
  });
} catch (e) {
  report.errors.push(String(e?.message || JSON.stringify(e)));
}
// An editor closing the agent: end its stdin, wait for it to exit.
await new Promise((resolve) => toAgent.end(resolve));
const timer = setTimeout(() => child.kill("SIGTERM"), 30000);
const { code, signal } = await exited;
clearTimeout(timer);
report.exit = { code, signal };
fs.closeSync(wrote);
fs.closeSync(read);
fs.writeFileSync(opts.report, JSON.stringify(report, null, 1));
process.exit(0);
