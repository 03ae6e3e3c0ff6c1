// ALock checks that the mixed-path stress (mutual_exclusion_test) does not
// reach, each shown by its own test (tests/README.md, audit table):
//  * ALock's native cohort under contention: several native threads on one
//    lock next to loopback and remote threads, so native threads queue behind
//    each other (MCS link, hand-over, budget) as well as behind the NIC
//    cohort; mutual_exclusion_test has one native thread per lock;
//  * ALock's NIC waiter whose CAS finally wins runs Peterson on the line its
//    winning chain read, so a native head that arrived while it waited
//    gets in first;
//  * ALock's native head waiting in Peterson behind a NIC holder enters once
//    the NIC cohort leaves (r_tail empty), with no NIC waiter to write victim;
//  * ALock's NIC locker whose CAS wins after a poll saw the line empty runs
//    Peterson on the line its winning chain read (a native thread may have
//    entered between the poll and the CAS: the post hook places it there);
//  * ALock's NIC locker whose first CAS finds a holder: the line its first
//    chain read (and the chained READs after it) were read before its flag
//    went up, so it enters only on a later chain whose CAS won, and reports
//    that chain's READs as the holder's. The soft NIC's copy hook holds the
//    first chain while the holder leaves;
//  * ALock's NIC waiter that announced its turn (r_next) gets in before the
//    holder it waited for gets the lock again.
// Soft NIC only: the races are placed with the soft NIC's copy hook.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"
#include "rdma/work_request.h"
#include "rdma/session.h"
#include "tests/locks/lock_checks_util.h"
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

// R1 (node 1) holds the NIC side; R2 (node 1) waits and announces its turn
// in r_next. R1 releases and at once asks again: its CAS may win, but it
// must step aside, so R2 gets in before R1's second acquire returns (no
// starving a NIC waiter behind a holder that keeps coming back).
TEST(LockChecks, ALockNicWaiterThatAnnouncedItsTurnGoesNext) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const RemotePtr lock = t.at(0);
  const ALockWord& line = *lock.local<ALockWord>();
  auto s1 = std::move(*cluster->NewSession(1));
  auto s2 = std::move(*cluster->NewSession(1));
  auto r1 = std::move(*ALockClient::Create(cluster->node(1), s1.get()));
  auto r2 = std::move(*ALockClient::Create(cluster->node(1), s2.get()));
  ASSERT_TRUE(r1->Lock(lock).ok());
  const uint64_t r1_token = line.r_tail.Load();
  std::atomic<bool> r2_in{false}, r2_out{false}, hold_r2{false};
  std::atomic<std::thread::id> r2_thread{};
  // While hold_r2 is set, R2's next post waits (the soft NIC's post hook runs
  // on the posting thread): R2 cannot take the NIC side in the gap R1's
  // release opens, so only stepping aside lets it in first.
  auto* nic1 = rdma::soft::AsSoftDevice(cluster->node(1).device());
  nic1->SetPostHook([&](const rdma::WorkRequest&) {
    if (std::this_thread::get_id() != r2_thread.load()) return;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (hold_r2.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  std::thread second([&] {
    r2_thread.store(std::this_thread::get_id());
    EXPECT_TRUE(r2->Lock(lock).ok());
    r2_in.store(true);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    r2_out.store(true);
    EXPECT_TRUE(r2->Unlock(lock).ok());
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (line.r_next.Load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  const uint64_t turn = line.r_next.Load();
  ASSERT_NE(turn, 0u) << "R2 never announced its turn";
  ASSERT_NE(turn, r1_token);
  hold_r2.store(true);
  ASSERT_TRUE(r1->Unlock(lock).ok());
  std::atomic<bool> r1_in{false};
  std::thread again([&] {
    EXPECT_TRUE(r1->Lock(lock).ok());
    r1_in.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(r1_in.load()) << "R1 got the lock back ahead of R2's announced turn";
  hold_r2.store(false);
  again.join();
  EXPECT_TRUE(r2_out.load()) << "R1 got in before R2 had been in and out";
  ASSERT_TRUE(r1->Unlock(lock).ok());
  second.join();
  nic1->SetPostHook(nullptr);
  EXPECT_EQ(line.r_next.Load(), 0u) << "R2 left its turn announced";
  EXPECT_EQ(line.r_tail.Load(), 0u);
}

// Says when a head of `cohort` has written victim and waits in Peterson.
struct WaitSignal final : ALockObserver {
  explicit WaitSignal(Cohort c) : cohort(c) {}
  void OnPetersonWait(RemotePtr, Cohort c) override {
    if (c == cohort) waiting.store(true);
  }
  const Cohort cohort;
  std::atomic<bool> waiting{false};
};

// R1 (node 1) holds the NIC side; R2 (node 1) waits for it, its first
// chain having read the line while the native flag was down; then a native
// head N arrives and waits in Peterson (victim = local). When R1 leaves, R2's
// CAS wins: R2 must run Peterson on the line its winning chain read (native
// flag up), make itself the victim and let N in first, not enter on a line
// it read while it waited.
TEST(LockChecks, ALockNicWaiterRunsPetersonOnTheLineItsWinningCasRead) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const RemotePtr lock = t.at(0);
  const rdma::NicWord& r_tail = lock.local<ALockWord>()->r_tail;
  auto s1 = std::move(*cluster->NewSession(1));
  auto s2 = std::move(*cluster->NewSession(1));
  auto r1 = std::move(*ALockClient::Create(cluster->node(1), s1.get()));
  auto r2 = std::move(*ALockClient::Create(cluster->node(1), s2.get()));
  WaitSignal native_waits(Cohort::kLocal);
  auto native = std::move(*ALockClient::Create(cluster->node(0), nullptr, ClientOptions{}, &native_waits));
  ASSERT_TRUE(r1->Lock(lock).ok());
  const uint64_t d1 = r_tail.Load();  // R1's token
  const uint64_t posted = rdma::soft::AsSoftDevice(cluster->node(1).device())->stats().wrs_posted;
  std::atomic<bool> r2_in{false}, native_in{false};
  absl::Status r2_status, native_status;
  std::thread second([&] {
    r2_status = r2->Lock(lock);
    r2_in.store(true);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  // R2's first chain (CAS, READ) and at least one poll.
  while (rdma::soft::AsSoftDevice(cluster->node(1).device())->stats().wrs_posted < posted + 3 &&
         std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  ASSERT_EQ(r_tail.Load(), d1) << "R2 got in while R1 held the lock";
  std::thread head([&] {
    native_status = native->Lock(lock);
    native_in.store(true);
  });
  while (!native_waits.waiting.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(native_waits.waiting.load()) << "the native head never waited";
  ASSERT_TRUE(r1->Unlock(lock).ok());
  while (!native_in.load() && !r2_in.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(native_in.load()) << "the waiting native head did not get in after R1 left";
  const bool r2_first = r2_in.load();
  EXPECT_FALSE(r2_first) << "R2 entered ahead of the waiting native head";
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
// the lock (fast path: r_tail is 0). R's next CAS wins: it must use the
// line that chain read, see the native flag up and wait in Peterson, not
// enter on the line it read before its flag went up.
TEST(LockChecks, ALockNicLockerReadsTheLineAgainWhenItsNextCasWins) {
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

// R (node 1) waits for X (a loopback holder) by polling the line. X
// leaves; R's poll sees the line empty and R posts its CAS chain. Held at
// that post (the soft NIC's post hook), a native thread takes the lock on
// the fast path (r_tail is still 0). R's CAS then wins: R must run Peterson
// on the line its winning chain read (native flag up) and wait, not on the
// line of its last poll (native flag down), which would let it in beside
// the native holder.
TEST(LockChecks, ALockNicLockerUsesTheLineItsWinningCasRead) {
  auto cluster = TwoSoftNodes();
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  const RemotePtr lock = t.at(0);
  auto s0 = std::move(*cluster->NewSession(0));
  auto s1 = std::move(*cluster->NewSession(1));
  auto x = std::move(*ALockClient::Create(cluster->node(0), s0.get()));
  auto native = std::move(*ALockClient::Create(cluster->node(0), nullptr));
  auto r = std::move(*ALockClient::Create(cluster->node(1), s1.get()));
  ASSERT_TRUE(x->Lock(lock, Path::kLoopback).ok());
  std::atomic<int> cases{0}, posts{0};
  std::atomic<bool> native_go{false}, native_in{false};
  auto* nic1 = rdma::soft::AsSoftDevice(cluster->node(1).device());
  nic1->SetPostHook([&](const rdma::WorkRequest& wr) {
    ++posts;
    if (wr.opcode != rdma::Opcode::kCompareSwap || wr.remote_addr != lock.address() || ++cases != 2) return;
    // R's second CAS on r_tail, posted after a poll saw r_tail empty: let the native
    // thread in first.
    native_go.store(true);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!native_in.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  std::atomic<bool> in{false};
  absl::Status r_status;
  std::thread locker([&] {
    r_status = r->Lock(lock);
    in.store(true);
  });
  std::thread head([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!native_go.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    if (!native_go.load()) return;  // the main thread reports it
    ASSERT_TRUE(native->Lock(lock).ok());
    native_in.store(true);
  });
  // X leaves only once R's first chain {CAS r_tail, READ line} came back
  // with X's token and R polls (a third work request): the hook runs when a
  // request is posted, so leaving at the first CAS's post could let that
  // CAS win.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (posts.load() < 3 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_EQ(cases.load(), 1) << "R never polled after its first CAS (" << posts.load() << " work requests posted)";
  ASSERT_TRUE(x->Unlock(lock).ok());
  head.join();
  ASSERT_TRUE(native_go.load()) << "R entered without a second CAS on r_tail: " << r_status;
  ASSERT_TRUE(native_in.load());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(in.load()) << "R entered while the native thread held the lock: " << r_status;
  ASSERT_TRUE(native->Unlock(lock).ok());
  locker.join();
  nic1->SetPostHook(nullptr);
  ASSERT_TRUE(r_status.ok()) << r_status;
  EXPECT_TRUE(r->Unlock(lock).ok());
}

// The same gap with READs chained behind the acquire (LockAndRead): the
// first chain's ran while X held the lock, and X changed the word they read
// before leaving. R's next chain wins and reads them again; what R reports
// as read by the holder must show X's write.
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
  EXPECT_TRUE(also_done) << "the winning chain's READs were read as the holder's";
  EXPECT_EQ(seen, 1u) << "R took a chained READ made before X's write (X wrote 1) as read by the holder";
  EXPECT_TRUE(r->Unlock(lock).ok());
}

}  // namespace
}  // namespace locks::testing
