#!/usr/bin/env python3
"""Tests of report.py on canned inputs (bench/suite/testdata/).

The inputs are excerpts of real runs: Google Benchmark JSON from the four
benchmark binaries (the ordered map's with 3 repetitions and their
aggregates; the queue's with the per-op counters under their older names)
and a lock_bench CSV with 3 runs per configuration. Run from anywhere:
  python3 bench/suite/report_test.py      (REPORT_PY may name report.py)
"""

import csv
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.environ.get("REPORT_PY") or os.path.join(HERE, "report.py")
DATA = os.path.join(os.path.dirname(os.path.abspath(REPORT)), "testdata")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run(args):
    return subprocess.run([sys.executable, REPORT] + args, capture_output=True, text=True)


class ReportTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.out = cls.tmp.name
        inputs = [os.path.join(DATA, f) for f in
                  ("transport.json", "hash_map.json", "skiplist.json", "queue.json", "locks.csv")]
        cls.result = run(["--out", cls.out, "--label", "soft"] + inputs)
        with open(os.path.join(cls.out, "results.csv"), newline="") as f:
            cls.rows = list(csv.DictReader(f))
        cls.by_name = {r["benchmark"]: r for r in cls.rows}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_exit_code_and_columns(self):
        self.assertEqual(self.result.returncode, 0, self.result.stderr)
        with open(os.path.join(self.out, "results.csv")) as f:
            header = f.readline().strip()
        self.assertEqual(header, "fabric,structure,path,workload,threads,ops_per_s,nic_ops_per_op,"
                                 "doorbells_per_op,round_trips_per_op,bytes_per_op,p50_ns,p99_ns,benchmark")
        self.assertTrue(all(r["fabric"] == "soft" for r in self.rows))
        self.assertNotIn("unknown", {r["structure"] for r in self.rows})

    def test_one_row_per_measurement(self):
        # 2 transport + 4 hash map + 1 ordered map (the median of 3 runs) + 3
        # queue + 4 lock configurations (the median of 3 runs each).
        self.assertEqual(len(self.rows), 2 + 4 + 1 + 3 + 4)

    def test_transport_row(self):
        r = self.by_name["remote/READ/real_time"]
        self.assertEqual((r["structure"], r["path"], r["workload"], r["threads"]), ("transport", "remote", "READ", "1"))
        self.assertEqual(float(r["nic_ops_per_op"]), 1)
        self.assertEqual(float(r["bytes_per_op"]), 8)
        self.assertAlmostEqual(float(r["p50_ns"]), 381)
        self.assertAlmostEqual(float(r["p99_ns"]), 401)
        self.assertAlmostEqual(float(r["ops_per_s"]), 1e9 / 409.3729770869369, delta=1)

    def test_hash_map_rows_and_baseline(self):
        r = self.by_name["remote/map/put100/uniform/real_time/threads:1"]
        self.assertEqual((r["structure"], r["path"], r["workload"], r["threads"]),
                         ("hash_map", "remote", "put100/uniform", "1"))
        self.assertEqual([float(r[c]) for c in ("nic_ops_per_op", "doorbells_per_op", "round_trips_per_op")],
                         [5, 4, 3])
        b = self.by_name["native/std_mutex/get95_put5/uniform/real_time/threads:2"]
        self.assertEqual((b["structure"], b["path"], b["threads"]), ("hash_map/std_mutex", "native", "2"))
        self.assertAlmostEqual(float(b["ops_per_s"]), 19959771.5, delta=100)

    def test_median_aggregate_is_used(self):
        rows = [r for r in self.rows if r["structure"] == "skiplist"]
        self.assertEqual(len(rows), 1)
        self.assertAlmostEqual(float(rows[0]["ops_per_s"]), 1054998.75, delta=1)
        self.assertEqual(rows[0]["workload"], "get100/uniform")

    def test_queue_rows_with_old_counter_names(self):
        r = self.by_name["remote/queue/batch:1/real_time/threads:1"]
        self.assertEqual((r["structure"], r["path"], r["workload"]), ("queue", "remote", "batch:1"))
        self.assertAlmostEqual(float(r["nic_ops_per_op"]), 16, delta=0.01)
        self.assertEqual(self.by_name["native/std_mutex/1p1c/real_time/threads:2"]["structure"], "queue/std_mutex")

    def test_lock_rows_take_the_median_run(self):
        r = self.by_name["lock_bench --lock alock --p-local 100"]
        self.assertEqual((r["structure"], r["path"], r["threads"]), ("lock/alock", "native", "4"))
        self.assertAlmostEqual(float(r["ops_per_s"]), 8878329.7, delta=1)
        self.assertEqual(float(r["nic_ops_per_op"]), 0)
        r = self.by_name["lock_bench --lock rdma-spin --p-local 0"]
        self.assertAlmostEqual(float(r["ops_per_s"]), 1545969.9, delta=1)

    def test_plots_are_pngs(self):
        for name in ("throughput_hash_map_soft.png", "throughput_skiplist_soft.png", "throughput_queue_soft.png",
                     "counts_per_op_soft.png", "locks_p_local_soft.png"):
            path = os.path.join(self.out, name)
            self.assertTrue(os.path.isfile(path), name)
            with open(path, "rb") as f:
                head = f.read(8)
            self.assertEqual(head, PNG_MAGIC, name)
            self.assertGreater(os.path.getsize(path), 1000, name)

    def test_malformed_input_is_an_error_naming_the_file(self):
        with tempfile.TemporaryDirectory() as out:
            bad = os.path.join(DATA, "malformed.json")
            r = run(["--out", out, os.path.join(DATA, "hash_map.json"), bad])
            self.assertEqual(r.returncode, 2)
            self.assertIn("malformed.json", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(out, "results.csv")))
            r = run(["--out", out, os.path.join(DATA, "missing.json")])
            self.assertEqual(r.returncode, 2)
            self.assertIn("missing.json", r.stderr)

    def test_help(self):
        r = run(["--help"])
        self.assertEqual(r.returncode, 0)
        self.assertIn("--label", r.stdout)


if __name__ == "__main__":
    unittest.main()
