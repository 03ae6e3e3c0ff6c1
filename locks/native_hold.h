#ifndef LOCKS_NATIVE_HOLD_H_
#define LOCKS_NATIVE_HOLD_H_

// NativeHold: the native side of one ALock, held for a group of this node's
// native threads rather than by one of them: a lease. One thread takes it,
// any thread may give it up, and in between the native side keeps ALock's
// Peterson flag (l_tail) up, so no NIC thread enters. What the native
// threads do meanwhile, and how they agree among themselves, is the
// caller's (a queue's native lease: structures/queue/native_lease.h).
//
//   locks::NativeHold hold(lock, options);  // lock: an ALock on this node
//   if (*hold.TryTake()) { ...native threads work... }
//   if (hold.NicWaiting()) hold.Give();     // let the waiting NIC thread in
//
// Contract. Thread-safe. Every native use of `lock` goes through its one
// NativeHold, made while nobody native holds or waits for the lock (the
// hold's word is the lock's l_tail, which an ALockClient or NativeGate taking
// the lock natively would corrupt). NIC-path acquisitions are unchanged.
// Costs: 0 NIC ops; TryTake is a CPU CAS and ALock's native Peterson (a
// load of r_tail when no NIC thread holds or waits), Give a CPU store.
//
// Invariants. l_tail is kHeldWord exactly from a TryTake that returned true
// to the next Give; the native side then holds the lock in ALock's sense
// (docs/design.md §4): no NIC thread is inside, and one that arrives waits
// in Peterson until Give.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/remote_ptr.h"

namespace locks {

class NativeHold {
 public:
  // l_tail while held: nonzero, and its low byte nonzero (a NIC READ that
  // mixes the bytes of two nonzero values must not read 0).
  static constexpr uint64_t kHeldWord = 0x4c01;

  // For the ALock at `lock`, on this process's node. `options.timeout`
  // bounds the Peterson wait behind a NIC holder.
  NativeHold(rdma::RemotePtr lock, const ClientOptions& options)
      : lock_(lock), line_(*lock.local<ALockWord>()), options_(options) {}
  NativeHold(const NativeHold&) = delete;
  NativeHold& operator=(const NativeHold&) = delete;

  // Takes the native side if nobody native holds it: true once taken (after
  // any NIC holder left), false if it is held already (by another TryTake).
  // DeadlineExceeded if a NIC holder stays longer than the timeout; the
  // hold is then not taken.
  absl::StatusOr<bool> TryTake();
  // Gives the native side up (the caller's TryTake, or another thread's).
  void Give();
  // A NIC thread holds or waits for the lock (a CPU load of r_tail).
  bool NicWaiting() const { return line_.r_tail.Load(std::memory_order_relaxed) != 0; }
  bool held() const { return line_.l_tail.Load(std::memory_order_relaxed) == kHeldWord; }
  rdma::RemotePtr lock() const { return lock_; }

 private:
  const rdma::RemotePtr lock_;
  ALockWord& line_;
  const ClientOptions options_;
};

}  // namespace locks

#endif  // LOCKS_NATIVE_HOLD_H_
