// Runs examples/service (README.md, "Use it in your service") as this
// process's rank: under `mpirun -np 3` in the Soft-RoCE guest
// (tests/verbs/run_guest_tests.sh) each rank's run reads the next rank's
// login across processes; anywhere else it is a one-process job on the soft
// NIC (no launcher, no coordinator).

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace {

std::string Here() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ".";
  std::string self(buf, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/'));
}

bool UnderALauncher() {
  return std::getenv("PMIX_NAMESPACE") != nullptr || std::getenv("RDMADS_NODE_ID") != nullptr;
}

TEST(ServiceExample, EveryRankReadsTheNextRanksLogin) {
  std::string env;
  int rank = 0, size = 1;
  if (UnderALauncher()) {
    for (const char* v : {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "RDMADS_NODE_ID"}) {
      if (const char* s = std::getenv(v)) {
        rank = std::atoi(s);
        break;
      }
    }
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_SIZE"}) {
      if (const char* s = std::getenv(v)) {
        size = std::atoi(s);
        break;
      }
    }
  } else {
    // A one-process job: nothing to meet.
    env = absl::StrCat("RDMADS_FABRIC=soft RDMADS_CLUSTER=service-test-", getpid(), " ");
  }
  const std::string cmd = absl::StrCat(env, "timeout -k 5 120 ", Here(), "/service 2>&1");
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr) << cmd;
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), p) != nullptr) out += buf;
  const int status = pclose(p);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  EXPECT_EQ(out, absl::StrCat("rank ", rank, " read rank ", (rank + 1) % size, "'s login\n"));
}

}  // namespace
