// Real processes killed with SIGKILL while they write every structure
// (docs/design.md §5 "Failures and repair", §9.1 "Crash repair"), in one
// Soft-RoCE guest (tests/verbs/run_guest_tests.sh; elsewhere it skips: the
// soft NIC cannot span processes, and crash_test covers every crash point).
//
// Each round starts a job of four processes through a coordinator (this
// binary again, RDMADS_KILL_ROLE set; a ZooKeeper server the test starts),
// all on rxe0, so deaths are the membership's agreed epochs. They open a hash map, an
// ordered map and a queue by name; every process writes keys homed on nodes
// 0 and 1 (its own keys, and one hot key each structure shares) and
// enqueues to and dequeues from the queues homed there. At two random
// moments the test sends SIGKILL to node 2, then to node 3, each then in the
// middle of remote writes to nodes 0 and 1. The survivors keep writing; each
// reports when its first write of the hot keys, whose locks the victims
// were using, succeeded after its cluster declared the first victim dead.
// At the end every survivor checks that its own keys hold the values it
// last wrote (acknowledged), node 0 drains both queues, and the test checks
// that no value was dequeued twice and that every value a survivor enqueued
// (acknowledged) was dequeued, but for one of that queue per victim dequeue
// cut by the kill (it took the value along: at-most-once delivery).
// RDMADS_KILL_ROUNDS rounds (default 10: 20 kills).

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"
#include "structures/queue/queue.h"
#include "structures/skiplist/skiplist.h"
#include "testing/zk_server.h"

extern char** environ;

namespace structures {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kNodes = 4;
constexpr int kFirstVictim = 2;  // nodes 2 and 3 are killed; 0 and 1 survive
bool IsVictim(int node) { return node >= kFirstVictim; }
constexpr uint64_t kHotKey = 0x5eed;  // every process writes it, in each map

// ---------------------------------------------------------------- one node

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One process of the job. Output lines, read by the test: "E v" enqueued
// (acknowledged), "D v" dequeued, "R v" drained at the end (node 0), "T s"
// seconds from the declaration of the first victim's death to the first
// successful write of a hot key, "OK" (own keys verified), "FAIL why".
int RunNode() {
  const int me = std::atoi(std::getenv("RDMADS_NODE_ID"));
  auto fail = [](const std::string& why) {
    std::printf("FAIL %s\n", why.c_str());
    std::fflush(stdout);
    return 1;
  };
  rdma::ClusterOptions o;
  o.node.arena_bytes = size_t{16} << 20;
  o.named_bytes = size_t{16} << 20;
  o.bootstrap.timeout = std::chrono::seconds(120);
  auto cluster = rdma::Cluster::Open(o);
  if (!cluster.ok()) return fail(absl::StrCat("Open: ", cluster.status().ToString()));
  rdma::Cluster& c = **cluster;
  HashMapOptions mo;
  mo.groups_per_node = 256;
  mo.max_groups_per_node = 256;  // no splits: a split cut by a death is not repaired (design.md §5)
  auto map = HashMap<uint64_t>::Open(c, "kill-map", mo);
  SkipListOptions so;
  so.part_bytes = size_t{2} << 20;
  auto list = SkipList<uint64_t>::Open(c, "kill-list", so);
  QueueOptions qo;
  qo.capacity = 4096;
  auto queue = Queue<uint64_t>::Open(c, "kill-queue", qo);
  if (!map.ok() || !list.ok() || !queue.ok()) {
    return fail(absl::StrCat("Open: ", map.status().ToString(), list.status().ToString(), queue.status().ToString()));
  }
  auto thread = c.ThisThread();
  if (!thread.ok()) return fail(thread.status().ToString());
  auto mc = map->NewClient(**thread);
  auto lc = list->NewClient(**thread);
  auto qc = queue->NewClient(**thread);
  if (!mc.ok() || !lc.ok() || !qc.ok()) return fail("NewClient");
  // The survivors' meeting counter, at one offset in every arena (every
  // process allocates it at the same point); node 0's is used.
  auto meet = c.node(c.self()).Allocate(64);
  if (!meet.ok()) return fail(meet.status().ToString());
  const uint64_t meet_offset = meet->address() - c.node(c.self()).arena_info().base;
  if (absl::Status b = c.Barrier(); !b.ok()) return fail(b.ToString());
  std::printf("READY\n");
  std::fflush(stdout);

  // Keys of this process homed on nodes 0 and 1 (the victims' parts die).
  auto own_key = [&](uint64_t i, bool ordered) {
    for (uint64_t k = (uint64_t{static_cast<uint32_t>(me) + 1} << 32) | (i * 7919);; ++k) {
      const rdma::NodeId home = ordered ? list->HomeOf(k) : map->HomeOf(k);
      if (!IsVictim(home)) return k;
    }
  };
  uint64_t hot_key = kHotKey;  // one key homed on node 0 in both maps
  while (map->HomeOf(hot_key) != 0 || list->HomeOf(hot_key) != 0) ++hot_key;
  auto dead_victims = [&] {
    int n = 0;
    for (int v = kFirstVictim; v < kNodes; ++v) n += !c.PeerStatus(static_cast<rdma::NodeId>(v)).ok();
    return n;
  };
  std::map<uint64_t, uint64_t> map_acked, list_acked;
  std::mt19937_64 rng(1000 + me);
  std::optional<Clock::time_point> declared, all_declared;
  std::optional<double> first_hot_after;
  const rdma::NodeId q_homes[2] = {0, 1};
  uint64_t enq = 0;
  // Until 1.5 s after the last victim's death (a victim: until it is killed).
  for (uint64_t i = 0;; ++i) {
    const int dead = dead_victims();
    if (!declared && dead > 0) declared = Clock::now();
    if (!all_declared && dead == kNodes - kFirstVictim) all_declared = Clock::now();
    if (all_declared && Clock::now() - *all_declared > std::chrono::milliseconds(1500)) break;
    const uint64_t slot = i % 16;
    const uint64_t mk = own_key(slot, false), lk = own_key(slot, true);
    const uint64_t value = (uint64_t{static_cast<uint32_t>(me)} << 40) | i;
    auto m = (*mc)->Put(mk, value);
    if (!m.ok()) return fail(absl::StrCat("map Put: ", m.status().ToString()));
    map_acked[mk] = value;
    auto l = (*lc)->Put(lk, value);
    if (!l.ok()) return fail(absl::StrCat("list Put: ", l.status().ToString()));
    list_acked[lk] = value;
    // The hot keys: the victim writes them too, so a survivor meets the
    // locks it held.
    const bool was_dead = declared.has_value();
    auto hm = (*mc)->Put(hot_key, value);
    auto hl = (*lc)->Put(hot_key, value);
    if (!hm.ok() || !hl.ok()) return fail(absl::StrCat("hot Put: ", hm.status().ToString(), hl.status().ToString()));
    if (was_dead && !first_hot_after) first_hot_after = Seconds(Clock::now() - *declared);
    const rdma::NodeId qh = q_homes[rng() % 2];
    const uint64_t v = (uint64_t{static_cast<uint32_t>(me) + 1} << 48) | enq++;
    auto e = (*qc)->Enqueue(qh, v);
    if (!e.ok()) return fail(absl::StrCat("Enqueue: ", e.status().ToString()));
    if (*e) std::printf("E %llu %d\n", static_cast<unsigned long long>(v), static_cast<int>(qh));
    if (rng() % 2 == 0) {
      const rdma::NodeId dh = q_homes[rng() % 2];
      if (IsVictim(me)) {  // a dequeue in flight when it is killed may take a value along
        std::printf("P %d\n", static_cast<int>(dh));
        std::fflush(stdout);
      }
      auto d = (*qc)->Dequeue(dh);
      if (!d.ok()) return fail(absl::StrCat("Dequeue: ", d.status().ToString()));
      std::printf("D %llu\n", d->has_value() ? static_cast<unsigned long long>(**d) : 0ull);
    }
    if (IsVictim(me)) std::fflush(stdout);  // what it acknowledged before the kill
  }
  if (first_hot_after) std::printf("T %.3f\n", *first_hot_after);
  for (const auto& [k, v] : map_acked) {
    auto got = (*mc)->Get(k);
    if (!got.ok() || *got != std::optional<uint64_t>(v)) return fail(absl::StrCat("map key ", k, " lost its value"));
  }
  for (const auto& [k, v] : list_acked) {
    auto got = (*lc)->Get(k);
    if (!got.ok() || *got != std::optional<uint64_t>(v)) return fail(absl::StrCat("list key ", k, " lost its value"));
  }
  // Meet on node 0's counter; node 0 drains the queues once both are done
  // writing, then leaves last.
  const rdma::RemotePtr counter(0, (*thread)->arena(0).base + meet_offset);
  auto wait_for = [&](uint64_t want) -> absl::Status {
    const auto end = Clock::now() + std::chrono::seconds(60);
    for (;;) {
      auto v = (*thread)->Read64(counter);
      if (!v.ok()) return v.status();
      if (*v >= want) return absl::OkStatus();
      if (Clock::now() > end) return absl::DeadlineExceededError("the other survivor never arrived");
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  // 1, 2: both survivors are done writing. 3: node 0 drained both queues
  // (node 1's part must live until then). 4: node 1 leaves; node 0 last.
  if (auto a = (*thread)->FetchAndAdd(counter, 1); !a.ok()) return fail(a.status().ToString());
  if (absl::Status w = wait_for(2); !w.ok()) return fail(w.ToString());
  if (me == 0) {
    for (rdma::NodeId h : q_homes) {
      for (;;) {
        auto d = (*qc)->Dequeue(h);
        if (!d.ok()) return fail(absl::StrCat("drain: ", d.status().ToString()));
        if (!d->has_value()) break;
        std::printf("R %llu\n", static_cast<unsigned long long>(**d));
      }
    }
    if (auto a = (*thread)->FetchAndAdd(counter, 1); !a.ok()) return fail(a.status().ToString());
    if (absl::Status w = wait_for(4); !w.ok()) return fail(w.ToString());
  } else {
    if (absl::Status w = wait_for(3); !w.ok()) return fail(w.ToString());
    if (auto a = (*thread)->FetchAndAdd(counter, 1); !a.ok()) return fail(a.status().ToString());
  }
  std::printf("OK\n");
  std::fflush(stdout);
  return 0;
}

// ---------------------------------------------------------------- the test

struct Child {
  pid_t pid = -1;
  int out = -1;  // read end of its stdout
  std::string text;
};

Child Spawn(int node, const std::string& coordinator, int round) {
  Child ch;
  int fds[2];
  if (pipe(fds) != 0) return ch;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.push_back("RDMADS_KILL_ROLE=node");
  env.push_back(absl::StrCat("RDMADS_NODE_ID=", node));
  env.push_back(absl::StrCat("RDMADS_NODES=", kNodes));
  env.push_back("RDMADS_COORDINATOR=" + coordinator);
  env.push_back(absl::StrCat("RDMADS_CLUSTER=kill-test-", getpid(), "-", round));
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe";
  char* argv[] = {self.data(), nullptr};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  if (posix_spawn(&ch.pid, "/proc/self/exe", &fa, nullptr, argv, envp.data()) != 0) ch.pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  ch.out = fds[0];
  fcntl(ch.out, F_SETFL, O_NONBLOCK);
  return ch;
}

void Drain(Child& ch) {
  char buf[4096];
  for (;;) {
    const ssize_t n = read(ch.out, buf, sizeof buf);
    if (n <= 0) return;
    ch.text.append(buf, static_cast<size_t>(n));
  }
}

// Every child's pipe, in every wait: a child blocked on a full pipe would
// stall the job (or be killed outside its writes).
void DrainAll(std::vector<Child>& kids) {
  for (Child& k : kids) Drain(k);
}
void SleepDraining(std::vector<Child>& kids, std::chrono::milliseconds d) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    DrainAll(kids);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// The queue lines of a child's output: "E v home", "P home", "D v" (0: it
// found the queue empty), "R v"; `value` is v (for P, the home), `home` the
// queue's home for E (else -1).
struct QueueLine {
  char tag;
  uint64_t value;
  int home;
};
std::vector<QueueLine> Lines(const std::string& text) {
  std::vector<QueueLine> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() < 3 || line[1] != ' ' || std::string("EPDR").find(line[0]) == std::string::npos) continue;
    char* rest = nullptr;
    const uint64_t v = std::strtoull(line.c_str() + 2, &rest, 10);
    const int home = line[0] == 'E' && rest != nullptr && *rest == ' ' ? std::atoi(rest + 1) : -1;
    out.push_back({line[0], v, home});
  }
  return out;
}

TEST(KillTest, ProcessesKilledWhileWritingLeaveEveryStructureWholeAndUnlocked) {
  const char* ip = std::getenv("RXE_SELF_IP");
  if (ip == nullptr) GTEST_SKIP() << "needs one Soft-RoCE guest (RXE_SELF_IP): several processes on rxe0";
  const char* rounds_env = std::getenv("RDMADS_KILL_ROUNDS");
  const int rounds = rounds_env != nullptr ? std::atoi(rounds_env) : 10;
  std::unique_ptr<rdmads_testing::ZkServer> own;
  auto coordinator = rdmads_testing::ZkServer::Shared(&own);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  std::mt19937_64 rng(20261127);
  std::vector<double> recovery;
  for (int round = 0; round < rounds; ++round) {
    SCOPED_TRACE(testing::Message() << "round " << round);
    std::vector<Child> kids;
    for (int n = 0; n < kNodes; ++n) kids.push_back(Spawn(n, *coordinator, round));
    for (const Child& k : kids) ASSERT_GT(k.pid, 0) << "cannot start a node";
    // Wait until the job writes, then kill the victims at random moments.
    const auto start = Clock::now();
    while (kids[0].text.find("READY") == std::string::npos && Clock::now() - start < std::chrono::seconds(120)) {
      SleepDraining(kids, std::chrono::milliseconds(5));
    }
    ASSERT_NE(kids[0].text.find("READY"), std::string::npos) << "the job never started: " << kids[0].text;
    int status = 0;
    for (int v = kFirstVictim; v < kNodes; ++v) {
      SleepDraining(kids, std::chrono::milliseconds(100 + rng() % 700));
      kill(kids[v].pid, SIGKILL);
      waitpid(kids[v].pid, &status, 0);
      DrainAll(kids);
    }
    for (int n = 0; n < kFirstVictim; ++n) {
      // Survivors: collect their output until they exit (bounded).
      const auto until = Clock::now() + std::chrono::seconds(180);
      for (;;) {
        DrainAll(kids);
        const pid_t w = waitpid(kids[n].pid, &status, WNOHANG);
        if (w == kids[n].pid) break;
        if (Clock::now() > until) {
          kill(kids[n].pid, SIGKILL);
          waitpid(kids[n].pid, &status, 0);
          ADD_FAILURE() << "node " << n << " did not finish; output: " << kids[n].text.substr(0, 2000);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      DrainAll(kids);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << "node " << n << ": " << kids[n].text.substr(kids[n].text.rfind("FAIL") == std::string::npos
                                                             ? 0
                                                             : kids[n].text.rfind("FAIL"));
      const size_t t = kids[n].text.find("\nT ");
      if (t != std::string::npos) recovery.push_back(std::strtod(kids[n].text.c_str() + t + 3, nullptr));
    }
    for (Child& k : kids) close(k.out);
    // The queues: every survivor's acknowledged value dequeued exactly once;
    // no value (the victim's included) dequeued twice.
    std::multiset<uint64_t> out;
    std::map<uint64_t, int> acked;  // value -> its queue's home
    std::multiset<int> in_flight;   // homes of the victims' dequeues cut by the kill
    for (int n = 0; n < kNodes; ++n) {
      std::optional<int> pending;  // a victim's dequeue begun and not reported
      for (const QueueLine& l : Lines(kids[n].text)) {
        if (l.tag == 'E' && !IsVictim(n)) acked[l.value] = l.home;
        if ((l.tag == 'D' || l.tag == 'R') && l.value != 0) out.insert(l.value);
        if (l.tag == 'P') pending = static_cast<int>(l.value);
        if (l.tag == 'D') pending.reset();
      }
      if (IsVictim(n) && pending) in_flight.insert(*pending);
    }
    for (uint64_t v : out) EXPECT_EQ(out.count(v), 1u) << "value " << v << " dequeued twice";
    // A victim killed between its dequeue's take and its report took that
    // value with it (at-most-once delivery, design.md §9.1): for each such
    // dequeue, one acknowledged value of that queue may be missing; no more.
    for (const auto& [v, home] : acked) {
      if (out.count(v) != 0) continue;
      auto cut = in_flight.find(home);
      EXPECT_NE(cut, in_flight.end()) << "acknowledged value " << v << " (queue on node " << home << ") lost";
      if (cut != in_flight.end()) in_flight.erase(cut);
    }
    if (HasFailure()) break;
  }
  if (!recovery.empty()) {
    std::sort(recovery.begin(), recovery.end());
    std::printf("first write of a hot key after a victim was declared dead: median %.3f s, max %.3f s (%zu survivors)\n",
                recovery[recovery.size() / 2], recovery.back(), recovery.size());
  }
}

}  // namespace
}  // namespace structures

int main(int argc, char** argv) {
  if (const char* role = std::getenv("RDMADS_KILL_ROLE"); role != nullptr) return structures::RunNode();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
