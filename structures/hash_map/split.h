#ifndef STRUCTURES_HASH_MAP_SPLIT_H_
#define STRUCTURES_HASH_MAP_SPLIT_H_

// The pure steps of splitting a hash map segment X into X and a fresh Y
// (extendible hashing; docs/design.md §9.2): which slots move, how both
// segments are restamped, and the directory that results. No I/O: the
// client reads X under every unit lock of X, calls these, and writes the
// results in the order policy.h's SplitWrites keeps.
//
//   ptrdiff_t bad = SplitSlots<V>(xs, ys, n_slots, epoch, depth, num_nodes, S);
//   SplitDirectory next = DirectoryAfterSplit(dir, key_dir_hash, depth, x, y);
//
// Invariants kept: a moved key lands in the same unit, side and slot of Y;
// every slot of X and Y carries the new epoch; Y's slots start at version 0
// and X's versions only grow.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "structures/hash_map/directory.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/placement.h"

namespace structures::hash_map_internal {

// Moves every occupied slot of X (`xs`: n_slots slots, read at epoch bits
// `epoch`) whose key's directory hash has bit `depth` set to the same slot of
// Y (`ys`: n_slots zeroed slots), empties it in X, and restamps every slot of
// both with epoch depth + 1 - base_depth (`new_epoch`), checksums updated.
// Returns the index of the first slot of X with a bad checksum or epoch (the
// caller reports DataLoss; the buffers are then garbage), or -1.
template <typename V>
ptrdiff_t SplitSlots(uint64_t* xs, uint64_t* ys, size_t n_slots, uint64_t epoch, int depth, int new_epoch,
                     int num_nodes, size_t segment_units) {
  using L = SlotLayout<V>;
  for (size_t i = 0; i < n_slots; ++i) {
    uint64_t* w = xs + i * L::kWords;
    uint64_t* t = ys + i * L::kWords;
    if (L::Checksum(w) != w[L::kChecksumWord] || (w[L::kStateWord] & kEpochMask) != epoch) {
      return static_cast<ptrdiff_t>(i);
    }
    const bool occupied = L::Occupied(w[L::kStateWord]);
    const bool move = occupied && ((Place(w[L::kKeyWord], num_nodes, segment_units).dir >> depth) & 1) != 0;
    if (move) {
      std::memcpy(t, w, L::kBytes);
      t[L::kStateWord] = L::Restamped(0, new_epoch, true);  // Y's slots are fresh: version 0
      const uint64_t emptied = L::Restamped(w[L::kStateWord], new_epoch, false);
      std::memset(w, 0, L::kBytes);
      w[L::kStateWord] = emptied;
    } else {
      t[L::kStateWord] = L::Restamped(0, new_epoch, false);
      w[L::kStateWord] = L::Restamped(w[L::kStateWord], new_epoch, occupied);
    }
    t[L::kChecksumWord] = L::Checksum(t);
    w[L::kChecksumWord] = L::Checksum(w);
  }
  return -1;
}

// The directory after a split, and the entries [first, last] a publish
// must write.
struct SplitDirectory {
  std::vector<uint64_t> entries;
  int depth = 0;
  size_t first = 0;
  size_t last = 0;
};

// `d` with segment X (local depth `depth`, reached by directory hash
// `dir_hash`) split into X and Y: doubled first when X's depth was the
// global depth, then X's entries divided by bit `depth`.
inline SplitDirectory DirectoryAfterSplit(const DirectoryCopy& d, uint64_t dir_hash, int depth, size_t x,
                                          size_t y) {
  SplitDirectory r;
  const size_t old_size = d.entries.size();
  r.depth = std::max(d.depth, depth + 1);
  r.entries = d.entries;
  r.entries.resize(size_t{1} << r.depth);
  for (size_t i = old_size; i < r.entries.size(); ++i) r.entries[i] = r.entries[i - old_size];
  const uint64_t mask = (uint64_t{1} << depth) - 1;
  const uint64_t pattern = dir_hash & mask;
  r.first = r.entries.size();
  for (size_t i = 0; i < r.entries.size(); ++i) {
    if ((i & mask) != pattern) continue;
    r.entries[i] = DirEntry(((i >> depth) & 1) != 0 ? y : x, depth + 1);
    r.first = std::min(r.first, i);
    r.last = i;
  }
  if (r.entries.size() > old_size) {
    r.first = std::min(r.first, old_size);
    r.last = r.entries.size() - 1;
  }
  return r;
}

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_SPLIT_H_
