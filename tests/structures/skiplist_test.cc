// SkipList unit tests: sequential semantics against std::map on every path
// (native, loopback, remote), with enough keys to split nodes many times and
// build towers; keys at the split points and the extremes; LowerBound and Scan
// across node boundaries; bad input; an erase-heavy run that must not exhaust
// the part; pool exhaustion; and the per-operation NIC costs. Backends from
// RDMADS_FABRICS (default soft), so the binary also runs on verbs in the guest.

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "structures/skiplist/skiplist.h"
#include "testing/backends.h"
#include "testing/op_cost.h"

namespace structures {
namespace {

struct Row {
  uint64_t a, b, c;
  friend bool operator==(const Row&, const Row&) = default;
};
Row MakeRow(uint64_t x) { return {x, ~x, x * 5}; }

static_assert(skiplist_internal::SkipListValue<char[56]> && !skiplist_internal::SkipListValue<char[57]>);

constexpr uint64_t kSplit = 1000;  // node 0 owns [0, 1000), node 1 [1000, 2^64)

using Env = rdma::testing::ClusterWithSession;
using Map = SkipList<Row>;

SkipListOptions TwoRanges() {
  SkipListOptions o;
  o.split_keys = {kSplit};
  o.part_bytes = 2 << 20;
  return o;
}

// (backend, client node, path): the client's point operations go to keys of
// node 0's range.
class SkipListPathTest : public ::testing::TestWithParam<std::tuple<std::string, Path>> {};

TEST_P(SkipListPathTest, SequentialMatchesStdMap) {
  const auto [backend, path] = GetParam();
  Env e = rdma::testing::MakeClusterWithSession(backend, 2, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  auto map = Map::Create(*e.cluster, TwoRanges());
  ASSERT_TRUE(map.ok()) << map.status();
  // Remote: a client on node 1 (its session) for keys of node 0.
  auto s1 = e.cluster->NewSession(1);
  ASSERT_TRUE(s1.ok()) << s1.status();
  const bool remote = path == Path::kRemote;
  auto c = remote ? map->NewClient(**s1) : map->NewClient(*e.session);
  ASSERT_TRUE(c.ok()) << c.status();
  const Path p = remote ? Path::kAuto : path;
  // Node 1's range gets a few keys (natively) so ordered reads cross over.
  auto c1 = map->NewClient(**s1);
  ASSERT_TRUE(c1.ok());
  std::map<uint64_t, Row> model;
  for (uint64_t k = kSplit; k < kSplit + 200; k += 7) {
    ASSERT_TRUE((*c1)->Put(k, MakeRow(k)).ok());
    model[k] = MakeRow(k);
  }
  ASSERT_TRUE((*c1)->Put(UINT64_MAX, MakeRow(1)).ok());
  model[UINT64_MAX] = MakeRow(1);

  std::mt19937_64 rng(11);
  for (int i = 0; i < 4000; ++i) {
    // Keys of node 0's range, a third of them near its ends.
    const int pick = static_cast<int>(rng() % 3);
    const uint64_t key = pick == 0 ? rng() % 8 : pick == 1 ? kSplit - 1 - rng() % 8 : rng() % kSplit;
    const Row v = MakeRow(key * 1000 + static_cast<uint64_t>(i));
    const int op = static_cast<int>(rng() % 100);
    if (op < 35) {
      auto r = (*c)->Put(key, v, p);
      ASSERT_TRUE(r.ok()) << r.status();
      auto it = model.find(key);
      EXPECT_EQ(*r, it == model.end() ? std::nullopt : std::optional<Row>(it->second)) << i;
      model[key] = v;
    } else if (op < 45) {
      auto r = (*c)->Insert(key, v, p);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(*r, !model.contains(key)) << i;
      model.emplace(key, v);
    } else if (op < 60) {
      auto r = (*c)->Erase(key, p);
      ASSERT_TRUE(r.ok()) << r.status();
      auto it = model.find(key);
      EXPECT_EQ(*r, it == model.end() ? std::nullopt : std::optional<Row>(it->second)) << i;
      model.erase(key);
    } else if (op < 75) {
      auto r = (*c)->Get(key, p);
      ASSERT_TRUE(r.ok()) << r.status();
      auto it = model.find(key);
      EXPECT_EQ(*r, it == model.end() ? std::nullopt : std::optional<Row>(it->second)) << i;
    } else if (op < 80) {
      auto r = (*c)->Contains(key, p);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(*r, model.contains(key)) << i;
    } else if (op < 92) {
      auto r = (*c)->LowerBound(key, p);
      ASSERT_TRUE(r.ok()) << r.status();
      auto it = model.lower_bound(key);
      if (it == model.end()) {
        EXPECT_EQ(*r, std::nullopt) << i;
      } else {
        ASSERT_TRUE(r->has_value()) << i << " key " << key;
        EXPECT_EQ((*r)->first, it->first) << i;
        EXPECT_EQ((*r)->second, it->second) << i;
      }
    } else {
      const size_t limit = 1 + rng() % 60;
      auto r = (*c)->Scan(key, limit, p);
      ASSERT_TRUE(r.ok()) << r.status();
      std::vector<std::pair<uint64_t, Row>> want;
      for (auto it = model.lower_bound(key); it != model.end() && want.size() < limit; ++it) want.push_back(*it);
      EXPECT_EQ(*r, want) << i << " from " << key << " limit " << limit;
    }
  }
  // A full scan from 0 sees the model in order, across both parts.
  auto all = (*c)->Scan(0, model.size() + 10, p);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->size(), model.size());
  EXPECT_TRUE(std::equal(all->begin(), all->end(), model.begin(), model.end(),
                         [](const auto& a, const auto& b) { return a.first == b.first && a.second == b.second; }));
  EXPECT_GT((*c)->stats().splits + (*c1)->stats().splits, 0u);
}

std::vector<std::tuple<std::string, Path>> PathCases() {
  std::vector<std::tuple<std::string, Path>> v;
  for (const std::string& b : rdma::testing::BackendsUnderTest()) {
    for (Path p : {Path::kNative, Path::kLoopback, Path::kRemote}) v.emplace_back(b, p);
  }
  return v;
}
INSTANTIATE_TEST_SUITE_P(Paths, SkipListPathTest, ::testing::ValuesIn(PathCases()),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" + std::string(rdma::PathName(std::get<1>(info.param)));
                         });

class SkipListTest : public ::testing::TestWithParam<std::string> {};

// Many keys (ascending, descending and random) on both paths at once: every
// key readable on every path afterwards, towers built (a cold NIC client
// descends in far fewer READs than there are nodes).
TEST_P(SkipListTest, ManyKeysBuildTowers) {
  Env e = rdma::testing::MakeClusterWithSession(GetParam(), 2, 16 << 20);
  ASSERT_NE(e.session, nullptr);
  SkipListOptions o;
  o.split_keys = {uint64_t{1} << 40};
  o.part_bytes = 8 << 20;
  auto map = Map::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  auto native = map->NewClient(*e.session);
  ASSERT_TRUE(native.ok());
  auto s1 = e.cluster->NewSession(1);
  ASSERT_TRUE(s1.ok());
  auto remote = map->NewClient(**s1);
  ASSERT_TRUE(remote.ok());
  constexpr uint64_t kKeys = 6000;
  for (uint64_t i = 0; i < kKeys; ++i) {
    const uint64_t k = (i * 2654435761u) % (kKeys * 16);
    auto& cl = (i % 4 == 0) ? *remote : *native;
    ASSERT_TRUE(cl->Put(k, MakeRow(k)).ok()) << i;
  }
  for (uint64_t i = 0; i < kKeys; i += 7) {
    const uint64_t k = (i * 2654435761u) % (kKeys * 16);
    auto a = (*native)->Get(k);
    ASSERT_TRUE(a.ok() && a->has_value()) << k;
    EXPECT_EQ(**a, MakeRow(k));
  }
  (*remote)->ClearCache();
  const rdma::OpCounters cold = rdma::testing::CostOf([&] {
    auto g = (*remote)->Get((1234 * 2654435761u) % (kKeys * 16));
    ASSERT_TRUE(g.ok() && g->has_value());
  });
  // ~6000 keys in >= 375 nodes: a list walk would READ hundreds of nodes.
  EXPECT_LT(cold.nic_ops, 60u) << "a cold descent should use the towers";
  std::printf("cold remote get over %llu keys: %llu READs\n", static_cast<unsigned long long>(kKeys),
              static_cast<unsigned long long>(cold.nic_ops));
}

TEST_P(SkipListTest, ExtremeKeysAndSplitPoints) {
  Env e = rdma::testing::MakeClusterWithSession(GetParam(), 3, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  SkipListOptions o;
  o.split_keys = {100, 200};
  o.part_bytes = 1 << 20;
  auto map = Map::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  for (uint64_t k : {uint64_t{0}, uint64_t{99}, uint64_t{100}, uint64_t{199}, uint64_t{200}, UINT64_MAX}) {
    ASSERT_TRUE((*c)->Insert(k, MakeRow(k)).ok()) << k;
    EXPECT_EQ(map->HomeOf(k), k < 100 ? 0 : k < 200 ? 1 : 2);
  }
  auto lb = (*c)->LowerBound(1);
  ASSERT_TRUE(lb.ok() && lb->has_value());
  EXPECT_EQ((*lb)->first, 99u);
  lb = (*c)->LowerBound(101);  // empty rest of node 1's range after 100: crosses to 199
  ASSERT_TRUE(lb.ok() && lb->has_value());
  EXPECT_EQ((*lb)->first, 199u);
  lb = (*c)->LowerBound(201);
  ASSERT_TRUE(lb.ok() && lb->has_value());
  EXPECT_EQ((*lb)->first, UINT64_MAX);
  ASSERT_TRUE((*c)->Erase(UINT64_MAX).ok());
  lb = (*c)->LowerBound(201);
  ASSERT_TRUE(lb.ok());
  EXPECT_FALSE(lb->has_value());
  auto all = (*c)->Scan(0, 100);
  ASSERT_TRUE(all.ok());
  std::vector<uint64_t> keys;
  for (auto& [k, v] : *all) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<uint64_t>{0, 99, 100, 199, 200}));
  // A scan of an empty range, and one that stops at its limit exactly.
  auto none = (*c)->Scan(1, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size(), 1u);
  EXPECT_EQ((*none)[0].first, 99u);
}

TEST_P(SkipListTest, BadInput) {
  Env e = rdma::testing::MakeClusterWithSession(GetParam(), 2, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  SkipListOptions o;
  o.split_keys = {5, 3};
  EXPECT_EQ(Map::Create(*e.cluster, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.split_keys = {5, 6};
  EXPECT_EQ(Map::Create(*e.cluster, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.split_keys = {};
  o.part_bytes = 100;
  EXPECT_EQ(Map::Create(*e.cluster, o).status().code(), absl::StatusCode::kInvalidArgument);
  o.part_bytes = uint64_t{1} << 40;
  EXPECT_EQ(Map::Create(*e.cluster, o).status().code(), absl::StatusCode::kResourceExhausted);
  auto map = Map::Create(*e.cluster, TwoRanges());
  ASSERT_TRUE(map.ok());
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Scan(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->Get(5, Path::kRemote).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->Get(kSplit + 5, Path::kNative).status().code(), absl::StatusCode::kInvalidArgument);
  auto nosession = map->NewClient(e.cluster->node(0));
  ASSERT_TRUE(nosession.ok());
  EXPECT_EQ((*nosession)->Get(kSplit + 5).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*nosession)->Put(5, MakeRow(5)).ok());
  e.cluster->node(1).Shutdown();
  EXPECT_EQ((*c)->Put(kSplit + 1, MakeRow(1)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(*(*c)->Get(5), std::optional<Row>(MakeRow(5)));
}

// 10^6 operations over 1,000 keys, a third erases, the rest puts: erased
// entries are reused, so the pool of a 1 MiB part (1,300 nodes) is never
// exhausted.
TEST_P(SkipListTest, EraseHeavyRunReusesEntries) {
  Env e = rdma::testing::MakeClusterWithSession(GetParam(), 1, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  SkipListOptions o;
  o.part_bytes = 1 << 20;
  auto map = Map::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok());
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  std::mt19937_64 rng(3);
  std::map<uint64_t, Row> model;
  for (int i = 0; i < 1000000; ++i) {
    const uint64_t k = rng() % 1000 * 997;
    if (rng() % 3 == 0) {
      ASSERT_TRUE((*c)->Erase(k).ok()) << i;
      model.erase(k);
    } else {
      auto r = (*c)->Put(k, MakeRow(k));
      ASSERT_TRUE(r.ok()) << i << " " << r.status();
      model[k] = MakeRow(k);
    }
  }
  auto all = (*c)->Scan(0, 2000);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), model.size());
}

// Emptied nodes are unlinked and reused: rounds of 300 keys, each in a new
// range, inserted and then all erased, alternately through a native and a
// remote client, in a part of 64 nodes. Each round needs about 38 nodes, so
// the second round would exhaust the part if the first round's nodes were
// not reclaimed.
TEST_P(SkipListTest, EmptiedNodesAreReclaimedAndReused) {
  Env e = rdma::testing::MakeClusterWithSession(GetParam(), 2, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  SkipListOptions o;
  o.split_keys = {uint64_t{1} << 40};
  o.part_bytes = skiplist_internal::kNodesOffset + 64 * Map::kNodeBytes;
  auto map = Map::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  auto native = map->NewClient(*e.session);
  auto s1 = e.cluster->NewSession(1);
  ASSERT_TRUE(native.ok() && s1.ok());
  auto remote = map->NewClient(**s1);
  ASSERT_TRUE(remote.ok());
  for (uint64_t round = 0; round < 6; ++round) {
    auto& c = round % 2 == 0 ? *native : *remote;
    const uint64_t base = (round + 1) * 100000;
    for (uint64_t k = base; k < base + 300; ++k) ASSERT_TRUE(c->Put(k, MakeRow(k)).ok()) << round << " " << k;
    auto all = (*native)->Scan(0, 1000);
    ASSERT_TRUE(all.ok());
    ASSERT_EQ(all->size(), 300u) << round;
    EXPECT_EQ(all->front().first, base);
    for (uint64_t k = base; k < base + 300; ++k) {
      auto g = (*remote)->Get(k);  // through remembered (soon stale) locations too
      ASSERT_TRUE(g.ok() && g->has_value()) << k;
    }
    for (uint64_t k = base; k < base + 300; ++k) {
      auto r = c->Erase(k);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_TRUE(r->has_value()) << k;
    }
    auto none = (*remote)->Scan(0, 10);
    ASSERT_TRUE(none.ok());
    EXPECT_TRUE(none->empty()) << round;
    auto g = (*remote)->Get(base + 7);
    ASSERT_TRUE(g.ok());
    EXPECT_FALSE(g->has_value());
  }
  EXPECT_GT((*native)->stats().reclaimed + (*remote)->stats().reclaimed, 60u);
}

TEST_P(SkipListTest, FullPartIsResourceExhaustedNamingTheSize) {
  Env e = rdma::testing::MakeClusterWithSession(GetParam(), 1, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  SkipListOptions o;
  o.part_bytes = skiplist_internal::kNodesOffset + 4 * Map::kNodeBytes;  // the head + 3 nodes
  auto map = Map::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  absl::Status last;
  uint64_t k = 0;
  for (; k < 1000 && last.ok(); ++k) last = (*c)->Put(k, MakeRow(k)).status();
  EXPECT_EQ(last.code(), absl::StatusCode::kResourceExhausted) << last;
  EXPECT_NE(last.message().find("part_bytes"), std::string::npos) << last;
  // Nothing bound before it was lost.
  for (uint64_t j = 0; j + 1 < k; ++j) {
    auto g = (*c)->Get(j);
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(g->has_value()) << j;
  }
}

// The uncontended per-operation counts (skiplist.h, "Costs").
TEST_P(SkipListTest, OperationCosts) {
  Env e = rdma::testing::MakeClusterWithSession(GetParam(), 2, 8 << 20);
  ASSERT_NE(e.session, nullptr);
  auto map = Map::Create(*e.cluster, TwoRanges());
  ASSERT_TRUE(map.ok());
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  auto cost = [](auto&& op) { return rdma::testing::CostOf(op); };
  auto print = [](const std::string& what, const rdma::OpCounters& o) { rdma::testing::PrintCost(what, o); };

  // Native: nothing through the NIC.
  for (uint64_t k = 0; k < 40; ++k) ASSERT_TRUE((*c)->Put(k, MakeRow(k)).ok());
  const rdma::OpCounters native = cost([&] {
    ASSERT_TRUE((*c)->Get(3)->has_value());
    ASSERT_TRUE((*c)->Put(3, MakeRow(4)).ok());
    ASSERT_TRUE((*c)->Insert(500, MakeRow(4)).ok());
    ASSERT_TRUE((*c)->Erase(500).ok());
    ASSERT_EQ((*(*c)->LowerBound(20))->first, 20u);  // (41 would go on to node 1: remote READs)
  });
  EXPECT_EQ(native, rdma::OpCounters{});
  for (uint64_t k = 700; k < 900; ++k) ASSERT_TRUE((*c)->Put(k, MakeRow(k)).ok());  // for the scans below
  constexpr uint64_t kImage = sizeof(skiplist_internal::NodeImage<Row>);
  for (auto [name, client_node, path] :
       {std::tuple{"remote", rdma::NodeId{1}, Path::kAuto}, std::tuple{"loopback", rdma::NodeId{0}, Path::kLoopback}}) {
    auto s = e.cluster->NewSession(client_node);
    ASSERT_TRUE(s.ok());
    auto rc = map->NewClient(**s);
    ASSERT_TRUE(rc.ok());
    const std::string n = name;
    ASSERT_TRUE((*rc)->Get(7, path).ok());  // warm the location cache
    ASSERT_TRUE((*rc)->Get(600, path).ok());
    const uint64_t splits = (*rc)->stats().splits;
    const rdma::OpCounters get = cost([&] { ASSERT_TRUE((*rc)->Get(7, path)->has_value()); });
    const rdma::OpCounters put = cost([&] { ASSERT_TRUE((*rc)->Put(7, MakeRow(9), path)->has_value()); });
    const rdma::OpCounters ins = cost([&] { ASSERT_TRUE(*(*rc)->Insert(600, MakeRow(9), path)); });
    const rdma::OpCounters era = cost([&] { ASSERT_TRUE((*rc)->Erase(600, path)->has_value()); });
    print(n + " get (warm)", get);
    print(n + " put (overwrite)", put);
    print(n + " insert", ins);
    print(n + " erase", era);
    EXPECT_EQ(get, (rdma::OpCounters{1, 1, 1, kImage})) << n;
    EXPECT_EQ(put.round_trips, 2u) << n;
    EXPECT_EQ(put.doorbells, 3u) << n;
    EXPECT_EQ(put.nic_ops, 8u) << n;  // CAS, READ line, READ image; 4 WRITEs; CAS
    EXPECT_EQ(ins.round_trips, 2u) << n;
    EXPECT_EQ(ins.nic_ops, 10u) << n;  // + the meta and key words' WRITEs
    EXPECT_EQ(era.round_trips, 2u) << n;
    EXPECT_EQ(era.nic_ops, 8u) << n;  // the meta word instead of the value
    EXPECT_EQ((*rc)->stats().splits, splits) << n << ": no split expected here";
    // Scan of 100 of 200 keys: the start node's READ, then the nodes after it
    // READ in one doorbell from the remembered locations (a first scan
    // taught the client where they are). Keys inserted in ascending order
    // leave nodes half full (8 keys): at most 2 + ceil(100 / 8) READs.
    ASSERT_EQ((*rc)->Scan(700, 100, path)->size(), 100u);
    const rdma::OpCounters scan = cost([&] { ASSERT_EQ((*rc)->Scan(700, 100, path)->size(), 100u); });
    print(n + " scan(100)", scan);
    EXPECT_LE(scan.nic_ops, 2u + (100 + 7) / 8) << n;
    EXPECT_LE(scan.round_trips, 3u) << n;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, SkipListTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()));

}  // namespace
}  // namespace structures
