#!/usr/bin/env python3
"""Runs the README's "## Quickstart" commands literally, in order, in a fresh HOME, inside a
loopback-only network namespace, and fails when a step breaks. Called by quickstart-check.sh.

How each README command line is run (every ```sh block of the section, in order):
  export K=V                 sets K for every later step
  ... # keeps running        started in the background (a second `aep-bridge serve` restarts
                             the first); the bridge is waited for on 127.0.0.1:8787
  ... phoenix serve ...      the real Arize Phoenix (installed by the README's own pip line),
                             in the background; its port is waited for, and at the end the
                             spans of one more agent session are read back from its REST API
  docker run ... jaeger ...  offline stand-in: rotel (a real OTel collector) on the same port,
                             forwarding to span_sink.py
  ... claude                 the user's agent: run in tmux with the mock model API
                             (mock_model.py) and a first-run-free ~/.claude.json; the checker
                             types the prompt
  ... <request-id> ...       the id is taken from the `aep-bridge tail --timeline` output
  anything else              bash -c, must exit 0
The commands run in a snapshot of the committed tree (`git archive HEAD`, what a fresh clone
gets; --tree=worktree uses the working tree instead). Offline concessions (the only ones):
CARGO_HOME/RUSTUP_HOME stay the machine's (the crate cache; CARGO_NET_OFFLINE=true),
CARGO_TARGET_DIR is the caller's, else the project's target/ (compiled dependencies reused) and `cargo install`
installs into the fresh HOME's ~/.cargo. `--prebuild` runs the same `cargo install` lines
ahead (online, into a scratch root; run.sh starts it beside the other scenarios and CI at
its start, at the lowest priority), so the quickstart's own `cargo install` finds its
release build done in that target dir and installs it: the same commands, built once.

Usage: quickstart.py --clients DIR --checkout DIR [--rotel PATH] [--tree head|worktree]
       quickstart.py --prebuild --checkout DIR [--tree head|worktree]
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
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
ROOT = REPO  # where the README's commands run: set by main()
MOCK_PORT, SINK_PORT = 9100, 9200
# Arize Phoenix's UI and OTLP/HTTP port (its default).
PHOENIX_PORT = 6006
RESULTS = {"pass": 0, "fail": 0}
TMUX = ["tmux", "-L", "aep-quickstart", "-f", "/dev/null"]


def check(name, ok, detail=""):
    RESULTS["pass" if ok else "fail"] += 1
    print(f"{'PASS' if ok else 'FAIL'} quickstart: {name}" + (f"  ({detail})" if detail and not ok else ""), flush=True)
    return ok


def wait_for(pred, secs):
    end = time.time() + secs
    while time.time() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.25)
    return pred()


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.3).close()
        return True
    except OSError:
        return False


def quickstart_commands(readme):
    """The command lines of the ```sh blocks of the Quickstart section, in order."""
    text = open(readme).read()
    start = text.index("\n## Quickstart")
    end = text.find("\n## ", start + 5)
    section = text[start:end if end > 0 else len(text)]
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        joined = block.replace("\\\n", " ")
        cmds += [l.strip() for l in joined.splitlines() if l.strip() and not l.strip().startswith("#")]
    return cmds


def user_env(home, clients):
    """The environment of the user typing the README's commands in the fresh `home`."""
    real_home = os.path.expanduser("~")
    bin_dirs = [p for p in os.environ.get("PATH", "").split(":")
                if p and not os.path.exists(os.path.join(p, "aep-bridge"))]
    return {
        "HOME": home, "LANG": os.environ.get("LANG", "C.UTF-8"), "TERM": "xterm-256color",
        "PATH": ":".join([os.path.join(home, ".cargo", "bin"), clients] + bin_dirs),
        "CARGO_HOME": os.environ.get("CARGO_HOME", os.path.join(real_home, ".cargo")),
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", os.path.join(real_home, ".rustup")),
        "CARGO_INSTALL_ROOT": os.path.join(home, ".cargo"), "CARGO_NET_OFFLINE": "true",
        "CARGO_TARGET_DIR": os.environ.get("CARGO_TARGET_DIR") or os.path.join(REPO, "target"),
    }


def prebuild():
    """The README's `cargo install` lines, run ahead in the checkout with the user's cargo
    environment but a scratch HOME and install root, and online (a cold crate cache): the
    release build lands in the shared CARGO_TARGET_DIR, so the quickstart's own, literal
    `cargo install` finds it built and only installs it. Returns the exit code."""
    lines = [l for l in quickstart_commands(os.path.join(ROOT, "README.md")) if l.startswith("cargo install")]
    if not lines:
        print("  no `cargo install` line in the README's Quickstart: nothing to prebuild", flush=True)
        return 0
    home = tempfile.mkdtemp(prefix="aep-quickstart-prebuild-")
    env = user_env(home, "")
    del env["CARGO_NET_OFFLINE"]
    rc = 0
    try:
        for line in lines:
            t0 = time.time()
            r = subprocess.run(line, shell=True, executable="/bin/bash", cwd=ROOT, env=env)
            print(f"  prebuild `{line}`: exit {r.returncode} in {time.time() - t0:.0f}s", flush=True)
            rc = rc or r.returncode
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return rc


class Quickstart:
    def __init__(self, a):
        self.a = a
        self.home = tempfile.mkdtemp(prefix="aep-quickstart-home-")
        self.logs = os.path.join(self.home, "_checker")
        os.makedirs(self.logs)
        self.proj = os.path.join(self.home, "my-project")
        os.makedirs(self.proj)
        with open(os.path.join(self.proj, "hello.txt"), "w") as f:
            f.write("hello quickstart\n")
        subprocess.run("git init -q && git add -A && git -c user.email=q@x -c user.name=q commit -qm init",
                       shell=True, cwd=self.proj, check=True)
        self.env = user_env(self.home, a.clients)
        self.bg = {}  # name -> (Popen, output file)
        self.procs = []
        self.agent_runs = 0
        self.spans = os.path.join(self.logs, "spans.jsonl")

    def start(self, name, cmd, shell=False, env=None, cwd=None):
        out = os.path.join(self.logs, f"{name}.log")
        p = subprocess.Popen(cmd, shell=shell, executable="/bin/bash" if shell else None, cwd=cwd or ROOT,
                             env=env or self.env, stdout=open(out, "w"), stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.procs.append(p)
        return p, out

    def stop(self, p):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    # ---- the steps
    def background(self, line):
        name = ("serve" if "aep-bridge serve" in line else "tail" if " tail" in line
                else "phoenix" if "phoenix serve" in line else f"bg{len(self.bg)}")
        if name == "serve" and "serve" in self.bg:  # the README restarts the bridge
            self.stop(self.bg["serve"][0])
            wait_for(lambda: not port_open(8787), 10)
            name = "serve2"
        p, out = self.start(name, line, shell=True)
        self.bg[name] = (p, out)
        if name.startswith("serve"):
            ok = wait_for(lambda: port_open(8787) or p.poll() is not None, 20) and p.poll() is None
            check(f"`{line}` listens on 127.0.0.1:8787", ok, open(out).read()[-400:])
            if name == "serve2" and "tail" in self.bg:  # tail follows the new bridge on its own
                pass
        elif name == "phoenix":
            ok = wait_for(lambda: port_open(PHOENIX_PORT) or p.poll() is not None, 120) and p.poll() is None
            check(f"`{line}` serves its UI and OTLP/HTTP on {PHOENIX_PORT}", ok, open(out).read()[-400:])
        else:
            time.sleep(1)
            check(f"`{line}` stays up", p.poll() is None, open(out).read()[-400:])

    def docker(self, line):
        if "jaeger" not in line:
            print(f"  (not run offline: {line})")
            return
        port = re.search(r"-p (\d+):4317", line)
        if not self.a.rotel or not port:
            print(f"SKIP quickstart: `{line}`: no rotel-agent to stand in for Jaeger")
            return
        print(f"  offline stand-in for `{line}`: rotel on 127.0.0.1:{port.group(1)} -> span sink")
        self.start("sink", [sys.executable, os.path.join(HERE, "span_sink.py"), "--port", str(SINK_PORT),
                            "--out", self.spans])
        self.start("rotel", [self.a.rotel, "start", "--exporter", "otlp", "--otlp-exporter-endpoint",
                             f"http://127.0.0.1:{SINK_PORT}", "--otlp-exporter-protocol", "http",
                             "--otlp-grpc-endpoint", f"127.0.0.1:{port.group(1)}",
                             "--otlp-http-endpoint", "127.0.0.1:24318",
                             "--pid-file", os.path.join(self.logs, "rotel.pid"),
                             "--log-file", os.path.join(self.logs, "rotel-agent.log")])
        self.jaeger_port = int(port.group(1))
        check(f"Jaeger stand-in listens on {port.group(1)}",
              bool(wait_for(lambda: port_open(self.jaeger_port) and port_open(SINK_PORT), 15)))

    def agent(self, line, plan="bash_py"):
        """The user's `claude` in tmux, against the mock model, with a typed prompt."""
        self.agent_runs += 1
        if not port_open(MOCK_PORT):
            self.start("mock", [sys.executable, os.path.join(HERE, "mock_model.py"), "--port", str(MOCK_PORT),
                                "--workdir", self.proj, "--log", os.path.join(self.logs, "model.jsonl")])
            wait_for(lambda: port_open(MOCK_PORT), 10)
        key = "sk-ant-quickstart-offline-0123456789"
        cfg = os.path.join(self.home, ".claude.json")
        with open(cfg, "w") as f:  # first-run dialogs already answered
            json.dump({"hasCompletedOnboarding": True, "theme": "dark", "numStartups": 3,
                       "customApiKeyResponses": {"approved": [key[-20:]], "rejected": []},
                       "projects": {self.proj: {"hasTrustDialogAccepted": True,
                                                "hasCompletedProjectOnboarding": True, "allowedTools": []}}}, f)
        env = dict(self.env, ANTHROPIC_BASE_URL=f"http://127.0.0.1:{MOCK_PORT}", ANTHROPIC_API_KEY=key,
                   DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                   DISABLE_ERROR_REPORTING="1", CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL="1")
        launch = os.path.join(self.logs, f"agent{self.agent_runs}.sh")
        with open(launch, "w") as f:
            f.write("#!/bin/bash\n" + "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env.items()) +
                    f"{line}\n")
        os.chmod(launch, 0o755)
        subprocess.run(TMUX + ["kill-server"], capture_output=True)
        subprocess.run(TMUX + ["new-session", "-d", "-s", "qs", "-x", "160", "-y", "50", launch], check=True)
        model_log = os.path.join(self.logs, "model.jsonl")

        def model_turns():
            try:
                return sum(1 for l in open(model_log) if '"api": "anthropic"' in l and '"tools": [null]' not in l)
            except FileNotFoundError:
                return 0
        before = model_turns()
        ready = wait_for(lambda: "❯" in self.pane() or "? for shortcuts" in self.pane(), 30)
        typed = False
        for _ in range(3):  # a slow machine may drop keys typed before the input box is live
            time.sleep(2)
            subprocess.run(TMUX + ["send-keys", "-t", "qs", "-l", f"Please do it {{{{e2e:{plan}}}}}"])
            time.sleep(0.5)
            subprocess.run(TMUX + ["send-keys", "-t", "qs", "Enter"])
            if wait_for(lambda: model_turns() > before, 20):
                typed = True
                break
        open(os.path.join(self.logs, f"screen{self.agent_runs}_start.txt"), "w").write(self.pane())
        check(f"`{line}` starts the agent (prompt typed, model called)", bool(ready) and typed, self.pane()[-400:])

    def pane(self):
        return subprocess.run(TMUX + ["capture-pane", "-p", "-t", "qs"], capture_output=True, text=True).stdout

    def finish_agent(self):
        wait_for(lambda: "E2E done" in self.pane(), 30)
        open(os.path.join(self.logs, f"screen{self.agent_runs}.txt"), "w").write(self.pane())
        subprocess.run(TMUX + ["send-keys", "-t", "qs", "/exit", "Enter"])
        time.sleep(3)
        subprocess.run(TMUX + ["kill-server"], capture_output=True)

    def respond(self, line):
        tail_out = self.bg.get("tail", (None, None))[1]
        pat = re.compile(r"attention\.requested .*→ aep-bridge respond (\S+)")
        found = wait_for(lambda: tail_out and pat.search(open(tail_out).read()), 60)
        if not check("`aep-bridge tail --timeline` shows the attention.requested line with its id", bool(found),
                     (open(tail_out).read()[-600:] if tail_out else "no tail running") + " | screen: " + self.pane()[-300:]):
            return
        cmd = line.replace("<request-id>", found.group(1))
        r = subprocess.run(cmd, shell=True, executable="/bin/bash", cwd=ROOT, env=self.env, capture_output=True,
                           text=True, timeout=90)
        open(os.path.join(self.logs, "respond.log"), "w").write(r.stdout + r.stderr)
        check(f"`{line}` exits 0 (answered)", r.returncode == 0 and "attention.resolved" in r.stdout,
              (r.stdout + r.stderr)[-400:])
        answer = os.path.join(self.proj, "answer.txt")
        check("the allowed tool ran in ~/my-project",
              bool(wait_for(lambda: os.path.isfile(answer) and open(answer).read().strip() == "42", 30)))
        self.finish_agent()

    def run_line(self, line):
        t0 = time.time()
        r = subprocess.run(line, shell=True, executable="/bin/bash", cwd=ROOT, env=self.env, capture_output=True,
                           text=True, timeout=900)
        open(os.path.join(self.logs, f"step{int(t0)}.log"), "w").write(r.stdout + r.stderr)
        check(f"`{line}` exits 0 ({time.time() - t0:.0f}s)", r.returncode == 0, (r.stdout + r.stderr)[-600:])
        return r.returncode == 0

    def run(self):
        cmds = quickstart_commands(os.path.join(ROOT, "README.md"))
        check("README has a Quickstart with commands", len(cmds) >= 6, str(cmds))
        for line in cmds:
            print(f"$ {line}", flush=True)
            m = re.match(r"export (\w+)=(\S+)$", line)
            if m:
                self.env[m.group(1)] = m.group(2)
            elif line.startswith("docker "):
                self.docker(line)
            elif "# keeps running" in line:
                self.background(line.split("#")[0].strip())
            elif re.search(r"(^|&& )claude\b", line):
                self.agent(line)
                self.agent_line = line
            elif "<request-id>" in line:
                self.respond(line)
            else:
                ok = self.run_line(line)
                if line.startswith("cargo install"):
                    where = shutil.which("aep-bridge", path=self.env["PATH"]) or ""
                    check("aep-bridge and aep-hook are on PATH from ~/.cargo/bin", ok and where.startswith(self.home)
                          and os.path.isfile(os.path.join(os.path.dirname(where), "aep-hook")), where)
                    if not ok:
                        return
        self.verify()

    def verify(self):
        logs_dir = os.path.join(self.home, ".aep", "logs", "claude-code")
        logs = sorted(os.listdir(logs_dir)) if os.path.isdir(logs_dir) else []
        check("the session is logged under ~/.aep/logs/claude-code/", len(logs) >= 1, str(logs))
        for f in logs:
            r = subprocess.run(["aep-bridge", "validate", os.path.join(logs_dir, f)], env=self.env,
                               capture_output=True, text=True)
            check(f"`aep-bridge validate` accepts {f}", r.returncode == 0, (r.stdout + r.stderr)[-300:])
        tail_out = self.bg.get("tail", (None, None))[1]
        text = open(tail_out).read() if tail_out else ""
        check("tail showed the session, the run and the tool", "── session" in text and "▸ run" in text
              and "tool.completed" in text and "attention.resolved" in text, text[-600:])
        if "serve2" in self.bg and "phoenix" in self.bg and hasattr(self, "agent_line"):
            # the restarted bridge exports to Phoenix: one more agent session, then its spans
            # in Phoenix's project, read back through Phoenix's own REST API
            self.agent(self.agent_line, plan="read_ok")
            self.finish_agent()

            def phoenix_tools():
                url = f"http://127.0.0.1:{PHOENIX_PORT}/v1/projects/aep-bridge/spans?limit=1000"
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        rows = json.load(r).get("data", [])
                except (OSError, ValueError):
                    return []
                return [s["name"] for s in rows if s.get("name", "").startswith("execute_tool")]
            got = wait_for(phoenix_tools, 30)
            check("spans reach Phoenix's project aep-bridge (execute_tool Read)",
                  bool(got) and "execute_tool Read" in got, str(got)[:300])
        if "serve2" in self.bg and getattr(self, "jaeger_port", None) and hasattr(self, "agent_line"):
            # the restarted bridge exports: one more agent session, then its spans at "Jaeger"
            self.agent(self.agent_line, plan="read_ok")
            self.finish_agent()

            def tool_spans():
                rows = []
                try:  # the sink may be appending: up to the last complete line
                    rows = [json.loads(l) for l in open(self.spans).read().splitlines(keepends=True) if l.endswith("\n")]
                except FileNotFoundError:
                    pass
                return [s for s in rows if s["service"] == "claude-code" and s["name"].startswith("execute_tool")]
            got = wait_for(tool_spans, 20)
            check("spans reach the Jaeger port (service claude-code, execute_tool Read)",
                  bool(got) and any(s["name"] == "execute_tool Read" for s in got), str(got)[:300])

    def cleanup(self):
        subprocess.run(TMUX + ["kill-server"], capture_output=True)
        for p in reversed(self.procs):
            self.stop(p)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", default="")
    ap.add_argument("--rotel", default="")
    ap.add_argument("--checkout", required=True)
    ap.add_argument("--tree", choices=["head", "worktree"], default="head")
    ap.add_argument("--prebuild", action="store_true", help="only run the `cargo install` lines ahead (see prebuild)")
    a = ap.parse_args()
    if not a.prebuild and not a.clients:
        ap.error("--clients is required")
    global ROOT
    if a.tree == "worktree":
        ROOT = REPO
    else:
        shutil.rmtree(a.checkout, ignore_errors=True)
        os.makedirs(a.checkout)
        subprocess.run(f"git -C {shlex.quote(REPO)} archive HEAD | tar -x -C {shlex.quote(a.checkout)}",
                       shell=True, check=True)
        ROOT = a.checkout
    print(f"  commands run in {ROOT} ({a.tree})", flush=True)
    if a.prebuild:
        sys.exit(prebuild())
    with open("/proc/self/net/dev") as f:
        links = sorted(l.split(":")[0].strip() for l in f.readlines()[2:])
    if links != ["lo"]:
        sys.exit(f"REFUSING: links {links}: run through `unshare -n` (quickstart-check.sh does)")
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    q = Quickstart(a)
    print(f"  fresh HOME {q.home}", flush=True)
    try:
        q.run()
    except Exception as ex:
        check("ran to the end", False, repr(ex))
    finally:
        q.cleanup()
    if not RESULTS["fail"]:
        shutil.rmtree(q.home, ignore_errors=True)
    else:
        print(f"  kept {q.home} (the checker's logs are in _checker/)", flush=True)
    print(f"{RESULTS['pass']} passed, {RESULTS['fail']} failed", flush=True)
    sys.exit(1 if RESULTS["fail"] else 0)


if __name__ == "__main__":
    main()
