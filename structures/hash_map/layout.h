#ifndef STRUCTURES_HASH_MAP_LAYOUT_H_
#define STRUCTURES_HASH_MAP_LAYOUT_H_

// The hash map's memory layout in registered memory, the slot checksum, and
// the key -> (home node, two candidate windows) mapping. Pure functions and
// types: no I/O. (docs/design.md §9.2 has the design; this file the words.)
//
// One node's part is `units` units in consecutive memory of its arena. A unit
// is one ALock line followed by three groups of kSlotsPerGroup slots, in the
// order [main 0][overflow][main 1] (RACE's combined buckets):
//
//   offset 0    locks::ALockWord  the unit's writer lock (the lock's words are
//                                 the lock's business: r_tail NIC-RMW, l_tail
//                                 CPU-RMW, victim plain; see locks/alock.h)
//   offset 64   Slot[0] .. Slot[kSlotsPerUnit-1]
//                                 slots 0-7 main 0, 8-15 overflow, 16-23 main 1
//
// A key has two candidates, each a (unit, side) on its home node. The window
// of side 0 is slots [0, 16) of its unit (main 0 + overflow), of side 1 slots
// [8, 24) (overflow + main 1): 16 contiguous slots, one READ. The two sides of
// a unit share its overflow group, which is why the lock is per unit. A key
// lives in exactly one slot of one of its two windows while present and never
// moves; writers put a new key in the window with more free slots, its main
// group first.
//
// Every word's RMW domain (docs/design.md §3), fixed by its declared type:
//
//   word                    type       RMW'd by            others may
//   ----------------------  ---------  ------------------  -----------------------
//   lock.r_tail             NicWord    NIC CAS (lockers    CPU-load it
//                                      on the NIC paths)
//   lock.l_tail             CpuWord    CPU (native         RDMA READ it
//                                      lockers)
//   lock.victim, .budgets   PlainWord  nobody              store/load, both sides
//   slots[i].w[*]           PlainWord  nobody              the unit-lock holder
//                                                          stores (CPU stores or
//                                                          one RDMA WRITE); anyone
//                                                          loads (CPU or READ)
//
// A slot is kWords PlainWords:
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

#include "absl/base/attributes.h"
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
  // The state word of the next write to a slot whose state is `old`.
  static constexpr uint64_t NextState(uint64_t old, bool occupied) {
    return (((old >> 1) + 1) << 1) | (occupied ? 1 : 0);
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

// One of a key's two places: a unit of the home node's part and a side of it
// (its window: slots [8*side, 8*side + 16) of the unit).
struct Candidate {
  size_t unit = 0;
  int side = 0;
  friend bool operator==(const Candidate&, const Candidate&) = default;
};

// Where a key lives: its home node, its two candidates (never equal), and the
// slot where scans of either window's groups start.
struct Placement {
  rdma::NodeId node = 0;
  Candidate c[2];
  size_t start = 0;  // in [0, kSlotsPerGroup)
  bool same_unit() const { return c[0].unit == c[1].unit; }
};

// Keys are mixed and mapped onto [0, num_nodes * units_per_node) with a
// multiply-shift range reduction (uniform for a uniform hash; it takes the
// high bits of the product); unit u of the whole map lives on node
// u / units_per_node. Computed without a division: with x = h / 2^64,
// u = floor(x * N * U) = node * U + floor(frac * U), where node = floor(x * N)
// is the high word of h * N and frac * 2^64 its low word (exact, so this is
// the same mapping as the division). That is the first candidate's unit; the
// second's comes from an independent mix of the key on the same node, and
// each side from a low bit of that mix (which the range reduction barely
// uses). Should both candidates coincide (same unit and side), the second
// takes the other side, so a key always has two distinct windows (with one
// unit per node they are its two sides). The scan start is the first mix's
// low 3 bits, so keys of one group spread over the start slots: a key is
// usually found at its first probe. Where a reader starts does not matter for
// correctness (every reader scans all slots of both windows when it does not
// find the key); writers insert into the first empty slot from the same start.
inline Placement Place(uint64_t key, int num_nodes, size_t units_per_node) {
  const uint64_t h = Mix64(key ^ 0x243f6a8885a308d3ULL);
  const uint64_t h2 = Mix64(key ^ 0x13198a2e03707344ULL);
  const unsigned __int128 hn = static_cast<unsigned __int128>(h) * static_cast<uint64_t>(num_nodes);
  const uint64_t node = static_cast<uint64_t>(hn >> 64);
  const uint64_t frac = static_cast<uint64_t>(hn);
  Placement p;
  p.node = static_cast<rdma::NodeId>(node);
  p.c[0].unit = static_cast<size_t>((static_cast<unsigned __int128>(frac) * units_per_node) >> 64);
  p.c[0].side = static_cast<int>(h2 & 1);
  p.c[1].unit = static_cast<size_t>((static_cast<unsigned __int128>(h2) * units_per_node) >> 64);
  p.c[1].side = static_cast<int>((h2 >> 1) & 1);
  if (p.c[1] == p.c[0]) p.c[1].side ^= 1;
  p.start = static_cast<size_t>(h % kSlotsPerGroup);
  return p;
}

// What a scan of one window's slots says about one key. Slot indices are the
// window's own, in [0, kSlotsPerWindow).
struct Lookup {
  enum Kind { kFound, kAbsent, kTorn };
  Kind kind = kAbsent;
  int slot = -1;            // kFound (and kTorn): the slot whose key word was the key
  int first_free = -1;      // the first empty slot in scan order, -1 when none was seen
  uint64_t free_state = 0;  // first_free's state word (writers need its version)
  int free_count = 0;       // kAbsent: the window's empty slots (ScanWindow)
  int window = 0;           // kFound (and kTorn): which window (ScanWindows)
};

// The order a window's slots are scanned in: its main group first, then the
// overflow group (writers fill main groups first, as RACE does), each
// circularly from `start`. Step j in [0, kSlotsPerWindow) -> window slot.
inline constexpr size_t ScanSlot(int side, size_t start, size_t j) {
  const size_t main = side == 0 ? 0 : kSlotsPerGroup;  // main 0 is first in side 0's window, main 1 last in side 1's
  const size_t overflow = side == 0 ? kSlotsPerGroup : 0;
  return (j < kSlotsPerGroup ? main : overflow) + (start + j) % kSlotsPerGroup;
}

// Searches a window's slots for `key`, in ScanSlot order, reading each slot's
// words through `word(slot, index)` (CPU loads of the slots in place, or a
// READ's copy of them). Per slot it looks at the state word, and at the key
// word of occupied slots. The slot whose state says occupied and whose key
// word is `key` is read further: its value words and checksum are copied into
// `found` (SlotLayout<V>::kWords words, in slot order) and, when `verify`, the
// checksum is checked over the words actually read; no other slot is looked
// at again. Only when the key is not found, and `verify`, are the other
// occupied slots checked: each is read again in full and must match its
// checksum and not hold `key` (else kTorn: read again). Empty slots are never
// checked. So a hit at the first probe reads one slot, and torn slots of
// other keys never make a hit retry.
//
// Invariants a reader without the lock relies on (the full linearizability
// argument, also at byte granularity for rxe, is in structures/README.md,
// "The linearizability argument"):
//  1. Writers hold the unit lock; each write stores one slot tuple whose
//     state word carries a per-slot version, so no two writes of a slot store
//     the same state or checksum word.
//  2. A write that leaves its slot occupied takes effect when both its state
//     and checksum words have landed; an erase when the first of them has.
//  3. Keys never move while present; a key is in at most one slot, in one of
//     its two windows.
//  4. "Occupied" is bit 0 of the state word's lowest byte.
// Hence: a slot accepted by its checksum is one write's tuple, current at an
// instant inside the read; "absent" from both windows needs no checksum of
// empty slots (a key present throughout the read sits in one slot the whole
// time, and the read of that slot sees it), but the occupied slots of other
// keys must verify on a miss.
//
// `verify` = false skips every checksum (writers under the lock; the
// test-only mutant; never for readers in production).
// The miss path's check of the other occupied slots (bit i of `others`: slot
// i): each read again in full, it must match its checksum and not hold `key`.
// Out of line: hits never get here.
template <typename V, typename WordAt>
bool OthersValid(WordAt& word, uint64_t key, uint32_t others) {
  using L = SlotLayout<V>;
  for (size_t i = 0; others != 0; ++i, others >>= 1) {
    if ((others & 1) == 0) continue;
    uint64_t w[L::kWords];
    for (size_t x = 0; x < L::kWords; ++x) w[x] = word(i, x);
    if (L::Checksum(w) != w[L::kChecksumWord] || (L::Occupied(w[L::kStateWord]) && w[L::kKeyWord] == key)) {
      return false;  // torn, or k arrived meanwhile: read again
    }
  }
  return true;
}

// Always inlined (into the native Get, it is the whole read): the found
// slot's words then stay in registers instead of going through memory, where
// a value copied with 16-byte loads from 8-byte stores stalls store forwarding.
template <typename V, typename WordAt>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup ScanWindow(WordAt&& word, uint64_t key, int side, size_t start,
                                                      bool verify, uint64_t* found) {
  using L = SlotLayout<V>;
  Lookup r;
  uint32_t others = 0;  // bit i: slot i was occupied by another key
  for (size_t j = 0; j < kSlotsPerWindow; ++j) {
    const size_t i = ScanSlot(side, start, j);
    const uint64_t state = word(i, L::kStateWord);
    if (!L::Occupied(state)) {
      if (r.first_free < 0) {
        r.first_free = static_cast<int>(i);
        r.free_state = state;
      }
      ++r.free_count;
      continue;
    }
    if (word(i, L::kKeyWord) != key) {
      others |= uint32_t{1} << i;
      continue;
    }
    found[L::kStateWord] = state;
    found[L::kKeyWord] = key;
    for (size_t w = L::kValueWord; w < L::kWords; ++w) found[w] = word(i, w);
    r.slot = static_cast<int>(i);
    r.kind = verify && L::Checksum(found) != found[L::kChecksumWord] ? Lookup::kTorn : Lookup::kFound;
    return r;
  }
  r.kind = verify && others != 0 && !OthersValid<V>(word, key, others) ? Lookup::kTorn : Lookup::kAbsent;
  return r;
}

// A reader's search of a key's windows (the first `windows` of them: 2, or 1
// in a test-only mutant) through `word0` and `word1` (each like ScanWindow's
// `word`, over its window's slots): the same per-slot rules as ScanWindow,
// in this order: the two main groups, then the two overflow groups, each
// pair interleaved slot by slot from `start` (window 0's start slot, window
// 1's start slot, window 0's next, ...). Keys sit in main groups unless those
// were full when they arrived, and usually at or near their start slot, so a
// hit in either window costs about as few probes as a hit in the first; and
// the two streams of loads run side by side. The order is not needed for
// correctness (a key present throughout the scan sits in one slot, and the
// scan reads every slot of both windows before it says "absent"); on a miss
// the occupied slots of other keys are checked in both windows, as in
// ScanWindow. `free_count` and `first_free` are not filled (readers).
template <typename V, typename WordAt0, typename WordAt1>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup ScanWindows(WordAt0&& word0, WordAt1&& word1, uint64_t key,
                                                       const Placement& p, int windows, bool verify,
                                                       uint64_t* found) {
  using L = SlotLayout<V>;
  Lookup r;
  uint32_t others[2] = {0, 0};  // per window, bit i: slot i was occupied by another key
  // One probe of window w's slot at ScanSlot step `step`; true on a hit
  // (then `r` is filled). A template over the accessor, so each window's
  // probes compile to straight loads of that window.
  auto probe = [&](auto& word, int w, size_t step) ABSL_ATTRIBUTE_ALWAYS_INLINE {
    const size_t i = ScanSlot(p.c[w].side, p.start, step);
    const uint64_t state = word(i, L::kStateWord);
    if (!L::Occupied(state)) return false;
    if (word(i, L::kKeyWord) != key) {
      others[w] |= uint32_t{1} << i;
      return false;
    }
    found[L::kStateWord] = state;
    found[L::kKeyWord] = key;
    for (size_t x = L::kValueWord; x < L::kWords; ++x) found[x] = word(i, x);
    r.slot = static_cast<int>(i);
    r.window = w;
    r.kind = verify && L::Checksum(found) != found[L::kChecksumWord] ? Lookup::kTorn : Lookup::kFound;
    return true;
  };
  for (size_t step = 0; step < kSlotsPerWindow; ++step) {  // ScanSlot steps: 0-7 main, 8-15 overflow
    if (probe(word0, 0, step)) return r;
    if (windows > 1 && probe(word1, 1, step)) return r;
  }
  const bool valid = !verify || ((others[0] == 0 || OthersValid<V>(word0, key, others[0])) &&
                                 (others[1] == 0 || OthersValid<V>(word1, key, others[1])));
  r.kind = valid ? Lookup::kAbsent : Lookup::kTorn;
  return r;
}

// ScanWindow over a private copy of a window's slots (kWindowWords words, as
// one RDMA READ delivered them).
template <typename V>
Lookup FindKey(const uint64_t* snap, uint64_t key, int side, size_t start, bool verify, uint64_t* found) {
  using L = SlotLayout<V>;
  return ScanWindow<V>([snap](size_t slot, size_t w) { return snap[slot * L::kWords + w]; }, key, side, start,
                       verify, found);
}

// Occupied slots among a snapshot's `slots` slots, or -1 when a slot is torn.
template <typename V>
int CountOccupied(const uint64_t* snap, size_t slots) {
  using L = SlotLayout<V>;
  int n = 0;
  for (size_t i = 0; i < slots; ++i) {
    const uint64_t* w = snap + i * L::kWords;
    if (L::Checksum(w) != w[L::kChecksumWord]) return -1;
    n += L::Occupied(w[L::kStateWord]) ? 1 : 0;
  }
  return n;
}

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_LAYOUT_H_
