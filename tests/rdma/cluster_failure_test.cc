// Failures in an in-process cluster: the soft NIC's crash points stop a node
// between two work requests, the cluster declares it dead (PeerStatus), its
// later work requests land nowhere (the fence), and WatchDeaths runs a repair
// once per dead node (docs/design.md §5, "Failures and repair").

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"

namespace rdma {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<Cluster> MakeCluster(int n) {
  ClusterOptions o;
  o.num_nodes = n;
  o.fabric.kind = FabricKind::kSoft;
  o.named_bytes = 0;
  auto c = Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

soft::SoftDevice& Soft(Cluster& c, NodeId n) { return *soft::AsSoftDevice(c.node(n).device()); }

uint64_t Load(RemotePtr p) { return __atomic_load_n(reinterpret_cast<uint64_t*>(p.address()), __ATOMIC_ACQUIRE); }

// Waits until `pred` holds or `limit` passes.
template <typename Pred>
bool WaitFor(Pred pred, milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

TEST(ClusterFailureTest, CrashPointStopsTheNodeBetweenTwoWorkRequests) {
  for (uint64_t k = 0; k <= 3; ++k) {
    SCOPED_TRACE(k);
    auto cluster = MakeCluster(2);
    ASSERT_NE(cluster, nullptr);
    auto words = cluster->node(0).Allocate(64);
    ASSERT_TRUE(words.ok());
    auto s = cluster->ThisThread(1);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(cluster->PeerStatus(1).ok());
    Soft(*cluster, 1).faults().CrashAfterOperations(k);
    Batch b(**s, 0);
    uint64_t v[3] = {11, 22, 33};
    for (int i = 0; i < 3; ++i) b.Write(*words + 8 * i, &v[i], 8);
    absl::Status st = b.Execute();
    EXPECT_EQ(st.ok(), k >= 3) << st;
    for (uint64_t i = 0; i < 3; ++i) EXPECT_EQ(Load(*words + 8 * i), i < k ? v[i] : 0) << "word " << i;
    if (k < 3) {
      EXPECT_TRUE(absl::IsUnavailable(cluster->PeerStatus(1))) << cluster->PeerStatus(1);
      EXPECT_TRUE(cluster->PeerStatus(0).ok());
      // The fence: nothing the dead node posts later lands.
      (void)(*s)->Write64(*words + 24, 44);
      EXPECT_EQ(Load(*words + 24), 0u);
    } else {
      Soft(*cluster, 1).faults().DisarmCrash();
    }
  }
}

// The fence: a node is declared dead only once none of its work requests
// still runs. Node 2's WRITE to node 0 is held in the middle of its copy
// (node 0's copy hook) when node 2 is killed: the cluster must not declare
// it dead (a repair would then run while the WRITE still lands) until the
// copy is done, and then every word of it has landed.
TEST(ClusterFailureTest, ANodeIsDeclaredDeadOnlyAfterItsLastWorkRequestLanded) {
  auto cluster = MakeCluster(3);
  ASSERT_NE(cluster, nullptr);
  auto words = cluster->node(0).Allocate(64);
  ASSERT_TRUE(words.ok());
  auto s = cluster->ThisThread(2);
  ASSERT_TRUE(s.ok()) << s.status();
  std::atomic<bool> held{false}, release{false};
  Soft(*cluster, 0).faults().SetCopyHook([&](uint64_t word) {
    if (word != 3) return;
    held.store(true);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!release.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  std::thread writer([&] {
    uint64_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    (void)(*s)->Write(*words, v, sizeof v);
  });
  ASSERT_TRUE(WaitFor([&] { return held.load(); }, milliseconds(10'000))) << "the WRITE never reached its copy";
  std::thread killer([&] { Soft(*cluster, 2).Kill(); });
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_TRUE(cluster->PeerStatus(2).ok()) << "declared dead while its WRITE was still landing";
  release.store(true);
  killer.join();
  writer.join();
  Soft(*cluster, 0).faults().SetCopyHook(nullptr);
  EXPECT_FALSE(cluster->PeerStatus(2).ok());
  for (uint64_t i = 0; i < 8; ++i) EXPECT_EQ(Load(*words + 8 * i), i + 1) << "word " << i;
}

TEST(ClusterFailureTest, WatchRepairsEachDeadNodeOnce) {
  auto cluster = MakeCluster(3);
  ASSERT_NE(cluster, nullptr);
  std::mutex mu;
  std::vector<NodeId> seen;
  auto watch = cluster->WatchDeaths([&](NodeId d) {
    std::lock_guard<std::mutex> l(mu);
    seen.push_back(d);
  });
  auto count = [&] {
    std::lock_guard<std::mutex> l(mu);
    return seen.size();
  };
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(count(), 0u) << "no node died";
  const auto killed = std::chrono::steady_clock::now();
  Soft(*cluster, 2).Kill();
  ASSERT_TRUE(WaitFor([&] { return count() >= 1; }, milliseconds(10'000)));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, std::chrono::seconds(1));
  std::this_thread::sleep_for(milliseconds(30));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(seen, std::vector<NodeId>{2});
  }
  // A watch made after the death hears of it at once; a destroyed one no more.
  std::atomic<int> late{0};
  auto second = cluster->WatchDeaths([&](NodeId d) { late += d == 2 ? 1 : 100; });
  ASSERT_TRUE(WaitFor([&] { return late.load() >= 1; }, milliseconds(10'000)));
  watch.reset();
  Soft(*cluster, 1).Kill();
  ASSERT_TRUE(WaitFor([&] { return late.load() >= 101; }, milliseconds(10'000)));
  std::this_thread::sleep_for(milliseconds(30));
  EXPECT_EQ(late.load(), 101);
  EXPECT_EQ(count(), 1u);
}

}  // namespace
}  // namespace rdma
