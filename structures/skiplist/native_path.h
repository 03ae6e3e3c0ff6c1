#ifndef STRUCTURES_SKIPLIST_NATIVE_PATH_H_
#define STRUCTURES_SKIPLIST_NATIVE_PATH_H_

// The ordered map's native word accessor: the home node's part in place, read
// and written with CPU loads and stores, every one an 8-byte atomic access
// through rdma::PlainWord (the NIC may copy the same words at any time). The
// same interface as RemoteNodes (rdma_path.h), so the algorithm (client.h
// and the files it includes) is written once.
//
// Readers without the lock copy a node under its version (a seqlock): the
// copy is valid when the version was even and unchanged around it. A writer
// (holding the node's lock) stores version + 1, its words, the checksum (for
// NIC readers) and version + 2 with release order, so a reader that loaded
// either new version also sees the words before it.

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "rdma/rmw_word.h"
#include "structures/skiplist/layout.h"

namespace structures::skiplist_internal {

template <typename V>
class NativeNodes {
 public:
  using I = NodeImage<V>;
  using L = NodeLayout<V>;

  explicit NativeNodes(char* part) : part_(part) {}

  static constexpr bool kCopiesImages = false;

  // One word of node `idx` (the descent's links, lows and metas: hints,
  // checked by the leaf's validated copy).
  absl::Status Load(uint64_t idx, size_t word, uint64_t* out) {
    *out = NodeAt(idx).words()[word].Load(std::memory_order_acquire);
    return absl::OkStatus();
  }
  // A copy of node `idx` without its lock; `*valid` false when a writer was
  // inside (read again).
  template <bool kValidate = true>
  absl::Status Snapshot(uint64_t idx, I* out, bool* valid) {
    const rdma::PlainWord* w = NodeAt(idx).words();
    uint64_t* o = out->words();
    const uint64_t v1 = w[0].Load(std::memory_order_acquire);
    for (size_t i = 1; i < I::kWords; ++i) o[i] = w[i].Load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t v2 = w[0].Load(std::memory_order_relaxed);
    o[0] = v1;
    *valid = !kValidate || ((v1 & 1) == 0 && v1 == v2);
    return absl::OkStatus();
  }
  // The words a lookup of `key` needs, without the lock, under the version
  // like Snapshot: the meta and fence line, the keys, one value.
  template <bool kValidate = true>
  absl::Status View(uint64_t idx, uint64_t key, LeafView<V>* out, bool* valid) {
    const Node<V>& n = NodeAt(idx);
    const uint64_t v1 = n.version.Load(std::memory_order_acquire);
    out->meta = n.meta.Load(std::memory_order_relaxed);
    out->low = n.low.Load(std::memory_order_relaxed);
    out->high = n.high.Load(std::memory_order_relaxed);
    out->next0 = n.next[0].Load(std::memory_order_relaxed);
    out->found = -1;
    const uint64_t bits = out->meta & kFullBitmap;
    for (size_t i = 0; i < kFanout; ++i) {
      if (((bits >> i) & 1) != 0 && n.keys[i].Load(std::memory_order_relaxed) == key) {
        out->found = static_cast<int>(i);
        for (size_t w = 0; w < I::kValueWords; ++w) out->value[w] = n.values[i][w].Load(std::memory_order_relaxed);
        break;
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t v2 = n.version.Load(std::memory_order_relaxed);
    out->version = v1;
    *valid = !kValidate || ((v1 & 1) == 0 && v1 == v2);
    return absl::OkStatus();
  }
  // Under the node's lock the words are stable.
  absl::Status SnapshotLocked(uint64_t idx, I* out) {
    const rdma::PlainWord* w = NodeAt(idx).words();
    uint64_t* o = out->words();
    for (size_t i = 0; i < I::kWords; ++i) o[i] = w[i].Load(std::memory_order_relaxed);
    return absl::OkStatus();
  }
  // Under the node's lock: publishes `img` (its version already old + 2 and
  // its checksum computed) by storing the words of `r` and the checksum
  // between the odd and the even version.
  void Store(uint64_t idx, const I& img, const Ranges& r) {
    rdma::PlainWord* w = NodeAt(idx).words();
    const uint64_t* in = img.words();
    w[0].Store(img.version - 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    for (size_t k = 0; k < r.n; ++k) {
      for (size_t i = r.first[k]; i < r.last[k]; ++i) w[i].Store(in[i], std::memory_order_relaxed);
    }
    w[Words<V>::kChecksum].Store(img.checksum, std::memory_order_relaxed);
    w[0].Store(img.version, std::memory_order_release);
  }
  // The part header's allocator words (PartHeader::next_free, free_head),
  // by byte offset; the alloc_lock holder's.
  absl::Status LoadPartWord(uint64_t offset, uint64_t* out) {
    *out = reinterpret_cast<rdma::PlainWord*>(part_ + offset)->Load(std::memory_order_acquire);
    return absl::OkStatus();
  }
  void StorePartWord(uint64_t offset, uint64_t v) {
    reinterpret_cast<rdma::PlainWord*>(part_ + offset)->Store(v, std::memory_order_release);
  }
  absl::Status Flush() { return absl::OkStatus(); }
  // Nothing is cached natively.
  void Forget() {}

 private:
  Node<V>& NodeAt(uint64_t idx) const { return *reinterpret_cast<Node<V>*>(part_ + L::NodeOffset(idx)); }

  char* part_;
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_NATIVE_PATH_H_
