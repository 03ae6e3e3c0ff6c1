#!/bin/bash
# Two Soft-RoCE guests, one node each (through a coordinator); node 1 powers its guest off
# mid-run and node 0 must see Unavailable within the bound
# (tests/verbs/host_death_test.cc). Two boots: without the membership, then
# with it (node 1's death agreed when its session expires). Passes when guest 0's test passed and guest 1 went away without
# an exit code, as a dead host does, both times.
#   tests/verbs/host_death_test.sh [--no-build]      (~90 s; exit 0 = pass)
# Env: RDMADS_BAZEL_FLAGS as in run_guest_tests.sh; HOST_DEATH_TIMEOUT (240 s).
set -u -o pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
cd "$ROOT" || exit 2
BUILD=1
for a in "$@"; do
  case $a in
    --no-build) BUILD=0 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
    *) echo "host_death_test.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
read -r -a FLAGS <<<"${RDMADS_BAZEL_FLAGS:-}"
if [ $BUILD = 1 ]; then
  bazel build "${FLAGS[@]}" //tests/verbs:host_death_test || { echo "host_death_test.sh: build failed" >&2; exit 1; }
fi
BIN=$(bazel info "${FLAGS[@]}" bazel-bin 2>/dev/null)/tests/verbs/host_death_test
[ -x "$BIN" ] || { echo "host_death_test.sh: $BIN not built" >&2; exit 1; }
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
ok=1
# Two boots: each process deciding alone (the QPs' retries see the death),
# then with the membership (the death is agreed when node 1's session
# expires). Both start through the coordinator guest 0 runs (guest_exec.sh).
for mode in plain coordinator; do
  env=()
  [ $mode = coordinator ] && env=(--env HOST_DEATH_AGREED=1)
  tools/rxe_vm/rxe_run --two-guests --timeout "${HOST_DEATH_TIMEOUT:-240}" --env RDMADS_FABRICS=verbs "${env[@]}" \
    -- bash tests/verbs/guest_exec.sh "hd=$BIN" 2>&1 | tee "$LOG"
  grep -q '^\[guest0\] @@END hd rc=0 ' "$LOG" || { echo "host_death_test.sh: FAIL ($mode): node 0's test did not pass"; ok=0; }
  grep -q '^\[guest0\] \[  PASSED  \] 1 test' "$LOG" || { echo "host_death_test.sh: FAIL ($mode): node 0 ran no passing test"; ok=0; }
  grep -q 'node 1: powering this guest off' "$LOG" || { echo "host_death_test.sh: FAIL ($mode): node 1 never powered off"; ok=0; }
  if grep -q '^\[guest1\] @@END' "$LOG"; then echo "host_death_test.sh: FAIL ($mode): guest 1 survived its power-off"; ok=0; fi
  [ $ok = 1 ] && echo "host_death_test.sh: $mode PASS ($(grep -o 'node 0[ (a-z)]*: [0-9]* READs.*after [0-9.]* s' "$LOG" | head -1))"
done
[ $ok = 1 ]
