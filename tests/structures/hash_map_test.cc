// HashMap unit tests: sequential semantics against std::unordered_map on every
// path (native, loopback, remote), capacity (a full group), bad input,
// shutdown, multi-process style creation, and the per-operation NIC costs.
// Backends from RDMADS_FABRICS (default soft), so the same binary runs on
// verbs in the Soft-RoCE guest.

#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "rdma/soft/soft_nic.h"
#include "structures/hash_map/hash_map.h"
#include "testing/backends.h"
#include "testing/op_cost.h"

namespace structures {
namespace {

struct Val24 {
  uint64_t a, b, c;
  friend bool operator==(const Val24&, const Val24&) = default;
};
struct Val56 {
  uint64_t w[7];
  friend bool operator==(const Val56&, const Val56&) = default;
};
Val24 MakeVal24(uint64_t x) { return {x, ~x, x * 3}; }
Val56 MakeVal56(uint64_t x) { return {{x, x + 1, x + 2, x + 3, x + 4, x + 5, x + 6}}; }

static_assert(HashMapValue<uint8_t> && HashMapValue<Val24> && HashMapValue<Val56>);
static_assert(!HashMapValue<char[57]>, "values over 56 bytes must not compile");
static_assert(!HashMapValue<std::string>, "non-trivially-copyable values must not compile");

HashMapOptions Groups(size_t n) {
  HashMapOptions o;
  o.groups_per_node = n;
  return o;
}
// A map that never grows: full windows are ResourceExhausted.
HashMapOptions NoGrowth(size_t n) {
  HashMapOptions o = Groups(n);
  o.max_groups_per_node = n;
  return o;
}


// `n` distinct keys whose home is (or is not, when `home_is` is false) `node`.
template <typename Map>
std::vector<uint64_t> KeysHomedAt(const Map& m, rdma::NodeId node, size_t n, bool home_is = true,
                                  uint64_t start = 1) {
  std::vector<uint64_t> keys;
  for (uint64_t k = start; keys.size() < n; ++k) {
    if ((m.HomeOf(k) == node) == home_is) keys.push_back(k);
  }
  return keys;
}

using Env = rdma::testing::ClusterWithSession;
Env MakeEnv(const std::string& backend, int nodes) {
  return rdma::testing::MakeClusterWithSession(backend, nodes, 8 << 20);
}

class HashMapPathTest : public ::testing::TestWithParam<std::tuple<std::string, Path>> {};

// Random get/contains/put/insert/erase against std::unordered_map, all keys on
// one path, fixed seed; Size checked from the owner and from another node.
TEST_P(HashMapPathTest, SequentialMatchesUnorderedMap) {
  const auto [backend, path] = GetParam();
  Env e = MakeEnv(backend, 3);
  ASSERT_NE(e.cluster, nullptr);
  ASSERT_NE(e.session, nullptr);
  auto map = HashMap<Val24>::Create(*e.cluster, Groups(64));
  ASSERT_TRUE(map.ok()) << map.status();
  auto client = map->NewClient(*e.session);
  ASSERT_TRUE(client.ok()) << client.status();
  HashMap<Val24>::Client& c = **client;

  const std::vector<uint64_t> keys =
      path == Path::kRemote ? KeysHomedAt(*map, 0, 60, /*home_is=*/false) : KeysHomedAt(*map, 0, 60);
  std::unordered_map<uint64_t, Val24> model;
  std::mt19937_64 rng(42);
  const int kOps = backend == "soft" ? 3000 : 600;
  for (int i = 0; i < kOps; ++i) {
    const uint64_t k = keys[rng() % keys.size()];
    const Val24 v = MakeVal24(rng());
    const auto it = model.find(k);
    const std::optional<Val24> expected = it == model.end() ? std::nullopt : std::optional<Val24>(it->second);
    switch (rng() % 5) {
      case 0: {
        auto got = c.Get(k, path);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, expected) << "get " << k << " op " << i;
        break;
      }
      case 1: {
        auto got = c.Contains(k, path);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, expected.has_value()) << "contains " << k;
        break;
      }
      case 2: {
        auto got = c.Put(k, v, path);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, expected) << "put " << k;
        model[k] = v;
        break;
      }
      case 3: {
        auto got = c.Insert(k, v, path);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, !expected.has_value()) << "insert " << k;
        if (!expected) model[k] = v;
        break;
      }
      case 4: {
        auto got = c.Erase(k, path);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(*got, expected) << "erase " << k;
        model.erase(k);
        break;
      }
    }
  }
  // Per-node sizes, counted by node 0 (natively for its own part) and by a
  // client on node 1 (remotely for node 0's part).
  size_t per_node[3] = {0, 0, 0};
  for (const auto& [k, v] : model) ++per_node[map->HomeOf(k)];
  auto s1 = e.cluster->NewSession(1);
  ASSERT_TRUE(s1.ok());
  auto c1 = map->NewClient(**s1);
  ASSERT_TRUE(c1.ok());
  for (rdma::NodeId n = 0; n < 3; ++n) {
    auto s = c.Size(n);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(*s, per_node[n]) << "node " << n;
    auto r = (*c1)->Size(n);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, per_node[n]) << "node " << n << " counted from node 1";
  }
  // Every key readable on the other paths too.
  for (uint64_t k : keys) {
    const auto it = model.find(k);
    const std::optional<Val24> expected = it == model.end() ? std::nullopt : std::optional<Val24>(it->second);
    auto a = c.Get(k, Path::kLoopback);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(*a, expected);
    auto b = (*c1)->Get(k);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(*b, expected);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, HashMapPathTest,
    ::testing::Combine(::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                       ::testing::Values(Path::kNative, Path::kLoopback, Path::kRemote)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::string(rdma::PathName(std::get<1>(info.param)));
    });

class HashMapTest : public ::testing::TestWithParam<std::string> {};

// The largest value type (56 bytes: a slot of 80 bytes, not inlined) and the
// smallest (1 byte) round-trip on every path.
TEST_P(HashMapTest, ValueSizesRoundTrip) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  auto big = HashMap<Val56>::Create(*e.cluster, Groups(16));
  auto small = HashMap<uint8_t>::Create(*e.cluster, Groups(16));
  ASSERT_TRUE(big.ok() && small.ok());
  auto cb = big->NewClient(*e.session);
  auto cs = small->NewClient(*e.session);
  ASSERT_TRUE(cb.ok() && cs.ok());
  for (uint64_t k = 0; k < 40; ++k) {
    const Path p = k % 2 ? Path::kLoopback : Path::kAuto;
    ASSERT_EQ(*(*cb)->Put(k, MakeVal56(k), p), std::nullopt);
    ASSERT_EQ(*(*cs)->Put(k, static_cast<uint8_t>(k), p), std::nullopt);
  }
  for (uint64_t k = 0; k < 40; ++k) {
    for (Path p : {Path::kAuto, Path::kLoopback}) {
      EXPECT_EQ(*(*cb)->Get(k, p), MakeVal56(k));
      EXPECT_EQ(*(*cs)->Get(k, p), static_cast<uint8_t>(k));
    }
  }
  // Extreme keys are ordinary keys (no reserved values).
  for (uint64_t k : {uint64_t{0}, ~uint64_t{0}, uint64_t{1} << 63, ~uint64_t{0} - 1}) {
    for (Path p : {Path::kAuto, Path::kLoopback}) {
      const bool had = k < 40;
      EXPECT_EQ((*cs)->Put(k, 200, p)->has_value(), had && p == Path::kAuto) << k;
      EXPECT_EQ(*(*cs)->Get(k, p), std::optional<uint8_t>(200)) << k;
      EXPECT_EQ(*(*cs)->Erase(k, p), std::optional<uint8_t>(200)) << k;
      EXPECT_EQ(*(*cs)->Contains(k, p), false) << k;
    }
  }
}

// Filling one unit of a map that may not grow: the key that does not fit gets
// ResourceExhausted, and everything stored before stays readable and
// writable, on both NIC and CPU.
TEST_P(HashMapTest, FullUnitIsResourceExhaustedAndLosesNothing) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  // One unit per node: every key of a node has the unit's two sides as its
  // windows, so it may go to any of the unit's 24 slots.
  auto map = HashMap<uint64_t>::Create(*e.cluster, NoGrowth(1));
  ASSERT_TRUE(map.ok());
  constexpr size_t kSlots = HashMap<uint64_t>::kSlotsPerUnit;
  EXPECT_EQ(map->capacity(), 2 * kSlots);
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  for (rdma::NodeId home : {rdma::NodeId{0}, rdma::NodeId{1}}) {
    const auto keys = KeysHomedAt(*map, home, kSlots + 2);
    for (size_t i = 0; i < kSlots; ++i) {
      if (i % 2) {
        auto r = (*c)->Insert(keys[i], keys[i] * 10, Path::kLoopback);
        ASSERT_TRUE(r.ok() && *r) << r.status() << " home " << home << " key " << i;
      } else {
        auto r = (*c)->Put(keys[i], keys[i] * 10);
        ASSERT_TRUE(r.ok() && !r->has_value()) << r.status() << " home " << home << " key " << i;
      }
    }
    const uint64_t extra = keys[kSlots];
    auto put = (*c)->Put(extra, 1);
    ASSERT_EQ(put.status().code(), absl::StatusCode::kResourceExhausted) << put.status();
    EXPECT_NE(put.status().message().find("groups_per_node"), std::string::npos) << put.status();
    auto ins = (*c)->Insert(extra, 1, Path::kLoopback);
    EXPECT_EQ(ins.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(*(*c)->Get(extra), std::nullopt);
    // Nothing lost; present keys can still be overwritten when full.
    for (size_t i = 0; i < kSlots; ++i) {
      EXPECT_EQ(*(*c)->Get(keys[i]), std::optional<uint64_t>(keys[i] * 10));
      EXPECT_EQ(*(*c)->Get(keys[i], Path::kLoopback), std::optional<uint64_t>(keys[i] * 10));
    }
    EXPECT_EQ(*(*c)->Put(keys[0], 7), std::optional<uint64_t>(keys[0] * 10));
    EXPECT_EQ(*(*c)->Size(home), kSlots);
    // Erasing frees a slot for the new key.
    EXPECT_EQ(*(*c)->Erase(keys[1]), std::optional<uint64_t>(keys[1] * 10));
    EXPECT_EQ(*(*c)->Insert(extra, 99), true);
    EXPECT_EQ(*(*c)->Get(extra, Path::kLoopback), std::optional<uint64_t>(99));
    EXPECT_EQ(*(*c)->Get(keys[0]), std::optional<uint64_t>(7));
  }
}

// Growth: a map created with 2 units per node takes 10 times its initial
// capacity, written on every path (native and loopback from node 0's client,
// remote from node 1's), by splitting segments; every key stays readable on
// every path, including by a client whose directory copy is from before all
// the splits; Size counts every key once.
TEST_P(HashMapTest, GrowsTenfoldAndEveryKeyStaysReadable) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  HashMapOptions o = Groups(6);      // 2 units per node: one segment of 2 units
  o.max_groups_per_node = 6 * 32;    // room for 32 segments per node
  auto map = HashMap<uint64_t>::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->units_per_node(), 2u);
  auto s1 = e.cluster->NewSession(1);
  ASSERT_TRUE(s1.ok());
  auto c0 = map->NewClient(*e.session);
  auto c1 = map->NewClient(**s1);
  auto stale = map->NewClient(**s1);  // reads only after all the growth
  ASSERT_TRUE(c0.ok() && c1.ok() && stale.ok());
  const size_t n = 10 * map->capacity();
  std::vector<uint64_t> keys(n);
  for (size_t i = 0; i < n; ++i) keys[i] = 1000003 * (i + 1);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = keys[i];
    absl::StatusOr<std::optional<uint64_t>> r;
    if (map->HomeOf(k) == 0) {
      r = (*c0)->Put(k, k + 1, i % 2 ? Path::kLoopback : Path::kAuto);
    } else {
      r = i % 2 ? (*c1)->Put(k, k + 1) : (*c0)->Put(k, k + 1);  // native or remote
    }
    ASSERT_TRUE(r.ok()) << r.status() << " key " << i << " of " << n;
    ASSERT_EQ(*r, std::nullopt);
  }
  EXPECT_GT((*c0)->growth_stats().splits + (*c1)->growth_stats().splits, 10u);
  for (const uint64_t k : keys) {
    const std::optional<uint64_t> want = k + 1;
    ASSERT_EQ(*(*stale)->Get(k, map->HomeOf(k) == 1 ? Path::kAuto : Path::kRemote), want) << k;
    ASSERT_EQ(*(*c0)->Get(k, map->HomeOf(k) == 0 ? Path::kLoopback : Path::kAuto), want) << k;
    ASSERT_EQ(*(*c1)->Get(k), want) << k;
  }
  EXPECT_GT((*stale)->growth_stats().refreshes, 0u);
  EXPECT_EQ(*(*c0)->Size(0) + *(*c0)->Size(1), n);
  EXPECT_EQ(*(*stale)->Size(0) + *(*stale)->Size(1), n);
  // Erase half (every path), overwrite the rest; the model still holds.
  for (size_t i = 0; i < n; ++i) {
    const uint64_t k = keys[i];
    auto& c = i % 3 == 0 ? *c0 : *c1;
    if (i % 2) {
      ASSERT_EQ(*c->Erase(k), std::optional<uint64_t>(k + 1));
    } else {
      ASSERT_EQ(*c->Put(k, k + 2), std::optional<uint64_t>(k + 1));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const std::optional<uint64_t> want = i % 2 ? std::nullopt : std::optional<uint64_t>(keys[i] + 2);
    ASSERT_EQ(*(*stale)->Get(keys[i]), want);
  }
}

// When the pool is used up, a put that needs a split is ResourceExhausted,
// says how to raise the limit, and loses nothing.
TEST_P(HashMapTest, GrowthStopsAtTheReservedPool) {
  Env e = MakeEnv(GetParam(), 1);
  ASSERT_NE(e.session, nullptr);
  HashMapOptions o = Groups(3);    // 1 unit
  o.max_groups_per_node = 3 * 4;   // 4 segments of 1 unit
  auto map = HashMap<uint64_t>::Create(*e.cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->max_capacity(), 4 * map->capacity());
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  std::vector<uint64_t> stored;
  absl::Status full;
  for (uint64_t k = 1; k < 1000; ++k) {
    auto r = (*c)->Put(k, k, k % 2 ? Path::kLoopback : Path::kAuto);
    if (!r.ok()) {
      full = r.status();
      break;
    }
    stored.push_back(k);
  }
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("max_groups_per_node"), std::string::npos) << full;
  EXPECT_GT(stored.size(), map->capacity());
  EXPECT_LE(stored.size(), map->max_capacity());
  for (uint64_t k : stored) {
    ASSERT_EQ(*(*c)->Get(k), std::optional<uint64_t>(k));
    ASSERT_EQ(*(*c)->Get(k, Path::kLoopback), std::optional<uint64_t>(k));
  }
  EXPECT_EQ(*(*c)->Size(0), stored.size());
}

TEST_P(HashMapTest, BadInput) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  EXPECT_EQ(HashMap<uint64_t>::Create(*e.cluster, Groups(0)).status().code(),
            absl::StatusCode::kInvalidArgument);
  HashMapOptions bad_budget;
  bad_budget.budgets.local = 0;
  EXPECT_EQ(HashMap<uint64_t>::Create(*e.cluster, bad_budget).status().code(), absl::StatusCode::kInvalidArgument);
  // No local node, a node twice, a null node.
  EXPECT_EQ(HashMap<uint64_t>::Create(*e.cluster, {}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  rdma::Node* const twice[] = {&e.cluster->node(0), &e.cluster->node(0)};
  EXPECT_EQ(HashMap<uint64_t>::Create(*e.cluster, twice, {}).status().code(), absl::StatusCode::kInvalidArgument);
  rdma::Node* const null_node[] = {nullptr};
  EXPECT_EQ(HashMap<uint64_t>::Create(*e.cluster, null_node, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A part larger than the arena (growth reservation included).
  EXPECT_EQ(HashMap<uint64_t>::Create(*e.cluster, Groups(size_t{1} << 20)).status().code(),
            absl::StatusCode::kResourceExhausted);
  HashMapOptions big_pool = Groups(64);
  big_pool.max_groups_per_node = size_t{1} << 20;
  const absl::Status pool_status = HashMap<uint64_t>::Create(*e.cluster, big_pool).status();
  EXPECT_EQ(pool_status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(pool_status.message().find("max_groups_per_node"), std::string::npos) << pool_status;
  HashMapOptions shrink = Groups(64);
  shrink.max_groups_per_node = 32;  // below groups_per_node
  EXPECT_EQ(HashMap<uint64_t>::Create(*e.cluster, shrink).status().code(), absl::StatusCode::kInvalidArgument);

  auto map = HashMap<uint64_t>::Create(*e.cluster, Groups(4));
  ASSERT_TRUE(map.ok());
  // Paths that cannot be honoured: native for another node's key, remote for
  // one's own.
  {
    auto c0 = map->NewClient(*e.session);
    ASSERT_TRUE(c0.ok());
    EXPECT_EQ((*c0)->Get(KeysHomedAt(*map, 1, 1)[0], Path::kNative).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ((*c0)->Put(KeysHomedAt(*map, 0, 1)[0], 1, Path::kRemote).status().code(),
              absl::StatusCode::kInvalidArgument);
  }

  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Size(2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->Size(65535).status().code(), absl::StatusCode::kInvalidArgument);

  // No session: native works, the NIC paths say why they cannot.
  auto bare = map->NewClient(e.cluster->node(0));
  ASSERT_TRUE(bare.ok()) << bare.status();
  const uint64_t local = KeysHomedAt(*map, 0, 1)[0];
  const uint64_t remote = KeysHomedAt(*map, 1, 1)[0];
  EXPECT_EQ(*(*bare)->Put(local, 5), std::nullopt);
  EXPECT_EQ(*(*bare)->Get(local), std::optional<uint64_t>(5));
  EXPECT_EQ((*bare)->Get(local, Path::kLoopback).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*bare)->Put(remote, 1).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*bare)->Size(1).status().code(), absl::StatusCode::kFailedPrecondition);
}

// After rdma::Node::Shutdown the map fails fast with a clear error.
TEST_P(HashMapTest, ShutDownNodeFailsCleanly) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  auto map = HashMap<uint64_t>::Create(*e.cluster, Groups(4));
  ASSERT_TRUE(map.ok());
  auto s1 = e.cluster->NewSession(1);
  ASSERT_TRUE(s1.ok());
  auto c0 = map->NewClient(*e.session);
  auto c1 = map->NewClient(**s1);
  ASSERT_TRUE(c0.ok() && c1.ok());
  const uint64_t on0 = KeysHomedAt(*map, 0, 1)[0];
  const uint64_t on1 = KeysHomedAt(*map, 1, 1)[0];
  ASSERT_TRUE((*c0)->Put(on1, 1).ok());
  e.cluster->node(1).Shutdown();
  // Client on the shut-down node.
  EXPECT_EQ((*c1)->Get(on0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*c1)->Put(on1, 2).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(map->NewClient(e.cluster->node(1)).status().code(), absl::StatusCode::kUnavailable);
  // Key homed on the shut-down node.
  auto g = (*c0)->Get(on1);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kUnavailable) << g.status();
  EXPECT_NE(g.status().message().find("shut down"), std::string::npos);
  EXPECT_EQ((*c0)->Erase(on1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*c0)->Size(1).status().code(), absl::StatusCode::kUnavailable);
  // The live node's own keys still work.
  EXPECT_EQ(*(*c0)->Put(on0, 3), std::nullopt);
  EXPECT_EQ(*(*c0)->Get(on0), std::optional<uint64_t>(3));
}

// Multi-process style: each node creates only its own part (as two processes
// would); clients resolve the other parts through their sessions.
TEST_P(HashMapTest, LocalPartsAgreeOnLayout) {
  auto cluster = rdma::testing::MakeCluster(GetParam(), 2, 8 << 20);
  ASSERT_NE(cluster, nullptr);
  rdma::Node* const only0[] = {&cluster->node(0)};
  rdma::Node* const only1[] = {&cluster->node(1)};
  auto part0 = HashMap<uint64_t>::Create(*cluster, only0, Groups(8));
  auto part1 = HashMap<uint64_t>::Create(*cluster, only1, Groups(8));
  ASSERT_TRUE(part0.ok() && part1.ok());
  auto s0 = cluster->NewSession(0);
  auto s1 = cluster->NewSession(1);
  ASSERT_TRUE(s0.ok() && s1.ok());
  auto c0 = part0->NewClient(**s0);
  auto c1 = part1->NewClient(**s1);
  ASSERT_TRUE(c0.ok() && c1.ok());
  for (uint64_t k = 0; k < 30; ++k) ASSERT_EQ(*(*c0)->Put(k, k + 100), std::nullopt);
  for (uint64_t k = 0; k < 30; ++k) EXPECT_EQ(*(*c1)->Get(k), std::optional<uint64_t>(k + 100)) << k;
  EXPECT_EQ(*(*c1)->Size(0) + *(*c0)->Size(1), 30u);
  EXPECT_EQ(*(*c0)->Size(0), *(*c1)->Size(0));
}

// Per-operation costs, uncontended (docs/design.md §8): deterministic counts.
TEST_P(HashMapTest, OperationCosts) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  auto map = HashMap<Val24>::Create(*e.cluster, Groups(16));
  ASSERT_TRUE(map.ok());
  auto c = map->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  // Keys whose two windows are in two units (the common case), and one whose
  // windows are the two sides of one unit.
  auto key_at = [&](rdma::NodeId home, bool same_unit) {
    for (uint64_t k : KeysHomedAt(*map, home, 200)) {
      const auto u = map->CandidatesOf(k);
      if ((u[0] == u[1]) == same_unit) return k;
    }
    ADD_FAILURE() << "no key homed at " << home << " with same_unit " << same_unit;
    return uint64_t{0};
  };
  const uint64_t local = key_at(0, false);
  const uint64_t remote = key_at(1, false);
  const uint64_t remote_one_unit = key_at(1, true);
  auto cost = [](auto&& op) { return rdma::testing::CostOf(op); };
  auto print = [](const std::string& what, const rdma::OpCounters& o) { rdma::testing::PrintCost(what, o); };

  const Val24 v = MakeVal24(1);
  // Native: no NIC at all.
  for (auto [name, o] : {std::pair{"native put (new)", cost([&] { ASSERT_TRUE((*c)->Put(local, v).ok()); })},
                         std::pair{"native put (update)", cost([&] { ASSERT_TRUE((*c)->Put(local, v).ok()); })},
                         std::pair{"native get", cost([&] { ASSERT_TRUE((*c)->Get(local).ok()); })},
                         std::pair{"native insert (present)", cost([&] { ASSERT_TRUE((*c)->Insert(local, v).ok()); })},
                         std::pair{"native erase", cost([&] { ASSERT_TRUE((*c)->Erase(local).ok()); })}}) {
    print(name, o);
    EXPECT_EQ(o, rdma::OpCounters{}) << name;
  }
  // Remote and loopback get: one READ per window in one doorbell, one round
  // trip, hit or miss. Put: each unit locked with its window READ chained to
  // the acquire (CAS + READ + READ, 1 RT each), the WRITE posted, each unit
  // unlocked (CAS, 1 RT each).
  for (auto [name, key, path] : {std::tuple{"remote", remote, Path::kAuto}, std::tuple{"loopback", local, Path::kLoopback}}) {
    const rdma::OpCounters put_new = cost([&] { ASSERT_TRUE((*c)->Put(key, v, path).ok()); });
    const rdma::OpCounters put_upd = cost([&] { ASSERT_TRUE((*c)->Put(key, v, path).ok()); });
    const rdma::OpCounters get = cost([&] { ASSERT_TRUE((*c)->Get(key, path).ok()); });
    const rdma::OpCounters contains = cost([&] { ASSERT_TRUE((*c)->Contains(key, path).ok()); });
    const rdma::OpCounters ins = cost([&] { ASSERT_TRUE((*c)->Insert(key, v, path).ok()); });
    const rdma::OpCounters erase = cost([&] { ASSERT_TRUE((*c)->Erase(key, path).ok()); });
    const rdma::OpCounters get_absent = cost([&] { ASSERT_TRUE((*c)->Get(key, path).ok()); });
    for (auto [what, o] : {std::pair{"get", get}, std::pair{"get (absent)", get_absent},
                           std::pair{"contains", contains}}) {
      print((std::string(name) + " " + what).c_str(), o);
      EXPECT_EQ(o.nic_ops, 2u) << name << " " << what;
      EXPECT_EQ(o.round_trips, 1u) << name << " " << what;
      EXPECT_EQ(o.doorbells, 1u) << name << " " << what;
      EXPECT_EQ(o.bytes, 2 * 16 * HashMap<Val24>::kSlotBytes) << name << " " << what;
    }
    for (auto [what, o] : {std::pair{"put (new)", put_new}, std::pair{"put (update)", put_upd},
                           std::pair{"erase", erase}}) {
      print((std::string(name) + " " + what).c_str(), o);
      EXPECT_EQ(o.nic_ops, 9u) << name << " " << what;  // 2 x (CAS+READ+READ), WRITE, 2 x CAS
      EXPECT_EQ(o.round_trips, 4u) << name << " " << what;
      EXPECT_EQ(o.doorbells, 5u) << name << " " << what;
    }
    print((std::string(name) + " insert (present)").c_str(), ins);
    EXPECT_EQ(ins.nic_ops, 8u);
    EXPECT_EQ(ins.round_trips, 4u);
  }
  // Both windows in one unit: one lock, whose acquire READs both windows.
  {
    const rdma::OpCounters put = cost([&] { ASSERT_TRUE((*c)->Put(remote_one_unit, v).ok()); });
    const rdma::OpCounters get = cost([&] { ASSERT_TRUE((*c)->Get(remote_one_unit).ok()); });
    print("remote put (windows in one unit)", put);
    print("remote get (windows in one unit)", get);
    EXPECT_EQ(put.nic_ops, 6u);  // CAS+READ+READ+READ, WRITE, CAS
    EXPECT_EQ(put.round_trips, 2u);
    EXPECT_EQ(get.nic_ops, 2u);
    EXPECT_EQ(get.round_trips, 1u);
  }
  // 56-byte values: the 80-byte slot is not inlined, so the WRITE is waited for.
  auto big = HashMap<Val56>::Create(*e.cluster, Groups(16));
  ASSERT_TRUE(big.ok());
  auto cb = big->NewClient(*e.session);
  ASSERT_TRUE(cb.ok());
  uint64_t rb = 0;
  for (uint64_t k : KeysHomedAt(*big, 1, 200)) {
    if (big->CandidatesOf(k)[0] != big->CandidatesOf(k)[1]) {
      rb = k;
      break;
    }
  }
  const rdma::OpCounters big_put = cost([&] { ASSERT_TRUE((*cb)->Put(rb, MakeVal56(3)).ok()); });
  const rdma::OpCounters big_get = cost([&] { ASSERT_TRUE((*cb)->Get(rb).ok()); });
  print("remote put 56-byte value", big_put);
  print("remote get 56-byte value", big_get);
  EXPECT_EQ(big_put.nic_ops, 9u);
  EXPECT_EQ(big_put.round_trips, 5u);
  EXPECT_EQ(big_get.nic_ops, 2u);
  EXPECT_EQ(big_get.round_trips, 1u);
}

// Start-up refuses a device without RDMA atomics (soft NIC configured like an
// ibv device reporting atomic_cap NONE) instead of failing on the first remote
// lock.
TEST(HashMapAtomics, CreateRefusesADeviceWithoutRdmaAtomics) {
  auto cluster = rdma::testing::MakeCluster("soft", 2);
  ASSERT_NE(cluster, nullptr);
  rdma::soft::AsSoftDevice(cluster->node(1).device())->SetAtomicsSupported(false);
  auto map = HashMap<uint64_t>::Create(*cluster, Groups(4));
  ASSERT_EQ(map.status().code(), absl::StatusCode::kFailedPrecondition) << map.status();
  EXPECT_NE(map.status().message().find("device soft1"), std::string::npos) << map.status();
  EXPECT_NE(map.status().message().find("atomic_cap=NONE"), std::string::npos) << map.status();
  rdma::Node* const only1[] = {&cluster->node(1)};
  auto part = HashMap<uint64_t>::Create(*cluster, only1, Groups(4));
  EXPECT_EQ(part.status().code(), absl::StatusCode::kFailedPrecondition) << part.status();
  // Node 0's device has atomics, so its own part is fine.
  rdma::Node* const only0[] = {&cluster->node(0)};
  auto ok = HashMap<uint64_t>::Create(*cluster, only0, Groups(4));
  ASSERT_TRUE(ok.ok()) << ok.status();
}

INSTANTIATE_TEST_SUITE_P(Backends, HashMapTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace structures
