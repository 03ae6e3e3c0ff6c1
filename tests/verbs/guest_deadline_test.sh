#!/bin/bash
# Checks run_guest_tests.sh's one guest deadline (RDMADS_GUEST_DEADLINE) on
# the host, with the real runner (needs qemu and the built guest tests; ~1 min):
#   1. a deadline too short to boot: no boot starts, every binary FAILs with
#      "guest deadline", the script fails quickly and prints the guest total;
#   2. a 40 s deadline for the single-guest boot (which needs longer): rxe_run
#      is cut at the deadline (not at the old 300 s/1200 s limits), the
#      script says so, fails, and the guest part ends within a few seconds of
#      40 s.
# Usage: tests/verbs/guest_deadline_test.sh   (exit 0 = pass)
set -u -o pipefail
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
RUN=$ROOT/tests/verbs/run_guest_tests.sh
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
FAIL=0
expect() { if grep -qE -- "$1" "$OUT"; then echo "PASS  $2"; else echo "FAIL  $2 (no /$1/)"; FAIL=1; fi; }

RDMADS_GUEST_DEADLINE=20 "$RUN" --no-build --no-selftest >"$OUT" 2>&1
rc=$?
[ $rc != 0 ] && echo "PASS  1: exit $rc" || { echo "FAIL  1: exit 0"; FAIL=1; }
# The guest part's own total (the wall time includes `bazel info`, which
# waits for a busy shared Bazel server).
gt=$(sed -n 's/^== guest part: \([0-9.]*\) s.*/\1/p' "$OUT")
awk -v g="${gt:-999}" 'BEGIN{exit !(g < 5)}' && echo "PASS  1: guest part quick (${gt} s)" || { echo "FAIL  1: guest part took ${gt:-?} s"; FAIL=1; }
expect "single-guest boot NOT started: only [0-9]+ s left of the 20 s guest deadline" "1: single boot not started"
expect "two-guest boot NOT started" "1: two boot not started"
expect "^FAIL tests\.verbs\.verbs_unit_test +single +not run: guest deadline" "1: binaries fail with the reason"
expect "^== guest part: [0-9.]+ s of its 20 s deadline" "1: guest part total printed"

RDMADS_GUEST_DEADLINE=40 "$RUN" --no-build --no-selftest --single-only >"$OUT" 2>&1
rc=$?
[ $rc != 0 ] && echo "PASS  2: exit $rc" || { echo "FAIL  2: exit 0"; FAIL=1; }
gt=$(sed -n 's/^== guest part: \([0-9.]*\) s.*/\1/p' "$OUT")
awk -v g="${gt:-999}" 'BEGIN{exit !(g >= 39 && g < 50)}' && echo "PASS  2: cut on time (guest part ${gt} s)" ||
  { echo "FAIL  2: guest part took ${gt:-?} s for a 40 s deadline"; FAIL=1; }
expect "rxe_run exit 124" "2: rxe_run timed out"
expect "killed at the guest part's deadline \(40 s in total\)" "2: says the deadline cut it"
expect "^== guest part: [0-9.]+ s of its 40 s deadline .* EXCEEDED" "2: guest part total printed, exceeded"
[ $FAIL = 0 ] && echo "guest_deadline_test: all passed" || { echo "--- last output:"; tail -n 25 "$OUT"; }
exit $FAIL
