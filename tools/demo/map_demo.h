#ifndef TOOLS_DEMO_MAP_DEMO_H_
#define TOOLS_DEMO_MAP_DEMO_H_

#include <vector>

#include "absl/status/status.h"
#include "rdma/cluster.h"
#include "tools/demo/measure.h"

namespace demo {

// The hash map part of the demo. Builds a structures::HashMap over every node
// of `cluster` (at least 2 nodes) and uses keys whose home is node 0 from
// three clients: native and loopback (threads on node 0) and remote (a thread
// on node 1). First checks that each path sees the others' writes (put on one
// path, get/erase on the next, in a cycle), then measures put and get per
// path, `reps` operations each, appending one row per (path, op).
// Errors: whatever the map returns, or Internal naming the failed check.
absl::Status RunMapDemo(rdma::Cluster& cluster, int reps, std::vector<Row>& rows);

}  // namespace demo

#endif  // TOOLS_DEMO_MAP_DEMO_H_
