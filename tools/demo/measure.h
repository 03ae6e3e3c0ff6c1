#ifndef TOOLS_DEMO_MEASURE_H_
#define TOOLS_DEMO_MEASURE_H_

// Per-operation cost rows for the demo: the calling thread's NIC ops,
// doorbells, round trips and bytes (rdma::ThisThreadCounters) and wall time,
// averaged over `reps` runs of one operation.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <thread>

#include "absl/status/status.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "util/status_macros.h"

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

// The demo's three lanes: threads on node 0 (native and loopback) and on
// node 1 (remote), all working on node 0's data.
struct Lane {
  const char* name;
  rdma::NodeId node;
  rdma::Path path;
};
inline constexpr Lane kLanes[] = {
    {"native", 0, rdma::Path::kNative},
    {"loopback", 0, rdma::Path::kLoopback},
    {"remote", 1, rdma::Path::kRemote},
};

// Runs `f(client)` on a fresh thread bound to `node`, with its own Session
// and client of `structure` (both are per-thread objects).
template <typename Structure, typename F>
absl::Status OnThread(rdma::Cluster& cluster, const Structure& structure, rdma::NodeId node, F f) {
  absl::Status status;
  std::thread t([&] {
    rdma::BindThisThreadToNode(node);
    status = [&]() -> absl::Status {
      ASSIGN_OR_RETURN(auto session, cluster.NewSession(node));
      ASSIGN_OR_RETURN(auto client, structure.NewClient(*session));
      return f(*client);
    }();
  });
  t.join();
  return status;
}

inline absl::Status Check(bool ok, const std::string& what) {
  return ok ? absl::OkStatus() : absl::InternalError(what);
}

// Prints rows as an aligned table.
void PrintRows(const std::vector<Row>& rows);

}  // namespace demo

#endif  // TOOLS_DEMO_MEASURE_H_
