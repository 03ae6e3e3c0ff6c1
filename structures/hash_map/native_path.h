#ifndef STRUCTURES_HASH_MAP_NATIVE_PATH_H_
#define STRUCTURES_HASH_MAP_NATIVE_PATH_H_

// The hash map's CPU path: how a thread on a unit's home node reads and
// writes the unit's slots with CPU loads and stores. The NIC may copy the
// same words at the same time (remote READs and WRITEs), so every access is an
// 8-byte atomic load or plain store through rdma::PlainWord (std::atomic_ref;
// the soft NIC uses 8-byte __atomic accesses, so TSan sees no race). No word
// of a slot is ever read-modify-written, by either side.

#include <cstddef>
#include <cstdint>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "structures/hash_map/layout.h"

namespace structures::hash_map_internal {

// Scans side `side`'s window of unit `u` in place for `key` (ScanWindow in
// layout.h: the argument for readers without the lock is there): one atomic
// 8-byte load per word looked at, no copy. A hit at the first probe touches
// one slot (its state, key, value and checksum words: one or two cache
// lines); a miss loads the window's 16 state words (and the key words of
// occupied slots). Without the lock, the found slot's words are checked
// against its checksum when `verify`; under the lock (writers) the slots are
// stable, `verify` = false.
template <typename V>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup NativeFind(const Unit<V>& u, int side, uint64_t key, size_t start,
                                                      bool verify, uint64_t* found) {
  const auto* const slots = u.slots + SlotLayout<V>::WindowFirstSlot(side);
  return ScanWindow<V>([slots](size_t slot, size_t w) { return slots[slot].w[w].Load(std::memory_order_acquire); },
                       key, side, start, verify, found);
}

// A reader's search of the first `windows` windows of `p` in place
// (ScanWindows), without the lock. The start slots of both windows are
// prefetched first, so the second window's likely line is on its way while
// the first is scanned.
template <typename V>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup NativeFindBoth(const Unit<V>* units, const Placement& p, int windows,
                                                          uint64_t key, bool verify, uint64_t* found) {
  const auto* const s0 = units[p.c[0].unit].slots + SlotLayout<V>::WindowFirstSlot(p.c[0].side);
  const auto* const s1 = units[p.c[1].unit].slots + SlotLayout<V>::WindowFirstSlot(p.c[1].side);
  __builtin_prefetch(s0 + ScanSlot(p.c[0].side, p.start, 0));
  if (windows > 1) __builtin_prefetch(s1 + ScanSlot(p.c[1].side, p.start, 0));
  return ScanWindows<V>([s0](size_t slot, size_t w) { return s0[slot].w[w].Load(std::memory_order_acquire); },
                        [s1](size_t slot, size_t w) { return s1[slot].w[w].Load(std::memory_order_acquire); },
                        key, p, windows, verify, found);
}

// Copies the unit's slots into `out` (SlotLayout<V>::kUnitSlotsWords words),
// one atomic load per word (Size only). Without the lock the copy may be
// torn; CountOccupied's checksums tell.
template <typename V>
void NativeSnapshot(const Unit<V>& u, uint64_t* out) {
  using L = SlotLayout<V>;
  for (size_t s = 0; s < kSlotsPerUnit; ++s) {
    for (size_t i = 0; i < L::kWords; ++i) out[s * L::kWords + i] = u.slots[s].w[i].Load(std::memory_order_acquire);
  }
}

// Stores a slot tuple (from SlotLayout<V>::MakeSlot) into slot `slot` of the
// unit; `key_unchanged` when the slot already holds the tuple's key (an
// overwrite of a present key). Caller holds the unit lock (the only writer),
// so the slot's words are stable and nothing needs to be re-read or verified.
// Only words that can change are stored: the key word is skipped when it stays
// the same (an overwrite); storing the value it already holds would change
// nothing any reader can see. The checksum word goes last: its store is the
// write's linearization point for readers (see ScanWindow), and the release
// ordering makes the tuple's other words visible to a CPU reader that loads
// the new checksum (a NIC reader relies on the checksum match alone).
template <typename V>
void NativeStoreSlot(Unit<V>& u, size_t slot, const uint64_t* words, bool key_unchanged) {
  using L = SlotLayout<V>;
  auto& s = u.slots[slot];
  s.w[L::kStateWord].Store(words[L::kStateWord], std::memory_order_release);
  if (!key_unchanged) s.w[L::kKeyWord].Store(words[L::kKeyWord], std::memory_order_release);
  for (size_t i = L::kValueWord; i < L::kChecksumWord; ++i) s.w[i].Store(words[i], std::memory_order_release);
  s.w[L::kChecksumWord].Store(words[L::kChecksumWord], std::memory_order_release);
}

// The native word accessor: a node's part in place, read and written with CPU
// loads and stores. The same interface as RemoteUnits (rdma_path.h), so the
// client's algorithm is written once over either. No method fails; they
// return Status for the shared interface.
template <typename V>
class NativeUnits {
 public:
  explicit NativeUnits(Unit<V>* units) : units_(units) {}

  // A reader's search of the first `windows` windows of `p` for `key`,
  // without the lock (NativeFindBoth).
  absl::Status Find(const Placement& p, int windows, uint64_t key, bool verify, uint64_t* found, Lookup* l) {
    *l = NativeFindBoth<V>(units_, p, windows, key, verify, found);
    return absl::OkStatus();
  }
  // Nothing to fetch ahead natively: the windows are scanned in place.
  absl::Status FetchWindows(const Placement&, int) { return absl::OkStatus(); }
  // A lock holder's scan of window `which`: the slots are stable, no checksum
  // is needed. `fetched` is moot natively.
  absl::Status FindUnderLock(const Placement& p, int which, bool /*fetched*/, uint64_t key, uint64_t* found,
                             Lookup* l) {
    *l = NativeFind<V>(units_[p.c[which].unit], p.c[which].side, key, p.start, /*verify=*/false, found);
    return absl::OkStatus();
  }
  // Every slot of unit `unit`, into `out` (SlotLayout<V>::kUnitSlotsWords).
  absl::Status Snapshot(size_t unit, uint64_t* out) {
    NativeSnapshot<V>(units_[unit], out);
    return absl::OkStatus();
  }
  // Stores a slot tuple under the unit's lock (NativeStoreSlot). `wait` is moot.
  absl::Status StoreSlot(size_t unit, size_t slot, const uint64_t* words, bool key_unchanged, bool /*wait*/) {
    NativeStoreSlot<V>(units_[unit], slot, words, key_unchanged);
    return absl::OkStatus();
  }

 private:
  Unit<V>* units_;
};

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_NATIVE_PATH_H_
