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

TEST(LockRepairTest, RepairReleasesOnlyADeadHoldersSpinLockAndOnlyOnce) {
  rdma::ClusterOptions o;
  o.num_nodes = 3;
  o.named_bytes = 0;
  o.fabric.kind = rdma::FabricKind::kSoft;
  auto c = rdma::Cluster::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  auto table = LockTable::Create((*c)->node(0), 2, {LockKind::kRdmaSpin});
  ASSERT_TRUE(table.ok()) << table.status();
  const rdma::RemotePtr live_lock = table->at(0), dead_lock = table->at(1);

  auto s1 = (*c)->ThisThread(1);
  auto s2 = (*c)->ThisThread(2);
  auto s0 = (*c)->ThisThread(0);
  ASSERT_TRUE(s1.ok() && s2.ok() && s0.ok());
  auto live = NewLockClient(LockKind::kRdmaSpin, (*c)->node(1), s1->get());
  auto dying = NewLockClient(LockKind::kRdmaSpin, (*c)->node(2), s2->get());
  auto home = NewLockClient(LockKind::kRdmaSpin, (*c)->node(0), s0->get());
  ASSERT_TRUE(live.ok() && dying.ok() && home.ok());
  ASSERT_TRUE((*live)->Lock(live_lock).ok());
  ASSERT_TRUE((*dying)->Lock(dead_lock).ok());
  const uint64_t live_token = Word(live_lock);
  EXPECT_EQ(live_token >> 48, 1u);
  EXPECT_EQ(Word(dead_lock) >> 48, 2u);
  rdma::soft::AsSoftDevice((*c)->node(2).device())->Kill();
  ASSERT_FALSE((*c)->PeerStatus(2).ok());

  // Not the dead node's: untouched.
  auto r = RepairDeadHolder(LockKind::kRdmaSpin, **s0, live_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  EXPECT_EQ(Word(live_lock), live_token);
  // The dead node's: released, once.
  r = RepairDeadHolder(LockKind::kRdmaSpin, **s0, dead_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(Word(dead_lock), 0u);
  r = RepairDeadHolder(LockKind::kRdmaSpin, **s0, dead_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  // A live client takes it; a late repair leaves the new holder alone.
  ASSERT_TRUE((*home)->Lock(dead_lock).ok());
  const uint64_t home_token = Word(dead_lock);
  r = RepairDeadHolder(LockKind::kRdmaSpin, **s0, dead_lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r);
  EXPECT_EQ(Word(dead_lock), home_token);
  EXPECT_TRUE((*home)->Unlock(dead_lock).ok());
  EXPECT_TRUE((*live)->Unlock(live_lock).ok());
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

std::unique_ptr<rdma::Cluster> ThreeSoftNodes() {
  rdma::ClusterOptions o;
  o.num_nodes = 3;
  o.named_bytes = 0;
  o.fabric.kind = rdma::FabricKind::kSoft;
  auto c = rdma::Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Node 2 holds an ALock through the NIC and dies; a NIC waiter (node 1) and
// a native waiter (node 0, in Peterson behind the NIC holder) wait. The
// home's repair runs its fix while both still wait, releases the token
// once, and both waiters get in.
TEST(LockRepairTest, ALockWaitersGetInOnceTheDeadHoldersTokenIsReleased) {
  auto c = ThreeSoftNodes();
  ASSERT_NE(c, nullptr);
  auto table = LockTable::Create(c->node(0), 1, {LockKind::kALock});
  ASSERT_TRUE(table.ok()) << table.status();
  const rdma::RemotePtr lock = table->at(0);
  auto s0 = c->ThisThread(0);
  auto s1 = c->ThisThread(1);
  auto s2 = c->ThisThread(2);
  ASSERT_TRUE(s0.ok() && s1.ok() && s2.ok());
  auto dying = NewLockClient(LockKind::kALock, c->node(2), s2->get());
  ASSERT_TRUE(dying.ok());
  ASSERT_TRUE((*dying)->Lock(lock).ok());
  EXPECT_EQ(rdma::RemotePtr::FromRaw(Word(lock)).node(), 2);
  rdma::soft::AsSoftDevice(c->node(2).device())->Kill();

  std::atomic<int> in{0};
  NativeWaits native_waits;
  auto wait_for = [&](rdma::NodeId node, rdma::Session* s) {
    auto client = ALockClient::Create(c->node(node), s, ClientOptions{}, node == 0 ? &native_waits : nullptr);
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_TRUE((*client)->Lock(lock).ok()) << "node " << node;
    ++in;
    ASSERT_TRUE((*client)->Unlock(lock).ok());
  };
  std::thread nic([&] { wait_for(1, s1->get()); });
  std::thread native([&] { wait_for(0, nullptr); });
  ASSERT_TRUE(native_waits.AwaitWaiting()) << "the native waiter never waited in Peterson";
  EXPECT_EQ(in.load(), 0) << "a waiter got in while the dead holder's token was in r_tail";
  // The dead holder was inside: the native waiter must stay out until the
  // fix is done (a repair that released first, or let the natives in
  // first, would show it here).
  auto r = RepairDeadHolder(LockKind::kALock, **s0, lock, 2, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return in.load() == 0 ? absl::OkStatus() : absl::InternalError("a waiter got in before the fix was done");
  });
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  nic.join();
  native.join();
  EXPECT_EQ(in.load(), 2);
  r = RepairDeadHolder(LockKind::kALock, **s0, lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r) << "repaired twice";
}

// Node 2's NIC locker waits in Peterson behind a native holder and dies.
// The home's repair releases its token at once (it must not wait for the
// native holder, whose waiting successors could be what it waits for), and
// the native holder and later lockers are unaffected.
TEST(LockRepairTest, ALockRepairOfAHolderWaitingBehindANativeOneReleasesAtOnce) {
  auto c = ThreeSoftNodes();
  ASSERT_NE(c, nullptr);
  auto table = LockTable::Create(c->node(0), 1, {LockKind::kALock});
  ASSERT_TRUE(table.ok());
  const rdma::RemotePtr lock = table->at(0);
  auto s0 = c->ThisThread(0);
  auto s1 = c->ThisThread(1);
  auto s2 = c->ThisThread(2);
  ASSERT_TRUE(s0.ok() && s1.ok() && s2.ok());
  auto native = NewLockClient(LockKind::kALock, c->node(0), nullptr);
  ClientOptions short_wait;
  short_wait.timeout = std::chrono::seconds(2);
  auto dying = NewLockClient(LockKind::kALock, c->node(2), s2->get(), short_wait);
  auto later = NewLockClient(LockKind::kALock, c->node(1), s1->get());
  ASSERT_TRUE(native.ok() && dying.ok() && later.ok());
  ASSERT_TRUE((*native)->Lock(lock).ok());
  std::thread waiter([&] { (void)(*dying)->Lock(lock); });  // waits in Peterson; fails once its node dies
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (lock.local<ALockWord>()->victim.Load() != kVictimRemote && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  ASSERT_EQ(lock.local<ALockWord>()->victim.Load(), kVictimRemote) << "node 2 never waited in Peterson";
  rdma::soft::AsSoftDevice(c->node(2).device())->Kill();
  waiter.join();
  int fixes = 0;
  auto r = RepairDeadHolder(LockKind::kALock, **s0, lock, 2, [&] {
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
TEST(LockRepairTest, ALockRepairFreesADeadWaitersAnnouncedTurn) {
  auto c = ThreeSoftNodes();
  ASSERT_NE(c, nullptr);
  auto table = LockTable::Create(c->node(0), 1, {LockKind::kALock});
  ASSERT_TRUE(table.ok());
  const rdma::RemotePtr lock = table->at(0);
  auto s0 = c->ThisThread(0);
  auto s1 = c->ThisThread(1);
  auto s2 = c->ThisThread(2);
  ASSERT_TRUE(s0.ok() && s1.ok() && s2.ok());
  ClientOptions bounded;  // a repair that never frees the turn fails in 5 s, not 30
  bounded.timeout = std::chrono::seconds(5);
  auto live = NewLockClient(LockKind::kALock, c->node(1), s1->get(), bounded);
  auto dying = NewLockClient(LockKind::kALock, c->node(2), s2->get());
  ASSERT_TRUE(live.ok() && dying.ok());
  ASSERT_TRUE((*live)->Lock(lock).ok());
  std::thread waiter([&] { (void)(*dying)->Lock(lock); });  // announces; fails once its node dies
  const ALockWord& line = *lock.local<ALockWord>();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (line.r_next.Load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  const uint64_t turn = line.r_next.Load();
  ASSERT_EQ(rdma::RemotePtr::FromRaw(turn).node(), 2) << "node 2 never announced its turn";
  rdma::soft::AsSoftDevice(c->node(2).device())->Kill();
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
  auto r = RepairDeadHolder(LockKind::kALock, **s0, lock, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(*r) << "a live holder's token was repaired";
  again.join();
  EXPECT_TRUE(in.load());
  EXPECT_EQ(line.r_next.Load(), 0u);
  EXPECT_TRUE((*live)->Unlock(lock).ok());
}

// A client whose token a repair took (here: its node wrongly named dead)
// learns it at Unlock instead of releasing someone else's hold.
TEST(LockRepairTest, ALockUnlockAfterARepairIsDataLoss) {
  auto c = ThreeSoftNodes();
  ASSERT_NE(c, nullptr);
  auto table = LockTable::Create(c->node(0), 1, {LockKind::kALock});
  ASSERT_TRUE(table.ok());
  const rdma::RemotePtr lock = table->at(0);
  auto s0 = c->ThisThread(0);
  auto s1 = c->ThisThread(1);
  ASSERT_TRUE(s0.ok() && s1.ok());
  auto holder = NewLockClient(LockKind::kALock, c->node(1), s1->get());
  auto other = NewLockClient(LockKind::kALock, c->node(0), s0->get());
  ASSERT_TRUE(holder.ok() && other.ok());
  ASSERT_TRUE((*holder)->Lock(lock).ok());
  auto r = RepairDeadHolder(LockKind::kALock, **s0, lock, 1);
  ASSERT_TRUE(r.ok() && *r);
  ASSERT_TRUE((*other)->Lock(lock, rdma::Path::kLoopback).ok());
  const uint64_t others = Word(lock);
  const absl::Status st = (*holder)->Unlock(lock);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_EQ(Word(lock), others) << "the late Unlock released the new holder's lock";
  EXPECT_TRUE((*other)->Unlock(lock).ok());
}

TEST(LockRepairTest, OnlyTheHomeRepairsAndOnlyLocksThatNameTheirHolder) {
  auto c = ThreeSoftNodes();
  ASSERT_NE(c, nullptr);
  auto table = LockTable::Create(c->node(0), 1, {LockKind::kRdmaMcs});
  ASSERT_TRUE(table.ok());
  auto s0 = c->ThisThread(0);
  auto s1 = c->ThisThread(1);
  ASSERT_TRUE(s0.ok() && s1.ok());
  EXPECT_EQ(RepairDeadHolder(LockKind::kRdmaMcs, **s0, table->at(0), 2).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(RepairDeadHolder(LockKind::kALock, **s1, table->at(0), 2).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace locks
