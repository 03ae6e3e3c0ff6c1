// locks::NativeHold: the native side of an ALock held for a group of
// threads. Taken once at a time; while held a NIC locker waits in Peterson
// (and NicWaiting says so) until any thread gives the hold back; a NIC
// holder that stays past the timeout makes TryTake fail, leaving nothing
// held. Soft NIC, two nodes: the lock on node 0, the NIC locker on node 1.

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "locks/native_hold.h"
#include "rdma/cluster.h"
#include "tests/locks/lock_checks_util.h"

namespace locks {
namespace {

TEST(NativeHoldTest, HeldForTheGroupUntilGivenBackWhileANicLockerWaits) {
  auto cluster = testing::TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const rdma::RemotePtr lock = t.at(0);
  ClientOptions options;
  options.timeout = std::chrono::seconds(20);
  NativeHold hold(lock, options);
  ASSERT_TRUE(*hold.TryTake());
  EXPECT_TRUE(hold.held());
  EXPECT_FALSE(*hold.TryTake()) << "taken twice";
  EXPECT_FALSE(hold.NicWaiting());

  auto session = std::move(*cluster->NewSession(1));
  auto nic = std::move(*ALockClient::Create(cluster->node(1), session.get()));
  std::atomic<bool> in{false};
  absl::Status nic_status;
  std::thread locker([&] {
    nic_status = nic->Lock(lock);
    in.store(true);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!hold.NicWaiting() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(hold.NicWaiting());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(in.load()) << "the NIC locker entered while the native side was held: " << nic_status;
  std::thread giver([&] { hold.Give(); });  // any thread may give it back
  giver.join();
  locker.join();
  ASSERT_TRUE(nic_status.ok()) << nic_status;
  EXPECT_FALSE(hold.held());

  // The NIC side holds now: a TryTake waits for it, and gives up after the
  // timeout with nothing held.
  ClientOptions short_wait;
  short_wait.timeout = std::chrono::milliseconds(100);
  short_wait.spins_before_yield = 0;
  NativeHold impatient(lock, short_wait);
  const absl::StatusOr<bool> late = impatient.TryTake();
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_FALSE(impatient.held());
  ASSERT_TRUE(nic->Unlock(lock).ok());
  EXPECT_TRUE(*impatient.TryTake()) << "free again once the NIC holder left";
  impatient.Give();
}

}  // namespace
}  // namespace locks
