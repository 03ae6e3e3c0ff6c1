#ifndef LOCKS_NATIVE_GATE_IMPL_H_
#define LOCKS_NATIVE_GATE_IMPL_H_

// How a NativeGate's waiter waits for the gate and takes it: NativeGate::Enter
// (locks/native_gate.cc) is AwaitGate with an empty hook. Internal; the
// contract is in locks/native_gate.h, the argument in docs/design.md §4,
// "Native gate". Nothing outside locks/ and its tests includes this header.
//
// The hook is a compile-time test seam and nothing more: `before_uncount`
// runs just before each CAS by which a waiter un-counts itself, so that a
// test can make the holder leave between the waiter's last look at the gate
// word and that CAS (tests/locks/native_gate_checks_test.cc). The gate's empty
// lambda compiles to the same code as no hook.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "locks/alock_types.h"
#include "locks/internal.h"
#include "rdma/rmw_word.h"

namespace locks::gate_internal {

// Which un-count a `before_uncount` call precedes.
enum class Uncount {
  kTimedOut,  // the wait passed its timeout: leave the gate
  kParking,   // NativeGateOptions::park: sleep, not counted
};

struct WaitOptions {
  std::chrono::nanoseconds timeout;  // ClientOptions::timeout
  std::chrono::microseconds park;    // NativeGateOptions::park
  std::atomic<uint64_t>* parks;      // incremented at each park
};

// Waits at the gate whose word (kHeld, kPresent, kOneWaiter in
// locks/alock_types.h) is `word` and takes it. `s` is the value a failed
// CAS of 0 -> held saw. True once the caller holds the gate (no longer
// counted); false after `options.timeout` of waiting, not counted either.
template <typename BeforeUncount>
bool AwaitGate(rdma::CpuWord& word, uint64_t s, const WaitOptions& options, BeforeUncount&& before_uncount) {
  // Raising the flag is always a seq_cst RMW, so the holder's later load of
  // r_tail comes after it (ALock's Peterson; docs/design.md §4).
  const bool parking = options.park > std::chrono::microseconds::zero();
  bool deadline_set = false;
  std::chrono::steady_clock::time_point deadline{};
  auto past_deadline = [&] {
    const auto now = std::chrono::steady_clock::now();
    if (!deadline_set) {
      deadline_set = true;
      deadline = now + options.timeout;
    }
    return now > deadline;
  };
  for (;;) {
    // Take the word if it is 0, else count myself as a waiter (the holder
    // keeps the lease for me), with kPresent set.
    for (;;) {
      if (s == 0) {
        if (word.CompareExchange(s, kPresent | kHeld, std::memory_order_seq_cst)) return true;
      } else if (word.CompareExchange(s, (s + kOneWaiter) | kPresent, std::memory_order_seq_cst)) {
        s = (s + kOneWaiter) | kPresent;
        break;
      }
    }
    // Counted. Exponential backoff between reads: a waiter that re-reads the
    // gate word less often leaves its line (and the critical section's) with
    // the holder. When the gate is free, take it and stop counting myself,
    // in one CAS. Still held after the backoff:
    //  * without parking, yield and look again, still counted; on timeout
    //    un-count myself, only while the gate is held (so that its holder's
    //    release CAS sees that I am gone), and give up;
    //  * parking: un-count myself (again only while the gate is held) and
    //    sleep. A parked thread is not native presence: it keeps no lease,
    //    no flag up and no NIC waiter out while it sleeps.
    // Both un-counts are CASes whose expected value `s` has kHeld set: a
    // holder that left meanwhile (to me, counted) fails them, and I take the
    // gate instead of leaving a flag up that nobody is left to lower.
    constexpr int kBackoffRounds = 7;  // up to 2^7 pauses between reads
    for (int round = 0;;) {
      if ((s & kHeld) == 0) {
        if (word.CompareExchange(s, s - kOneWaiter + kHeld, std::memory_order_seq_cst)) return true;
        continue;  // `s` holds the new value
      }
      if (round < kBackoffRounds) {
        for (int i = 0; i < (1 << round); ++i) lock_internal::CpuRelax();
        ++round;
        s = word.Load(std::memory_order_relaxed);
        continue;
      }
      if (parking) {
        before_uncount(Uncount::kParking);
        if (word.CompareExchange(s, s - kOneWaiter, std::memory_order_relaxed)) break;
        continue;  // `s` holds the new value
      }
      std::this_thread::yield();
      if ((++round & 15) == 0 && past_deadline()) {
        before_uncount(Uncount::kTimedOut);
        if (word.CompareExchange(s, s - kOneWaiter, std::memory_order_relaxed)) return false;
        continue;
      }
      s = word.Load(std::memory_order_relaxed);
    }
    // Parked: not counted.
    if (past_deadline()) return false;
    options.parks->fetch_add(1, std::memory_order_relaxed);
    std::this_thread::sleep_for(options.park);
    s = word.Load(std::memory_order_relaxed);
  }
}

}  // namespace locks::gate_internal

#endif  // LOCKS_NATIVE_GATE_IMPL_H_
