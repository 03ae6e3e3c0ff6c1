// All three structures with one node per process: `mpirun -np 3` in one
// Soft-RoCE guest (tests/verbs/run_guest_tests.sh), or three nodes in one
// process everywhere else (testing/node_harness.h).
//
//  * EveryProcessUsesEveryPart: each node creates its part of a hash map, an
//    ordered map and a queue; every node writes keys homed on every node
//    (native for its own, remote for the others), reads every key back
//    through every home, enqueues into every node's ring, and every node
//    drains its own ring: every value comes out exactly once.
//  * KilledProcessLeavesTheRestWorking (one node per process, >= 3 nodes):
//    the last rank SIGKILLs itself while the others read keys it homes;
//    each survivor's next operation on the victim's part fails with
//    Unavailable naming it less than 1 s after its last success, and the
//    survivors keep writing and reading their own parts of all three
//    structures, and each other's queues.

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/bootstrap.h"
#include "rdma/node.h"
#include "rdma/session.h"
#include "structures/hash_map/hash_map.h"
#include "structures/queue/queue.h"
#include "structures/skiplist/skiplist.h"
#include "testing/node_harness.h"
#include "util/status_macros.h"

namespace structures {
namespace {

using rdma::NodeId;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kKeys = 300;     // per structure, spread over every home
constexpr uint64_t kPerRing = 40;   // values each node enqueues into each ring

#define REQUIRE(cond, ...)                                                                                \
  do {                                                                                                    \
    if (!(cond)) return absl::InternalError(absl::StrCat(where, ": ", #cond, " failed: ", __VA_ARGS__)); \
  } while (0)

uint64_t ValueOf(NodeId writer, uint64_t key) { return (uint64_t{writer} + 1) << 40 | key; }

// Node i's range of the ordered map starts at i * OrderedRange(nodes).
uint64_t OrderedRange(int nodes) { return UINT64_MAX / static_cast<uint64_t>(nodes); }

// The three structures, created in the same order on every node, so each
// node's part of each is at the same arena offset everywhere.
struct Parts {
  HashMap<uint64_t> map;
  SkipList<uint64_t> ordered;
  Queue<uint64_t> queue;
};

absl::StatusOr<Parts> CreateParts(rdma::Node& node, rdma::Connector& peers) {
  rdma::Node* const local[] = {&node};
  HashMapOptions ho;
  ho.groups_per_node = 128;
  ASSIGN_OR_RETURN(auto map, HashMap<uint64_t>::Create(peers, local, ho));
  SkipListOptions so;
  so.part_bytes = 512 << 10;
  for (int i = 1; i < peers.num_nodes(); ++i) so.split_keys.push_back(OrderedRange(peers.num_nodes()) * i);
  ASSIGN_OR_RETURN(auto ordered, SkipList<uint64_t>::Create(peers, local, so));
  QueueOptions qo;
  qo.capacity = 256;
  ASSIGN_OR_RETURN(auto queue, Queue<uint64_t>::Create(peers, local, qo));
  return Parts{std::move(map), std::move(ordered), std::move(queue)};
}

// Key i of the ordered map: spread over every node's range.
uint64_t OrderedKey(int nodes, uint64_t i) { return (i / nodes) % nodes * OrderedRange(nodes) + 1 + i; }

absl::Status UseEveryPart(rdma::Node& node, rdma::Connector& peers, rdma::Bootstrap& boot, std::string& where) {
  const NodeId me = node.id();
  const int n = boot.size();
  where = absl::StrCat("node ", me, " create");
  ASSIGN_OR_RETURN(Parts parts, CreateParts(node, peers));
  RETURN_IF_ERROR(boot.Barrier());
  ASSIGN_OR_RETURN(auto session, rdma::Session::Create(node, peers));
  ASSIGN_OR_RETURN(auto map, parts.map.NewClient(*session));
  ASSIGN_OR_RETURN(auto ordered, parts.ordered.NewClient(*session));
  ASSIGN_OR_RETURN(auto queue, parts.queue.NewClient(*session));

  where = absl::StrCat("node ", me, " write");
  std::set<NodeId> homes, ordered_homes;
  for (uint64_t k = me; k < kKeys; k += n) {
    ASSIGN_OR_RETURN(auto prev, map->Put(k, ValueOf(me, k)));
    REQUIRE(!prev.has_value(), "hash map key ", k, " already bound");
    homes.insert(parts.map.HomeOf(k));
    const uint64_t ok = OrderedKey(n, k);
    ASSIGN_OR_RETURN(auto oprev, ordered->Put(ok, ValueOf(me, ok)));
    REQUIRE(!oprev.has_value(), "ordered key ", ok, " already bound");
    ordered_homes.insert(parts.ordered.HomeOf(ok));
  }
  REQUIRE(static_cast<int>(homes.size()) == n, "hash map keys reached ", homes.size(), " homes of ", n);
  REQUIRE(static_cast<int>(ordered_homes.size()) == n, "ordered keys reached ", ordered_homes.size(), " homes");
  for (int ring = 0; ring < n; ++ring) {
    for (uint64_t i = 0; i < kPerRing; ++i) {
      ASSIGN_OR_RETURN(bool in, queue->Enqueue(static_cast<NodeId>(ring), ValueOf(me, i)));
      REQUIRE(in, "ring ", ring, " full");
    }
  }
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " read");
  for (uint64_t k = 0; k < kKeys; ++k) {
    const NodeId writer = static_cast<NodeId>(k % n);
    ASSIGN_OR_RETURN(auto v, map->Get(k));
    REQUIRE(v == std::optional<uint64_t>(ValueOf(writer, k)), "hash map key ", k, " = ", v.value_or(0));
    const uint64_t ok = OrderedKey(n, k);
    ASSIGN_OR_RETURN(auto ov, ordered->Get(ok));
    REQUIRE(ov == std::optional<uint64_t>(ValueOf(writer, ok)), "ordered key ", ok, " = ", ov.value_or(0));
  }
  ASSIGN_OR_RETURN(auto first, ordered->LowerBound(0));
  REQUIRE(first.has_value() && first->first == OrderedKey(n, 0), "LowerBound(0) is wrong");
  std::vector<uint64_t> got;
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<uint64_t> v, queue->Dequeue(me));
    if (!v.has_value()) break;
    got.push_back(*v);
  }
  REQUIRE(got.size() == kPerRing * n, "ring ", me, " gave ", got.size(), " values, expected ", kPerRing * n);
  REQUIRE(std::set<uint64_t>(got.begin(), got.end()).size() == got.size(), "a value came out twice");
  return absl::OkStatus();
}

TEST(MultiProcess, EveryProcessUsesEveryPart) { rdma::testing::RunNodes(UseEveryPart, 3); }

absl::Status SurviveAKill(rdma::Node& node, rdma::Connector& peers, rdma::Bootstrap& boot) {
  std::string where = absl::StrCat("node ", node.id(), " setup");
  const int n = boot.size();
  const NodeId victim = static_cast<NodeId>(n - 1);
  const NodeId me = node.id();
  ASSIGN_OR_RETURN(Parts parts, CreateParts(node, peers));
  RETURN_IF_ERROR(boot.Barrier());
  ASSIGN_OR_RETURN(auto session, rdma::Session::Create(node, peers));
  ASSIGN_OR_RETURN(auto map, parts.map.NewClient(*session));
  ASSIGN_OR_RETURN(auto ordered, parts.ordered.NewClient(*session));
  ASSIGN_OR_RETURN(auto queue, parts.queue.NewClient(*session));
  for (uint64_t k = me; k < kKeys; k += n) {
    RETURN_IF_ERROR(map->Put(k, ValueOf(me, k)).status());
    RETURN_IF_ERROR(ordered->Put(OrderedKey(n, k), ValueOf(me, k)).status());
  }
  RETURN_IF_ERROR(boot.Barrier());  // every key is in
  if (me == victim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::printf("node %d: SIGKILL to itself\n", static_cast<int>(victim));
    std::fflush(stdout);
    raise(SIGKILL);
  }
  where = absl::StrCat("node ", me, " detect");
  uint64_t victims_key = 0;
  while (parts.map.HomeOf(victims_key) != victim) ++victims_key;
  const rdma::testing::FirstFailure first =
      rdma::testing::RunUntilItFails([&] { return map->Get(victims_key).status(); }, std::chrono::seconds(30));
  const absl::Status& failure = first.status;
  const double detect_s = first.seconds_after_last_success;
  std::printf("node %d: hash map Get on node %d's part failed %.3f s after its last success: %s\n",
              static_cast<int>(me), static_cast<int>(victim), detect_s, failure.ToString().c_str());
  REQUIRE(absl::IsUnavailable(failure) && failure.message().find(absl::StrCat("node ", victim)) != std::string::npos,
          "expected Unavailable naming node ", victim, ", got ", failure.ToString());
  REQUIRE(detect_s < 1.0, "the death was seen ", detect_s, " s after the last success");
  // Every structure's operations on the victim's part fail the same way.
  const uint64_t victims_ordered = OrderedKey(n, uint64_t{victim} * n);
  REQUIRE(parts.ordered.HomeOf(victims_ordered) == victim, "key choice");
  absl::Status s = ordered->Get(victims_ordered).status();
  REQUIRE(absl::IsUnavailable(s), "ordered map Get on the victim's range gave ", s.ToString());
  s = queue->Enqueue(victim, 1).status();
  REQUIRE(absl::IsUnavailable(s), "Enqueue into the victim's ring gave ", s.ToString());

  where = absl::StrCat("node ", me, " survivors keep working");
  for (uint64_t k = 0; k < kKeys; ++k) {
    if (parts.map.HomeOf(k) == victim) continue;
    ASSIGN_OR_RETURN(auto v, map->Get(k));
    REQUIRE(v == std::optional<uint64_t>(ValueOf(static_cast<NodeId>(k % n), k)), "key ", k, " lost");
    const uint64_t fresh = k + kKeys * (me + 1);
    if (parts.map.HomeOf(fresh) != victim) RETURN_IF_ERROR(map->Put(fresh, ValueOf(me, k)).status());
  }
  for (uint64_t k = 0; k < kKeys; ++k) {
    const uint64_t ok = OrderedKey(n, k);
    if (parts.ordered.HomeOf(ok) == victim) continue;
    ASSIGN_OR_RETURN(auto v, ordered->Get(ok));
    REQUIRE(v == std::optional<uint64_t>(ValueOf(static_cast<NodeId>(k % n), k)), "ordered key ", ok, " lost");
  }
  for (int ring = 0; ring < victim; ++ring) {
    ASSIGN_OR_RETURN(bool in, queue->Enqueue(static_cast<NodeId>(ring), ValueOf(me, ring)));
    REQUIRE(in, "ring ", ring, " full");
  }
  // No bootstrap collective can include the dead rank: the survivors meet in
  // the hash map, on keys homed on node 0, which leaves last.
  auto on_node0 = [&](uint64_t from) {
    while (parts.map.HomeOf(from) != 0) ++from;
    return from;
  };
  auto wait_for_all = [&](uint64_t base) -> absl::Status {
    const auto deadline = Clock::now() + std::chrono::seconds(60);
    for (NodeId other = 0; other < victim; ++other) {
      for (;;) {
        ASSIGN_OR_RETURN(auto v, map->Get(on_node0(base + 1000 * other)));
        if (v.has_value()) break;
        REQUIRE(Clock::now() < deadline, "node ", other, " never arrived at ", base);
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    return absl::OkStatus();
  };
  const uint64_t arrived = 1ull << 50, done = 1ull << 51;
  RETURN_IF_ERROR(map->Put(on_node0(arrived + 1000 * me), 1).status());
  RETURN_IF_ERROR(wait_for_all(arrived));  // every survivor's enqueues are in
  // Each survivor dequeues what the others put in its ring.
  int mine = 0;
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<uint64_t> v, queue->Dequeue(me));
    if (!v.has_value()) break;
    ++mine;
  }
  REQUIRE(mine == victim, "ring ", me, " gave ", mine, " values, expected ", static_cast<int>(victim));
  RETURN_IF_ERROR(map->Put(on_node0(done + 1000 * me), 1).status());
  // Nobody touches another survivor's part after its "done"; node 0's part
  // holds the keys, so node 0 stays until every survivor is done.
  if (me == 0) RETURN_IF_ERROR(wait_for_all(done));
  return absl::OkStatus();
}

TEST(MultiProcess, KilledProcessLeavesTheRestWorking) {
  if (!rdma::testing::OneNodePerProcess()) GTEST_SKIP() << "needs one node per process (mpirun -np 3)";
  auto pn = rdma::testing::OpenProcessNode();
  ASSERT_TRUE(pn.ok()) << pn.status();
  if (pn->boot->size() < 3) GTEST_SKIP() << "needs 3 or more nodes (the victim and two survivors)";
  absl::Status st = SurviveAKill(*pn->node, *pn->peers, *pn->boot);
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace structures
