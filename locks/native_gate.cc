#include "locks/native_gate.h"

#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/alock_impl.h"
#include "locks/internal.h"
#include "locks/native_gate_impl.h"

namespace locks {

absl::StatusOr<std::unique_ptr<NativeGate>> NativeGate::Create(rdma::Node& node, rdma::RemotePtr lock,
                                                               const ClientOptions& options,
                                                               const NativeGateOptions& gate_options) {
  if (gate_options.park < std::chrono::microseconds::zero()) {
    return absl::InvalidArgumentError("NativeGate: NativeGateOptions::park must not be negative");
  }
  if (absl::Status s = lock_internal::CheckLockPtr(lock); !s.ok()) return s;
  if (lock.node() != node.id()) {
    return absl::InvalidArgumentError(absl::StrCat("NativeGate: the lock lives on node ", lock.node(),
                                                   ", not on the gate's node ", node.id()));
  }
  if (const uint64_t l = lock.local<ALockWord>()->l_tail.Load(std::memory_order_acquire); l != 0) {
    return absl::FailedPreconditionError(absl::StrCat("NativeGate: lock ", lock.node(), ":0x",
                                                      absl::Hex(lock.address()),
                                                      " is held natively (l_tail = 0x", absl::Hex(l),
                                                      "); make the gate before any native thread takes it"));
  }
  return std::unique_ptr<NativeGate>(new NativeGate(lock, options, gate_options));
}

absl::Status NativeGate::GateTimeout() const {
  return absl::DeadlineExceededError(absl::StrCat(
      "NativeGate: the other native threads held lock ", lock_.node(), ":0x", absl::Hex(lock_.address()),
      " for longer than ", absl::FormatDuration(absl::FromChrono(options_.timeout)), " (ClientOptions::timeout)"));
}

absl::Status NativeGate::Enter(uint64_t s) {
  const gate_internal::WaitOptions wait{options_.timeout, gate_options_.park, &parks_};
  if (gate_internal::AwaitGate(line_.l_tail, s, wait, [](gate_internal::Uncount) {})) return absl::OkStatus();
  return GateTimeout();
}

absl::Status NativeGate::TakeLease() {
  // The flag (the gate word) is up: since Run's or Enter's CAS, or since a
  // holder before me that kept it up for waiters.
  bool fast = false;
  if (absl::Status s = alock_internal::PetersonAsNative(line_, lock_, options_, &fast, [] {}, [] {}); !s.ok()) {
    return s;
  }
  lease_held_ = true;
  lease_runs_ = 0;
  ++stats_.lease_acquires;
  native_budget_ = ALockWord::UnpackBudgets(line_.budgets.Load(std::memory_order_relaxed)).local;
  return absl::OkStatus();
}

bool NativeGate::NicWaiting() const {
  // A CPU load of the NIC cohort's tail (its flag): allowed in its domain.
  return line_.r_tail.Load(std::memory_order_relaxed) != 0;
}

absl::Status NativeGate::Leave(absl::Status s) {
  rdma::CpuWord& word = line_.l_tail;
  if (lease_held_) ++lease_runs_;
  const bool nic_turn = lease_held_ && lease_runs_ >= native_budget_ && NicWaiting();
  // Keep the lease for a waiter unless the step failed or the NIC's turn has
  // come; with no waiter, the flag goes down and the lease with it.
  const bool keep = lease_held_ && s.ok() && !nic_turn;
  uint64_t st = word.Load(std::memory_order_relaxed);
  for (;;) {
    // Holder-only state is written before the CAS that ends my hold.
    const bool waiters = st >= kOneWaiter;  // then st - kHeld keeps kPresent
    lease_held_ = waiters && keep;
    if (waiters) {
      if (keep) ++stats_.lease_kept;
      if (nic_turn) ++stats_.nic_yields;
    }
    if (word.CompareExchange(st, waiters ? st - kHeld : 0, std::memory_order_seq_cst)) return s;
    if (waiters) {  // still the holder: decide again
      if (keep) --stats_.lease_kept;
      if (nic_turn) --stats_.nic_yields;
    }
  }
}

}  // namespace locks
