#ifndef TOOLS_DEMO_SKIPLIST_DEMO_H_
#define TOOLS_DEMO_SKIPLIST_DEMO_H_

#include <vector>

#include "absl/status/status.h"
#include "rdma/cluster.h"
#include "tools/demo/measure.h"

namespace demo {

// The ordered-map part of the demo. Builds a structures::SkipList over every
// node of `cluster` (at least 2 nodes; node 0 owns the keys below 2^32) and
// uses node 0's range from three clients: native and loopback (threads on
// node 0) and remote (a thread on node 1). First checks that each path sees
// what another wrote (put on one path; get, LowerBound, Scan and erase on the
// next, in a cycle), then measures get and put (overwrites of 64 keys whose
// leaf locations the client has seen) per path, `reps` operations each,
// appending rows named ordered-get / ordered-put. Errors: whatever the map
// returns, or Internal naming the failed check.
absl::Status RunSkipListDemo(rdma::Cluster& cluster, int reps, std::vector<Row>& rows);

}  // namespace demo

#endif  // TOOLS_DEMO_SKIPLIST_DEMO_H_
