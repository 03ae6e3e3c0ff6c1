// The hash map across two processes: each node creates only its own part
// (HashMap::Create with its own node) and reaches the other through its
// Connector.
//
// Modes (testing/node_harness.h): one node per process (two guests through a
// coordinator, or `mpirun -np 2`; rdma_cm between them), or one process with
// both nodes on the first backend of RDMADS_FABRICS (default soft).
//
// Phases, with barriers in between: (1) each node puts its half of the
// keys (spread over both nodes: native and remote puts), (2) each reads every
// key (native, loopback and remote gets), (3) both race to Insert the same
// keys: exactly one wins each key, and the stored value is the winner's,
// (4) each erases its half, and both see an empty map; (5) growth: on a
// second map whose parts start as one unit each, both nodes insert keys
// homed on both nodes at the same time (each part splits many times, while
// the other node's client writes to it and learns its new layout from its
// directory alone), then each reads every key of both nodes.

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"
#include "rdma/node.h"
#include "rdma/session.h"
#include "rdma/bootstrap.h"
#include "testing/node_harness.h"
#include "structures/hash_map/hash_map.h"

namespace structures {
namespace {

using rdma::NodeId;

constexpr uint64_t kKeys = 64;
constexpr uint64_t kRecordBase = uint64_t{1} << 40;  // key kRecordBase + k: who won the insert of k

#define REQUIRE(cond, ...)                                                                                \
  do {                                                                                                    \
    if (!(cond)) return absl::InternalError(absl::StrCat(where, ": ", #cond, " failed: ", __VA_ARGS__)); \
  } while (0)

uint64_t ValueOf(NodeId writer, uint64_t key) { return (uint64_t{writer} + 1) << 32 | key; }

absl::Status RunNodeAt(rdma::Node& node, rdma::Connector& conn, rdma::Bootstrap& boot, std::string& where) {
  const NodeId me = node.id();
  where = absl::StrCat("node ", me, " setup");
  HashMapOptions o;
  o.groups_per_node = 128;
  // First allocation on a fresh node: the same arena offset on both.
  rdma::Node* const local[] = {&node};
  auto map = HashMap<uint64_t>::Create(conn, local, o);
  RETURN_IF_ERROR(map.status());
  RETURN_IF_ERROR(boot.Barrier());  // both parts exist, every node is up
  auto session = rdma::Session::Create(node, conn);
  RETURN_IF_ERROR(session.status());
  auto client_or = map->NewClient(**session);
  RETURN_IF_ERROR(client_or.status());
  HashMap<uint64_t>::Client& c = **client_or;

  where = absl::StrCat("node ", me, " put");
  int native = 0, remote = 0;
  for (uint64_t k = me; k < kKeys; k += 2) {
    auto prev = c.Put(k, ValueOf(me, k));
    RETURN_IF_ERROR(prev.status());
    REQUIRE(!prev->has_value(), "key ", k, " already had ", prev->value_or(0));
    (map->HomeOf(k) == me ? native : remote)++;
  }
  REQUIRE(native > 0 && remote > 0, "keys did not spread over both nodes: ", native, " native, ", remote, " remote");
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " get");
  for (uint64_t k = 0; k < kKeys; ++k) {
    for (Path p : {Path::kAuto, Path::kLoopback}) {
      auto v = c.Get(k, p);
      RETURN_IF_ERROR(v.status());
      REQUIRE(*v == std::optional<uint64_t>(ValueOf(static_cast<NodeId>(k % 2), k)), "key ", k, " = ",
              v->value_or(0));
    }
  }
  size_t total = 0;
  for (NodeId n : {NodeId{0}, NodeId{1}}) {
    auto s = c.Size(n);
    RETURN_IF_ERROR(s.status());
    total += *s;
  }
  REQUIRE(total == kKeys, "sizes add up to ", total);
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " insert race");
  std::vector<bool> won(kKeys, false);
  for (uint64_t i = 0; i < kKeys; ++i) {
    const uint64_t k = kKeys + (me == 0 ? i : kKeys - 1 - i);  // opposite orders meet in the middle
    auto ins = c.Insert(k, ValueOf(me, k), k % 3 == 0 ? Path::kLoopback : Path::kAuto);
    RETURN_IF_ERROR(ins.status());
    won[k - kKeys] = *ins;
  }
  for (uint64_t i = 0; i < kKeys; ++i) {
    if (!won[i]) continue;
    auto rec = c.Insert(kRecordBase + kKeys + i, me);
    RETURN_IF_ERROR(rec.status());
    REQUIRE(*rec, "both nodes won the insert of key ", kKeys + i);
  }
  RETURN_IF_ERROR(boot.Barrier());
  for (uint64_t i = 0; i < kKeys; ++i) {
    const uint64_t k = kKeys + i;
    auto winner = c.Get(kRecordBase + k);
    RETURN_IF_ERROR(winner.status());
    REQUIRE(winner->has_value(), "nobody won the insert of key ", k);
    REQUIRE((**winner == me) == won[i], "key ", k, ": recorded winner ", **winner, ", I won: ", won[i]);
    auto v = c.Get(k);
    RETURN_IF_ERROR(v.status());
    REQUIRE(*v == std::optional<uint64_t>(ValueOf(static_cast<NodeId>(**winner), k)), "key ", k, " = ",
            v->value_or(0));
  }
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " erase");
  for (uint64_t k = me; k < 2 * kKeys; k += 2) {
    auto prev = c.Erase(k);
    RETURN_IF_ERROR(prev.status());
    REQUIRE(prev->has_value(), "key ", k, " was absent");
  }
  for (uint64_t k = 0; k < kKeys; ++k) {
    if (won[k]) RETURN_IF_ERROR(c.Erase(kRecordBase + kKeys + k).status());
  }
  RETURN_IF_ERROR(boot.Barrier());
  for (NodeId n : {NodeId{0}, NodeId{1}}) {
    auto s = c.Size(n);
    RETURN_IF_ERROR(s.status());
    REQUIRE(*s == 0, "node ", n, " still holds ", *s);
  }
  RETURN_IF_ERROR(boot.Barrier());

  where = absl::StrCat("node ", me, " growth");
  HashMapOptions go;
  go.groups_per_node = 3;            // one unit (24 slots) per node
  go.max_groups_per_node = 3 * 64;   // room for 64 segments of one unit
  auto grow = HashMap<uint64_t>::Create(conn, local, go);  // second allocation on both: same offset
  RETURN_IF_ERROR(grow.status());
  RETURN_IF_ERROR(boot.Barrier());
  auto gclient_or = grow->NewClient(**session);
  RETURN_IF_ERROR(gclient_or.status());
  HashMap<uint64_t>::Client& g = **gclient_or;
  constexpr uint64_t kGrowKeys = 240;  // per node: ~10x the initial 2 x 24 slots in all
  const uint64_t grow_base = uint64_t{1} << 50;
  for (uint64_t i = 0; i < kGrowKeys; ++i) {
    const uint64_t k = grow_base + 2 * i + me;
    auto prev = g.Put(k, ValueOf(me, k), k % 5 == 0 && grow->HomeOf(k) == me ? Path::kLoopback : Path::kAuto);
    RETURN_IF_ERROR(prev.status());
    REQUIRE(!prev->has_value(), "grow key ", k, " already had ", prev->value_or(0));
  }
  RETURN_IF_ERROR(boot.Barrier());
  for (uint64_t k = grow_base; k < grow_base + 2 * kGrowKeys; ++k) {
    auto v = g.Get(k);
    RETURN_IF_ERROR(v.status());
    REQUIRE(*v == std::optional<uint64_t>(ValueOf(static_cast<NodeId>(k % 2), k)), "grow key ", k, " = ",
            v->value_or(0));
  }
  size_t grown = 0, segments = 0;
  for (NodeId n : {NodeId{0}, NodeId{1}}) {
    auto s = g.Size(n);
    RETURN_IF_ERROR(s.status());
    grown += *s;
    auto seg = g.SegmentsInUse(n);
    RETURN_IF_ERROR(seg.status());
    segments += *seg;
  }
  REQUIRE(grown == 2 * kGrowKeys, "grown sizes add up to ", grown);
  REQUIRE(segments >= 10, "only ", segments, " segments after growth");
  std::printf("node %d: growth: %zu segments in all, this client split %llu and refreshed its directory %llu times\n",
              me, segments, static_cast<unsigned long long>(g.growth_stats().splits),
              static_cast<unsigned long long>(g.growth_stats().refreshes));
  RETURN_IF_ERROR(boot.Barrier());  // nobody tears down while the other still works
  gclient_or->reset();
  client_or->reset();
  std::printf("node %d: all checks passed\n", me);
  return absl::OkStatus();
}

TEST(HashMapTwoNode, LocalPartsAcrossNodes) {
  rdma::testing::RunNodes(RunNodeAt);
}

}  // namespace
}  // namespace structures
