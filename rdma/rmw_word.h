#ifndef RDMA_RMW_WORD_H_
#define RDMA_RMW_WORD_H_

// RMW-domain words (docs/design.md §3): the types that make "who may read-modify-write
// this 8-byte word" visible, and enforce it.
//
// An RNIC's atomics (CAS, FAA) are atomic only among NIC atomics on the same
// device; a CPU `lock cmpxchg` and an RDMA CAS on the same word can both
// "succeed". So every shared 8-byte word in registered memory has exactly one
// RMW domain:
//
//   type        RMW'd by                      the other side may only
//   ----------  ----------------------------  ------------------------------
//   CpuWord     CPU atomics on the owner node RDMA READ it / RDMA WRITE it
//   NicWord     NIC atomics (remote or        CPU-load it / CPU-store it
//               loopback RDMA CAS/FAA)
//   PlainWord   nobody                        load/store from both sides
//
// All three are exactly 8 bytes, 8-aligned, standard layout and trivially
// destructible; the all-zero bit pattern is the value 0, so they can be placed
// in zero-filled arena memory (rdma::Node::Allocate) and used at once.
//
// Local (CPU-side) access goes through the word object itself; every CPU access
// is atomic (std::atomic_ref), because the NIC may copy the same word at any
// time (the soft NIC uses 8-byte __atomic loads/stores; TSan checks this).
//
// Remote (NIC-side) access goes through rdma::RemoteRef<W> (remote_ref.h),
// which is only ever derived from the field of a struct declared with that
// word type (`RemoteRef<ALockWord>::At(p).Field(&ALockWord::r_tail)`), never
// from a caller-chosen offset. So the domain comes from the declaration:
//
//   w.CompareAndSwap(0, 1);                       // w a NicWord&: error, no CPU RMW
//   line.Field(&ALockWord::l_tail)     // a RemoteRef<CpuWord>:
//       .CompareAndSwap(session, 0, 1);           //   error, constraint not satisfied
//   RemoteRef<NicWord>::At(p);         // error: words come from fields only
//
// tests/locks/rmw_word_test.cc asserts these with concepts (static_assert), so
// a change that re-adds such a member breaks the build of that test.
// Misuse that the type system cannot see (Local() on a pointer that is not on
// this node, a misaligned object) aborts with a message in every build.
//
// What the types cannot police: raw rdma::Session::CompareAndSwap on a
// RemotePtr, or reinterpret_cast to a different word type. Do not do that
// for words in shared structures; declare the field with the right type.

#include <atomic>
#include <cstdint>
#include <type_traits>


namespace rdma {

enum class RmwDomain {
  kCpu,   // CPU atomics only
  kNic,   // NIC atomics only
  kNone,  // loads and plain stores only, from both sides
};

namespace rmw_word_internal {
// Shared by the three word types: atomic 8-byte loads and stores of one word.
class WordBase {
 public:
  constexpr WordBase() = default;
  constexpr explicit WordBase(uint64_t v) : value_(v) {}
  WordBase(const WordBase&) = delete;
  WordBase& operator=(const WordBase&) = delete;

  // Atomic 8-byte load. Never a read-modify-write.
  uint64_t Load(std::memory_order order = std::memory_order_acquire) const {
    return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(value_)).load(order);
  }
  // Atomic 8-byte plain store (not a read-modify-write): allowed from the
  // non-RMW side by the domain rule.
  void Store(uint64_t v, std::memory_order order = std::memory_order_release) {
    std::atomic_ref<uint64_t>(value_).store(v, order);
  }

 protected:
  uint64_t& raw() { return value_; }

 private:
  alignas(8) uint64_t value_ = 0;
};
}  // namespace rmw_word_internal

// A word whose RMW domain is the CPU of the owning node. Local threads may
// CAS/swap/FAA it; threads on other nodes may only RDMA READ it or plainly
// RDMA WRITE it (RemoteWord<CpuWord>::Read/Write).
class CpuWord : public rmw_word_internal::WordBase {
 public:
  static constexpr RmwDomain kDomain = RmwDomain::kCpu;
  using WordBase::WordBase;

  // CAS. Returns the value seen; succeeded iff it equals `expected`.
  uint64_t CompareAndSwap(uint64_t expected, uint64_t desired, std::memory_order order = std::memory_order_acq_rel) {
    std::atomic_ref<uint64_t>(raw()).compare_exchange_strong(expected, desired, order,
                                                             FailureOrder(order));
    return expected;
  }
  // CAS in the std::atomic shape: updates `expected` on failure.
  bool CompareExchange(uint64_t& expected, uint64_t desired,
                       std::memory_order order = std::memory_order_acq_rel) {
    return std::atomic_ref<uint64_t>(raw()).compare_exchange_strong(expected, desired, order,
                                                                    FailureOrder(order));
  }
  // Atomic exchange. Returns the old value.
  uint64_t Swap(uint64_t desired, std::memory_order order = std::memory_order_acq_rel) {
    return std::atomic_ref<uint64_t>(raw()).exchange(desired, order);
  }
  // Atomic fetch-and-add. Returns the old value.
  uint64_t FetchAndAdd(uint64_t delta, std::memory_order order = std::memory_order_acq_rel) {
    return std::atomic_ref<uint64_t>(raw()).fetch_add(delta, order);
  }

 private:
  static constexpr std::memory_order FailureOrder(std::memory_order o) {
    return o == std::memory_order_acq_rel || o == std::memory_order_release ? std::memory_order_acquire : o;
  }
};

// A word whose RMW domain is the NIC. Every RMW, also from a thread on the
// owning node, goes through a Session: RemoteWord<NicWord>::CompareAndSwap/Swap/FetchAndAdd
// (a local thread uses its loopback QP). Local threads may only Load() it and
// plainly Store() it. There is deliberately no CPU RMW member here.
class NicWord : public rmw_word_internal::WordBase {
 public:
  static constexpr RmwDomain kDomain = RmwDomain::kNic;
  using WordBase::WordBase;
};

// A word nobody read-modify-writes: both sides only load it and plainly store
// it (a CPU store, or an RDMA WRITE). E.g. ALock's `victim`, MCS descriptors.
class PlainWord : public rmw_word_internal::WordBase {
 public:
  static constexpr RmwDomain kDomain = RmwDomain::kNone;
  using WordBase::WordBase;
};

template <typename W>
concept RmwWord = std::is_base_of_v<rmw_word_internal::WordBase, W> && sizeof(W) == 8 && alignof(W) == 8 &&
                  std::is_standard_layout_v<W> && std::is_trivially_destructible_v<W>;

static_assert(RmwWord<CpuWord> && RmwWord<NicWord> && RmwWord<PlainWord>);

}  // namespace rdma

#endif  // RDMA_RMW_WORD_H_
