#ifndef TOOLS_DEMO_QUEUE_DEMO_H_
#define TOOLS_DEMO_QUEUE_DEMO_H_

#include <vector>

#include "absl/status/status.h"
#include "rdma/cluster.h"
#include "tools/demo/measure.h"

namespace demo {

// The queue part of the demo. Builds a structures::Queue over every node of
// `cluster` (at least 2 nodes) and uses node 0's queue from three clients:
// native and loopback (threads on node 0) and remote (a thread on node 1).
// First checks that each path dequeues what another enqueued, in order
// (enqueue on one path, dequeue on the next, in a cycle), then measures
// enqueue and dequeue per path, `reps` operations each, appending one row per
// (path, op). Errors: whatever the queue returns, or Internal naming the
// failed check.
absl::Status RunQueueDemo(rdma::Cluster& cluster, int reps, std::vector<Row>& rows);

}  // namespace demo

#endif  // TOOLS_DEMO_QUEUE_DEMO_H_
