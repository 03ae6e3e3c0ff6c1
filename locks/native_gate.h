#ifndef LOCKS_NATIVE_GATE_H_
#define LOCKS_NATIVE_GATE_H_

// NativeGate: the native side of one ALock, shared by every native thread of
// this process that takes it (docs/design.md §4, "Native gate"). For locks
// that the same few native threads take back to back all the time, such as a
// queue's head and tail.
//
// Why. ALock's native cohort is an MCS queue: fair, so two native threads
// that take one lock in turn hand it over on every acquisition, a cross-core
// round trip each. A container behind a std::mutex does better under such
// contention because the mutex is unfair: one thread runs many critical
// sections while the other waits, and everything stays in one cache.
//
// What. An unfair gate in process memory (a test-and-test-and-set word that
// also counts its waiters) in front of the ALock's native cohort, and a
// lease: the gate's holder acquires the ALock (native cohort, no NIC op) only
// when the native side does not hold it already, and when it leaves it keeps
// the ALock for the next native holder, or gives it back:
//   * it gives it back when no native thread waits at the gate: the lease
//     never outlives native presence (with nobody left to release it, a NIC
//     waiter would wait forever);
//   * it gives it back when the NIC cohort waits (the lock's r_tail is not
//     empty) and the native side has had the lock's native budget of critical
//     sections since it took the ALock: ALock's bound (a waiting NIC cohort
//     sees at most B_local native critical sections) still holds;
//   * it gives it back after an error.
// The keep-or-give decision and the gate's release are one CAS on the gate
// word, which holds the waiter count: a thread that arrives after it finds
// the gate free and takes the lock itself; one that arrived before is
// counted, and leaves only by taking the gate (or, timing out, by
// un-counting itself while the gate is held, so the holder's CAS sees it).
//
// Contract. Every native acquisition of `lock` in this process goes through
// the same NativeGate (its owner makes one per lock and shares it); a thread
// that took the lock's native cohort directly would queue behind the lease
// and could wait until the gate's waiters are gone. NIC-path acquisitions are
// unchanged. Thread-safe.
//
// Costs, uncontended: 0 NIC ops; two CPU CASes on the gate word, plus ALock's
// native acquire and release when the lease is not held. Back to back under
// contention: the two gate CASes only.
//
// Errors: what the ALock returns (DeadlineExceeded after ClientOptions::
// timeout behind a NIC holder), DeadlineExceeded when the gate stays held by
// other native threads for the timeout, or the step's own status.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/node.h"
#include "rdma/remote_ptr.h"

namespace locks {

// What a gate did (for tests and benchmarks). Written by gate holders only;
// read it when no thread is inside Run.
struct NativeGateStats {
  uint64_t runs = 0;            // critical sections run
  uint64_t lease_acquires = 0;  // times the ALock's native cohort was taken
  uint64_t lease_kept = 0;      // releases that kept the ALock for a waiter
  uint64_t nic_yields = 0;      // gave it back because the NIC cohort waited
};

// Cache-line aligned (and so padded to whole lines): gates are made back to
// back (a queue makes a ring's tail and head gates in a row), and two gates
// sharing a line would move it between the cores that use them on every
// operation. That false sharing once cost a 1-producer/1-consumer queue 40%
// of its throughput (docs/design.md §4, "Native gate").
class alignas(64) NativeGate {
 public:
  // A gate for the ALock at `lock`, which lives on `node` (hosted by this
  // process). Allocates one ALock descriptor line in `node`'s arena. The
  // lock's budgets must be initialized already (locks::InitLock) when they
  // are not the defaults. `options.timeout` bounds each wait.
  static absl::StatusOr<std::unique_ptr<NativeGate>> Create(rdma::Node& node, rdma::RemotePtr lock,
                                                            const ClientOptions& options);
  NativeGate(const NativeGate&) = delete;
  NativeGate& operator=(const NativeGate&) = delete;

  // Runs `step()` (returning absl::Status) holding `lock` for the native
  // side, and returns its status, or the error that kept it from running.
  template <typename Step>
  absl::Status Run(Step&& step) {
    if (absl::Status s = Enter(); !s.ok()) return s;
    absl::Status s = TakeLease();
    if (s.ok()) s = step();
    return Leave(std::move(s));
  }

  const NativeGateStats& stats() const { return stats_; }
  rdma::RemotePtr lock() const { return lock_; }

 private:
  // state_: bit 0 = held; bits 1.. = threads waiting for the gate.
  static constexpr uint64_t kHeld = 1;
  static constexpr uint64_t kOneWaiter = 2;

  NativeGate(rdma::RemotePtr lock, std::unique_ptr<ALockClient> lease, const ClientOptions& options)
      : lock_(lock), lease_(std::move(lease)), options_(options) {}

  absl::Status Enter();
  absl::Status TakeLease();
  // Keeps or gives back the lease and releases the gate; returns `s`, or the
  // lease's release error when `s` is OK.
  absl::Status Leave(absl::Status s);
  bool NicWaiting() const;

  const rdma::RemotePtr lock_;
  std::atomic<uint64_t> state_{0};
  // Touched only by the gate's holder (the gate's CASes order the holders).
  std::unique_ptr<ALockClient> lease_;
  bool lease_held_ = false;
  int64_t lease_runs_ = 0;
  int64_t native_budget_ = kDefaultBudget;  // the lock's, read when the lease is taken
  const ClientOptions options_;
  NativeGateStats stats_;
};

}  // namespace locks

#endif  // LOCKS_NATIVE_GATE_H_
