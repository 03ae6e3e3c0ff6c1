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
#include "rdma/coord/membership.h"
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

// A process started for a rank of a job that runs (another rank's member
// is registered) rejoins when allowed (RDMADS_REJOIN): no rendezvous, and
// collectives are refused.
TEST(CoordBootstrapTest, AProcessOfARunningJobRejoinsWithoutCollectives) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const std::string job = Job("running");
  {
    auto fresh = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2}, BootstrapOptions{30'000ms});
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    EXPECT_FALSE((*fresh)->rejoining()) << "nothing of the job runs yet";
  }
  // The job runs: both ranks are members.
  std::vector<std::unique_ptr<coord::Membership>> members(2);
  std::vector<std::thread> ts;
  for (uint32_t r = 0; r < 2; ++r) {
    ts.emplace_back([&, r] {
      coord::MembershipOptions o;
      o.ensemble = *zk;
      o.job = job;
      o.size = 2;
      o.rank = r;
      o.incarnation = 0x100 + r;
      auto m = coord::Membership::Join(o);
      EXPECT_TRUE(m.ok()) << m.status();
      if (m.ok()) members[r] = *std::move(m);
    });
  }
  for (auto& t : ts) t.join();
  ASSERT_TRUE(members[0] != nullptr && members[1] != nullptr);
  // Rank 1 is started again (its old process is still a member: the
  // membership holds it back until that one is dropped, not the bootstrap).
  auto again = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2, RejoinMode::kAuto}, BootstrapOptions{3000ms});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE((*again)->rejoining());
  // Without leave to rejoin it is a fresh start's rendezvous (a job the same
  // processes re-open one after another).
  auto plain = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2}, BootstrapOptions{3000ms});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->rejoining());
  plain->reset();
  auto all = (*again)->AllGather("x");
  EXPECT_TRUE(absl::IsFailedPrecondition(all.status())) << all.status();
  EXPECT_NE(all.status().message().find("rejoined"), std::string::npos) << all.status();
  EXPECT_TRUE(absl::IsFailedPrecondition((*again)->Barrier()));
  // Once every member left, a new start is a fresh job again.
  members.clear();
  auto later = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2, RejoinMode::kAuto}, BootstrapOptions{30'000ms});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_FALSE((*later)->rejoining());
  later->reset();
  auto forced = CreateCoordBootstrap(CoordConfig{*zk, job, 1, 2, RejoinMode::kAlways}, BootstrapOptions{3000ms});
  EXPECT_TRUE(absl::IsFailedPrecondition(forced.status())) << forced.status();
  EXPECT_NE(forced.status().message().find("does not run"), std::string::npos) << forced.status();
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
