// Agreed deaths on real verbs (the Soft-RoCE guest), with a ZooKeeper server
// in the guest and one process per node (cluster_probe):
//  * kill -9 under load, launcher-less (the coordinator's rendezvous) and
//    under `mpirun -np 4`: every survivor applies the same epoch without the
//    victim within 1 s of the kill, and its writes go on;
//  * a process paused past its session timeout and resumed: its next NIC
//    operation returns Unavailable, and no value it tried to write after it
//    was dropped is ever read.
// On a machine without an RDMA device it skips (fails under
// RDMADS_REQUIRE_VERBS=1).
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rdma/fabric.h"
#include "testing/probe_process.h"
#include "testing/zk_server.h"

namespace {

using namespace std::chrono_literals;
using rdmads_testing::ProbeProcess;
using rdmads_testing::ZkServer;

// Next to this binary (the guest runs it from bazel-bin), else in the
// runfiles (bazel test).
std::string Probe() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    if (access((dir + "/cluster_probe").c_str(), X_OK) == 0) return dir + "/cluster_probe";
  }
  return "tests/verbs/cluster_probe";
}
// Kill rounds per launcher (3 kills each): RDMADS_AGREED_KILL_ROUNDS, default 2.
int KillRounds() {
  const char* e = std::getenv("RDMADS_AGREED_KILL_ROUNDS");
  return e != nullptr ? std::max(1, std::atoi(e)) : 2;
}

int64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
std::vector<std::string> Words(const std::string& l) { return absl::StrSplit(l, ' ', absl::SkipEmpty()); }

std::unique_ptr<ZkServer>& Server() {
  static std::unique_ptr<ZkServer> s;
  return s;
}

class AgreedDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdma::FabricOptions o;
    o.kind = rdma::FabricKind::kVerbs;
    if (!rdma::OpenFabric(o).ok()) {
      const char* req = std::getenv("RDMADS_REQUIRE_VERBS");
      if (req != nullptr && std::string(req) == "1") FAIL() << "RDMADS_REQUIRE_VERBS=1 but no verbs device";
      GTEST_SKIP() << "no RDMA device here; run in the Soft-RoCE guest: tests/verbs/run_guest_tests.sh";
    }
    if (Server() == nullptr) {
      auto s = ZkServer::Start();
      ASSERT_TRUE(s.ok()) << s.status();
      Server() = *std::move(s);
    }
  }

  // One job of `n` processes: launcher-less (one child per rank) or one
  // mpirun child whose output carries every rank's lines.
  struct Job {
    std::vector<std::unique_ptr<ProbeProcess>> procs;
    std::map<int, pid_t> pid;
    ProbeProcess& of(int rank) { return *procs[procs.size() == 1 ? 0 : rank]; }
  };

  // Rank r's process of a launcher-less job of n.
  // `rejoin`: started again while the job runs (RDMADS_REJOIN=1).
  static std::unique_ptr<ProbeProcess> StartRank(int r, int n, int session_ms, const std::string& name,
                                                 bool rejoin = false) {
    return std::make_unique<ProbeProcess>(
        std::vector<std::string>{Probe(), std::to_string(session_ms)},
        std::vector<std::string>{"RDMADS_COORDINATOR=" + Server()->address(), "RDMADS_NODES=" + std::to_string(n),
                                 "RDMADS_NODE_ID=" + std::to_string(r), absl::StrCat("RDMADS_CLUSTER=", name, "-", getpid()),
                                 rejoin ? "RDMADS_REJOIN=1" : "RDMADS_REJOIN", "PMIX_NAMESPACE", "PMIX_RANK"});
  }

  Job Start(int n, bool mpirun, int session_ms, const std::string& name) {
    Job j;
    const std::string zk = Server()->address();
    if (mpirun) {
      j.procs.push_back(std::make_unique<ProbeProcess>(
          std::vector<std::string>{"mpirun", "--allow-run-as-root", "--oversubscribe", "--enable-recovery", "-np",
                                   std::to_string(n), "-x", "RDMADS_COORDINATOR=" + zk, Probe(),
                                   std::to_string(session_ms)},
          std::vector<std::string>{"RDMADS_NODES", "RDMADS_NODE_ID"}));
    } else {
      for (int r = 0; r < n; ++r) j.procs.push_back(StartRank(r, n, session_ms, name));
    }
    for (const auto& p : j.procs) EXPECT_TRUE(p->started()) << "cannot start " << Probe() << (mpirun ? " under mpirun" : "");
    for (int r = 0; r < n; ++r) {
      std::string line;
      const std::string want = absl::StrCat("pid ", r, " ");
      EXPECT_TRUE(j.of(r).WaitFor([&](const std::string& l) { return StartsWith(l, want); }, 120s, &line))
          << j.of(r).Transcript();
      if (line.size() > want.size()) j.pid[r] = std::stoi(line.substr(want.size()));
      const std::string ready = absl::StrCat("ready ", r);
      EXPECT_TRUE(j.of(r).WaitFor([&](const std::string& l) { return l == ready; }, 120s)) << j.of(r).Transcript();
    }
    return j;
  }

  // The first epoch line of `rank` at index >= from without `victim`:
  // (epoch, monotonic ns, members).
  struct Seen {
    uint64_t epoch = 0;
    int64_t at = 0;
    std::string members;
  };
  static bool DropSeen(Job& j, int rank, int victim, std::chrono::milliseconds t, Seen* out) {
    const std::string head = absl::StrCat("epoch ", rank, " ");
    std::string line;
    auto lacks = [&](const std::string& l) {
      if (!StartsWith(l, head)) return false;
      auto w = Words(l);
      return w.size() >= 4 && std::find(w.begin() + 4, w.end(), std::to_string(victim)) == w.end();
    };
    if (!j.of(rank).WaitFor(lacks, t, &line)) return false;
    auto w = Words(line);
    out->epoch = std::stoull(w[2]);
    out->at = std::stoll(w[3]);
    for (size_t i = 4; i < w.size(); ++i) absl::StrAppend(&out->members, w[i], " ");
    return true;
  }
  static uint64_t LastProgress(Job& j, int rank) {
    uint64_t p = 0;
    const std::string head = absl::StrCat("progress ", rank, " ");
    for (const std::string& l : j.of(rank).Lines()) {
      if (StartsWith(l, head)) p = std::stoull(l.substr(head.size()));
    }
    return p;
  }

  void KillThreeInTurn(bool mpirun, int round) {
    const int n = 4;
    Job j = Start(n, mpirun, 4000, absl::StrCat("kill", round));
    if (HasFailure()) return;
    std::vector<int> alive = {0, 1, 2, 3};
    const int keep = round % n;  // the manager is among the victims in some rounds
    std::vector<double> lat_ms;
    for (int victim : {(keep + 1) % n, (keep + 2) % n, (keep + 3) % n}) {
      std::erase(alive, victim);
      std::map<int, uint64_t> before;
      for (int s : alive) before[s] = LastProgress(j, s);
      const int64_t t_kill = MonoNs();
      kill(j.pid[victim], SIGKILL);
      std::map<uint64_t, std::string> views;
      for (int s : alive) {
        Seen seen;
        ASSERT_TRUE(DropSeen(j, s, victim, 30s, &seen)) << "rank " << s << " never dropped " << victim << "\n"
                                                         << j.of(s).Transcript();
        const double ms = (seen.at - t_kill) / 1e6;
        lat_ms.push_back(ms);
        EXPECT_LT(ms, 1000) << "rank " << s << " applied the epoch without rank " << victim << " " << ms
                            << " ms after the kill";
        auto [it, fresh] = views.emplace(seen.epoch, seen.members);
        if (!fresh) {
          EXPECT_EQ(it->second, seen.members) << "two views of epoch " << seen.epoch;
        }
      }
      EXPECT_EQ(views.size(), 1u) << "survivors dropped rank " << victim << " in different epochs";
      // The survivors' writes go on.
      for (int s : alive) {
        const std::string head = absl::StrCat("progress ", s, " ");
        const uint64_t was = before[s];
        EXPECT_TRUE(j.of(s).WaitFor(
            [&](const std::string& l) { return StartsWith(l, head) && std::stoull(l.substr(head.size())) > was + 10; },
            30s))
            << "rank " << s << " stopped writing after rank " << victim << " died\n"
            << j.of(s).Transcript();
      }
    }
    std::sort(lat_ms.begin(), lat_ms.end());
    if (!lat_ms.empty()) {
      std::printf("%s round %d: kill -9 to a survivor's epoch: min %.0f ms, median %.0f ms, max %.0f ms (%zu)\n",
                  mpirun ? "mpirun" : "launcher-less", round, lat_ms.front(), lat_ms[lat_ms.size() / 2],
                  lat_ms.back(), lat_ms.size());
    }
  }
};

TEST_F(AgreedDeathTest, KilledProcessesAreDroppedByEverySurvivorLauncherLess) {
  for (int r = 0; r < KillRounds() && !HasFailure(); ++r) KillThreeInTurn(/*mpirun=*/false, r);
}

TEST_F(AgreedDeathTest, KilledProcessesAreDroppedByEverySurvivorUnderMpirun) {
  for (int r = 0; r < KillRounds() && !HasFailure(); ++r) KillThreeInTurn(/*mpirun=*/true, r);
}

TEST_F(AgreedDeathTest, AProcessPausedPastItsSessionWritesNothingAfterItWasDropped) {
  const int kSessionMs = 3000;
  Job j = Start(3, /*mpirun=*/false, kSessionMs, "pause");
  if (HasFailure()) return;
  kill(j.pid[2], SIGSTOP);
  const int64_t t_stop = MonoNs();
  Seen seen;
  ASSERT_TRUE(DropSeen(j, 0, 2, 30s, &seen)) << j.of(0).Transcript();
  std::printf("a paused process was dropped %.0f ms after SIGSTOP (session %d ms)\n", (seen.at - t_stop) / 1e6,
              kSessionMs);
  // What rank 2 wrote on nodes 0 and 1 before it was dropped.
  auto read = [&](int home) {
    const size_t from = j.of(0).line_count();
    j.of(0).Send(absl::StrCat("read 2 ", home));
    std::string line;
    const std::string head = absl::StrCat("read 0 2 ", home, " ");
    EXPECT_TRUE(j.of(0).WaitForFrom(from, [&](const std::string& l) { return StartsWith(l, head); }, 30s, &line));
    return line.substr(std::min(line.size(), head.size()));
  };
  const std::string before0 = read(0), before1 = read(1);
  const size_t from = j.of(2).line_count();
  kill(j.pid[2], SIGCONT);
  std::string first;
  ASSERT_TRUE(j.of(2).WaitForFrom(from, [](const std::string& l) { return StartsWith(l, "write 2 "); }, 30s, &first))
      << j.of(2).Transcript();
  EXPECT_NE(first.find("UNAVAILABLE"), std::string::npos) << first;
  EXPECT_TRUE(j.of(2).WaitFor([](const std::string& l) { return StartsWith(l, "fenced 2 "); }, 30s))
      << j.of(2).Transcript();
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(read(0), before0) << "a write of the dropped process landed on node 0";
  EXPECT_EQ(read(1), before1) << "a write of the dropped process landed on node 1";
  // And none of the values it tried after its resume is what the nodes hold.
  for (const std::string& l : j.of(2).Lines()) {
    auto w = Words(l);
    if (w.size() >= 4 && w[0] == "write") {
      EXPECT_NE(w[3], before0);
      EXPECT_NE(w[3], before1);
    }
  }
}

// Rejoin: rank 2 is killed and started again while 0 and 1 go on. The new
// process is admitted, reads the named map's parts on the live nodes and
// gets DataLoss for its own (its memory began empty), all within 2 s of its
// start. A survivor's old session does not reach it (Unavailable); a new
// session of the map opened before finds its part lost (DataLoss); and new
// sessions of either side reach every node through a map made after.
TEST_F(AgreedDeathTest, ARestartedProcessRejoinsAndReadsEveryNamedStructure) {
  const int kSessionMs = 4000;
  Job j = Start(3, /*mpirun=*/false, kSessionMs, "rejoin");
  if (HasFailure()) return;
  kill(j.pid[2], SIGKILL);
  Seen seen;
  ASSERT_TRUE(DropSeen(j, 0, 2, 30s, &seen)) << j.of(0).Transcript();
  ASSERT_TRUE(DropSeen(j, 1, 2, 30s, &seen)) << j.of(1).Transcript();
  const auto t_start = std::chrono::steady_clock::now();
  j.procs[2] = StartRank(2, 3, kSessionMs, "rejoin", /*rejoin=*/true);
  ASSERT_TRUE(j.procs[2]->started());
  ProbeProcess& back = *j.procs[2];
  ASSERT_TRUE(back.WaitFor([](const std::string& l) { return l == "ready 2"; }, 60s)) << back.Transcript();
  EXPECT_TRUE(back.WaitFor([](const std::string& l) { return StartsWith(l, "rejoined 2 "); }, 1s)) << back.Transcript();
  // Writer 0's values, as the rejoined process reads them.
  std::map<int, std::string> got;
  for (int home = 0; home < 3; ++home) {
    const size_t from = back.line_count();
    back.Send(absl::StrCat("read 0 ", home));
    std::string line;
    const std::string head = absl::StrCat("read 2 0 ", home, " ");
    ASSERT_TRUE(back.WaitForFrom(from, [&](const std::string& l) { return StartsWith(l, head); }, 30s, &line))
        << back.Transcript();
    got[home] = line.substr(head.size());
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
  std::printf("a restarted process rejoined and read the named map on every node %.0f ms after its start\n", ms);
  EXPECT_LT(ms, 2000) << "start to rejoined reads";
  for (int home : {0, 1}) {
    EXPECT_TRUE(!got[home].empty() && std::isdigit(static_cast<unsigned char>(got[home][0])))
        << "writer 0's key on node " << home << ": " << got[home];
  }
  EXPECT_NE(got[2].find("DATA_LOSS"), std::string::npos) << "its own part, which began empty: " << got[2];
  // Both survivors applied an epoch with rank 2 back.
  for (int s : {0, 1}) {
    EXPECT_TRUE(j.of(s).WaitFor(
        [&](const std::string& l) {
          auto w = Words(l);
          return StartsWith(l, absl::StrCat("epoch ", s, " ")) && w.size() == 7 && w[6] == "2";
        },
        30s))
        << j.of(s).Transcript();
  }
  // Rank 0's first client (its session reached rank 2's old process) does
  // not reach the new one; a client of the map it opened at the start, on
  // a new session that does, finds that part lost, and the others whole.
  auto ask = [&](int r, const std::string& cmd, const std::string& head) {
    const size_t from = j.of(r).line_count();
    j.of(r).Send(cmd);
    std::string line;
    EXPECT_TRUE(j.of(r).WaitForFrom(from, [&](const std::string& l) { return StartsWith(l, head); }, 30s, &line))
        << j.of(r).Transcript();
    return line.substr(std::min(line.size(), head.size()));
  };
  EXPECT_EQ(ask(0, "oldwrite 2", "oldwrite 0 2 "), "UNAVAILABLE");
  EXPECT_EQ(ask(0, "reopen 2", "reopen 0 2 "), "DATA_LOSS");
  const std::string own = ask(0, "reopen 1", "reopen 0 1 ");
  EXPECT_TRUE(!own.empty() && std::isdigit(static_cast<unsigned char>(own[0]))) << own;
  // A map made now spans every node, from either side.
  for (int r : {0, 2}) {
    const size_t from = j.of(r).line_count();
    j.of(r).Send("check after");
    std::string line;
    ASSERT_TRUE(j.of(r).WaitForFrom(
        from, [&](const std::string& l) { return StartsWith(l, absl::StrCat("check ", r, " ")); }, 30s, &line))
        << j.of(r).Transcript();
    EXPECT_EQ(line, absl::StrCat("check ", r, " after 0=OK 1=OK 2=OK")) << j.of(r).Transcript();
  }
  // And the survivors' writes go on.
  for (int s : {0, 1}) {
    const uint64_t was = LastProgress(j, s);
    const std::string head = absl::StrCat("progress ", s, " ");
    EXPECT_TRUE(j.of(s).WaitFor(
        [&](const std::string& l) { return StartsWith(l, head) && std::stoull(l.substr(head.size())) > was; }, 30s))
        << j.of(s).Transcript();
  }
  // Node 0 keeps the catalogue of names. When its process restarts, the
  // catalogue went with its memory: opening a name says so, on either side,
  // rather than carve new parts over the live ones of nodes 1 and 2.
  const size_t mark = j.of(1).line_count();
  kill(j.pid[0], SIGKILL);
  ASSERT_TRUE(DropSeen(j, 1, 0, 30s, &seen)) << j.of(1).Transcript();
  j.procs[0] = StartRank(0, 3, kSessionMs, "rejoin", /*rejoin=*/true);
  std::string line;
  EXPECT_TRUE(j.of(0).WaitFor([](const std::string& l) { return StartsWith(l, "error setup "); }, 60s, &line))
      << j.of(0).Transcript();
  EXPECT_NE(line.find("DATA_LOSS"), std::string::npos) << line;
  ASSERT_TRUE(j.of(1).WaitForFrom(
      mark,
      [](const std::string& l) {
        auto w = Words(l);
        return StartsWith(l, "epoch 1 ") && w.size() == 7 && w[4] == "0";
      },
      30s))
      << "rank 1 never applied an epoch with rank 0 back\n"
      << j.of(1).Transcript();
  const size_t from = j.of(1).line_count();
  j.of(1).Send("check names-after-node-0");
  ASSERT_TRUE(j.of(1).WaitForFrom(from, [](const std::string& l) { return StartsWith(l, "check 1 "); }, 30s, &line))
      << j.of(1).Transcript();
  EXPECT_NE(line.find("setup DATA_LOSS"), std::string::npos) << line;
}

}  // namespace
