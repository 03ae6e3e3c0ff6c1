#!/usr/bin/env python3
"""Checks a benchmark suite run's results.csv (bench/run_suite.sh).

Usage: check_suite.py RESULTS_CSV

Contract: exits 0 when every row the suite must produce is there and the
uncontended per-operation counts equal the ones the structures' own tests
assert (tests/structures/*_test.cc, tests/locks/lock_api_test.cc,
tests/rdma/*); otherwise prints each problem on stderr and exits 1.

Rows are found by their `benchmark` column (the Google Benchmark name, or
"lock_bench ..." for the lock table), so the check does not depend on how
report.py classifies them. Counts hold for the values the benchmarks use
(32 bytes): bytes per op differ from the tests' 24-byte values and are
checked only where the benchmarks fix them.
"""

import csv
import re
import sys

STRUCTURES = {
    # structure: (its benchmarks' name, baselines, workloads run on every path)
    "hash_map": ("map", ["std_mutex", "absl_sharded64"], ["get95_put5", "get50_put50", "get100"]),
    "skiplist": ("skiplist", ["std_map_mutex", "btree_map_mutex"],
                 ["get95_put5", "get50_put50", "get100", "scan95_insert5"]),
}
PATHS = ["native", "loopback", "remote"]

# (benchmark name regex, {column: exact value}); counts per operation.
ZERO = {"nic_ops_per_op": 0, "doorbells_per_op": 0, "round_trips_per_op": 0, "bytes_per_op": 0}
EXACT = [
    # The hash map (hash_map_test: get 2 NIC ops / 1 doorbell / 1 RT, two
    # 16-slot windows of 56-byte slots; put 9 / 5 / 4 when the key's windows
    # are in two units, as for all but about 1 in 5,000 of the keys here).
    (r"(loopback|remote)/map/get100/uniform/(min_time:[^/]*/)?real_time/threads:1",
     {"nic_ops_per_op": 2, "doorbells_per_op": 1, "round_trips_per_op": 1, "bytes_per_op": 1792}),
    (r"(loopback|remote)/map/put100/uniform/(min_time:[^/]*/)?real_time/threads:1",
     {"nic_ops_per_op": 9, "doorbells_per_op": 5, "round_trips_per_op": 4, "bytes_per_op": 2008}),
    (r"native/map/(get100|put100)/uniform/(min_time:[^/]*/)?real_time/threads:1", ZERO),
    # The ordered map (skiplist_test: get 1 / 1 / 1; put 8 / 3 / 2).
    (r"(loopback|remote)/skiplist/get100/uniform/(min_time:[^/]*/)?real_time/threads:1",
     {"nic_ops_per_op": 1, "doorbells_per_op": 1, "round_trips_per_op": 1, "bytes_per_op": 776}),
    (r"(loopback|remote)/skiplist/put100/uniform/(min_time:[^/]*/)?real_time/threads:1",
     {"nic_ops_per_op": 8, "doorbells_per_op": 3, "round_trips_per_op": 2, "bytes_per_op": 912}),
    (r"native/skiplist/(get100|put100)/uniform/(min_time:[^/]*/)?real_time/threads:1", ZERO),
    # The queue (queue_test: enqueue and dequeue 9 / 3 / 2 each; a batch of
    # 16 either way 9 / 3 / 3). One iteration is an enqueue and a dequeue.
    (r"(loopback|remote)/queue/batch:1/(min_time:[^/]*/)?real_time/threads:1",
     {"nic_ops_per_op": 18, "doorbells_per_op": 6, "round_trips_per_op": 4}),
    (r"(loopback|remote)/queue/batch:16/(min_time:[^/]*/)?real_time/threads:1",
     {"nic_ops_per_op": 18, "doorbells_per_op": 6, "round_trips_per_op": 6}),
    (r"native/queue/batch:(1|4|16)/(min_time:[^/]*/)?real_time/threads:1", ZERO),
    # The transport: one verb, one NIC op, one doorbell, one round trip.
    (r"(loopback|remote)/(READ|WRITE|CAS|FAA)/(min_time:[^/]*/)?real_time",
     {"nic_ops_per_op": 1, "doorbells_per_op": 1, "round_trips_per_op": 1, "bytes_per_op": 8}),
]
# Counts are exact to within this (the map's rare keys whose two windows share
# a unit cost less).
TOLERANCE = 0.01


def required_rows():
    """Benchmark-name regexes that must each match at least one row."""
    rows = []
    for structure, (name, baselines, workloads) in STRUCTURES.items():
        for w in workloads:
            for threads in (1, 2):
                for path in PATHS:
                    rows.append(rf"{path}/{name}/{w}/.*threads:{threads}")
                for b in baselines:
                    rows.append(rf"native/{b}/{w}/.*threads:{threads}")
    for path in PATHS:
        rows.append(rf"{path}/queue/batch:1/.*threads:1")
    for shape in ("1p1c", "2both"):
        for q in ("queue", "boost_lockfree", "tbb_bounded", "std_mutex"):
            rows.append(rf"native/{q}/{shape}/.*threads:2")
        for path in ("loopback", "remote"):
            rows.append(rf"{path}/queue/{shape}/.*threads:2")
    for verb in ("READ", "WRITE", "CAS", "FAA"):
        for path in ("loopback", "remote"):
            rows.append(rf"{path}/{verb}/")
    return rows


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        with open(argv[1], newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"check_suite: cannot read {argv[1]}: {e}", file=sys.stderr)
        return 2
    problems = []
    names = [r.get("benchmark", "") for r in rows]
    for pattern in required_rows():
        if not any(re.match(pattern, n) for n in names):
            problems.append(f"no row for {pattern}")
    lock_rows = [r for r in rows if r.get("structure", "").startswith("lock") or "lock_bench" in r.get("benchmark", "")]
    if not lock_rows:
        problems.append("no lock-table rows")
    for pattern, want in EXACT:
        matched = [r for r in rows if re.match(pattern, r.get("benchmark", ""))]
        if not matched:
            problems.append(f"no row for {pattern}")
        for r in matched:
            for col, value in want.items():
                cell = r.get(col, "")
                try:
                    got = float(cell)
                except ValueError:
                    problems.append(f"{r['benchmark']}: {col} is {cell!r}, want {value}")
                    continue
                if abs(got - value) > TOLERANCE * max(1.0, value):
                    problems.append(f"{r['benchmark']}: {col} = {got:g}, want {value}")
    # Native rows use no NIC, except scans, which may run on into the next
    # node's range (a remote part).
    for r in rows:
        name = r.get("benchmark", "")
        if name.startswith("native/") and "scan" not in name and r.get("nic_ops_per_op") not in ("", None):
            if float(r["nic_ops_per_op"]) != 0:
                problems.append(f"{r['benchmark']}: a native row with {r['nic_ops_per_op']} NIC ops per op")
    for p in problems:
        print(f"check_suite: {p}", file=sys.stderr)
    print(f"check_suite: {len(rows)} rows, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
