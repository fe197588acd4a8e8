#!/usr/bin/env bash
# Every agent at its newest release: moves each listed agent's npm packages to their newest
# published version (`npm view`), locks that set afresh, installs it into a cache of its own
# (`latest/` under the e2e cache, beside the pinned one) and runs the agents' scenarios once,
# together (an agent whose newest cannot be installed here stays at its pin, said so). Then
# prints a drift report per agent: pinned and newest version, its scenarios'
# tally, the hook events and fields its adapter does not know (the bridge's
# `x.{vendor}.session.drift` records), the OTel event names its profile does not know
# (`x.{vendor}.otel.unknown`), and its failed checks. Every hook payload of the run is kept in
# its scenario's logs/hooks.received.jsonl (AEP_E2E_RECORD_HOOKS), ready as test data. PyPI
# agents are compared with their pin only (moving one is a re-freeze of its requirements
# file). Informational: it always exits 0 (CI does not fail on a new release); the pinned
# suite is run.sh.
#
#   conformance/e2e/latest.sh [agent ...]   (default: all; agents: the keys of AGENTS below)
#
# AEP_E2E_CACHE moves the caches (latest/ under it); AEP_E2E_BIN as in run.sh.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${AEP_E2E_CACHE:-$HOME/.cache/aep-e2e}"
LATEST="$CACHE/latest"

# agent -> "npm packages moved to latest (pypi:NAME for PyPI)|vendor log folder|scenarios|its failopen routes"
declare -A AGENTS=(
  [claude-code]="@anthropic-ai/claude-code|claude-code|claude claude-wrap permission|claude claude-wrap"
  [codex]="@openai/codex|codex|codex codex-wrap codex-subagent codex-compact|codex codex-app"
  [gemini-cli]="@google/gemini-cli|gemini-cli|gemini gemini-acp|gemini gemini-acp"
  [qwen-code]="@qwen-code/qwen-code|qwen-code|qwen qwen-acp|qwen qwen-acp"
  [opencode]="opencode-ai|opencode|opencode-sse opencode-plugin opencode-run opencode-companion|opencode"
  [kilocode]="@kilocode/cli|kilocode|kilo-run kilo-sse|kilo"
  [kimi-code]="@moonshot-ai/kimi-code|kimi-code|kimi-ws|"
  [cline]="cline|cline|cline|cline"
  [pi]="@earendil-works/pi-coding-agent @earendil-works/pi-ai @earendil-works/pi-agent-core @earendil-works/pi-tui|pi|pi-wrap pi-ext|pi-rpc"
  [copilot-cli]="@github/copilot|copilot-cli|copilot|copilot"
  [droid]="@factory/cli @factory/cli-linux-x64|droid|droid|droid"
  [hermes]="pypi:hermes-agent|hermes|hermes|hermes"
  [openhands]="pypi:openhands-agent-server|openhands|openhands openhands-observer openhands-restart|"
  [pydantic-ai]="pypi:pydantic-ai-slim|agui|agui|"
)
agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(claude-code codex gemini-cli qwen-code opencode kilocode kimi-code cline pi copilot-cli droid hermes openhands pydantic-ai)

if [ -z "${AEP_E2E_BIN:-}" ]; then
  (cd "$ROOT" && cargo build -q -p aep-bridge-cli -p aep-hook) || { echo "latest: cargo build failed"; exit 0; }
  export AEP_E2E_BIN="$ROOT/target/debug"
fi

declare -a REPORT=() NPM=() SCEN=()
declare -A PINNED NEWEST
for agent in "${agents[@]}"; do
  spec="${AGENTS[$agent]:-}"
  [ -n "$spec" ] || { echo "latest: unknown agent $agent"; continue; }
  IFS='|' read -r pkgs vendor scen routes <<<"$spec"
  if [[ "$pkgs" == pypi:* ]]; then
    # PyPI: the requirement file's pin (extras allowed) against the index's newest.
    pkg="${pkgs#pypi:}"
    req=$(grep -lE "^$pkg(\[[^]]*\])?==" "$HERE"/requirements-*.txt | head -1)
    pinned=$(grep -hE "^$pkg(\[[^]]*\])?==" "$req" | sed 's/.*==//')
    # pip lists only what the asking Python can install: a package that needs a newer Python
    # than python3 (openhands-agent-server needs >= 3.12) is asked for as that Python.
    newest=""
    for pyver in "" 3.12 3.13; do
      newest=$(python3 -m pip index versions "$pkg" ${pyver:+--python-version "$pyver"} 2>/dev/null \
        | sed -n 's/^[^ ]* (\(.*\))$/\1/p' | head -1)
      [ -z "$newest" ] || break
    done
    if [ -z "$newest" ]; then
      REPORT+=("$agent: pinned $pinned; PyPI named no version of $pkg for python3, 3.12 or 3.13 (index not reachable?)")
    elif [ "$newest" != "$pinned" ]; then
      REPORT+=("$agent: pinned $pinned, newest $newest on PyPI: not run (move the pin in $(basename "$req"), then run.sh $scen)")
    else
      REPORT+=("$agent: pinned $pinned is the newest on PyPI ($newest); run.sh $scen covers it")
    fi
    continue
  fi
  NPM+=("$agent")
  for p in $pkgs; do
    v=$(npm view "$p" version 2>/dev/null)
    [ -n "$v" ] && NEWEST[$p]="$v"
  done
  for s in $scen; do SCEN+=("$s"); done
done

# The pinned version of an npm package (package.json, either section), or "-".
pin_of() {
  python3 -c "import json, sys; d=json.load(open(sys.argv[1])); print({**d['dependencies'], **d.get('optionalDependencies', {})}.get(sys.argv[2], '-'))" \
    "$HERE/package.json" "$1"
}

# An agent whose newest release cannot be installed here (a platform package the registry
# does not have, a failing install script) stays at its pin, said so in the report, so the
# other agents still run at their newest: each moved agent is installed alone first.
declare -A UNINSTALLABLE
for agent in "${NPM[@]}"; do
  IFS='|' read -r pkgs vendor scen routes <<<"${AGENTS[$agent]}"
  deps=""
  for p in $pkgs; do
    [ -n "${NEWEST[$p]:-}" ] && [ "${NEWEST[$p]}" != "$(pin_of "$p")" ] && deps+="\"$p\": \"${NEWEST[$p]}\","
  done
  [ -n "$deps" ] || continue
  try="$LATEST/try/$agent"
  rm -rf "$try" && mkdir -p "$try"
  echo "{\"name\": \"try-$agent\", \"private\": true, \"dependencies\": {${deps%,}}}" > "$try/package.json"
  if ! (cd "$try" && npm install --no-save --no-audit --no-fund --loglevel=error --cache "$CACHE/npm-cache" \
        >"$try/npm.log" 2>&1); then
    # npm's first line that says what (an install script's own npm errors nest their prefix).
    UNINSTALLABLE[$agent]=$(sed -nE 's/^(npm error )+//p' "$try/npm.log" \
      | grep -vE '^(code|path|command|cwd|errno|signal|A complete log|In most cases)\b' | head -1 | cut -c1-200)
    for p in $pkgs; do unset "NEWEST[$p]"; done
  fi
  rm -rf "$try/node_modules"
done

if [ ${#NPM[@]} -gt 0 ]; then
  # One package.json with every listed agent at its newest, locked afresh, installed once.
  mkdir -p "$LATEST/pkgs"
  moved=$(for p in "${!NEWEST[@]}"; do echo "$p=${NEWEST[$p]}"; done)
  python3 - "$HERE/package.json" "$LATEST/pkgs/package.json" $moved <<'PY'
import json, sys
src, dst, moved = sys.argv[1], sys.argv[2], dict(a.split("=", 1) for a in sys.argv[3:] if "=" in a[1:])
d = json.load(open(src))
for p, v in moved.items():
    sec = next((s for s in ("dependencies", "optionalDependencies") if p in d.get(s, {})), "dependencies")
    d.setdefault(sec, {})[p] = v
json.dump(d, open(dst, "w"), indent=2)
PY
  if (cd "$LATEST/pkgs" && rm -f package-lock.json && npm install --package-lock-only --no-audit --no-fund \
        --loglevel=error --cache "$CACHE/npm-cache" >/dev/null 2>&1); then
    # Failopen drives every hook, plugin and tee route at once: run when any of them is listed.
    scen=$(printf '%s\n' "${SCEN[@]}" failopen | awk '!seen[$0]++' | tr '\n' ' ')
    echo "== latest: run.sh $scen(newest npm releases, cache $LATEST)"
    rm -rf "$LATEST/work"
    # The hook payloads are kept (AEP_E2E_RECORD_HOOKS): a drifted field comes with its recording.
    AEP_E2E_CACHE="$LATEST" AEP_E2E_PACKAGES="$LATEST/pkgs" AEP_E2E_RECORD_HOOKS=1 bash "$HERE/run.sh" $scen > "$LATEST/run.out" 2>&1
    echo "== latest: $(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$LATEST/run.out" | tail -1) (log $LATEST/run.out)"
  else
    echo "latest: npm could not lock the newest set"
  fi
  for agent in "${NPM[@]}"; do
    IFS='|' read -r pkgs vendor scen routes <<<"${AGENTS[$agent]}"
    main="${pkgs%% *}"
    pinned=$(pin_of "$main")
    newest="${NEWEST[$main]:-?}"
    if [ -n "${UNINSTALLABLE[$agent]:-}" ]; then
      newest="$(npm view "$main" version 2>/dev/null) cannot be installed here (${UNINSTALLABLE[$agent]}), so ran at its pin"
    fi
    report=$(python3 - "$LATEST/work" "$LATEST/run.out" "$vendor" "$scen" "$routes" <<'PY'
import glob, json, os, re, sys
work, out, vendor, scen, routes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(), sys.argv[5].split()
hook, otel = set(), set()
for f in glob.glob(os.path.join(work, "*", "data", "logs", vendor, "*.jsonl")):
    for line in open(f, errors="replace"):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        t, d = e.get("type", ""), e.get("data") or {}
        if t == f"x.{vendor}.session.drift":
            hook.update(f"{d.get('kind')} {n}" for n in d.get("names", []))
        elif t == f"x.{vendor}.otel.unknown":
            otel.add(f"otel_event {d.get('event.name', '(unnamed)')}")
mine = re.compile(r"^(PASS|FAIL) (" + "|".join(map(re.escape, scen)) + r")(\[[^\]]*\])?: "
                  + (r"|^(PASS|FAIL) failopen: (" + "|".join(map(re.escape, routes)) + r") " if routes else ""))
lines = [l.rstrip("\n") for l in open(out, errors="replace")] if os.path.exists(out) else []
checks = [l for l in lines if mine.match(l)]
fails = sorted({l[:150] for l in checks if l.startswith("FAIL")})
drift = "; ".join(sorted(hook) + sorted(otel)) or "none"
print(f"{sum(l.startswith('PASS') for l in checks)} passed, {len(fails)} failed; drift: {drift}"
      + (f"; failed: {' | '.join(fails[:6])}" if fails else ""))
PY
)
    REPORT+=("$agent: pinned $pinned, newest $newest: $report")
  done
fi

echo "== drift report (newest releases)"
for line in "${REPORT[@]}"; do echo "$line"; done
[ ${#NPM[@]} -eq 0 ] || echo "(hook payloads received: $LATEST/work/<scenario>/logs/hooks.received.jsonl)"
exit 0
