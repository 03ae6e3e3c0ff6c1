// Structures found by name across processes: `mpirun -np 2` and `-np 3` in
// one Soft-RoCE guest (tests/verbs/run_guest_tests.sh), each process opening
// its cluster with rdma::Cluster::Open. Elsewhere the tests skip:
// tests/structures/named_test.cc covers the same in one process.
//
//  * AnyOrderGivesOneStructure: rank r opens the hash map, the ordered map
//    and the queue in an order rotated by r; every rank writes keys homed on
//    every node, and every rank reads every key back; every value enqueued
//    by any rank is dequeued exactly once.
//  * AnotherIdentityIsRefused: a name opened as another kind, value size or
//    options is FailedPrecondition on every rank, naming both.
//  * RacingCreatorsMakeOneStructure: every rank opens a new name at once;
//    all find their parts at one offset and see each other's keys.

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"
#include "structures/queue/queue.h"
#include "structures/skiplist/skiplist.h"

namespace structures {
namespace {

bool UnderALauncher() {
  return std::getenv("PMIX_NAMESPACE") != nullptr || std::getenv("RDMADS_NODE_ID") != nullptr;
}

class NamedMultiProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!UnderALauncher()) GTEST_SKIP() << "one node per process only (mpirun or a coordinator); see named_test";
    rdma::ClusterOptions o;
    o.node.arena_bytes = size_t{4} << 20;
    o.named_bytes = size_t{8} << 20;
    o.bootstrap.timeout = std::chrono::seconds(180);
    auto c = rdma::Cluster::Open(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
    auto t = cluster_->ThisThread();
    ASSERT_TRUE(t.ok()) << t.status();
    thread_ = std::move(*t);
  }
  void TearDown() override {
    if (cluster_ != nullptr) {
      EXPECT_TRUE(cluster_->Barrier().ok());  // nobody leaves while others still read
    }
    thread_.reset();
    cluster_.reset();
  }
  static SkipListOptions List() {
    SkipListOptions o;
    o.part_bytes = size_t{512} << 10;
    return o;
  }
  static HashMapOptions Map(size_t groups) {
    HashMapOptions o;
    o.groups_per_node = groups;
    return o;
  }

  std::unique_ptr<rdma::Cluster> cluster_;
  std::unique_ptr<rdma::Session> thread_;
};

TEST_F(NamedMultiProcessTest, AnyOrderGivesOneStructure) {
  const int rank = cluster_->rank();
  const int n = cluster_->num_nodes();
  std::optional<HashMap<uint64_t>> map;
  std::optional<SkipList<uint64_t>> list;
  std::optional<Queue<uint64_t>> queue;
  for (int i = 0; i < 3; ++i) {
    switch ((i + rank) % 3) {
      case 0: {
        auto m = HashMap<uint64_t>::Open(*cluster_, "sessions", Map(256));
        ASSERT_TRUE(m.ok()) << m.status();
        map.emplace(std::move(*m));
        break;
      }
      case 1: {
        auto l = SkipList<uint64_t>::Open(*cluster_, "index", List());
        ASSERT_TRUE(l.ok()) << l.status();
        list.emplace(std::move(*l));
        break;
      }
      default: {
        auto q = Queue<uint64_t>::Open(*cluster_, "jobs");
        ASSERT_TRUE(q.ok()) << q.status();
        queue.emplace(std::move(*q));
      }
    }
  }
  auto m = map->NewClient(*thread_);
  auto l = list->NewClient(*thread_);
  auto q = queue->NewClient(*thread_);
  ASSERT_TRUE(m.ok() && l.ok() && q.ok());
  constexpr uint64_t kKeys = 200;  // per rank, homed on every node
  constexpr uint64_t kValues = 30;  // per rank, into every node's ring
  for (uint64_t k = 0; k < kKeys; ++k) {
    const uint64_t key = k * n + rank;
    ASSERT_TRUE((*m)->Put(key, key * 10).ok());
    ASSERT_TRUE((*l)->Insert(key * 0x9e3779b97f4a7c15ULL, key).ok());
  }
  for (uint64_t v = 0; v < kValues * n; ++v) {
    auto pushed = (*q)->Enqueue(static_cast<rdma::NodeId>(v % n), (uint64_t{1} + rank) << 32 | v);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    ASSERT_TRUE(*pushed) << "ring " << v % n << " full";
  }
  ASSERT_TRUE(cluster_->Barrier().ok());
  for (uint64_t key = 0; key < kKeys * n; ++key) {
    auto v = (*m)->Get(key);
    ASSERT_TRUE(v.ok()) << v.status();
    ASSERT_TRUE(v->has_value()) << "rank " << rank << " does not see key " << key;
    EXPECT_EQ(**v, key * 10);
    auto w = (*l)->Get(key * 0x9e3779b97f4a7c15ULL);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(w->has_value()) << "rank " << rank << " does not see ordered key " << key;
    EXPECT_EQ(**w, key);
  }
  // Each rank drains its own ring; rank 0 checks every value came out once.
  std::vector<uint64_t> mine;
  for (;;) {
    auto v = (*q)->Dequeue(cluster_->self());
    ASSERT_TRUE(v.ok()) << v.status();
    if (!v->has_value()) break;
    mine.push_back(**v);
  }
  EXPECT_EQ(mine.size(), kValues * n);
  std::string blob(reinterpret_cast<const char*>(mine.data()), mine.size() * 8);
  auto all = cluster_->bootstrap()->AllGather(blob);
  ASSERT_TRUE(all.ok()) << all.status();
  std::set<uint64_t> seen;
  for (const std::string& b : *all) {
    for (size_t i = 0; i + 8 <= b.size(); i += 8) {
      uint64_t v;
      std::memcpy(&v, b.data() + i, 8);
      EXPECT_TRUE(seen.insert(v).second) << "value " << v << " dequeued twice";
    }
  }
  EXPECT_EQ(seen.size(), kValues * n * n);
}

TEST_F(NamedMultiProcessTest, AnotherIdentityIsRefused) {
  ASSERT_TRUE(HashMap<uint64_t>::Open(*cluster_, "profiles", Map(128)).ok());
  ASSERT_TRUE(cluster_->Barrier().ok());
  auto kind = Queue<uint64_t>::Open(*cluster_, "profiles");
  EXPECT_EQ(kind.status().code(), absl::StatusCode::kFailedPrecondition) << kind.status();
  EXPECT_NE(kind.status().message().find("exists as a hash map"), std::string::npos) << kind.status();
  auto value = HashMap<std::array<uint64_t, 2>>::Open(*cluster_, "profiles", Map(128));
  EXPECT_EQ(value.status().code(), absl::StatusCode::kFailedPrecondition) << value.status();
  EXPECT_NE(value.status().message().find("asked for a hash map of 16-byte values"), std::string::npos)
      << value.status();
  auto options = HashMap<uint64_t>::Open(*cluster_, "profiles", Map(256));
  EXPECT_EQ(options.status().code(), absl::StatusCode::kFailedPrecondition) << options.status();
  EXPECT_NE(options.status().message().find("groups_per_node=128"), std::string::npos) << options.status();
}

TEST_F(NamedMultiProcessTest, RacingCreatorsMakeOneStructure) {
  const int n = cluster_->num_nodes();
  for (int round = 0; round < 5; ++round) {
    const std::string name = absl::StrCat("race", round);
    ASSERT_TRUE(cluster_->Barrier().ok());  // everyone opens at once
    auto map = HashMap<uint64_t>::Open(*cluster_, name, Map(64));
    ASSERT_TRUE(map.ok()) << map.status();
    const rdma::RemotePtr base = map->PartBase(cluster_->self());
    const uint64_t offset = base.address() - cluster_->node(cluster_->self()).arena_info().base;
    auto offsets = cluster_->bootstrap()->AllGather(absl::StrCat(offset));
    ASSERT_TRUE(offsets.ok()) << offsets.status();
    for (const std::string& o : *offsets) EXPECT_EQ(o, (*offsets)[0]) << name;
    auto client = map->NewClient(*thread_);
    ASSERT_TRUE(client.ok()) << client.status();
    for (int k = 0; k < 3 * n; ++k) {
      if (k % n == cluster_->rank()) {
        ASSERT_TRUE((*client)->Put(static_cast<uint64_t>(k), round).ok());
      }
    }
    ASSERT_TRUE(cluster_->Barrier().ok());
    for (int k = 0; k < 3 * n; ++k) {
      auto v = (*client)->Get(static_cast<uint64_t>(k));
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_TRUE(v->has_value()) << name << ": key " << k << " written by rank " << k % n;
      EXPECT_EQ(**v, static_cast<uint64_t>(round));
    }
  }
}

}  // namespace
}  // namespace structures
