#ifndef STRUCTURES_SKIPLIST_LAYOUT_H_
#define STRUCTURES_SKIPLIST_LAYOUT_H_

// The ordered map's memory layout in registered memory, its node checksum and
// the pure functions over a node's image. No I/O.
//
//   offset 0           PartHeader  alloc_lock (ALock), next_free, free_head
//   kNodesOffset       Node 0      the part's head (owns the part's first keys)
//   + i * kNodeBytes   Node i      handed out by the allocator, freed when emptied
//
// A node is a B-link leaf with a skiplist tower: an ALock line, then version,
// meta (occupancy bitmap, height, bounded, live), the fence [low, high) of
// keys it owns, next[0..height), kFanout keys and their values in no order,
// and a checksum. next[0] links every live node of the part in key order;
// higher levels are hints for the descent. The all-zero part is an empty map.
//
// RMW domains (docs/design.md §3), fixed by each word's declared type: the
// locks' r_tail and r_next are NicWords (NIC CAS), l_tail a CpuWord (CPU
// atomics); every other word is a PlainWord nobody RMWs: next_free and
// free_head are stored by the alloc_lock holder, a node's version ..
// checksum by its lock holder (CPU stores or RDMA WRITEs), and anyone loads
// them (CPU or READ).
//
// Invariants (docs/design.md §9.3):
//  1. A node's words change only under its lock; version is odd while a
//     writer is inside and grows by 2 per write; checksum covers version ..
//     the last entry, with the new (even) version.
//  2. A live node's low never changes. An emptied node is unlinked, its range
//     merged into its level-0 predecessor, marked dead and freed; reused, it
//     is live with another range. So readers check on a validated copy that a
//     node is live and owns the key, and move right or descend again if not.
//  3. Live nodes' [low, high) are disjoint and hold their keys' entries. They
//     cover the part except while a split is between its two writes (the
//     left node's, then the new right node's, under the right node's lock).
//  4. next[i] of a live node is 0 or a live node with a larger low.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/remote_ptr.h"
#include "rdma/rmw_word.h"
#include "structures/common/checksum.h"
#include "structures/common/value_words.h"

namespace structures::skiplist_internal {

inline constexpr size_t kFanout = 16;      // entries per node
inline constexpr size_t kMaxHeight = 12;   // tower levels (the head has them all)
inline constexpr size_t kMaxValueBytes = 56;
inline constexpr uint64_t kFullBitmap = (uint64_t{1} << kFanout) - 1;

template <typename V>
concept SkipListValue = std::is_trivially_copyable_v<V> && sizeof(V) <= kMaxValueBytes;

struct alignas(64) PartHeader {
  locks::ALockWord alloc_lock;  // guards next_free and free_head
  rdma::PlainWord next_free;    // never-used nodes start at next_free + 1
  rdma::PlainWord free_head;    // the first freed node (0: none); each links the next in next[0]
  uint64_t pad_[6];
};
static_assert(std::is_standard_layout_v<PartHeader> && sizeof(PartHeader) == 128);
static_assert(offsetof(PartHeader, alloc_lock) == 0 && offsetof(PartHeader, next_free) == 64 &&
              offsetof(PartHeader, free_head) == 72);

inline constexpr uint64_t kNodesOffset = sizeof(PartHeader);

// meta word: bits 0..15 occupancy, 16..23 height, bit 32 high is a bound
// (else the node owns every key from low to the end of the part), bit 33 live
// (the head, node 0, is live without it).
inline constexpr uint64_t kBounded = uint64_t{1} << 32;
inline constexpr uint64_t kLive = uint64_t{1} << 33;

// A node's words after its lock line, as a reader's private copy (the
// "image"). The registered-memory Node below has the same words as PlainWords.
template <typename V>
struct NodeImage {
  static constexpr size_t kValueWords = ::structures::kValueWords<V>;

  uint64_t version;
  uint64_t meta;
  uint64_t low;
  uint64_t high;
  uint64_t next[kMaxHeight];
  uint64_t keys[kFanout];
  uint64_t values[kFanout][kValueWords];
  uint64_t checksum;

  static constexpr size_t kWords = 5 + kMaxHeight + kFanout * (1 + kValueWords);
  static constexpr size_t kCheckedWords = kWords - 1;  // version .. last entry

  const uint64_t* words() const { return &version; }
  uint64_t* words() { return &version; }

  uint32_t bitmap() const { return static_cast<uint32_t>(meta & kFullBitmap); }
  size_t height() const { return static_cast<size_t>((meta >> 16) & 0xff); }
  bool bounded() const { return (meta & kBounded) != 0; }
  bool live() const { return (meta & kLive) != 0; }
  bool Owns(uint64_t key, bool head) const { return (head || key >= low) && (!bounded() || key < high); }
  bool Occupied(size_t i) const { return (bitmap() >> i) & 1; }
  uint64_t Next0() const { return next[0]; }
  // A copy that claims no entries (for the test-only kMoveRight mutant).
  void ForgetEntries() { SetBitmap(0); }

  // The checksum of the words as they are now (0 for an all-zero image).
  uint64_t Checksum() const { return HashWords(words(), kCheckedWords) ^ ZeroHash<kCheckedWords>(); }
  bool Valid() const { return Checksum() == checksum; }

  // Index of `key`'s entry, or -1.
  int Find(uint64_t key) const {
    for (size_t i = 0; i < kFanout; ++i) {
      if (Occupied(i) && keys[i] == key) return static_cast<int>(i);
    }
    return -1;
  }
  int FreeEntry() const {
    for (size_t i = 0; i < kFanout; ++i) {
      if (!Occupied(i)) return static_cast<int>(i);
    }
    return -1;
  }
  // The entry with the smallest key >= `key`, or -1.
  int LowerBound(uint64_t key) const {
    int best = -1;
    for (size_t i = 0; i < kFanout; ++i) {
      if (Occupied(i) && keys[i] >= key && (best < 0 || keys[i] < keys[best])) {
        best = static_cast<int>(i);
      }
    }
    return best;
  }
  void SetBitmap(uint32_t b) { meta = (meta & ~kFullBitmap) | b; }

  static void EncodeValue(const V& v, uint64_t* out) { EncodeValueWords(v, out); }
  static V DecodeValue(const uint64_t* w) { return DecodeValueWords<V>(w); }
};

// What a point lookup needs of the node owning (or not) a key: the fence,
// the link right, and the key's value if the node holds it. Native readers
// load only these words (a few cache lines); NIC readers cut it from an image.
template <typename V>
struct LeafView {
  static constexpr size_t kValueWords = NodeImage<V>::kValueWords;
  uint64_t version = 0;
  uint64_t meta = 0;
  uint64_t low = 0;
  uint64_t high = 0;
  uint64_t next0 = 0;
  int found = -1;
  uint64_t value[kValueWords] = {};

  bool bounded() const { return (meta & kBounded) != 0; }
  bool live() const { return (meta & kLive) != 0; }
  uint64_t Next0() const { return next0; }
  void ForgetEntries() { found = -1; }

  static LeafView FromImage(const NodeImage<V>& img, uint64_t key) {
    LeafView v;
    v.version = img.version;
    v.meta = img.meta;
    v.low = img.low;
    v.high = img.high;
    v.next0 = img.next[0];
    v.found = img.Find(key);
    if (v.found >= 0) std::memcpy(v.value, img.values[v.found], sizeof(v.value));
    return v;
  }
};

// One node in registered memory.
template <typename V>
struct alignas(64) Node {
  static constexpr size_t kValueWords = NodeImage<V>::kValueWords;
  locks::ALockWord lock;
  rdma::PlainWord version;
  rdma::PlainWord meta;
  rdma::PlainWord low;
  rdma::PlainWord high;
  rdma::PlainWord next[kMaxHeight];
  rdma::PlainWord keys[kFanout];
  rdma::PlainWord values[kFanout][kValueWords];
  rdma::PlainWord checksum;

  rdma::PlainWord* words() { return &version; }
  const rdma::PlainWord* words() const { return &version; }
};

// A node's version while a writer publishes: odd. A NIC writer also names
// its node in the top 17 bits (node + 1, up to 65536; 0 for native
// writers), so that the home's crash repair touches only what a dead node
// left half published.
inline constexpr int kWriterShift = 47;
inline constexpr uint64_t kVersionMask = (uint64_t{1} << kWriterShift) - 1;
inline uint64_t OddVersion(uint64_t even_version, rdma::NodeId nic_writer) {
  return (even_version - 1) | ((uint64_t{nic_writer} + 1) << kWriterShift);
}

// Crash repair (docs/design.md §9.1, "Crash repair"), by the home once node `dead` is
// declared dead, with its lock taken over. A NIC writer of `dead` that died
// mid-publish left the version odd and marked with its node. Its WRITEs put
// the meta word after every other changed word (rdma_path.h, Store), so a
// write that changes one node's words in place (an insert, overwrite or
// erase) left the content from before or from after it, and only the
// checksum may be stale: recomputed here, and the version made even. Any
// other version (even, or odd from a live or native writer, which may be
// inside the lock right now) is left alone.
template <typename V>
void RepairAfterDeadWriter(Node<V>& n, rdma::NodeId dead) {
  const uint64_t version = n.version.Load(std::memory_order_acquire);
  if ((version & 1) == 0 || (version >> kWriterShift) != uint64_t{dead} + 1) return;
  NodeImage<V> img;
  for (size_t i = 0; i < NodeImage<V>::kWords; ++i) img.words()[i] = n.words()[i].Load(std::memory_order_relaxed);
  img.version = (version & kVersionMask) + 1;  // a checksum covers the even version it is published with
  n.checksum.Store(img.Checksum(), std::memory_order_release);
  n.version.Store(img.version, std::memory_order_release);
}

// The node layout a part is built from, for a value type.
template <typename V>
struct NodeLayout {
  using Image = NodeImage<V>;
  static constexpr uint64_t kImageOffset = locks::kLockBytes;  // the image's words follow the lock line
  static constexpr uint64_t kImageBytes = 8 * Image::kWords;
  static constexpr uint64_t kNodeBytes = sizeof(Node<V>);

  static uint64_t NodeOffset(uint64_t index) { return kNodesOffset + index * kNodeBytes; }
  static uint64_t NodesIn(uint64_t part_bytes) {
    return part_bytes < kNodesOffset ? 0 : (part_bytes - kNodesOffset) / kNodeBytes;
  }
};

// The offsets the NIC path computes with are the struct's. Instantiated by
// BasicSkipList (a class cannot assert on itself while incomplete).
template <typename V>
constexpr bool NodeLayoutOk() {
  using N = Node<V>;
  using I = NodeImage<V>;
  static_assert(std::is_standard_layout_v<N> && std::is_standard_layout_v<I>);
  static_assert(sizeof(rdma::PlainWord) == 8);
  static_assert(offsetof(N, lock) == 0 && offsetof(N, version) == NodeLayout<V>::kImageOffset);
  static_assert(offsetof(N, meta) - offsetof(N, version) == offsetof(I, meta));
  static_assert(offsetof(N, low) - offsetof(N, version) == offsetof(I, low));
  static_assert(offsetof(N, high) - offsetof(N, version) == offsetof(I, high));
  static_assert(offsetof(N, next) - offsetof(N, version) == offsetof(I, next));
  static_assert(offsetof(N, keys) - offsetof(N, version) == offsetof(I, keys));
  static_assert(offsetof(N, values) - offsetof(N, version) == offsetof(I, values));
  static_assert(offsetof(N, checksum) - offsetof(N, version) == offsetof(I, checksum));
  static_assert(sizeof(I) == 8 * I::kWords && offsetof(I, checksum) == 8 * (I::kWords - 1));
  static_assert(sizeof(N) % 64 == 0);
  return true;
}

// The node whose part holds `key`: node i owns [splits[i-1], splits[i]) (the
// first from 0, the last to 2^64 - 1).
inline rdma::NodeId HomeOf(const std::vector<uint64_t>& splits, uint64_t key) {
  return static_cast<rdma::NodeId>(std::upper_bound(splits.begin(), splits.end(), key) - splits.begin());
}
// The first key node `home`'s part owns.
inline uint64_t RangeLow(const std::vector<uint64_t>& splits, rdma::NodeId home) {
  return home == 0 ? 0 : splits[home - 1];
}

// Image word indices.
template <typename V>
struct Words {
  static constexpr size_t kVersion = 0;
  static constexpr size_t kMeta = 1;
  static constexpr size_t kLow = 2;
  static constexpr size_t kHigh = 3;
  static constexpr size_t kNext = 4;  // + level
  static constexpr size_t kKeys = kNext + kMaxHeight;
  static constexpr size_t kValues = kKeys + kFanout;
  static constexpr size_t kValueWords = NodeImage<V>::kValueWords;
  static constexpr size_t Key(size_t i) { return kKeys + i; }
  static constexpr size_t Value(size_t i) { return kValues + i * kValueWords; }
  static constexpr size_t kChecksum = NodeImage<V>::kWords - 1;
};

template <typename V>
constexpr bool WordsOk() {
  using I = NodeImage<V>;
  using W = Words<V>;
  static_assert(offsetof(I, meta) == 8 * W::kMeta && offsetof(I, low) == 8 * W::kLow &&
                offsetof(I, high) == 8 * W::kHigh && offsetof(I, next) == 8 * W::kNext &&
                offsetof(I, keys) == 8 * W::kKeys && offsetof(I, values) == 8 * W::kValues &&
                offsetof(I, checksum) == 8 * W::kChecksum);
  return true;
}

// Word ranges [first, last) of an image that a writer changed (at most a few
// per write: the meta/fence/link words, an entry).
struct Ranges {
  size_t first[3] = {0, 0, 0};
  size_t last[3] = {0, 0, 0};
  size_t n = 0;
  Ranges& Add(size_t f, size_t l) {
    first[n] = f;
    last[n] = l;
    ++n;
    return *this;
  }
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_LAYOUT_H_
