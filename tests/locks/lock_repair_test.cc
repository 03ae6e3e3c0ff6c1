// Crash repair of the RDMA spin lock (locks::RepairDeadHolder; docs/design.md
// §5, "Failures and repair"): the lock's home releases a lock whose token
// names a dead node, exactly once, and never a live holder's.

#include <cstdint>
#include <memory>

#include "gtest/gtest.h"
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

}  // namespace
}  // namespace locks
