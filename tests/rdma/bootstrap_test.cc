// Bootstrap::FromEnvironment's choice (rdma/bootstrap.h): PMIx under a
// launcher, the coordinator's rendezvous (tests/rdma/coord/coord_bootstrap_test
// runs it on a real server), else a job of this one process; and the errors
// that say what to set when the variables contradict each other.

#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdma/bootstrap.h"

namespace rdma {
namespace {

using ::testing::HasSubstr;

// FromEnvironment reads the real environment: set and restore around each use.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::map<std::string, std::optional<std::string>> vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      if (v) {
        setenv(k.c_str(), v->c_str(), 1);
      } else {
        unsetenv(k.c_str());
      }
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) {
        setenv(k.c_str(), v->c_str(), 1);
      } else {
        unsetenv(k.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

std::map<std::string, std::optional<std::string>> NoJob() {
  return {{"PMIX_NAMESPACE", std::nullopt},     {"PMIX_RANK", std::nullopt},  {"RDMADS_NODE_ID", std::nullopt},
          {"RDMADS_NODES", std::nullopt},       {"RDMADS_COORDINATOR", std::nullopt},
          {"RDMADS_PEERS", std::nullopt},       {"RDMADS_PEERS_FILE", std::nullopt},
          {"RDMADS_CLUSTER", std::nullopt},     {"RDMADS_REJOIN", std::nullopt}};
}

TEST(FromEnvironment, NothingSetIsAJobOfThisOneProcess) {
  ScopedEnv env(NoJob());
  auto b = Bootstrap::FromEnvironment();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->kind(), "single-process");
  EXPECT_EQ((*b)->rank(), 0);
  EXPECT_EQ((*b)->size(), 1);
  EXPECT_EQ((*b)->job(), "rdmads");
  auto all = (*b)->AllGather("me");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, std::vector<std::string>{"me"});
  EXPECT_TRUE((*b)->Barrier().ok());
  EXPECT_TRUE(absl::IsInvalidArgument((*b)->AllGather(std::string(Bootstrap::kMaxBlobBytes + 1, 'x')).status()));
}

TEST(FromEnvironment, OneProcessMaySayItsRankSizeAndName) {
  auto vars = NoJob();
  vars["RDMADS_NODE_ID"] = "0";
  vars["RDMADS_NODES"] = "1";
  vars["RDMADS_CLUSTER"] = "solo";
  ScopedEnv env(vars);
  auto b = Bootstrap::FromEnvironment();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->job(), "solo");
}

TEST(FromEnvironment, SeveralProcessesWithoutALauncherOrCoordinatorSayWhatToSet) {
  for (auto [nodes, id] : std::vector<std::pair<const char*, const char*>>{{"3", "1"}, {"1", "2"}}) {
    auto vars = NoJob();
    vars["RDMADS_NODES"] = nodes;
    vars["RDMADS_NODE_ID"] = id;
    ScopedEnv env(vars);
    auto b = Bootstrap::FromEnvironment();
    EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("RDMADS_COORDINATOR"));
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("mpirun"));
  }
}

TEST(FromEnvironment, APeerListIsRefusedNamingWhatReplacedIt) {
  for (const char* var : {"RDMADS_PEERS", "RDMADS_PEERS_FILE"}) {
    auto vars = NoJob();
    vars[var] = "127.0.0.1:7000";
    ScopedEnv env(vars);
    auto b = Bootstrap::FromEnvironment();
    EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("RDMADS_COORDINATOR"));
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("RDMADS_NODES"));
  }
}

TEST(FromEnvironment, TheCoordinatorNeedsTheJobsSize) {
  auto vars = NoJob();
  vars["RDMADS_COORDINATOR"] = "127.0.0.1:1";
  ScopedEnv env(vars);
  auto b = Bootstrap::FromEnvironment();
  EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("RDMADS_NODES"));
}

TEST(FromEnvironment, RejoinNeedsTheCoordinatorsStartAndAKnownMode) {
  {
    auto vars = NoJob();
    vars["RDMADS_REJOIN"] = "1";
    ScopedEnv env(vars);
    auto b = Bootstrap::FromEnvironment();
    EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("RDMADS_COORDINATOR"));
  }
  {
    auto vars = NoJob();
    vars["RDMADS_REJOIN"] = "1";
    vars["PMIX_NAMESPACE"] = "job";
    vars["PMIX_RANK"] = "0";
    vars["RDMADS_COORDINATOR"] = "127.0.0.1:1";
    ScopedEnv env(vars);
    auto b = Bootstrap::FromEnvironment();
    EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("launcher"));
  }
  {
    auto vars = NoJob();
    vars["RDMADS_REJOIN"] = "yes";
    vars["RDMADS_COORDINATOR"] = "127.0.0.1:1";
    vars["RDMADS_NODES"] = "2";
    vars["RDMADS_NODE_ID"] = "1";
    ScopedEnv env(vars);
    auto b = Bootstrap::FromEnvironment();
    EXPECT_TRUE(absl::IsInvalidArgument(b.status())) << b.status();
    EXPECT_THAT(std::string(b.status().message()), HasSubstr("RDMADS_REJOIN='yes'"));
  }
}

TEST(FromEnvironment, PmixNamespaceWithoutRank) {
  auto vars = NoJob();
  vars["PMIX_NAMESPACE"] = "job";
  ScopedEnv env(vars);
  auto b = Bootstrap::FromEnvironment();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("PMIX_RANK is not"));
}

}  // namespace
}  // namespace rdma
