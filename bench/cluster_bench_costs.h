#ifndef BENCH_CLUSTER_BENCH_COSTS_H_
#define BENCH_CLUSTER_BENCH_COSTS_H_

// cluster_bench --check-costs: the uncontended cost of one remote operation
// on each structure, measured on a real cluster and compared with the figures
// the structures' own tests assert (kept here, in ExpectedCosts, and nowhere
// else in this program).
//
//   ASSIGN_OR_RETURN(CheckStructures st, OpenCheckStructures(cluster));  // every process
//   RETURN_IF_ERROR(cluster.Barrier());
//   // one thread of one process, with every other process idle:
//   ASSIGN_OR_RETURN(std::vector<MeasuredCost> m, MeasureCosts(cluster, st, /*from=*/0, /*home=*/1));
//   PrintCosts(stdout, m);  // and exit 1 unless AllAsExpected(m)
//
// Remote: the key or ring is homed on node `home`, the thread on node `from`
// (another node). Each operation is measured kSamples times on fresh keys
// (or values); a cost matches when every sample equals every figure the test
// asserts (a figure it does not assert is printed, not compared). The check
// structures are small, named "cluster_bench.check.*", and apart from the
// matrix's. Errors: an operation's error, or a setup that would not measure
// what the tests assert (an ordered-map split during the inserts), as
// absl::Status.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cluster_bench_workload.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"

namespace bench::cluster {

struct ExpectedCost {
  std::string op;                      // "hash map remote Get"
  std::optional<uint64_t> nic_ops;     // unset: the test does not assert it
  std::optional<uint64_t> doorbells;
  std::optional<uint64_t> round_trips;
  std::optional<uint64_t> bytes;
  std::string asserted_by;             // the test file and case
};
// The six operations in the order they are measured: hash map Get, Put;
// ordered map Get, Insert; queue Enqueue, Dequeue (values of Value32).
std::vector<ExpectedCost> ExpectedCosts();

struct MeasuredCost {
  ExpectedCost expected;
  std::vector<rdma::OpCounters> samples;
  bool ok = false;  // every sample matches every asserted figure
};

inline constexpr int kSamples = 5;

struct CheckStructures {
  Map map;
  Ordered ordered;
  Queue queue;
};
absl::StatusOr<CheckStructures> OpenCheckStructures(rdma::Cluster& cluster);
// ClusterOptions::named_bytes for the check structures.
size_t CheckNamedBytes();

// On the calling thread (which gets its own Session on `from`).
absl::StatusOr<std::vector<MeasuredCost>> MeasureCosts(rdma::Cluster& cluster, const CheckStructures& st,
                                                       rdma::NodeId from, rdma::NodeId home);

void PrintCosts(std::FILE* out, const std::vector<MeasuredCost>& measured);
bool AllAsExpected(const std::vector<MeasuredCost>& measured);

}  // namespace bench::cluster

#endif  // BENCH_CLUSTER_BENCH_COSTS_H_
