#!/usr/bin/env bash
# Our transport's loopback READ/WRITE/CAS/FAA latency vs perftest on the same
# rxe0 device, in ONE Soft-RoCE guest boot. Prints a table of medians, p99s
# and ratios (ours / perftest). Run on the host:
#   bench/latency_vs_perftest.sh
# Caveat printed with the table: ib_write_lat reports half a ping-pong round
# trip, while our WRITE waits for its completion (a full round trip).
set -euo pipefail
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "latency_vs_perftest.sh: takes no arguments (try --help)" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
if [[ "${RXE_IN_GUEST:-}" == 1 ]]; then
  bazel-bin/bench/transport_latency --fabric=verbs --benchmark_filter='^loopback/' \
      --benchmark_min_time=0.5 --benchmark_format=csv 2>/dev/null | sed 's/^/ours,/'
  tools/rxe_vm/perftest_baseline.sh
  exit 0
fi
tools/setup_deps.sh --guest
bazel build -c opt //bench:transport_latency >/dev/null 2>&1
out=$(tools/rxe_vm/rxe_run --timeout 900 -- bench/latency_vs_perftest.sh)
python3 - "$out" <<'PY'
import csv, io, re, sys
text = sys.argv[1]
ours = {}
lines = [l[5:] for l in text.splitlines() if l.startswith("ours,")]
rows = list(csv.reader(io.StringIO("\n".join(lines))))
hdr = rows[0]
for r in rows[1:]:
    d = dict(zip(hdr, r))
    verb = d["name"].split("/")[1]
    ours[verb] = (float(d["median_us"]), float(d["p99_us"]))
perf = {}
for l in text.splitlines():
    m = re.match(r"perftest (\S+) .*median_us=([\d.]+) .*p99_us=([\d.]+)", l)
    if m:
        perf[m.group(1)] = (float(m.group(2)), float(m.group(3)))
names = {"READ": "read", "WRITE": "write", "CAS": "cas", "FAA": "faa"}
print("| op | ours median µs | perftest median µs | ratio | ours p99 µs | perftest p99 µs | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for verb, key in names.items():
    pk = next((k for k in perf if k.startswith(key) or key in k), None)
    if verb not in ours or pk is None:
        print(f"| {verb} | missing | | | | | |"); continue
    (om, op), (pm, pp) = ours[verb], perf[pk]
    print(f"| {verb} | {om:.1f} | {pm:.1f} | {om/pm:.2f} | {op:.1f} | {pp:.1f} | {op/pp:.2f} |")
print("\nperftest keys seen:", ", ".join(sorted(perf)))
PY
