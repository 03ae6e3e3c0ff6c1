// The coordinator's rendezvous (rdma/bootstrap/coord_bootstrap.h) on a real
// ZooKeeper server: collectives in threads, a duplicate rank, a missing
// rank, an abort, and the environment's errors.
#include "rdma/bootstrap/coord_bootstrap.h"

#include <unistd.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "testing/zk_server.h"

namespace rdma::bootstrap {
namespace {

using namespace std::chrono_literals;
using rdmads_testing::ZkServer;

// Unique on a server the suite's configurations share (a sandbox's pid is not).
std::string Job(const std::string& name) { return absl::StrCat(name, "-", getpid(), "-", std::random_device{}()); }

TEST(CoordBootstrapTest, EveryRankGetsEveryBlobInEveryRound) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const int kSize = 4;
  const std::string job = Job("gather");
  std::vector<std::thread> ts;
  std::vector<std::string> errors(kSize);
  for (int r = 0; r < kSize; ++r) {
    ts.emplace_back([&, r] {
      auto b = CreateCoordBootstrap(CoordConfig{*zk, job, r, kSize}, BootstrapOptions{30'000ms});
      if (!b.ok()) {
        errors[r] = b.status().ToString();
        return;
      }
      EXPECT_EQ((*b)->kind(), "coordinator");
      for (int round = 0; round < 3; ++round) {
        auto all = (*b)->AllGather(absl::StrCat("rank ", r, " round ", round));
        if (!all.ok()) {
          errors[r] = all.status().ToString();
          return;
        }
        for (int q = 0; q < kSize; ++q) EXPECT_EQ((*all)[q], absl::StrCat("rank ", q, " round ", round));
        if (absl::Status s = (*b)->Barrier(); !s.ok()) errors[r] = s.ToString();
      }
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < kSize; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
}

TEST(CoordBootstrapTest, ASecondProcessOfARankIsRefusedNamingTheHolder) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const std::string job = Job("dup");
  auto first = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2}, BootstrapOptions{30'000ms});
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2}, BootstrapOptions{3000ms});
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_NE(second.status().message().find("two processes were started as rank 1"), std::string::npos)
      << second.status();
  // Once the first is gone (its session closed), the rank is free again.
  first->reset();
  auto third = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2}, BootstrapOptions{30'000ms});
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(CoordBootstrapTest, AMissingRankIsABoundedErrorNamingIt) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  auto b = CreateCoordBootstrap(CoordConfig{*zk, Job("missing"), 0, 3}, BootstrapOptions{3000ms});
  ASSERT_TRUE(b.ok()) << b.status();
  const auto t0 = std::chrono::steady_clock::now();
  auto all = (*b)->AllGather("x");
  EXPECT_TRUE(absl::IsDeadlineExceeded(all.status())) << all.status();
  EXPECT_NE(all.status().message().find("misses rank(s) 1, 2"), std::string::npos) << all.status();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  // A failed collective leaves it failed.
  EXPECT_TRUE(absl::IsFailedPrecondition((*b)->Barrier()));
}

TEST(CoordBootstrapTest, NoServerIsABoundedError) {
  const auto t0 = std::chrono::steady_clock::now();
  auto b = CreateCoordBootstrap(CoordConfig{"127.0.0.1:1", "none", 0, 1}, BootstrapOptions{500ms});
  EXPECT_TRUE(absl::IsUnavailable(b.status())) << b.status();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(CoordBootstrapTest, EnvironmentErrorsSayWhatToSet) {
  std::map<std::string, std::string> env;
  auto lookup = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  env["RDMADS_COORDINATOR"] = "127.0.0.1:2181";
  EXPECT_NE(CoordConfigFromEnv(lookup).status().message().find("RDMADS_NODES"), std::string::npos);
  env["RDMADS_NODES"] = "3";
  EXPECT_NE(CoordConfigFromEnv(lookup).status().message().find("RDMADS_NODE_ID is not set"), std::string::npos);
  env["RDMADS_NODE_ID"] = "3";
  EXPECT_TRUE(absl::IsOutOfRange(CoordConfigFromEnv(lookup).status()));
  env["RDMADS_NODE_ID"] = "x";
  EXPECT_TRUE(absl::IsInvalidArgument(CoordConfigFromEnv(lookup).status()));
  env["RDMADS_NODE_ID"] = "2";
  env["RDMADS_CLUSTER"] = "a/b";
  EXPECT_TRUE(absl::IsInvalidArgument(CoordConfigFromEnv(lookup).status()));
  env["RDMADS_CLUSTER"] = "svc";
  auto c = CoordConfigFromEnv(lookup);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->size, 3);
  EXPECT_EQ(c->job, "svc");
}

}  // namespace
}  // namespace rdma::bootstrap
