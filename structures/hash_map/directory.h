#ifndef STRUCTURES_HASH_MAP_DIRECTORY_H_
#define STRUCTURES_HASH_MAP_DIRECTORY_H_

// A hash map part's segments and directory (extendible hashing;
// docs/design.md §9.2): the geometry fixed at creation, the directory's
// words in registered memory, and a client's copy of them.
//
// The units of a part form segments of S units; the part holds a pool of
// max_segments segments (reserved at creation), the first `segments` in use,
// followed by the directory:
//
//   pool_bytes + 0     locks::ALockWord  the directory lock (splitters)
//   pool_bytes + 64    version           seqlock, lowest byte: odd while changing
//   pool_bytes + 72    depth             global depth D
//   pool_bytes + 80    segments          segments in use
//   pool_bytes + 128   entry[2^max_depth]  (segment << 8) | local depth
//
// A key's segment is entry[dir_hash mod 2^D]. Every directory word but the
// lock is a PlainWord: the directory-lock holder stores, anyone loads.
// Invariant: a segment's local depth d never exceeds D, and every state word
// of a segment carries epoch d - D0 (D0 = the initial depth), which is how a
// reader with a stale directory notices.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/rmw_word.h"
#include "structures/hash_map/layout.h"

namespace structures::hash_map_internal {

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
    // before a first full window (docs/design.md §9.2.6).
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

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_DIRECTORY_H_
