#!/bin/bash
# In-guest half of tests/verbs/run_guest_tests.sh (runs inside an rxe_run
# guest). Arguments: NAME=PATH pairs; PATH@npN runs the binary under
# `mpirun -np N` (one node per process, PMIx bootstrap; --enable-recovery so
# a test may kill one of its ranks). Runs each in turn with a time limit,
# between "@@BEGIN NAME" and "@@END NAME rc=RC ms=MS" marker lines that the
# host side parses. Always exits 0: the host decides pass/fail per binary.
# In a two-guest boot (RXE_NUM_NODES=2) both guests meet through a
# coordinator that guest 0 runs (tools/coordinator.sh, port 2181): every
# binary gets RDMADS_COORDINATOR, RDMADS_NODES=2, RDMADS_NODE_ID =
# RXE_NODE_ID and a job name of its own (RDMADS_CLUSTER).
T=${RDMADS_GUEST_TEST_TIMEOUT:-300}
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
if [ "${RXE_NUM_NODES:-1}" = 2 ]; then
  if [ "$RXE_NODE_ID" = 0 ]; then
    zk_pidfile=$(mktemp)
    trap '"$ROOT/tools/coordinator.sh" stop --pidfile "$zk_pidfile"' EXIT
    "$ROOT/tools/coordinator.sh" start --host "$RXE_SELF_IP" --port 2181 --pidfile "$zk_pidfile" >/dev/null ||
      echo "guest_exec.sh: the coordinator did not start in guest 0"
    coordinator=$RXE_SELF_IP:2181
  else
    coordinator=$RXE_PEER_IP:2181
  fi
  export RDMADS_COORDINATOR=$coordinator RDMADS_NODES=2 RDMADS_NODE_ID=$RXE_NODE_ID
fi
now_ms() { local t=${EPOCHREALTIME/./}; echo $((t / 1000)); }  # bash builtin: no exec over 9p
for spec in "$@"; do
  name=${spec%%=*}
  bin=${spec#*=}
  launch=()
  if [[ $bin == *@np* ]]; then
    launch=(mpirun --allow-run-as-root --oversubscribe --enable-recovery -np "${bin##*@np}")
    bin=${bin%@np*}
  fi
  [ "${RXE_NUM_NODES:-1}" = 2 ] && export RDMADS_CLUSTER=rdmads-guest-tests-$name
  echo "@@BEGIN $name"
  start=$(now_ms)
  if [ -x "$bin" ]; then
    timeout -k 10 "$T" "${launch[@]}" "$bin" --gtest_brief=1 2>&1
    rc=$?
    [ $rc = 124 ] && echo "$name: killed after ${T}s (RDMADS_GUEST_TEST_TIMEOUT)"
  else
    echo "$name: $bin is not an executable (build it on the host first)"
    rc=127
  fi
  echo "@@END $name rc=$rc ms=$(( $(now_ms) - start ))"
done
exit 0
