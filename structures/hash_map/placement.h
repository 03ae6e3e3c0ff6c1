#ifndef STRUCTURES_HASH_MAP_PLACEMENT_H_
#define STRUCTURES_HASH_MAP_PLACEMENT_H_

// Where a key lives (docs/design.md §9.2): its home node, its two candidate
// windows in a segment, the slot its scans start from, and the hash that
// picks its segment through the home node's directory. A fixed 64-bit mixer,
// so every process computes the same placement.
//
// Invariants: a key's two candidates are never equal; none of unit, side or
// start depends on the segment, so a split moves a key to the same unit,
// side and slot of the new segment.

#include <cstddef>
#include <cstdint>

#include "absl/base/attributes.h"
#include "rdma/remote_ptr.h"
#include "structures/common/checksum.h"
#include "structures/hash_map/layout.h"

namespace structures::hash_map_internal {

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

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_PLACEMENT_H_
