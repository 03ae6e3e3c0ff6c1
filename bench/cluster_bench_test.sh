#!/bin/bash
# //bench:cluster_bench_test: cluster_bench's command line and output, with
# every node in one process on the soft NIC (bench/cluster_bench_run.h).
#  1. --help lists every flag and exits 0;
#  2. bad flags (and a selection the cluster cannot run) exit 2 with a message
#     naming the problem; no job in the environment exits 1 saying what to set;
#     a thread that fails ends the run with exit 1 naming its node;
#  3. --in-process=3 --check-costs: six remote costs, each as the structures'
#     tests assert;
#  4. --in-process=3, a reduced matrix (every structure, YCSB A and E, both
#     key distributions, --local=0 and 100) for 1 s per cell: one JSON and one
#     CSV row per cell, counts per op that fit the local share (none on the
#     NIC at 100, the structures' remote costs at 0), and report.py reads the
#     JSON into exactly the CSV rows cluster_bench wrote.
# Every run is bounded by `timeout`. Prints PASS/FAIL per check; exits 1 on any
# failure.
set -u -o pipefail
R="${TEST_SRCDIR:+$TEST_SRCDIR/${TEST_WORKSPACE:-rdmads}}"
R="${R:-$(cd "$(dirname "$0")/.." && pwd)}"
B=$R/bench/cluster_bench
REPORT=$R/bench/suite/report.py
[ -x "$B" ] || B=$(cd "$(dirname "$0")/.." && pwd)/bazel-bin/bench/cluster_bench
PY=/usr/bin/python3
[[ -x $PY ]] || PY=python3
T=${TEST_TMPDIR:-$(mktemp -d)}
# No job in the environment: every run here is in process unless it says so.
unset PMIX_NAMESPACE RDMADS_NODE_ID RDMADS_NODES RDMADS_COORDINATOR RDMADS_CLUSTER
FAILED=0
pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; FAILED=1; }

# run LIMIT ARGS...: runs cluster_bench; stdout in $T/out, stderr in $T/err, exit code in RC.
run() {
  local limit=$1; shift
  timeout -k 5 "$limit" "$B" "$@" >"$T/out" 2>"$T/err"
  RC=$?
}

# ---- 1. --help
run 10 --help
if [ $RC = 0 ]; then pass "--help exits 0"; else fail "--help exited $RC"; fi
for f in in-process fabric poll structures workloads dists local seconds warmup threads keys seed check-costs \
         json csv help device port gid-index; do
  grep -q -- "--$f" "$T/out" || fail "--help does not list --$f"
done
grep -q "Default 100000" "$T/out" || fail "--help does not give --keys' default"

# ---- 2. bad flags: exit 2 and a message naming the problem
bad() {  # bad 'expected message' ARGS...
  local want=$1; shift
  run 30 "$@"
  if [ $RC = 2 ] && grep -qF -- "$want" "$T/err"; then
    pass "bad flags $* -> exit 2: $(head -1 "$T/err")"
  else
    fail "bad flags $*: exit $RC (want 2), stderr: $(head -2 "$T/err") (want '$want')"
  fi
}
bad "unknown flag '--bogus'" --bogus
bad "--seconds=0" --seconds=0
bad "--local=101" --local=101
bad "unknown structure 'tree'" --structures=tree
bad "unknown distribution 'gauss'" --dists=gauss
bad "--threads=0" --threads=0
bad "--keys needs a value" --keys
bad "--check-costs takes no value" --check-costs=1
bad "unexpected argument 'extra'" extra
bad "nothing to run" --structures=hash_map --workloads=e
bad "needs keys homed on another node" --in-process=1 --local=0
bad "needs at least 2 nodes" --in-process=1 --check-costs
bad "--fabric=soft" --fabric=soft --device=rxe0 --in-process=2
# Three processes asked for, but no launcher, no coordinator and no
# --in-process: a setup error (1) that says what to set.
RDMADS_NODES=3 RDMADS_NODE_ID=1 run 30 --seconds=1
if [ $RC = 1 ] && grep -q "RDMADS_COORDINATOR" "$T/err" && grep -q -- "--in-process" "$T/err"; then
  pass "no job -> exit 1: $(head -1 "$T/err")"
else
  fail "no job: exit $RC (want 1), stderr: $(cat "$T/err")"
fi

# A thread that fails ends the run with exit 1, naming its node and thread:
# with 100 keys over 40 nodes some node has none of its own for --local=100.
run 60 --in-process=40 --keys=100 --local=100 --structures=hash_map --workloads=c --dists=uniform --seconds=0.1
if [ $RC = 1 ] && grep -qE "node [0-9]+ thread 0: no key is homed on node" "$T/err"; then
  pass "a failing thread -> exit 1: $(tail -1 "$T/err")"
else
  fail "a failing thread: exit $RC (want 1), stderr: $(tail -2 "$T/err")"
fi

# ---- 3. the cost check
run 120 --in-process=3 --fabric=soft --check-costs
ok_lines=$(grep -cE ' ok$' "$T/out")
if [ $RC = 0 ] && [ "$ok_lines" = 6 ] && ! grep -q DIFFERS "$T/out"; then
  pass "--check-costs: 6 costs as the tests assert"
else
  fail "--check-costs: exit $RC, $ok_lines ok lines (want 6)"; cat "$T/out" "$T/err"
fi
sed 's/^/    /' "$T/out"

# ---- 4. a reduced matrix, its rows, and report.py on them
start=$(date +%s)
run 600 --in-process=3 --fabric=soft --seconds=1 --warmup=0.2 --keys=20000 --workloads=a,e --local=0,100 \
    --json="$T/cluster.json" --csv="$T/cluster.csv"
echo "    matrix took $(( $(date +%s) - start )) s (exit $RC)"
sed 's/^/    /' "$T/out"
if [ $RC = 0 ]; then pass "matrix exits 0"; else fail "matrix exited $RC: $(tail -5 "$T/err")"; fi
grep -q '\[14/14\] queue enq_deq local=100' "$T/err" || fail "no progress line for the last cell on stderr"
grep -q 'about [0-9]* s left' "$T/err" || fail "progress does not say the time left"

"$PY" - "$T/cluster.json" "$T/cluster.csv" <<'EOF' || FAILED=1
import csv, json, sys
doc = json.load(open(sys.argv[1]))
rows = doc["benchmarks"]
want = set()
for dist in ("uniform", "zipf0.99"):
    for local, path in (("0", "remote"), ("100", "native")):
        want.add(f"{path}/map/get50_put50/{dist}/local:{local}/nodes:3/procs:1/real_time/threads:3")
        for mix in ("get50_put50", "scan95_insert5"):
            want.add(f"{path}/skiplist/{mix}/{dist}/local:{local}/nodes:3/procs:1/real_time/threads:3")
want |= {f"{p}/queue/enq_deq/local:{l}/nodes:3/procs:1/real_time/threads:3" for l, p in (("0", "remote"), ("100", "native"))}
bad = []
names = [r["name"] for r in rows]
if len(names) != 14 or set(names) != want:
    bad.append(f"rows {sorted(names)} != {sorted(want)}")
# The uncontended remote costs (bench/cluster_bench_costs.cc) are the lower
# bounds: a map get 2 / put 9 NIC ops (6 for the few keys whose windows share
# a unit), an ordered-map get 1 / put 8 (its clients' leaf caches are full
# after cluster_bench's first Scan of the whole map), a queue pair 16. Lock
# waits and a Scan's reads past its start add some.
remote_nic = {"map/get50_put50": (5.0, 7.5), "skiplist/get50_put50": (4.5, 7), "queue/enq_deq": (16, 32),
              "skiplist/scan95_insert5": (1.5, 40)}
for r in rows:
    n = r["name"]
    if not (r["items_per_second"] > 0 and r["iterations"] > 0 and r["median_us"] > 0 and r["p99_us"] >= r["median_us"]):
        bad.append(f"{n}: no throughput or latency: {r}")
    if "/local:100/" in n:
        if r["local_pct"] != 100:
            bad.append(f"{n}: local_pct {r['local_pct']} != 100")
        # A Scan of 50 from a key near the end of a node's range reads on into the next node's.
        if r["nic_ops/op"] > (0.1 if "scan" in n else 0):
            bad.append(f"{n}: {r['nic_ops/op']} NIC ops per op with every key local")
    if "/local:0/" in n:
        if r["local_pct"] != 0:
            bad.append(f"{n}: local_pct {r['local_pct']} != 0")
        lo, hi = next(v for k, v in remote_nic.items() if f"/{k}/" in n)
        if not lo * 0.95 <= r["nic_ops/op"] <= hi:  # a short run's mix is within a few % of its share
            bad.append(f"{n}: {r['nic_ops/op']} NIC ops per op, expected {lo}..{hi}")
        if not 0 < r["round_trips/op"] <= r["nic_ops/op"]:
            bad.append(f"{n}: round trips per op {r['round_trips/op']}")
with open(sys.argv[2]) as f:
    c = list(csv.reader(f))
header = ["fabric", "structure", "path", "workload", "threads", "ops_per_s", "nic_ops_per_op", "doorbells_per_op",
          "round_trips_per_op", "bytes_per_op", "p50_ns", "p99_ns", "benchmark"]
if c[0] != header:
    bad.append(f"CSV header {c[0]}")
if [r[-1] for r in c[1:]] != names or {r[0] for r in c[1:]} != {"soft"}:
    bad.append("CSV rows are not the JSON's, or their fabric is not soft")
for b in bad:
    print("FAIL:", b)
if not bad:
    print("PASS: 14 JSON and CSV rows, every cell, counts fit the local share")
sys.exit(1 if bad else 0)
EOF

# report.py reads the JSON and writes the same rows cluster_bench wrote itself.
"$PY" "$REPORT" --out "$T/report" --label soft "$T/cluster.json" >"$T/report.out" 2>"$T/report.err"
rc=$?
if [ $rc = 0 ] && ! grep -q "report.py:" "$T/report.err" && cmp -s "$T/report/results.csv" "$T/cluster.csv"; then
  pass "report.py reads cluster.json into the same results.csv rows, no warning"
else
  fail "report.py: exit $rc, $(cat "$T/report.err"); diff: $(diff "$T/report/results.csv" "$T/cluster.csv" | head -5)"
fi

[ $FAILED = 0 ] && echo "cluster_bench_test: all passed" || echo "cluster_bench_test: FAILED"
exit $FAILED
