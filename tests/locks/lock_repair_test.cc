// Crash repair of the locks whose NIC word names its holder, RDMA spin and
// ALock (locks::RepairDeadHolder; docs/design.md §4, §5 "Failures and
// repair"): the lock's home releases a lock whose token names a dead node,
// exactly once, never a live holder's; waiters behind the dead holder, NIC
// and native, get in; a client whose token was taken learns it at Unlock.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"

namespace locks {
namespace {

uint64_t Word(rdma::RemotePtr lock) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(lock.address()), __ATOMIC_ACQUIRE);
}

// Three soft nodes, a table of locks on node 0 (the home), and the test
// thread's session on each node.
class LockRepairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdma::ClusterOptions o;
    o.num_nodes = 3;
    o.named_bytes = 0;
    o.fabric.kind = rdma::FabricKind::kSoft;
    auto made = rdma::Cluster::Create(o);
    ASSERT_TRUE(made.ok()) << made.status();
    c = std::move(*made);
    for (rdma::NodeId n = 0; n < 3; ++n) {
      auto s = c->ThisThread(n);
      ASSERT_TRUE(s.ok()) << s.status();
      sessions[n] = std::move(*s);
    }
  }
  // `count` locks of `kind` on node 0.
  std::vector<rdma::RemotePtr> Locks(LockKind kind, size_t count) {
    auto t = LockTable::Create(c->node(0), count, {kind});
    EXPECT_TRUE(t.ok()) << t.status();
    std::vector<rdma::RemotePtr> locks;
    if (!t.ok()) return locks;
    for (size_t i = 0; i < count; ++i) locks.push_back(t->at(i));
    tables.push_back(std::move(*t));
    return locks;
  }
  std::unique_ptr<LockClient> Client(LockKind kind, rdma::NodeId node, bool with_session = true,
                                     ClientOptions options = {}) {
    auto client = NewLockClient(kind, c->node(node), with_session ? sessions[node].get() : nullptr, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }
  rdma::Session& home() { return *sessions[0]; }
  void Kill(rdma::NodeId node) { rdma::soft::AsSoftDevice(c->node(node).device())->Kill(); }

  std::unique_ptr<rdma::Cluster> c;
  std::unique_ptr<rdma::Session> sessions[3];
  std::vector<LockTable> tables;
};

TEST_F(LockRepairTest, RepairReleasesOnlyADeadHoldersSpinLockAndOnlyOnce) {
  const std::vector<rdma::RemotePtr> locks = Locks(LockKind::kRdmaSpin, 2);
  ASSERT_EQ(locks.size(), 2u);
  const rdma::RemotePtr live_lock = locks[0], dead_lock = locks[1];
  auto live = Client(LockKind::kRdmaSpin, 1);
  auto dying = Client(LockKind::kRdmaSpin, 2);
  auto at_home = Client(LockKind::kRdmaSpin, 0);
  ASSERT_TRUE(live && dying && at_home);
  ASSERT_TRUE(live->Lock(live_lock).ok());
  ASSERT_TRUE(dying->Lock(dead_lock).ok());
  const uint64_t live_token = Word(live_lock);
  EXPECT_EQ(live_token >> 48, 1u);
  EXPECT_EQ(Word(dead_lock) >> 48, 2u);
  Kill(2);
  ASSERT_FALSE(c->PeerStatus(2).ok());

  // Not the dead node's: untouched.
  auto r = RepairDeadHolder(LockKind::kRdmaSpin, home(), live_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  EXPECT_EQ(Word(live_lock), live_token);
  // The dead node's: released, once.
  r = RepairDeadHolder(LockKind::kRdmaSpin, home(), dead_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Word(dead_lock), 0u);
  r = RepairDeadHolder(LockKind::kRdmaSpin, home(), dead_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  // A live client takes it; a late repair leaves the new holder alone.
  ASSERT_TRUE(at_home->Lock(dead_lock).ok());
  const uint64_t home_token = Word(dead_lock);
  r = RepairDeadHolder(LockKind::kRdmaSpin, home(), dead_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  EXPECT_EQ(Word(dead_lock), home_token);
  EXPECT_TRUE(at_home->Unlock(dead_lock).ok());
  EXPECT_TRUE(live->Unlock(live_lock).ok());
}

// Tells when a native head waits in Peterson (behind the NIC side).
struct NativeWaits final : ALockObserver {
  void OnPetersonWait(rdma::RemotePtr, Cohort c) override {
    if (c == Cohort::kLocal) waiting.store(true);
  }
  bool AwaitWaiting() const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!waiting.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    return waiting.load();
  }
  std::atomic<bool> waiting{false};
};


// Node 2 holds an ALock through the NIC and dies; a NIC waiter (node 1) and
// a native waiter (node 0, in Peterson behind the NIC holder) wait. The
// home's repair runs its fix while both still wait, releases the token
// once, and both waiters get in.
TEST_F(LockRepairTest, ALockWaitersGetInOnceTheDeadHoldersTokenIsReleased) {
  const std::vector<rdma::RemotePtr> locks = Locks(LockKind::kALock, 1);
  ASSERT_EQ(locks.size(), 1u);
  const rdma::RemotePtr lock = locks[0];
  auto dying = NewLockClient(LockKind::kALock, c->node(2), sessions[2].get());
  ASSERT_TRUE(dying.ok());
  ASSERT_TRUE((*dying)->Lock(lock).ok());
  EXPECT_EQ(rdma::RemotePtr::FromRaw(Word(lock)).node(), 2);
  Kill(2);

  std::atomic<int> in{0};
  NativeWaits native_waits;
  auto wait_for = [&](rdma::NodeId node, rdma::Session* s) {
    auto client = ALockClient::Create(c->node(node), s, ClientOptions{}, node == 0 ? &native_waits : nullptr);
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE((*client)->Lock(lock).ok()) << "node " << node;
    ++in;
    ASSERT_TRUE((*client)->Unlock(lock).ok());
  };
  std::thread nic([&] { wait_for(1, sessions[1].get()); });
  std::thread native([&] { wait_for(0, nullptr); });
  ASSERT_TRUE(native_waits.AwaitWaiting()) << "the native waiter never waited in Peterson";
  EXPECT_EQ(in.load(), 0) << "a waiter got in while the dead holder's token was in r_tail";
  // The dead holder was inside: the native waiter must stay out until the
  // fix is done (a repair that released first, or let the natives in
  // first, would show it here).
  auto r = RepairDeadHolder(LockKind::kALock, home(), lock, 2, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return in.load() == 0 ? absl::OkStatus() : absl::InternalError("a waiter got in before the fix was done");
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  nic.join();
  native.join();
  EXPECT_EQ(in.load(), 2);
  r = RepairDeadHolder(LockKind::kALock, home(), lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r) << "repaired twice";
}

// Node 2's NIC locker waits in Peterson behind a native holder and dies.
// The home's repair releases its token at once (it must not wait for the
// native holder, whose waiting successors could be what it waits for), and
// the native holder and later lockers are unaffected.
TEST_F(LockRepairTest, ALockRepairOfAHolderWaitingBehindANativeOneReleasesAtOnce) {
  const std::vector<rdma::RemotePtr> locks = Locks(LockKind::kALock, 1);
  ASSERT_EQ(locks.size(), 1u);
  const rdma::RemotePtr lock = locks[0];
  auto native = NewLockClient(LockKind::kALock, c->node(0), nullptr);
  ClientOptions short_wait;
  short_wait.timeout = std::chrono::seconds(2);
  auto dying = NewLockClient(LockKind::kALock, c->node(2), sessions[2].get(), short_wait);
  auto later = NewLockClient(LockKind::kALock, c->node(1), sessions[1].get());
  ASSERT_TRUE(native.ok() && dying.ok() && later.ok());
  ASSERT_TRUE((*native)->Lock(lock).ok());
  std::thread waiter([&] { (void)(*dying)->Lock(lock); });  // waits in Peterson; fails once its node dies
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (lock.local<ALockWord>()->victim.Load() != kVictimRemote && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  ASSERT_EQ(lock.local<ALockWord>()->victim.Load(), kVictimRemote) << "node 2 never waited in Peterson";
  Kill(2);
  waiter.join();
  int fixes = 0;
  auto r = RepairDeadHolder(LockKind::kALock, home(), lock, 2, [&] {
    ++fixes;
    return absl::OkStatus();
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(fixes, 1);
  EXPECT_EQ(Word(lock), 0u);
  EXPECT_TRUE((*native)->Holds(lock));
  ASSERT_TRUE((*native)->Unlock(lock).ok());
  ASSERT_TRUE((*later)->Lock(lock).ok());
  EXPECT_TRUE((*later)->Unlock(lock).ok());
}

// Node 2's NIC locker waits behind a live NIC holder (node 1), announces its
// turn in r_next and dies. The holder's next acquire steps aside for that
// turn until the home's repair frees it; then it gets in. The repair
// releases no holder (node 1's token is live).
TEST_F(LockRepairTest, ALockRepairFreesADeadWaitersAnnouncedTurn) {
  const std::vector<rdma::RemotePtr> locks = Locks(LockKind::kALock, 1);
  ASSERT_EQ(locks.size(), 1u);
  const rdma::RemotePtr lock = locks[0];
  ClientOptions bounded;  // a repair that never frees the turn fails in 5 s, not 30
  bounded.timeout = std::chrono::seconds(5);
  auto live = NewLockClient(LockKind::kALock, c->node(1), sessions[1].get(), bounded);
  auto dying = NewLockClient(LockKind::kALock, c->node(2), sessions[2].get());
  ASSERT_TRUE(live.ok() && dying.ok());
  ASSERT_TRUE((*live)->Lock(lock).ok());
  std::thread waiter([&] { (void)(*dying)->Lock(lock); });  // announces; fails once its node dies
  const ALockWord& line = *lock.local<ALockWord>();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (line.r_next.Load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  const uint64_t turn = line.r_next.Load();
  ASSERT_EQ(rdma::RemotePtr::FromRaw(turn).node(), 2) << "node 2 never announced its turn";
  Kill(2);
  waiter.join();
  EXPECT_EQ(line.r_next.Load(), turn) << "a dead node took its turn back";
  ASSERT_TRUE((*live)->Unlock(lock).ok());
  std::atomic<bool> in{false};
  std::thread again([&] {
    EXPECT_TRUE((*live)->Lock(lock).ok());
    in.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(in.load()) << "the NIC side did not step aside for the announced turn";
  auto r = RepairDeadHolder(LockKind::kALock, home(), lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r) << "a live holder's token was repaired";
  again.join();
  EXPECT_TRUE(in.load());
  EXPECT_EQ(line.r_next.Load(), 0u);
  EXPECT_TRUE((*live)->Unlock(lock).ok());
}

// A client whose token a repair took (here: its node wrongly named dead)
// learns it at Unlock instead of releasing someone else's hold.
TEST_F(LockRepairTest, ALockUnlockAfterARepairIsDataLoss) {
  const std::vector<rdma::RemotePtr> locks = Locks(LockKind::kALock, 1);
  ASSERT_EQ(locks.size(), 1u);
  const rdma::RemotePtr lock = locks[0];
  auto holder = NewLockClient(LockKind::kALock, c->node(1), sessions[1].get());
  auto other = NewLockClient(LockKind::kALock, c->node(0), sessions[0].get());
  ASSERT_TRUE(holder.ok() && other.ok());
  ASSERT_TRUE((*holder)->Lock(lock).ok());
  auto r = RepairDeadHolder(LockKind::kALock, home(), lock, 1);
  ASSERT_TRUE(r.ok() && *r);
  ASSERT_TRUE((*other)->Lock(lock, rdma::Path::kLoopback).ok());
  const uint64_t others = Word(lock);
  const absl::Status st = (*holder)->Unlock(lock);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_EQ(Word(lock), others) << "the late Unlock released the new holder's lock";
  EXPECT_TRUE((*other)->Unlock(lock).ok());
}

TEST_F(LockRepairTest, OnlyTheHomeRepairsAndOnlyLocksThatNameTheirHolder) {
  const std::vector<rdma::RemotePtr> locks = Locks(LockKind::kRdmaMcs, 1);
  ASSERT_EQ(locks.size(), 1u);
  EXPECT_EQ(RepairDeadHolder(LockKind::kRdmaMcs, home(), locks[0], 2).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RepairDeadHolder(LockKind::kALock, *sessions[1], locks[0], 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace locks
