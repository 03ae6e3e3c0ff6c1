#ifndef TOOLS_DEMO_MEASURE_H_
#define TOOLS_DEMO_MEASURE_H_

// Per-operation cost rows for the demo: the calling thread's NIC ops,
// doorbells, round trips and bytes (rdma::ThisThreadCounters) and wall time,
// averaged over `reps` runs of one operation.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "rdma/op_counters.h"

namespace demo {

struct Row {
  std::string path, op;
  rdma::OpCounters cost;  // per operation
  uint64_t ns;            // per operation, this machine's wall time
};

// Runs `f` (returning absl::Status) `reps` times and appends its average cost.
// Stops at the first error and returns it.
template <typename F>
absl::Status Measure(const std::string& path, const std::string& op, int reps, std::vector<Row>& rows, F f) {
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) {
    if (absl::Status s = f(i); !s.ok()) return s;
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  rdma::OpCounters d = rdma::ThisThreadCounters() - before;
  d.nic_ops /= reps;
  d.doorbells /= reps;
  d.round_trips /= reps;
  d.bytes /= reps;
  rows.push_back({path, op, d, static_cast<uint64_t>(ns.count() / reps)});
  return absl::OkStatus();
}

// Prints rows as an aligned table.
void PrintRows(const std::vector<Row>& rows);

}  // namespace demo

#endif  // TOOLS_DEMO_MEASURE_H_
