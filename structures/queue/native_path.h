#ifndef STRUCTURES_QUEUE_NATIVE_PATH_H_
#define STRUCTURES_QUEUE_NATIVE_PATH_H_

// The queue's native word accessor: the home node's ring in place, read and
// written with CPU loads and stores (every one an 8-byte atomic access through
// rdma::PlainWord, since the NIC may copy the same words at any time), with
// the same interface as RemoteRing (rdma_path.h). The lease opener runs the
// crash repair over it (client.h, SkipPositionsOfTheDead), and Size reads how
// far each side got. Store order is the caller's; each store is visible to a
// CPU reader that acquire-loads a later one.

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "rdma/rmw_word.h"
#include "structures/queue/layout.h"

namespace structures::queue_internal {

template <typename V>
class NativeRing {
 public:
  // `part` is the ring's first byte on this node; `producer` picks the
  // counter (tail for producers, head for consumers).
  NativeRing(char* part, const RingLayout<V>& layout, bool producer)
      : part_(part), l_(layout), producer_(producer) {}

  // The counter, and the side's repair flag, which repair() then returns.
  absl::Status LoadCounter(uint64_t* v) {
    *v = Counter().Load(std::memory_order_acquire);
    repair_ = Repair().Load(std::memory_order_relaxed);
    return absl::OkStatus();
  }
  uint64_t repair() const { return repair_; }
  void ClearRepair() { Repair().Store(0, std::memory_order_relaxed); }
  // seq words of positions [first, first + n), in position order.
  absl::Status LoadSeqs(uint64_t first, size_t n, uint64_t* out) {
    for (size_t j = 0; j < n; ++j) out[j] = Seq(first + j).Load(std::memory_order_acquire);
    return absl::OkStatus();
  }
  void StoreCounter(uint64_t v) { Counter().Store(v, std::memory_order_release); }
  // How far side `producer` has got (Frontier): its claim word first, then
  // its counter.
  uint64_t Frontier(bool producer) const {
    const uint64_t claim = (producer ? header().tail_claim : header().head_claim).Load(std::memory_order_acquire);
    const uint64_t counter = (producer ? header().tail : header().head).Load(std::memory_order_acquire);
    return queue_internal::Frontier(counter, claim);
  }
  absl::Status Flush() { return absl::OkStatus(); }
  // Nothing is ever primed natively (the interface's RemoteRing::Unprime).
  void Unprime() {}

 private:
  Header& header() const { return *reinterpret_cast<Header*>(part_); }
  rdma::PlainWord& Counter() const { return producer_ ? header().tail : header().head; }
  rdma::PlainWord& Repair() const { return producer_ ? header().tail_repair : header().head_repair; }
  rdma::PlainWord& Seq(uint64_t position) const {
    return *reinterpret_cast<rdma::PlainWord*>(part_ + l_.seq_offset(l_.Slot(position)));
  }

  char* part_;
  RingLayout<V> l_;
  bool producer_;
  uint64_t repair_ = 0;
};

}  // namespace structures::queue_internal

#endif  // STRUCTURES_QUEUE_NATIVE_PATH_H_
