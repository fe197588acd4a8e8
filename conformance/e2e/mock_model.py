#!/usr/bin/env python3
"""A scripted model API for the end-to-end suite (stdlib only, 127.0.0.1 only).

One server speaks both wire formats the pinned CLIs use:
  POST /v1/messages               Anthropic Messages (SSE when "stream": true, else JSON)
  POST /v1/messages/count_tokens  Anthropic token count
  POST /v1/responses              OpenAI Responses (SSE)
  POST /v1/chat/completions       OpenAI Chat Completions (SSE or JSON; Qwen Code, OpenCode, pi)
  POST /v1beta/models/M:streamGenerateContent, :generateContent, :countTokens   Gemini (Gemini CLI)
  GET  /v1/models                 a one-model list

The script is a marker in the user's prompt: `{{e2e:step,step,...}}`. Each step is one
model turn that calls one tool; once the steps are used up the model answers with text.
The server keeps no state: the turn index is the number of tool-calling assistant turns
already in the request's history. Every request is appended to --log as one JSON line.

Usage: mock_model.py --port 9100 --workdir PROJECT --log requests.jsonl
"""
import argparse
import json
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MARK = re.compile(r"\{\{e2e:([a-z_,]*)\}\}")


def anthropic_tool(step, workdir):
    """(tool name, input) of a Claude Code step."""
    return {
        "bash_ok": ("Bash", {"command": "echo e2e-ok", "description": "Print a word"}),
        "bash_fail": ("Bash", {"command": "ls /e2e_missing_dir", "description": "List a missing dir"}),
        "bash_py": ("Bash", {"command": "python3 -c 'print(6*7)' > answer.txt", "description": "Compute"}),
        "read_ok": ("Read", {"file_path": f"{workdir}/hello.txt"}),
        "agent": ("Agent", {"description": "Ask a helper", "prompt": "Answer pong. {{e2e-sub}}",
                            "subagent_type": "general-purpose"}),
    }[step]


def openai_call(step, tools):
    """(tool name, arguments JSON) of a Codex step, using the shell tool it offers."""
    cmd = {"shell_ok": "echo e2e-ok", "shell_fail": "ls /e2e_missing_dir"}[step]
    if "exec_command" in tools:
        return "exec_command", json.dumps({"cmd": cmd})
    if "shell_command" in tools:
        return "shell_command", json.dumps({"command": cmd})
    return "shell", json.dumps({"command": ["bash", "-lc", cmd]})


def codex_agent_call(step, items):
    """(tool name, arguments JSON, namespace) of a Codex 0.171 multi-agent step: `agent` spawns a
    subagent (`multi_agent_v1.spawn_agent`; its own script runs a shell call, then it answers
    `pong`), `wait_agent`
    waits for the one the history's spawn_agent output names."""
    if step == "agent":
        # The subagent's own script: one shell call, then `pong`.
        return "spawn_agent", json.dumps({"message": "Run {{e2e:shell_ok}} then reply pong {{e2e-sub}}"}), "multi_agent_v1"
    spawned = {it.get("call_id") for it in items if isinstance(it, dict) and it.get("type") == "function_call"
               and it.get("name") == "spawn_agent"}
    agent = "unknown"
    for it in items:
        if isinstance(it, dict) and it.get("type") == "function_call_output" and it.get("call_id") in spawned:
            try:
                agent = json.loads(it.get("output") if isinstance(it.get("output"), str) else "{}").get("agent_id", agent)
            except ValueError:
                pass
    return "wait_agent", json.dumps({"targets": [agent], "timeout_ms": 30000}), "multi_agent_v1"


# The input tokens a `shell_full` response reports: past any model's context window.
CONTEXT_FULL = 1_000_000

# Codex asks its model to summarize the history when it compacts (this marker is in its prompt).
CODEX_COMPACT = "CONTEXT CHECKPOINT COMPACTION"
COMPACT_SUMMARY = "E2E_COMPACTION_SUMMARY: the planned shell steps ran; nothing remains."


def fork_call(step, workdir, tools=()):
    """(tool name, args) of a Gemini CLI / Qwen Code step (their shared built-in tools), or of
    an OpenCode / Kilo Code (`bash`, `read`) or Kimi Code (`Bash`) step when that tool is
    offered (the OpenHands agent server's and Hermes' `terminal`, Cline's `run_commands`)."""
    if "read" in tools and step in ("read_ok", "read_fail"):  # OpenCode's and Kilo Code's read tool
        name = {"read_ok": "hello.txt", "read_fail": "e2e_missing.txt"}[step]
        return "read", {"filePath": f"{workdir}/{name}"}
    if "Execute" in tools and step in ("shell_ok", "shell_fail", "shell_write"):  # Factory Droid's shell tool
        cmd = {"shell_ok": "echo e2e-ok", "shell_fail": "ls /e2e_missing_dir", "shell_write": "echo 42 > answer.txt"}[step]
        return "Execute", {"command": cmd, "riskLevel": "low", "riskLevelReason": "prints or lists"}
    if "Read" in tools and "Execute" in tools and step in ("read_ok", "read_fail"):  # Factory Droid's read tool
        return "Read", {"file_path": f"{workdir}/{'hello.txt' if step == 'read_ok' else 'e2e_missing.txt'}"}
    shell = next((t for t in ("bash", "Bash") if t in tools), None)
    if shell and step in ("shell_ok", "shell_write", "shell_fail"):
        cmd = {"shell_ok": "echo e2e-ok", "shell_write": "echo 42 > answer.txt", "shell_fail": "ls /e2e_missing_dir"}[step]
        return shell, {"command": cmd, "description": "Run a command"}
    if "view" in tools and step in ("read_ok", "read_fail"):  # GitHub Copilot CLI's read tool
        return "view", {"path": f"{workdir}/{'hello.txt' if step == 'read_ok' else 'e2e_missing.txt'}"}
    if "terminal" in tools and "read_file" in tools and step in ("read_ok", "read_fail"):  # Hermes: `path`
        return "read_file", {"path": f"{workdir}/{'hello.txt' if step == 'read_ok' else 'e2e_missing.txt'}"}
    if "run_commands" in tools and step in ("shell_ok", "shell_fail"):  # Cline's shell tool: a command list
        return "run_commands", {"commands": [{"shell_ok": "echo e2e-ok", "shell_fail": "ls /e2e_missing_dir"}[step]]}
    if "terminal" in tools and step in ("shell_ok", "shell_write", "shell_fail"):  # OpenHands' and Hermes' tool
        cmd = {"shell_ok": "echo e2e-ok", "shell_write": "echo 42 > answer.txt", "shell_fail": "ls /e2e_missing_dir"}[step]
        return "terminal", {"command": cmd, "is_input": False}
    return {
        "shell_ok": ("run_shell_command", {"command": "echo e2e-ok", "description": "Print a word"}),
        "shell_fail": ("run_shell_command", {"command": "ls /e2e_missing_dir", "description": "List a missing dir"}),
        # not on any read-only allow list: an agent in its default mode asks before running it
        "shell_touch": ("run_shell_command", {"command": "touch e2e_touched.txt", "description": "Create a file"}),
        # Gemini CLI 0.61 names the argument file_path, Qwen Code 0.15 absolute_path.
        "read_ok": ("read_file", {"file_path": f"{workdir}/hello.txt", "absolute_path": f"{workdir}/hello.txt"}),
        "read_fail": ("read_file", {"file_path": f"{workdir}/e2e_missing.txt",
                                    "absolute_path": f"{workdir}/e2e_missing.txt"}),
    }[step]


def pi_call(step, workdir):
    """(tool name, args) of a pi step (its built-in `bash` and `read` tools)."""
    return {
        "shell_ok": ("bash", {"command": "echo e2e-ok"}),
        "shell_fail": ("bash", {"command": "ls /e2e_missing_dir"}),
        "read_ok": ("read", {"path": f"{workdir}/hello.txt"}),
        "read_fail": ("read", {"path": f"{workdir}/e2e_missing.txt"}),
    }[step]


def texts(content):
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict)]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    lock = threading.Lock()

    def log_message(self, *_):
        pass

    def note(self, **kv):
        with self.lock, open(ARGS.log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, **kv}) + "\n")

    def reply_json(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_sse(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, name, data):
        self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

    def do_GET(self):
        self.note()
        if self.path.split("?")[0].endswith("/models"):
            model = {"type": "model", "id": "mock-model", "object": "model", "display_name": "Mock",
                     "created_at": "2025-01-01T00:00:00Z", "created": 1735689600, "owned_by": "e2e"}
            return self.reply_json(200, {"data": [model], "object": "list", "has_more": False})
        self.reply_json(404, {"error": {"type": "not_found_error", "message": "no such path"}})

    def do_HEAD(self):
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        if path.endswith("/count_tokens"):
            self.note()
            return self.reply_json(200, {"input_tokens": 42})
        if path.endswith("/v1/messages"):
            return self.messages(body)
        if path.endswith("/responses"):
            return self.openai_responses(body)
        if path.endswith("/chat/completions"):
            return self.openai_chat(body)
        if path.endswith(":countTokens"):
            self.note()
            return self.reply_json(200, {"totalTokens": 42})
        if path.endswith(":streamGenerateContent") or path.endswith(":generateContent"):
            return self.gemini(body, path, "alt=sse" in self.path)
        self.note()
        self.reply_json(404, {"error": {"type": "not_found_error", "message": "no such path"}})

    # ---- Anthropic Messages
    def messages(self, body):
        msgs = body.get("messages") or []
        tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        said = "\n".join(t for m in msgs if m.get("role") == "user" for t in texts(m.get("content")))
        m = MARK.search(said)
        plan = [s for s in m.group(1).split(",") if s] if m else []
        turn = sum(1 for x in msgs if x.get("role") == "assistant" and isinstance(x.get("content"), list)
                   and any(isinstance(b, dict) and b.get("type") == "tool_use" for b in x["content"]))
        if "{{e2e-sub}}" in said:
            blocks, stop = [{"type": "text", "text": "pong"}], "end_turn"
        elif turn < len(plan) and tools:
            name, inp = anthropic_tool(plan[turn], ARGS.workdir)
            if name == "Agent" and "Agent" not in tools and "Task" in tools:
                name = "Task"
            blocks, stop = [{"type": "tool_use", "id": "toolu_e2e" + uuid.uuid4().hex[:20], "name": name,
                             "input": inp}], "tool_use"
        else:
            blocks, stop = [{"type": "text", "text": f"E2E done after {turn} tool turn(s)."}], "end_turn"
        self.note(api="anthropic", turn=turn, stop=stop, tools=[b.get("name") for b in blocks])
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0}
        msg = {"id": "msg_e2e" + uuid.uuid4().hex[:16], "type": "message", "role": "assistant",
               "model": body.get("model", "mock-model"), "stop_sequence": None}
        if not body.get("stream"):
            return self.reply_json(200, {**msg, "content": blocks, "stop_reason": stop, "usage": usage})
        self.start_sse()
        self.event("message_start", {"type": "message_start",
                                     "message": {**msg, "content": [], "stop_reason": None, "usage": usage}})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                start, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": b["text"]}
            else:
                start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
            self.event("content_block_start", {"type": "content_block_start", "index": i, "content_block": start})
            self.event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
            self.event("content_block_stop", {"type": "content_block_stop", "index": i})
        self.event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 10}})
        self.event("message_stop", {"type": "message_stop"})
        self.wfile.flush()

    # ---- OpenAI Responses
    def openai_responses(self, body):
        items = body.get("input") if isinstance(body.get("input"), list) else []
        tools = set()
        for t in body.get("tools") or []:
            if isinstance(t, dict):
                tools.add(t.get("name") or (t.get("function") or {}).get("name"))
                tools.update(tt.get("name") for tt in t.get("tools") or [] if isinstance(tt, dict))
        said = "\n".join(t for it in items if isinstance(it, dict) and it.get("type") == "message"
                         and it.get("role") == "user" for t in texts(it.get("content")))
        if isinstance(body.get("input"), str):
            said = body["input"]
        m = MARK.search(said)
        plan = [s for s in m.group(1).split(",") if s] if m else []
        turn = sum(1 for it in items if isinstance(it, dict) and it.get("type") == "function_call")
        reply = None
        if CODEX_COMPACT in said:  # Codex compacting: the summary that replaces the history
            reply = COMPACT_SUMMARY
        elif "E2E_COMPACTION_SUMMARY" in said:  # the compacted history goes on: the turn ends
            reply = "E2E done after compaction."
        elif "{{e2e-sub}}" in said and turn >= len(plan):  # a Codex subagent, its own script done
            reply = "pong"
        if reply is None and turn < len(plan) and tools:
            ns = None
            if plan[turn] in ("agent", "wait_agent"):
                name, arguments, ns = codex_agent_call(plan[turn], items)
            else:
                name, arguments = openai_call(plan[turn].replace("_full", "_ok"), tools)
            out = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:16], "status": "completed",
                   "call_id": "call_" + uuid.uuid4().hex[:16], "name": name, "arguments": arguments}
            if ns:
                out["namespace"] = ns
        else:
            name = None
            out = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:16], "status": "completed",
                   "role": "assistant",
                   "content": [{"type": "output_text", "text": reply or f"E2E done after {turn} tool turn(s).",
                                "annotations": []}]}
        # `shell_full`: a shell call whose response reports the context as full (what a long
        # conversation costs), so Codex auto-compacts before its next model call.
        full = turn < len(plan) and plan[turn] == "shell_full" and reply is None
        self.note(api="openai", turn=turn, tool=name, full=full, compact=CODEX_COMPACT in said)
        resp = {"id": "resp_" + uuid.uuid4().hex[:16], "object": "response", "created_at": 1735689600,
                "model": body.get("model", "mock-model"), "status": "in_progress", "output": []}
        self.start_sse()
        seq = iter(range(1000))
        self.event("response.created", {"type": "response.created", "sequence_number": next(seq), "response": resp})
        self.event("response.output_item.added", {"type": "response.output_item.added",
                                                  "sequence_number": next(seq), "output_index": 0, "item": out})
        self.event("response.output_item.done", {"type": "response.output_item.done",
                                                 "sequence_number": next(seq), "output_index": 0, "item": out})
        used = CONTEXT_FULL if full else 100
        usage = {"input_tokens": used, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": used + 10}
        self.event("response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                          "response": {**resp, "status": "completed", "output": [out],
                                                       "usage": usage}})
        self.wfile.flush()


    # ---- OpenAI Chat Completions (Qwen Code)
    def openai_chat(self, body):
        msgs = body.get("messages") or []
        tools = {(t.get("function") or {}).get("name") for t in body.get("tools") or [] if isinstance(t, dict)}
        said = "\n".join(t for m in msgs if m.get("role") == "user" for t in texts(m.get("content")))
        m = MARK.search(said)
        plan = [s for s in m.group(1).split(",") if s] if m else []
        turn = sum(1 for x in msgs if x.get("role") == "assistant" and x.get("tool_calls"))
        if turn < len(plan) and tools:
            # pi offers only `bash`/`read`/`edit`/`write`; OpenCode `bash` among many more
            # (`todowrite`, `webfetch`, `glob`); Qwen Code the Gemini CLI family's names.
            opencode = "bash" in tools and any(t in tools for t in ("todowrite", "webfetch", "glob"))
            if "bash" in tools and not opencode:
                name, args = pi_call(plan[turn], ARGS.workdir)
            else:
                name, args = fork_call(plan[turn], ARGS.workdir, tools)
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": "call_e2e" + uuid.uuid4().hex[:16], "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args)}}]}
            finish = "tool_calls"
        else:
            name, msg, finish = None, {"role": "assistant", "content": f"E2E done after {turn} tool turn(s)."}, "stop"
        self.note(api="openai-chat", turn=turn, tool=name, offered=sorted(t for t in tools if t))
        cid, model = "chatcmpl-e2e" + uuid.uuid4().hex[:12], body.get("model", "mock-model")
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        if not body.get("stream"):
            if "tool_calls" in msg:
                msg = {**msg, "tool_calls": [{k: v for k, v in t.items() if k != "index"} for t in msg["tool_calls"]]}
            return self.reply_json(200, {"id": cid, "object": "chat.completion", "created": 1735689600, "model": model,
                                         "choices": [{"index": 0, "message": msg, "finish_reason": finish}],
                                         "usage": usage})
        chunk = lambda delta, fin=None: {"id": cid, "object": "chat.completion.chunk", "created": 1735689600,
                                         "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": fin}]}
        self.start_sse()
        self.wfile.write(b"data: " + json.dumps(chunk({"role": "assistant", "content": ""})).encode() + b"\n\n")
        delta = {"tool_calls": msg["tool_calls"]} if "tool_calls" in msg else {"content": msg["content"]}
        self.wfile.write(b"data: " + json.dumps(chunk(delta)).encode() + b"\n\n")
        self.wfile.write(b"data: " + json.dumps(chunk({}, finish)).encode() + b"\n\n")
        self.wfile.write(b"data: " + json.dumps({"id": cid, "object": "chat.completion.chunk", "created": 1735689600,
                                                  "model": model, "choices": [], "usage": usage}).encode() + b"\n\n")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    # ---- Gemini generateContent (Gemini CLI)
    def gemini(self, body, path, sse):
        contents = body.get("contents") or []
        gc = body.get("generationConfig") or body.get("config") or {}
        tools = {f.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
                 for f in t.get("functionDeclarations") or t.get("function_declarations") or [] if isinstance(f, dict)}
        said = "\n".join(p.get("text", "") for c in contents if c.get("role") == "user"
                         for p in c.get("parts") or [] if isinstance(p, dict))
        m = MARK.search(said)
        plan = [s for s in m.group(1).split(",") if s] if m else []
        turn = sum(1 for c in contents if c.get("role") == "model"
                   and any(isinstance(p, dict) and "functionCall" in p for p in c.get("parts") or []))
        if gc.get("responseMimeType") == "application/json" or gc.get("responseJsonSchema") or gc.get("responseSchema"):
            # a side query (routing, next speaker) that wants JSON of a schema: the smallest valid object
            parts, name = [{"text": json.dumps(schema_value(gc.get("responseJsonSchema") or gc.get("responseSchema")))}], None
        elif turn < len(plan) and tools:
            name, args = fork_call(plan[turn], ARGS.workdir)
            parts = [{"functionCall": {"name": name, "args": args}}]
        else:
            name, parts = None, [{"text": f"E2E done after {turn} tool turn(s)."}]
        self.note(api="gemini", turn=turn, tool=name)
        resp = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
                "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
                "modelVersion": "gemini-2.5-pro", "responseId": "e2e_" + uuid.uuid4().hex[:12]}
        if path.endswith(":generateContent"):
            return self.reply_json(200, resp)
        if not sse:
            return self.reply_json(200, [resp])
        self.start_sse()
        self.wfile.write(b"data: " + json.dumps(resp).encode() + b"\r\n\r\n")
        self.wfile.flush()


def schema_value(s):
    """The smallest value of a JSON schema (enums take "user" when offered, else their first)."""
    s = s or {}
    if "enum" in s:
        return "user" if "user" in s["enum"] else s["enum"][0]
    t = s.get("type", "object")
    t = t.lower() if isinstance(t, str) else "object"
    if t == "object":
        return {k: schema_value(v) for k, v in (s.get("properties") or {}).items()}
    return {"array": [], "number": 0, "integer": 0, "boolean": False}.get(t, "e2e")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--log", required=True)
    ARGS = ap.parse_args()
    ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler).serve_forever()
