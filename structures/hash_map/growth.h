#ifndef STRUCTURES_HASH_MAP_GROWTH_H_
#define STRUCTURES_HASH_MAP_GROWTH_H_

// How a hash map client splits a full segment: BasicHashMapClient's growth
// members, defined apart from the operations (included by client.h). The
// pure steps are split.h's; the argument is docs/design.md §9.2.4.

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rdma/remote_ptr.h"
#include "structures/hash_map/client.h"
#include "structures/hash_map/directory.h"
#include "structures/hash_map/split.h"
#include "util/status_macros.h"

namespace structures::hash_map_internal {

// Splits the segment `op` found full (Op::segment at Op::depth) into it and
// a new segment from the pool, unless someone split it meanwhile. Under
// the directory lock (splits of a node are serialized; writers never take
// it, so the lock order directory -> units cannot deadlock with them), and
// then every unit lock of the segment, in unit order (the same order as
// writers'). Then, in this order, each step complete before the next
// starts (rdma_path.h: each is waited; natively program order with release
// stores):
//   1. the new segment Y gets, in the same unit/side/slot, every key of X
//      whose directory hash has bit `depth` set, and every slot of Y the
//      new epoch (Y is unreachable: no directory entry names it yet);
//   2. X's slots are rewritten with the new epoch, the moved ones empty;
//   3. the directory is published (seqlock; doubled first when X's depth
//      was the global depth).
// A reader with the old directory sees X at the old epoch (every key still
// there) or a newer epoch (stale: retry); one with the new directory finds
// Y complete. Between 2 and 3 readers of X retry until 3 lands; writers of
// X wait for its locks, then see the new epoch and retry.
template <typename V, typename Checks>
absl::Status BasicHashMapClient<V, Checks>::Split(uint64_t key, const Op& op) {
  ++growth_.splits;
  return WithAccessor(op, [&](auto& units) {
    return c_.WithLock(op.route, DirLock(op), [&] { return SplitUnderDirLock(key, op, units); });
  });
}

template <typename V, typename Checks>
template <typename Units>
absl::Status BasicHashMapClient<V, Checks>::SplitUnderDirLock(uint64_t key, const Op& op, Units& units) {
  constexpr bool kNic = std::is_same_v<Units, RemoteUnits<V>>;
  DirectoryCopy d;
  RETURN_IF_ERROR(units.ReadDirectory(&d));
  if (d.Lookup(op.p.dir) != DirEntry(op.segment, op.depth)) {  // split by someone else meanwhile
    if constexpr (kNic) dirs_[op.route.home] = std::move(d);
    return absl::OkStatus();
  }
  const int depth = op.depth;
  if (depth + 1 > g_.max_depth || depth + 1 - g_.base_depth > kMaxEpoch) {
    return Full(key, op, absl::StrCat("its segment is at the directory's deepest level (", depth, ")"));
  }
  if (d.segments >= g_.max_segments) {
    return Full(key, op, absl::StrCat("the part's pool of ", g_.max_segments,
                                      " segments is used up (raise max_groups_per_node)"));
  }
  const size_t x = op.segment;
  const size_t y = d.segments;
  std::vector<rdma::RemotePtr> held;
  absl::Status st = absl::OkStatus();
  for (size_t u = 0; u < g_.segment_units && st.ok(); ++u) {
    const rdma::RemotePtr lock = UnitLock(op, x * g_.segment_units + u);
    st = c_.lock().Lock(lock, op.route.path);
    if (st.ok()) held.push_back(lock);
  }
  if (st.ok()) st = MoveHalf(units, op, d, x, y);
  for (auto it = held.rbegin(); it != held.rend(); ++it) {
    absl::Status u = c_.lock().Unlock(*it);
    if (st.ok()) st = u;
  }
  if (st.ok()) {
    if constexpr (kNic) dirs_[op.route.home] = std::move(d);
  }
  return st;
}

// Steps 1-3 of Split, with every unit lock of X held; `d` is the directory
// as read under the directory lock, updated to what was published.
template <typename V, typename Checks>
template <typename Units>
absl::Status BasicHashMapClient<V, Checks>::MoveHalf(Units& units, const Op& op, DirectoryCopy& d, size_t x,
                                                     size_t y) {
  const size_t n_slots = g_.segment_units * kSlotsPerUnit;
  std::vector<uint64_t> xs(n_slots * L::kWords), ys(n_slots * L::kWords, 0);
  RETURN_IF_ERROR(units.ReadSegmentSlots(x, xs.data()));
  const int new_epoch = op.depth + 1 - g_.base_depth;
  const ptrdiff_t bad =
      SplitSlots<V>(xs.data(), ys.data(), n_slots, op.epoch, op.depth, new_epoch, c_.num_nodes(), g_.segment_units);
  if (bad >= 0) {
    return c_.Corrupt(absl::StrCat("segment ", x, " on node ", op.route.home, " has a slot (", bad,
                                   ") with a bad checksum or epoch"));
  }
  SplitDirectory e = DirectoryAfterSplit(d, op.p.dir, op.depth, x, y);
  RETURN_IF_ERROR(Checks::template SplitWrites<L>(units, x, y, xs.data(), ys.data(), n_slots, new_epoch, [&] {
    return units.PublishDirectory(d.version, e.first, e.entries.data() + e.first, e.last + 1 - e.first, e.depth,
                                  d.segments + 1);
  }));
  d.version = NextVersion(NextVersion(d.version));
  d.depth = e.depth;
  d.segments += 1;
  d.entries = std::move(e.entries);
  return absl::OkStatus();
}

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_GROWTH_H_
