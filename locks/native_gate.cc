#include "locks/native_gate.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/internal.h"
#include "rdma/path.h"

namespace locks {

absl::StatusOr<std::unique_ptr<NativeGate>> NativeGate::Create(rdma::Node& node, rdma::RemotePtr lock,
                                                               const ClientOptions& options) {
  if (absl::Status s = lock_internal::CheckLockPtr(lock); !s.ok()) return s;
  if (lock.node() != node.id()) {
    return absl::InvalidArgumentError(absl::StrCat("NativeGate: the lock lives on node ", lock.node(),
                                                   ", not on the gate's node ", node.id()));
  }
  ClientOptions lease_options = options;
  lease_options.max_held = 1;
  // No Session: the lease only ever takes the native cohort.
  absl::StatusOr<std::unique_ptr<ALockClient>> lease = ALockClient::Create(node, nullptr, lease_options);
  if (!lease.ok()) return lease.status();
  return std::unique_ptr<NativeGate>(new NativeGate(lock, std::move(*lease), options));
}

absl::Status NativeGate::Enter() {
  uint64_t s = 0;
  if (state_.compare_exchange_strong(s, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) {
    return absl::OkStatus();
  }
  // Count myself as a waiter: the holder keeps the lease for me.
  s = state_.fetch_add(kOneWaiter, std::memory_order_relaxed) + kOneWaiter;
  // Exponential backoff, then yields: a waiter that re-reads the gate word
  // less often leaves its line (and the critical section's) with the holder.
  constexpr int kBackoffRounds = 7;  // up to 2^7 pauses between reads
  int round = 0;
  std::chrono::steady_clock::time_point deadline{};
  for (;;) {
    if ((s & kHeld) == 0) {
      // Free: take it and stop counting myself, in one CAS.
      if (state_.compare_exchange_weak(s, s - kOneWaiter + kHeld, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
        return absl::OkStatus();
      }
      continue;  // `s` holds the new value
    }
    if (round < kBackoffRounds) {
      for (int i = 0; i < (1 << round); ++i) lock_internal::CpuRelax();
    } else {
      if (round == kBackoffRounds) deadline = std::chrono::steady_clock::now() + options_.timeout;
      std::this_thread::yield();
      if ((round & 15) == 0 && std::chrono::steady_clock::now() > deadline) {
        // Leave only while the gate is held: its holder's release CAS then
        // sees that I am gone (and gives the lease back if nobody is left).
        if (state_.compare_exchange_strong(s, s - kOneWaiter, std::memory_order_relaxed)) {
          return absl::DeadlineExceededError(absl::StrCat(
              "NativeGate: the other native threads held lock ", lock_.node(), ":0x", absl::Hex(lock_.address()),
              " for longer than ", absl::FormatDuration(absl::FromChrono(options_.timeout)),
              " (ClientOptions::timeout)"));
        }
        continue;
      }
    }
    ++round;
    s = state_.load(std::memory_order_relaxed);
  }
}

absl::Status NativeGate::TakeLease() {
  ++stats_.runs;
  if (lease_held_) return absl::OkStatus();
  if (absl::Status s = lease_->Lock(lock_, rdma::Path::kNative); !s.ok()) return s;
  lease_held_ = true;
  lease_runs_ = 0;
  ++stats_.lease_acquires;
  native_budget_ = ALockWord::UnpackBudgets(lock_.local<ALockWord>()->budgets.Load(std::memory_order_relaxed)).local;
  return absl::OkStatus();
}

bool NativeGate::NicWaiting() const {
  // A CPU load of the NIC cohort's tail (its flag): allowed in its domain.
  return lock_.local<ALockWord>()->r_tail.Load(std::memory_order_relaxed) != 0;
}

absl::Status NativeGate::Leave(absl::Status s) {
  if (lease_held_) ++lease_runs_;
  const bool budget_spent = lease_runs_ >= native_budget_;
  uint64_t st = state_.load(std::memory_order_relaxed);
  for (;;) {
    const bool waiters = st >= kOneWaiter;
    const bool nic_turn = budget_spent && NicWaiting();
    if (lease_held_ && !(s.ok() && waiters && !nic_turn)) {
      if (s.ok() && waiters) ++stats_.nic_yields;
      lease_held_ = false;
      absl::Status u = lease_->Unlock(lock_);
      if (s.ok()) s = u;
      // Gave the lease back: whoever comes next takes it again, so this
      // release needs no condition.
      state_.fetch_sub(kHeld, std::memory_order_release);
      return s;
    }
    // Keeping the lease for a waiter (or holding none): release only if the
    // waiter count is still the one this decision saw.
    if (lease_held_) ++stats_.lease_kept;
    if (state_.compare_exchange_weak(st, st - kHeld, std::memory_order_release, std::memory_order_relaxed)) {
      return s;
    }
    if (lease_held_) --stats_.lease_kept;  // still the holder: decide again
  }
}

}  // namespace locks
