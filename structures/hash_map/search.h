#ifndef STRUCTURES_HASH_MAP_SEARCH_H_
#define STRUCTURES_HASH_MAP_SEARCH_H_

// The search of a key's windows, written once over a word accessor
// `word(slot, index)`: CPU loads of the slots in place (native readers and
// writers) or a READ's private copy (NIC paths). Pure functions, no I/O.
//
// Contract for readers without the lock (the argument is docs/design.md
// §9.2): a found slot is accepted only if its checksum matches and its state
// word carries the reader's epoch; "absent" needs no checksum of empty slots
// but every other occupied slot must verify; any state word of another
// epoch ends the search with kStale (the directory was stale: refresh and
// retry). kTorn means read again.

#include <cstddef>
#include <cstdint>

#include "absl/base/attributes.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/placement.h"

namespace structures::hash_map_internal {

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

// The miss path's check of the other occupied slots of a window (bit i of
// `others`: slot i). Each is read again in full; it must match its checksum
// and not hold `key` (else kTorn), and, when `check_epoch`, carry epoch bits
// `epoch` (else kStale: a split restamped it under the reader). kAbsent when
// every slot passes. Out of line: hits never get here. docs/design.md §9.2
// says why absence needs exactly these checks.
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

// Searches one window for `key` in ScanSlot order, loading state words, and
// key words of occupied slots. The found slot's words are copied into
// `found` (kWords, slot order) and, when `verify`, its checksum is checked;
// on a miss with `verify`, OthersValid checks the other occupied slots.
// Empty slots are never checked. A state word without epoch bits `epoch`
// ends the scan with kStale. `verify` is false only for writers under the
// lock and a test-only mutant.
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
// epoch somewhere and retries (docs/design.md §9.2.4).
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
// reason a full scan's hit is (docs/design.md §9.2.3): that argument uses
// no order among the loads and no slot but the found one. A hit costs one
// load and compare per slot passed, instead of a full scan's state checks
// and bookkeeping.
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

#endif  // STRUCTURES_HASH_MAP_SEARCH_H_
