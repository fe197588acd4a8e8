#!/usr/bin/env bash
# Runs the README's "## Quickstart" commands literally in a fresh HOME (offline, loopback-only
# namespace, the real Claude Code against mock_model.py) and fails when a step breaks.
# The same as `conformance/e2e/run.sh quickstart`; see quickstart.py for how each line runs.
exec "$(dirname "${BASH_SOURCE[0]}")/run.sh" quickstart
