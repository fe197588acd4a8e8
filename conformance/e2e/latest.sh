#!/usr/bin/env bash
# Every agent at its newest release: installs each agent's newest published version (npm
# `latest`, PyPI's newest) into a cache of its own, runs that agent's e2e scenarios against
# it, and prints a drift report per agent: the hook events and fields its adapter does not
# know (the bridge's `x.{vendor}.session.drift` records), the OTel event names its profile does
# not know (`x.{vendor}.otel.unknown`), and the failed checks. Informational: it always exits 0
# (CI does not fail on a new release); the pinned suite is run.sh.
#
#   conformance/e2e/latest.sh [agent ...]   (default: all; agents: the keys of AGENTS below)
#
# AEP_E2E_CACHE moves the caches (latest-<agent>/ under it); AEP_E2E_BIN as in run.sh.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${AEP_E2E_CACHE:-$HOME/.cache/aep-e2e}"

# agent -> "npm packages moved to latest|vendor log folder|scenarios"
declare -A AGENTS=(
  [claude-code]="@anthropic-ai/claude-code|claude-code|claude claude-wrap permission"
  [codex]="@openai/codex|codex|codex codex-wrap codex-subagent codex-compact"
  [gemini-cli]="@google/gemini-cli|gemini-cli|gemini gemini-acp"
  [qwen-code]="@qwen-code/qwen-code|qwen-code|qwen qwen-acp"
  [opencode]="opencode-ai|opencode|opencode-sse opencode-plugin opencode-run opencode-companion"
  [kilocode]="@kilocode/cli|kilocode|kilo-run kilo-sse"
  [kimi-code]="@moonshot-ai/kimi-code|kimi-code|kimi-ws"
  [cline]="cline|cline|cline"
  [pi]="@earendil-works/pi-coding-agent @earendil-works/pi-ai @earendil-works/pi-agent-core @earendil-works/pi-tui|pi|pi-wrap pi-ext"
  [copilot-cli]="@github/copilot|copilot-cli|copilot"
  [droid]="@factory/cli @factory/cli-linux-x64|droid|droid"
  [hermes]="pypi:hermes-agent|hermes|hermes"
  [openhands]="pypi:openhands-agent-server|openhands|openhands openhands-observer"
)
agents=("$@")
[ ${#agents[@]} -gt 0 ] || agents=(claude-code codex gemini-cli qwen-code opencode kilocode kimi-code cline pi copilot-cli droid hermes openhands)

if [ -z "${AEP_E2E_BIN:-}" ]; then
  (cd "$ROOT" && cargo build -q -p aep-bridge-cli -p aep-hook) || { echo "latest: cargo build failed"; exit 0; }
  export AEP_E2E_BIN="$ROOT/target/debug"
fi

declare -a REPORT
for agent in "${agents[@]}"; do
  spec="${AGENTS[$agent]:-}"
  [ -n "$spec" ] || { echo "latest: unknown agent $agent"; continue; }
  IFS='|' read -r pkgs vendor scen <<<"$spec"
  dir="$CACHE/latest-$agent"
  mkdir -p "$dir/pkgs"
  pinned="" newest=""
  if [[ "$pkgs" == pypi:* ]]; then
    # PyPI: the requirement file's pin against the index's newest (pip of a Python >= 3.12).
    pkg="${pkgs#pypi:}"
    req=$(grep -l "^$pkg==" "$HERE"/requirements-*.txt | head -1)
    pinned=$(grep "^$pkg==" "$req" | cut -d= -f3)
    py=$(command -v python3.12 || command -v python3)
    newest=$("$py" -m pip index versions "$pkg" 2>/dev/null | sed -n 's/^[^ ]* (\(.*\))$/\1/p' | head -1)
    if [ -n "$newest" ] && [ "$newest" != "$pinned" ]; then
      REPORT+=("$agent: pinned $pinned, newest $newest on PyPI: move the pin in $(basename "$req") (a re-freeze), then run.sh $scen")
    else
      REPORT+=("$agent: pinned $pinned is the newest on PyPI (run.sh $scen covers it)")
    fi
    continue
  fi
  # npm: package.json with this agent's packages at their newest, locked afresh.
  python3 - "$HERE/package.json" "$dir/pkgs/package.json" $pkgs <<'PY' || { REPORT+=("$agent: cannot write package.json"); continue; }
import json, subprocess, sys
src, dst, pkgs = sys.argv[1], sys.argv[2], sys.argv[3:]
d = json.load(open(src))
for p in pkgs:
    v = subprocess.run(["npm", "view", p, "version"], capture_output=True, text=True).stdout.strip()
    if not v:
        sys.exit(f"npm view {p} failed")
    for sec in ("dependencies", "optionalDependencies"):
        if p in d.get(sec, {}):
            d[sec][p] = v
            break
    else:
        d["dependencies"][p] = v
json.dump(d, open(dst, "w"), indent=2)
PY
  main="${pkgs%% *}"
  pinned=$(python3 -c "import json,sys; d=json.load(open('$HERE/package.json')); print({**d['dependencies'], **d.get('optionalDependencies', {})}.get('$main', '-'))")
  newest=$(python3 -c "import json; d=json.load(open('$dir/pkgs/package.json')); print(d['dependencies'].get('$main', '-'))")
  (cd "$dir/pkgs" && rm -f package-lock.json && npm install --package-lock-only --no-audit --no-fund --loglevel=error \
      --cache "$CACHE/npm-cache" >/dev/null 2>&1) || { REPORT+=("$agent: npm could not lock $main@$newest"); continue; }
  echo "== latest: $agent $main pinned $pinned, newest $newest: run.sh $scen"
  rm -rf "$dir/work"
  AEP_E2E_CACHE="$dir" AEP_E2E_PACKAGES="$dir/pkgs" bash "$HERE/run.sh" $scen > "$dir/run.out" 2>&1
  tally=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$dir/run.out" | tail -1)
  drift=$(python3 - "$dir/work" "$vendor" <<'PY'
import glob, json, os, sys
work, vendor = sys.argv[1], sys.argv[2]
hook, otel = {}, {}
for f in glob.glob(os.path.join(work, "*", "data", "logs", vendor, "*.jsonl")):
    for line in open(f, errors="replace"):
        try:
            e = json.loads(line)
        except ValueError:
            continue
        t, d = e.get("type", ""), e.get("data") or {}
        if t == f"x.{vendor}.session.drift":
            for n in d.get("names", []):
                hook[(d.get("kind"), n)] = d.get("agent.version", "")
        elif t == f"x.{vendor}.otel.unknown":
            otel[d.get("event.name", "(unnamed)")] = 1
out = [f"{k} {n}" for (k, n) in sorted(hook)] + [f"otel_event {n}" for n in sorted(otel)]
print("; ".join(out) if out else "none")
PY
)
  fails=$(grep -E '^FAIL' "$dir/run.out" | cut -c1-160 | sort -u | head -8 | tr '\n' ';')
  REPORT+=("$agent: pinned $pinned, newest $newest: ${tally:-no result line}; drift: $drift${fails:+; failed: $fails}")
done

echo "== drift report (newest releases)"
for line in "${REPORT[@]}"; do echo "$line"; done
exit 0
