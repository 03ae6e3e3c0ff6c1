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
//   word 0                 state: bit 0 = occupied, bits 1-7 = the slot's epoch
//                          (its segment's local depth minus the map's initial
//                          depth, see "Growth" below), bits 8.. = version
//                          (number of writes this slot has seen; never wraps
//                          in practice). Occupied bit and epoch share the
//                          lowest byte, so even a NIC that copies single
//                          bytes (rxe) never splits them.
//   word 1                 key (any 64-bit value; no reserved keys)
//   words 2 .. 2+kValue-1  the value's bytes (memcpy of V, zero padded)
//   word kWords-1          checksum = SlotChecksum(words 0 .. kWords-2)
//
// The all-zero slot is a valid empty slot of epoch 0 (SlotChecksum of all
// zeros is 0), so zero-filled arena memory is a valid empty segment of the
// initial layout and no initialization race exists between processes that
// create their parts independently.
//
// Growth (extendible hashing; docs/design.md §9.2, structures/README.md).
// The units of a part are grouped into segments of S units; a part holds a
// pool of max_segments segments (reserved at creation), of which the first
// `segments` are in use, followed by the part's directory:
//
//   offset pool_bytes          locks::ALockWord  the directory lock (splitters)
//          pool_bytes + 64     version           seqlock: odd while the
//                                                directory changes; only its
//                                                lowest byte is used (rxe-safe)
//          pool_bytes + 72     depth             global depth D
//          pool_bytes + 80     segments          segments in use
//          pool_bytes + 128    entry[2^max_depth]  entry i (i < 2^D):
//                                                (segment << 8) | local depth
//
// A key's segment is entry[dir_hash mod 2^D]; its two candidate units are
// segment * S + (the Placement's units, which are in [0, S)). A split of
// segment X (local depth d) into X and a fresh Y moves the keys whose
// dir_hash has bit d set to the same slots of Y, then restamps X's slots with
// epoch d+1 - D0 (moved ones emptied), then publishes the directory. A
// reader whose directory says depth d accepts only state words of epoch
// d - D0: any other epoch means its directory is stale (it refreshes and
// retries). Directory words' domains:
//
//   directory lock          ALockWord  as a unit lock
//   version, depth,         PlainWord  the directory-lock holder stores (CPU
//   segments, entry[*]                 stores or RDMA WRITEs); anyone loads

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

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

// One of a key's two places: a unit of the home node's part and a side of it
// (its window: slots [8*side, 8*side + 16) of the unit).
struct Candidate {
  size_t unit = 0;
  int side = 0;
  friend bool operator==(const Candidate&, const Candidate&) = default;
};

// Where a key lives: its home node, its two candidates (never equal), the
// slot where scans of either window's groups start, and the hash that picks
// its segment through the home node's directory. Place() gives candidate
// units relative to the segment, in [0, S); a client adds segment * S once
// it has looked the segment up.
struct Placement {
  rdma::NodeId node = 0;
  Candidate c[2];
  size_t start = 0;    // in [0, kSlotsPerGroup)
  uint64_t dir = 0;    // directory index = dir mod 2^depth
  bool same_unit() const { return c[0].unit == c[1].unit; }
};

// A part's segment geometry, fixed at creation (the same in every process,
// from the options alone). The initial layout is 2^base_depth segments of
// `segment_units` units each, every directory entry i -> segment i at depth
// base_depth; the pool has room for max_segments; the directory for
// 2^max_depth entries.
struct Geometry {
  size_t segment_units = 1;  // S
  int base_depth = 0;        // D0
  size_t max_segments = 1;
  int max_depth = 0;
  size_t initial_segments() const { return size_t{1} << base_depth; }
  size_t initial_units() const { return initial_segments() * segment_units; }
  size_t pool_units() const { return max_segments * segment_units; }
  bool can_grow() const { return max_segments > initial_segments(); }
};

inline constexpr size_t kMinSegmentUnits = 16;  // S >= 16 keeps two-choice placement effective
inline constexpr int kMaxBaseDepth = 12;         // at most 4096 initial segments (bigger maps: bigger S)
inline constexpr int kMaxDepth = 16;             // directory of at most 65,536 entries (512 KiB)

inline int CeilLog2(size_t n) {
  int d = 0;
  while ((size_t{1} << d) < n) ++d;
  return d;
}

// The geometry for `groups` initial groups and room to grow to `max_groups`
// (>= groups). S is at least kMinSegmentUnits (or all units, when fewer),
// and the initial units round up by less than one unit per segment. Without
// room to grow, the part is one segment.
inline Geometry GeometryFor(size_t groups, size_t max_groups) {
  const size_t units = UnitsFor(groups);
  Geometry g;
  if (UnitsFor(max_groups) <= units) {
    // A map that never grows needs no segments: one segment of every unit
    // gives each key two choices over the whole part, which fills fullest
    // before a first full window (structures/README.md, Capacity).
    g.segment_units = units;
    return g;
  }
  int d = 0;
  while (d < kMaxBaseDepth && (units >> (d + 1)) >= kMinSegmentUnits) ++d;
  g.base_depth = d;
  g.segment_units = (units + (size_t{1} << d) - 1) >> d;
  const size_t max_units = std::max(UnitsFor(max_groups), g.initial_units());
  g.max_segments = std::max(g.initial_segments(), max_units / g.segment_units);
  // Three spare levels: splits are not perfectly balanced.
  g.max_depth = std::min(kMaxDepth, std::max(d, CeilLog2(g.max_segments) + 3));
  if (g.max_depth - d > kMaxEpoch) g.max_depth = d + kMaxEpoch;
  return g;
}

// A directory entry: (segment << 8) | absolute local depth.
inline constexpr uint64_t DirEntry(size_t segment, int depth) {
  return (static_cast<uint64_t>(segment) << 8) | static_cast<uint64_t>(depth);
}
inline constexpr size_t EntrySegment(uint64_t e) { return static_cast<size_t>(e >> 8); }
inline constexpr int EntryDepth(uint64_t e) { return static_cast<int>(e & 0xff); }
// Whether entry e can belong to a directory of global depth `depth`: a
// segment's local depth never exceeds the global depth. A seqlock read whose
// one-byte version wrapped can pair an older depth with a newer entry, which
// fails this (native_path.h, NativeDirLookup).
inline constexpr bool EntryFits(uint64_t e, int depth) { return EntryDepth(e) <= depth; }

// The directory's words in registered memory (after the pool).
struct DirectoryHeader {
  locks::ALockWord lock;  // splitters hold it around a split
  rdma::PlainWord version;   // seqlock, lowest byte only: odd while changing
  rdma::PlainWord depth;     // global depth D
  rdma::PlainWord segments;  // segments in use
  rdma::PlainWord spare[5];
  rdma::PlainWord entry[1];  // really 2^max_depth entries
};
static_assert(offsetof(DirectoryHeader, version) == locks::kLockBytes);
static_assert(offsetof(DirectoryHeader, entry) == 128);
inline constexpr size_t kDirEntriesOffset = 128;
inline constexpr uint64_t NextVersion(uint64_t v) { return (v + 1) & 0xff; }

// The one retry policy of the directory's seqlock reads, native and NIC:
// called after each read that overlapped a publish, with `failed` = how many
// did before it (0 for the first). It yields once `failed` reaches
// `yield_after`, and returns DeadlineExceeded once it reaches
// `give_up_after` (a splitter that died mid-publish leaves the version odd
// for good).
inline absl::Status DirectoryRetryWait(int failed, int yield_after, int give_up_after) {
  if (failed >= yield_after) std::this_thread::yield();
  if (failed >= give_up_after) {
    return absl::DeadlineExceededError("HashMap: the directory stayed mid-change for too long (a splitter died?)");
  }
  return absl::OkStatus();
}

// A client's copy of a part's directory (the NIC path's cache; a splitter's
// view under the directory lock).
struct DirectoryCopy {
  uint64_t version = 0;
  int depth = 0;
  size_t segments = 0;
  std::vector<uint64_t> entries;  // 2^depth
  // The initial layout (what a fresh part holds; no I/O needed to know it).
  static DirectoryCopy Initial(const Geometry& g) {
    DirectoryCopy d;
    d.depth = g.base_depth;
    d.segments = g.initial_segments();
    d.entries.resize(g.initial_segments());
    for (size_t i = 0; i < d.entries.size(); ++i) d.entries[i] = DirEntry(i, g.base_depth);
    return d;
  }
  uint64_t Lookup(uint64_t dir) const { return entries[dir & ((uint64_t{1} << depth) - 1)]; }
};

// Keys are mixed and mapped onto [0, num_nodes) and a unit of a segment of
// `segment_units` units with a multiply-shift range reduction (uniform for a
// uniform hash; it takes the high bits of the product). Computed without a
// division: with x = h / 2^64, node = floor(x * N) is the high word of h * N
// and frac * 2^64 its low word, and the first candidate's unit is
// floor(frac * S). The second's comes from an independent mix h2 of the key,
// each side from a low bit of h2 (which the range reduction barely uses), and
// the directory index from h2's next bits (bits 2 and up; the reduction uses
// its top bits). Should both candidates coincide (same unit and side), the
// second takes the other side, so a key always has two distinct windows (with
// one unit per segment they are its two sides). The scan start is the first
// mix's low 3 bits, so keys of one group spread over the start slots: a key
// is usually found at its first probe. Where a reader starts does not matter
// for correctness (every reader scans all slots of both windows when it does
// not find the key); writers insert into the first empty slot from the same
// start. A split moves a key to the same unit, side and slot of the new
// segment, since none of these depend on the segment.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Placement Place(uint64_t key, int num_nodes, size_t segment_units) {
  const uint64_t h = Mix64(key ^ 0x243f6a8885a308d3ULL);
  const uint64_t h2 = Mix64(key ^ 0x13198a2e03707344ULL);
  const unsigned __int128 hn = static_cast<unsigned __int128>(h) * static_cast<uint64_t>(num_nodes);
  const uint64_t node = static_cast<uint64_t>(hn >> 64);
  const uint64_t frac = static_cast<uint64_t>(hn);
  Placement p;
  p.node = static_cast<rdma::NodeId>(node);
  p.c[0].unit = static_cast<size_t>((static_cast<unsigned __int128>(frac) * segment_units) >> 64);
  p.c[0].side = static_cast<int>(h2 & 1);
  p.c[1].unit = static_cast<size_t>((static_cast<unsigned __int128>(h2) * segment_units) >> 64);
  p.c[1].side = static_cast<int>((h2 >> 1) & 1);
  if (p.c[1] == p.c[0]) p.c[1].side ^= 1;
  p.start = static_cast<size_t>(h % kSlotsPerGroup);
  p.dir = h2 >> 2;
  return p;
}

// What a scan of one window's slots says about one key. Slot indices are the
// window's own, in [0, kSlotsPerWindow).
struct Lookup {
  // kStale: a state word of another epoch than the reader's directory says
  // (the segment was split since; refresh the directory and retry).
  enum Kind { kFound, kAbsent, kTorn, kStale };
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
// test-only mutant; never for readers in production). A state word whose
// epoch bits are not `epoch` ends the scan with kStale (see ScanWindowsFully).
// The miss path's check of the other occupied slots (bit i of `others`: slot
// i): each read again in full, it must match its checksum and not hold `key`
// (else kTorn: read again), and its state word, like every state word a
// reader looks at, must carry epoch bits `epoch` when `check_epoch` (else
// kStale). The epoch check matters here: a reader that loaded a slot's state
// word before a split restamped the slot (old epoch, occupied by the key
// being moved out) and its key word after (0) counts the slot as another
// key's; read again, the slot is a consistent empty tuple of the next epoch,
// which passes the checksum. Without the check the scan would say "absent"
// of a key the split had already placed in the new segment. kAbsent when
// every slot passes. Out of line: hits never get here.
template <typename V, typename WordAt>
Lookup::Kind OthersValid(WordAt& word, uint64_t key, uint32_t others, uint64_t epoch, bool check_epoch) {
  using L = SlotLayout<V>;
  for (size_t i = 0; others != 0; ++i, others >>= 1) {
    if ((others & 1) == 0) continue;
    uint64_t w[L::kWords];
    for (size_t x = 0; x < L::kWords; ++x) w[x] = word(i, x);
    if (L::Checksum(w) != w[L::kChecksumWord] || (L::Occupied(w[L::kStateWord]) && w[L::kKeyWord] == key)) {
      return Lookup::kTorn;  // torn, or k arrived meanwhile: read again
    }
    if (check_epoch && (w[L::kStateWord] & kEpochMask) != epoch) return Lookup::kStale;
  }
  return Lookup::kAbsent;
}

// Always inlined (into the native Get, it is the whole read): the found
// slot's words then stay in registers instead of going through memory, where
// a value copied with 16-byte loads from 8-byte stores stalls store forwarding.
template <typename V, typename WordAt>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup ScanWindow(WordAt&& word, uint64_t key, int side, size_t start,
                                                      uint64_t epoch, bool verify, uint64_t* found) {
  using L = SlotLayout<V>;
  Lookup r;
  uint32_t others = 0;  // bit i: slot i was occupied by another key
  for (size_t j = 0; j < kSlotsPerWindow; ++j) {
    const size_t i = ScanSlot(side, start, j);
    const uint64_t state = word(i, L::kStateWord);
    if ((state & kEpochMask) != epoch) {
      r.kind = Lookup::kStale;
      return r;
    }
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
  r.kind = verify && others != 0 ? OthersValid<V>(word, key, others, epoch, /*check_epoch=*/true) : Lookup::kAbsent;
  return r;
}

// The window-relative first slot of window w's main group ([w][0]) and
// overflow group ([w][1]) for placement `p` (ScanSlot's branches, hoisted
// out of a scan's loop).
struct GroupFirsts {
  size_t at[2][2];
  explicit GroupFirsts(const Placement& p) {
    for (int w = 0; w < 2; ++w) {
      at[w][0] = ScanSlot(p.c[w].side, 0, 0);
      at[w][1] = ScanSlot(p.c[w].side, 0, kSlotsPerGroup);
    }
  }
};

// A reader's full search of a key's windows (the first `windows` of them: 2,
// or 1 in a test-only mutant) through `word0` and `word1` (each like
// ScanWindow's `word`, over its window's slots): the same per-slot rules as
// ScanWindow, in this order: the two main groups, then the two overflow
// groups, each pair interleaved slot by slot from `start` (window 0's start
// slot, window 1's start slot, window 0's next, ...). Keys sit in main groups
// unless those were full when they arrived, and usually at or near their
// start slot, so a hit in either window costs about as few probes as a hit in
// the first; and the two streams of loads run side by side. The order is not
// needed for correctness (a key present throughout the scan sits in one
// slot, and the scan reads every slot of both windows before it says
// "absent"); on a miss the occupied slots of other keys are checked in both
// windows, as in ScanWindow. `free_count` and `first_free` are not filled
// (readers).
// Every state word looked at must carry epoch bits `epoch` (EpochBits of the
// epoch the reader's directory gives the segment); the first that does not
// ends the scan with kStale: the directory the reader used is stale, or the
// segment is being split (`check_epoch` = false only in a test-only mutant).
// Why this suffices: a split rewrites every slot of the old segment with the
// next epoch only after the moved keys are in the new segment, and publishes
// the directory only after that; so a key present throughout the scan is in
// a slot that the scan sees at the expected epoch, or the scan sees a newer
// epoch somewhere and retries (structures/README.md, "Growth").
// Readers call ScanWindows, which tries QuickHit first.
template <typename V, typename WordAt0, typename WordAt1>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup ScanWindowsFully(WordAt0&& word0, WordAt1&& word1, uint64_t key,
                                                            const Placement& p, int windows, uint64_t epoch,
                                                            bool check_epoch, bool verify, uint64_t* found) {
  using L = SlotLayout<V>;
  Lookup r;
  uint32_t others[2] = {0, 0};  // per window, bit i: slot i was occupied by another key
  // One probe of window w's slot i: 0 = go on, 1 = the key (its window,
  // slot and state word in `hit_w`, `hit_i`, `hit_state`), 2 = a state word
  // of another epoch. Only words are loaded here; a hit's value words are
  // read once, after the loop, so each of the (unrolled) probes stays a few
  // instructions. A template over the accessor, so each window's probes
  // compile to straight loads of it.
  int hit_w = 0;
  size_t hit_i = 0;
  uint64_t hit_state = 0;
  auto probe = [&](auto& word, int w, size_t i) ABSL_ATTRIBUTE_ALWAYS_INLINE -> int {
    const uint64_t state = word(i, L::kStateWord);
    if (check_epoch && (state & kEpochMask) != epoch) return 2;
    if (!L::Occupied(state)) return 0;
    if (word(i, L::kKeyWord) != key) {
      others[w] |= uint32_t{1} << i;
      return 0;
    }
    hit_w = w;
    hit_i = i;
    hit_state = state;
    return 1;
  };
  const GroupFirsts g(p);
  int outcome = 0;
  for (size_t group = 0; group < 2 && outcome == 0; ++group) {  // 0: main groups, 1: overflow groups
    for (size_t j = 0; j < kSlotsPerGroup; ++j) {
      const size_t off = (p.start + j) % kSlotsPerGroup;
      if ((outcome = probe(word0, 0, g.at[0][group] + off)) != 0) break;
      if (windows > 1 && (outcome = probe(word1, 1, g.at[1][group] + off)) != 0) break;
    }
  }
  if (outcome == 2) {
    r.kind = Lookup::kStale;
    return r;
  }
  if (outcome == 1) {
    found[L::kStateWord] = hit_state;
    found[L::kKeyWord] = key;
    if (hit_w == 0) {
      for (size_t x = L::kValueWord; x < L::kWords; ++x) found[x] = word0(hit_i, x);
    } else {
      for (size_t x = L::kValueWord; x < L::kWords; ++x) found[x] = word1(hit_i, x);
    }
    r.slot = static_cast<int>(hit_i);
    r.window = hit_w;
    r.kind = verify && L::Checksum(found) != found[L::kChecksumWord] ? Lookup::kTorn : Lookup::kFound;
    return r;
  }
  r.kind = Lookup::kAbsent;
  if (verify && others[0] != 0) r.kind = OthersValid<V>(word0, key, others[0], epoch, check_epoch);
  if (verify && others[1] != 0 && r.kind == Lookup::kAbsent) {
    r.kind = OthersValid<V>(word1, key, others[1], epoch, check_epoch);
  }
  return r;
}

// A reader's first try, for a key that is there: key words only, in
// ScanWindowsFully's order; the first slot whose key word is `key` is then
// read in full and accepted by the rules of a full scan's hit: occupied, of
// epoch `epoch` (when `check_epoch`), matching its checksum (when `verify`).
// True, with `*r` and `found` filled as ScanWindowsFully fills them, when it
// accepts; false otherwise (no key word matched, or the slot was torn,
// empty or stale), and then only the full scan can answer. Sound for the
// reason a full scan's hit is (structures/README.md, "The linearizability
// argument", Found): that argument uses no order among the loads and no slot
// but the found one. A hit costs one load and compare per slot passed,
// instead of a full scan's state checks and bookkeeping.
template <typename V, typename WordAt0, typename WordAt1>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool QuickHit(WordAt0&& word0, WordAt1&& word1, uint64_t key,
                                                  const Placement& p, int windows, uint64_t epoch,
                                                  bool check_epoch, bool verify, uint64_t* found, Lookup* r) {
  using L = SlotLayout<V>;
  const GroupFirsts g(p);
  int w = -1;
  size_t i = 0;
  for (size_t group = 0; group < 2 && w < 0; ++group) {  // 0: main groups, 1: overflow groups
    for (size_t j = 0; j < kSlotsPerGroup; ++j) {
      const size_t off = (p.start + j) % kSlotsPerGroup;
      if (word0(g.at[0][group] + off, L::kKeyWord) == key) {
        w = 0;
        i = g.at[0][group] + off;
        break;
      }
      if (windows > 1 && word1(g.at[1][group] + off, L::kKeyWord) == key) {
        w = 1;
        i = g.at[1][group] + off;
        break;
      }
    }
  }
  if (w < 0) return false;
  found[L::kKeyWord] = key;
  if (w == 0) {
    found[L::kStateWord] = word0(i, L::kStateWord);
    for (size_t x = L::kValueWord; x < L::kWords; ++x) found[x] = word0(i, x);
  } else {
    found[L::kStateWord] = word1(i, L::kStateWord);
    for (size_t x = L::kValueWord; x < L::kWords; ++x) found[x] = word1(i, x);
  }
  const uint64_t state = found[L::kStateWord];
  if (!L::Occupied(state) || (check_epoch && (state & kEpochMask) != epoch) ||
      (verify && L::Checksum(found) != found[L::kChecksumWord])) {
    return false;
  }
  r->slot = static_cast<int>(i);
  r->window = w;
  r->kind = Lookup::kFound;
  return true;
}

// A reader's search of a key's windows: QuickHit, and when it does not
// accept a slot, ScanWindowsFully (same arguments; the full scan loads every
// word it looks at again). A miss thus costs the key words of both windows
// on top of the full scan.
template <typename V, typename WordAt0, typename WordAt1>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup ScanWindows(WordAt0&& word0, WordAt1&& word1, uint64_t key,
                                                       const Placement& p, int windows, uint64_t epoch,
                                                       bool check_epoch, bool verify, uint64_t* found) {
  Lookup r;
  if (QuickHit<V>(word0, word1, key, p, windows, epoch, check_epoch, verify, found, &r)) return r;
  return ScanWindowsFully<V>(word0, word1, key, p, windows, epoch, check_epoch, verify, found);
}

// ScanWindow over a private copy of a window's slots (kWindowWords words, as
// one RDMA READ delivered them).
template <typename V>
Lookup FindKey(const uint64_t* snap, uint64_t key, int side, size_t start, uint64_t epoch, bool verify,
               uint64_t* found) {
  using L = SlotLayout<V>;
  return ScanWindow<V>([snap](size_t slot, size_t w) { return snap[slot * L::kWords + w]; }, key, side, start,
                       epoch, verify, found);
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
