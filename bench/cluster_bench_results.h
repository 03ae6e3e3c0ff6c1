#ifndef BENCH_CLUSTER_BENCH_RESULTS_H_
#define BENCH_CLUSTER_BENCH_RESULTS_H_

// cluster_bench's cells and results: what one thread measured in a cell, one
// process's sum of its threads (a blob every rank AllGathers), the cluster's
// row that rank 0 prints, and the row files (Google-Benchmark-shaped JSON for
// bench/suite/report.py, and results.csv's columns).
//
//   ProcessResult mine = SumThreads(rank, thread_results);
//   ASSIGN_OR_RETURN(std::vector<std::string> all, boot->AllGather(Encode(mine)));
//   std::vector<ProcessResult> each;  // Decode(all[r]) for every rank r
//   Row row = Aggregate(cell, each, {.nodes = 3, .processes = 3});
//   PrintRow(stdout, row);
//
// Contract: ops_per_s is the sum over threads of each thread's operations
// over its own measured time; the per-op counts are the sums of the threads'
// rdma::ThisThreadCounters deltas over the sum of their operations; p50/p99
// come from the merged latency histograms (log-linear buckets, 32 per
// octave: a bucket's middle is within 1.6% of any value in it). A queue
// operation is an enqueue and a dequeue. Decode rejects a malformed blob
// with InvalidArgument.

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/cluster_bench_flags.h"
#include "rdma/op_counters.h"

namespace bench::cluster {

// One measurement: a structure, a mix (the queue's shape for the queue), a
// key distribution (ignored by the queue) and a local share.
struct Cell {
  Structure structure;
  Workload workload;
  KeyDist dist;
  LocalShare local;
};
// The cells `config` selects, in the order they run.
std::vector<Cell> CellsOf(const Config& config);
// "get50_put50", "get95_put5", "get100", "scan95_insert5", "enq_deq".
const char* MixName(Workload w);
// native (every operation local), remote (none), mixed.
const char* PathName(const LocalShare& local, int num_nodes);
// "hash_map get50_put50/zipf0.99 local=uniform", for progress and errors.
std::string CellLabel(const Cell& cell);

// Latency histogram in nanoseconds.
class Histogram {
 public:
  static constexpr int kBuckets = 1920;
  void Add(uint64_t ns) { ++counts_[Index(ns)], ++count_; }
  void Merge(const Histogram& other);
  uint64_t count() const { return count_; }
  // The value below which a fraction `q` (0..1) of the samples lie: the
  // middle of its bucket. 0 without samples.
  double Quantile(double q) const;
  // "index:count,..." of the non-empty buckets.
  std::string Encode() const;
  static absl::StatusOr<Histogram> Decode(absl::string_view text);

  static int Index(uint64_t ns);
  static uint64_t Lower(int index);
  static uint64_t Width(int index);

 private:
  std::vector<uint64_t> counts_ = std::vector<uint64_t>(kBuckets, 0);
  uint64_t count_ = 0;
};

// What one client thread measured in one cell.
struct ThreadResult {
  uint64_t ops = 0;
  uint64_t local_ops = 0;  // operations on keys or rings homed on the thread's node
  double seconds = 0;      // measured time (pauses to recycle fresh keys excluded)
  rdma::OpCounters cost;   // over the measured operations
  Histogram latency;       // a sample of the measured operations (every 8th)
  absl::Status status;     // the first error, which ended the thread's run
};

// One process's threads in one cell.
struct ProcessResult {
  int rank = 0;
  int threads = 0;
  uint64_t ops = 0;
  uint64_t local_ops = 0;
  double ops_per_s = 0;
  double max_seconds = 0;
  rdma::OpCounters cost;
  Histogram latency;
  std::vector<std::string> errors;  // "node N thread T: <status>"
};
ProcessResult SumThreads(int rank, const std::vector<ThreadResult>& threads, const std::vector<std::string>& who);
std::string Encode(const ProcessResult& r);
absl::StatusOr<ProcessResult> Decode(absl::string_view blob);

struct ClusterShape {
  int nodes = 1;
  int processes = 1;
  std::string fabric;  // soft, verbs
};

// The cluster's row of one cell.
struct Row {
  Cell cell;
  std::string name;      // Google-Benchmark-shaped, report.py's naming
  std::string path;      // native, remote, mixed
  std::string workload;  // the name's workload part (mix/dist/local:L/nodes:N/procs:P)
  int threads = 0;
  int nodes = 0;
  int processes = 0;
  uint64_t ops = 0;
  double ops_per_s = 0;
  double seconds = 0;  // the longest thread's measured time
  double p50_ns = 0, p99_ns = 0;
  double nic_ops = 0, doorbells = 0, round_trips = 0, bytes = 0;  // per operation
  double local_pct = 0;
  std::vector<std::string> errors;  // every process's, "rank R: ..."
};
Row Aggregate(const Cell& cell, const std::vector<ProcessResult>& processes, const ClusterShape& shape);

void PrintHeader(std::FILE* out);
void PrintRow(std::FILE* out, const Row& row);
// Google Benchmark's JSON shape: {"context": {...}, "benchmarks": [one run per row]}.
absl::Status WriteJson(const std::string& path, const std::vector<Row>& rows, const ClusterShape& shape,
                       const std::string& command);
// bench/suite/README.md's results.csv columns.
absl::Status WriteCsv(const std::string& path, const std::vector<Row>& rows, const ClusterShape& shape);

}  // namespace bench::cluster

#endif  // BENCH_CLUSTER_BENCH_RESULTS_H_
