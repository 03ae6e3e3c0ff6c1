#!/bin/bash
# In-guest half of tests/verbs/run_guest_tests.sh (runs inside an rxe_run
# guest). Arguments: NAME=PATH pairs. Runs each binary in turn with a time
# limit, between "@@BEGIN NAME" and "@@END NAME rc=RC ms=MS" marker lines that
# the host side parses. Always exits 0: the host decides pass/fail per binary.
T=${RDMADS_GUEST_TEST_TIMEOUT:-300}
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }  # bash builtin: no exec over 9p
for spec in "$@"; do
  name=${spec%%=*}
  bin=${spec#*=}
  echo "@@BEGIN $name"
  start=$(now_ms)
  if [ -x "$bin" ]; then
    timeout -k 10 "$T" "$bin" --gtest_brief=1 2>&1
    rc=$?
    [ $rc = 124 ] && echo "$name: killed after ${T}s (RDMADS_GUEST_TEST_TIMEOUT)"
  else
    echo "$name: $bin is not an executable (build it on the host first)"
    rc=127
  fi
  echo "@@END $name rc=$rc ms=$(( $(now_ms) - start ))"
done
exit 0
