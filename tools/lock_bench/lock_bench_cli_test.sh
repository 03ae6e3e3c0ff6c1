#!/bin/bash
# CLI contract of tools/lock_bench: --help, exit code 2 + message on bad
# input, and short runs of every lock in every output format.
set -u
BIN="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-rdmads}/tools/lock_bench/lock_bench"
[ -x "$BIN" ] || BIN="$(dirname "$0")/lock_bench"
fail=0

expect_code() {  # expected-code description args...
  local want=$1 what=$2; shift 2
  local out rc
  out=$("$BIN" "$@" 2>&1); rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: $what: exit $rc, want $want; output: $out"; fail=1
  elif [ "$want" = 2 ] && ! grep -q "lock_bench: error:" <<<"$out"; then
    echo "FAIL: $what: no clear error message: $out"; fail=1
  else
    echo "ok: $what"
  fi
}

expect_code 0 "--help" --help
"$BIN" --help | grep -q -- "--p-local" || { echo "FAIL: --help does not list --p-local"; fail=1; }
expect_code 2 "unknown lock" --lock nope
expect_code 2 "p-local above 100" --p-local 120
expect_code 2 "p-local below 0" --p-local -1
expect_code 2 "zero threads" --threads-per-node 0
expect_code 2 "zero nodes" --nodes 0
expect_code 2 "fewer keys than nodes" --nodes 3 --keys 2
expect_code 2 "zero budget" --local-budget 0
expect_code 2 "bad output" --output yaml
expect_code 2 "bad fabric" --fabric carrier-pigeon
expect_code 2 "negative duration" --duration -1
expect_code 2 "unknown option" --frobnicate
expect_code 2 "non-numeric value" --nodes two
expect_code 2 "local-mcs with remote keys" --lock local-mcs --p-local 50
expect_code 2 "one node with remote keys" --nodes 1 --p-local 50

for lock in alock rdma-spin rdma-mcs; do
  for fmt in text json csv; do
    expect_code 0 "$lock $fmt" --lock $lock --output $fmt --warmup 0 --duration 0.2 --keys 16 --p-local 50 -q
  done
done
expect_code 0 "local-mcs" --lock local-mcs --p-local 100 --warmup 0 --duration 0.2 -q
expect_code 0 "alock loopback" --lock alock --local-path loopback --warmup 0 --duration 0.2 -q
out=$("$BIN" --lock alock --p-local 100 --warmup 0 --duration 0.2 --output json -q)
grep -q '"nic_ops":0.0000' <<<"$out" || { echo "FAIL: native-only ALock used the NIC: $out"; fail=1; }
exit $fail
