#!/bin/sh
# The recording shim of AEP_E2E_RECORD_HOOKS (run.sh copies it as `aep-hook` beside a link to
# aep-bridge, whose `install` wires the aep-hook next to itself): keeps every payload it is
# handed as a `{"hook", "payload"}` line (the form of adapters/tests/data) in the scenario's
# logs folder, `$HOME/../logs/hooks.received.jsonl` (the driver gives each scenario its HOME),
# then hands the same bytes and arguments to the real shim (`aep-hook.real` beside it) and
# answers with its reply. A payload that is not JSON, or a HOME without a logs folder, is not
# kept; the call goes on either way.
here=$(dirname "$0")
tmp=$(mktemp) || exec "$here/aep-hook.real" "$@"
cat >"$tmp"
logs="$(dirname "${HOME:-/nonexistent}")/logs"
if [ -d "$logs" ]; then
  python3 - "$tmp" "$logs/hooks.received.jsonl" "${2:-}" <<'PY' 2>/dev/null
import json, sys
try:
    payload = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(0)
hook = (payload.get("hook_event_name") if isinstance(payload, dict) else None) or sys.argv[3] or "?"
with open(sys.argv[2], "a") as out:
    out.write(json.dumps({"hook": hook, "payload": payload}) + "\n")
PY
fi
"$here/aep-hook.real" "$@" <"$tmp"
rc=$?
rm -f "$tmp"
exit $rc
