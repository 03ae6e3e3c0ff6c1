#!/bin/bash
# In-guest half of tests/verbs/run_guest_tests.sh (runs inside an rxe_run
# guest). Arguments: NAME=PATH pairs; PATH@npN runs the binary under
# `mpirun -np N` (one node per process, PMIx bootstrap; --enable-recovery so
# a test may kill one of its ranks). Runs each in turn with a time limit,
# between "@@BEGIN NAME" and "@@END NAME rc=RC ms=MS" marker lines that the
# host side parses. Always exits 0: the host decides pass/fail per binary.
# In a two-guest boot (RXE_NUM_NODES=2) every binary gets the peer list:
# RDMADS_NODE_ID = RXE_NODE_ID, RDMADS_PEERS = both guests' IPs, port 7470.
T=${RDMADS_GUEST_TEST_TIMEOUT:-300}
if [ "${RXE_NUM_NODES:-1}" = 2 ]; then
  if [ "$RXE_NODE_ID" = 0 ]; then peers="$RXE_SELF_IP:7470,$RXE_PEER_IP:7470"; else peers="$RXE_PEER_IP:7470,$RXE_SELF_IP:7470"; fi
  export RDMADS_NODE_ID=$RXE_NODE_ID RDMADS_PEERS=$peers RDMADS_CLUSTER=rdmads-guest-tests
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
