#!/usr/bin/env bash
# Runs bootstrap_probe (path in $1) under mpirun -np 3: PMIx from a real
# launcher, no MPI. Passes when all three ranks print their ok line with the
# same job. Skips (exit 0, "SKIPPED" in the log) only when mpirun is absent;
# tools/setup_deps.sh installs openmpi-bin, so CI always runs it.
set -uo pipefail

probe="$1"
if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIPPED: bootstrap_pmix_test: mpirun not found (apt-get install -y openmpi-bin libpmix-dev, or tools/setup_deps.sh)"
  exit 0
fi

# PMIx puts its rendezvous sockets under TMPDIR; Bazel's test TMPDIR is too
# long for a Unix socket path, so use a short private one.
tmp="$(mktemp -d /tmp/rdmads_pmix.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp"

out="$tmp/out"
timeout -k 10 120 mpirun --allow-run-as-root --oversubscribe -np 3 "$probe" >"$out" 2>&1
rc=$?
cat "$out"
if [[ $rc -ne 0 ]]; then
  [[ $rc -eq 124 ]] && echo "FAIL: mpirun did not finish within 120 s"
  echo "FAIL: mpirun -np 3 bootstrap_probe exited $rc"
  exit 1
fi

fail=0
for r in 0 1 2; do
  n=$(grep -c "^bootstrap_probe: ok rank $r of 3 kind pmix job " "$out")
  if [[ $n -ne 1 ]]; then
    echo "FAIL: expected one ok line from rank $r of 3 (kind pmix), found $n"
    fail=1
  fi
done
jobs=$(grep "^bootstrap_probe: ok " "$out" | sed 's/.* job //' | sort -u | wc -l)
if [[ $jobs -ne 1 ]]; then
  echo "FAIL: the ranks report $jobs different jobs"
  fail=1
fi
[[ $fail -eq 0 ]] && echo "PASS: 3 ranks under mpirun agree (AllGather, Barrier)"
exit $fail
