// No live token left behind (docs/design.md §4, "Errors on the NIC path"):
// whichever work request of a NIC acquire or release fails, the client's
// token leaves the lock's words (r_tail, r_next) and the lock stays usable.
// The soft NIC's fault injection fails the n-th operation the client's node
// initiates, for every n the call posts: an uncontended acquire, one that
// waits behind another NIC holder (polls, an announced turn), one that waits
// in Peterson behind a native holder, and a release.
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"
#include "tests/locks/lock_checks_util.h"

namespace locks::testing {
namespace {

using namespace std::chrono_literals;

enum class Holder { kNone, kNic, kNative };

ClientOptions Short() {
  ClientOptions o;
  o.timeout = 2s;
  o.max_held = 2;
  return o;
}

// The lock is free and whole: nobody's token in the NIC side's words, and
// a NIC and a native client each take and release it.
void ExpectFreeAndUsable(rdma::Cluster& cluster, rdma::RemotePtr lock, const std::string& where) {
  const ALockWord& w = *lock.local<ALockWord>();
  EXPECT_EQ(w.r_tail.Load(std::memory_order_acquire), 0u) << where << ": a token stayed in r_tail";
  EXPECT_EQ(w.r_next.Load(std::memory_order_acquire), 0u) << where << ": a turn stayed in r_next";
  auto s1 = std::move(*cluster.NewSession(1));
  auto nic = std::move(*ALockClient::Create(cluster.node(1), s1.get(), Short()));
  auto native = std::move(*ALockClient::Create(cluster.node(0), nullptr, Short()));
  for (LockClient* c : {static_cast<LockClient*>(nic.get()), static_cast<LockClient*>(native.get())}) {
    const absl::Status in = c->Lock(lock);
    EXPECT_TRUE(in.ok()) << where << ": the lock is wedged: " << in;
    if (in.ok()) EXPECT_TRUE(c->Unlock(lock).ok()) << where;
  }
}

// R (node 1, NIC path) acquires with its node's n-th operation failing,
// while `holder` holds the lock and lets go after R had time to wait.
void AcquireFailingAt(Holder holder, int n) {
  const std::string where = absl::StrCat(holder == Holder::kNone ? "uncontended" : holder == Holder::kNic
                                                                                      ? "behind a NIC holder"
                                                                                      : "behind a native holder",
                                         ", operation ", n, " fails");
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const rdma::RemotePtr lock = t.at(0);
  auto s0 = std::move(*cluster->NewSession(0));
  auto s1 = std::move(*cluster->NewSession(1));
  std::unique_ptr<ALockClient> h;
  if (holder != Holder::kNone) {
    h = std::move(*ALockClient::Create(cluster->node(0), holder == Holder::kNic ? s0.get() : nullptr, Short()));
    ASSERT_TRUE(h->Lock(lock, holder == Holder::kNic ? Path::kLoopback : Path::kNative).ok()) << where;
  }
  auto r = std::move(*ALockClient::Create(cluster->node(1), s1.get(), Short()));
  rdma::soft::FaultInjector& faults = rdma::soft::AsSoftDevice(cluster->node(1).device())->faults();
  faults.FailNthOperation(static_cast<uint64_t>(n));
  std::atomic<bool> done{false};
  absl::Status st;
  std::thread locker([&] {
    st = r->Lock(lock);
    done.store(true);
  });
  if (h != nullptr) {
    const auto until = std::chrono::steady_clock::now() + 100ms;
    while (!done.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    EXPECT_TRUE(h->Unlock(lock).ok()) << where;
  }
  locker.join();
  faults.FailNthOperation(0);
  if (st.ok()) EXPECT_TRUE(r->Unlock(lock).ok()) << where;
  ExpectFreeAndUsable(*cluster, lock, absl::StrCat(where, " (Lock said: ", st.ToString(), ")"));
}

TEST(ALockTakeBack, AFailureAtAnyOperationOfAnUncontendedAcquireLeavesNoToken) {
  for (int n = 1; n <= 4 && !::testing::Test::HasFailure(); ++n) AcquireFailingAt(Holder::kNone, n);
}

TEST(ALockTakeBack, AFailureAtAnyOperationOfAnAcquireBehindANicHolderLeavesNoToken) {
  for (int n = 1; n <= 12 && !::testing::Test::HasFailure(); ++n) AcquireFailingAt(Holder::kNic, n);
  AcquireFailingAt(Holder::kNic, 100'000);  // never reached: the holder's release lets it in
}

TEST(ALockTakeBack, AFailureAtAnyOperationOfAnAcquireInPetersonLeavesNoToken) {
  for (int n = 1; n <= 12 && !::testing::Test::HasFailure(); ++n) AcquireFailingAt(Holder::kNative, n);
  AcquireFailingAt(Holder::kNative, 100'000);
}

// The release's CAS fails (its QP goes to the error state): the release
// goes through a reconnect, and Unlock says it is released.
TEST(ALockTakeBack, AFailedReleaseIsTakenBackThroughAReconnect) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const rdma::RemotePtr lock = t.at(0);
  auto s1 = std::move(*cluster->NewSession(1));
  auto r = std::move(*ALockClient::Create(cluster->node(1), s1.get(), Short()));
  ASSERT_TRUE(r->Lock(lock).ok());
  rdma::soft::AsSoftDevice(cluster->node(1).device())->faults().FailNthOperation(1);
  const absl::Status out = r->Unlock(lock);
  EXPECT_TRUE(out.ok()) << out;
  EXPECT_EQ(r->take_backs_pending(), 0u);
  ExpectFreeAndUsable(*cluster, lock, "after a failed release");
}

}  // namespace
}  // namespace locks::testing
