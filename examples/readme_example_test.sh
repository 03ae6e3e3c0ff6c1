#!/bin/bash
# README.md's "Use it in your service" shows examples/service.cc verbatim,
# and the program runs: as a one-process job on the soft NIC here, and
# without a launcher it exits 1 saying what to set.
set -u
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(dirname "$0")
readme=README.md
source=examples/service.cc
bin=$dir/service
[ -f "$readme" ] && [ -f "$source" ] && [ -x "$bin" ] || fail "missing README.md, $source or $bin (run under bazel test)"

# The block after the marker line, between its ```cpp fence and the closing fence.
block=$(awk '/^<!-- examples\/service.cc -->$/ {m = 1; next}
             m == 1 && /^```cpp$/ {m = 2; next}
             m == 2 && /^```$/ {exit}
             m == 2 {print}' "$readme")
[ -n "$block" ] || fail "README.md has no \`<!-- examples/service.cc -->\` marker followed by a cpp block"
if ! diff <(printf '%s\n' "$block") "$source" >/tmp/readme_example_diff.$$ 2>&1; then
  cat /tmp/readme_example_diff.$$ >&2
  rm -f /tmp/readme_example_diff.$$
  fail "README.md's copy of $source differs from the file (diff above: < README, > file)"
fi
rm -f /tmp/readme_example_diff.$$

# A one-process job on the soft NIC: no launcher, no coordinator.
out=$(env -u PMIX_NAMESPACE -u RDMADS_COORDINATOR -u RDMADS_NODES -u RDMADS_NODE_ID RDMADS_FABRIC=soft \
      RDMADS_CLUSTER=readme-$$ timeout -k 5 60 "$bin" 2>&1)
rc=$?
[ $rc = 0 ] || fail "service exited $rc: $out"
[ "$out" = "rank 0 read rank 0's login" ] || fail "unexpected output: $out"

# Three processes asked for, but no launcher and no coordinator: a clear
# error, exit 1, no hang.
out=$(env -u PMIX_NAMESPACE -u RDMADS_COORDINATOR RDMADS_NODES=3 RDMADS_NODE_ID=1 timeout -k 5 60 "$bin" 2>&1)
rc=$?
[ $rc = 1 ] || fail "without a launcher or a coordinator service exited $rc (want 1): $out"
case $out in
  *RDMADS_COORDINATOR*) ;;
  *) fail "without a launcher or a coordinator the error does not say what to set: $out" ;;
esac
echo "PASS: README's example is examples/service.cc, and it runs"
