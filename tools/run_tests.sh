#!/usr/bin/env bash
# Quick start, command 2: installs what is missing and runs the whole test
# suite: every Bazel test target plain, under ASan+UBSan and under TSan, then
# the real-verbs tests inside a Soft-RoCE qemu guest. Ends with the line
# "N passed, N failed" (test targets, counted per configuration).
#   --quick   plain configuration only, no sanitizers, no guest
set -uo pipefail
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

passed=0
failed=0
failed_names=()
start=$(date +%s)

run_bazel() {  # $1 = label, rest = bazel args
  local label=$1; shift
  echo "=== bazel test ${label} ($(( $(date +%s) - start ))s elapsed)" >&2
  local log
  log=$(mktemp)
  bazel test --test_summary=short "$@" //... 2>&1 | tee "$log" | grep -E '^//|^Executed|ERROR' >&2
  local p f=0
  p=$(grep -cE '^//\S+\s+(\(cached\) )?PASSED' "$log")
  # Each failed target, as "<target> <status>".
  while read -r name; do
    failed_names+=("${label} ${name}")
    f=$((f + 1))
  done < <(grep -E '^//\S+\s+(\(cached\) )?(FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE)' "$log" |
           awk '{for (i = 2; i <= NF; i++) if ($i ~ /^(FAILED|TIMEOUT|FLAKY|NO|INCOMPLETE)$/) { print $1, $i; break }}')
  if grep -q '^ERROR:' "$log" && [[ $f -eq 0 ]]; then  # build failure
    failed_names+=("${label} build error")
    f=1
  fi
  rm -f "$log"
  passed=$((passed + p))
  failed=$((failed + f))
}

run_bazel "(default)"
if [[ $quick -eq 0 ]]; then
  run_bazel "--config=asan" --config=asan
  run_bazel "--config=tsan" --config=tsan
  if [[ -x tests/verbs/run_guest_tests.sh ]]; then
    echo "=== Soft-RoCE guest tests ($(( $(date +%s) - start ))s elapsed)" >&2
    out=$(tests/verbs/run_guest_tests.sh 2>&1 | tee /dev/stderr | tail -n 1)
    if [[ "$out" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
      passed=$((passed + BASH_REMATCH[1]))
      failed=$((failed + BASH_REMATCH[2]))
      [[ ${BASH_REMATCH[2]} -gt 0 ]] && failed_names+=("guest: see the guest summary above")
    else
      failed=$((failed + 1))
      failed_names+=("guest: run_guest_tests.sh printed no summary")
    fi
  fi
fi
echo "total time $(( $(date +%s) - start ))s" >&2
for name in "${failed_names[@]}"; do echo "FAILED: ${name}" >&2; done
echo "${passed} passed, ${failed} failed"
[[ $failed -eq 0 && $passed -gt 0 ]]
