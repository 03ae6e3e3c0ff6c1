#!/bin/bash
# Runs the RDMA test binaries on real verbs (Soft-RoCE, rxe0) inside qemu
# guests started by tools/rxe_vm/rxe_run:
#   1. builds them on the host (bazel build),
#   2. runs every binary of GUEST_TESTS, one after another, in ONE single-guest
#      boot with RDMADS_FABRICS=verbs and RDMADS_REQUIRE_VERBS=1 (a test that
#      would skip for lack of a device fails instead; any skipped test counts
#      as a failure here),
#      and then MPI_TESTS, each under `mpirun -np N` (one node per process,
#      the PMIx bootstrap, rdma_cm between the processes),
#   3. runs every binary of TWO_GUEST_TESTS in ONE two-guest boot, one node
#      per guest, started through a coordinator in guest 0 (guest_exec.sh
#      starts it and sets RDMADS_COORDINATOR, RDMADS_NODES, RDMADS_NODE_ID),
#   4. runs tests/verbs/host_death_test.sh (two more guests; one powers
#      itself off mid-run and the other must see the error within its bound),
#   5. prints PASS/FAIL per binary and "N passed, N failed"; exits 0 only if
#      everything passed.
# Before the boots it runs `tools/rxe_vm/selftest.sh --quick` (~50 s), so the
# runner's own contract (exit codes, timeout -> 124 with nothing left behind,
# the two-guest environment) is checked wherever the guest tests run; it
# counts as one more PASS/FAIL line.
#
# Time bound: the guest part (selftest + both boots, not the build) has ONE
# deadline, RDMADS_GUEST_DEADLINE (default 1200 s, the CI limit). Each
# rxe_run gets only what is left of it as --timeout, and each binary at most
# that too; a boot that cannot start in time, or is cut by the deadline, fails
# its binaries with a line saying so. The summary prints the guest part's
# total time.
#
# Usage: tests/verbs/run_guest_tests.sh [--no-build] [--single-only|--two-only] [--no-selftest] [--keep-log]
# Env:   RDMADS_GUEST_DEADLINE      limit for the whole guest part (default 1200 s)
#        RDMADS_GUEST_TEST_TIMEOUT  per-binary limit in the guest (default 300 s, capped by the deadline)
#        RDMADS_BAZEL_FLAGS         extra flags for bazel build/info (e.g. --config=asan)
set -u -o pipefail

# ---- Adding a test binary is one line here: its Bazel label. ---------------
# Single guest, all on rxe0 (loopback between the nodes' contexts).
GUEST_TESTS=(
  //tests/rdma:conformance_test
  //tests/rdma:error_path_test
  //tests/verbs:verbs_unit_test
  //tests/verbs:device_flags_test
  //tests/verbs:two_node_test
  //tests/locks:mutual_exclusion_test
  //tests/locks:alock_fairness_test
  //tests/locks:native_gate_test
  //tests/structures:hash_map_test
  //tests/structures:hash_map_lincheck_test
  //tests/structures:hash_map_two_node_test
  //tests/structures:queue_test
  //tests/structures:queue_lincheck_test
  //tests/structures:queue_two_node_test
  //tests/structures:skiplist_test
  //tests/structures:skiplist_lincheck_test
  //tests/structures:skiplist_two_node_test
  //tests/structures:named_test
  //tests/structures:kill_test
  //tests/verbs:agreed_death_test
)
# One guest, several processes: label@npN runs under `mpirun -np N`.
MPI_TESTS=(
  //tests/verbs:cm_connector_test@np3
  //tests/structures:multi_process_test@np3
  //tests/verbs:two_node_test@np2
  //tests/structures:hash_map_two_node_test@np2
  //tests/structures:queue_two_node_test@np2
  //tests/structures:skiplist_two_node_test@np2
  //tests/structures:named_multi_process_test@np2
  //tests/structures:named_multi_process_test@np3
  //tests/structures:catalogue_kill_test@np3
  //bench:cluster_bench_mpi_test@np3
  //examples:service_test@np3
)
# Two guests joined by a UDP link; every binary runs in both guests.
TWO_GUEST_TESTS=(
  //tests/verbs:two_node_test
  //tests/structures:hash_map_two_node_test
  //tests/structures:queue_two_node_test
  //tests/structures:skiplist_two_node_test
  //tests/structures:named_multi_process_test
)
# ---------------------------------------------------------------------------

ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd)
cd "$ROOT" || exit 2
RXE_RUN=$ROOT/tools/rxe_vm/rxe_run
EXEC=$ROOT/tests/verbs/guest_exec.sh
BUILD=1 SINGLE=1 TWO=1 KEEP=0 SELFTEST=1
for a in "$@"; do
  case $a in
    --no-build) BUILD=0 ;;
    --no-selftest) SELFTEST=0 ;;
    --single-only) TWO=0 ;;
    --two-only) SINGLE=0 ;;
    --keep-log) KEEP=1 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "run_guest_tests.sh: unknown argument '$a' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$RXE_RUN" ] || { echo "run_guest_tests.sh: $RXE_RUN not found" >&2; exit 2; }

label_path() {  # //a/b:c -> <bazel-bin>/a/b/c; //a/b:c@np3 -> <bazel-bin>/a/b/c@np3
  local l=${1#//} np=""
  [[ $l == *@np* ]] && { np=@np${l##*@np}; l=${l%@np*}; }
  echo "$BIN/${l%%:*}/${l##*:}$np"
}
label_name() { local l=${1#//}; l=${l/@np/.np}; echo "${l//[:\/]/.}"; }  # //tests/verbs:x@np3 -> tests.verbs.x.np3

T0=$(date +%s.%N)
secs_since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# Extra flags for both the build and `bazel info` (e.g. RDMADS_BAZEL_FLAGS=--config=asan).
read -r -a BAZEL_FLAGS <<<"${RDMADS_BAZEL_FLAGS:-}"
if [ $BUILD = 1 ]; then
  mapfile -t TARGETS < <(printf '%s\n' "${GUEST_TESTS[@]}" "${MPI_TESTS[@]%@np*}" "${TWO_GUEST_TESTS[@]}" \
                           //tests/verbs:host_death_test | sort -u)
  echo "== building ${#TARGETS[@]} targets on the host${RDMADS_BAZEL_FLAGS:+ ($RDMADS_BAZEL_FLAGS)}"
  bazel build "${BAZEL_FLAGS[@]}" "${TARGETS[@]}" || { echo "run_guest_tests.sh: build failed" >&2; exit 1; }
fi
# The real output directory for these flags, not the shared `bazel-bin`
# symlink: a concurrent build with other flags (--config=tsan, -c opt) in this
# workspace repoints that symlink at any time.
BIN=$(bazel info "${BAZEL_FLAGS[@]}" bazel-bin 2>/dev/null) || { echo "run_guest_tests.sh: bazel info failed" >&2; exit 1; }

LOG=$(mktemp "${TMPDIR:-/tmp}/rdmads_guest_tests.XXXXXX")
PASSED=0 FAILED=0
SUMMARY=()

# ---- the guest part's one deadline (starts here, after the build)
DEADLINE_S=${RDMADS_GUEST_DEADLINE:-1200}
[[ $DEADLINE_S =~ ^[0-9]+$ && $DEADLINE_S -gt 0 ]] || { echo "run_guest_tests.sh: bad RDMADS_GUEST_DEADLINE" >&2; exit 2; }
PER_TEST=${RDMADS_GUEST_TEST_TIMEOUT:-300}
G0=$(date +%s.%N)
# run_child, run_child_trap (tools/lib/run_child.sh): rxe_run or the selftest
# in the background, its log shown as it grows; a signal to this script is
# passed on to it by pid (rxe_run stops its qemus on TERM; started in the
# background, it would ignore an INT).
source "$ROOT/tools/lib/run_child.sh" || exit 2
run_child_trap "run_guest_tests.sh: interrupted; the guest tests did not finish"
# What run_child shows: a run's log as it is, or the selftest's indented.
as_is() { cat; }
indented() { sed -u 's/^/   /'; }
GUEST_END=$(( $(date +%s) + DEADLINE_S ))
OVER=0  # set when the deadline cut or prevented something
left_s() { echo $(( GUEST_END - $(date +%s) )); }
# Below this many seconds a boot is not started (it could not even boot).
MIN_BOOT_S=30

# Parses the markers of one run from $1 (log file) with line prefix $2
# ("" or "[guestN] ") and guest label $3; appends to SUMMARY.
parse_run() {
  local log=$1 prefix=$2 tag=$3 name rc ms tests skipped failed_tests line found
  local -A seen_end=()
  local cur="" body=""
  while IFS= read -r line; do
    [ -n "$prefix" ] && { [[ $line == "$prefix"* ]] || continue; line=${line#"$prefix"}; }
    case $line in
      "@@BEGIN "*) cur=${line#@@BEGIN }; body="" ;;
      "@@END "*)
        read -r name rc ms <<<"${line#@@END }"
        rc=${rc#rc=} ms=${ms#ms=}
        tests=$(grep -oE '\[  PASSED  \] [0-9]+ test' <<<"$body" | grep -oE '[0-9]+' | tail -1)
        skipped=$(grep -oE '\[  SKIPPED \] [0-9]+ test' <<<"$body" | grep -oE '[0-9]+' | tail -1)
        failed_tests=$(grep -cE '^\[  FAILED  \] ' <<<"$body")  # one line per failed test with --gtest_brief
        local verdict=PASS why=""
        if [ "$rc" != 0 ]; then verdict=FAIL; why="exit $rc"; fi
        [ "$failed_tests" != 0 ] && verdict=FAIL  # mpirun --enable-recovery can exit 0 after a rank failed
        if [ -n "$skipped" ] && [ "$skipped" != 0 ]; then verdict=FAIL; why="${why:+$why, }$skipped skipped"; fi
        # Every listed binary must run tests on verbs: one whose suites all
        # instantiate nothing there passes 0 tests with exit 0.
        if [ "${tests:-0}" -eq 0 ]; then verdict=FAIL; why="${why:+$why, }no test ran"; fi
        [ "$failed_tests" != 0 ] && why="${why:+$why, }$failed_tests failed"
        if [ $verdict = PASS ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
        SUMMARY+=("$(printf '%-4s %-36s %-8s %4s tests passed  %6.1f s%s' "$verdict" "$name" "$tag" "${tests:-0}" \
          "$(awk -v m="$ms" 'BEGIN{print m/1000}')" "${why:+  ($why)}")")
        seen_end[$name]=1
        cur="" ;;
      *) [ -n "$cur" ] && body+=$line$'\n' ;;
    esac
  done <"$log"
  # Binaries that never reported (guest died, timeout): failures.
  for name in "${EXPECTED[@]}"; do
    if [ -z "${seen_end[$name]:-}" ]; then
      FAILED=$((FAILED + 1))
      SUMMARY+=("$(printf '%-4s %-36s %-8s no result (guest or rxe_run failed: see the log above)' FAIL "$name" "$tag")")
    fi
  done
}

run_guest() {  # $1 = single|two, rest = labels
  local mode=$1; shift
  local specs=() l t0 rc left per
  EXPECTED=()
  for l in "$@"; do specs+=("$(label_name "$l")=$(label_path "$l")"); EXPECTED+=("$(label_name "$l")"); done
  left=$(left_s)
  if [ "$left" -lt $MIN_BOOT_S ]; then
    OVER=1
    echo "== $mode-guest boot NOT started: only ${left} s left of the ${DEADLINE_S} s guest deadline"
    for l in "${EXPECTED[@]}"; do
      FAILED=$((FAILED + 1))
      SUMMARY+=("$(printf '%-4s %-36s %-8s not run: guest deadline (%s s) exhausted' FAIL "$l" "$mode" "$DEADLINE_S")")
    done
    return
  fi
  per=$(( PER_TEST < left ? PER_TEST : left ))
  local args=(--timeout "$left" --env RDMADS_FABRICS=verbs --env RDMADS_REQUIRE_VERBS=1
              --env "RDMADS_GUEST_TEST_TIMEOUT=$per")
  [ "$mode" = two ] && args+=(--two-guests)
  echo "== $mode-guest boot (${left} s left of the guest deadline): ${EXPECTED[*]}"
  t0=$(date +%s.%N)
  # rxe_run stops its qemus on the TERM that run_child_trap passes on.
  run_child "$LOG" as_is "$RXE_RUN" "${args[@]}" -- bash "$EXEC" "${specs[@]}"
  rc=$?
  echo "== $mode-guest run took $(secs_since "$t0") s (rxe_run exit $rc)"
  if [ "$rc" = 124 ]; then
    OVER=1
    echo "== FAIL: the $mode-guest boot was killed at the guest part's deadline (${DEADLINE_S} s in total)"
  fi
  if [ "$mode" = two ]; then
    parse_run "$LOG" "[guest0] " guest0
    parse_run "$LOG" "[guest1] " guest1
  else
    parse_run "$LOG" "" single
  fi
  if [ $KEEP = 1 ]; then cp "$LOG" "$LOG.$mode"; echo "== log kept: $LOG.$mode"; fi
}

# The runner's own contract first (fast subset of its self-test), within the
# same deadline; at most 120 s so a hung selftest leaves time for the tests.
if [ $SELFTEST = 1 ]; then
  st=$(( $(left_s) < 120 ? $(left_s) : 120 ))
  echo "== rxe_run selftest --quick (limit ${st} s)"
  t0=$(date +%s.%N)
  st_log=$(mktemp)
  run_child "$st_log" indented timeout -k 5 "$st" "$ROOT/tools/rxe_vm/selftest.sh" --quick
  rc=$?
  rm -f "$st_log"
  el=$(secs_since "$t0")
  why=""
  [ "$rc" = 124 ] && why="  (killed after ${st} s)"
  [ "$rc" != 0 ] && [ "$rc" != 124 ] && why="  (exit $rc)"
  if [ "$rc" = 0 ]; then PASSED=$((PASSED + 1)); v=PASS; else FAILED=$((FAILED + 1)); v=FAIL; fi
  SUMMARY+=("$(printf '%-4s %-36s %-8s %17s  %6.1f s%s' $v tools.rxe_vm.selftest--quick host "" "$el" "$why")")
fi
[ $SINGLE = 1 ] && [ ${#GUEST_TESTS[@]} -gt 0 ] && run_guest single "${GUEST_TESTS[@]}" "${MPI_TESTS[@]}"
[ $TWO = 1 ] && [ ${#TWO_GUEST_TESTS[@]} -gt 0 ] && run_guest two "${TWO_GUEST_TESTS[@]}"
# A host that dies: its own two-guest boot, since one guest powers off.
if [ $TWO = 1 ]; then
  left=$(left_s)
  if [ "$left" -lt $MIN_BOOT_S ]; then
    OVER=1
    FAILED=$((FAILED + 1))
    SUMMARY+=("$(printf 'FAIL %-36s %-8s not run: guest deadline (%s s) exhausted' tests.verbs.host_death_test two "$DEADLINE_S")")
  else
    echo "== host death: two-guest boot (${left} s left of the guest deadline)"
    t0=$(date +%s.%N)
    hd_log=$(mktemp)
    HOST_DEATH_TIMEOUT=$left run_child "$hd_log" as_is "$ROOT/tests/verbs/host_death_test.sh" --no-build
    rc=$?
    line=$(grep -o 'host_death_test.sh: PASS.*' "$hd_log" | head -1)
    rm -f "$hd_log"
    if [ "$rc" = 0 ]; then PASSED=$((PASSED + 1)); v=PASS; else FAILED=$((FAILED + 1)); v=FAIL; fi
    SUMMARY+=("$(printf '%-4s %-36s %-8s %17s  %6.1f s  %s' $v tests.verbs.host_death_test two "" "$(secs_since "$t0")" "${line#host_death_test.sh: }")")
  fi
fi
rm -f "$LOG"
GUEST_TOTAL=$(secs_since "$G0")
if [ "$(left_s)" -lt 0 ] || [ $OVER = 1 ]; then
  OVER=1
  FAILED=$((FAILED + 1))
  SUMMARY+=("$(printf 'FAIL %-36s %-8s guest part took %s s, over its %s s deadline' guest-deadline all "$GUEST_TOTAL" "$DEADLINE_S")")
fi

echo
echo "== guest test summary (total $(secs_since "$T0") s)"
for s in "${SUMMARY[@]}"; do echo "$s"; done
echo "== guest part: ${GUEST_TOTAL} s of its ${DEADLINE_S} s deadline (RDMADS_GUEST_DEADLINE)$([ $OVER = 1 ] && echo ' -- EXCEEDED')"
echo "$PASSED passed, $FAILED failed"
[ $FAILED = 0 ]
