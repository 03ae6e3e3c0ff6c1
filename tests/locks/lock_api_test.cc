// The lock interface and per-acquire costs: uncontended NIC-op / round-trip
// counts of every lock on every path (docs/design.md §8 targets), API errors, timeouts
// instead of hangs, NIC failures surfacing as Status, several held locks.

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "locks/internal.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"

namespace locks {
namespace {

using rdma::NodeId;
using rdma::RemotePtr;

class LockApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdma::ClusterOptions o;
    o.named_bytes = 0;  // no named structures: nothing registered for them
    o.num_nodes = 2;
    o.node.arena_bytes = 2 << 20;
    o.fabric.kind = rdma::FabricKind::kSoft;
    cluster_ = std::move(*rdma::Cluster::Create(o));
  }
  std::unique_ptr<rdma::Session> Session(NodeId n) { return std::move(*cluster_->NewSession(n)); }
  LockTable Table(NodeId n, LockKind kind, size_t count = 4, Budgets b = {}) {
    auto t = LockTable::Create(cluster_->node(n), count, {kind, b});
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  }
  std::unique_ptr<LockClient> Client(LockKind kind, NodeId n, rdma::Session* s, ClientOptions o = {}) {
    auto c = NewLockClient(kind, cluster_->node(n), s, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // Costs of one uncontended Lock+Unlock.
  rdma::OpCounters Cost(LockClient& c, RemotePtr lock, Path path) {
    const rdma::OpCounters before = rdma::ThisThreadCounters();
    EXPECT_TRUE(c.Lock(lock, path).ok());
    EXPECT_TRUE(c.Unlock(lock).ok());
    return rdma::ThisThreadCounters() - before;
  }
  std::unique_ptr<rdma::Cluster> cluster_;
};

TEST_F(LockApiTest, ALockUncontendedNativeUsesNoNicOperation) {
  LockTable t = Table(0, LockKind::kALock);
  auto s = Session(0);  // has a session, but must not use it
  auto c = Client(LockKind::kALock, 0, s.get());
  for (int i = 0; i < 3; ++i) {
    const rdma::OpCounters cost = Cost(*c, t.at(i), Path::kAuto);
    EXPECT_EQ(cost, rdma::OpCounters{}) << "nic_ops " << cost.nic_ops;
  }
  // Also without any session at all.
  auto bare = Client(LockKind::kALock, 0, nullptr);
  EXPECT_EQ(Cost(*bare, t.at(0), Path::kAuto), rdma::OpCounters{});
}

// Target: <= 4 NIC ops in <= 3 waited round trips. The fast path does better:
// {CAS r_tail, fenced READ line} + CAS r_tail back = 3 ops, 2 round trips.
TEST_F(LockApiTest, ALockUncontendedRemoteAndLoopbackCostThreeOpsTwoRoundTrips) {
  LockTable t = Table(0, LockKind::kALock);
  for (auto [node, path] : {std::pair{NodeId{1}, Path::kAuto}, std::pair{NodeId{0}, Path::kLoopback}}) {
    auto s = Session(node);
    auto c = Client(LockKind::kALock, node, s.get());
    for (int i = 0; i < 3; ++i) {
      const rdma::OpCounters cost = Cost(*c, t.at(i), path);
      EXPECT_EQ(cost.nic_ops, 3u) << "node " << node;
      EXPECT_EQ(cost.round_trips, 2u) << "node " << node;
      EXPECT_EQ(cost.doorbells, 2u) << "node " << node;
      EXPECT_LE(cost.nic_ops, 4u);
      EXPECT_LE(cost.round_trips, 3u);
    }
  }
}

TEST_F(LockApiTest, BaselineUncontendedCosts) {
  LockTable spin = Table(0, LockKind::kRdmaSpin), mcs = Table(0, LockKind::kRdmaMcs),
            local = Table(0, LockKind::kLocalMcs);
  for (NodeId node : {NodeId{0}, NodeId{1}}) {
    auto s = Session(node);
    auto cs = Client(LockKind::kRdmaSpin, node, s.get());
    auto cm = Client(LockKind::kRdmaMcs, node, s.get());
    // Every thread goes through the NIC, local ones (loopback) too.
    rdma::OpCounters a = Cost(*cs, spin.at(0), Path::kAuto), b = Cost(*cm, mcs.at(0), Path::kAuto);
    EXPECT_EQ(a.nic_ops, 2u);
    EXPECT_EQ(a.round_trips, 2u);
    EXPECT_EQ(b.nic_ops, 2u);
    EXPECT_EQ(b.round_trips, 2u);
  }
  auto cl = Client(LockKind::kLocalMcs, 0, nullptr);
  EXPECT_EQ(Cost(*cl, local.at(0), Path::kAuto), rdma::OpCounters{});
}

TEST_F(LockApiTest, ContendedHandoverAcrossPathsWorksForEveryKind) {
  for (LockKind kind : {LockKind::kALock, LockKind::kRdmaSpin, LockKind::kRdmaMcs}) {
    LockTable t = Table(0, kind, 1);
    auto s0 = Session(0);
    auto native = Client(kind, 0, s0.get());
    ASSERT_TRUE(native->Lock(t.at(0)).ok());
    std::atomic<int> phase{0};
    std::thread remote([&] {
      auto s1 = Session(1);
      auto c = Client(kind, 1, s1.get());
      phase = 1;
      ASSERT_TRUE(c->Lock(t.at(0)).ok());
      phase = 2;
      ASSERT_TRUE(c->Unlock(t.at(0)).ok());
    });
    while (phase.load() == 0) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(phase.load(), 1) << LockKindName(kind) << ": the remote thread got in while the lock was held";
    ASSERT_TRUE(native->Unlock(t.at(0)).ok());
    remote.join();
    EXPECT_EQ(phase.load(), 2);
  }
}

TEST_F(LockApiTest, HoldsSeveralLocksOnSeveralPaths) {
  LockTable t0 = Table(0, LockKind::kALock), t1 = Table(1, LockKind::kALock);
  auto s = Session(0);
  auto c = Client(LockKind::kALock, 0, s.get());
  ASSERT_TRUE(c->Lock(t0.at(0)).ok());                  // native
  ASSERT_TRUE(c->Lock(t0.at(1), Path::kLoopback).ok());  // loopback
  ASSERT_TRUE(c->Lock(t1.at(0)).ok());                  // remote
  EXPECT_TRUE(c->Holds(t0.at(0)) && c->Holds(t0.at(1)) && c->Holds(t1.at(0)));
  EXPECT_EQ(c->CohortFor(t0.at(0)), Cohort::kLocal);
  EXPECT_EQ(c->CohortFor(t0.at(1), Path::kLoopback), Cohort::kRemote);
  EXPECT_EQ(c->CohortFor(t1.at(0)), Cohort::kRemote);
  EXPECT_TRUE(c->Unlock(t1.at(0)).ok());
  EXPECT_TRUE(c->Unlock(t0.at(1)).ok());
  EXPECT_TRUE(c->Unlock(t0.at(0)).ok());
  EXPECT_FALSE(c->Holds(t0.at(0)));
}

TEST_F(LockApiTest, MisuseIsAnErrorNotAHang) {
  LockTable t = Table(0, LockKind::kALock);
  auto s1 = Session(1);
  ClientOptions o;
  o.max_held = 2;
  for (LockKind kind : {LockKind::kALock, LockKind::kRdmaSpin, LockKind::kRdmaMcs}) {
    auto c = Client(kind, 1, s1.get(), o);
    ASSERT_TRUE(c->Lock(t.at(0)).ok());
    EXPECT_EQ(c->Lock(t.at(0)).code(), absl::StatusCode::kFailedPrecondition) << "reentrant";
    ASSERT_TRUE(c->Lock(t.at(1)).ok());
    EXPECT_EQ(c->Lock(t.at(2)).code(), absl::StatusCode::kResourceExhausted) << "max_held";
    EXPECT_EQ(c->Unlock(t.at(3)).code(), absl::StatusCode::kFailedPrecondition) << "not held";
    EXPECT_EQ(c->Lock(RemotePtr()).code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c->Lock(t.at(0) + 8).code(), absl::StatusCode::kInvalidArgument) << "misaligned";
    EXPECT_EQ(c->Lock(RemotePtr(7, t.at(0).address())).code(), absl::StatusCode::kInvalidArgument) << "no node 7";
    ASSERT_TRUE(c->Unlock(t.at(0)).ok());
    ASSERT_TRUE(c->Unlock(t.at(1)).ok());
  }
  // NIC path without a session.
  auto bare = Client(LockKind::kALock, 1, nullptr);
  EXPECT_EQ(bare->Lock(t.at(0)).code(), absl::StatusCode::kFailedPrecondition);
  auto bare0 = Client(LockKind::kALock, 0, nullptr);
  EXPECT_EQ(bare0->Lock(t.at(0), Path::kLoopback).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(NewLockClient(LockKind::kRdmaMcs, cluster_->node(1), nullptr).ok());
  EXPECT_FALSE(NewLockClient(LockKind::kALock, cluster_->node(0), s1.get()).ok()) << "session of another node";
  // local-mcs is native-only.
  auto lm = Client(LockKind::kLocalMcs, 1, nullptr);
  EXPECT_EQ(lm->Lock(t.at(0)).code(), absl::StatusCode::kFailedPrecondition);
  auto lm0 = Client(LockKind::kLocalMcs, 0, nullptr);
  EXPECT_EQ(lm0->Lock(t.at(0), Path::kLoopback).code(), absl::StatusCode::kFailedPrecondition);
  // Budgets are validated; InitLock only on the owning node.
  EXPECT_FALSE(LockTable::Create(cluster_->node(0), 1, {LockKind::kALock, {0, 5}}).ok());
  EXPECT_FALSE(InitLock(t.at(0), 1, {LockKind::kALock, {}}).ok());
  EXPECT_EQ(ParseLockKind("nope").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseLockKind("rdma-mcs"), LockKind::kRdmaMcs);
}

TEST_F(LockApiTest, WaitingTooLongIsDeadlineExceeded) {
  ClientOptions fast;
  fast.timeout = std::chrono::milliseconds(50);
  for (LockKind kind : {LockKind::kALock, LockKind::kRdmaSpin, LockKind::kRdmaMcs, LockKind::kLocalMcs}) {
    for (NodeId waiter_node : {NodeId{0}, NodeId{1}}) {
      if (kind == LockKind::kLocalMcs && waiter_node == 1) continue;
      LockTable t = Table(0, kind, 1);
      auto s0 = Session(0);
      auto holder = Client(kind, 0, s0.get());
      ASSERT_TRUE(holder->Lock(t.at(0)).ok());
      absl::Status st;
      std::thread waiter([&] {
        auto s = Session(waiter_node);
        auto c = Client(kind, waiter_node, s.get(), fast);
        st = c->Lock(t.at(0));
      });
      waiter.join();
      EXPECT_EQ(st.code(), absl::StatusCode::kDeadlineExceeded) << LockKindName(kind) << " from " << waiter_node
                                                                << ": " << st;
      // The lock is now poisoned by the abandoned waiter (documented); drop it.
    }
  }
}

// A client whose wait for lock L1 timed out left its descriptor in L1's
// queue; its next lock, L2, must not use that descriptor: when L1's holder
// then unlocks, its hand-over goes to the abandoned descriptor, and with the
// descriptor reused the client would "get" L2 while L2's holder still holds
// it. The client takes L2 only when L2's holder unlocks. Native and NIC
// waiters, for every queue lock.
TEST_F(LockApiTest, ADescriptorLeftInAQueueIsNeverReused) {
  struct Case {
    LockKind kind;
    NodeId waiter;
  };
  for (Case c : {Case{LockKind::kALock, 0}, Case{LockKind::kALock, 1}, Case{LockKind::kLocalMcs, 0},
                 Case{LockKind::kRdmaMcs, 1}}) {
    SCOPED_TRACE(absl::StrCat(LockKindName(c.kind), " waiter on node ", c.waiter));
    LockTable t = Table(0, c.kind, 2);
    auto s0 = Session(0);
    auto s0b = Session(0);
    auto sw = Session(c.waiter);
    auto a = Client(c.kind, 0, s0.get());   // holds L1
    auto b = Client(c.kind, 0, s0b.get());  // holds L2
    ClientOptions o;
    o.timeout = std::chrono::milliseconds(300);
    o.max_held = 1;  // one slot: the retry must not take the abandoned line
    auto w = Client(c.kind, c.waiter, sw.get(), o);
    ASSERT_TRUE(a && b && w);
    ASSERT_TRUE(a->Lock(t.at(0)).ok());
    ASSERT_TRUE(b->Lock(t.at(1)).ok());
    EXPECT_EQ(w->Lock(t.at(0)).code(), absl::StatusCode::kDeadlineExceeded);  // left in L1's queue
    std::atomic<bool> got{false};
    absl::Status st;
    std::thread waiter([&] {
      st = w->Lock(t.at(1));
      got = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // L1's holder hands over to its successor: the abandoned descriptor.
    const absl::Status unlock_a = a->Unlock(t.at(0));
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    EXPECT_FALSE(got.load()) << "took L2 while its holder held it: " << st;
    ASSERT_TRUE(b->Unlock(t.at(1)).ok());
    waiter.join();
    EXPECT_TRUE(st.ok()) << st;
    if (st.ok()) EXPECT_TRUE(w->Unlock(t.at(1)).ok());
    (void)unlock_a;  // handing L1 to an abandoned waiter may succeed or fail; L1 is unusable now
  }
}

// The retire rule behind the test above (DescriptorLines::
// RetireAfterFailedLock): a failed native attempt always retires its line
// (the swap into l_tail is its first step); a failed NIC attempt only if it
// rang a doorbell since its mark, so attempts that fail before posting
// anything (bad input, a QP in error) leak no line. A retired slot gets a
// fresh line; the old one is never handed out again.
TEST_F(LockApiTest, AFailedAttemptRetiresItsLineOnlyIfItMayHaveQueuedIt) {
  lock_internal::DescriptorLines lines;
  ASSERT_TRUE(lines.Allocate(cluster_->node(0), 2).ok());
  const RemotePtr first = lines[0];

  uint64_t mark = lock_internal::DescriptorLines::AttemptMark();
  lines.RetireAfterFailedLock(0, /*native=*/false, mark);  // nothing posted
  EXPECT_EQ(lines.retired(), 0);
  EXPECT_EQ(lines[0], first);

  auto s = Session(1);
  uint64_t word = 0;
  mark = lock_internal::DescriptorLines::AttemptMark();
  ASSERT_TRUE(s->Read(lines[1], &word, 8).ok());  // one doorbell: "may have swapped"
  lines.RetireAfterFailedLock(0, /*native=*/false, mark);
  EXPECT_EQ(lines.retired(), 1);
  const RemotePtr second = lines[0];
  EXPECT_NE(second, first);
  EXPECT_TRUE(lines.usable(0));

  mark = lock_internal::DescriptorLines::AttemptMark();
  lines.RetireAfterFailedLock(0, /*native=*/true, mark);  // native: always
  EXPECT_EQ(lines.retired(), 2);
  EXPECT_NE(lines[0], second);
  EXPECT_NE(lines[0], first);
  EXPECT_EQ(lines[1], first + lock_internal::DescriptorLines::kLineBytes);  // slot 1 untouched
}

// spins_before_yield = 0 means "yield at once", not "time out at once": a
// waiter behind a holder that leaves after 50 ms gets the lock (the deadline
// is set at the first yield, also with 0, so no wait fails at its 16th poll).
TEST_F(LockApiTest, YieldingAtOnceStillWaitsTheWholeTimeout) {
  ClientOptions o;
  o.spins_before_yield = 0;
  o.timeout = std::chrono::seconds(5);
  for (LockKind kind : {LockKind::kALock, LockKind::kRdmaSpin, LockKind::kRdmaMcs, LockKind::kLocalMcs}) {
    LockTable t = Table(0, kind, 1);
    auto s0 = Session(0);
    auto s1 = Session(0);
    auto holder = Client(kind, 0, s0.get());
    auto waiter = Client(kind, 0, s1.get(), o);
    ASSERT_TRUE(holder && waiter);
    ASSERT_TRUE(holder->Lock(t.at(0)).ok());
    std::thread release([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      EXPECT_TRUE(holder->Unlock(t.at(0)).ok());
    });
    const absl::Status st = waiter->Lock(t.at(0));
    release.join();
    EXPECT_TRUE(st.ok()) << LockKindName(kind) << ": " << st;
    if (st.ok()) EXPECT_TRUE(waiter->Unlock(t.at(0)).ok());
  }
}

TEST_F(LockApiTest, NicFailureMidAcquireSurfacesAsStatus) {
  LockTable t = Table(0, LockKind::kALock);
  auto s = Session(1);
  auto c = Client(LockKind::kALock, 1, s.get());
  auto* dev = rdma::soft::AsSoftDevice(cluster_->node(1).device());
  ASSERT_NE(dev, nullptr);
  dev->faults().FailNthOperation(2);  // the fenced READ chained after the r_tail CAS
  absl::Status st = c->Lock(t.at(0));
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(c->Holds(t.at(0)));
  dev->Kill();
  EXPECT_FALSE(c->Lock(t.at(1)).ok());
}

TEST_F(LockApiTest, LockGuardReleases) {
  LockTable t = Table(0, LockKind::kALock);
  auto s = Session(1);
  auto c = Client(LockKind::kALock, 1, s.get());
  {
    LockGuard g(*c, t.at(0));
    ASSERT_TRUE(g.ok());
    EXPECT_TRUE(c->Holds(t.at(0)));
  }
  EXPECT_FALSE(c->Holds(t.at(0)));
  LockGuard g(*c, t.at(0));
  EXPECT_TRUE(g.Release().ok());
  EXPECT_TRUE(g.Release().ok());  // idempotent
}

TEST_F(LockApiTest, ALockNativeAndRemoteStatsSeeBudgetsFromTheLine) {
  LockTable t = Table(0, LockKind::kALock, 1, {3, 2});
  auto s = Session(1);
  auto c = ALockClient::Create(cluster_->node(1), s.get());
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Lock(t.at(0)).ok());
  ASSERT_TRUE((*c)->Unlock(t.at(0)).ok());
  EXPECT_EQ((*c)->stats().acquires[1], 1u);
  EXPECT_EQ((*c)->stats().peterson_runs[1], 1u);
  EXPECT_EQ((*c)->stats().peterson_fast[1], 1u);
  EXPECT_EQ((*c)->stats().peterson_waits[1], 0u);
}

TEST_F(LockApiTest, ALockRemoteWaitsForANativeHolderThenEntersAfterIt) {
  // The full Peterson path: the local cohort is present, so the remote head
  // writes victim, reads the line, and polls until the native releases.
  LockTable t = Table(0, LockKind::kALock);
  auto native = Client(LockKind::kALock, 0, nullptr);
  ASSERT_TRUE(native->Lock(t.at(0)).ok());
  std::atomic<bool> in{false};
  ALockStats stats;
  // Tells the test when the remote head has written victim and waits (a
  // fixed sleep is not enough on a loaded machine under TSan).
  struct WaitSignal final : ALockObserver {
    void OnPetersonWait(RemotePtr, Cohort c) override {
      if (c == Cohort::kRemote) waiting = true;
    }
    std::atomic<bool> waiting{false};
  } observer;
  std::thread remote([&] {
    auto s = Session(1);
    auto c = std::move(*ALockClient::Create(cluster_->node(1), s.get(), ClientOptions{}, &observer));
    ASSERT_TRUE(c->Lock(t.at(0)).ok());
    in = true;
    ASSERT_TRUE(c->Unlock(t.at(0)).ok());
    stats = c->stats();
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!observer.waiting && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(observer.waiting.load()) << "the remote head never reached Peterson's wait";
  std::this_thread::sleep_for(std::chrono::milliseconds(10));  // it keeps polling, and stays out
  EXPECT_FALSE(in.load());
  ASSERT_TRUE(native->Unlock(t.at(0)).ok());
  remote.join();
  EXPECT_TRUE(in.load());
  EXPECT_EQ(stats.peterson_waits[1], 1u);
  EXPECT_EQ(stats.peterson_fast[1], 0u);
}

// Start-up refuses to put NIC-atomic locks on a device without RDMA atomics.
TEST_F(LockApiTest, LockTableRefusesADeviceWithoutRdmaAtomics) {
  rdma::soft::AsSoftDevice(cluster_->node(1).device())->SetAtomicsSupported(false);
  for (LockKind kind : {LockKind::kALock, LockKind::kRdmaSpin, LockKind::kRdmaMcs}) {
    auto t = LockTable::Create(cluster_->node(1), 4, {kind, {}});
    ASSERT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << LockKindName(kind) << ": " << t.status();
    EXPECT_NE(t.status().message().find("device soft1"), std::string::npos) << t.status();
    EXPECT_NE(t.status().message().find("atomic_cap=NONE"), std::string::npos) << t.status();
    EXPECT_NE(t.status().message().find("CAS"), std::string::npos) << t.status();
  }
  // CPU-only locks and devices with atomics are unaffected.
  EXPECT_TRUE(LockTable::Create(cluster_->node(1), 4, {LockKind::kLocalMcs, {}}).ok());
  EXPECT_TRUE(LockTable::Create(cluster_->node(0), 4, {LockKind::kALock, {}}).ok());
  // And the device itself rejects atomic WRs, as verbs would.
  auto s = Session(0);
  RemotePtr w = *cluster_->node(0).Allocate(8);
  rdma::soft::AsSoftDevice(cluster_->node(0).device())->SetAtomicsSupported(false);
  EXPECT_EQ(s->FetchAndAdd(w, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s->Write64(w, 1).ok());
}

}  // namespace
}  // namespace locks
