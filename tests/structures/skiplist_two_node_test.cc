// The ordered map across two processes: each node creates only its own part
// (SkipList::Create with its own node) and reaches the other through its
// Connector.
//
// Modes (testing/node_harness.h): one node per process (two guests through a
// coordinator, or `mpirun -np 2`; rdma_cm between them), or one process with
// both nodes on the first backend of RDMADS_FABRICS (default soft).
//
// Phases, with barriers in between: (1) each node puts 300 keys spread
// over both nodes' ranges (native puts in its own, remote puts and remote
// splits, one-sided node allocation included, in the other's); (2) each reads
// every key on every path it can take, and LowerBound and Scan cross the
// range boundary; (3) both race to Insert the same keys: exactly one wins
// each; (4) each erases its keys, and both scan an empty map.

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/node.h"
#include "rdma/session.h"
#include "rdma/bootstrap.h"
#include "structures/skiplist/skiplist.h"
#include "testing/node_harness.h"
#include "util/status_macros.h"

namespace structures {
namespace {

using rdma::NodeId;

constexpr uint64_t kSplit = 1 << 20;  // node 0 owns [0, 2^20), node 1 the rest
constexpr uint64_t kPerNode = 300;
constexpr uint64_t kRaceBase = uint64_t{1} << 40;
constexpr uint64_t kRaceKeys = 64;

#define REQUIRE(cond, ...)                                                                                \
  do {                                                                                                    \
    if (!(cond)) return absl::InternalError(absl::StrCat(where, ": ", #cond, " failed: ", __VA_ARGS__)); \
  } while (0)

// Node w's i-th key: alternately in node 0's range (ending just below the
// split) and node 1's (starting at it).
uint64_t KeyOf(NodeId w, uint64_t i) {
  const uint64_t j = 2 * (i / 2) + w;
  return i % 2 == 0 ? kSplit - 1 - j : kSplit + j;
}
uint64_t ValueOf(NodeId w, uint64_t key) { return (uint64_t{w} + 1) << 48 | key; }

absl::Status RunNodeAt(rdma::Node& node, rdma::Connector& conn, rdma::Bootstrap& boot, std::string& where) {
  const NodeId me = node.id();
  where = absl::StrCat("node ", me, " setup");
  SkipListOptions o;
  o.split_keys = {kSplit};
  o.part_bytes = 1 << 20;
  rdma::Node* const local[] = {&node};
  auto map = SkipList<uint64_t>::Create(conn, local, o);
  RETURN_IF_ERROR(map.status());
  RETURN_IF_ERROR(boot.Barrier());
  auto session = rdma::Session::Create(node, conn);
  RETURN_IF_ERROR(session.status());
  auto client_or = map->NewClient(**session);
  RETURN_IF_ERROR(client_or.status());
  SkipList<uint64_t>::Client& c = **client_or;

  where = absl::StrCat("node ", me, " put");
  for (uint64_t i = 0; i < kPerNode; ++i) {
    const uint64_t k = KeyOf(me, i);
    auto prev = c.Put(k, ValueOf(me, k));
    RETURN_IF_ERROR(prev.status());
    REQUIRE(!prev->has_value(), "key ", k, " already bound");
  }
  REQUIRE(c.stats().splits > 0, "no split");
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " get");
  for (NodeId w : {NodeId{0}, NodeId{1}}) {
    for (uint64_t i = 0; i < kPerNode; ++i) {
      const uint64_t k = KeyOf(w, i);
      for (Path p : {Path::kAuto, Path::kLoopback}) {
        if (p == Path::kLoopback && map->HomeOf(k) != me) continue;
        auto v = c.Get(k, p);
        RETURN_IF_ERROR(v.status());
        REQUIRE(*v == std::optional<uint64_t>(ValueOf(w, k)), "key ", k, " = ", v->value_or(0));
      }
    }
  }
  auto lb = c.LowerBound(kSplit - 1 - 2 * kPerNode);  // below every key
  RETURN_IF_ERROR(lb.status());
  REQUIRE(lb->has_value() && (*lb)->first == kSplit - kPerNode, "lower bound ", lb->has_value() ? (*lb)->first : 0);
  auto all = c.Scan(0, 4 * kPerNode);
  RETURN_IF_ERROR(all.status());
  REQUIRE(all->size() == 2 * kPerNode, "scan saw ", all->size());
  for (size_t i = 1; i < all->size(); ++i) REQUIRE((*all)[i - 1].first < (*all)[i].first, "order at ", i);
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " insert race");
  std::vector<bool> won(kRaceKeys, false);
  for (uint64_t i = 0; i < kRaceKeys; ++i) {
    const uint64_t j = me == 0 ? i : kRaceKeys - 1 - i;  // opposite orders meet in the middle
    // Half of the race keys in each node's range.
    const uint64_t k = j % 2 == 0 ? kSplit - 1 - 4 * kPerNode - j : kRaceBase + j;
    auto ins = c.Insert(k, ValueOf(me, k));
    RETURN_IF_ERROR(ins.status());
    won[j] = *ins;
  }
  RETURN_IF_ERROR(boot.Barrier());
  for (uint64_t j = 0; j < kRaceKeys; ++j) {
    const uint64_t k = j % 2 == 0 ? kSplit - 1 - 4 * kPerNode - j : kRaceBase + j;
    auto v = c.Get(k);
    RETURN_IF_ERROR(v.status());
    REQUIRE(v->has_value(), "race key ", k, " absent");
    const bool mine = **v == ValueOf(me, k);
    REQUIRE(mine == won[j], "race key ", k, ": value ", **v, ", I won: ", won[j]);
  }
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " erase");
  for (uint64_t i = 0; i < kPerNode; ++i) {
    auto prev = c.Erase(KeyOf(me, i));
    RETURN_IF_ERROR(prev.status());
    REQUIRE(prev->has_value(), "key ", KeyOf(me, i), " was absent");
  }
  for (uint64_t j = 0; j < kRaceKeys; ++j) {
    const uint64_t k = j % 2 == 0 ? kSplit - 1 - 4 * kPerNode - j : kRaceBase + j;
    if (won[j]) RETURN_IF_ERROR(c.Erase(k).status());
  }
  RETURN_IF_ERROR(boot.Barrier());
  auto none = c.Scan(0, 10);
  RETURN_IF_ERROR(none.status());
  REQUIRE(none->empty(), "scan still sees ", none->size(), " keys");
  RETURN_IF_ERROR(boot.Barrier());  // nobody tears down while the other still works
  client_or->reset();
  std::printf("node %d: all checks passed\n", me);
  return absl::OkStatus();
}

TEST(SkipListTwoNode, LocalPartsAcrossNodes) { rdma::testing::RunNodes(RunNodeAt); }

}  // namespace
}  // namespace structures
