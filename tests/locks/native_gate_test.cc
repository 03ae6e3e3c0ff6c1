// locks::NativeGate: mutual exclusion with ALock's NIC cohort (loopback and
// remote threads) while native threads share the gate, on every backend
// under test and with the soft NIC copying a byte at a time; the lease never
// outlives native presence; a waiting NIC cohort gets in after the native
// budget; bounded waits; bad input. Costs: 0 NIC ops natively.

#include <atomic>
#include <barrier>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "locks/native_gate.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "rdma/remote_ref.h"
#include "rdma/rmw_word.h"
#include "rdma/session.h"
#include "testing/backends.h"

namespace locks {
namespace {

using rdma::NodeId;
using rdma::RemotePtr;

// Two words that every holder increments one after the other: a holder that
// sees them differ, or a lost increment, means two holders overlapped.
struct alignas(64) Guarded {
  rdma::PlainWord a;
  rdma::PlainWord b;
};

// A thread that runs a step through `gate` and stays inside it until
// Release(): constructed, the gate is held.
class GateHolder {
 public:
  explicit GateHolder(NativeGate& gate)
      : thread_([this, &gate] {
          EXPECT_TRUE(gate.Run([this] {
                            inside_.count_down();
                            release_.wait();
                            return absl::OkStatus();
                          })
                          .ok());
        }) {
    inside_.wait();
  }
  GateHolder(const GateHolder&) = delete;
  GateHolder& operator=(const GateHolder&) = delete;
  ~GateHolder() { Release(); }
  // Leaves the gate and waits for the thread to end.
  void Release() {
    if (!thread_.joinable()) return;
    release_.count_down();
    thread_.join();
  }

 private:
  std::latch inside_{1}, release_{1};
  std::thread thread_;  // last: it uses the latches
};

// The backend, and whether the soft NIC copies payloads a byte at a time
// (as rxe does), so that NIC READs of l_tail may mix old and new bytes.
struct Fabric {
  std::string backend;
  bool byte_copies = false;
};
void PrintTo(const Fabric& f, std::ostream* os) { *os << f.backend << (f.byte_copies ? " (byte copies)" : ""); }

class NativeGateTest : public ::testing::TestWithParam<Fabric> {
 protected:
  void SetUp() override {
    rdma::testing::SoftTweaks tweaks;
    tweaks.byte_granular_copies = GetParam().byte_copies;
    cluster_ = rdma::testing::MakeCluster(GetParam().backend, 2, 2 << 20, tweaks);
    ASSERT_NE(cluster_, nullptr);
  }
  RemotePtr Lock(Budgets b = {}) {
    auto t = LockTable::Create(cluster_->node(0), 1, {LockKind::kALock, b});
    EXPECT_TRUE(t.ok()) << t.status();
    tables_.push_back(std::move(*t));
    return tables_.back().at(0);
  }
  std::unique_ptr<NativeGate> Gate(RemotePtr lock, ClientOptions o = {}, NativeGateOptions go = {}) {
    auto g = NativeGate::Create(cluster_->node(0), lock, o, go);
    EXPECT_TRUE(g.ok()) << g.status();
    return g.ok() ? std::move(*g) : nullptr;
  }
  ALockWord& Line(RemotePtr lock) { return *lock.local<ALockWord>(); }

  std::unique_ptr<rdma::Cluster> cluster_;
  std::vector<LockTable> tables_;
};

TEST_P(NativeGateTest, UncontendedRunUsesNoNicOperationAndLeavesTheLockFree) {
  const RemotePtr lock = Lock();
  auto gate = Gate(lock);
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  int runs = 0;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(gate->Run([&] {
                      ++runs;
                      // The gate word is l_tail: held, nobody waiting; nonzero
                      // (low byte too), so the native flag is up.
                      EXPECT_EQ(Line(lock).l_tail.Load(), 3u) << "the step must run with the native flag up";
                      return absl::OkStatus();
                    })
                    .ok());
    // Nobody waited: the lease went back with the gate.
    EXPECT_EQ(Line(lock).l_tail.Load(), 0u);
  }
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(rdma::ThisThreadCounters() - before, rdma::OpCounters{});
  EXPECT_EQ(gate->stats().runs, 3u);
  EXPECT_EQ(gate->stats().lease_acquires, 3u);
  EXPECT_EQ(gate->stats().lease_kept, 0u);
}

// Gates made one after the other (a queue's tail and head gates) must not
// share a cache line: each is used by other threads, and a shared line
// bounces between their cores on every operation (native_gate.h).
TEST_P(NativeGateTest, GatesMadeBackToBackShareNoCacheLine) {
  std::vector<std::unique_ptr<NativeGate>> gates;
  for (int i = 0; i < 4; ++i) gates.push_back(Gate(Lock()));
  for (const auto& g : gates) {
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(g.get()) % 64, 0u);
  }
  static_assert(sizeof(NativeGate) % 64 == 0, "a gate ends where a line ends");
}

TEST_P(NativeGateTest, StepErrorIsReturnedAndTheLeaseGivenBack) {
  const RemotePtr lock = Lock();
  auto gate = Gate(lock);
  const absl::Status s = gate->Run([] { return absl::DataLossError("step broke"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(Line(lock).l_tail.Load(), 0u);
  EXPECT_TRUE(gate->Run([] { return absl::OkStatus(); }).ok());
}

TEST_P(NativeGateTest, BadInput) {
  EXPECT_EQ(NativeGate::Create(cluster_->node(0), RemotePtr(), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto t = LockTable::Create(cluster_->node(1), 1, {LockKind::kALock, {}});
  ASSERT_TRUE(t.ok());
  const auto other = NativeGate::Create(cluster_->node(0), t->at(0), {});
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument) << other.status();
  const auto negative = NativeGate::Create(cluster_->node(0), Lock(), {}, {.park = std::chrono::microseconds(-1)});
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument) << negative.status();
}

// The gate word is the lock's l_tail: a gate made over a lock that a native
// ALock client holds would corrupt that client's queue. Refused.
TEST_P(NativeGateTest, CreateRefusesALockHeldNatively) {
  const RemotePtr lock = Lock();
  auto client = std::move(*ALockClient::Create(cluster_->node(0), nullptr));
  ASSERT_TRUE(client->Lock(lock, Path::kNative).ok());
  const auto gate = NativeGate::Create(cluster_->node(0), lock, {});
  EXPECT_EQ(gate.status().code(), absl::StatusCode::kFailedPrecondition) << gate.status();
  ASSERT_TRUE(client->Unlock(lock).ok());
  EXPECT_NE(Gate(lock), nullptr);
}

// A NIC holder that does not let go: the native holder's Peterson wait ends
// with DeadlineExceeded after the timeout, the flag comes down, and once the
// NIC holder is gone the gate works again.
TEST_P(NativeGateTest, PetersonWaitBehindANicHolderIsBounded) {
  const RemotePtr lock = Lock();
  ClientOptions o;
  o.timeout = std::chrono::milliseconds(50);
  auto gate = Gate(lock, o);
  auto session = std::move(*cluster_->NewSession(1));
  auto nic = std::move(*ALockClient::Create(cluster_->node(1), session.get()));
  ASSERT_TRUE(nic->Lock(lock, Path::kRemote).ok());
  bool ran = false;
  const absl::Status s = gate->Run([&] {
    ran = true;
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_FALSE(ran);
  EXPECT_EQ(Line(lock).l_tail.Load(), 0u) << "the native flag stayed up after the wait failed";
  ASSERT_TRUE(nic->Unlock(lock).ok());
  EXPECT_TRUE(gate->Run([&] {
                    ran = true;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_TRUE(ran);
  EXPECT_EQ(gate->stats().lease_acquires, 1u);
}

// Native threads through the gate, a loopback and a remote ALock client: no
// two holders overlap, no increment is lost, and with the native threads
// overlapping the lease is kept between them.
TEST_P(NativeGateTest, MutualExclusionWithTheNicCohort) {
  const RemotePtr lock = Lock({.local = 3, .remote = 2});
  auto gate = Gate(lock);
  const RemotePtr data = *cluster_->node(0).Allocate(sizeof(Guarded), 64);
  Guarded& g = *data.local<Guarded>();
  constexpr int kNativeThreads = 2, kNativeIters = 20000, kNicIters = 200;
  // The native threads meet kMeetings times (evenly spaced), and then thread
  // 0, inside the gate, waits until thread 1 is counted at it: so the two
  // overlap however the scheduler runs them (on a loaded machine one could
  // otherwise finish before the other starts, and the lease-kept check below
  // would fail for want of an overlap, not for a bug).
  constexpr int kMeetings = 5, kMeetEvery = kNativeIters / (kMeetings + 1);
  std::barrier meet(kNativeThreads);
  std::atomic<int> overlaps{0};
  std::latch start(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < kNativeThreads; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kNativeIters; ++i) {
        const bool meeting = i > 0 && i % kMeetEvery == 0 && i / kMeetEvery <= kMeetings;
        if (meeting) meet.arrive_and_wait();
        absl::Status s = gate->Run([&] {
          const uint64_t a = g.a.Load(std::memory_order_relaxed);
          if (g.b.Load(std::memory_order_relaxed) != a) overlaps.fetch_add(1);
          g.a.Store(a + 1, std::memory_order_relaxed);
          if (i % 64 == 0) std::this_thread::yield();
          if (meeting && t == 0) {  // hold the gate until the other native thread is counted at it
            const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while ((Line(lock).l_tail.Load() >> 8) == 0 && std::chrono::steady_clock::now() < until) {
              std::this_thread::yield();
            }
          }
          g.b.Store(a + 1, std::memory_order_relaxed);
          return absl::OkStatus();
        });
        ASSERT_TRUE(s.ok()) << s;
      }
    });
  }
  for (const NodeId n : {NodeId{0}, NodeId{1}}) {  // loopback, remote
    threads.emplace_back([&, n] {
      auto session = std::move(*cluster_->NewSession(n));
      auto client = std::move(*ALockClient::Create(cluster_->node(n), session.get()));
      const auto ref = rdma::RemoteRef<Guarded>::At(data);
      start.arrive_and_wait();
      for (int i = 0; i < kNicIters; ++i) {
        ASSERT_TRUE(client->Lock(lock, n == 0 ? Path::kLoopback : Path::kRemote).ok());
        uint64_t ab[2];
        ASSERT_TRUE(session->Read(data, ab, sizeof ab).ok());
        if (ab[0] != ab[1]) overlaps.fetch_add(1);
        ASSERT_TRUE(ref.Field(&Guarded::a).Write(*session, ab[0] + 1).ok());
        ASSERT_TRUE(ref.Field(&Guarded::b).Write(*session, ab[0] + 1).ok());
        ASSERT_TRUE(client->Unlock(lock).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(overlaps.load(), 0);
  const uint64_t total = uint64_t{kNativeThreads} * kNativeIters + 2 * kNicIters;
  EXPECT_EQ(g.a.Load(), total);
  EXPECT_EQ(g.b.Load(), total);
  EXPECT_EQ(Line(lock).l_tail.Load(), 0u) << "the lease outlived the native threads";
  EXPECT_EQ(Line(lock).r_tail.Load(), 0u);
  EXPECT_GT(gate->stats().lease_kept, 0u) << "two native threads never overlapped";
  EXPECT_EQ(gate->stats().runs, uint64_t{kNativeThreads} * kNativeIters);
}

// Two native threads that never stop coming would keep the lease forever:
// each holder waits, inside its critical section, until the other thread is
// at the gate, so a waiter is always counted when a holder leaves. The native
// budget is what makes them give the lock to a waiting NIC thread.
TEST_P(NativeGateTest, WaitingNicCohortGetsInAfterTheNativeBudget) {
  const RemotePtr lock = Lock({.local = 2, .remote = 1});
  auto gate = Gate(lock);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> started[2] = {0, 0}, finished[2] = {0, 0};
  std::vector<std::thread> natives;
  for (int t = 0; t < 2; ++t) {
    natives.emplace_back([&, t] {
      const int o = 1 - t;
      while (!stop.load()) {
        started[t].fetch_add(1);
        ASSERT_TRUE(gate->Run([&] {
                          // Hold until the other native thread is inside Run
                          // (so waiting at the gate), then give it time to
                          // count itself.
                          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
                          while (!stop.load() && started[o].load() == finished[o].load() &&
                                 std::chrono::steady_clock::now() < until) {
                            std::this_thread::yield();
                          }
                          std::this_thread::sleep_for(std::chrono::microseconds(200));
                          return absl::OkStatus();
                        })
                        .ok());
        finished[t].fetch_add(1);
      }
    });
  }
  while (finished[0].load() + finished[1].load() < 20) std::this_thread::yield();
  {
    auto session = std::move(*cluster_->NewSession(1));
    ClientOptions o;
    o.timeout = std::chrono::seconds(5);
    auto client = std::move(*ALockClient::Create(cluster_->node(1), session.get(), o));
    for (int i = 0; i < 5; ++i) {
      const absl::Status s = client->Lock(lock);
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok()) break;
      ASSERT_TRUE(client->Unlock(lock).ok());
    }
  }
  stop.store(true);
  for (auto& th : natives) th.join();
  EXPECT_EQ(Line(lock).l_tail.Load(), 0u);
  EXPECT_GT(gate->stats().lease_kept, 0u);
  EXPECT_GT(gate->stats().nic_yields, 0u);
}

// Hundreds of native threads at the gate: every nonzero value of the gate
// word keeps its low byte nonzero (a NIC READ copying it a byte at a time
// while it changes from one nonzero value to another must not read 0), the
// count passes a byte boundary, and everyone gets through.
TEST_P(NativeGateTest, ManyWaitersKeepTheWordsLowByteNonzero) {
  const RemotePtr lock = Lock();
  // The waiters outwait the count below (90 s at most) by far.
  ClientOptions o;
  o.timeout = std::chrono::seconds(180);
  auto gate = Gate(lock, o);
  constexpr int kWaiters = 300;
  std::latch arrived(kWaiters);
  std::atomic<int> done{0};
  GateHolder holder(*gate);
  std::vector<std::thread> waiters;
  for (int i = 0; i < kWaiters; ++i) {
    waiters.emplace_back([&] {
      arrived.count_down();
      EXPECT_TRUE(gate->Run([] { return absl::OkStatus(); }).ok());
      done.fetch_add(1);
    });
  }
  arrived.wait();
  // Every waiter counts itself soon after arriving, but on a loaded machine
  // (300 threads on 2 cores, or an emulated guest beside a build) a thread
  // may wait long for a core: wait for the count, 90 s at most (about 7 s
  // in a quiet guest).
  uint64_t v = Line(lock).l_tail.Load();
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(90);
       (v >> 8) != kWaiters && std::chrono::steady_clock::now() < until; v = Line(lock).l_tail.Load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(v >> 8, uint64_t{kWaiters}) << "held with every waiter counted: 0x" << std::hex << v;
  holder.Release();
  int bad = 0;
  while (done.load() < kWaiters) {
    const uint64_t w = Line(lock).l_tail.Load();
    if (w != 0 && (w & 0xff) == 0) ++bad;
  }
  for (auto& t : waiters) t.join();
  EXPECT_EQ(bad, 0) << "a nonzero gate word with a zero low byte";
  EXPECT_EQ(Line(lock).l_tail.Load(), 0u);
}

// A waiter that finds the gate held after its spins: without parking it
// stays counted, so the holder keeps the lease for it; parking, it
// un-counts itself and sleeps, so the holder leaving with nobody counted
// lowers the flag (a sleeping thread keeps no NIC waiter out). Either way it
// gets the gate once the holder is gone.
TEST_P(NativeGateTest, ParkedWaiterKeepsNoLease) {
  for (const bool park : {false, true}) {
    SCOPED_TRACE(park ? "parking" : "yielding");
    const RemotePtr lock = Lock();
    NativeGateOptions go;
    if (park) go.park = std::chrono::microseconds(50);
    auto gate = Gate(lock, {}, go);
    GateHolder holder(*gate);
    std::atomic<bool> waiter_done{false};
    std::thread waiter([&] {
      EXPECT_TRUE(gate->Run([] { return absl::OkStatus(); }).ok());
      waiter_done.store(true);
    });
    // Parking: wait until it has parked (counted no more). Yielding: it
    // stays counted; look for 50 ms that it does.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    bool counted_seen = false;
    while (std::chrono::steady_clock::now() < until) {
      if (park && gate->parks() > 0) break;
      if (!park && (Line(lock).l_tail.Load() >> 8) == 1) {
        counted_seen = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        EXPECT_EQ(Line(lock).l_tail.Load() >> 8, 1u) << "a yielding waiter stopped counting itself";
        break;
      }
      std::this_thread::yield();
    }
    if (park) {
      EXPECT_GT(gate->parks(), 0u) << "the waiter never parked";
      // Between its spins, the parked waiter is not counted: the word reads
      // "held, nobody waiting".
      bool uncounted_seen = false;
      for (const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
           !uncounted_seen && std::chrono::steady_clock::now() < end;) {
        uncounted_seen = Line(lock).l_tail.Load() == 3u;
      }
      EXPECT_TRUE(uncounted_seen) << "a parked waiter still counted itself";
    } else {
      EXPECT_TRUE(counted_seen) << "the waiter never counted itself";
    }
    holder.Release();
    waiter.join();
    EXPECT_TRUE(waiter_done.load());
    EXPECT_EQ(Line(lock).l_tail.Load(), 0u);
    EXPECT_EQ(gate->stats().runs, 2u);
    if (!park) {
      EXPECT_EQ(gate->parks(), 0u);
      EXPECT_EQ(gate->stats().lease_kept, 1u) << "the holder left without keeping the lease for its waiter";
    }
  }
}

// A gate held past the timeout: the waiter gives up with DeadlineExceeded,
// and the holder, seeing nobody left, gives the lease back.
TEST_P(NativeGateTest, GateWaitIsBounded) {
  for (const auto park : {std::chrono::microseconds(0), std::chrono::microseconds(50)}) {
    SCOPED_TRACE(park.count() > 0 ? "parking" : "yielding");
    const RemotePtr lock = Lock();
    ClientOptions o;
    o.timeout = std::chrono::milliseconds(50);
    auto gate = Gate(lock, o, {.park = park});
    GateHolder holder(*gate);
    const absl::Status s = gate->Run([] { return absl::OkStatus(); });
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    holder.Release();
    EXPECT_EQ(Line(lock).l_tail.Load(), 0u);
    EXPECT_EQ(gate->stats().lease_kept, 0u);
  }
}

std::vector<Fabric> Plain() {
  std::vector<Fabric> v;
  for (const std::string& b : rdma::testing::BackendsUnderTest()) v.push_back({b, false});
  return v;
}
std::vector<Fabric> ByteCopies() {
  std::vector<Fabric> v;
  for (const std::string& b : rdma::testing::SoftIfUnderTest()) v.push_back({b, true});
  return v;
}
std::string Name(const ::testing::TestParamInfo<Fabric>& info) { return info.param.backend; }

INSTANTIATE_TEST_SUITE_P(Backends, NativeGateTest, ::testing::ValuesIn(Plain()), Name);
INSTANTIATE_TEST_SUITE_P(ByteCopies, NativeGateTest, ::testing::ValuesIn(ByteCopies()), Name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(NativeGateTest);

}  // namespace
}  // namespace locks
