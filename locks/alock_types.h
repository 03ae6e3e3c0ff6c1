#ifndef LOCKS_ALOCK_TYPES_H_
#define LOCKS_ALOCK_TYPES_H_

// ALock's shared types (include locks/alock.h, which includes this): the lock
// line (ALockWord) and the queue descriptor (ALockDescriptor) as they lie in
// registered memory, and the client's counters and observer hook.
//
// Each word's type names the only domain that may read-modify-write it
// (docs/design.md §3): r_tail only NIC atomics, l_tail only CPU atomics,
// victim, budgets and both descriptor words nobody (plain loads and stores,
// CPU or RDMA); r_next, like r_tail, only NIC atomics. Layouts are fixed
// (static_asserts below): structures embed the line and NIC code addresses
// its fields by offset. docs/design.md §4.

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "locks/lock.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"  // RemoteRef<ALockWord>: how NIC code reaches these fields
#include "rdma/rmw_word.h"

namespace locks {

// The lock line: the NIC side's two words, then l_tail, victim and budgets,
// each in its own 16-byte slot. All zero = unlocked, default budgets.
struct alignas(64) ALockWord {
  rdma::NicWord r_tail;  // the NIC holder's token (its descriptor's raw RemotePtr); 0 = none
  // The token of a NIC locker that has waited and announced its turn: a NIC
  // locker whose CAS wins while it names another steps aside. 0 = none.
  rdma::NicWord r_next;
  // Raw RemotePtr of the native cohort's last descriptor, or a NativeGate's
  // word (gate_internal below); 0 = empty. NIC code only tests it against 0.
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
static_assert(offsetof(ALockWord, r_tail) == 0 && offsetof(ALockWord, r_next) == 8 &&
              offsetof(ALockWord, l_tail) == 16 && offsetof(ALockWord, victim) == 32 &&
              offsetof(ALockWord, budgets) == 48);

inline constexpr uint64_t kVictimLocal = 1;
inline constexpr uint64_t kVictimRemote = 2;

namespace gate_internal {
// A NativeGate's word (locks/native_gate.h), in ALockWord::l_tail: 0, or
// kPresent | (kHeld if a native thread holds the gate) + (threads waiting for
// it) * kOneWaiter. kPresent keeps the low byte nonzero in every nonzero
// value: Soft-RoCE may copy a word a byte at a time, and a NIC READ that
// mixes the bytes of two nonzero values must still not read 0 ("native flag
// down").
inline constexpr uint64_t kHeld = 1;
inline constexpr uint64_t kPresent = 2;
inline constexpr uint64_t kOneWaiter = uint64_t{1} << 8;
}  // namespace gate_internal

// A thread's queue node, one line in its own node's registered memory. The
// owner resets both words with CPU stores; in the native cohort the
// predecessor writes `budget`, the successor `next`, by CPU store. A NIC
// locker's line is only its token: nobody writes it over the NIC.
struct alignas(64) ALockDescriptor {
  rdma::PlainWord budget;  // int64: kWaiting (-1) = wait; 0 = run Peterson; >0 = own the lock
  rdma::PlainWord next;    // raw RemotePtr of the successor's descriptor; 0 = none yet
  uint64_t pad_[6];

  static constexpr int64_t kWaiting = -1;
};
static_assert(sizeof(ALockDescriptor) == 64 && std::is_standard_layout_v<ALockDescriptor>);
static_assert(offsetof(ALockDescriptor, budget) == 0 && offsetof(ALockDescriptor, next) == 8);

// Test and benchmark hook. Called on the acquiring thread, only when set;
// must be cheap and thread-safe.
class ALockObserver {
 public:
  virtual ~ALockObserver() = default;
  // The head of `cohort` wrote `victim` and found the other cohort ahead: it
  // waits in Peterson's loop for `lock`.
  virtual void OnPetersonWait(rdma::RemotePtr lock, Cohort cohort) {}
  // That wait is over (the thread proceeds into the critical section).
  virtual void OnPetersonWaitDone(rdma::RemotePtr lock, Cohort cohort) {}
};

// Per-client counters, indexed by Cohort. Plain fields: read them on the
// owning thread or after it stops.
struct ALockStats {
  uint64_t acquires[2] = {0, 0};
  uint64_t handovers_in[2] = {0, 0};    // acquired with a positive budget from a predecessor (native only)
  uint64_t peterson_runs[2] = {0, 0};   // times Peterson's algorithm ran
  uint64_t peterson_fast[2] = {0, 0};   // ... and found the other cohort empty (no victim write)
  uint64_t peterson_waits[2] = {0, 0};  // ... and had to wait for the other cohort
  uint64_t cas_retries = 0;             // NIC acquires' extra {CAS r_tail, READ} chains (held, or stepped aside)
};

}  // namespace locks

#endif  // LOCKS_ALOCK_TYPES_H_
