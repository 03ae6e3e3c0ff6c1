#!/usr/bin/env python3
"""Tests of report.py on the canned inputs in bench/suite/testdata/.

The inputs are hand-made in the formats the real tools write, with the
benchmark names the binaries register:
  transport.json   bench/transport_latency, one repetition
  hash_map.json    bench/hash_map_bench with --benchmark_min_time (no
                   min_time segment in the names), one repetition
  skiplist.json    bench/skiplist_bench, its default MinTime(0.4) and 3
                   repetitions: every run, then mean/median/stddev/cv
  queue.json       bench/queue_bench, default MinTime(0.4)
  locks.csv        tools/lock_bench --output csv rows, 3 interleaved rounds
                   (run_table.sh's CSV_OUT)
  locks.jsonl      tools/lock_bench --output json lines
  cluster.json     bench/cluster_bench --json, 6 of the rows of a run with 3
                   processes in the guest (bench/results/verbs/cluster.json)
  odd.json         std_mutex on a queue shape and a map mix in one file,
                   names report.py does not know, a failed benchmark, one
                   benchmark with repetitions next to one without
  empty.json, malformed.json, bad_locks.csv: warning and error cases.

Run from anywhere: python3 bench/suite/report_test.py. REPORT_PY names the
report.py to test (default: the one beside this file); the canned inputs
are beside it or beside this file.
"""

import csv
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.abspath(os.environ.get("REPORT_PY") or os.path.join(HERE, "report.py"))
DATA = next((d for d in (os.path.join(os.path.dirname(REPORT), "testdata"), os.path.join(HERE, "testdata"))
             if os.path.isdir(d)), os.path.join(HERE, "testdata"))
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
HEADER = ("fabric,structure,path,workload,threads,ops_per_s,nic_ops_per_op,doorbells_per_op,"
          "round_trips_per_op,bytes_per_op,p50_ns,p99_ns,benchmark")


def data(name):
    """The path of a canned input."""
    return os.path.join(DATA, name)


def run_report(args, cwd):
    """Runs report.py with `args` in directory `cwd`; returns the CompletedProcess."""
    return subprocess.run([sys.executable, REPORT] + args, capture_output=True, text=True, cwd=cwd)


def read_rows(out):
    """The rows of out/results.csv, as dicts."""
    with open(os.path.join(out, "results.csv"), newline="") as f:
        return list(csv.DictReader(f))


def is_png(path):
    """Whether path is a non-trivial PNG file."""
    with open(path, "rb") as f:
        return f.read(8) == PNG_MAGIC and os.path.getsize(path) > 1000


class ReportTestBase(unittest.TestCase):
    """Runs report.py once per class (in a scratch directory, not the repository) on INPUTS."""
    INPUTS = ()
    LABEL = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = os.path.join(cls.tmp.name, "out")
        args = ["--out", cls.out] + (["--label", cls.LABEL] if cls.LABEL else []) + [data(f) for f in cls.INPUTS]
        cls.result = run_report(args, cwd=cls.tmp.name)
        cls.rows = read_rows(cls.out) if os.path.exists(os.path.join(cls.out, "results.csv")) else []
        cls.by_name = {r["benchmark"]: r for r in cls.rows}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def row(self, benchmark):
        self.assertIn(benchmark, self.by_name, f"no row for {benchmark}; stderr: {self.result.stderr}")
        return self.by_name[benchmark]

    def assertRow(self, benchmark, **want):
        """The row of `benchmark` has these cells (numbers compared to 6 significant digits)."""
        r = self.row(benchmark)
        for col, value in want.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.assertNotEqual(r[col], "", f"{benchmark}: {col} is empty")
                self.assertAlmostEqual(float(r[col]), value, delta=abs(value) * 1e-6, msg=f"{benchmark}: {col}")
            else:
                self.assertEqual(r[col], value, f"{benchmark}: {col}")


class FullRunTest(ReportTestBase):
    """Every binary's output and the lock table CSV, --label soft."""
    INPUTS = ("transport.json", "hash_map.json", "skiplist.json", "queue.json", "locks.csv")
    LABEL = "soft"

    def test_exit_code_and_no_warnings(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        # (matplotlib may note its cache directory on stderr; report.py must say nothing.)
        self.assertNotIn("report.py:", self.result.stderr)

    def test_header_and_fabric(self):
        with open(os.path.join(self.out, "results.csv")) as f:
            self.assertEqual(f.readline().rstrip("\n"), HEADER)
        self.assertEqual({r["fabric"] for r in self.rows}, {"soft"})
        self.assertNotIn("unknown", {r["structure"] for r in self.rows})

    def test_one_row_per_measurement(self):
        # 3 transport + 6 hash map + 3 ordered map (medians of 3 repetitions)
        # + 6 queue + 6 lock configurations (median of 3 rounds each).
        self.assertEqual(len(self.rows), 3 + 6 + 3 + 6 + 6)
        self.assertEqual(len(self.by_name), len(self.rows))

    def test_transport(self):
        # No items_per_second: one operation per real_time; latency counters in us -> ns.
        self.assertRow("remote/READ/real_time", structure="transport", path="remote", workload="READ",
                       threads="1", ops_per_s=2.5e6, nic_ops_per_op=1, doorbells_per_op=1,
                       round_trips_per_op=1, bytes_per_op=8, p50_ns=381, p99_ns=401)
        self.assertRow("loopback/CAS/real_time", structure="transport", path="loopback", workload="CAS",
                       p50_ns=391, p99_ns=420)
        self.assertRow("pingpong/WRITE/real_time", structure="transport", path="remote",
                       workload="pingpong_WRITE", round_trips_per_op=0, p50_ns=261655.5)

    def test_hash_map_paths_and_baselines(self):
        self.assertRow("remote/map/put100/uniform/real_time/threads:1", structure="hash_map", path="remote",
                       workload="put100/uniform", threads="1", ops_per_s=403920.3, nic_ops_per_op=5,
                       doorbells_per_op=4, round_trips_per_op=3, bytes_per_op=584, p50_ns="", p99_ns="")
        self.assertRow("loopback/map/get95_put5/zipf0.99/real_time/threads:1", structure="hash_map",
                       path="loopback", workload="get95_put5/zipf0.99", nic_ops_per_op=1.19934)
        self.assertRow("native/map/get95_put5/uniform/real_time/threads:2", structure="hash_map", path="native",
                       threads="2", ops_per_s=62519166.78, nic_ops_per_op=0)
        self.assertRow("native/std_mutex/get95_put5/uniform/real_time/threads:2", structure="hash_map/std_mutex",
                       path="native", workload="get95_put5/uniform", threads="2", ops_per_s=19959771.5)
        self.assertRow("native/absl_sharded64/get50_put50/zipf0.99/real_time/threads:1",
                       structure="hash_map/absl_sharded64", path="native", workload="get50_put50/zipf0.99")

    def test_median_aggregate_of_repetitions(self):
        skiplist = [r for r in self.rows if r["structure"].startswith("skiplist")]
        self.assertEqual(len(skiplist), 3)
        # The median row's value (the mean is 1276181.17, the first run 1244500.25).
        self.assertRow("remote/skiplist/get100/uniform/min_time:0.400/real_time/threads:1", structure="skiplist",
                       path="remote", workload="get100/uniform", threads="1", ops_per_s=1283230.75,
                       nic_ops_per_op=1, round_trips_per_op=1, bytes_per_op=776, p50_ns="")
        self.assertRow("native/btree_map_mutex/scan95_insert5/uniform/min_time:0.400/real_time/threads:2",
                       structure="skiplist/btree_map_mutex", path="native", workload="scan95_insert5/uniform",
                       threads="2", ops_per_s=402000)
        self.assertRow("remote/skiplist/put100/uniform/min_time:0.400/real_time/threads:1",
                       ops_per_s=611000, nic_ops_per_op=8, doorbells_per_op=3, round_trips_per_op=2)

    def test_queue(self):
        self.assertRow("remote/queue/batch:1/min_time:0.400/real_time/threads:1", structure="queue",
                       path="remote", workload="batch:1", threads="1", ops_per_s=571347.62,
                       nic_ops_per_op=16.000019, doorbells_per_op=6.000019, round_trips_per_op=4.000019)
        self.assertRow("loopback/queue/batch:16/min_time:0.400/real_time/threads:1", path="loopback",
                       workload="batch:16", bytes_per_op=1728.1932)
        self.assertRow("native/queue/1p1c/min_time:0.400/real_time/threads:2", structure="queue", path="native",
                       workload="1p1c", threads="2")
        self.assertRow("native/boost_lockfree/1p1c/min_time:0.400/real_time/threads:2",
                       structure="queue/boost_lockfree", path="native", workload="1p1c", ops_per_s=20161078.06)
        self.assertRow("native/std_mutex/2both/min_time:0.400/real_time/threads:2", structure="queue/std_mutex",
                       path="native", workload="2both")
        self.assertRow("mixed/queue/2native_1remote_10pct/min_time:0.400/real_time/threads:3", structure="queue",
                       path="mixed", workload="2native_1remote_10pct", threads="3", ops_per_s=3097579.79)

    def test_lock_table_median_round(self):
        self.assertRow("lock_bench --lock alock --p-local 100", structure="lock/alock", path="native",
                       workload="p_local=100", threads="4", ops_per_s=8878329.7, nic_ops_per_op=0,
                       p50_ns=41, p99_ns=172)
        self.assertRow("lock_bench --lock alock --p-local 90", path="mixed", ops_per_s=4054157.8,
                       nic_ops_per_op=0.3011, round_trips_per_op=0.201)
        self.assertRow("lock_bench --lock alock --p-local 0", path="remote", ops_per_s=1328056.4,
                       nic_ops_per_op=3.0016, doorbells_per_op=2.0016, bytes_per_op=80.03)
        self.assertRow("lock_bench --lock rdma-spin --p-local 0", structure="lock/rdma-spin",
                       ops_per_s=1545969.9)
        self.assertRow("lock_bench --lock local-mcs --p-local 100", structure="lock/local-mcs",
                       ops_per_s=13836170.3)

    def test_plots_are_pngs_named_with_the_label(self):
        names = ["throughput_hash_map_soft.png", "throughput_skiplist_soft.png", "throughput_queue_soft.png",
                 "counts_per_op_soft.png", "locks_p_local_soft.png"]
        for name in names:
            path = os.path.join(self.out, name)
            self.assertTrue(os.path.isfile(path), name)
            self.assertTrue(is_png(path), name)
        self.assertEqual(sorted(os.listdir(self.out)), sorted(names + ["results.csv"]))
        self.assertEqual(sorted(self.result.stdout.split()), sorted(os.path.join(self.out, n)
                                                                    for n in names + ["results.csv"]))


class OddInputsTest(ReportTestBase):
    """Unknown names, a failed benchmark, an empty file, lock_bench JSON lines; no --label."""
    INPUTS = ("odd.json", "empty.json", "locks.jsonl")

    def test_exit_code_is_zero(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)

    def test_unknown_names_are_kept_and_warned_about(self):
        self.assertRow("native/stack/push/real_time/threads:1", structure="unknown", path="native",
                       workload="stack/push", threads="1", ops_per_s=4e6)
        self.assertRow("sweep/READ/4096/real_time", structure="unknown", path="", workload="sweep/READ/4096",
                       bytes_per_op=4096)
        for name in ("native/stack/push/real_time/threads:1", "sweep/READ/4096/real_time"):
            self.assertIn(f"cannot classify benchmark '{name}'", self.result.stderr)
            self.assertIn("odd.json", self.result.stderr)

    def test_failed_benchmark_is_warned_about(self):
        self.assertNotIn("remote/queue/batch:4/real_time/threads:1", self.by_name)
        self.assertIn("'remote/queue/batch:4/real_time/threads:1' reported an error (UNAVAILABLE: no RDMA device)",
                      self.result.stderr)

    def test_shared_baseline_name_goes_by_the_workload(self):
        self.assertRow("native/std_mutex/2both/real_time/threads:2", structure="queue/std_mutex", path="native",
                       threads="2", ops_per_s=22e6)  # the median of 2 repetitions
        self.assertRow("native/std_mutex/get95_put5/uniform/real_time/threads:1", structure="hash_map/std_mutex",
                       path="native", workload="get95_put5/uniform", ops_per_s=8176970)

    def test_empty_input_is_a_warning(self):
        self.assertIn("empty.json: no benchmark rows", self.result.stderr)

    def test_lock_json_lines(self):
        self.assertRow("lock_bench --lock alock --p-local 50", fabric="verbs", structure="lock/alock",
                       path="mixed", workload="p_local=50", threads="2", ops_per_s=49507.8,
                       nic_ops_per_op=1.5029, doorbells_per_op=1.0028, round_trips_per_op=1.0028,
                       bytes_per_op=40.11, p50_ns=19456, p99_ns=43008)
        self.assertRow("lock_bench --lock rdma-mcs --p-local 50", structure="lock/rdma-mcs", ops_per_s=50022.5)

    def test_row_count_and_fabric_without_label(self):
        self.assertEqual(len(self.rows), 4 + 2)
        self.assertEqual({r["fabric"] for r in self.rows if not r["structure"].startswith("lock/")}, {""})

    def test_plot_names_without_label(self):
        for name in ("throughput_hash_map.png", "throughput_queue.png", "locks_p_local.png"):
            self.assertTrue(is_png(os.path.join(self.out, name)), name)
        self.assertFalse(os.path.exists(os.path.join(self.out, "throughput_skiplist.png")))


class ClusterBenchTest(ReportTestBase):
    """cluster_bench's JSON alone: its rows, and its own plot instead of the per-structure ones."""
    INPUTS = ("cluster.json",)
    LABEL = "verbs"

    def test_exit_code_and_no_warnings(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        self.assertNotIn("report.py:", self.result.stderr)

    def test_rows(self):
        self.assertEqual(len(self.rows), 6)
        self.assertRow("remote/map/get95_put5/uniform/local:0/nodes:3/procs:3/real_time/threads:3", fabric="verbs",
                       structure="hash_map", path="remote", workload="get95_put5/uniform/local:0/nodes:3/procs:3",
                       threads="3", ops_per_s=8568.102556697262, nic_ops_per_op=2.336015236318408,
                       doorbells_per_op=1.1914645522388059, round_trips_per_op=1.142646144278607,
                       bytes_per_op=1802.3924129353234, p50_ns=157695.5, p99_ns=2129919.5)
        self.assertRow("mixed/map/get95_put5/uniform/local:uniform/nodes:3/procs:3/real_time/threads:3",
                       structure="hash_map", path="mixed", workload="get95_put5/uniform/local:uniform/nodes:3/procs:3")
        self.assertRow("native/map/get95_put5/uniform/local:100/nodes:3/procs:3/real_time/threads:3",
                       path="native", ops_per_s=1767892.0714985025, nic_ops_per_op=0, p50_ns=887.5)
        self.assertRow("remote/queue/enq_deq/local:0/nodes:3/procs:3/real_time/threads:3", structure="queue",
                       path="remote", workload="enq_deq/local:0/nodes:3/procs:3", nic_ops_per_op=19.035201149425287,
                       p99_ns=11141119.5)

    def test_own_plot_only(self):
        # No per-structure plot: cluster rows go to throughput_cluster alone.
        self.assertEqual(sorted(os.listdir(self.out)), ["results.csv", "throughput_cluster_verbs.png"])
        self.assertTrue(is_png(os.path.join(self.out, "throughput_cluster_verbs.png")))


class ClusterBesideSuiteTest(ReportTestBase):
    """cluster_bench's JSON with a suite part's: each kind of row in its own plot."""
    INPUTS = ("hash_map.json", "cluster.json")

    def test_plots(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        self.assertEqual(sorted(os.listdir(self.out)),
                         ["counts_per_op.png", "results.csv", "throughput_cluster.png", "throughput_hash_map.png"])
        self.assertEqual(len(self.rows), 6 + 6)


class ErrorTest(unittest.TestCase):
    """Inputs that cannot be used: exit 2, a message naming the file, nothing written."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.tmp.name, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def assertRejected(self, bad, *more):
        r = run_report(["--out", self.out, data("hash_map.json"), bad] + list(more), cwd=self.tmp.name)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"report.py: error: {bad}", r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "results.csv")))
        return r.stderr

    def scratch(self, name, content):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(content)
        return path

    def test_malformed_json(self):
        self.assertIn("malformed JSON", self.assertRejected(data("malformed.json")))

    def test_missing_file(self):
        self.assertIn("no such file", self.assertRejected(data("missing.json")))

    def test_directory(self):
        self.assertRejected(DATA)

    def test_empty_file(self):
        self.assertIn("empty file", self.assertRejected(self.scratch("zero.json", "")))

    def test_json_of_another_kind(self):
        self.assertRejected(self.scratch("other.json", '{"results": []}'))
        self.assertRejected(self.scratch("entries.json", '{"benchmarks": [1, 2]}'))

    def test_malformed_lock_csv(self):
        self.assertIn("line 3", self.assertRejected(data("bad_locks.csv")))

    def test_csv_of_another_kind(self):
        # For example a results.csv given back as an input.
        self.assertIn("neither Google Benchmark JSON nor a lock_bench CSV",
                      self.assertRejected(self.scratch("results.csv", HEADER + "\n")))

    def test_bad_label(self):
        r = run_report(["--out", self.out, "--label", "a/b", data("queue.json")], cwd=self.tmp.name)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--label", r.stderr)


class HelpTest(unittest.TestCase):
    def test_help(self):
        r = run_report(["--help"], cwd=tempfile.gettempdir())
        self.assertEqual(r.returncode, 0, r.stderr)
        for text in ("--out", "--label", "Google Benchmark JSON", "lock_bench CSV", "lock_bench JSON lines",
                     "results.csv", "median"):
            self.assertIn(text, r.stdout)


if __name__ == "__main__":
    unittest.main()
