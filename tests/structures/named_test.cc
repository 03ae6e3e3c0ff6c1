// Structures found by name (structures/common/catalogue.h) in an in-process
// cluster, on every backend under test: opening a name again in any order
// gives the same structure, a name under another identity is refused, a full
// catalogue or named region says so, and racing creators make one structure.
// tests/structures/named_multi_process_test.cc does the same across
// processes.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "structures/hash_map/hash_map.h"
#include "structures/queue/queue.h"
#include "structures/skiplist/skiplist.h"
#include "testing/backends.h"

namespace {

using structures::HashMap;
using structures::HashMapOptions;
using structures::Path;
using structures::Queue;
using structures::QueueOptions;
using structures::SkipList;
using structures::SkipListOptions;

struct Row {
  uint64_t a, b;
};

HashMapOptions Groups(size_t groups_per_node) {
  HashMapOptions o;
  o.groups_per_node = groups_per_node;
  return o;
}

class NamedTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::unique_ptr<rdma::Cluster> Make(int nodes, size_t named_bytes = size_t{8} << 20) {
    rdma::ClusterOptions o;
    o.num_nodes = nodes;
    o.node.arena_bytes = size_t{4} << 20;
    o.named_bytes = named_bytes;
    auto kind = rdma::ParseFabricKind(GetParam());
    EXPECT_TRUE(kind.ok()) << kind.status();
    o.fabric.kind = kind.value_or(rdma::FabricKind::kSoft);
    auto c = rdma::Cluster::Create(o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  static SkipListOptions SmallList() {
    SkipListOptions o;
    o.part_bytes = size_t{256} << 10;
    return o;
  }
};

TEST_P(NamedTest, EveryOpenOfANameInAnyOrderIsOneStructure) {
  auto c = Make(3);
  ASSERT_NE(c, nullptr);
  // First the map, then the queue, then the list, from node 0's thread.
  auto t0 = c->ThisThread(0);
  ASSERT_TRUE(t0.ok()) << t0.status();
  auto map = HashMap<Row>::Open(*c, "sessions");
  ASSERT_TRUE(map.ok()) << map.status();
  auto queue = Queue<uint64_t>::Open(*c, "jobs");
  ASSERT_TRUE(queue.ok()) << queue.status();
  auto list = SkipList<uint64_t>::Open(*c, "index", SmallList());
  ASSERT_TRUE(list.ok()) << list.status();
  auto m0 = map->NewClient(**t0);
  auto q0 = queue->NewClient(**t0);
  auto l0 = list->NewClient(**t0);
  ASSERT_TRUE(m0.ok() && q0.ok() && l0.ok());
  for (uint64_t k = 0; k < 60; ++k) {
    ASSERT_TRUE((*m0)->Put(k, {k, k + 1}).ok());
    ASSERT_TRUE((*l0)->Insert(k * 7, k).ok());
  }
  for (uint64_t v = 1; v <= 5; ++v) ASSERT_TRUE((*q0)->Enqueue(static_cast<rdma::NodeId>(v % 3), v).ok());

  // The reverse order, from node 2's thread: the same parts, every key there.
  std::thread other([&] {
    auto t2 = c->ThisThread(2);
    ASSERT_TRUE(t2.ok()) << t2.status();
    auto list2 = SkipList<uint64_t>::Open(*c, "index", SmallList());
    ASSERT_TRUE(list2.ok()) << list2.status();
    auto queue2 = Queue<uint64_t>::Open(*c, "jobs");
    ASSERT_TRUE(queue2.ok()) << queue2.status();
    auto map2 = HashMap<Row>::Open(*c, "sessions");
    ASSERT_TRUE(map2.ok()) << map2.status();
    for (rdma::NodeId n = 0; n < 3; ++n) EXPECT_EQ(map2->PartBase(n), map->PartBase(n));
    auto m2 = map2->NewClient(**t2);
    auto q2 = queue2->NewClient(**t2);
    auto l2 = list2->NewClient(**t2);
    ASSERT_TRUE(m2.ok() && q2.ok() && l2.ok());
    for (uint64_t k = 0; k < 60; ++k) {
      auto v = (*m2)->Get(k);
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_TRUE(v->has_value()) << "key " << k;
      EXPECT_EQ((*v)->b, k + 1);
      auto w = (*l2)->Get(k * 7);
      ASSERT_TRUE(w.ok()) << w.status();
      ASSERT_TRUE(w->has_value()) << "list key " << k * 7;
      EXPECT_EQ(**w, k);
    }
    size_t dequeued = 0;
    for (rdma::NodeId n = 0; n < 3; ++n) {
      for (;;) {
        auto v = (*q2)->Dequeue(n);
        ASSERT_TRUE(v.ok()) << v.status();
        if (!v->has_value()) break;
        ++dequeued;
      }
    }
    EXPECT_EQ(dequeued, 5u);
  });
  other.join();
}

TEST_P(NamedTest, ANameUnderAnotherIdentityIsRefusedNamingBoth) {
  auto c = Make(2);
  ASSERT_NE(c, nullptr);
  HashMapOptions small;
  small.groups_per_node = 256;
  ASSERT_TRUE(HashMap<Row>::Open(*c, "sessions", small).ok());

  auto kind = Queue<Row>::Open(*c, "sessions");
  EXPECT_EQ(kind.status().code(), absl::StatusCode::kFailedPrecondition) << kind.status();
  EXPECT_NE(kind.status().message().find("exists as a hash map of 16-byte values"), std::string::npos)
      << kind.status();
  EXPECT_NE(kind.status().message().find("asked for a queue of 16-byte values"), std::string::npos) << kind.status();

  auto value = HashMap<uint64_t>::Open(*c, "sessions", small);
  EXPECT_EQ(value.status().code(), absl::StatusCode::kFailedPrecondition) << value.status();
  EXPECT_NE(value.status().message().find("of 8-byte values"), std::string::npos) << value.status();

  HashMapOptions bigger = small;
  bigger.groups_per_node = 512;
  auto options = HashMap<Row>::Open(*c, "sessions", bigger);
  EXPECT_EQ(options.status().code(), absl::StatusCode::kFailedPrecondition) << options.status();
  EXPECT_NE(options.status().message().find("groups_per_node=256"), std::string::npos) << options.status();
  EXPECT_NE(options.status().message().find("groups_per_node=512"), std::string::npos) << options.status();

  // Options that only change this process's behaviour are not identity.
  QueueOptions q;
  ASSERT_TRUE(Queue<uint64_t>::Open(*c, "jobs", q).ok());
  q.lock_timeout = std::chrono::seconds(5);
  EXPECT_TRUE(Queue<uint64_t>::Open(*c, "jobs", q).ok());

  // The refused opens left the structure as it was.
  EXPECT_TRUE(HashMap<Row>::Open(*c, "sessions", small).ok());
}

TEST_P(NamedTest, BadNamesAreInvalidArguments) {
  auto c = Make(1);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(HashMap<Row>::Open(*c, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HashMap<Row>::Open(*c, std::string(48, 'x')).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(HashMap<Row>::Open(*c, std::string(47, 'x'), Groups(16)).ok());
}

TEST_P(NamedTest, AFullCatalogueSaysHowManyNamesItHolds) {
  auto c = Make(2);
  ASSERT_NE(c, nullptr);
  QueueOptions tiny;
  tiny.capacity = 2;
  for (int i = 0; i < structures::Catalogue::kEntries; ++i) {
    auto q = Queue<uint64_t>::Open(*c, absl::StrCat("q", i), tiny);
    ASSERT_TRUE(q.ok()) << i << ": " << q.status();
  }
  auto full = Queue<uint64_t>::Open(*c, "one-too-many", tiny);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted) << full.status();
  EXPECT_NE(full.status().message().find(absl::StrCat("all ", structures::Catalogue::kEntries, " names")),
            std::string::npos)
      << full.status();
  // Every name is still there.
  EXPECT_TRUE(Queue<uint64_t>::Open(*c, "q0", tiny).ok());
  EXPECT_TRUE(Queue<uint64_t>::Open(*c, absl::StrCat("q", structures::Catalogue::kEntries - 1), tiny).ok());
}

TEST_P(NamedTest, AFullNamedRegionSaysItsSize) {
  auto c = Make(2, /*named_bytes=*/size_t{1} << 20);
  ASSERT_NE(c, nullptr);
  SkipListOptions big;
  big.part_bytes = size_t{2} << 20;
  auto list = SkipList<uint64_t>::Open(*c, "too-big", big);
  EXPECT_EQ(list.status().code(), absl::StatusCode::kResourceExhausted) << list.status();
  EXPECT_NE(list.status().message().find("region of 1048576 bytes"), std::string::npos) << list.status();
  // Nothing was taken: a structure that fits still opens.
  EXPECT_TRUE(SkipList<uint64_t>::Open(*c, "fits", SmallList()).ok());
}

TEST_P(NamedTest, RacingCreatorsMakeOneStructure) {
  constexpr int kNodes = 3;
  constexpr int kThreadsPerNode = 2;
  auto c = Make(kNodes);
  ASSERT_NE(c, nullptr);
  for (int round = 0; round < 5; ++round) {
    const std::string name = absl::StrCat("race", round);
    std::atomic<int> ready{0};
    std::vector<rdma::RemotePtr> bases(kNodes * kThreadsPerNode);
    std::vector<std::thread> threads;
    for (int i = 0; i < kNodes * kThreadsPerNode; ++i) {
      threads.emplace_back([&, i] {
        auto t = c->ThisThread(static_cast<rdma::NodeId>(i % kNodes));
        ASSERT_TRUE(t.ok()) << t.status();
        ready.fetch_add(1);
        while (ready.load() < kNodes * kThreadsPerNode) std::this_thread::yield();
        auto map = HashMap<uint64_t>::Open(*c, name, Groups(64));
        ASSERT_TRUE(map.ok()) << map.status();
        bases[i] = map->PartBase(1);
        auto client = map->NewClient(**t);
        ASSERT_TRUE(client.ok()) << client.status();
        ASSERT_TRUE((*client)->Put(static_cast<uint64_t>(i), static_cast<uint64_t>(i) * 3).ok());
      });
    }
    for (auto& t : threads) t.join();
    for (const rdma::RemotePtr& b : bases) EXPECT_EQ(b, bases[0]) << name;
    auto map = HashMap<uint64_t>::Open(*c, name, Groups(64));
    ASSERT_TRUE(map.ok()) << map.status();
    auto t = c->ThisThread(0);
    ASSERT_TRUE(t.ok());
    auto client = map->NewClient(**t);
    ASSERT_TRUE(client.ok());
    for (int i = 0; i < kNodes * kThreadsPerNode; ++i) {
      auto v = (*client)->Get(static_cast<uint64_t>(i));
      ASSERT_TRUE(v.ok()) << v.status();
      ASSERT_TRUE(v->has_value()) << name << " key " << i;
      EXPECT_EQ(**v, static_cast<uint64_t>(i) * 3);
    }
  }
}

// Two creators that both found no entry without the lock and then wait for
// it make one structure: the second looks the name up again under the lock.
// The test holds the catalogue's lock until both wait for it; each creator's
// NIC operations show it took the locked path (a READ, at least one CAS, a
// READ under the lock).
TEST_P(NamedTest, CreatorsQueuedOnTheLockMakeOneStructure) {
  auto c = Make(3);
  ASSERT_NE(c, nullptr);
  auto holder_session = c->ThisThread(0);
  ASSERT_TRUE(holder_session.ok()) << holder_session.status();
  auto holder = locks::NewLockClient(locks::LockKind::kRdmaSpin, c->node(0), holder_session->get());
  ASSERT_TRUE(holder.ok()) << holder.status();
  const rdma::RemotePtr lock = c->node(0).reserved() + structures::Catalogue::kLockOffset;
  ASSERT_TRUE((*holder)->Lock(lock).ok());
  std::vector<rdma::RemotePtr> bases(2);
  std::vector<uint64_t> nic_ops(2);
  std::vector<std::thread> creators;
  for (int i = 0; i < 2; ++i) {
    creators.emplace_back([&, i] {
      auto t = c->ThisThread(static_cast<rdma::NodeId>(i + 1));
      ASSERT_TRUE(t.ok()) << t.status();
      const rdma::OpCounters before = rdma::ThisThreadCounters();
      auto map = HashMap<uint64_t>::Open(*c, "queued", Groups(64));
      nic_ops[i] = (rdma::ThisThreadCounters() - before).nic_ops;
      ASSERT_TRUE(map.ok()) << map.status();
      bases[i] = map->PartBase(0);
    });
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // both read the table and wait for the lock
  ASSERT_TRUE((*holder)->Unlock(lock).ok());
  for (auto& t : creators) t.join();
  for (int i = 0; i < 2; ++i) EXPECT_GE(nic_ops[i], 3u) << "creator " << i << " did not wait for the lock";
  EXPECT_FALSE(bases[0].is_null());
  EXPECT_EQ(bases[0], bases[1]);
}

// An entry whose checksum does not match (one being written as a lookup
// READs it, or left by a creation that failed) is never used: the name is
// created anew. Planted here by copying a whole entry and renaming it.
TEST_P(NamedTest, ATornEntryIsNeverUsed) {
  auto c = Make(2);
  ASSERT_NE(c, nullptr);
  auto whole = HashMap<uint64_t>::Open(*c, "whole", Groups(16));
  ASSERT_TRUE(whole.ok()) << whole.status();
  char* table = reinterpret_cast<char*>(c->node(0).reserved().address()) + structures::Catalogue::kEntriesOffset;
  char* planted = table + 5 * structures::Catalogue::kEntryBytes;  // an unused entry
  std::memcpy(planted, table, structures::Catalogue::kEntryBytes);
  std::memcpy(planted, "torn\0", 6);  // the checksum is now wrong
  auto torn = HashMap<uint64_t>::Open(*c, "torn", Groups(16));
  ASSERT_TRUE(torn.ok()) << torn.status();
  EXPECT_NE(torn->PartBase(0), whole->PartBase(0)) << "the torn entry's parts were attached to";
  auto again = HashMap<uint64_t>::Open(*c, "torn", Groups(16));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->PartBase(0), torn->PartBase(0));
}

// Every Queue object of one name in one process shares one native lease per
// ring side (structures/queue/native_lease.h): opening the name again while
// native and loopback threads work on a ring succeeds, and every value still
// comes out exactly once.
TEST_P(NamedTest, OneNameOpenedAgainWhileInUseSharesItsNativeLeases) {
  auto c = Make(2);
  ASSERT_NE(c, nullptr);
  QueueOptions o;
  o.capacity = 64;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0};
  std::vector<uint64_t> in_worker, out;  // what the worker enqueued and dequeued
  std::thread worker([&] {
    auto q = Queue<uint64_t>::Open(*c, "shared", o);
    ASSERT_TRUE(q.ok()) << q.status();
    auto client = q->NewClient(c->node(0));
    ASSERT_TRUE(client.ok()) << client.status();
    for (uint64_t v = 0; !stop.load(); ++v) {
      auto in = (*client)->Enqueue(0, v);
      ASSERT_TRUE(in.ok()) << in.status();
      if (*in) in_worker.push_back(v);  // else full for a moment: v was never in
      auto got = (*client)->Dequeue(0);
      ASSERT_TRUE(got.ok()) << got.status();
      if (got->has_value()) out.push_back(**got);
      done.fetch_add(1);
    }
  });
  // A loopback thread next to them: the native side hands each ring side
  // over to it and takes it back all the time, so a claim made through a
  // second lease (which the first's hand-over does not wait for) would
  // meet a NIC write of the same position.
  std::vector<uint64_t> in_nic, out_nic;
  std::thread nic([&] {
    auto q = Queue<uint64_t>::Open(*c, "shared", o);
    ASSERT_TRUE(q.ok()) << q.status();
    auto session = c->NewSession(0);
    ASSERT_TRUE(session.ok()) << session.status();
    auto client = q->NewClient(**session);
    ASSERT_TRUE(client.ok()) << client.status();
    for (uint64_t v = 0; !stop.load(); ++v) {
      auto in = (*client)->Enqueue(0, uint64_t{2} << 40 | v, Path::kLoopback);
      ASSERT_TRUE(in.ok()) << in.status();
      if (*in) in_nic.push_back(uint64_t{2} << 40 | v);
      auto got = (*client)->Dequeue(0, Path::kLoopback);
      ASSERT_TRUE(got.ok()) << got.status();
      if (got->has_value()) out_nic.push_back(**got);
    }
  });
  while (done.load() < 1000) std::this_thread::yield();
  std::vector<Queue<uint64_t>> again;
  for (int i = 0; i < 50; ++i) {
    auto q = Queue<uint64_t>::Open(*c, "shared", o);
    ASSERT_TRUE(q.ok()) << "open " << i << " while the ring is in use: " << q.status();
    again.push_back(std::move(*q));
  }
  // A client of the last object enqueues beside the first object's thread.
  auto client = again.back().NewClient(c->node(0));
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<uint64_t> mine;
  for (uint64_t v = 0; v < 2000; ++v) {
    auto in = (*client)->Enqueue(0, uint64_t{1} << 40 | v);
    ASSERT_TRUE(in.ok()) << in.status();
    if (*in) mine.push_back(uint64_t{1} << 40 | v);
  }
  stop.store(true);
  worker.join();
  nic.join();
  std::multiset<uint64_t> seen(out.begin(), out.end());
  seen.insert(out_nic.begin(), out_nic.end());
  for (;;) {
    auto got = (*client)->Dequeue(0);
    ASSERT_TRUE(got.ok()) << got.status();
    if (!got->has_value()) break;
    seen.insert(**got);
  }
  // Every value enqueued came out exactly once, and nothing else did.
  for (uint64_t v : mine) EXPECT_EQ(seen.count(v), 1u) << "value " << v;
  for (uint64_t v : in_worker) EXPECT_EQ(seen.count(v), 1u) << "value " << v;
  for (uint64_t v : in_nic) EXPECT_EQ(seen.count(v), 1u) << "value " << v;
  EXPECT_EQ(seen.size(), mine.size() + in_worker.size() + in_nic.size());
}

// The native leases of a named queue are the process's, not an Open's:
// clients made through two Opens of one name share one limit of 256 clients
// natively, and a client that goes away frees its place.
TEST_P(NamedTest, ClientsOfEveryOpenOfOneQueueShareItsNativeLeases) {
  auto c = Make(2);
  ASSERT_NE(c, nullptr);
  QueueOptions o;
  o.capacity = 512;
  auto q1 = Queue<uint64_t>::Open(*c, "limit", o);
  auto q2 = Queue<uint64_t>::Open(*c, "limit", o);
  ASSERT_TRUE(q1.ok() && q2.ok()) << q1.status() << " " << q2.status();
  std::vector<std::unique_ptr<Queue<uint64_t>::Client>> clients;
  for (uint64_t i = 0; i < 256; ++i) {
    auto client = (i % 2 == 0 ? *q1 : *q2).NewClient(c->node(0));
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE((*client)->Enqueue(0, i).value_or(false)) << "client " << i;  // joins the leases
    clients.push_back(std::move(*client));
  }
  auto extra = q2->NewClient(c->node(0));
  ASSERT_TRUE(extra.ok()) << extra.status();
  EXPECT_EQ((*extra)->Enqueue(0, 999).status().code(), absl::StatusCode::kResourceExhausted)
      << "a 257th native client of one queue in one process";
  clients.pop_back();
  auto again = q1->NewClient(c->node(0));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->Enqueue(0, 1000).value_or(false)) << "a freed place is reused";
}

INSTANTIATE_TEST_SUITE_P(Backends, NamedTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()));

}  // namespace
