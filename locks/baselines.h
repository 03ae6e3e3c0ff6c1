#ifndef LOCKS_BASELINES_H_
#define LOCKS_BASELINES_H_

// The baseline locks that ALock is measured against (docs/design.md §4),
// behind the same LockClient interface (lock.h), which states the contract:
// one client per thread, errors as statuses, DeadlineExceeded after
// ClientOptions::timeout. Usually made by kind:
//
//   auto c = locks::NewLockClient(locks::LockKind::kRdmaMcs, node, session.get());
//
// Each lock is one kLockBytes line whose first word is the lock word; the
// all-zero line is unlocked. Uncontended costs (tests/locks/lock_api_test.cc):
//
//   kind            lock word          path                     NIC ops  round trips
//   RdmaSpinClient  NicWord: token     any, locals by loopback  2        2
//   RdmaMcsClient   NicWord: MCS tail  any, locals by loopback  2        2
//   LocalMcsClient  CpuWord: MCS tail  native only              0        0
//
// RDMA spin: CAS 0 -> token with backoff, WRITE 0 to release; the token
// names the holder's node, so a lock whose holder died is released by the
// lock's home (RepairDeadHolder, lock.h). RDMA MCS: swap
// by CAS loop, link and hand over by RDMA WRITE into the other thread's
// descriptor; a waiter spins on its own, in its own memory. Local MCS: CPU
// exchange/CAS, FailedPrecondition for another node's lock or kLoopback.

#include <cstddef>
#include <cstdint>
#include <memory>

#include "locks/alock.h"
#include "locks/internal.h"
#include "locks/lock.h"
#include "rdma/node.h"
#include "rdma/remote_ref.h"
#include "rdma/rmw_word.h"
#include "rdma/session.h"

namespace locks {

// The lock lines of the baselines: one word at the start of a kLockBytes line.
// RDMA spin and RDMA MCS take theirs with NIC atomics only (every thread goes
// through the NIC, local ones over loopback); local MCS with CPU atomics only.
struct alignas(64) NicLockLine {
  rdma::NicWord word;  // spin: 0 or the holder's token; MCS: raw RemotePtr of the tail descriptor
  uint64_t pad_[7];
};
struct alignas(64) CpuLockLine {
  rdma::CpuWord tail;  // raw RemotePtr of the tail descriptor; 0 = free
  uint64_t pad_[7];
};
static_assert(sizeof(NicLockLine) == kLockBytes && offsetof(NicLockLine, word) == 0);
static_assert(sizeof(CpuLockLine) == kLockBytes && offsetof(CpuLockLine, tail) == 0);

class RdmaSpinClient final : public LockClient {
 public:
  static absl::StatusOr<std::unique_ptr<RdmaSpinClient>> Create(rdma::Node& node, rdma::Session* session,
                                                                const ClientOptions& options = {});
  LockKind kind() const override { return LockKind::kRdmaSpin; }
  absl::Status Lock(rdma::RemotePtr lock, Path path = Path::kAuto) override;
  absl::Status Unlock(rdma::RemotePtr lock) override;
  Cohort CohortFor(rdma::RemotePtr, Path = Path::kAuto) const override { return Cohort::kRemote; }
  bool Holds(rdma::RemotePtr lock) const override { return !lock.is_null() && held_.Find(lock) >= 0; }

 private:
  RdmaSpinClient(rdma::Node& node, rdma::Session* session, const ClientOptions& options);
  ClientOptions options_;
  uint64_t token_;
  struct Nothing {};
  lock_internal::HeldSlots<Nothing> held_;
};

// What both MCS clients keep: one 64-byte descriptor line per lock they may
// hold (ClientOptions::max_held), in their node's arena, and the locks they
// hold. Not thread-safe (one per thread, as every LockClient).
class McsClientBase : public LockClient {
 public:
  ~McsClientBase() override;
  bool Holds(rdma::RemotePtr lock) const override { return !lock.is_null() && held_.Find(lock) >= 0; }

 protected:
  McsClientBase(rdma::Node& node, rdma::Session* session, const ClientOptions& options);
  // Allocates the descriptor lines (the last step of a Create).
  absl::Status AllocateDescriptors();
  rdma::RemotePtr Descriptor(int slot) const { return lines_[static_cast<size_t>(slot)]; }
  // A free slot whose line is usable.
  absl::StatusOr<int> Reserve(rdma::RemotePtr lock) const { return held_.Reserve(lock, &lines_); }
  // After a Lock or Unlock of `slot` failed: its line may still be in that
  // lock's queue (lock_internal::DescriptorLines).
  void Retire(int slot) { lines_.Retire(static_cast<size_t>(slot)); }
  // After a Lock attempt with `slot` failed, `mark` taken just before it
  // (DescriptorLines::AttemptMark): retires the line if the attempt may have
  // queued it.
  void RetireAfterFailedLock(int slot, bool native, uint64_t mark) {
    lines_.RetireAfterFailedLock(static_cast<size_t>(slot), native, mark);
  }
  // Lock and Unlock around the queue step: reserve a slot, run
  // `enqueue(descriptor)`, retire the line if a failed attempt may have
  // queued it; find the held slot, run `dequeue(descriptor)`, retire the line
  // on failure. Defined in baselines.cc, the only user.
  template <typename Enqueue>
  absl::Status LockSlot(rdma::RemotePtr lock, bool native, Enqueue enqueue);
  template <typename Dequeue>
  absl::Status UnlockSlot(rdma::RemotePtr lock, Dequeue dequeue);

  const ClientOptions options_;
  struct Nothing {};
  lock_internal::HeldSlots<Nothing> held_;

 private:
  rdma::Node& node_;
  lock_internal::DescriptorLines lines_;
};

class RdmaMcsClient final : public McsClientBase {
 public:
  static absl::StatusOr<std::unique_ptr<RdmaMcsClient>> Create(rdma::Node& node, rdma::Session* session,
                                                               const ClientOptions& options = {});
  LockKind kind() const override { return LockKind::kRdmaMcs; }
  absl::Status Lock(rdma::RemotePtr lock, Path path = Path::kAuto) override;
  absl::Status Unlock(rdma::RemotePtr lock) override;
  Cohort CohortFor(rdma::RemotePtr, Path = Path::kAuto) const override { return Cohort::kRemote; }

 private:
  using McsClientBase::McsClientBase;
  absl::Status Enqueue(rdma::RemotePtr lock, rdma::RemotePtr me);
  absl::Status Dequeue(rdma::RemotePtr lock, rdma::RemotePtr me);
};

class LocalMcsClient final : public McsClientBase {
 public:
  // `session` may be null: this lock never uses the NIC.
  static absl::StatusOr<std::unique_ptr<LocalMcsClient>> Create(rdma::Node& node, rdma::Session* session = nullptr,
                                                                const ClientOptions& options = {});
  LockKind kind() const override { return LockKind::kLocalMcs; }
  absl::Status Lock(rdma::RemotePtr lock, Path path = Path::kAuto) override;
  absl::Status Unlock(rdma::RemotePtr lock) override;
  Cohort CohortFor(rdma::RemotePtr, Path = Path::kAuto) const override { return Cohort::kLocal; }

 private:
  using McsClientBase::McsClientBase;
  absl::Status Enqueue(rdma::RemotePtr lock, rdma::RemotePtr me);
  absl::Status Dequeue(rdma::RemotePtr lock, rdma::RemotePtr me);
};

}  // namespace locks

#endif  // LOCKS_BASELINES_H_
