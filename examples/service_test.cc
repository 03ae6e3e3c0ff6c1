// Runs examples/service (README.md, "Use it in your service") as this
// process's rank: under `mpirun -np 3` in the Soft-RoCE guest
// (tests/verbs/run_guest_tests.sh) each rank's run reads the next rank's
// login across processes; anywhere else it is a one-process job on the soft
// NIC, through the peer list on loopback.

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
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

// A loopback port nobody listens on now: bound to port 0, the kernel's pick.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
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
    // A one-process job: the peer list, on a port the kernel picked.
    const int port = FreePort();
    ASSERT_NE(port, 0) << "no free loopback port";
    env = absl::StrCat("RDMADS_FABRIC=soft RDMADS_NODE_ID=0 RDMADS_CLUSTER=service-test-", getpid(),
                       " RDMADS_PEERS=127.0.0.1:", port, " ");
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
