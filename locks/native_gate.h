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
// What. An unfair gate (a test-and-test-and-set word that also counts its
// waiters) that is the ALock's native flag itself: the gate word is the
// lock's l_tail, which a native thread would otherwise swap its MCS
// descriptor into. One bit says a native thread holds the gate, the bits
// from 8 up count the native threads waiting for it; the word is nonzero, so
// the native side's Peterson flag is up, while any native thread holds or
// waits (and then its low byte is never 0, so a NIC READ that copies it a
// byte at a time while it changes cannot see it as 0 either).
// Entering is one CPU CAS of l_tail, 0 -> held, which raises the flag; the
// holder then runs ALock's native Peterson half (one load of r_tail when no
// NIC thread is there) unless the native side has won it already and kept
// it. The native side keeps it (the lease) while native threads keep coming,
// and gives it up:
//   * when no native thread waits at the gate: leaving then takes l_tail
//     back to 0, and with it the flag (the lease never outlives native
//     presence: with nobody left to release it, a NIC waiter would wait
//     forever);
//   * when the NIC cohort waits (the lock's r_tail is not empty) and the
//     native side has had the lock's native budget of critical sections
//     since it won Peterson: the next holder runs Peterson again, and its
//     victim = local lets the NIC cohort in first. ALock's bound (a waiting
//     NIC cohort sees at most B_local native critical sections) still holds;
//   * after an error.
// The keep-or-give decision and the gate's release are one CAS on the gate
// word: a thread that arrives after it finds the gate free and takes it; one
// that arrived before is counted, and leaves only by taking the gate (or,
// timing out, by un-counting itself while the gate is held, so the holder's
// CAS sees it). Only the holder that takes the word to 0 lowers the flag, and
// it forgets the lease as it does.
//
// Contract. Every native acquisition of `lock` goes through one NativeGate,
// made while no native thread holds the lock (its owner makes one per lock
// and shares it): the gate word is l_tail, so an ALockClient taking the same
// lock natively would corrupt it. NIC-path acquisitions are unchanged (the
// NIC cohort only reads l_tail, and only asks whether it is 0). Thread-safe.
//
// Costs, uncontended: 0 NIC ops; one CPU CAS on l_tail to enter and one to
// leave, and a load of r_tail when the lease is not held. Back to back under
// contention: the two CASes only.
//
// Waiting: a waiter backs off, then yields, or parks (NativeGateOptions).
//
// Errors: DeadlineExceeded after ClientOptions::timeout of waiting behind a
// NIC holder (ALock's native Peterson wait) or behind other native threads
// at the gate, or the step's own status.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/optimization.h"
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
  uint64_t lease_acquires = 0;  // times the native side won ALock's Peterson
  uint64_t lease_kept = 0;      // releases that kept it for a waiter
  uint64_t nic_yields = 0;      // gave it up for the NIC cohort while natives waited
};

// How a gate's waiters wait once their spins are over.
struct NativeGateOptions {
  // 0 (the default): yield and look again, still counted, so the holder
  // keeps the lease for me. > 0: park: stop counting myself (a sleeping
  // thread keeps no lease and no NIC waiter out) and sleep this long, plus
  // the kernel's timer slack (typically 50 us), before looking again. Native
  // threads that take the same gates back to back then run in bursts, one
  // alone while the others sleep, as behind a std::mutex: a queue's 2 native
  // threads that both enqueue and dequeue move 30-130% more values, but
  // native threads next to NIC threads lose 20-50% (README, "Queue").
  std::chrono::microseconds park{0};
};

// Cache-line aligned (and so padded to whole lines): gates are made back to
// back (a queue makes a ring's tail and head gates in a row), and two gates
// sharing a line would move it between the cores that use them on every
// operation. That false sharing once cost a 1-producer/1-consumer queue 40%
// of its throughput (docs/design.md §4, "Native gate").
class alignas(64) NativeGate {
 public:
  // A gate for the ALock at `lock`, which lives on `node` (hosted by this
  // process). The lock's budgets must be initialized already
  // (locks::InitLock) when they are not the defaults. `options.timeout`
  // bounds each wait. FailedPrecondition if a native thread holds or waits
  // for the lock (its l_tail is not 0).
  // InvalidArgument for a negative `gate_options.park`.
  static absl::StatusOr<std::unique_ptr<NativeGate>> Create(rdma::Node& node, rdma::RemotePtr lock,
                                                            const ClientOptions& options,
                                                            const NativeGateOptions& gate_options = {});
  NativeGate(const NativeGate&) = delete;
  NativeGate& operator=(const NativeGate&) = delete;

  // Runs `step()` (returning absl::Status) holding `lock` for the native
  // side, and returns its status, or the error that kept it from running.
  template <typename Step>
  absl::Status Run(Step&& step) {
    // The gate's first CAS and a kept lease inline; waiting for the gate
    // (Enter) and winning the lease (TakeLease: ALock's Peterson) out of
    // line.
    uint64_t w = 0;
    if (ABSL_PREDICT_FALSE(!line_.l_tail.CompareExchange(w, kPresent | kHeld, std::memory_order_seq_cst))) {
      if (absl::Status s = Enter(w); !s.ok()) return s;
    }
    ++stats_.runs;
    absl::Status s = lease_held_ ? absl::OkStatus() : TakeLease();
    if (s.ok()) s = step();
    return Leave(std::move(s));
  }

  const NativeGateStats& stats() const { return stats_; }
  // Times a waiter parked (NativeGateOptions::park); any time, any thread.
  uint64_t parks() const { return parks_.load(std::memory_order_relaxed); }
  rdma::RemotePtr lock() const { return lock_; }

 private:
  // The gate word (the lock's l_tail): 0, or kPresent | (kHeld if a native
  // thread holds the gate) + (threads waiting for it) * kOneWaiter. kPresent
  // keeps the low byte nonzero in every nonzero value: Soft-RoCE may copy a
  // word a byte at a time, and a NIC READ that mixes the bytes of two
  // nonzero values must still not read 0 ("native flag down").
  static constexpr uint64_t kHeld = 1;
  static constexpr uint64_t kPresent = 2;
  static constexpr uint64_t kOneWaiter = uint64_t{1} << 8;

  NativeGate(rdma::RemotePtr lock, const ClientOptions& options, const NativeGateOptions& gate_options)
      : lock_(lock), line_(*lock.local<ALockWord>()), options_(options), gate_options_(gate_options) {}

  // Waits for the gate and takes it; `s` is the gate word a failed first
  // CAS (in Run) saw.
  absl::Status Enter(uint64_t s);
  absl::Status GateTimeout() const;
  // Wins ALock's Peterson for the native side (the lease is not held).
  absl::Status TakeLease();
  // Keeps or gives up the lease and releases the gate; returns `s`.
  absl::Status Leave(absl::Status s);
  bool NicWaiting() const;

  const rdma::RemotePtr lock_;
  ALockWord& line_;
  // Touched only by the gate's holder (the gate word's CASes order the
  // holders): whether the native side won Peterson and has kept its flag up
  // since, and the critical sections run since.
  bool lease_held_ = false;
  int64_t lease_runs_ = 0;
  int64_t native_budget_ = kDefaultBudget;  // the lock's, read when the lease is taken
  const ClientOptions options_;
  const NativeGateOptions gate_options_;
  NativeGateStats stats_;
  std::atomic<uint64_t> parks_{0};
};

}  // namespace locks

#endif  // LOCKS_NATIVE_GATE_H_
