#ifndef LOCKS_ALOCK_H_
#define LOCKS_ALOCK_H_

// ALock (Baran, Nelson-Slivon, Tseng, Palmieri, SPAA 2024), docs/design.md §4.
//
// Two MCS queues ("cohorts") and a Peterson handoff between them:
//  * the local cohort: threads on the lock's node taking the native path. Its
//    tail `l_tail` is a CpuWord: CPU exchange/CAS. An uncontended native
//    acquire + release issues no NIC operation at all.
//  * the remote cohort: threads on other nodes, and threads on the lock's
//    node that ask for Path::kLoopback. Its tail `r_tail` is a NicWord: RDMA
//    CAS (a CAS loop stands in for swap). Local threads only load it.
//  * `victim` (PlainWord) is written plainly by both sides: a CPU store plus a
//    full fence locally, an RDMA WRITE remotely; never RMW'd.
//
// Peterson between the cohorts, with a fast path: a cohort head whose own
// flag (tail) is up and who then sees the other cohort's tail empty enters at
// once; only when both cohorts are present does it write `victim` and wait
// while (other tail non-empty && victim == my cohort). The tie-break via
// `victim` is only needed when both flags are up, and the later of two heads
// always sees the earlier one's flag, so skipping the write when the other
// flag is down keeps mutual exclusion (argument in locks/README.md).
//
// Budgets: the head of a cohort that wins Peterson gets its cohort's budget B;
// each in-cohort handover passes budget-1; the successor that receives 0 runs
// Peterson again. Guarantee (asserted by tests/locks/alock_fairness_test.cc):
// once the head of cohort X has written `victim` and waits, cohort Y makes at
// most B_Y more acquisitions before X gets the lock.
//
// Uncontended costs (asserted by tests/locks/lock_api_test.cc):
//   native:  0 NIC ops.
//   remote/loopback: acquire = {CAS r_tail 0->me, READ of the line} chained
//   with one doorbell on one QP [1 round trip]; the responder executes them in
//   order, so the READ sees my r_tail; it shows l_tail empty, so
//   no victim write is needed. Release = CAS r_tail me->0 [1 round trip].
//   3 NIC ops, 2 round trips, 2 doorbells (target was <= 4 ops, <= 3 RTs).
//   With the local cohort present: + {WRITE victim, READ line} [1 RT] and one
//   READ per poll while waiting (with backoff).
//
// Memory: the lock line lives on any node's arena (LockTable). Each client owns
// `max_held` descriptors in its own node's arena; a remote waiter spins on its
// own descriptor with CPU loads, and its predecessor hands over with an RDMA
// WRITE there.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "locks/internal.h"
#include "locks/lock.h"
#include "rdma/rmw_word.h"
#include "rdma/node.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/session.h"

namespace locks {

// The lock line. Each field has its own 16-byte slot.
struct alignas(64) ALockWord {
  rdma::NicWord r_tail;  // RemotePtr raw of the remote cohort's last descriptor; 0 = empty
  uint64_t pad0_;
  // RemotePtr raw of the local cohort's last descriptor, or a NativeGate's
  // word (native_gate.h); 0 = empty. NIC code only tests it against 0.
  rdma::CpuWord l_tail;
  uint64_t pad1_;
  rdma::PlainWord victim;  // kVictimLocal / kVictimRemote (0 before first use)
  uint64_t pad2_;
  rdma::PlainWord budgets;  // written once by InitLock: low 32 bits local, high 32 remote; 0 = default
  uint64_t pad3_;

  static uint64_t PackBudgets(Budgets b) {
    return uint64_t{static_cast<uint32_t>(b.local)} | (uint64_t{static_cast<uint32_t>(b.remote)} << 32);
  }
  static Budgets UnpackBudgets(uint64_t v) {
    Budgets b;
    b.local = static_cast<int32_t>(v & 0xffffffffu);
    b.remote = static_cast<int32_t>(v >> 32);
    if (b.local <= 0) b.local = kDefaultBudget;
    if (b.remote <= 0) b.remote = kDefaultBudget;
    return b;
  }
};
static_assert(sizeof(ALockWord) == kLockBytes && alignof(ALockWord) == kLockAlign);
static_assert(std::is_standard_layout_v<ALockWord>);
static_assert(offsetof(ALockWord, r_tail) == 0 && offsetof(ALockWord, l_tail) == 16 &&
              offsetof(ALockWord, victim) == 32 && offsetof(ALockWord, budgets) == 48);

inline constexpr uint64_t kVictimLocal = 1;
inline constexpr uint64_t kVictimRemote = 2;

// A thread's queue node, one cache line in registered memory of its own node.
// Both fields are PlainWords: the owner resets them with CPU stores; the
// predecessor writes `budget` and the successor writes `next` with a CPU store
// (local cohort) or an RDMA WRITE (remote cohort).
struct alignas(64) ALockDescriptor {
  rdma::PlainWord budget;  // int64: kWaiting (-1) = wait; 0 = run Peterson; >0 = own the lock
  rdma::PlainWord next;    // RemotePtr raw of the successor's descriptor; 0 = none yet
  uint64_t pad_[6];

  static constexpr int64_t kWaiting = -1;
};
static_assert(sizeof(ALockDescriptor) == 64 && std::is_standard_layout_v<ALockDescriptor>);
static_assert(offsetof(ALockDescriptor, budget) == 0 && offsetof(ALockDescriptor, next) == 8);

// Test/bench instrumentation. Called on the acquiring thread; must be cheap
// and thread-safe. Not called at all when no observer is set.
class ALockObserver {
 public:
  virtual ~ALockObserver() = default;
  // The head of `cohort` has written `victim` and found the other cohort
  // ahead of it: it now waits in Peterson's loop for `lock`.
  virtual void OnPetersonWait(rdma::RemotePtr lock, Cohort cohort) {}
  // That wait is over (the thread proceeds into the critical section).
  virtual void OnPetersonWaitDone(rdma::RemotePtr lock, Cohort cohort) {}
};

// Per-client counters (plain; read from the owning thread or after it stops).
struct ALockStats {
  uint64_t acquires[2] = {0, 0};        // by Cohort
  uint64_t handovers_in[2] = {0, 0};    // acquired with a positive budget from a predecessor
  uint64_t peterson_runs[2] = {0, 0};   // times Peterson's algorithm ran
  uint64_t peterson_fast[2] = {0, 0};   // ... and found the other cohort empty (no victim write)
  uint64_t peterson_waits[2] = {0, 0};  // ... and had to wait for the other cohort
  uint64_t swap_retries = 0;            // extra CASes of the r_tail swap loop
};

namespace lock_internal {
// The real algorithm. A test-only mutant policy lives in tests/locks.
struct ALockPolicy {
  // When true, native threads join the remote queue with CPU atomics on
  // r_tail (the NIC's word): the domain-mixing bug the tests must catch.
  static constexpr bool kMutantLocalCpuOnRTail = false;
};
}  // namespace lock_internal

template <typename Policy>
class BasicALockClient final : public LockClient {
 public:
  // A client for the calling thread on `node`. `session` is that thread's own
  // Session on `node`; it may be null if the client only takes locks of its
  // own node natively (then a NIC-path Lock fails with FailedPrecondition).
  // Allocates options.max_held descriptors in `node`'s arena.
  static absl::StatusOr<std::unique_ptr<BasicALockClient>> Create(rdma::Node& node, rdma::Session* session,
                                                                  const ClientOptions& options = {},
                                                                  ALockObserver* observer = nullptr);
  ~BasicALockClient() override;

  LockKind kind() const override { return LockKind::kALock; }
  absl::Status Lock(rdma::RemotePtr lock, Path path = Path::kAuto) override {
    return LockAndRead(lock, path, {}, nullptr);
  }
  // Lock, and on the NIC path also READ `also` (each on the lock's node) in
  // the acquire's own chain: one doorbell, no extra round trip. The READs
  // execute after the acquire's CAS (same QP), so when the acquire takes the
  // uncontended fast path (the CAS found the NIC cohort empty and the line
  // showed the native cohort empty) they see memory as the new holder: then
  // `*also_done` is true. Otherwise (contention, or the native path, where
  // nothing is read) it is false and the caller reads what it needs itself.
  // What lets a structure do its whole first step in the acquire's round trip.
  absl::Status LockAndRead(rdma::RemotePtr lock, Path path, absl::Span<const rdma::ChainedRead> also,
                           bool* also_done);
  absl::Status Unlock(rdma::RemotePtr lock) override;
  Cohort CohortFor(rdma::RemotePtr lock, Path path = Path::kAuto) const override {
    return rdma::TakenPath(path, self(), lock.node()) == Path::kNative ? Cohort::kLocal : Cohort::kRemote;
  }
  bool Holds(rdma::RemotePtr lock) const override;

  const ALockStats& stats() const { return stats_; }

 private:
  struct Slot {
    rdma::RemotePtr lock;  // null when free
    Cohort cohort = Cohort::kLocal;
    int64_t budget = 0;  // the budget this holder owns (handed on minus one)
  };
  BasicALockClient(rdma::Node& node, rdma::Session* session, const ClientOptions& options,
                   ALockObserver* observer);

  rdma::RemotePtr Descriptor(size_t slot) const;
  absl::Status LockNative(rdma::RemotePtr lock, size_t slot);
  absl::Status LockRemote(rdma::RemotePtr lock, size_t slot, absl::Span<const rdma::ChainedRead> also,
                          bool* also_done);
  absl::Status UnlockNative(rdma::RemotePtr lock, size_t slot);
  absl::Status UnlockRemote(rdma::RemotePtr lock, size_t slot);
  absl::Status PetersonNative(rdma::RemotePtr lock, size_t slot);
  // `line` is a private copy of the lock line; when `line_valid` it was read
  // after this thread raised its cohort's flag (the fast-path check needs no
  // new READ then). `*fast` says whether the fast path was taken.
  absl::Status PetersonRemote(rdma::RemotePtr lock, size_t slot, ALockWord& line, bool line_valid,
                              bool* fast = nullptr);
  // Spins (CPU loads) on my descriptor's budget until it is not kWaiting.
  absl::StatusOr<int64_t> AwaitBudget(rdma::RemotePtr lock, size_t slot);
  // Spins on my descriptor's next until set.
  absl::StatusOr<uint64_t> AwaitNext(rdma::RemotePtr lock, size_t slot);

  rdma::Node& node_;
  ClientOptions options_;
  ALockObserver* observer_;
  lock_internal::DescriptorLines lines_;  // one line per slot on node_ (retired after errors)
  std::vector<Slot> slots_;
  ALockStats stats_;
};

using ALockClient = BasicALockClient<lock_internal::ALockPolicy>;
extern template class BasicALockClient<lock_internal::ALockPolicy>;

}  // namespace locks

#endif  // LOCKS_ALOCK_H_
