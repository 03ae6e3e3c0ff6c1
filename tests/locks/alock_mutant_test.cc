// The domain-mixing mutant (tests/locks/alock_mutant.h: native threads RMW
// r_tail, the NIC's word, with CPU atomics) must be caught on the soft NIC:
//  1. by the same mutual-exclusion stress that the real ALock passes, with
//     NIC atomics stalled now and then (soft NIC PauseNextAtomic) to widen
//     the read-to-write window of a NIC CAS the way a slow PCIe round trip
//     does on real hardware; the real ALock passes that identical run;
//  2. deterministically: a remote CAS on r_tail is held between its read and
//     its write while a native thread acquires; the mutant then lets both
//     threads in, the real ALock makes the remote thread wait.

#include <atomic>
#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"
#include "locks/alock.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"
#include "tests/locks/alock_mutant.h"
#include "tests/locks/stress_harness.h"

namespace locks::testing {
namespace {

template <typename Client>
ClientFactory Factory(std::chrono::milliseconds timeout) {
  return [timeout](rdma::Node& node, rdma::Session* session) -> absl::StatusOr<std::unique_ptr<LockClient>> {
    ClientOptions o;
    o.timeout = timeout;
    auto c = Client::Create(node, session, o);
    if (!c.ok()) return c.status();
    return std::unique_ptr<LockClient>(std::move(*c));
  };
}

uint64_t SeedFromEnv(uint64_t fallback) {
  const char* e = std::getenv("LOCKS_TEST_SEED");
  return e != nullptr ? std::strtoull(e, nullptr, 10) : fallback;
}

StressConfig MutantStress() {
  StressConfig cfg;
  cfg.num_nodes = 2;
  cfg.lock_nodes = {0};
  cfg.locks_per_node = 2;
  // Two native threads and one remote thread on two locks. With a single
  // NIC-path thread, the stall it arms right before Lock always lands on its
  // own acquire CAS (no other thread issues NIC atomics).
  cfg.threads = {{0, Path::kAuto}, {0, Path::kAuto}, {1, Path::kAuto}};
  cfg.iterations_per_thread = 4000;  // not scaled: the mutant run ends at its first overlap
  cfg.max_duration = std::chrono::seconds(15);
  cfg.seed = SeedFromEnv(7);
  cfg.atomic_cpu_counter = true;  // a broken lock shows as a wrong count, not a TSan abort
  cfg.pause_remote_acquires_every = 2;
  cfg.pause_length = std::chrono::microseconds(300);
  // Native holders spend most of their time inside the critical section, so a
  // stalled NIC CAS that read an empty r_tail usually completes while a native
  // thread (which CPU-swapped r_tail meanwhile) is still inside.
  cfg.cs_delay = std::chrono::microseconds(20);
  cfg.yield_in_cs_every = 0;
  return cfg;
}

TEST(ALockMutant, MutualExclusionStressCatchesCpuRmwOnRTail) {
  StressConfig cfg = MutantStress();
  cfg.name = "mutant";
  cfg.factory = Factory<MutantALockClient>(std::chrono::milliseconds(1000));
  cfg.stop_on_violation = true;
  cfg.continue_after_error = true;
  // Catching it depends on a stalled NIC CAS landing while a native thread is
  // inside; one run misses now and then under TSan, so allow a few seeds.
  constexpr int kAttempts = 4;
  StressResult r;
  uint64_t pauses = 0;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    cfg.seed += attempt;
    r = RunStress(cfg);
    pauses += r.pauses;
    std::printf("[mutant] attempt %d: %s\n", attempt + 1, r.Summary().c_str());
    if (r.violated()) break;
  }
  EXPECT_GT(pauses, 0u) << "the NIC-atomic staller never hit";
  EXPECT_TRUE(r.violated()) << "the mutant was NOT caught in " << kAttempts << " runs: " << r.Summary();
}

TEST(ALockMutant, RealALockPassesTheIdenticalStress) {
  StressConfig cfg = MutantStress();
  cfg.name = "real";
  cfg.factory = Factory<ALockClient>(std::chrono::milliseconds(20000));
  // The real lock must finish every iteration (the mutant's run ends early at
  // its first overlap), so scale the work to the build and allow for a loaded
  // 2-core machine: TSan with a busy CI neighbour ran ~230 acquires/s.
  cfg.iterations_per_thread = Scaled(cfg.iterations_per_thread);
  cfg.max_duration = std::chrono::seconds(60);
  StressResult r = RunStress(cfg);
  std::printf("[real] %s\n", r.Summary().c_str());
  EXPECT_GT(r.pauses, 0u);
  EXPECT_FALSE(r.violated()) << r.Summary();
  EXPECT_TRUE(r.errors.empty()) << r.Summary();
  EXPECT_EQ(r.acquisitions, 3u * cfg.iterations_per_thread);
}

// Returns whether the remote thread got the lock while the native one held it.
template <typename Client>
bool RemoteEntersWhileNativeHolds() {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = 2;
  o.node.arena_bytes = 1 << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  auto cluster = std::move(*rdma::Cluster::Create(o));
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kALock, {}});
  auto& faults = rdma::soft::AsSoftDevice(cluster->node(0).device())->faults();

  auto s0 = std::move(*cluster->NewSession(0));
  ClientOptions co;
  co.timeout = std::chrono::seconds(2);
  auto native = std::move(*Client::Create(cluster->node(0), s0.get(), co));
  std::atomic<bool> remote_in{false};
  faults.PauseNextAtomic();  // the remote thread's CAS on r_tail: read 0, then stall
  std::thread remote([&] {
    auto s1 = std::move(*cluster->NewSession(1));
    auto c = std::move(*Client::Create(cluster->node(1), s1.get(), co));
    if (c->Lock(t.at(0)).ok()) {
      remote_in = true;
      (void)c->Unlock(t.at(0));
    }
  });
  EXPECT_TRUE(faults.WaitUntilAtomicPaused(std::chrono::seconds(10)));
  EXPECT_TRUE(native->Lock(t.at(0)).ok());  // native acquire inside the CAS's window
  faults.ResumeAtomic();                     // the NIC CAS writes: it saw 0, so it "succeeds"
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (!remote_in && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  const bool overlapped = remote_in.load();
  // The mutant also corrupted the queue (r_tail now names the remote thread):
  // its native Unlock waits for a successor that never links and times out.
  absl::Status unlock = native->Unlock(t.at(0));
  if (!overlapped) {
    EXPECT_TRUE(unlock.ok()) << unlock;
  }
  remote.join();
  return overlapped;
}

TEST(ALockMutant, DeterministicInterleavingLetsTwoHoldersIn) {
  EXPECT_TRUE(RemoteEntersWhileNativeHolds<MutantALockClient>());
}

TEST(ALockMutant, DeterministicInterleavingIsSafeForTheRealALock) {
  EXPECT_FALSE(RemoteEntersWhileNativeHolds<ALockClient>());
}

}  // namespace
}  // namespace locks::testing
