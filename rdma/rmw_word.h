#ifndef RDMA_RMW_WORD_H_
#define RDMA_RMW_WORD_H_

// RMW-domain words (docs/design.md §3): types that make "who may
// read-modify-write this 8-byte word" visible, and enforce it. An RNIC's
// atomics are atomic only among NIC atomics, so every shared word has one
// RMW domain:
//
//   type        RMW'd by                       the other side may only
//   CpuWord     CPU atomics on the owner node  RDMA READ / RDMA WRITE it
//   NicWord     NIC atomics (remote/loopback)  CPU-load / CPU-store it
//   PlainWord   nobody                         load/store from both sides
//
//   struct Line { NicWord tail; CpuWord owner; };
//   line->owner.CompareAndSwap(0, 1);      // CPU RMW of a CpuWord: fine
//   line->tail.CompareAndSwap(0, 1);       // NicWord has no CPU RMW: no compile
//   RemoteRef<Line>::At(p).Field(&Line::tail).CompareAndSwap(s, 0, 1);  // NIC
//
// Contract:
//  * All three are exactly 8 bytes, 8-aligned, standard layout, trivially
//    destructible, and all-zero is the value 0: zero-filled arena memory
//    (Node::Allocate) is usable at once.
//  * Every CPU access is atomic (std::atomic_ref): the NIC may copy the word
//    at any time. Remote access goes through RemoteRef (remote_ref.h), which
//    makes word handles only from declared fields, so the domain comes from
//    the declaration. tests/locks/rmw_word_test.cc pins this with concepts.
//  * Not policed: raw Session::CompareAndSwap on a RemotePtr, or casting to
//    another word type. Do not do either on shared words.

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
