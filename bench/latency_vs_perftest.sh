#!/usr/bin/env bash
# Our transport's READ/WRITE/CAS/FAA latency vs perftest on the same rxe0
# device (loopback), in ONE Soft-RoCE guest boot. Runs ROUNDS interleaved
# rounds (ours first in odd rounds, perftest first in even ones), then prints
# the median over rounds of each median and p99, the ratio ours / perftest,
# and the range of the per-round median ratios. Run on the host:
#   bench/latency_vs_perftest.sh [--rounds N]     (default 5)
# WRITE is compared like for like: ib_write_lat reports half a ping-pong round
# trip, and so does our pingpong/WRITE. Our WRITE-with-completion (a full
# round trip) is printed as an extra row without a perftest counterpart.
set -euo pipefail
ROUNDS=5 BINARY=
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || { echo "latency_vs_perftest.sh: --rounds needs a positive integer" >&2; exit 2; }
              ROUNDS=$2; shift ;;
    --rounds=*) ROUNDS=${1#--rounds=}
              [[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || { echo "latency_vs_perftest.sh: --rounds needs a positive integer" >&2; exit 2; } ;;
    --binary) [[ -n "${2:-}" ]] || { echo "latency_vs_perftest.sh: --binary needs a path" >&2; exit 2; }
              BINARY=$2; shift ;;  # internal: the host passes the built binary to the guest
    -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "latency_vs_perftest.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
  shift
done
cd "$(dirname "$0")/.."
if [[ "${RXE_IN_GUEST:-}" == 1 ]]; then
  ours() {
    # stderr (Google Benchmark's context, any error) goes to the run's log.
    "$BINARY" --fabric=verbs --benchmark_filter='^(loopback|pingpong)/' \
        --benchmark_min_time=0.3 --benchmark_format=csv | sed "s/^/ours,$1,/"
  }
  theirs() { tools/rxe_vm/perftest_baseline.sh -n 5000 | sed "s/^perftest /perftest round=$1 /"; }
  # A failed run is recorded, not fatal: the rounds that finished (and the
  # failure's own lines) still reach the host's report.
  fail=0
  for r in $(seq "$ROUNDS"); do
    echo "round $r of $ROUNDS" >&2
    if (( r % 2 )); then
      ours "$r" || fail=1; theirs "$r" || fail=1
    else
      theirs "$r" || fail=1; ours "$r" || fail=1
    fi
  done
  exit "$fail"
fi
tools/setup_deps.sh --guest
bazel build -c opt //bench:transport_latency 2>&1 | tail -n 3 >&2
# Resolve the binary now: the bazel-bin symlink moves with later builds.
BINARY=$(readlink -f "$(bazel info -c opt bazel-bin 2>/dev/null)/bench/transport_latency")
[[ -x "$BINARY" ]] || { echo "latency_vs_perftest.sh: build of //bench:transport_latency failed" >&2; exit 1; }
rc=0
out=$(tools/rxe_vm/rxe_run --timeout $((300 + 240 * ROUNDS)) -- \
      bench/latency_vs_perftest.sh --rounds "$ROUNDS" --binary "$BINARY") || rc=$?
[[ $rc -eq 0 ]] || echo "latency_vs_perftest.sh: the guest run failed (exit $rc); reporting what it printed" >&2
py_rc=0
python3 - "$out" <<'PY' || py_rc=$?
import collections, csv, io, re, statistics, sys
text = sys.argv[1]
ours = collections.defaultdict(dict)   # row -> round -> (median, p99)
perf = collections.defaultdict(dict)
hdr = None
failures = []  # reported after the table of what did run
for line in text.splitlines():
    if not line.startswith("ours,"):
        continue
    _, rnd, rest = line.split(",", 2)
    row = next(csv.reader(io.StringIO(rest)))
    if row[0] == "name":
        hdr = row; continue
    d = dict(zip(hdr, row))
    if d.get("error_occurred") == "true":
        failures.append(f"round {rnd}: our benchmark {d['name']} failed: {d.get('error_message')}")
        continue
    kind, verb = d["name"].split("/")[:2]
    key = "WRITE" if kind == "pingpong" else ("WRITE (completion)" if verb == "WRITE" else verb)
    ours[key][int(rnd)] = (float(d["median_us"]), float(d["p99_us"]))
for line in text.splitlines():
    m = re.match(r"perftest round=(\d+) (\S+) .*median_us=([\d.]+) .*p99_us=([\d.]+)", line)
    if m:
        perf[m.group(2)][int(m.group(1))] = (float(m.group(3)), float(m.group(4)))
    elif "FAILED" in line and line.startswith("perftest"):
        failures.append(line)
names = {"READ": "read", "WRITE": "write", "CAS": "atomic_cas", "FAA": "atomic_faa", "WRITE (completion)": None}
med = lambda xs: statistics.median(xs)
print("| op | ours median µs | perftest median µs | ratio | per-round ratios | ours p99 µs | perftest p99 µs | p99 ratio |")
print("|---|---:|---:|---:|---|---:|---:|---:|")
for key, pk in names.items():
    o = ours.get(key, {})
    if not o:
        print(f"| {key} | missing | | | | | | |"); continue
    om, op = med([v[0] for v in o.values()]), med([v[1] for v in o.values()])
    if pk is None:
        print(f"| {key} | {om:.1f} | n/a | | | {op:.1f} | | |"); continue
    p = perf.get(pk, {})
    if not p:
        print(f"| {key} | {om:.1f} | missing | | | {op:.1f} | | |"); continue
    pm, pp = med([v[0] for v in p.values()]), med([v[1] for v in p.values()])
    per_round = sorted(o[r][0] / p[r][0] for r in o if r in p)
    rng = f"{per_round[0]:.2f}-{per_round[-1]:.2f}" if per_round else ""
    print(f"| {key} | {om:.1f} | {pm:.1f} | {om/pm:.2f} | {rng} | {op:.1f} | {pp:.1f} | {op/pp:.2f} |")
print(f"\n{len(set(r for v in ours.values() for r in v))} rounds; medians over rounds of each round's median (p99).")
if failures:
    print("\nFAILED:\n" + "\n".join(failures), file=sys.stderr)
    sys.exit(1)
PY
# The report is printed either way; the exit status says whether all ran.
[[ $rc -eq 0 ]] || exit "$rc"
exit "$py_rc"
