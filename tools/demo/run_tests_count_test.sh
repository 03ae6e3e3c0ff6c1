#!/usr/bin/env bash
# Tests tools/run_tests.sh's counting on canned bazel logs and fake guest
# scripts, without running the suite: sourcing run_tests.sh only defines
# count_bazel_log, run_guest and print_summary.
# Usage (under bazel test): run_tests_count_test.sh <path to run_tests.sh>
set -uo pipefail
script=${1:?usage: run_tests_count_test.sh RUN_TESTS_SH}
tmp=${TEST_TMPDIR:-$(mktemp -d)}
fail=0

# check NAME EXPECTED_LAST_LINE EXPECTED_STATUS EXPECTED_FAILED_LINES CMDS:
# runs CMDS in a fresh shell that sourced run_tests.sh, then print_summary;
# compares the last stdout line, the status, and the FAILED: lines (stderr).
check() {
  local name=$1 want_last=$2 want_status=$3 want_failed=$4 cmds=$5
  local out err status
  out=$(bash -c "source '$script'; $cmds; print_summary" 2>"$tmp/err")
  status=$?
  err=$(grep '^FAILED: ' "$tmp/err")
  if [[ "$(tail -n 1 <<<"$out")" != "$want_last" || $status -ne $want_status ||
        "$err" != "$want_failed" ]]; then
    echo "FAIL: $name" >&2
    echo "  last line: '$(tail -n 1 <<<"$out")' (want '$want_last')" >&2
    echo "  status: $status (want $want_status)" >&2
    echo "  FAILED lines: '$err'"$'\n'"  want: '$want_failed'" >&2
    fail=1
  else
    echo "ok: $name"
  fi
}

cat >"$tmp/clean.log" <<'LOG'
INFO: Build completed successfully, 10 total actions
//a:x_test                                                        PASSED in 0.1s
//a:y_test                                               (cached) PASSED in 0.2s
//b:z_test                                                        PASSED in 1.0s

Executed 2 out of 3 tests: 3 tests pass.
LOG
# A server crash mid-run: some PASSED lines, then nothing (no ERROR:, no
# summary); bazel exits 37.
head -n 3 "$tmp/clean.log" >"$tmp/crash.log"
: >"$tmp/empty.log"
cat >"$tmp/failures.log" <<'LOG'
//a:x_test                                                        PASSED in 0.1s
//a:y_test                                                        FAILED in 0.2s
//b:z_test                                                       TIMEOUT in 60.0s
//b:w_test                                                     NO STATUS

Executed 3 out of 4 tests: 1 test passes and 3 fail locally.
LOG
cat >"$tmp/odd.log" <<'LOG'
//a:x_test                                                        PASSED in 0.1s
//a:f_test                                 FLAKY, failed in 1 out of 2 in 3.1s
//a:p_test                                       (1/3 cached) FAILED in 2.0s
//a:b_test                                                 FAILED TO BUILD
//a:n_test                                                 SOMETHING NEW

Executed 3 out of 5 tests: 1 test passes and 4 fail locally.
LOG
cat >"$tmp/builderror.log" <<'LOG'
ERROR: /work/a/BUILD:3:8: Compiling a/x.cc failed: (Exit 1)
INFO: Elapsed time: 1.0s
LOG

check "clean run" "3 passed, 0 failed" 0 "" \
  "count_bazel_log '(default)' '$tmp/clean.log' 0"
check "crash without ERROR: or status lines" "2 passed, 1 failed" 1 \
  "FAILED: --config=asan bazel exit 37" \
  "count_bazel_log '--config=asan' '$tmp/crash.log' 37"
check "interrupted before any output" "0 passed, 1 failed" 1 \
  "FAILED: (default) bazel exit 8" \
  "count_bazel_log '(default)' '$tmp/empty.log' 8"
check "failed targets are counted, not the exit status" "1 passed, 3 failed" 1 \
  "FAILED: (default) //a:y_test FAILED
FAILED: (default) //b:z_test TIMEOUT
FAILED: (default) //b:w_test NO" \
  "count_bazel_log '(default)' '$tmp/failures.log' 3"
check "flaky, partly cached, failed to build and unknown statuses fail" "1 passed, 4 failed" 1 \
  "FAILED: (default) //a:f_test FLAKY
FAILED: (default) //a:p_test FAILED
FAILED: (default) //a:b_test FAILED
FAILED: (default) //a:n_test SOMETHING" \
  "count_bazel_log '(default)' '$tmp/odd.log' 0"
check "build error" "0 passed, 1 failed" 1 \
  "FAILED: --config=tsan bazel exit 1 (build error, see the ERROR: lines)" \
  "count_bazel_log '--config=tsan' '$tmp/builderror.log' 1"
check "nothing ran" "0 passed, 0 failed" 1 "" \
  "count_bazel_log '(default)' '$tmp/empty.log' 0"
check "configurations add up" "5 passed, 1 failed" 1 \
  "FAILED: --config=tsan bazel exit 37" \
  "count_bazel_log '(default)' '$tmp/clean.log' 0
   count_bazel_log '--config=tsan' '$tmp/crash.log' 37"

# Guest script stand-ins.
printf '#!/bin/sh\necho "== summary"\necho "4 passed, 0 failed"\n' >"$tmp/guest_ok.sh"
printf '#!/bin/sh\necho "3 passed, 2 failed"\nexit 1\n' >"$tmp/guest_fail.sh"
printf '#!/bin/sh\necho "4 passed, 0 failed"\nexit 1\n' >"$tmp/guest_exit.sh"
printf '#!/bin/sh\necho "PASS tests.a guest0 1 tests passed"\necho "FAIL tests.b guest0 exit 1"\necho "1 passed, 1 failed"\nexit 1\n' >"$tmp/guest_named.sh"
printf '#!/bin/sh\necho "qemu: cannot start"\nexit 1\n' >"$tmp/guest_nosummary.sh"
cp "$tmp/guest_ok.sh" "$tmp/guest_noexec.sh"
chmod +x "$tmp/guest_ok.sh" "$tmp/guest_fail.sh" "$tmp/guest_named.sh" "$tmp/guest_exit.sh" "$tmp/guest_nosummary.sh"
chmod -x "$tmp/guest_noexec.sh"

check "guest ok" "7 passed, 0 failed" 0 "" \
  "count_bazel_log '(default)' '$tmp/clean.log' 0; run_guest '$tmp/guest_ok.sh'"
check "guest failures" "3 passed, 2 failed" 1 "FAILED: guest: see the guest summary above" \
  "run_guest '$tmp/guest_fail.sh'"
check "guest failures named" "1 passed, 1 failed" 1 "FAILED: guest: tests.b guest0 exit 1" \
  "run_guest '$tmp/guest_named.sh'"
check "guest exits non-zero after 0 failed" "4 passed, 1 failed" 1 \
  "FAILED: guest: $tmp/guest_exit.sh exit 1 after reporting no failure" \
  "run_guest '$tmp/guest_exit.sh'"
check "guest without summary" "3 passed, 1 failed" 1 \
  "FAILED: guest: $tmp/guest_nosummary.sh printed no summary (exit 1)" \
  "count_bazel_log '(default)' '$tmp/clean.log' 0; run_guest '$tmp/guest_nosummary.sh'"
check "guest script missing" "3 passed, 1 failed" 1 \
  "FAILED: guest: $tmp/no_such_guest.sh is missing or not executable" \
  "count_bazel_log '(default)' '$tmp/clean.log' 0; run_guest '$tmp/no_such_guest.sh'"
check "guest script not executable" "3 passed, 1 failed" 1 \
  "FAILED: guest: $tmp/guest_noexec.sh is missing or not executable" \
  "count_bazel_log '(default)' '$tmp/clean.log' 0; run_guest '$tmp/guest_noexec.sh'"

# A signal to run_tests.sh reaches the stage it is waiting for (by pid), and
# the run ends as interrupted, never with a summary.
printf '#!/bin/sh\necho $$ >"%s/slow.pid"\nexec sleep 30\n' "$tmp" >"$tmp/guest_slow.sh"
chmod +x "$tmp/guest_slow.sh"
bash -c "source '$script'; trap_interrupts; run_guest '$tmp/guest_slow.sh'; print_summary" \
  >"$tmp/sig.out" 2>&1 &
runner=$!
for _ in $(seq 1 100); do [[ -s "$tmp/slow.pid" ]] && break; sleep 0.1; done
sleep 0.3
kill -TERM "$runner"
wait "$runner"
st=$?
slow=$(cat "$tmp/slow.pid" 2>/dev/null || echo 0)
if [[ $st -eq 130 && $slow -ne 0 ]] && ! kill -0 "$slow" 2>/dev/null && grep -q 'interrupted' "$tmp/sig.out" &&
   ! grep -q ' passed, ' "$tmp/sig.out"; then
  echo "ok: a signal stops the running stage and the run"
else
  echo "FAIL: a signal stops the running stage and the run (status $st, stage pid $slow)" >&2
  cat "$tmp/sig.out" >&2
  [[ $slow -ne 0 ]] && kill "$slow" 2>/dev/null
  fail=1
fi

# A failed target's excerpt: its failure lines and its log's end come before
# the verdict; a target without a log says so.
mkdir -p "$tmp/testlogs/a/y_test"
{ echo "[ RUN      ] T.Passes"; for i in $(seq 1 30); do echo "noise $i"; done
  echo "x_test.cc:63: Failure"; echo "Expected: (a) > (b), actual: 26 vs 40"
  echo "  x"; echo "    Which is: 2"; echo "  y"; echo "what the assertion says"
  for i in $(seq 1 30); do echo "more noise $i"; done; echo "[  FAILED  ] T.Fails"; } \
  >"$tmp/testlogs/a/y_test/test.log"
err=$(bash -c "source '$script'; count_bazel_log '--config=asan' '$tmp/failures.log' 3
               excerpt_failed_logs '--config=asan' '$tmp/failures.log' '$tmp/testlogs'; print_summary" 2>&1 >/dev/null)
if grep -q -- '--- --config=asan //a:y_test' <<<"$err" && grep -q 'actual: 26 vs 40' <<<"$err" &&
   grep -q 'what the assertion says' <<<"$err" &&
   grep -q 'more noise 30' <<<"$err" && ! grep -q 'noise 5$' <<<"$err" &&
   grep -q "no test log at $tmp/testlogs/b/z_test/test.log" <<<"$err" &&
   [[ $(grep -n 'actual: 26' <<<"$err" | cut -d: -f1) -lt $(grep -n '^FAILED: ' <<<"$err" | head -n 1 | cut -d: -f1) ]]; then
  echo "ok: failed tests' excerpts"
else
  echo "FAIL: failed tests' excerpts:"$'\n'"$err" >&2
  fail=1
fi

# --help still works and runs nothing else.
help=$(bash "$script" --help) || { echo "FAIL: --help exited non-zero" >&2; fail=1; }
grep -q -- '--quick' <<<"$help" || { echo "FAIL: --help does not mention --quick" >&2; fail=1; }

[[ $fail -eq 0 ]] && echo "PASS"
exit $fail
