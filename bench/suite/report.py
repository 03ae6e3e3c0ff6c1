#!/usr/bin/env python3
"""The benchmark suite's report step: one tidy CSV and the plots.

Usage: report.py --out DIR [--label LABEL] INPUT...

Inputs (the kind is told from the content, not the file name):
  Google Benchmark JSON   --benchmark_out=F --benchmark_out_format=json of
                          bench/transport_latency, bench/hash_map_bench,
                          bench/skiplist_bench or bench/queue_bench, or
                          bench/cluster_bench --json=F (the same shape; its
                          workloads end in /local:L/nodes:N/procs:P). With
                          repetitions, each benchmark's median aggregate is
                          used and its other runs and aggregates are ignored;
                          without aggregates, the plain runs.
  lock_bench CSV          tools/lock_bench --output csv: a header line and one
                          line per run, e.g. the CSV_OUT file that
                          tools/lock_bench/run_table.sh keeps (repeated header
                          lines, from concatenated outputs, are skipped).
  lock_bench JSON lines   tools/lock_bench --output json: one object per line.
  For the lock table, each (lock, p_local, threads) keeps its run with the
  median throughput (the lower middle one for an even count, as run_table.sh).

Writes into DIR (created if missing):
  results.csv     one row per measurement; columns:
                  fabric,structure,path,workload,threads,ops_per_s,
                  nic_ops_per_op,doorbells_per_op,round_trips_per_op,
                  bytes_per_op,p50_ns,p99_ns,benchmark
                  (bench/suite/README.md says what each one holds)
  throughput_<structure>[_LABEL].png  ops/s by workload, path and threads,
                  the baselines on the same axes (hash_map, skiplist, queue;
                  without cluster_bench's rows)
  throughput_cluster[_LABEL].png  cluster_bench's rows: ops/s of the whole
                  cluster by structure, mix and key distribution, one bar per
                  local share
  counts_per_op[_LABEL].png   NIC ops and round trips per operation on the
                  remote path, one thread, by structure and operation (the
                  verbs, map get/put, queue batch 1 and 16; ALock's
                  acquire+release from the lock table at p_local 0)
  locks_p_local[_LABEL].png   ALock vs the baseline locks over p_local (when
                  a lock_bench input is given)
  A plot with no rows to show is not written. The paths written go to stdout.

--label names the fabric (soft, verbs): it fills the CSV's fabric column,
goes into every plot title and suffixes the PNG names. Without it the fabric
column is the lock_bench row's own fabric, or empty.

Errors and warnings (on stderr, each naming the file):
  exit 2  an input is missing, unreadable, empty, or not one of the kinds
          above, or a row in it is malformed; nothing is written then
  exit 3  no python3 with matplotlib (results.csv is written, no plots)
  a warning, exit 0: an input with no usable rows; a benchmark that reported
          an error (left out); a benchmark name this script does not know
          (kept, with structure "unknown").
When the running python3 has no matplotlib, the script runs itself again
under Debian's /usr/bin/python3 (python3-matplotlib, tools/setup_deps.sh).
"""

import argparse
import csv
import importlib.util
import json
import math
import os
import re
import sys

COLUMNS = ["fabric", "structure", "path", "workload", "threads", "ops_per_s", "nic_ops_per_op",
           "doorbells_per_op", "round_trips_per_op", "bytes_per_op", "p50_ns", "p99_ns", "benchmark"]
NUMERIC = COLUMNS[5:12]

PATHS = ("native", "loopback", "remote", "mixed")
VERBS = ("READ", "WRITE", "CAS", "FAA")
# The second name segment of a structure's own benchmarks.
STRUCTURES = {"map": "hash_map", "skiplist": "skiplist", "queue": "queue"}
# Baselines (always native), and the structures each one stands in for.
BASELINES = {
    "std_mutex": ("hash_map", "queue"),
    "absl_sharded64": ("hash_map",),
    "std_map_mutex": ("skiplist",),
    "btree_map_mutex": ("skiplist",),
    "boost_lockfree": ("queue",),
    "tbb_bounded": ("queue",),
}
# The queue's workload shapes (queue_bench.cc); the maps' are mixes.
QUEUE_SHAPE = re.compile(r"^(1p1c|2both|1thread|batch:\d+|2native_1remote[\w:]*)$")
# The end of a cluster_bench workload: the local share, the nodes, the processes.
CLUSTER_SUFFIX = re.compile(r"/local:([^/]+)/nodes:(\d+)/procs:(\d+)$")
# Name segments Google Benchmark appends to a registered name.
DECORATION = re.compile(r"/(min_time:[^/]*|min_warmup_time:[^/]*|real_time|manual_time|process_time"
                        r"|threads:\d+|repeats:\d+|iterations:\d+)")
# Counter names per column, the current ones first (queue_bench called them
# nic_ops, doorbells, ... before the suite).
COUNTERS = {
    "nic_ops_per_op": ("nic_ops/op", "nic_ops"),
    "doorbells_per_op": ("doorbells/op", "doorbells"),
    "round_trips_per_op": ("round_trips/op", "round_trips"),
    "bytes_per_op": ("bytes/op", "bytes"),
}
TIME_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
DEBIAN_PYTHON = "/usr/bin/python3"
NO_REEXEC_ENV = "REPORT_PY_NO_REEXEC"


class InputError(Exception):
    """An input file that cannot be used; the message names it."""


def warn(msg):
    """Prints a warning on stderr."""
    print(f"report.py: warning: {msg}", file=sys.stderr)


def make_row(**fields):
    """A results row: every column of COLUMNS, missing ones None."""
    row = {c: None for c in COLUMNS}
    row.update(fields)
    return row


# ------------------------------------------------------- benchmark names

def strip_decorations(name):
    """`name` without the segments Google Benchmark appends (min_time, real_time, threads, ...)."""
    return DECORATION.sub("", name)


def structures_in(names):
    """The structures whose own benchmarks (path/<map|skiplist|queue>/...) appear in `names`."""
    found = set()
    for name in names:
        parts = name.split("/")
        if len(parts) >= 3 and parts[0] in PATHS and parts[1] in STRUCTURES:
            found.add(STRUCTURES[parts[1]])
    return found


def baseline_structure(baseline, workload, file_structures):
    """The structure a baseline row belongs to, or None when it cannot be told.

    A baseline name that only one structure uses is that structure's. For one
    that several use (std_mutex: hash map and queue), the workload's shape
    decides (a queue shape such as 1p1c, or a map mix such as get95_put5/...),
    and, if that leaves more than one, the structure benchmarked in the same
    file.
    """
    candidates = BASELINES[baseline]
    if len(candidates) == 1:
        return candidates[0]
    queue_shaped = bool(QUEUE_SHAPE.match(workload.split("/")[0]))
    fitting = [s for s in candidates if (s == "queue") == queue_shaped]
    if len(fitting) > 1:
        fitting = [s for s in fitting if s in file_structures]
    return fitting[0] if len(fitting) == 1 else None


def classify(name, file_structures):
    """(structure, path, workload) for a Google Benchmark run name, or None.

    structure is "transport", "hash_map", "skiplist", "queue", or
    "<structure>/<baseline>" for a baseline (path "native"). workload is the
    rest of the name without Google Benchmark's segments: a mix and key
    distribution ("get95_put5/zipf0.99"), a queue shape ("1p1c", "batch:16"),
    or a verb ("READ"; "pingpong_WRITE" for the ping-pong).
    """
    parts = strip_decorations(name).split("/")
    if len(parts) == 2 and parts[0] in ("loopback", "remote") and parts[1] in VERBS:
        return "transport", parts[0], parts[1]
    if len(parts) == 2 and parts[0] == "pingpong" and parts[1] in VERBS:
        return "transport", "remote", "pingpong_" + parts[1]
    if len(parts) < 3 or parts[0] not in PATHS:
        return None
    path, impl, workload = parts[0], parts[1], "/".join(parts[2:])
    if impl in STRUCTURES:
        return STRUCTURES[impl], path, workload
    if impl in BASELINES and path == "native":
        structure = baseline_structure(impl, workload, file_structures)
        if structure:
            return f"{structure}/{impl}", path, workload
    return None


def threads_of(name, run):
    """The thread count: the name's threads:N, else the run's "threads", else 1."""
    m = re.search(r"/threads:(\d+)", name)
    return int(m.group(1)) if m else int(run.get("threads", 1))


# ------------------------------------------------ Google Benchmark JSON

def select_runs(benchmarks, path):
    """The runs to report: per benchmark, its median aggregate if it has one, else its plain runs.

    Other aggregates (mean, stddev, cv, ...) are always left out; a benchmark
    with neither a median nor a plain run is warned about. Order: as the
    benchmarks first appear in the file.
    """
    by_name = {}
    for b in benchmarks:
        by_name.setdefault(b.get("run_name") or b.get("name", ""), []).append(b)
    chosen = []
    for name, runs in by_name.items():
        medians = [b for b in runs if b.get("aggregate_name") == "median"]
        picked = medians or [b for b in runs if b.get("run_type", "iteration") == "iteration"]
        if not picked:
            warn(f"{path}: benchmark {name!r} has neither a median aggregate nor a plain run; left out")
        chosen.extend(picked)
    return chosen


def counter(run, names):
    """The first of `names` that `run` has, as a float (None for absent or NaN)."""
    for n in names:
        if n in run and run[n] is not None:
            v = float(run[n])
            return None if math.isnan(v) else v
    return None


def ops_per_second(run):
    """items_per_second, or (transport_latency, which has none) one op per real_time."""
    if "items_per_second" in run:
        return float(run["items_per_second"])
    t = float(run.get("real_time", 0)) * TIME_UNIT_S.get(run.get("time_unit", "ns"), 1e-9)
    return 1.0 / t if t > 0 else None


def us_to_ns(v):
    """Microseconds to nanoseconds; None stays None."""
    return None if v is None else v * 1000.0


def row_from_run(run, file_structures, path):
    """The results row of one Google Benchmark run (a warning and structure "unknown" if unclassified)."""
    name = run.get("run_name") or run.get("name", "")
    c = classify(name, file_structures)
    if c is None:
        warn(f"{path}: cannot classify benchmark {name!r}; kept as structure 'unknown'")
        parts = strip_decorations(name).split("/")
        c = ("unknown", parts[0], "/".join(parts[1:])) if parts[0] in PATHS else ("unknown", "", "/".join(parts))
    fields = {k: counter(run, names) for k, names in COUNTERS.items()}
    return make_row(structure=c[0], path=c[1], workload=c[2], threads=threads_of(name, run),
                    ops_per_s=ops_per_second(run), p50_ns=us_to_ns(counter(run, ("median_us",))),
                    p99_ns=us_to_ns(counter(run, ("p99_us",))), benchmark=name, **fields)


def gbench_rows(data, path):
    """Rows of a parsed Google Benchmark JSON document read from `path`."""
    benchmarks = data["benchmarks"]
    if not all(isinstance(b, dict) for b in benchmarks):
        raise InputError(f"{path}: malformed Google Benchmark JSON (an entry of \"benchmarks\" is not an object)")
    runs = select_runs(benchmarks, path)
    file_structures = structures_in(strip_decorations(b.get("run_name") or b.get("name", "")) for b in runs)
    rows = []
    for run in runs:
        name = run.get("run_name") or run.get("name", "")
        if run.get("error_occurred") or run.get("skipped"):
            warn(f"{path}: benchmark {name!r} reported an error ({run.get('error_message', '?')}); left out")
            continue
        try:
            rows.append(row_from_run(run, file_structures, path))
        except (TypeError, ValueError) as e:
            raise InputError(f"{path}: benchmark {name!r} has a malformed value ({e})")
    return rows


# ------------------------------------------------------------ lock_bench

LOCK_CSV_NEEDS = ("lock", "p_local", "throughput_acq_per_s", "nic_ops_per_acq", "round_trips_per_acq")


def optional_float(v):
    """float(v), or None for an absent or empty value."""
    return None if v is None or v == "" else float(v)


def lock_run_from_csv(r):
    """A lock_bench run (the common dict of lock_run_from_json) from one CSV row."""
    return {
        "lock": r["lock"], "fabric": r.get("fabric") or "", "p_local": float(r["p_local"]),
        "threads": int(r.get("nodes") or 1) * int(r.get("threads_per_node") or 1),
        "throughput": float(r["throughput_acq_per_s"]),
        "p50_ns": optional_float(r.get("p50_ns")), "p99_ns": optional_float(r.get("p99_ns")),
        "nic_ops": float(r["nic_ops_per_acq"]), "doorbells": optional_float(r.get("doorbells_per_acq")),
        "round_trips": float(r["round_trips_per_acq"]), "bytes": optional_float(r.get("bytes_per_acq")),
    }


def lock_run_from_json(o):
    """A lock_bench run from one --output json object: lock, fabric, p_local, threads,
    throughput, p50_ns, p99_ns and the per-acquire nic_ops, doorbells, round_trips, bytes."""
    lat, per = o.get("latency_ns", {}), o["per_acquire"]
    return {
        "lock": str(o["lock"]), "fabric": str(o.get("fabric", "")), "p_local": float(o["p_local"]),
        "threads": int(o.get("nodes", 1)) * int(o.get("threads_per_node", 1)),
        "throughput": float(o["throughput_acq_per_s"]),
        "p50_ns": optional_float(lat.get("p50")), "p99_ns": optional_float(lat.get("p99")),
        "nic_ops": float(per["nic_ops"]), "doorbells": optional_float(per.get("doorbells")),
        "round_trips": float(per["round_trips"]), "bytes": optional_float(per.get("bytes")),
    }


def lock_csv_runs(text, path):
    """lock_bench runs of a CSV text (header lines repeated inside it are skipped)."""
    lines = [l for l in text.splitlines() if l.strip()]
    try:
        header = next(csv.reader(lines[:1]))
        if any(k not in header for k in LOCK_CSV_NEEDS):
            raise InputError(f"{path}: neither Google Benchmark JSON nor a lock_bench CSV "
                             f"(a lock_bench CSV's header has {', '.join(LOCK_CSV_NEEDS)})")
        runs = []
        for lineno, fields in enumerate(csv.reader(lines[1:]), start=2):
            if fields == header:
                continue
            if len(fields) != len(header):
                raise InputError(f"{path}: line {lineno} has {len(fields)} fields, the header {len(header)}")
            try:
                runs.append(lock_run_from_csv(dict(zip(header, fields))))
            except ValueError as e:
                raise InputError(f"{path}: line {lineno} is malformed ({e})")
    except csv.Error as e:
        raise InputError(f"{path}: malformed CSV ({e})")
    return runs


def lock_json_runs(objects, path):
    """lock_bench runs of parsed --output json objects."""
    runs = []
    for i, o in enumerate(objects, start=1):
        try:
            runs.append(lock_run_from_json(o))
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise InputError(f"{path}: lock_bench JSON object {i} is malformed (missing or bad {e})")
    return runs


def median_run(runs):
    """The run with the median throughput (the lower middle one for an even count)."""
    ordered = sorted(runs, key=lambda r: r["throughput"])
    return ordered[(len(ordered) - 1) // 2]


def lock_path(p_local):
    """native for p_local 100, remote for 0, mixed between."""
    return "native" if p_local >= 100 else "remote" if p_local <= 0 else "mixed"


def lock_rows(runs):
    """One results row per (lock, p_local, threads): its median-throughput run."""
    groups = {}
    for r in runs:
        groups.setdefault((r["lock"], r["p_local"], r["threads"]), []).append(r)
    rows = []
    for (lock, p_local, threads), group in sorted(groups.items()):
        r = median_run(group)
        p = f"{p_local:g}"
        rows.append(make_row(
            fabric=r["fabric"], structure=f"lock/{lock}", path=lock_path(p_local), workload=f"p_local={p}",
            threads=threads, ops_per_s=r["throughput"], nic_ops_per_op=r["nic_ops"],
            doorbells_per_op=r["doorbells"], round_trips_per_op=r["round_trips"], bytes_per_op=r["bytes"],
            p50_ns=r["p50_ns"], p99_ns=r["p99_ns"], benchmark=f"lock_bench --lock {lock} --p-local {p}"))
    return rows


# ------------------------------------------------------------- any input

def read_text(path):
    """The text of `path`; InputError if it is missing, unreadable, not UTF-8 or empty."""
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if os.path.isdir(path):
        raise InputError(f"{path}: is a directory, not a file")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise InputError(f"{path}: cannot read it ({e.strerror or e})")
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not a text file ({e})")
    if not text.strip():
        raise InputError(f"{path}: empty file")
    return text


def json_lines(text):
    """The objects of a JSON-lines text, or None if a non-empty line is not a JSON object."""
    objects = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            o = json.loads(line)
        except ValueError:
            return None
        if not isinstance(o, dict):
            return None
        objects.append(o)
    return objects


def rows_of_json_text(text, path):
    """Rows of a JSON input: Google Benchmark output, or lock_bench JSON object(s)."""
    try:
        data = json.loads(text)
        objects = [data]
    except ValueError as e:
        data, objects = None, json_lines(text)
        if not objects or len(objects) < 2:
            raise InputError(f"{path}: malformed JSON ({e})")
    if isinstance(data, dict) and "benchmarks" in data:
        if not isinstance(data["benchmarks"], list):
            raise InputError(f"{path}: malformed Google Benchmark JSON (\"benchmarks\" is not a list)")
        return gbench_rows(data, path)
    if all(isinstance(o, dict) and "lock" in o and "throughput_acq_per_s" in o for o in objects):
        return lock_rows(lock_json_runs(objects, path))
    raise InputError(f"{path}: JSON, but neither Google Benchmark output (no \"benchmarks\" list) "
                     "nor lock_bench --output json")


def load(path):
    """Rows of one input file, by its content: JSON (Google Benchmark or lock_bench) or lock_bench CSV.

    Raises InputError (naming the file) for anything it cannot read; warns
    when the file holds no usable rows.
    """
    text = read_text(path)
    if text.lstrip()[:1] in ("{", "["):
        rows = rows_of_json_text(text, path)
    else:
        rows = lock_rows(lock_csv_runs(text, path))
    if not rows:
        warn(f"{path}: no benchmark rows in it")
    return rows


def format_number(v):
    """A CSV cell for a number: empty for None, else up to 10 significant digits."""
    return "" if v is None else f"{v:.10g}"


def write_csv(rows, fabric, out):
    """Writes out/results.csv (COLUMNS); fabric, when given, overrides each row's. Returns its path."""
    path = os.path.join(out, "results.csv")
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(COLUMNS)
        for r in rows:
            cells = dict(r, fabric=fabric or r["fabric"] or "")
            w.writerow([format_number(cells[c]) if c in NUMERIC else cells[c] for c in COLUMNS])
    return path


# ---------------------------------------------------------------- plots

def suffix(label):
    """The PNG name suffix for a label: "_soft", or "" without one."""
    return f"_{label}" if label else ""


def titled(text, label):
    """A plot title carrying the fabric label."""
    return f"{text} [{label}]" if label else text


def save(fig, plt, out, stem, label):
    """Saves `fig` as out/<stem>[_label].png, closes it, returns the path."""
    path = os.path.join(out, f"{stem}{suffix(label)}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def path_order(path):
    """Sort key of a path: native, loopback, remote, mixed, anything else."""
    return PATHS.index(path) if path in PATHS else len(PATHS)


def natural_key(text):
    """Sort key that orders the numbers inside text by value (batch:4 before batch:16)."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", text) if t]


def throughput_series(rows, structure):
    """Bar series of a throughput plot: (structure, path) pairs, the structure's own paths first."""
    pairs = {(r["structure"], r["path"]) for r in rows}
    return sorted(pairs, key=lambda s: (s[0] != structure, path_order(s[1]), s[0]))


def series_label(structure, row_structure, path):
    """Legend text: "queue, remote", or "boost_lockfree (baseline, native)"."""
    if row_structure == structure:
        return f"{structure}, {path}"
    return f"{row_structure.split('/', 1)[1]} (baseline, {path})"


def is_cluster_row(row):
    """Whether a row is cluster_bench's (its workload ends in /local:L/nodes:N/procs:P)."""
    return bool(CLUSTER_SUFFIX.search(row["workload"] or ""))


def plot_throughput(plt, rows, structure, label, out):
    """throughput_<structure>[_label].png: grouped bars of ops/s (log) per (workload, threads),
    one bar per path of the structure and per baseline; cluster_bench's rows are left to
    plot_cluster. None if it has no rows."""
    mine = [r for r in rows if r["structure"].split("/")[0] == structure and r["ops_per_s"]
            and not is_cluster_row(r)]
    if not mine:
        return None
    groups = sorted({(r["workload"], r["threads"]) for r in mine}, key=lambda g: (natural_key(g[0]), g[1]))
    series = throughput_series(mine, structure)
    value = {(r["structure"], r["path"], r["workload"], r["threads"]): r["ops_per_s"] for r in mine}
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(groups) + 3), 5.5))
    width = 0.8 / len(series)
    for i, (s, p) in enumerate(series):
        points = [(g + i * width, value[(s, p) + grp]) for g, grp in enumerate(groups) if (s, p) + grp in value]
        ax.bar([x for x, _ in points], [y for _, y in points], width, label=series_label(structure, s, p))
    ax.set_yscale("log")
    ax.set_ylabel("operations / s, all threads (log scale)")
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{w}\n{t} thr" for w, t in groups], rotation=60, ha="right", fontsize=7)
    ax.set_title(titled(f"{structure}: throughput by path and threads, baselines in the same run", label))
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", which="both", alpha=0.3)
    return save(fig, plt, out, f"throughput_{structure}", label)


def plot_cluster(plt, rows, label, out):
    """throughput_cluster[_label].png: cluster_bench's rows, ops/s of the whole cluster (log) per
    (structure, mix and distribution, nodes, processes, threads), one bar per local share.
    None without such rows."""
    mine = [r for r in rows if is_cluster_row(r) and r["ops_per_s"]]
    if not mine:
        return None
    def split(r):
        m = CLUSTER_SUFFIX.search(r["workload"])
        group = (r["structure"], r["workload"][:m.start()], int(m.group(2)), int(m.group(3)), r["threads"])
        return group, m.group(1)
    value = {}
    for r in mine:
        value[split(r)] = r["ops_per_s"]
    groups = sorted({g for g, _ in value}, key=lambda g: (g[0], natural_key(g[1]), g[2:]))
    order = {"0": 0, "uniform": 1, "100": 2}
    shares = sorted({s for _, s in value}, key=lambda s: (order.get(s, 3), natural_key(s)))
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(groups) + 3), 5.5))
    width = 0.8 / len(shares)
    for i, share in enumerate(shares):
        points = [(g + i * width, value[(grp, share)]) for g, grp in enumerate(groups) if (grp, share) in value]
        name = {"0": "local 0% (remote)", "100": "local 100% (native)", "uniform": "local uniform"}.get(
            share, f"local {share}%")
        ax.bar([x for x, _ in points], [y for _, y in points], width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("operations / s, whole cluster (log scale)")
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
    ax.set_xticklabels([f"{s} {w}\n{n} nodes, {p} procs, {t} thr" for s, w, n, p, t in groups],
                       rotation=60, ha="right", fontsize=7)
    ax.set_title(titled("cluster_bench: throughput by share of keys homed on the thread's node", label))
    ax.legend(fontsize=7)
    ax.grid(axis="y", which="both", alpha=0.3)
    return save(fig, plt, out, "throughput_cluster", label)


# The uncontended operations whose counts the structures' tests assert:
# (structure, workload regex, bar label).
COUNT_OPS = [
    ("transport", r"^(READ|WRITE|CAS|FAA)$", "{w}"),
    ("hash_map", r"^(get100|put100)/uniform$", "map {w}"),
    ("skiplist", r"^(get100|put100)/uniform$", "ordered map {w}"),
    ("queue", r"^batch:(1|16)$", "queue enq+deq {w}"),
    ("lock/alock", r"^p_local=0$", "ALock acq+rel, p_local 0"),
]


def count_bars(rows):
    """(bar label, row) of each COUNT_OPS row on the remote path with one thread
    (ALock: the lock table's p_local 0 row, all its threads)."""
    bars = []
    for structure, pattern, fmt in COUNT_OPS:
        for r in rows:
            one_thread = r["threads"] == 1 or structure.startswith("lock/")
            if (r["structure"] == structure and r["path"] == "remote" and one_thread
                    and re.match(pattern, r["workload"]) and r["nic_ops_per_op"] is not None):
                bars.append((fmt.format(w=r["workload"].split("/")[0]), r))
    return bars


def plot_counts(plt, rows, label, out):
    """counts_per_op[_label].png: NIC ops and round trips per operation by structure and
    operation (count_bars). None if there is no such row."""
    bars = count_bars(rows)
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(bars) + 2), 5))
    xs = range(len(bars))
    ax.bar([x - 0.2 for x in xs], [r["nic_ops_per_op"] for _, r in bars], 0.4, label="NIC ops / op")
    ax.bar([x + 0.2 for x in xs], [r["round_trips_per_op"] or 0 for _, r in bars], 0.4, label="round trips / op")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([n for n, _ in bars], rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("per operation (queue: per enqueue + dequeue)")
    ax.set_title(titled("Remote path, uncontended: NIC ops and round trips per operation", label))
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    return save(fig, plt, out, "counts_per_op", label)


def plot_locks(plt, rows, label, out):
    """locks_p_local[_label].png: M acquires/s against p_local, one line per lock
    (and thread count, if several). None without lock rows."""
    locks = [r for r in rows if r["structure"].startswith("lock/") and r["ops_per_s"]]
    if not locks:
        return None
    several = len({r["threads"] for r in locks}) > 1
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for structure, threads in sorted({(r["structure"], r["threads"]) for r in locks}):
        pts = sorted((float(r["workload"].split("=", 1)[1]), r["ops_per_s"] / 1e6)
                     for r in locks if r["structure"] == structure and r["threads"] == threads)
        name = structure.split("/", 1)[1] + (f", {threads} threads" if several else "")
        ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=name)
    ax.set_xlabel("p_local (% of acquires of locks on the thread's own node)")
    ax.set_ylabel("M acquires / s, all threads")
    ax.set_title(titled("Lock table: ALock vs the baseline locks", label))
    ax.legend()
    ax.grid(alpha=0.3)
    return save(fig, plt, out, "locks_p_local", label)


def write_plots(plt, rows, label, out):
    """Every plot that has rows; returns the paths written."""
    written = [plot_throughput(plt, rows, s, label, out) for s in ("hash_map", "skiplist", "queue")]
    written += [plot_cluster(plt, rows, label, out), plot_counts(plt, rows, label, out),
                plot_locks(plt, rows, label, out)]
    return [p for p in written if p]


# ---------------------------------------------------------- matplotlib

def has_matplotlib():
    """Whether this interpreter can import matplotlib."""
    return importlib.util.find_spec("matplotlib") is not None


def rerun_under_debian_python(argv):
    """Replaces this process by the same command under /usr/bin/python3 (Debian's, with
    python3-matplotlib) when that is another interpreter; returns only when it is not."""
    if os.environ.get(NO_REEXEC_ENV) or not os.access(DEBIAN_PYTHON, os.X_OK):
        return
    if os.path.realpath(sys.executable) == os.path.realpath(DEBIAN_PYTHON):
        return
    env = dict(os.environ, **{NO_REEXEC_ENV: "1"})
    os.execve(DEBIAN_PYTHON, [DEBIAN_PYTHON, os.path.abspath(__file__)] + argv[1:], env)


def pyplot():
    """matplotlib.pyplot on the Agg backend (files only, never a window)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# ----------------------------------------------------------------- main

def parse_args(argv):
    """The command line; --help prints this module's documentation."""
    ap = argparse.ArgumentParser(prog="report.py", description=__doc__.split("\n\n")[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, metavar="DIR", help="directory for results.csv and the PNGs")
    ap.add_argument("--label", default="", metavar="LABEL",
                    help="the fabric (soft, verbs): CSV fabric column, plot titles, PNG name suffix")
    ap.add_argument("inputs", nargs="+", metavar="INPUT",
                    help="Google Benchmark JSON, lock_bench CSV or lock_bench JSON-lines files")
    args = ap.parse_args(argv[1:])
    if args.label and not re.fullmatch(r"[A-Za-z0-9_.-]+", args.label):
        ap.error(f"--label must be letters, digits, '_', '.' or '-' (it goes into file names): {args.label!r}")
    return args


def main(argv):
    """Runs the report; returns the exit code (0, 2 bad input, 3 no matplotlib)."""
    args = parse_args(argv)
    if not has_matplotlib():
        rerun_under_debian_python(argv)
    rows = []
    try:
        for path in args.inputs:
            rows.extend(load(path))
    except InputError as e:
        print(f"report.py: error: {e}", file=sys.stderr)
        return 2
    try:
        os.makedirs(args.out, exist_ok=True)
        written = [write_csv(rows, args.label, args.out)]
    except OSError as e:
        print(f"report.py: error: cannot write into --out {args.out}: {e}", file=sys.stderr)
        return 2
    if not has_matplotlib():
        print(f"report.py: error: {sys.executable} has no matplotlib: run tools/setup_deps.sh (Debian's "
              f"python3-matplotlib, for {DEBIAN_PYTHON}); wrote results.csv only, no plots", file=sys.stderr)
        print(written[0])
        return 3
    written += write_plots(pyplot(), rows, args.label, args.out)
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
