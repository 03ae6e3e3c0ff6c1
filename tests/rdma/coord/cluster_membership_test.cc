// A Cluster opened with a coordinator (soft NIC, a one-process job through
// the coordinator's rendezvous): a process that is dropped fences itself, so
// its native paths, its sessions and new sessions return Unavailable.
#include <unistd.h>

#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/bootstrap/coord_bootstrap.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"
#include "testing/zk_server.h"

namespace {

using namespace std::chrono_literals;
using rdmads_testing::ZkServer;

rdma::ClusterOptions Options(const std::string& zk) {
  rdma::ClusterOptions o;
  o.fabric.kind = rdma::FabricKind::kSoft;
  o.node.arena_bytes = size_t{8} << 20;
  o.named_bytes = size_t{4} << 20;
  o.coordinator = zk;
  o.coordinator_session = 4000ms;
  o.bootstrap.timeout = 30'000ms;
  return o;
}

TEST(ClusterMembershipTest, ADroppedProcessStopsServingNativeAndNicPaths) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const rdma::ClusterOptions o = Options(*zk);
  auto boot = rdma::bootstrap::CreateCoordBootstrap(
      {*zk, absl::StrCat("fence-", getpid(), "-", std::random_device{}()), 0, 1}, o.bootstrap);
  ASSERT_TRUE(boot.ok()) << boot.status();
  auto cluster = rdma::Cluster::Open(*std::move(boot), o);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  rdma::Cluster& c = **cluster;
  ASSERT_NE(c.membership(), nullptr);
  auto map = structures::HashMap<uint64_t>::Open(c, "fenced-map");
  ASSERT_TRUE(map.ok()) << map.status();
  auto thread = c.ThisThread();
  ASSERT_TRUE(thread.ok()) << thread.status();
  auto client = map->NewClient(**thread);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Put(1, 42).ok());
  auto v = (*client)->Get(1);
  ASSERT_TRUE(v.ok() && v->has_value() && **v == 42);
  ASSERT_TRUE(c.ServingStatus().ok());

  // Reported dead (here by itself): the manager drops it, it fences itself.
  const rdma::coord::Configuration now = c.membership()->current();
  const auto* me = now.Find(0);
  ASSERT_NE(me, nullptr);
  ASSERT_TRUE(c.membership()->ReportDeath(0, me->incarnation, "the test drops it").ok());
  for (int i = 0; i < 1000 && !c.membership()->fenced(); ++i) std::this_thread::sleep_for(10ms);
  ASSERT_TRUE(c.membership()->fenced());

  auto native = (*client)->Get(1, rdma::Path::kNative);
  EXPECT_TRUE(absl::IsUnavailable(native.status())) << native.status();
  auto write = (*client)->Put(2, 7);
  EXPECT_TRUE(absl::IsUnavailable(write.status())) << write.status();
  auto loopback = (*client)->Get(1, rdma::Path::kLoopback);
  EXPECT_TRUE(absl::IsUnavailable(loopback.status())) << loopback.status();
  EXPECT_TRUE(absl::IsUnavailable(c.ServingStatus()));
  EXPECT_TRUE(absl::IsUnavailable(c.PeerStatus(0)));
  auto another = c.ThisThread();
  EXPECT_TRUE(absl::IsUnavailable(another.status())) << another.status();
}

TEST(ClusterMembershipTest, AnUnreachableCoordinatorFailsOpenInBoundedTime) {
  rdma::ClusterOptions o = Options("127.0.0.1:1");
  // A job of this one process (no launcher, no coordinator to meet through).
  auto boot = rdma::bootstrap::CreateCoordBootstrap({"127.0.0.1:1", "x", 0, 1}, rdma::BootstrapOptions{1000ms});
  EXPECT_TRUE(absl::IsUnavailable(boot.status())) << boot.status();
  for (const char* v : {"PMIX_NAMESPACE", "RDMADS_COORDINATOR", "RDMADS_NODES", "RDMADS_NODE_ID"}) unsetenv(v);
  auto solo = rdma::Bootstrap::FromEnvironment(o.bootstrap);
  ASSERT_TRUE(solo.ok()) << solo.status();
  const auto t0 = std::chrono::steady_clock::now();
  auto cluster = rdma::Cluster::Open(*std::move(solo), o);
  EXPECT_TRUE(absl::IsUnavailable(cluster.status())) << cluster.status();
  EXPECT_NE(cluster.status().message().find("127.0.0.1:1"), std::string::npos) << cluster.status();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 15s);
}

}  // namespace
