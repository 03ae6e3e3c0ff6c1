#ifndef STRUCTURES_HASH_MAP_LAYOUT_H_
#define STRUCTURES_HASH_MAP_LAYOUT_H_

// The hash map's memory layout in registered memory, the slot checksum, and
// the key -> (home node, group) mapping. Pure functions and types: no I/O.
//
// One node's part is `groups_per_node` groups in consecutive memory of its
// arena. A group is one ALock line followed by kSlotsPerGroup slots:
//
//   offset 0    locks::ALockWord  the group's writer lock (the lock's words are
//                                 the lock's business: r_tail NIC-RMW, l_tail
//                                 CPU-RMW, victim plain; see locks/alock.h)
//   offset 64   Slot[0] .. Slot[kSlotsPerGroup-1]
//
// A slot is kWords PlainWords (locks/rmw_word.h: nobody RMWs them; the holder
// of the group lock stores them, with CPU stores natively or one RDMA WRITE
// remotely; anyone loads them, with CPU loads or RDMA READ):
//
//   word 0                 state: bit 0 = occupied, bits 1.. = version (number
//                          of writes this slot has seen; never wraps in practice)
//   word 1                 key (any 64-bit value; no reserved keys)
//   words 2 .. 2+kValue-1  the value's bytes (memcpy of V, zero padded)
//   word kWords-1          checksum = SlotChecksum(words 0 .. kWords-2)
//
// The all-zero slot is a valid empty slot (SlotChecksum of all zeros is 0), so
// zero-filled arena memory is a valid empty map and no initialization race
// exists between processes that create their parts independently.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "locks/alock.h"
#include "locks/lock.h"
#include "locks/rmw_word.h"
#include "rdma/remote_ptr.h"

namespace structures::hash_map_internal {

inline constexpr size_t kSlotsPerGroup = 8;
inline constexpr size_t kMaxValueBytes = 56;

// A fixed 64-bit bijective mixer (the "splitmix64" finalizer). Fixed, unlike
// absl::Hash, so every process maps keys to the same place.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Strong-enough 64-bit hash of `n` words, position dependent (chained
// mixing), so a READ that mixes words of different writes matches the stored
// checksum only by a ~2^-64 accident.
constexpr uint64_t HashWords(const uint64_t* w, size_t n) {
  uint64_t h = 0x6a09e667f3bcc909ULL;  // arbitrary nonzero seed
  for (size_t i = 0; i < n; ++i) h = Mix64(h ^ w[i]) + 0x9e3779b97f4a7c15ULL;
  return Mix64(h ^ n);
}

template <size_t kPayloadWords>
constexpr uint64_t ZeroHash() {
  std::array<uint64_t, kPayloadWords> z{};
  return HashWords(z.data(), kPayloadWords);
}

// What a HashMap value may be: trivially copyable, at most 56 bytes (so a
// slot of state + key + value + checksum fits in 80 bytes).
template <typename V>
concept HashMapValue = std::is_trivially_copyable_v<V> && sizeof(V) <= kMaxValueBytes;

// The slot layout for a value type V.
template <typename V>
struct SlotLayout {
  static_assert(std::is_trivially_copyable_v<V>, "HashMap values must be trivially copyable");
  static_assert(sizeof(V) <= kMaxValueBytes, "HashMap values are at most 56 bytes");

  static constexpr size_t kValueWords = sizeof(V) == 0 ? 1 : (sizeof(V) + 7) / 8;
  static constexpr size_t kStateWord = 0;
  static constexpr size_t kKeyWord = 1;
  static constexpr size_t kValueWord = 2;
  static constexpr size_t kChecksumWord = 2 + kValueWords;
  static constexpr size_t kWords = 3 + kValueWords;  // per slot
  static constexpr size_t kBytes = 8 * kWords;
  static constexpr size_t kSnapshotWords = kWords * kSlotsPerGroup;  // all slots of a group
  static constexpr size_t kSlotsOffset = locks::kLockBytes;         // slots follow the lock line
  static constexpr size_t kSlotsBytes = kBytes * kSlotsPerGroup;
  static constexpr size_t kGroupBytes = (kSlotsOffset + kSlotsBytes + 63) / 64 * 64;

  // Checksum of a slot's first kWords-1 words; 0 for the all-zero slot.
  static constexpr uint64_t Checksum(const uint64_t* w) {
    return HashWords(w, kWords - 1) ^ ZeroHash<kWords - 1>();
  }

  static constexpr bool Occupied(uint64_t state) { return (state & 1) != 0; }
  // The state word of the next write to a slot whose state is `old`.
  static constexpr uint64_t NextState(uint64_t old, bool occupied) {
    return (((old >> 1) + 1) << 1) | (occupied ? 1 : 0);
  }

  static void EncodeValue(const V& v, uint64_t* value_words) {
    std::memset(value_words, 0, 8 * kValueWords);
    std::memcpy(value_words, &v, sizeof(V));
  }
  static V DecodeValue(const uint64_t* value_words) {
    V v;
    std::memcpy(&v, value_words, sizeof(V));
    return v;
  }

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
// the group-lock holder (plain CPU stores or an RDMA WRITE), read by anyone.
template <size_t kWords>
struct Slot {
  locks::PlainWord w[kWords];
};

// One group in registered memory.
template <typename V>
struct alignas(64) Group {
  locks::ALockWord lock;
  Slot<SlotLayout<V>::kWords> slots[kSlotsPerGroup];
};

// Where a key lives: its home node and the group index within that node's part.
struct Placement {
  rdma::NodeId node = 0;
  size_t group = 0;
};

// Keys are mixed and mapped onto [0, num_nodes * groups_per_node) with a
// multiply-shift range reduction (uniform for a uniform hash); group g of the
// whole map lives on node g / groups_per_node.
inline Placement Place(uint64_t key, int num_nodes, size_t groups_per_node) {
  const uint64_t h = Mix64(key ^ 0x243f6a8885a308d3ULL);
  const unsigned __int128 total = static_cast<unsigned __int128>(num_nodes) * groups_per_node;
  const uint64_t g = static_cast<uint64_t>((static_cast<unsigned __int128>(h) * total) >> 64);
  return {static_cast<rdma::NodeId>(g / groups_per_node), static_cast<size_t>(g % groups_per_node)};
}

// What a snapshot of a group's slots says about one key.
struct Lookup {
  enum Kind { kFound, kAbsent, kTorn };
  Kind kind = kAbsent;
  int slot = -1;        // kFound: the slot holding the key
  int first_free = -1;  // kAbsent: the first empty slot, -1 when the group is full
};

// Searches a snapshot (kSnapshotWords words: the group's slots as read) for
// `key`.
//
// Why a reader may trust this without the lock (the linearizability argument;
// the writer side is in native_path.h / rdma_path.h):
//  * Writers hold the group lock, so the writes to one slot are serialized,
//    and each write stores a whole slot tuple (state, key, value, checksum).
//    Let a write to a slot "take effect" when its checksum word is stored:
//    that is inside the writer's operation, and it defines the slot's logical
//    content at every instant (the tuple of the last checksum stored).
//  * A reader copies each word single-copy atomically (CPU loads, or a NIC
//    READ that copies 8-byte words in some unspecified order) but at
//    different moments. It accepts a slot only if the checksum word it read
//    equals SlotChecksum(the other words it read). The checksum word it read
//    was stored by some write T, and the other words hash to T's checksum, so
//    (barring a 2^-64 collision) they are exactly T's words: the reader
//    returns T, and T was the slot's logical content at the instant the
//    reader loaded the checksum word, which lies inside the read.
//  * Found: the key is in at most one slot at any instant (a writer inserts a
//    key only into a group that does not hold it, and a write changes one
//    slot), so "slot s held (k, v) at instant t" means the map bound k to v
//    at t: the get linearizes there.
//  * Absent (every slot valid, none holds k): keys never move between slots
//    while present (a key leaves a slot only by erase). If k had been present
//    throughout the read it would have stayed in one slot s throughout, and
//    the read of s would have seen it. So k was absent at some instant inside
//    the read, where the get linearizes.
//  * A slot that fails its checksum may hold k: the reader must not conclude
//    "absent" and reads again (kTorn). A found slot is trusted even if some
//    other slot is torn.
//
// `verify` = false skips the checksum (test-only mutant; never in production).
template <typename V>
Lookup FindKey(const uint64_t* snap, uint64_t key, bool verify = true) {
  using L = SlotLayout<V>;
  Lookup r;
  bool torn = false;
  for (size_t i = 0; i < kSlotsPerGroup; ++i) {
    const uint64_t* w = snap + i * L::kWords;
    if (verify && L::Checksum(w) != w[L::kChecksumWord]) {
      torn = true;
      continue;
    }
    if (L::Occupied(w[L::kStateWord])) {
      if (w[L::kKeyWord] == key) {
        r.kind = Lookup::kFound;
        r.slot = static_cast<int>(i);
        return r;
      }
    } else if (r.first_free < 0) {
      r.first_free = static_cast<int>(i);
    }
  }
  r.kind = torn ? Lookup::kTorn : Lookup::kAbsent;
  return r;
}

// Occupied slots of a snapshot, or -1 when a slot is torn.
template <typename V>
int CountOccupied(const uint64_t* snap) {
  using L = SlotLayout<V>;
  int n = 0;
  for (size_t i = 0; i < kSlotsPerGroup; ++i) {
    const uint64_t* w = snap + i * L::kWords;
    if (L::Checksum(w) != w[L::kChecksumWord]) return -1;
    n += L::Occupied(w[L::kStateWord]) ? 1 : 0;
  }
  return n;
}

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_LAYOUT_H_
