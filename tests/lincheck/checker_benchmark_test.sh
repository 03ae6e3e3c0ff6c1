#!/usr/bin/env bash
# checker_benchmark must not report a figure for a wrong verdict:
# 1. BM_SelfTestWrongVerdict (expects "ok" from a corrupted history) must end
#    in a "wrong verdict" error;
# 2. the real map and queue benchmarks must run without any error (each
#    checks its verdict every iteration).
# Usage (under bazel test): checker_benchmark_test.sh <checker_benchmark>
set -uo pipefail
bench=${1:?usage: checker_benchmark_test.sh CHECKER_BENCHMARK}
fail=0

out=$("$bench" --self_test_wrong_verdict --benchmark_filter=SelfTest 2>&1)
echo "$out"
grep -q "ERROR OCCURRED: 'wrong verdict: illegal, expected ok'" <<<"$out" ||
  { echo "FAIL: the self-test's wrong verdict was not reported as an error" >&2; fail=1; }

out=$("$bench" --benchmark_filter='BM_(Map|Queue)' --benchmark_min_time=0.001 2>&1)
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || { echo "FAIL: checker_benchmark exited $rc" >&2; fail=1; }
if grep -q 'ERROR OCCURRED' <<<"$out"; then
  echo "FAIL: a benchmark reported an error" >&2; fail=1
fi
for name in BM_Map100kOps1kKeys8Threads BM_Map100kOps1kKeys8ThreadsCorrupted \
            BM_Queue2000Ops4ThreadsDecider/corrupted:0 BM_Queue2000Ops4ThreadsDecider/corrupted:1 \
            BM_Queue2000Ops4ThreadsGenericSearch/corrupted:0 BM_Queue2000Ops4ThreadsGenericSearch/corrupted:1; do
  grep -qE "^$name( |/)" <<<"$out" || { echo "FAIL: no result line for $name" >&2; fail=1; }
done

[[ $fail -eq 0 ]] && echo "PASS"
exit $fail
