// The queue across two processes: each node creates only its own ring
// (Queue::Create with its own node) and reaches the other through its
// Connector. Node 0's ring is the shared queue: both nodes produce into it
// and consume from it (node 0 natively, node 1 remotely), so in two guests
// the home is in one guest and producers and consumers are in both.
//
// Modes (testing/node_harness.h): one node per process (two guests through a
// coordinator, or `mpirun -np 2`; rdma_cm between them), or one process with
// both nodes on the first backend of RDMADS_FABRICS (default soft).
//
// Phases, with barriers in between: (1) both enqueue kPerNode distinct
// values into node 0's queue at once; (2) both dequeue concurrently until the
// queue is empty: every value comes out exactly once, and each node sees each
// producer's values in that producer's order (FIFO), and the two counts add
// up to all values; (3) a batch round trip
// through node 1's queue from node 0 (remote batches).

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/node.h"
#include "rdma/session.h"
#include "rdma/bootstrap.h"
#include "structures/queue/queue.h"
#include "testing/node_harness.h"
#include "util/status_macros.h"

namespace structures {
namespace {

using rdma::NodeId;

constexpr uint64_t kPerNode = 100;

#define REQUIRE(cond, ...)                                                                                \
  do {                                                                                                    \
    if (!(cond)) return absl::InternalError(absl::StrCat(where, ": ", #cond, " failed: ", __VA_ARGS__)); \
  } while (0)

uint64_t ValueOf(NodeId producer, uint64_t i) { return (uint64_t{producer} + 1) << 32 | i; }

absl::Status RunNodeAt(rdma::Node& node, rdma::Connector& conn, rdma::Bootstrap& boot, std::string& where) {
  const NodeId me = node.id();
  where = absl::StrCat("node ", me, " setup");
  QueueOptions o;
  o.capacity = 256;  // holds both nodes' values
  rdma::Node* const local[] = {&node};
  ASSIGN_OR_RETURN(auto q, Queue<uint64_t>::Create(conn, local, o));
  RETURN_IF_ERROR(boot.Barrier());  // both rings exist, every node is up
  ASSIGN_OR_RETURN(auto session, rdma::Session::Create(node, conn));
  ASSIGN_OR_RETURN(auto client, q.NewClient(*session));

  where = absl::StrCat("node ", me, " enqueue");
  for (uint64_t i = 0; i < kPerNode; ++i) {
    ASSIGN_OR_RETURN(bool in, client->Enqueue(0, ValueOf(me, i)));
    REQUIRE(in, "queue full at value ", i);
  }
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " dequeue");
  std::vector<uint64_t> got;
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<uint64_t> v, client->Dequeue(0));
    if (!v.has_value()) break;
    got.push_back(*v);
  }
  // FIFO per producer, as this consumer saw it.
  for (NodeId p : {NodeId{0}, NodeId{1}}) {
    uint64_t last = 0;
    bool first = true;
    for (uint64_t v : got) {
      if ((v >> 32) != uint64_t{p} + 1) continue;
      REQUIRE(first || (v & 0xffffffff) > last, "producer ", p, "'s values out of order: ", last, " then ",
              v & 0xffffffff);
      last = v & 0xffffffff;
      first = false;
    }
  }
  // Nothing left once both consumers are done; no value twice here.
  std::printf("node %d: dequeued %zu values\n", me, got.size());
  RETURN_IF_ERROR(boot.Barrier());
  ASSIGN_OR_RETURN(size_t left, client->Size(0));
  REQUIRE(left == 0, left, " values left in node 0's queue");
  std::sort(got.begin(), got.end());
  REQUIRE(std::adjacent_find(got.begin(), got.end()) == got.end(), "a value came out twice");

  // Exactly once across both consumers: node 1 sends node 0 its count
  // through the (now empty) queue itself.
  where = absl::StrCat("node ", me, " counts");
  RETURN_IF_ERROR(boot.Barrier());  // both saw the queue empty
  if (me == 1) {
    ASSIGN_OR_RETURN(bool in, client->Enqueue(0, got.size()));
    REQUIRE(in, "queue full");
  }
  RETURN_IF_ERROR(boot.Barrier());
  if (me == 0) {
    ASSIGN_OR_RETURN(std::optional<uint64_t> other, client->Dequeue(0));
    REQUIRE(other.has_value(), "node 1's count is missing");
    REQUIRE(got.size() + *other == 2 * kPerNode, got.size(), " + ", *other, " values dequeued, not ",
            2 * kPerNode);
  }

  where = absl::StrCat("node ", me, " batches");
  if (me == 0) {  // a remote batch round trip through node 1's queue
    std::vector<uint64_t> batch;
    for (uint64_t i = 0; i < 16; ++i) batch.push_back(ValueOf(0, 1000 + i));
    ASSIGN_OR_RETURN(size_t n, client->EnqueueBatch(1, batch));
    REQUIRE(n == 16, "enqueued ", n, " of 16");
    ASSIGN_OR_RETURN(std::vector<uint64_t> back, client->DequeueBatch(1, 16));
    REQUIRE(back == batch, "the batch came back as ", back.size(), " values, not the 16 sent");
  }
  RETURN_IF_ERROR(boot.Barrier());
  client.reset();
  std::printf("node %d: all checks passed\n", me);
  return absl::OkStatus();
}

TEST(QueueTwoNode, HomeInOneProcessProducersAndConsumersInBoth) {
  rdma::testing::RunNodes(RunNodeAt);
}

}  // namespace
}  // namespace structures
