#!/usr/bin/env bash
# Runs the quick-start demo on the soft NIC and checks the per-operation
# counts that README.md's quick-start table quotes. The counts are exact
# (hardware-independent); ns/op is not checked. A change in the demo's costs
# or output format fails here, so update README.md's table with it.
# Usage (under bazel test): cluster_demo_test.sh <path to cluster_demo>
set -uo pipefail
demo=${1:?usage: cluster_demo_test.sh CLUSTER_DEMO}
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }

# The flags this test (and the README) rely on exist.
help=$("$demo" --help 2>&1) || err "--help exited $?"
for flag in --fabric --reps; do
  grep -q -- "$flag" <<<"$help" || err "--help does not list $flag"
done

out=$("$demo" --fabric=soft --reps=50 2>&1)
rc=$?
echo "$out"
[[ $rc -eq 0 ]] || err "cluster_demo --fabric=soft --reps=50 exited $rc"
grep -q '^all results checked: OK' <<<"$out" || err "no 'all results checked: OK' line"

# path op nic_ops doorbells round_trips bytes, one row each (README quick start).
expected=(
  "native WRITE 0 0 0 0" "native READ 0 0 0 0" "native CAS 0 0 0 0" "native FAA 0 0 0 0"
  "native put 0 0 0 0" "native get 0 0 0 0"
  "loopback map-get 2 1 1 1536" "loopback map-put 9 5 4 1744"
  "remote map-get 2 1 1 1536" "remote map-put 9 5 4 1744"
  "native enqueue 0 0 0 0" "native dequeue 0 0 0 0"
  "loopback enqueue 9 3 2 152" "loopback dequeue 9 3 2 152"
  "remote enqueue 9 3 2 152" "remote dequeue 9 3 2 152"
  "native ordered-get 0 0 0 0" "native ordered-put 0 0 0 0"
  "loopback ordered-get 1 1 1 648" "loopback ordered-put 8 3 2 776"
  "remote ordered-get 1 1 1 648" "remote ordered-put 8 3 2 776"
)
for path in loopback remote; do
  for op in READ WRITE CAS FAA; do expected+=("$path $op 1 1 1 8"); done
done

# Rows are "path op nic_ops doorbells round_trips bytes ns/op"; map rows
# (after the "Hash map" heading, before "Queue") get their op renamed
# map-put / map-get.
rows=$(awk '
  /^Hash map/ { map = 1 }
  /^Queue/ { map = 0 }
  $1 ~ /^(native|loopback|remote)$/ && NF == 7 {
    op = $2
    if (map && $1 != "native") op = "map-" op
    print $1, op, $3, $4, $5, $6
  }' <<<"$out")
for row in "${expected[@]}"; do
  n=$(grep -cxF -- "$row" <<<"$rows")
  [[ $n -eq 1 ]] || err "expected the row '$row' once, found it $n time(s)"
done
n=$(grep -c . <<<"$rows")
[[ $n -eq ${#expected[@]} ]] || err "expected ${#expected[@]} count rows, found $n:"$'\n'"$rows"

[[ $fail -eq 0 ]] && echo "PASS: cluster_demo counts match the README quick-start table"
exit $fail
