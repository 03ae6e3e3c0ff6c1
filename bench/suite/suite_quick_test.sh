#!/bin/bash
# bench/run_suite.sh end to end on the soft NIC: its CLI contract (--help,
# exit 2 on bad input), then a --quick run with a tiny per-benchmark time
# whose results.csv must hold every structure x path x baseline row with the
# uncontended counts the structures' own tests assert (check_suite.py), and
# whose plots must be PNGs.
set -u
R="${TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}/${TEST_SRCDIR:+${TEST_WORKSPACE:-rdmads}}"
R="${R%/}"
SUITE="$R/bench/run_suite.sh"
OUT="${TEST_TMPDIR:-$(mktemp -d)}/suite"
# Under TSan, the baselines' known reports are suppressed (see the file).
export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$R/bench/suite/tsan_suppressions.txt"
fail=0
bad() { echo "FAIL: $*"; fail=1; }

"$SUITE" --help | grep -q -- "--quick" || bad "--help does not list --quick"
for args in "--fabric=nope" "--parts=nope" "--min-time=abc" "--keys=0" "--keys=many" "--bogus"; do
  out=$("$SUITE" $args --no-build --bin-dir "$R" 2>&1); rc=$?
  [[ $rc -eq 2 ]] || bad "$args: exit $rc, want 2"
  grep -q "run_suite.sh:" <<<"$out" || bad "$args: no clear message: $out"
done

# 5,000 keys per map: this checks the pipeline, not the figures, and loading
# the quick suite's 20,000 takes minutes under TSan.
"$SUITE" --quick --no-build --bin-dir "$R" --min-time 0.01 --keys 5000 --fabric=soft --out "$OUT"
rc=$?
[[ $rc -eq 0 ]] || bad "the quick suite exited $rc"
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
"$PY" "$R/bench/suite/check_suite.py" "$OUT/results.csv" || bad "check_suite.py"
pngs=0
for f in "$OUT"/*.png; do
  [[ -s "$f" && "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] || bad "$f is not a PNG"
  pngs=$((pngs + 1))
done
[[ $pngs -ge 5 ]] || bad "only $pngs plots in $OUT"
[[ $fail -eq 0 ]] && echo "PASS"
exit $fail
