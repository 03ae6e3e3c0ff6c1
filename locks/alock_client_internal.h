#ifndef LOCKS_ALOCK_CLIENT_INTERNAL_H_
#define LOCKS_ALOCK_CLIENT_INTERNAL_H_

// Internal: the class behind locks::ALockClient. Include locks/alock.h and
// name ALockClient; nothing outside locks/ and its tests names
// BasicALockClient or a policy.
//
// The template parameter is a compile-time test switch and nothing more.
// ALockPolicy is the real lock. tests/locks/alock_mutant.h instantiates the
// one other policy, which turns on a deliberate bug (native threads RMW
// r_tail with CPU atomics, the domain mixing of docs/design.md §3) so that
// the tests can show they catch it (§7). The switch is read in `if constexpr`
// only: the real lock's code is the same as without it.
//
// Member definitions: locks/alock_impl.h; the real lock is instantiated once,
// in locks/alock.cc.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "locks/alock_types.h"
#include "locks/internal.h"
#include "locks/lock.h"
#include "rdma/node.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"

namespace locks::lock_internal {

// The real lock: no test switch on.
struct ALockPolicy {
  // Test-only. True: native threads skip l_tail and take r_tail, the NIC
  // side's word, with CPU CASes.
  static constexpr bool kMutantLocalCpuOnRTail = false;
};

template <typename Policy>
class BasicALockClient final : public LockClient {
 public:
  // A client for the calling thread on `node`. `session` is that thread's own
  // Session on `node`; null is allowed for a client that only takes its own
  // node's locks natively (a NIC-path Lock then fails with
  // FailedPrecondition). Allocates options.max_held descriptors in `node`'s
  // arena. InvalidArgument for max_held outside 1..4096 or a session of
  // another node.
  static absl::StatusOr<std::unique_ptr<BasicALockClient>> Create(rdma::Node& node, rdma::Session* session,
                                                                  const ClientOptions& options = {},
                                                                  ALockObserver* observer = nullptr);
  ~BasicALockClient() override;

  LockKind kind() const override { return LockKind::kALock; }
  absl::Status Lock(rdma::RemotePtr lock, Path path = Path::kAuto) override {
    return LockAndRead(lock, path, {}, nullptr);
  }
  // Lock, and on the NIC path also READ `also` (each on the lock's node) in
  // the acquire's own chain: no extra doorbell or round trip. The READs run
  // after the acquire's CAS (same QP), and again behind every line READ of
  // a Peterson wait. `*also_done` is true when they saw memory as the holder
  // (behind the fast path's CAS, or behind the wait's last line READ, which
  // let this client in); otherwise (the native path, where nothing is
  // read) false, and the caller reads what it needs itself.
  absl::Status LockAndRead(rdma::RemotePtr lock, Path path, absl::Span<const rdma::ChainedRead> also,
                           bool* also_done);
  absl::Status Unlock(rdma::RemotePtr lock) override;
  Cohort CohortFor(rdma::RemotePtr lock, Path path = Path::kAuto) const override {
    return rdma::TakenPath(path, self(), lock.node()) == Path::kNative ? Cohort::kLocal : Cohort::kRemote;
  }
  bool Holds(rdma::RemotePtr lock) const override;

  const ALockStats& stats() const { return stats_; }
  // Tokens failed calls left in locks, not yet taken back (each later call
  // of this client, and its destructor, tries again).
  size_t take_backs_pending() const { return pending_.size(); }

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
  // Native cohort: links my descriptor behind `pred`, the tail my swap into
  // l_tail returned, and waits for the handover. True: handed a positive
  // budget (I hold the lock); false: handed 0 (run Peterson).
  absl::StatusOr<bool> FollowPredecessor(rdma::RemotePtr lock, size_t slot, uint64_t pred);
  absl::Status UnlockNative(rdma::RemotePtr lock, size_t slot);
  absl::Status UnlockRemote(rdma::RemotePtr lock, size_t slot);
  // Waits for my successor's link and hands it my budget minus one.
  absl::Status HandOver(rdma::RemotePtr lock, size_t slot);
  absl::Status PetersonNative(rdma::RemotePtr lock, size_t slot);
  // The NIC side's Peterson for `lock`. `line` is a private copy of the lock
  // line read after this thread's CAS raised the NIC side's flag. `*fast`
  // says whether the fast path was taken; `also` ride behind the wait's line
  // READs (`*also_read`: the READ that let it in carried them).
  absl::Status PetersonRemote(rdma::RemotePtr lock, ALockWord& line, absl::Span<const rdma::ChainedRead> also,
                              bool* fast, bool* also_read);
  // Takes `me` back out of the lock's r_next and r_tail after an error
  // (through a reconnect); when that fails too, remembers it for this
  // client's next call and says so in `why`, which it returns.
  absl::Status TakeBack(rdma::RemotePtr lock, uint64_t me, absl::Status why);
  absl::Status WithdrawToken(rdma::RemotePtr lock, uint64_t me);
  // Tries the remembered take-backs again; an error only when one for
  // `wanted` still fails.
  absl::Status RetryTakeBacks(rdma::RemotePtr wanted);
  // Spins (CPU loads) on my descriptor's budget until it holds a budget.
  absl::StatusOr<int64_t> AwaitBudget(rdma::RemotePtr lock, size_t slot);
  // Spins on my descriptor's next until it names a descriptor.
  absl::StatusOr<uint64_t> AwaitNext(rdma::RemotePtr lock, size_t slot);

  rdma::Node& node_;
  ClientOptions options_;
  ALockObserver* observer_;
  DescriptorLines lines_;  // one line per slot on node_ (retired after errors)
  std::vector<Slot> slots_;
  // Tokens a failed call could not take back, retried at every call.
  struct PendingTakeBack {
    rdma::RemotePtr lock;
    uint64_t token = 0;
  };
  std::vector<PendingTakeBack> pending_;
  ALockStats stats_;
};

}  // namespace locks::lock_internal

#endif  // LOCKS_ALOCK_CLIENT_INTERNAL_H_
