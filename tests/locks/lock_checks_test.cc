// Lock checks that the mixed-path stress (mutual_exclusion_test) does not
// reach, each shown by its own test (tests/README.md, audit table):
//  * ALock's native cohort under contention: several native threads on one
//    lock next to loopback and remote threads, so native threads queue behind
//    each other (MCS link, hand-over, budget) as well as behind the NIC
//    cohort; mutual_exclusion_test has one native thread per lock;
//  * a queue word that names no descriptor (an ALock or MCS tail, an MCS
//    `next` link): the lock returns DataLoss and never writes through it;
//  * a releaser whose successor swapped itself in but has not linked yet
//    waits for the link (ALock native, local MCS, RDMA MCS);
//  * the RDMA spin lock finding its own token in the word after its release
//    (a CAS executed twice): DataLoss at once, not a wait for nobody;
//  * the native gate keeps its lease past the native budget while no NIC
//    thread waits (the releaser's look at r_tail), and its lease ends when
//    its flag goes down (a NIC thread may take the lock then);
//  * a native gate waiter un-counts itself (to time out or to park) only
//    while the gate is held: a holder that leaves just before the waiter's
//    un-count CAS leaves the gate to it, and it takes the gate. The gate's
//    own wait runs with a hook that places the release (no NIC involved);
//  * the RDMA MCS waiter waits for the whole hand-over WRITE (byte copies),
//    held half landed by the soft NIC's copy hook;
//  * ALock's NIC successor handed budget 0 runs Peterson on a fresh read of
//    the line, so a native head that arrived after its enqueue gets in;
//  * ALock's native head waiting in Peterson behind a NIC holder enters once
//    the NIC cohort leaves (r_tail empty), with no NIC waiter to write victim;
//  * ALock's NIC locker whose first CAS finds a holder and whose swap then
//    finds the queue empty: the line its first chain read (and the chained
//    READs after it) were read before its flag went up, so it reads the line
//    again and does not report the chained READs as the holder's. The soft
//    NIC's copy hook holds the first chain while the holder leaves.
// Soft NIC only: the corrupted words are stored by the test's CPU, and the
// races are placed with the soft NIC's copy hook.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "locks/lock.h"
#include "locks/native_gate.h"
#include "locks/native_gate_impl.h"
#include "rdma/cluster.h"
#include "rdma/session.h"
#include "rdma/soft/soft_nic.h"
#include "tests/locks/stress_harness.h"

namespace locks::testing {
namespace {

using rdma::NodeId;
using rdma::RemotePtr;

ClientFactory ALockFactory() {
  return [](rdma::Node& node, rdma::Session* session) -> absl::StatusOr<std::unique_ptr<LockClient>> {
    ClientOptions o;
    o.timeout = std::chrono::seconds(20);
    return NewLockClient(LockKind::kALock, node, session, o);
  };
}

// Three native threads, a loopback and a remote thread on ONE lock: every
// acquisition contends, native threads hand over to each other through the
// native cohort's queue (budget 2 keeps them running Peterson against the
// NIC cohort too). Counts exact, no overlap, no error.
TEST(LockChecks, ALockNativeCohortUnderContention) {
  StressConfig cfg;
  cfg.name = "alock_native_cohort";
  cfg.num_nodes = 2;
  cfg.lock_nodes = {0};
  cfg.locks_per_node = 1;
  cfg.init = {LockKind::kALock, {2, 2}};
  cfg.factory = ALockFactory();
  cfg.threads = {{0, Path::kAuto}, {0, Path::kAuto}, {0, Path::kAuto}, {0, Path::kLoopback}, {1, Path::kAuto}};
  cfg.iterations_per_thread = Scaled(6000);
  cfg.max_duration = std::chrono::seconds(30);
  cfg.seed = 31;
  StressResult r = RunStress(cfg);
  std::printf("[%s] %s\n", cfg.name.c_str(), r.Summary().c_str());
  EXPECT_TRUE(r.errors.empty()) << r.Summary();
  EXPECT_EQ(r.overlaps, 0u) << r.Summary();
  EXPECT_EQ(r.mismatched_locks, 0u) << r.Summary();
  EXPECT_EQ(r.counter_total, r.acquisitions);
  EXPECT_GT(r.acquisitions, 0u);
}

class CorruptWordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdma::ClusterOptions o;
    o.num_nodes = 2;
    o.node.arena_bytes = 2 << 20;
    o.fabric.kind = rdma::FabricKind::kSoft;
    auto c = rdma::Cluster::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }
  std::unique_ptr<rdma::Session> Session(NodeId n) { return std::move(*cluster_->NewSession(n)); }
  LockTable Table(LockKind kind) {
    auto t = LockTable::Create(cluster_->node(0), 1, {kind, {}});
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  }
  std::unique_ptr<LockClient> Client(LockKind kind, NodeId n, rdma::Session* s, std::chrono::milliseconds timeout) {
    ClientOptions o;
    o.timeout = timeout;
    auto c = NewLockClient(kind, cluster_->node(n), s, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // A 64-byte line just past node `n`'s arena, so no descriptor line: what
  // a corrupted queue word could name.
  uint64_t PastTheArena(NodeId n) const {
    const rdma::ArenaInfo a = cluster_->node(n).arena_info();
    return RemotePtr(n, a.base + a.length).raw();
  }

  std::unique_ptr<rdma::Cluster> cluster_;
};

// ALock's NIC locker swaps itself into r_tail and links behind the old tail:
// an old tail that names no descriptor is DataLoss, before any WRITE to it
// (written through, the link would fail at the NIC, or land in some other
// memory and leave the locker waiting for a budget nobody hands).
TEST_F(CorruptWordTest, ALockNicLockerRefusesATailThatNamesNoDescriptor) {
  LockTable t = Table(LockKind::kALock);
  t.at(0).local<ALockWord>()->r_tail.Store(PastTheArena(0));
  auto s = Session(1);
  auto c = Client(LockKind::kALock, 1, s.get(), std::chrono::milliseconds(300));
  ASSERT_NE(c, nullptr);
  const absl::Status st = c->Lock(t.at(0));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
}

// The same for the RDMA MCS lock's tail word.
TEST_F(CorruptWordTest, RdmaMcsLockerRefusesATailThatNamesNoDescriptor) {
  LockTable t = Table(LockKind::kRdmaMcs);
  t.at(0).local<NicLockLine>()->word.Store(PastTheArena(0));
  auto s = Session(1);
  auto c = Client(LockKind::kRdmaMcs, 1, s.get(), std::chrono::milliseconds(300));
  ASSERT_NE(c, nullptr);
  const absl::Status st = c->Lock(t.at(0));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
}

// The RDMA MCS releaser with a successor waits for the successor's `next`
// link to name a descriptor line; one that never does (here: a line past
// the successor's node's arena) is DataLoss at the timeout, and nothing is
// written through it (kGo would go to memory that is no descriptor, and the
// successor would wait for nothing).
TEST_F(CorruptWordTest, RdmaMcsReleaserRefusesANextLinkThatNamesNoDescriptor) {
  LockTable t = Table(LockKind::kRdmaMcs);
  const RemotePtr lock = t.at(0);
  auto sa = Session(1);
  auto sb = Session(1);
  auto a = Client(LockKind::kRdmaMcs, 1, sa.get(), std::chrono::milliseconds(300));
  auto b = Client(LockKind::kRdmaMcs, 1, sb.get(), std::chrono::milliseconds(1500));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Lock(lock).ok());
  const uint64_t mine = lock.local<NicLockLine>()->word.Load();  // a's descriptor, the tail
  rdma::PlainWord& next = RemotePtr::FromRaw(mine).local<ALockDescriptor>()->next;
  absl::Status b_status;
  std::thread waiter([&] { b_status = b->Lock(lock); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (next.Load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  const uint64_t linked = next.Load();
  ASSERT_NE(linked, 0u) << "the waiter never linked in";
  next.Store(PastTheArena(1));
  const absl::Status st = a->Unlock(lock);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  waiter.join();
  EXPECT_EQ(b_status.code(), absl::StatusCode::kDeadlineExceeded) << "nobody handed b the lock: " << b_status;
}

// The RDMA spin lock's word holding this client's own token after its
// release means one of its CASes ran twice (rxe re-executing a retransmitted
// atomic): nobody will ever release it. Lock says so at once (DataLoss)
// instead of waiting out its timeout.
TEST_F(CorruptWordTest, RdmaSpinFindingItsOwnTokenIsDataLoss) {
  LockTable t = Table(LockKind::kRdmaSpin);
  const RemotePtr lock = t.at(0);
  auto s = Session(1);
  auto c = Client(LockKind::kRdmaSpin, 1, s.get(), std::chrono::seconds(5));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Lock(lock).ok());
  rdma::NicWord& word = lock.local<NicLockLine>()->word;
  const uint64_t token = word.Load();
  ASSERT_NE(token, 0u);
  ASSERT_TRUE(c->Unlock(lock).ok());
  ASSERT_EQ(word.Load(), 0u);
  word.Store(token);  // the first CAS, executed again after the release
  const auto start = std::chrono::steady_clock::now();
  const absl::Status st = c->Lock(lock);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4)) << "it waited for nobody";
}

// A releaser whose tail CAS fails has a successor that swapped itself in
// but may not have linked yet: it waits for the link, then hands over. Here
// the test is the successor: it swaps a descriptor of its own into the tail
// (as the lock's own enqueue does), lets the holder's Unlock start, and
// links 20 ms later. The hand-over must land in that descriptor.
class LinkWaitTest : public CorruptWordTest {
 protected:
  // A fresh descriptor line on node `n`, waiting.
  ALockDescriptor& Descriptor(NodeId n, RemotePtr* at) {
    *at = *cluster_->node(n).Allocate(sizeof(ALockDescriptor), 64);
    ALockDescriptor& d = *at->local<ALockDescriptor>();
    d.budget.Store(static_cast<uint64_t>(ALockDescriptor::kWaiting));
    return d;
  }
  // Unlocks `holder` on a thread, links `successor` behind `holder_line`
  // 20 ms later, and returns Unlock's status.
  absl::Status UnlockThenLink(LockClient& holder, RemotePtr lock, RemotePtr holder_line, RemotePtr successor) {
    absl::Status st;
    std::thread releasing([&] { st = holder.Unlock(lock); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    holder_line.local<ALockDescriptor>()->next.Store(successor.raw());
    releasing.join();
    return st;
  }
};

TEST_F(LinkWaitTest, ALockNativeReleaserWaitsForTheLink) {
  LockTable t = Table(LockKind::kALock);
  const RemotePtr lock = t.at(0);
  auto holder = Client(LockKind::kALock, 0, nullptr, std::chrono::seconds(5));
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->Lock(lock).ok());
  rdma::CpuWord& tail = lock.local<ALockWord>()->l_tail;
  RemotePtr d;
  ALockDescriptor& succ = Descriptor(0, &d);
  const RemotePtr mine = RemotePtr::FromRaw(tail.Swap(d.raw()));  // the successor's enqueue
  const absl::Status st = UnlockThenLink(*holder, lock, mine, d);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(succ.budget.Load(), uint64_t{kDefaultBudget - 1}) << "the hand-over did not reach the successor";
}

TEST_F(LinkWaitTest, LocalMcsReleaserWaitsForTheLink) {
  LockTable t = Table(LockKind::kLocalMcs);
  const RemotePtr lock = t.at(0);
  auto holder = Client(LockKind::kLocalMcs, 0, nullptr, std::chrono::seconds(5));
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->Lock(lock).ok());
  RemotePtr d;
  ALockDescriptor& succ = Descriptor(0, &d);
  const RemotePtr mine = RemotePtr::FromRaw(lock.local<CpuLockLine>()->tail.Swap(d.raw()));
  const absl::Status st = UnlockThenLink(*holder, lock, mine, d);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(succ.budget.Load(), 1u) << "the hand-over (kGo) did not reach the successor";
}

TEST_F(LinkWaitTest, RdmaMcsReleaserWaitsForTheLink) {
  LockTable t = Table(LockKind::kRdmaMcs);
  const RemotePtr lock = t.at(0);
  auto s = Session(1);
  auto holder = Client(LockKind::kRdmaMcs, 1, s.get(), std::chrono::seconds(5));
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->Lock(lock).ok());
  rdma::NicWord& tail = lock.local<NicLockLine>()->word;
  const RemotePtr mine = RemotePtr::FromRaw(tail.Load());
  RemotePtr d;
  ALockDescriptor& succ = Descriptor(1, &d);
  tail.Store(d.raw());  // the successor's swap (nobody else touches the word now)
  const absl::Status st = UnlockThenLink(*holder, lock, mine, d);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(succ.budget.Load(), 1u) << "the hand-over (kGo) did not reach the successor";
}

// The native gate, native threads only, native budget 1: each holder stays
// inside until the other thread is counted at the gate, so releases have a
// waiter. With no NIC thread waiting (r_tail is 0) the lease is kept past
// the budget for that waiter, never given up "for the NIC cohort". (A
// releaser that gave it up at the budget regardless would make the next
// holder run Peterson again for nobody.)
TEST(LockChecks, NativeGateKeepsItsLeasePastTheBudgetWhileNoNicThreadWaits) {
  rdma::ClusterOptions o;
  o.num_nodes = 1;
  o.node.arena_bytes = 1 << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  auto cluster = std::move(*rdma::Cluster::Create(o));
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {.local = 1, .remote = 1}});
  const RemotePtr lock = t.at(0);
  auto gate = NativeGate::Create(cluster->node(0), lock, {});
  ASSERT_TRUE(gate.ok()) << gate.status();
  const rdma::CpuWord& word = lock.local<ALockWord>()->l_tail;
  constexpr int kRuns = 200;
  std::atomic<int> done[2] = {0, 0};
  std::vector<std::thread> threads;
  for (int me = 0; me < 2; ++me) {
    threads.emplace_back([&, me] {
      for (int i = 0; i < kRuns; ++i) {
        const absl::Status s = (*gate)->Run([&] {
          // Hold until the other thread is counted at the gate (or is done).
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
          while ((word.Load() >> 8) == 0 && done[1 - me].load() < kRuns &&
                 std::chrono::steady_clock::now() < until) {
            std::this_thread::yield();
          }
          return absl::OkStatus();
        });
        ASSERT_TRUE(s.ok()) << s;
      }
      done[me].store(kRuns);
    });
  }
  for (auto& th : threads) th.join();
  const NativeGateStats& st = (*gate)->stats();
  EXPECT_EQ(st.runs, 2u * kRuns);
  EXPECT_EQ(st.nic_yields, 0u) << "gave the lease up for a NIC cohort that was not there";
  EXPECT_GT(st.lease_kept, 0u) << "no release had a waiter";
  EXPECT_EQ(word.Load(), 0u);
}

// Holds node `n`'s NIC copies: the `at`-th copied word (1-based) from now on
// blocks, in the NIC, until Release() (10 s at most); every other copy runs.
class CopyGate {
 public:
  CopyGate(rdma::Cluster& cluster, NodeId n, int at)
      : faults_(rdma::soft::AsSoftDevice(cluster.node(n).device())->faults()) {
    faults_.SetCopyHook([this, at](uint64_t) {
      if (calls_.fetch_add(1) + 1 != at) return;
      reached_.store(true);
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!released_.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    });
  }
  ~CopyGate() {
    Release();
    faults_.SetCopyHook(nullptr);
  }
  // Waits until the copy is held; false after 20 s.
  bool WaitReached() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!reached_.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    return reached_.load();
  }
  void Release() { released_.store(true); }

 private:
  rdma::soft::FaultInjector& faults_;
  std::atomic<int> calls_{0};
  std::atomic<bool> reached_{false}, released_{false};
};

// Says when a head of `cohort` has written victim and waits in Peterson.
struct WaitSignal final : ALockObserver {
  explicit WaitSignal(Cohort c) : cohort(c) {}
  void OnPetersonWait(RemotePtr, Cohort c) override {
    if (c == cohort) waiting.store(true);
  }
  const Cohort cohort;
  std::atomic<bool> waiting{false};
};

// With `byte_copies`, every NIC copies READ/WRITE payloads a byte at a time,
// as rxe does.
std::unique_ptr<rdma::Cluster> TwoSoftNodes(bool byte_copies = false) {
  rdma::ClusterOptions o;
  o.num_nodes = 2;
  o.node.arena_bytes = 2 << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  o.fabric.soft_byte_granular_copies = byte_copies;
  return std::move(*rdma::Cluster::Create(o));
}

// The NIC cohort's budget is 1. R1 (node 1) holds; R2 (node 1) queues
// behind it, its first chain reading the line while the native flag is down;
// then a native head N arrives and waits in Peterson (victim = local). R1
// hands R2 budget 0: R2 must run Peterson on the line as it is now (native
// flag up), make itself the victim and let N in first, not take the fast
// path on the line it read at its enqueue.
TEST(LockChecks, ALockNicSuccessorHandedBudgetZeroReadsTheLineAgain) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {.local = 1, .remote = 1}});
  const RemotePtr lock = t.at(0);
  const rdma::NicWord& r_tail = lock.local<ALockWord>()->r_tail;
  auto s1 = std::move(*cluster->NewSession(1));
  auto s2 = std::move(*cluster->NewSession(1));
  auto r1 = std::move(*ALockClient::Create(cluster->node(1), s1.get()));
  auto r2 = std::move(*ALockClient::Create(cluster->node(1), s2.get()));
  WaitSignal native_waits(Cohort::kLocal);
  auto native = std::move(*ALockClient::Create(cluster->node(0), nullptr, ClientOptions{}, &native_waits));
  ASSERT_TRUE(r1->Lock(lock).ok());
  const uint64_t d1 = r_tail.Load();  // R1's descriptor
  const rdma::PlainWord& d1_next = RemotePtr::FromRaw(d1).local<ALockDescriptor>()->next;
  std::atomic<bool> r2_in{false}, native_in{false};
  absl::Status r2_status, native_status;
  std::thread second([&] {
    r2_status = r2->Lock(lock);
    r2_in.store(true);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((r_tail.Load() == d1 || d1_next.Load() == 0) && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  ASSERT_NE(d1_next.Load(), 0u) << "R2 never linked behind R1";
  std::thread head([&] {
    native_status = native->Lock(lock);
    native_in.store(true);
  });
  while (!native_waits.waiting.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(native_waits.waiting.load()) << "the native head never waited";
  ASSERT_TRUE(r1->Unlock(lock).ok());  // hands R2 budget 0
  while (!native_in.load() && !r2_in.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(native_in.load()) << "the waiting native head did not get in after R1's budget ran out";
  const bool r2_first = r2_in.load();
  EXPECT_FALSE(r2_first) << "R2 entered on budget 0 ahead of the waiting native head";
  if (r2_first) {  // let the native head in, then out
    second.join();
    EXPECT_TRUE(r2->Unlock(lock).ok());
  }
  head.join();
  ASSERT_TRUE(native_status.ok()) << native_status;
  EXPECT_TRUE(native->Unlock(lock).ok());
  if (!r2_first) {
    second.join();
    ASSERT_TRUE(r2_status.ok()) << r2_status;
    EXPECT_TRUE(r2->Unlock(lock).ok());
  }
}

// ALock's native head behind a NIC holder raises its flag, writes victim =
// local and waits. The NIC holder leaves and no NIC thread follows it:
// r_tail goes to 0 while victim stays "local", so the native head must
// enter on seeing r_tail empty in its wait, not wait for a victim write
// that nobody will make.
TEST(LockChecks, ALockNativeHeadEntersOnceTheNicCohortLeaves) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const RemotePtr lock = t.at(0);
  auto s1 = std::move(*cluster->NewSession(1));
  auto nic = std::move(*ALockClient::Create(cluster->node(1), s1.get()));
  WaitSignal observer(Cohort::kLocal);
  ClientOptions o;
  o.timeout = std::chrono::seconds(5);
  auto native = std::move(*ALockClient::Create(cluster->node(0), nullptr, o, &observer));
  ASSERT_TRUE(nic->Lock(lock).ok());
  std::atomic<bool> in{false};
  absl::Status st;
  std::thread waiter([&] {
    st = native->Lock(lock);
    in.store(true);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!observer.waiting.load() && !in.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(observer.waiting.load()) << "the native head never waited for the NIC holder";
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // it keeps checking, and stays out
  EXPECT_FALSE(in.load()) << "the native head entered while the NIC holder held the lock";
  ASSERT_TRUE(nic->Unlock(lock).ok());
  waiter.join();
  ASSERT_TRUE(st.ok()) << "the native head did not enter after the NIC cohort left: " << st;
  EXPECT_TRUE(native->Unlock(lock).ok());
}

// The NIC locker R (node 1) chains {CAS r_tail 0 -> R, READ line}; the CAS
// fails (X, a loopback thread, holds the lock) and the READ sees the native
// flag down. Held there by the copy hook, X leaves and a native thread takes
// the lock (fast path: r_tail is 0). R's swap then finds r_tail 0, so R
// heads its cohort: it must read the line again, see the native flag up and
// wait in Peterson, not enter on the line it read before its flag went up.
TEST(LockChecks, ALockNicLockerReadsTheLineAgainWhenItsSwapFindsTheQueueEmpty) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const RemotePtr lock = t.at(0);
  auto s0 = std::move(*cluster->NewSession(0));
  auto s1 = std::move(*cluster->NewSession(1));
  auto x = std::move(*ALockClient::Create(cluster->node(0), s0.get()));
  auto native = std::move(*ALockClient::Create(cluster->node(0), nullptr));
  WaitSignal observer(Cohort::kRemote);
  auto r = std::move(*ALockClient::Create(cluster->node(1), s1.get(), ClientOptions{}, &observer));
  ASSERT_TRUE(x->Lock(lock, Path::kLoopback).ok());
  std::atomic<bool> in{false};
  absl::Status r_status;
  std::optional<CopyGate> hold;
  hold.emplace(*cluster, 0, /*at=*/8);  // the last word of R's line READ
  std::thread locker([&] {
    r_status = r->Lock(lock);
    in.store(true);
  });
  ASSERT_TRUE(hold->WaitReached()) << "R's first chain never reached its line READ";
  ASSERT_TRUE(x->Unlock(lock).ok());
  ASSERT_TRUE(native->Lock(lock).ok());
  hold->Release();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!in.load() && !observer.waiting.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  EXPECT_FALSE(in.load()) << "R entered while the native thread held the lock: " << r_status;
  EXPECT_TRUE(observer.waiting.load()) << "R never waited for the native holder";
  ASSERT_TRUE(native->Unlock(lock).ok());
  locker.join();
  hold.reset();
  ASSERT_TRUE(r_status.ok()) << r_status;
  EXPECT_TRUE(r->Unlock(lock).ok());
}

// The same gap with READs chained behind the acquire (LockAndRead): they ran
// while X held the lock, and X changed the word they read before leaving.
// R's swap finds the queue empty and R enters on the fast path; its chained
// READs must not count as read by the holder.
TEST(LockChecks, ALockChainedReadsBeforeTheLockAreNotReportedAsTheHolders) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const RemotePtr lock = t.at(0);
  const RemotePtr data = *cluster->node(0).Allocate(64);
  rdma::PlainWord& word = *data.local<rdma::PlainWord>();
  auto s0 = std::move(*cluster->NewSession(0));
  auto s1 = std::move(*cluster->NewSession(1));
  auto x = std::move(*ALockClient::Create(cluster->node(0), s0.get()));
  auto r = std::move(*ALockClient::Create(cluster->node(1), s1.get()));
  ASSERT_TRUE(x->Lock(lock, Path::kLoopback).ok());
  uint64_t seen = ~uint64_t{0};
  bool also_done = false;
  absl::Status r_status;
  std::optional<CopyGate> hold;
  hold.emplace(*cluster, 0, /*at=*/9);  // R's chained READ of `data`, after the line's 8 words
  std::thread locker([&] {
    const rdma::ChainedRead also[] = {{data, &seen, 8}};
    r_status = r->LockAndRead(lock, Path::kAuto, also, &also_done);
  });
  ASSERT_TRUE(hold->WaitReached()) << "R's first chain never reached its chained READ";
  word.Store(1);  // X's critical section
  ASSERT_TRUE(x->Unlock(lock).ok());
  hold->Release();
  locker.join();
  hold.reset();
  ASSERT_TRUE(r_status.ok()) << r_status;
  EXPECT_FALSE(also_done) << "R took its chained READ (" << seen << "; X wrote 1 after it) as read by the holder";
  EXPECT_TRUE(r->Unlock(lock).ok());
}

// The native gate's lease lasts only while native threads are counted: a
// release with nobody waiting lowers the flag (l_tail 0) and ends the lease.
// A NIC thread then takes the lock on its fast path (it sees l_tail 0), and
// the next native Run must win Peterson again: it waits for the NIC holder
// instead of running its step on a lease that ended with the flag.
TEST(LockChecks, NativeGateLeaseEndsWhenItsFlagGoesDown) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const RemotePtr lock = t.at(0);
  ClientOptions o;
  o.timeout = std::chrono::seconds(10);
  auto gate = std::move(*NativeGate::Create(cluster->node(0), lock, o));
  const rdma::CpuWord& flag = lock.local<ALockWord>()->l_tail;
  ASSERT_TRUE(gate->Run([] { return absl::OkStatus(); }).ok());  // nobody waits: flag down
  ASSERT_EQ(flag.Load(), 0u);
  auto s1 = std::move(*cluster->NewSession(1));
  auto nic = std::move(*ALockClient::Create(cluster->node(1), s1.get()));
  ASSERT_TRUE(nic->Lock(lock).ok());
  std::atomic<bool> ran{false}, nic_holds{true}, overlapped{false};
  std::thread native([&] {
    EXPECT_TRUE(gate->Run([&] {
                      ran.store(true);
                      if (nic_holds.load()) overlapped.store(true);
                      return absl::OkStatus();
                    })
                    .ok());
  });
  // Once the native thread has raised its flag (taken the gate), give it
  // time to run its step if it (wrongly) does so at once.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (flag.Load() == 0 && !ran.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  nic_holds.store(false);
  ASSERT_TRUE(nic->Unlock(lock).ok());
  native.join();
  EXPECT_FALSE(overlapped.load()) << "the native step ran while the NIC thread held the lock";
  EXPECT_TRUE(ran.load());
  EXPECT_EQ(gate->stats().lease_acquires, 2u) << "the second Run did not win Peterson again";
  EXPECT_EQ(flag.Load(), 0u);
}

// A gate waiter un-counts itself (to time out, or to park) with a CAS whose
// expected value is the word it last saw, held bit set: only while the gate
// is held. A holder that leaves between that look and the CAS leaves the
// gate to the waiter, which is still counted (the release keeps the flag up
// for it, and may keep the lease for it), so the CAS must fail and the
// waiter take the gate. A waiter that un-counted itself anyway would leave
// the word at kPresent: the native flag up with no native thread left to
// lower it, and every NIC thread kept out for good. The test holds the gate
// by writing the word; the gate's own wait (gate_internal::AwaitGate, what
// NativeGate::Enter runs) runs on the test's thread, and its hook places the
// holder's release right before the un-count CAS. No NIC is involved.
namespace gi = gate_internal;

// What NativeGate::Leave does with one waiter counted: clears the held bit,
// the flag stays up.
void LeaveToTheOneWaiter(rdma::CpuWord& word) {
  uint64_t st = word.Load();
  ASSERT_EQ(st, gi::kPresent | gi::kHeld | gi::kOneWaiter);
  ASSERT_TRUE(word.CompareExchange(st, st - gi::kHeld, std::memory_order_seq_cst));
}

// The waiter's timeout passes (1 ms) while the gate is held; the holder
// leaves just before the waiter's un-count CAS.
TEST(LockChecks, NativeGateWaiterTimingOutAsTheHolderLeavesTakesTheGate) {
  rdma::CpuWord word(gi::kPresent | gi::kHeld);
  std::atomic<uint64_t> parks{0};
  const gi::WaitOptions wait{std::chrono::milliseconds(1), std::chrono::microseconds(0), &parks};
  std::vector<gi::Uncount> hooks;
  const bool took = gi::AwaitGate(word, word.Load(), wait, [&](gi::Uncount u) {
    hooks.push_back(u);
    if (hooks.size() == 1) LeaveToTheOneWaiter(word);
  });
  EXPECT_EQ(hooks, std::vector<gi::Uncount>{gi::Uncount::kTimedOut});
  EXPECT_TRUE(took) << "the waiter timed out although the holder had left the gate to it";
  EXPECT_EQ(word.Load(), gi::kPresent | gi::kHeld) << "the word should say: held by the waiter, nobody waiting";
}

// A parking waiter (park 5 ms, timeout 1 ms): its first un-count happens
// while the gate is held, and it sleeps past its timeout. Counted again, it
// is about to park a second time when the holder leaves.
TEST(LockChecks, NativeGateWaiterParkingAsTheHolderLeavesTakesTheGate) {
  rdma::CpuWord word(gi::kPresent | gi::kHeld);
  std::atomic<uint64_t> parks{0};
  const gi::WaitOptions wait{std::chrono::milliseconds(1), std::chrono::microseconds(5000), &parks};
  std::vector<gi::Uncount> hooks;
  const bool took = gi::AwaitGate(word, word.Load(), wait, [&](gi::Uncount u) {
    hooks.push_back(u);
    if (hooks.size() == 2) LeaveToTheOneWaiter(word);
  });
  EXPECT_EQ(hooks, (std::vector<gi::Uncount>{gi::Uncount::kParking, gi::Uncount::kParking}));
  EXPECT_EQ(parks.load(), 1u);
  EXPECT_TRUE(took) << "the waiter gave up although the holder had left the gate to it";
  EXPECT_EQ(word.Load(), gi::kPresent | gi::kHeld) << "the word should say: held by the waiter, nobody waiting";
}

// The RDMA MCS waiter takes the lock only on exactly kGo: a hand-over WRITE
// seen half landed (byte-by-byte copies, as rxe's) is not yet the lock.
// Held by the copy hook after its first byte, the WRITE leaves the waiter's
// word at 0xff..ff01, and the waiter must go on waiting. (A waiter that went
// on would let the rest of the WRITE land later, over the reset of its next
// acquire, which would then read a "go" nobody sent.)
TEST(LockChecks, RdmaMcsWaiterWaitsForTheWholeHandOver) {
  auto cluster = TwoSoftNodes(/*byte_copies=*/true);
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kRdmaMcs, {}});
  const RemotePtr lock = t.at(0);
  auto s0 = std::move(*cluster->NewSession(0));
  auto s1 = std::move(*cluster->NewSession(1));
  ClientOptions o;
  o.timeout = std::chrono::seconds(20);
  auto holder = std::move(*RdmaMcsClient::Create(cluster->node(0), s0.get(), o));
  auto waiter = std::move(*RdmaMcsClient::Create(cluster->node(1), s1.get(), o));
  ASSERT_TRUE(holder->Lock(lock).ok());
  const rdma::NicWord& tail = lock.local<NicLockLine>()->word;
  const uint64_t mine = tail.Load();
  std::atomic<bool> in{false};
  absl::Status waiter_status;
  std::thread waiting([&] {
    waiter_status = waiter->Lock(lock);
    in.store(true);
  });
  // The waiter swapped itself in and its link WRITE landed whole.
  const rdma::PlainWord& next = RemotePtr::FromRaw(mine).local<ALockDescriptor>()->next;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((tail.Load() == mine || next.Load() != tail.Load()) && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  const uint64_t theirs = tail.Load();
  ASSERT_NE(theirs, mine) << "the waiter never swapped itself in";
  ASSERT_EQ(next.Load(), theirs) << "the waiter's link never landed";
  const rdma::PlainWord& go = RemotePtr::FromRaw(theirs).local<ALockDescriptor>()->budget;
  std::optional<CopyGate> hold;
  hold.emplace(*cluster, 1, /*at=*/1);  // node 1's next copied byte: the hand-over's first
  absl::Status unlock_status;
  std::thread releasing([&] { unlock_status = holder->Unlock(lock); });
  ASSERT_TRUE(hold->WaitReached()) << "the hand-over WRITE never started";
  EXPECT_EQ(go.Load(), 0xffffffffffffff01u) << "not the hand-over's first byte";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(in.load()) << "the waiter took the lock on a half-landed hand-over";
  hold->Release();
  releasing.join();
  waiting.join();
  hold.reset();
  EXPECT_TRUE(unlock_status.ok()) << unlock_status;
  ASSERT_TRUE(waiter_status.ok()) << waiter_status;
  EXPECT_TRUE(waiter->Unlock(lock).ok());
}

}  // namespace
}  // namespace locks::testing
