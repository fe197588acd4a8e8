"""A stub ACP agent for the `wrap` tests: answers newline-delimited JSON-RPC on stdin like an
ACP agent does (initialize, session/new, session/prompt with a tool call and a permission
request to the editor), deterministically, and exits 3 at EOF. It also writes lines a tee must
pass through untouched: not JSON, trailing blanks, UTF-8, CRLF, and a last line without newline."""
import json
import sys


def send(obj):
    sys.stdout.write(json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n")
    sys.stdout.flush()


sys.stderr.write("stub-acp: starting\n")
sys.stderr.flush()
prompt_id = None
for raw in sys.stdin:
    msg = json.loads(raw)
    method = msg.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"protocolVersion": 1, "agentCapabilities": {},
                                                 "agentInfo": {"name": "stub-acp", "version": "1.0.0"}}})
        sys.stdout.write("not json at all   \n")
        sys.stdout.flush()
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": msg["id"], "result": {"sessionId": "sess-wrap-1"}})
    elif method == "session/prompt":
        prompt_id = msg["id"]
        sid = msg["params"]["sessionId"]
        up = lambda u: send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": sid, "update": u}})
        up({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Vérifions… ✓"}})
        up({"sessionUpdate": "tool_call", "toolCallId": "call-1", "title": "run tests", "kind": "execute",
            "status": "pending", "rawInput": {"command": "make test"}})
        up({"sessionUpdate": "tool_call_update", "toolCallId": "call-1", "status": "completed",
            "rawOutput": {"output": "ok"}})
        sys.stdout.write('{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess-wrap-1",'
                         '"update":{"sessionUpdate":"plan","entries":[]}}}\r\n')
        send({"jsonrpc": "2.0", "id": 100, "method": "session/request_permission", "params": {
            "sessionId": sid, "toolCall": {"toolCallId": "call-2", "title": "sudo make install", "kind": "execute"},
            "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "reject", "name": "Reject", "kind": "reject_once"}]}})
    elif msg.get("id") == 100 and "result" in msg:
        send({"jsonrpc": "2.0", "id": prompt_id, "result": {"stopReason": "end_turn"}})
sys.stderr.write("stub-acp: stdin closed\n")
sys.stdout.write("bye")
sys.stdout.flush()
sys.exit(3)
