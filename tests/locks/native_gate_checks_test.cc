// Native gate checks that the mixed-path stress (mutual_exclusion_test,
// native_gate_test) does not reach, each shown by its own test
// (tests/README.md, audit table):
//  * the gate keeps its lease past the native budget while no NIC thread
//    waits (the releaser's look at r_tail), and its lease ends when its flag
//    goes down (a NIC thread may take the lock then);
//  * a gate waiter un-counts itself (to time out or to park) only while the
//    gate is held: a holder that leaves just before the waiter's un-count CAS
//    leaves the gate to it, and it takes the gate. The gate's own wait runs
//    with a hook that places the release (no NIC involved).
// Soft NIC only.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "locks/native_gate.h"
#include "locks/native_gate_impl.h"
#include "rdma/cluster.h"
#include "rdma/session.h"
#include "tests/locks/lock_checks_util.h"

namespace locks::testing {
namespace {

using rdma::NodeId;
using rdma::RemotePtr;

// The native gate, native threads only, native budget 1: each holder stays
// inside until the other thread is counted at the gate, so releases have a
// waiter. With no NIC thread waiting (r_tail is 0) the lease is kept past
// the budget for that waiter, never given up "for the NIC cohort". (A
// releaser that gave it up at the budget regardless would make the next
// holder run Peterson again for nobody.)
TEST(LockChecks, NativeGateKeepsItsLeasePastTheBudgetWhileNoNicThreadWaits) {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
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

}  // namespace
}  // namespace locks::testing
