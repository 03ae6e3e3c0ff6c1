// Membership on a real ZooKeeper server, with members in separate processes
// (membership_probe): agreed deaths, epochs applied in order and the same
// view of each epoch everywhere, the manager's own death, rejoin, a paused
// process fencing itself, and a coordinator that is down.
#include "rdma/coord/membership.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rdma/coord/internal/zk_client.h"
#include "testing/zk_server.h"
#include "testing/probe_process.h"

namespace {

using namespace std::chrono_literals;
using rdmads_testing::ProbeProcess;
using rdmads_testing::ZkServer;

constexpr char kProbe[] = "tests/rdma/coord/membership_probe";

bool StartsWith(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

// Unique on a server the suite's configurations share (a sandbox's pid is not).
std::string Job(const std::string& name) { return absl::StrCat(name, "-", getpid(), "-", std::random_device{}()); }

struct Member {
  std::unique_ptr<ProbeProcess> p;
  uint32_t rank = 0;
  std::string inc;  // as printed
};

Member StartMember(const std::string& zk, const std::string& job, int size, int rank, int session_ms) {
  Member m;
  m.rank = static_cast<uint32_t>(rank);
  m.p = std::make_unique<ProbeProcess>(std::vector<std::string>{
      kProbe, zk, job, std::to_string(size), std::to_string(rank), std::to_string(session_ms)});
  EXPECT_TRUE(m.p->started()) << "cannot start " << kProbe;
  std::string line;
  EXPECT_TRUE(m.p->WaitFor([](const std::string& l) { return StartsWith(l, "inc "); }, 30s, &line))
      << m.p->Transcript();
  if (line.size() > 4) m.inc = line.substr(4);
  return m;
}

bool Joined(Member& m, std::chrono::milliseconds t = 60s) {
  return m.p->WaitFor([](const std::string& l) { return StartsWith(l, "joined "); }, t);
}

// An epoch line whose member list has (or lacks) rank/inc.
std::function<bool(const std::string&)> EpochWith(const Member& who, bool present) {
  const std::string token = absl::StrCat(" ", who.rank, "/", who.inc);
  return [token, present](const std::string& l) {
    if (!StartsWith(l, "epoch ")) return false;
    return (absl::StrCat(l, " ").find(token + " ") != std::string::npos) == present;
  };
}

// Every process applied a contiguous run of epochs, and any two that applied
// one epoch saw the same members in it.
void ExpectOneHistory(const std::vector<Member*>& members) {
  std::map<uint64_t, std::string> seen;
  for (Member* m : members) {
    uint64_t last = 0;
    for (const std::string& l : m->p->Lines()) {
      if (!StartsWith(l, "epoch ")) continue;
      std::vector<std::string> parts = absl::StrSplit(l, absl::MaxSplits(' ', 2));
      uint64_t e = std::stoull(parts[1]);
      const std::string view = parts.size() > 2 ? parts[2] : "";
      if (last != 0) {
        EXPECT_EQ(e, last + 1) << "rank " << m->rank << " applied epoch " << e << " after " << last;
      }
      last = e;
      auto [it, fresh] = seen.emplace(e, view);
      if (!fresh) {
        EXPECT_EQ(it->second, view) << "two views of epoch " << e;
      }
    }
  }
}

TEST(MembershipTest, AgreedDeathsAppliedInOrderAndTheManagersDeathSurvived) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const std::string job = Job("agree");
  const int kSize = 5;
  const int kSessionMs = 4000;
  std::vector<Member> ms;
  for (int r = 0; r < kSize; ++r) ms.push_back(StartMember(*zk, job, kSize, r, kSessionMs));
  for (Member& m : ms) ASSERT_TRUE(Joined(m)) << m.p->Transcript();
  // The manager, and four others: a reporter, a process paused across two
  // epochs, and two that are dropped by report.
  int mgr = -1;
  for (int r = 0; r < kSize && mgr < 0; ++r) {
    if (ms[r].p->WaitFor([](const std::string& l) { return l == "manager"; }, r == 0 ? 10s : 1s)) mgr = r;
  }
  ASSERT_GE(mgr, 0) << "no process became the manager";
  std::vector<int> others;
  for (int r = 0; r < kSize; ++r) if (r != mgr) others.push_back(r);
  Member& reporter = ms[others[0]];
  Member& paused = ms[others[1]];
  Member& x = ms[others[2]];
  Member& y = ms[others[3]];

  // Two epochs pass while `paused` is stopped: it must apply both, in order.
  paused.p->Signal(SIGSTOP);
  const auto t0 = std::chrono::steady_clock::now();
  reporter.p->Send(absl::StrCat("report ", x.rank));
  ASSERT_TRUE(reporter.p->WaitFor(EpochWith(x, false), 10s)) << reporter.p->Transcript();
  reporter.p->Send(absl::StrCat("report ", y.rank));
  ASSERT_TRUE(reporter.p->WaitFor(EpochWith(y, false), 10s)) << reporter.p->Transcript();
  const auto agreed = std::chrono::steady_clock::now() - t0;
  paused.p->Signal(SIGCONT);
  std::printf("two reported deaths agreed in %lld ms\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(agreed).count()));
  ASSERT_TRUE(paused.p->WaitFor(EpochWith(y, false), 10s)) << paused.p->Transcript();
  // A live process that was dropped finds itself fenced.
  for (Member* d : {&x, &y}) {
    EXPECT_TRUE(d->p->WaitFor([](const std::string& l) { return StartsWith(l, "fenced "); }, 10s))
        << d->p->Transcript();
    d->p->Send("serving");
    EXPECT_TRUE(d->p->WaitFor([](const std::string& l) { return StartsWith(l, "serving UNAVAILABLE"); }, 10s))
        << d->p->Transcript();
  }

  // The manager dies (kill -9): its session expires, another process takes
  // over and drops it.
  ms[mgr].p->Signal(SIGKILL);
  for (Member* s : {&reporter, &paused}) {
    EXPECT_TRUE(s->p->WaitFor(EpochWith(ms[mgr], false), 30s)) << s->p->Transcript();
  }
  EXPECT_TRUE(reporter.p->WaitFor([](const std::string& l) { return l == "manager"; }, 10s) ||
              paused.p->WaitFor([](const std::string& l) { return l == "manager"; }, 10s));
  std::vector<Member*> all;
  for (Member& m : ms) all.push_back(&m);
  ExpectOneHistory(all);
}

TEST(MembershipTest, ARestartedRankRejoinsAndADuplicateWaits) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const std::string job = Job("rejoin");
  // Long enough that no live member's session expires on a loaded machine
  // (3 s did once, in a CI run beside sanitizer builds); the test waits for
  // the killed member's expiry, so this is also how long that takes.
  const int kSessionMs = 6000;
  std::vector<Member> ms;
  for (int r = 0; r < 3; ++r) ms.push_back(StartMember(*zk, job, 3, r, kSessionMs));
  for (Member& m : ms) ASSERT_TRUE(Joined(m)) << m.p->Transcript();

  // A second process claiming rank 1 while the first lives is not admitted.
  Member dup = StartMember(*zk, job, 3, 1, kSessionMs);
  EXPECT_FALSE(Joined(dup, 3s)) << dup.p->Transcript();
  dup.p.reset();

  // Rank 2 dies; its session expires; a new incarnation takes its place.
  const auto t0 = std::chrono::steady_clock::now();
  ms[2].p->Signal(SIGKILL);
  ASSERT_TRUE(ms[0].p->WaitFor(EpochWith(ms[2], false), 30s)) << ms[0].p->Transcript();
  std::printf("a killed process dropped %lld ms after the kill (session %d ms)\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()),
              kSessionMs);
  Member back = StartMember(*zk, job, 3, 2, kSessionMs);
  ASSERT_TRUE(Joined(back, 30s)) << back.p->Transcript();
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(ms[r].p->WaitFor(EpochWith(back, true), 10s)) << ms[r].p->Transcript();
  std::vector<Member*> all = {&ms[0], &ms[1], &back};
  ExpectOneHistory(all);
  // Each member carries the epoch that admitted it: the first ranks the
  // job's start, the newcomer the epoch it came back in.
  // The probe prints an epoch's "since" line just after its "epoch" line:
  // wait for the one of the epoch that let the newcomer in.
  std::string admitted, since;
  ASSERT_TRUE(ms[0].p->WaitFor(EpochWith(back, true), 10s, &admitted)) << ms[0].p->Transcript();
  const std::string epoch = std::vector<std::string>(absl::StrSplit(admitted, ' '))[1];
  EXPECT_TRUE(ms[0].p->WaitFor([&](const std::string& l) { return StartsWith(l, "since " + epoch + " "); }, 10s,
                               &since))
      << ms[0].p->Transcript();
  std::vector<std::string> w = absl::StrSplit(since, ' ');
  ASSERT_EQ(w.size(), 7u) << since;
  const std::string start = w[3];
  EXPECT_EQ(w[4], "0:" + start) << since;
  EXPECT_EQ(w[5], "1:" + start) << since;
  EXPECT_NE(w[6], "2:" + start) << since;
  EXPECT_GT(std::stoull(w[6].substr(2)), std::stoull(start)) << since;
}

TEST(MembershipTest, AProcessPausedPastItsSessionFencesItselfOnResume) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const std::string job = Job("pause");
  const int kSessionMs = 3000;
  std::vector<Member> ms;
  for (int r = 0; r < 2; ++r) ms.push_back(StartMember(*zk, job, 2, r, kSessionMs));
  for (Member& m : ms) ASSERT_TRUE(Joined(m)) << m.p->Transcript();
  ms[1].p->Signal(SIGSTOP);
  ASSERT_TRUE(ms[0].p->WaitFor(EpochWith(ms[1], false), 30s)) << ms[0].p->Transcript();
  // The command is queued before the process resumes, so the process may
  // answer it before its membership thread has run: Serving() must still
  // say Unavailable.
  const size_t from = ms[1].p->line_count();
  ms[1].p->Send("serving");
  ms[1].p->Signal(SIGCONT);
  std::string answer;
  ASSERT_TRUE(ms[1].p->WaitForFrom(from, [](const std::string& l) { return StartsWith(l, "serving "); }, 30s, &answer))
      << ms[1].p->Transcript();
  EXPECT_TRUE(StartsWith(answer, "serving UNAVAILABLE")) << answer;
  EXPECT_TRUE(ms[1].p->WaitFor([](const std::string& l) { return StartsWith(l, "fenced "); }, 10s))
      << ms[1].p->Transcript();
}

TEST(MembershipTest, ACoordinatorThatIsDownStopsOnlyMembershipChanges) {
  auto server = ZkServer::Start();  // its own: it is stopped
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string zk = (*server)->address();
  const std::string job = Job("down");
  const int kSessionMs = 10000;
  std::vector<Member> ms;
  for (int r = 0; r < 2; ++r) ms.push_back(StartMember(zk, job, 2, r, kSessionMs));
  for (Member& m : ms) ASSERT_TRUE(Joined(m)) << m.p->Transcript();
  ASSERT_TRUE((*server)->Stop().ok());
  std::this_thread::sleep_for(200ms);
  ms[0].p->Send("serving");
  EXPECT_TRUE(ms[0].p->WaitFor([](const std::string& l) { return l == "serving OK"; }, 10s)) << ms[0].p->Transcript();
  ms[0].p->Send("report 1");
  std::string line;
  ASSERT_TRUE(ms[0].p->WaitFor([](const std::string& l) { return StartsWith(l, "report "); }, 10s, &line))
      << ms[0].p->Transcript();
  EXPECT_TRUE(StartsWith(line, "report UNAVAILABLE")) << line;
  // Back up within the session timeout: the sessions resume, and the report
  // goes through.
  ASSERT_TRUE((*server)->Restart().ok());
  for (int i = 0; i < 100; ++i) {
    const size_t from = ms[0].p->line_count();
    ms[0].p->Send("report 1");
    ASSERT_TRUE(ms[0].p->WaitForFrom(from, [](const std::string& l) { return StartsWith(l, "report "); }, 20s, &line));
    if (StartsWith(line, "report ok")) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(StartsWith(line, "report ok")) << ms[0].p->Transcript();
  EXPECT_TRUE(ms[1].p->WaitFor([](const std::string& l) { return StartsWith(l, "fenced "); }, 20s))
      << ms[1].p->Transcript();
}

// The manager acts only on reports from members of the current
// configuration, and ignores bytes that are not a report: a stray or stale
// process cannot drop anyone.
TEST(MembershipTest, ReportsFromOutsideTheConfigurationAndForeignBytesAreIgnored) {
  std::unique_ptr<ZkServer> own;
  auto zk = ZkServer::Shared(&own);
  ASSERT_TRUE(zk.ok()) << zk.status();
  const std::string job = Job("strays");
  std::vector<Member> ms;
  for (int r = 0; r < 2; ++r) ms.push_back(StartMember(*zk, job, 2, r, 3000));
  for (Member& m : ms) ASSERT_TRUE(Joined(m)) << m.p->Transcript();
  auto c = rdma::coord::internal::ZkClient::Connect(*zk, 3000ms, 5000ms);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::string reports = absl::StrCat("/rdmads/", job, "/reports/r-");
  using rdma::coord::internal::NodeKind;
  // Rank 1 of another incarnation (a restarted or stale process) accuses rank 0.
  ASSERT_TRUE((*c)->Create(reports, absl::StrCat("0 ", ms[0].inc, " 1 00000000000000ab stale"),
                           NodeKind::kPersistentSequential).ok());
  ASSERT_TRUE((*c)->Create(reports, "not a report", NodeKind::kPersistentSequential).ok());
  ASSERT_TRUE((*c)->Create(reports, "", NodeKind::kPersistentSequential).ok());
  // The manager reads and deletes them: wait until they are gone.
  for (int i = 0; i < 500; ++i) {
    auto left = (*c)->Children(absl::StrCat("/rdmads/", job, "/reports"), false);
    ASSERT_TRUE(left.ok()) << left.status();
    if (left->empty()) break;
    std::this_thread::sleep_for(20ms);
  }
  std::this_thread::sleep_for(300ms);
  for (Member& m : ms) {
    EXPECT_FALSE(m.p->WaitFor(EpochWith(ms[0], false), 10ms)) << m.p->Transcript();
    EXPECT_FALSE(m.p->WaitFor([](const std::string& l) { return StartsWith(l, "fenced "); }, 10ms))
        << m.p->Transcript();
  }
  // A member's report does drop it.
  ms[1].p->Send("report 0");
  EXPECT_TRUE(ms[1].p->WaitFor(EpochWith(ms[0], false), 20s)) << ms[1].p->Transcript();
  EXPECT_TRUE(ms[0].p->WaitFor([](const std::string& l) { return StartsWith(l, "fenced "); }, 20s))
      << ms[0].p->Transcript();
}

TEST(MembershipTest, NoCoordinatorIsABoundedError) {
  rdma::coord::MembershipOptions o;
  o.ensemble = "127.0.0.1:1";  // nothing listens there
  o.job = "none";
  o.size = 1;
  o.incarnation = 7;
  o.connect_timeout = 500ms;
  const auto t0 = std::chrono::steady_clock::now();
  auto m = rdma::coord::Membership::Join(o);
  EXPECT_TRUE(absl::IsUnavailable(m.status())) << m.status();
  EXPECT_NE(m.status().message().find("127.0.0.1:1"), std::string::npos) << m.status();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);

  o.job = "a/b";
  EXPECT_TRUE(absl::IsInvalidArgument(rdma::coord::Membership::Join(o).status()));
  o.job = "ok";
  o.rank = 1;
  EXPECT_TRUE(absl::IsInvalidArgument(rdma::coord::Membership::Join(o).status()));
}

}  // namespace
