// A NIC operation that fails once (an error completion: the QP goes to the
// error state) does not break a structure client's path to that home for
// good: its next operation reconnects the QP first (StructureClient::Route,
// Session::Repair) and works. The soft NIC's fault injection fails the first
// operation the client's node initiates.
#include <cstdint>
#include <memory>
#include <optional>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"
#include "structures/hash_map/hash_map.h"
#include "structures/queue/queue.h"
#include "structures/skiplist/skiplist.h"

namespace structures {
namespace {

std::unique_ptr<rdma::Cluster> TwoNodes() {
  rdma::ClusterOptions o;
  o.named_bytes = 0;
  o.num_nodes = 2;
  o.node.arena_bytes = size_t{64} << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  auto c = rdma::Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return std::move(*c);
}

void FailNextOperationOf(rdma::Cluster& c, rdma::NodeId node) {
  rdma::soft::AsSoftDevice(c.node(node).device())->faults().FailNthOperation(1);
}

TEST(TransientError, AHashMapClientsNextOperationReconnects) {
  auto cluster = TwoNodes();
  HashMapOptions o;
  o.groups_per_node = 64;
  auto map = HashMap<uint64_t>::Create(*cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  auto s1 = std::move(*cluster->NewSession(1));
  auto made = map->NewClient(*s1);
  ASSERT_TRUE(made.ok()) << made.status();
  auto client = std::move(*made);
  uint64_t key = 1;
  while (map->HomeOf(key) != 0) ++key;
  ASSERT_TRUE(client->Put(key, 7).ok());
  FailNextOperationOf(*cluster, 1);
  EXPECT_FALSE(client->Get(key).ok()) << "the injected failure did not hit";
  EXPECT_TRUE(s1->broken(0));
  auto again = client->Get(key);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, std::optional<uint64_t>(7));
  EXPECT_FALSE(s1->broken(0));
  EXPECT_TRUE(client->Put(key, 8).ok());
  EXPECT_EQ(*client->Get(key), std::optional<uint64_t>(8));
}

TEST(TransientError, AnOrderedMapClientsNextOperationReconnects) {
  auto cluster = TwoNodes();
  auto map = SkipList<uint64_t>::Create(*cluster, SkipListOptions{});
  ASSERT_TRUE(map.ok()) << map.status();
  auto s1 = std::move(*cluster->NewSession(1));
  auto made = map->NewClient(*s1);
  ASSERT_TRUE(made.ok()) << made.status();
  auto client = std::move(*made);
  uint64_t key = 1;
  while (map->HomeOf(key) != 0) ++key;
  ASSERT_TRUE(client->Insert(key, 7).ok());
  FailNextOperationOf(*cluster, 1);
  EXPECT_FALSE(client->Get(key).ok()) << "the injected failure did not hit";
  auto again = client->Get(key);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, std::optional<uint64_t>(7));
}

TEST(TransientError, AQueueClientsNextOperationReconnects) {
  auto cluster = TwoNodes();
  auto q = Queue<uint64_t>::Create(*cluster, QueueOptions{});
  ASSERT_TRUE(q.ok()) << q.status();
  auto s1 = std::move(*cluster->NewSession(1));
  auto made = q->NewClient(*s1);
  ASSERT_TRUE(made.ok()) << made.status();
  auto client = std::move(*made);
  FailNextOperationOf(*cluster, 1);
  EXPECT_FALSE(client->Enqueue(0, 5).ok()) << "the injected failure did not hit";
  auto in = client->Enqueue(0, 6);
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_TRUE(*in);
  auto out = client->Dequeue(0);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->has_value());
  // 5 may or may not have landed before its chain failed; 6 did.
  const uint64_t first = **out;
  EXPECT_TRUE(first == 5 || first == 6) << first;
  if (first == 5) EXPECT_EQ(**client->Dequeue(0), 6u);
}

}  // namespace
}  // namespace structures
