#ifndef STRUCTURES_HASH_MAP_NATIVE_PATH_H_
#define STRUCTURES_HASH_MAP_NATIVE_PATH_H_

// The hash map's CPU path: how a thread on a group's home node reads and
// writes the group's slots with CPU loads and stores. The NIC may copy the
// same words at the same time (remote READs and WRITEs), so every access is an
// 8-byte atomic load or plain store through locks::PlainWord (std::atomic_ref;
// the soft NIC uses 8-byte __atomic accesses, so TSan sees no race). No word
// of a slot is ever read-modify-written, by either side.

#include <cstdint>

#include "structures/hash_map/layout.h"

namespace structures::hash_map_internal {

// Copies the group's slots into `out` (SlotLayout<V>::kSnapshotWords words),
// one atomic load per word. Without the lock the copy may be torn; FindKey's
// checksums tell.
template <typename V>
void NativeSnapshot(const Group<V>& g, uint64_t* out) {
  using L = SlotLayout<V>;
  for (size_t s = 0; s < kSlotsPerGroup; ++s) {
    for (size_t i = 0; i < L::kWords; ++i) {
      out[s * L::kWords + i] = g.slots[s].w[i].Load(std::memory_order_acquire);
    }
  }
}

// Stores a whole slot tuple (from SlotLayout<V>::MakeSlot). Caller holds the
// group lock (the only writer). The checksum word goes last: its store is the
// write's linearization point for readers (see FindKey), and the release
// ordering makes the tuple's other words visible to a CPU reader that loads
// the new checksum (a NIC reader relies on the checksum match alone).
template <typename V>
void NativeStoreSlot(Group<V>& g, int slot, const uint64_t* words) {
  using L = SlotLayout<V>;
  auto& s = g.slots[slot];
  for (size_t i = 0; i < L::kChecksumWord; ++i) s.w[i].Store(words[i], std::memory_order_release);
  s.w[L::kChecksumWord].Store(words[L::kChecksumWord], std::memory_order_release);
}

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_NATIVE_PATH_H_
