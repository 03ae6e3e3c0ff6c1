#ifndef STRUCTURES_QUEUE_NATIVE_PATH_H_
#define STRUCTURES_QUEUE_NATIVE_PATH_H_

// The queue's native word accessor: the home node's ring in place, read and
// written with CPU loads and stores (every one an 8-byte atomic access through
// rdma::PlainWord, since the NIC may copy the same words at any time). The
// same interface as RemoteRing (rdma_path.h), so the algorithm in client.h is
// written once. Store order is the caller's: a producer stores payload words,
// then seq words (release), then the counter; each store is visible to a CPU
// reader that acquire-loads a later one.

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
  // Payload words (RingLayout<V>::kValueWords per position).
  absl::Status LoadPayloads(uint64_t first, size_t n, uint64_t* out) {
    for (size_t j = 0; j < n; ++j) {
      const rdma::PlainWord* w = Payload(first + j);
      for (size_t x = 0; x < RingLayout<V>::kValueWords; ++x) {
        out[j * RingLayout<V>::kValueWords + x] = w[x].Load(std::memory_order_acquire);
      }
    }
    return absl::OkStatus();
  }
  void StorePayloads(uint64_t first, size_t n, const uint64_t* words) {
    for (size_t j = 0; j < n; ++j) {
      rdma::PlainWord* w = Payload(first + j);
      for (size_t x = 0; x < RingLayout<V>::kValueWords; ++x) {
        w[x].Store(words[j * RingLayout<V>::kValueWords + x], std::memory_order_release);
      }
    }
  }
  void StoreSeqs(uint64_t first, size_t n, const uint64_t* values) {
    for (size_t j = 0; j < n; ++j) Seq(first + j).Store(values[j], std::memory_order_release);
  }
  void StoreCounter(uint64_t v) { Counter().Store(v, std::memory_order_release); }
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
  rdma::PlainWord* Payload(uint64_t position) const {
    return reinterpret_cast<rdma::PlainWord*>(part_ + l_.payload_offset(l_.Slot(position)));
  }

  char* part_;
  RingLayout<V> l_;
  bool producer_;
  uint64_t repair_ = 0;
};

}  // namespace structures::queue_internal

#endif  // STRUCTURES_QUEUE_NATIVE_PATH_H_
