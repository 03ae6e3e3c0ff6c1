#ifndef STRUCTURES_HASH_MAP_LAYOUT_H_
#define STRUCTURES_HASH_MAP_LAYOUT_H_

// The hash map's words in registered memory: slots, units and the slot
// checksum. Pure types and functions, no I/O (docs/design.md §9.2).
//
// A node's part is a pool of units. A unit is one ALock line followed by
// three 8-slot groups [main 0][overflow][main 1]. A key's two candidate
// windows are sides of units: side 0 is slots [0, 16) of its unit, side 1
// slots [8, 24); the two sides share the overflow group, so the lock is per
// unit. A slot is kWords PlainWords:
//
//   word 0      state: bit 0 occupied, bits 1-7 the segment's epoch, bits 8..
//               the version (writes this slot has seen)
//   word 1      key (every 64-bit value is a key)
//   words 2..   the value's bytes, zero padded
//   last word   checksum of the words before it
//
// Word domains (docs/design.md §3), fixed by type: the lock line's as in
// locks/alock.h; every slot word is a PlainWord, stored only by the unit-lock
// holder (CPU stores or one RDMA WRITE) and loaded by anyone.
//
// Invariants: the all-zero slot is a valid empty slot of epoch 0 (its
// checksum is 0), so zero-filled memory is an empty part; occupied bit and
// epoch share the state word's lowest byte, so a NIC that copies single
// bytes never splits them.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "locks/alock.h"
#include "structures/common/checksum.h"
#include "structures/common/value_words.h"
#include "locks/lock.h"
#include "rdma/rmw_word.h"
#include "rdma/remote_ptr.h"

namespace structures::hash_map_internal {

inline constexpr size_t kSlotsPerGroup = 8;
inline constexpr size_t kGroupsPerUnit = 3;  // [main 0][overflow][main 1]
inline constexpr size_t kSlotsPerUnit = kGroupsPerUnit * kSlotsPerGroup;
inline constexpr size_t kSlotsPerWindow = 2 * kSlotsPerGroup;  // a main group + the overflow group
inline constexpr size_t kMaxValueBytes = 56;
static_assert(kSlotsPerUnit <= 32, "Lookup::others is a 32-bit mask");

// Mix64, HashWords and ZeroHash: structures/common/checksum.h.

// The epoch field of a slot's state word (bits 1-7).
inline constexpr uint64_t kEpochMask = 0xFE;
inline constexpr int kMaxEpoch = 127;
inline constexpr uint64_t EpochBits(int epoch) { return static_cast<uint64_t>(epoch) << 1; }
using ::structures::HashWords;
using ::structures::Mix64;
using ::structures::ZeroHash;

// What a HashMap value may be: trivially copyable, at most 56 bytes (so a
// slot of state + key + value + checksum fits in 80 bytes).
template <typename V>
concept HashMapValue = std::is_trivially_copyable_v<V> && sizeof(V) <= kMaxValueBytes;

// The slot layout for a value type V.
template <typename V>
struct SlotLayout {
  static_assert(std::is_trivially_copyable_v<V>, "HashMap values must be trivially copyable");
  static_assert(sizeof(V) <= kMaxValueBytes, "HashMap values are at most 56 bytes");

  static constexpr size_t kValueWords = ::structures::kValueWords<V>;
  static constexpr size_t kStateWord = 0;
  static constexpr size_t kKeyWord = 1;
  static constexpr size_t kValueWord = 2;
  static constexpr size_t kChecksumWord = 2 + kValueWords;
  static constexpr size_t kWords = 3 + kValueWords;  // per slot
  static constexpr size_t kBytes = 8 * kWords;
  static constexpr size_t kWindowWords = kWords * kSlotsPerWindow;  // one window's slots
  static constexpr size_t kWindowBytes = kBytes * kSlotsPerWindow;
  static constexpr size_t kUnitSlotsWords = kWords * kSlotsPerUnit;  // all slots of a unit
  static constexpr size_t kSlotsOffset = locks::kLockBytes;          // slots follow the lock line
  static constexpr size_t kUnitSlotsBytes = kBytes * kSlotsPerUnit;
  static constexpr size_t kUnitBytes = (kSlotsOffset + kUnitSlotsBytes + 63) / 64 * 64;

  // Where side `side`'s window starts, in bytes from the unit and in slots.
  static constexpr size_t WindowFirstSlot(int side) { return side == 0 ? 0 : kSlotsPerGroup; }
  static constexpr size_t WindowOffset(int side) { return kSlotsOffset + kBytes * WindowFirstSlot(side); }

  // Checksum of a slot's first kWords-1 words; 0 for the all-zero slot.
  // Inlined: with kWords known, the word mixes unroll and run in parallel.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static constexpr uint64_t Checksum(const uint64_t* w) {
    return HashWords(w, kWords - 1) ^ ZeroHash<kWords - 1>();
  }

  static constexpr bool Occupied(uint64_t state) { return (state & 1) != 0; }
  // The state word of the next write to a slot whose state is `old` (same
  // epoch, next version).
  static constexpr uint64_t NextState(uint64_t old, bool occupied) {
    return (((old >> 8) + 1) << 8) | (old & kEpochMask) | (occupied ? 1 : 0);
  }
  // The state word of a split's rewrite of a slot whose state is `old`: next
  // version, epoch `epoch`.
  static constexpr uint64_t Restamped(uint64_t old, int epoch, bool occupied) {
    return (((old >> 8) + 1) << 8) | EpochBits(epoch) | (occupied ? 1 : 0);
  }

  static void EncodeValue(const V& v, uint64_t* value_words) { EncodeValueWords(v, value_words); }
  static V DecodeValue(const uint64_t* value_words) { return DecodeValueWords<V>(value_words); }

  // Fills `out` (kWords) with the slot that a write of (key -> value), or of
  // "empty" when value is null, after a slot in state `old_state` stores.
  static void MakeSlot(uint64_t old_state, uint64_t key, const V* value, uint64_t* out) {
    out[kStateWord] = NextState(old_state, value != nullptr);
    out[kKeyWord] = value != nullptr ? key : 0;
    if (value != nullptr) {
      EncodeValue(*value, out + kValueWord);
    } else {
      std::memset(out + kValueWord, 0, 8 * kValueWords);
    }
    out[kChecksumWord] = Checksum(out);
  }
};

// One slot in registered memory. Every word is a PlainWord: written only by
// the unit-lock holder (plain CPU stores or an RDMA WRITE), read by anyone.
template <size_t kWords>
struct Slot {
  rdma::PlainWord w[kWords];
};

// One unit in registered memory.
template <typename V>
struct alignas(64) Unit {
  locks::ALockWord lock;
  Slot<SlotLayout<V>::kWords> slots[kSlotsPerUnit];
};

// The offsets the NIC path computes with (SlotLayout) are the struct's.
// Instantiated by HashMap<V> (a class cannot assert on itself while incomplete).
template <typename V>
constexpr bool UnitLayoutOk() {
  using L = SlotLayout<V>;
  static_assert(std::is_standard_layout_v<Unit<V>>);
  static_assert(offsetof(Unit<V>, lock) == 0);
  static_assert(offsetof(Unit<V>, slots) == L::kSlotsOffset);
  static_assert(sizeof(Slot<L::kWords>) == L::kBytes);
  static_assert(sizeof(Unit<V>) == L::kUnitBytes);
  static_assert(L::WindowOffset(1) == offsetof(Unit<V>, slots) + kSlotsPerGroup * sizeof(Slot<L::kWords>));
  return true;
}

// Units per node for `groups_per_node` 8-slot groups: groups come in units of
// three, rounded up.
inline constexpr size_t UnitsFor(size_t groups_per_node) {
  return (groups_per_node + kGroupsPerUnit - 1) / kGroupsPerUnit;
}

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_LAYOUT_H_
