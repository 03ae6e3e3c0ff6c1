#!/usr/bin/env bash
# Quick start, command 2: installs what is missing and runs the whole test
# suite: every Bazel test target plain, under ASan+UBSan and under TSan, then
# the real-verbs tests inside a Soft-RoCE qemu guest. Ends with the line
# "N passed, N failed" (test targets, counted per configuration).
#   --quick   plain configuration only, no sanitizers, no guest
#
# Sourcing this file defines the counting functions below without running
# anything (tools/demo/run_tests_count_test.sh tests them on canned logs).
set -uo pipefail
# run_child, run_child_trap: the child in the background, its log shown as it
# grows, a signal passed on to it.
source "$(dirname "${BASH_SOURCE[0]}")/lib/run_child.sh" || exit 2

passed=0
failed=0
failed_names=()

# The status lines of the targets that did not pass in bazel log $1: every
# target status line but a PASSED one (FAILED, TIMEOUT, "FLAKY, failed in 1
# out of 2", NO STATUS, INCOMPLETE, FAILED TO BUILD, partly cached results,
# and any status a later bazel may add).
failed_target_lines() {
  grep -E '^//\S+\s' "$1" | grep -vE '^//\S+\s+(\(cached\) )?PASSED'
}

# Counts one `bazel test --test_summary=short` run from its log $2 (label $1,
# bazel's exit status $3) into passed / failed / failed_names. A target
# passes only on a PASSED line. Failed targets are those the summary names;
# if it names none but bazel failed anyway (a build error, a crash, an
# interruption, no summary at all), the run counts as one failure: a run
# that did not finish cleanly must never read as a pass.
count_bazel_log() {
  local label=$1 log=$2 rc=$3
  local p f=0 name
  p=$(grep -cE '^//\S+\s+(\(cached\) )?PASSED' "$log")
  # Each failed target, as "<target> <status>".
  while read -r name; do
    failed_names+=("${label} ${name}")
    f=$((f + 1))
  done < <(failed_target_lines "$log" |
           awk '{st = "?"; for (i = 2; i <= NF; i++) if ($i ~ /^[A-Z]+,?$/) { st = $i; break }
                 sub(/,$/, "", st); print $1, st}')
  if [[ $f -eq 0 && $rc -ne 0 ]]; then
    if grep -q '^ERROR:' "$log"; then
      failed_names+=("${label} bazel exit ${rc} (build error, see the ERROR: lines)")
    else
      failed_names+=("${label} bazel exit ${rc}")
    fi
    f=1
  elif [[ $f -eq 0 ]] && grep -q '^ERROR:' "$log"; then
    failed_names+=("${label} build error")  # bazel said 0 but printed errors
    f=1
  fi
  passed=$((passed + p))
  failed=$((failed + f))
}

# Runs the guest test script $1 and counts its final "N passed, N failed"
# line. A missing or non-executable script, a missing summary, or a non-zero
# exit with no failure in the summary counts as one failure: the guest tests
# are part of the suite, so not running them is not a pass.
run_guest() {
  local script=$1 out rc log
  if [[ ! -f "$script" || ! -x "$script" ]]; then
    failed=$((failed + 1))
    failed_names+=("guest: ${script} is missing or not executable")
    return
  fi
  log=$(mktemp)
  run_child "$log" to_stderr "$script"
  rc=$?
  out=$(tail -n 1 "$log")
  local fails
  fails=$(grep -E '^FAIL ' "$log")  # the guest summary's failed lines, repeated at the end
  rm -f "$log"
  if [[ "$out" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
    passed=$((passed + BASH_REMATCH[1]))
    failed=$((failed + BASH_REMATCH[2]))
    if [[ ${BASH_REMATCH[2]} -gt 0 ]]; then
      local line
      while read -r line; do
        if [[ -n "$line" ]]; then failed_names+=("guest: ${line#FAIL }"); fi
      done <<<"$fails"
      if [[ -z "$fails" ]]; then failed_names+=("guest: see the guest summary above"); fi
    elif [[ $rc -ne 0 ]]; then
      failed=$((failed + 1))
      failed_names+=("guest: ${script} exit ${rc} after reporting no failure")
    fi
  else
    failed=$((failed + 1))
    failed_names+=("guest: ${script} printed no summary (exit ${rc})")
  fi
}

# For each target that failed in the bazel run whose log is $2 (label $1),
# keeps an excerpt of its test log: the failure lines and the log's end.
# Called right after the run, while bazel-testlogs ($3) still points at that
# configuration. CI keeps only part of a long output, so print_summary shows
# these next to the verdict: a failure must say why without a rerun.
failure_excerpts=()
excerpt_failed_logs() {
  local label=$1 log=$2 testlogs=$3 target file text
  while read -r target; do
    file="${testlogs}/${target#//}"
    file="${file/://}/test.log"
    if [[ -f "$file" ]]; then
      text=$(grep -A 6 -E 'Failure$|Sanitizer|TIMEOUT|[Tt]imed out|^\[  FAILED  \]' "$file" | grep -v '^--$' |
             head -n 40; echo "  ... last lines:"; tail -n 12 "$file")
    else
      text="  (no test log at ${file})"
    fi
    failure_excerpts+=("--- ${label} ${target}
${text}")
  done < <(failed_target_lines "$log" | awk '{print $1}')
}

# A signal ends the run as interrupted (run_child_trap), never with a summary.
trap_interrupts() { run_child_trap "run_tests.sh: interrupted; the run did not finish"; }

# What run_child shows of a child's log: the guest script's output whole,
# bazel's filtered to its progress, status and error lines; to stderr.
to_stderr() { cat >&2; }
bazel_progress() { grep --line-buffered -E '^//|^Executed|ERROR|^FAIL:|^\[[0-9,]+ / [0-9,]+\]' >&2; }

# The summary: each failed test's excerpt, each failure, then the last line,
# exactly "N passed, N failed". Status 0 iff nothing failed and something
# passed.
print_summary() {
  local name
  for name in "${failure_excerpts[@]}"; do echo "$name" >&2; done
  for name in "${failed_names[@]}"; do echo "FAILED: ${name}" >&2; done
  echo "${passed} passed, ${failed} failed"
  [[ $failed -eq 0 && $passed -gt 0 ]]
}

[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0  # sourced: functions only

cd "$(dirname "$0")/.."
quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_tests.sh: unknown argument '$arg' (try --help)" >&2; exit 2 ;;
  esac
done

tools/setup_deps.sh $([[ $quick -eq 0 ]] && echo --guest) || exit 1
trap_interrupts

# One ZooKeeper server on loopback for the tests that need a coordinator
# (testing/zk_server.h; a test that stops its server starts its own),
# stopped when this script ends, however it ends.
zk_pidfile=$(mktemp)
trap 'tools/coordinator.sh stop --pidfile "$zk_pidfile"' EXIT
zk_addr=$(tools/coordinator.sh start --port 0 --pidfile "$zk_pidfile") ||
  { echo "run_tests.sh: could not start the tests' ZooKeeper server (tools/coordinator.sh)" >&2; exit 1; }

start=$(date +%s)

run_bazel() {  # $1 = label, rest = bazel args
  local label=$1; shift
  echo "=== bazel test ${label} ($(( $(date +%s) - start ))s elapsed)" >&2
  local log rc
  log=$(mktemp)
  # One attempt per test (a retry would hide a failure as FLAKY, whatever a
  # user's bazelrc says) and no cached results (every test runs now).
  # Plain output (a user's --color=yes would wrap the status words in escape
  # codes that the counting below does not expect).
  run_child "$log" bazel_progress \
    bazel test --test_summary=short --flaky_test_attempts=1 --nocache_test_results --color=no --curses=no \
    --test_env=RDMADS_TEST_COORDINATOR="$zk_addr" "$@" //...
  rc=$?
  count_bazel_log "$label" "$log" "$rc"
  excerpt_failed_logs "$label" "$log" "$(bazel info "$@" bazel-testlogs 2>/dev/null)"
  rm -f "$log"
}

run_bazel "(default)"
if [[ $quick -eq 0 ]]; then
  run_bazel "--config=asan" --config=asan
  run_bazel "--config=tsan" --config=tsan
  echo "=== Soft-RoCE guest tests ($(( $(date +%s) - start ))s elapsed)" >&2
  run_guest tests/verbs/run_guest_tests.sh
fi
echo "total time $(( $(date +%s) - start ))s" >&2
print_summary
status=$?
# Under CI (a fresh clone each time) the clone's Bazel server would idle on
# for hours after the run: stop it.
if [[ -n "${CI:-}" ]]; then bazel shutdown >/dev/null 2>&1 || true; fi
exit $status
