#ifndef LOCKS_NATIVE_GATE_H_
#define LOCKS_NATIVE_GATE_H_

// NativeGate: the native side of one ALock, shared by every native thread of
// this process that takes it. For a lock the same few native threads take
// back to back, such as a queue's head and tail: ALock's native cohort is a
// fair MCS queue and hands the lock across cores on every acquisition; the
// gate is unfair, so one thread may run many critical sections in a row.
// Design and correctness argument: docs/design.md §4, "Native gate".
//
//   auto gate = locks::NativeGate::Create(node, lock, options);  // once, shared
//   absl::Status s = (*gate)->Run([&] { ...critical section...; return absl::OkStatus(); });
//
// Contract. Thread-safe. Every native acquisition of `lock` goes through its
// one gate, made while no native thread holds or waits for the lock: the
// gate word is the lock's l_tail, which an ALockClient taking the lock
// natively would corrupt. NIC-path acquisitions are unchanged (they only ask
// whether l_tail is 0). Errors: DeadlineExceeded after ClientOptions::timeout
// of waiting at the gate or behind a NIC holder, or the step's own status.
// Costs, uncontended: 0 NIC ops; a CPU CAS on l_tail to enter and one to
// leave, plus a load of r_tail when the native side does not already hold
// the lock (the lease).
//
// Invariants. The gate word is nonzero, the native Peterson flag up, exactly
// while a native thread holds or waits at the gate, and its low byte is never
// 0 then. The lease (the native side keeps the lock between holders) lasts
// only while native threads are counted at the gate, and ends once a waiting
// NIC cohort has seen the lock's native budget of critical sections, so
// ALock's fairness bound holds.

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
  // 0 (the default): yield and look again, still counted, so the holder keeps
  // the lease for me. > 0: park: un-count myself (a sleeping thread keeps no
  // lease and no NIC waiter out) and sleep this long, plus the kernel's timer
  // slack, before looking again. Native threads sharing gates then run in
  // bursts, as behind a std::mutex; what that gains and costs for the queue
  // is measured in bench/README.md.
  std::chrono::microseconds park{0};
};

// Cache-line aligned (and so padded to whole lines): gates made one after
// the other, as a queue makes its ring's tail and head gates, must not share
// a line between the cores that use them.
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
  // The gate word (the lock's l_tail; its layout is in locks/alock_types.h).
  static constexpr uint64_t kHeld = gate_internal::kHeld;
  static constexpr uint64_t kPresent = gate_internal::kPresent;
  static constexpr uint64_t kOneWaiter = gate_internal::kOneWaiter;

  NativeGate(rdma::RemotePtr lock, const ClientOptions& options, const NativeGateOptions& gate_options)
      : lock_(lock), line_(*lock.local<ALockWord>()), options_(options), gate_options_(gate_options) {}

  // Waits for the gate and takes it (locks/native_gate_impl.h); `s` is the
  // gate word a failed first CAS (in Run) saw.
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
