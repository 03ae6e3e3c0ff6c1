#!/usr/bin/env python3
"""The benchmark suite's report step: one tidy CSV and the plots.

Usage: report.py --out DIR [--label LABEL] INPUT...

Each INPUT is either a Google Benchmark JSON file (--benchmark_out_format=json)
written by bench/transport_latency, bench/hash_map_bench, bench/skiplist_bench
or bench/queue_bench, or the CSV that tools/lock_bench/run_table.sh keeps
(CSV_OUT; lock_bench --output csv rows). Writes into DIR:

  results.csv   one row per measurement, columns COLUMNS below. With
                repetitions, the median aggregate of each benchmark (the
                lock table: the run with the median throughput).
  throughput_<structure>[_LABEL].png   ops/s by path and threads, the
                baselines on the same axes (hash_map, skiplist, queue)
  counts_per_op[_LABEL].png   NIC ops and round trips per operation, by
                structure and operation (one thread, uncontended)
  locks_p_local[_LABEL].png   ALock vs the baseline locks over p_local
                (when a lock-table input is given)

Errors: an input that cannot be read or parsed ends the run with exit code 2
and a message naming it; nothing is written then. A benchmark name this
script does not know is kept in the CSV with structure "unknown", and a
warning names it.
"""

import argparse
import csv
import json
import os
import re
import statistics
import sys

COLUMNS = ["fabric", "structure", "path", "workload", "threads", "ops_per_s", "nic_ops_per_op",
           "doorbells_per_op", "round_trips_per_op", "bytes_per_op", "p50_ns", "p99_ns", "benchmark"]

# Benchmark name segment -> (structure family, structure column value).
IMPLS = {
    "map": ("hash_map", "hash_map"),
    "std_mutex@hash_map": ("hash_map", "hash_map/std_mutex"),
    "absl_sharded64": ("hash_map", "hash_map/absl_sharded64"),
    "skiplist": ("skiplist", "skiplist"),
    "std_map_mutex": ("skiplist", "skiplist/std_map_mutex"),
    "btree_map_mutex": ("skiplist", "skiplist/btree_map_mutex"),
    "queue": ("queue", "queue"),
    "boost_lockfree": ("queue", "queue/boost_lockfree"),
    "std_mutex@queue": ("queue", "queue/std_mutex"),
}
PATHS = ("native", "loopback", "remote", "mixed")
VERBS = ("READ", "WRITE", "CAS", "FAA")


class InputError(Exception):
    """An input file that cannot be used; the message names it."""


def warn(msg):
    print(f"report.py: warning: {msg}", file=sys.stderr)


def _num(v):
    return "" if v is None else f"{v:.10g}"


def _counter(b, *names):
    for n in names:
        if n in b:
            return float(b[n])
    return None


def _threads(name, b):
    m = re.search(r"threads:(\d+)", name)
    return int(m.group(1)) if m else int(b.get("threads", 1))


def _ops_per_s(b):
    if "items_per_second" in b:
        return float(b["items_per_second"])
    t = float(b.get("real_time", 0))
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}.get(b.get("time_unit", "ns"), 1e-9)
    return 1.0 / (t * unit) if t > 0 else None


def classify(name, file_family):
    """(structure, path, workload) for a Google Benchmark name, or None."""
    base = re.sub(r"/(min_time:[^/]*|real_time|threads:\d+|repeats:\d+)", "", name)
    parts = base.split("/")
    if len(parts) >= 2 and parts[0] in ("loopback", "remote") and parts[1] in VERBS:
        return "transport", parts[0], parts[1]
    if len(parts) >= 2 and parts[0] == "pingpong":
        return "transport", "remote", "pingpong_" + parts[1]
    if len(parts) >= 3 and parts[0] in PATHS:
        impl = parts[1]
        key = impl if impl in IMPLS else f"{impl}@{file_family}"
        if key in IMPLS:
            return IMPLS[key][1], parts[0], "/".join(parts[2:])
    return None


def family_of(structure):
    """The structure family a row belongs to (a baseline's is its structure's)."""
    return structure.split("/")[0]


def load_gbench(path):
    """Rows of one Google Benchmark JSON file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable Google Benchmark JSON file ({e})")
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise InputError(f"{path}: no \"benchmarks\" list (not Google Benchmark JSON output)")
    fname = os.path.basename(path)
    file_family = "queue" if "queue" in fname else "hash_map" if "hash" in fname else (
        "skiplist" if "skiplist" in fname else "")
    benches = data["benchmarks"]
    medians = [b for b in benches if b.get("aggregate_name") == "median"]
    chosen = medians if medians else [b for b in benches if b.get("run_type", "iteration") == "iteration"]
    rows = []
    for b in chosen:
        name = b.get("run_name") or b.get("name", "")
        if b.get("error_occurred"):
            warn(f"{path}: {name} reported an error: {b.get('error_message', '?')}")
            continue
        c = classify(name, file_family)
        if c is None:
            warn(f"{path}: cannot classify benchmark {name!r}; kept as structure 'unknown'")
            c = ("unknown", "", name)
        p50 = _counter(b, "median_us")
        p99 = _counter(b, "p99_us")
        rows.append({
            "structure": c[0], "path": c[1], "workload": c[2], "threads": _threads(name, b),
            "ops_per_s": _ops_per_s(b),
            "nic_ops_per_op": _counter(b, "nic_ops/op", "nic_ops"),
            "doorbells_per_op": _counter(b, "doorbells/op", "doorbells"),
            "round_trips_per_op": _counter(b, "round_trips/op", "round_trips"),
            "bytes_per_op": _counter(b, "bytes/op", "bytes"),
            "p50_ns": p50 * 1000 if p50 is not None else None,
            "p99_ns": p99 * 1000 if p99 is not None else None,
            "benchmark": name,
        })
    if not rows:
        warn(f"{path}: no benchmark rows")
    return rows


LOCK_FIELDS = ("lock", "p_local", "throughput_acq_per_s", "nic_ops_per_acq", "round_trips_per_acq")


def load_locks(path):
    """Rows of a lock_bench CSV (one line per run; the median run per config)."""
    try:
        with open(path, newline="") as f:
            runs = list(csv.DictReader(f))
    except (OSError, csv.Error, UnicodeDecodeError) as e:
        raise InputError(f"{path}: not a readable lock_bench CSV ({e})")
    if not runs or any(k not in runs[0] for k in LOCK_FIELDS):
        raise InputError(f"{path}: not a lock_bench CSV (want the columns {', '.join(LOCK_FIELDS)})")
    by_config = {}
    for r in runs:
        by_config.setdefault((r["lock"], int(r["p_local"])), []).append(r)
    rows = []
    for (lock, p_local), rs in sorted(by_config.items()):
        try:
            rs.sort(key=lambda r: float(r["throughput_acq_per_s"]))
            r = rs[(len(rs) - 1) // 2]
            threads = int(r.get("nodes", 1)) * int(r.get("threads_per_node", 1))
            rows.append({
                "structure": f"lock/{lock}",
                "path": "native" if p_local == 100 else "remote" if p_local == 0 else "mixed",
                "workload": f"p_local={p_local}", "threads": threads,
                "ops_per_s": float(r["throughput_acq_per_s"]),
                "nic_ops_per_op": float(r["nic_ops_per_acq"]),
                "doorbells_per_op": float(r["doorbells_per_acq"]) if r.get("doorbells_per_acq") else None,
                "round_trips_per_op": float(r["round_trips_per_acq"]),
                "bytes_per_op": float(r["bytes_per_acq"]) if r.get("bytes_per_acq") else None,
                "p50_ns": float(r["p50_ns"]) if r.get("p50_ns") else None,
                "p99_ns": float(r["p99_ns"]) if r.get("p99_ns") else None,
                "benchmark": f"lock_bench --lock {lock} --p-local {p_local}",
            })
        except (KeyError, ValueError) as e:
            raise InputError(f"{path}: a row for {lock} at p_local {p_local} is malformed ({e})")
    return rows


def load(path):
    """Rows of one input, by its kind (JSON or lock CSV)."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file")
    with open(path, "rb") as f:
        head = f.read(64).lstrip()
    return load_gbench(path) if head.startswith(b"{") else load_locks(path)


def write_csv(rows, fabric, out):
    path = os.path.join(out, "results.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in rows:
            w.writerow([fabric] + [r["structure"], r["path"], r["workload"], r["threads"]] +
                       [_num(r[c]) for c in COLUMNS[5:12]] + [r["benchmark"]])
    return path


# ---------------------------------------------------------------- plots

def _suffix(label):
    return f"_{label}" if label else ""


def _title(text, label):
    return f"{text} ({label})" if label else text


def plot_throughput(plt, rows, family, label, out):
    """Grouped bars: ops/s per (workload, threads), one bar per structure x path."""
    mine = [r for r in rows if family_of(r["structure"]) == family and r["ops_per_s"] and r["path"] != "mixed"]
    if not mine:
        return None
    groups = sorted({(r["workload"], r["threads"]) for r in mine})
    series = sorted({(r["structure"], r["path"]) for r in mine},
                    key=lambda s: (s[0] != family, PATHS.index(s[1]) if s[1] in PATHS else 9, s[0]))
    value = {(r["structure"], r["path"], r["workload"], r["threads"]): r["ops_per_s"] for r in mine}
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(groups) + 3), 5))
    width = 0.8 / len(series)
    for i, (structure, path) in enumerate(series):
        xs, ys = [], []
        for g, (workload, threads) in enumerate(groups):
            v = value.get((structure, path, workload, threads))
            if v:
                xs.append(g + i * width)
                ys.append(v)
        name = f"{family}, {path}" if structure == family else f"{structure.split('/', 1)[1]} (baseline, native)"
        ax.bar(xs, ys, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("operations / s (log)")
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{w}\n{t} thr" for w, t in groups], rotation=60, ha="right", fontsize=7)
    ax.set_title(_title(f"{family}: throughput by path and threads, baselines in the same run", label))
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, f"throughput_{family}{_suffix(label)}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# One thread, uncontended: the operations whose counts the structures' tests assert.
COUNT_OPS = [
    ("transport", r"^(READ|WRITE|CAS|FAA)$", "{w}"),
    ("hash_map", r"^(get100|put100)/uniform$", "map {w}"),
    ("skiplist", r"^(get100|put100)/uniform$", "ordered {w}"),
    ("queue", r"^batch:(1|16)$", "queue {w}"),
]


def plot_counts(plt, rows, label, out):
    """NIC ops and round trips per operation, remote path, one thread."""
    picked = []
    for structure, pattern, fmt in COUNT_OPS:
        for r in rows:
            if (r["structure"] == structure and r["path"] == "remote" and r["threads"] == 1
                    and re.match(pattern, r["workload"]) and r["nic_ops_per_op"] is not None):
                picked.append((fmt.format(w=r["workload"].split("/")[0]), r))
    if not picked:
        return None
    fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(picked) + 2), 4.5))
    xs = range(len(picked))
    ax.bar([x - 0.2 for x in xs], [r["nic_ops_per_op"] for _, r in picked], 0.4, label="NIC ops / op")
    ax.bar([x + 0.2 for x in xs], [r["round_trips_per_op"] or 0 for _, r in picked], 0.4,
           label="round trips / op")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([n for n, _ in picked], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("per operation (queue: per enqueue + dequeue)")
    ax.set_title(_title("Remote path, one thread: NIC ops and round trips per operation", label))
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, f"counts_per_op{_suffix(label)}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_locks(plt, rows, label, out):
    locks = [r for r in rows if r["structure"].startswith("lock/")]
    if not locks:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in sorted({r["structure"] for r in locks}):
        pts = sorted((int(r["workload"].split("=")[1]), r["ops_per_s"] / 1e6) for r in locks if r["structure"] == name)
        ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=name.split("/", 1)[1])
    ax.set_xlabel("p_local (% of acquires on the thread's own node)")
    ax.set_ylabel("M acquires / s")
    ax.set_title(_title("Lock table: ALock vs the baseline locks", label))
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path = os.path.join(out, f"locks_p_local{_suffix(label)}.png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 1)[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for results.csv and the PNGs")
    ap.add_argument("--label", default="", help="fabric label (soft, verbs): in titles and file names")
    ap.add_argument("inputs", nargs="+", help="Google Benchmark JSON files and lock_bench CSVs")
    args = ap.parse_args(argv[1:])
    rows = []
    try:
        for path in args.inputs:
            rows.extend(load(path))
    except InputError as e:
        print(f"report.py: error: {e}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    written = [write_csv(rows, args.label or "", args.out)]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for family in ("hash_map", "skiplist", "queue"):
        written.append(plot_throughput(plt, rows, family, args.label, args.out))
    written.append(plot_counts(plt, rows, args.label, args.out))
    written.append(plot_locks(plt, rows, args.label, args.out))
    for p in written:
        if p:
            print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
