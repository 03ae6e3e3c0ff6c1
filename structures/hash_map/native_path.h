#ifndef STRUCTURES_HASH_MAP_NATIVE_PATH_H_
#define STRUCTURES_HASH_MAP_NATIVE_PATH_H_

// The hash map's CPU path: how a thread on a group's home node reads and
// writes the group's slots with CPU loads and stores. The NIC may copy the
// same words at the same time (remote READs and WRITEs), so every access is an
// 8-byte atomic load or plain store through rdma::PlainWord (std::atomic_ref;
// the soft NIC uses 8-byte __atomic accesses, so TSan sees no race). No word
// of a slot is ever read-modify-written, by either side.

#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "structures/hash_map/layout.h"

namespace structures::hash_map_internal {

// Scans the group's slots in place for `key` (ScanGroup in layout.h: the
// argument for readers without the lock is there): one atomic 8-byte load per
// word looked at, no copy of the group. A hit at the first probe touches one
// slot (its state, key, value and checksum words: one or two cache lines); a
// miss loads the 8 state words (and the key words of occupied slots). Without
// the lock, the found slot's words are checked against its checksum when
// `verify`; under the lock (writers) the slot is stable, `verify` = false.
template <typename V>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup NativeFind(const Group<V>& g, uint64_t key, size_t start, bool verify, uint64_t* found) {
  return ScanGroup<V>([&g](size_t slot, size_t w) { return g.slots[slot].w[w].Load(std::memory_order_acquire); },
                      key, start, verify, found);
}

// Copies the group's slots into `out` (SlotLayout<V>::kSnapshotWords words),
// one atomic load per word (Size only). Without the lock the copy may be
// torn; CountOccupied's checksums tell.
template <typename V>
void NativeSnapshot(const Group<V>& g, uint64_t* out) {
  using L = SlotLayout<V>;
  for (size_t s = 0; s < kSlotsPerGroup; ++s) {
    for (size_t i = 0; i < L::kWords; ++i) {
      out[s * L::kWords + i] = g.slots[s].w[i].Load(std::memory_order_acquire);
    }
  }
}

// Stores a slot tuple (from SlotLayout<V>::MakeSlot); `key_unchanged` when the
// slot already holds the tuple's key (an overwrite of a present key). Caller holds the group lock (the only writer), so the
// slot's words are stable and nothing needs to be re-read or verified. Only
// words that can change are stored: the key word is skipped when it stays the
// same (an overwrite); storing the value it already holds would change nothing
// any reader can see. The checksum word goes last: its store is the write's
// linearization point for readers (see ScanGroup), and the release ordering
// makes the tuple's other words visible to a CPU reader that loads the new
// checksum (a NIC reader relies on the checksum match alone).
template <typename V>
void NativeStoreSlot(Group<V>& g, int slot, const uint64_t* words, bool key_unchanged) {
  using L = SlotLayout<V>;
  auto& s = g.slots[slot];
  s.w[L::kStateWord].Store(words[L::kStateWord], std::memory_order_release);
  if (!key_unchanged) s.w[L::kKeyWord].Store(words[L::kKeyWord], std::memory_order_release);
  for (size_t i = L::kValueWord; i < L::kChecksumWord; ++i) s.w[i].Store(words[i], std::memory_order_release);
  s.w[L::kChecksumWord].Store(words[L::kChecksumWord], std::memory_order_release);
}

// The native word accessor: the group in place, read and written with CPU
// loads and stores. The same interface as RemoteGroup (rdma_path.h), so the
// client's algorithm is written once over either. No method fails; they
// return Status for the shared interface.
template <typename V>
class NativeGroup {
 public:
  explicit NativeGroup(Group<V>& g) : g_(g) {}

  // A reader's scan for `key` without the lock (ScanGroup).
  absl::Status Find(uint64_t key, size_t start, bool verify, uint64_t* found, Lookup* l) {
    *l = NativeFind<V>(g_, key, start, verify, found);
    return absl::OkStatus();
  }
  // A lock holder's scan: the slots are stable, no checksum is needed.
  absl::Status FindUnderLock(uint64_t key, size_t start, uint64_t* found, Lookup* l) {
    *l = NativeFind<V>(g_, key, start, /*verify=*/false, found);
    return absl::OkStatus();
  }
  // Every slot's words, into `out` (SlotLayout<V>::kSnapshotWords).
  absl::Status Snapshot(uint64_t* out) {
    NativeSnapshot<V>(g_, out);
    return absl::OkStatus();
  }
  // Stores a slot tuple under the lock (NativeStoreSlot). `wait` is moot.
  absl::Status StoreSlot(int slot, const uint64_t* words, bool key_unchanged, bool /*wait*/) {
    NativeStoreSlot<V>(g_, slot, words, key_unchanged);
    return absl::OkStatus();
  }

 private:
  Group<V>& g_;
};

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_NATIVE_PATH_H_
