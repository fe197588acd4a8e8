# Shared by .ci/run and .ci/flake-hunt (sourced, not run).

# failed_tests LOG: one line per test that failed in a `cargo test` output, named with its
# test binary ("aep-bridge tests/kimi_ws_bridge.rs: primary_maps_..."), then one line per
# test binary that failed without naming a test (a crash, a build error, doc-tests that
# did not compile).
failed_tests() {
  awk '
    /^     Running / {
      src = $0; sub(/^     Running (unittests )?/, "", src); sub(/ \(.*$/, "", src)
      crate = $0; sub(/^.*\//, "", crate); sub(/-[0-9a-f]+\)$/, "", crate)
      bin = crate " " src; next
    }
    /^   Doc-tests / { bin = "doc-tests " $2; next }
    /^test .* \.\.\. FAILED$/ { t = $0; sub(/^test /, "", t); sub(/ \.\.\. FAILED$/, "", t); print bin ": " t; named[bin] = 1; next }
    /^error: (test|doctest) failed, to rerun pass / { if (!(bin in named)) { r = $0; sub(/^.*pass /, "", r); print bin ": the test binary failed without naming a test (" r ")" } next }
    /^error: could not compile / { print "build: " $0 }
  ' "$1" | sort -u
}

# now: seconds since the epoch.
now() { date +%s; }
