#ifndef STRUCTURES_SKIPLIST_LEAF_CACHE_H_
#define STRUCTURES_SKIPLIST_LEAF_CACHE_H_

// LeafCache: where one client last saw the leaves of each part, as
// low -> (node index, high fence then). A lookup of a key below a remembered
// high starts at that node instead of descending from the head, on every
// path (natively it saves the descent's cache misses, one per node looked
// at; over the NIC its READs).
//
//   LeafCache cache(num_nodes, 4096);
//   if (std::optional<uint64_t> x = cache.Start(home, key)) ... else descend;
//   cache.Remember(home, low, idx, high, bounded);  // after a validated read
//   cache.ForgetStart(home, idx);  // idx was dead or moved: drop that entry
//
// Contract: not thread-safe (one per client). Entries are hints, never
// trusted: a stale one (the node split, or was reclaimed and reused) only
// means moving right or descending again, since every reader checks on a
// validated copy that the node is live and owns the key (layout.h invariant
// 2, docs/design.md §9.3). At most `capacity` entries: when full, only
// already-known lows are updated. Costs: O(log n) per call.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/btree_map.h"
#include "rdma/node.h"

namespace structures::skiplist_internal {

class LeafCache {
 public:
  LeafCache(int num_parts, size_t capacity) : capacity_(capacity), parts_(static_cast<size_t>(num_parts)) {}

  // The remembered node that owns `key` as last seen in `home`'s part, if
  // any; it becomes this lookup's start (for ForgetStart).
  std::optional<uint64_t> Start(rdma::NodeId home, uint64_t key) {
    const auto& m = parts_[home];
    auto it = m.upper_bound(key);
    if (it != m.begin() && (--it, !it->second.bounded || key < it->second.high)) {
      started_at_ = it->first;
      return it->second.idx;
    }
    started_at_.reset();
    return std::nullopt;
  }
  // Records that node idx owned [low, high) (to the part's end when not
  // bounded) in `home`'s part.
  void Remember(rdma::NodeId home, uint64_t low, uint64_t idx, uint64_t high, bool bounded) {
    auto& m = parts_[home];
    if (size() >= capacity_ && m.find(low) == m.end()) return;
    m[low] = {idx, high, bounded};
  }
  // Drops the entry this lookup started from, when it named idx (found dead
  // or not owning the key: it was reclaimed, maybe reused).
  void ForgetStart(rdma::NodeId home, uint64_t idx) {
    if (!started_at_.has_value()) return;
    auto& m = parts_[home];
    auto it = m.find(*started_at_);
    if (it != m.end() && it->second.idx == idx) m.erase(it);
    started_at_.reset();
  }
  // Appends to *out, until it holds `limit` indices, the remembered nodes of
  // `home`'s part with lows above `low`, in key order (node 0 and indices
  // not below `pool` skipped).
  void AppendAfter(rdma::NodeId home, uint64_t low, size_t limit, uint64_t pool, std::vector<uint64_t>* out) const {
    const auto& m = parts_[home];
    for (auto it = m.upper_bound(low); it != m.end() && out->size() < limit; ++it) {
      if (it->second.idx < pool && it->second.idx != 0) out->push_back(it->second.idx);
    }
  }

  size_t size() const {
    size_t n = 0;
    for (const auto& m : parts_) n += m.size();
    return n;
  }
  void Clear() {
    for (auto& m : parts_) m.clear();
  }

 private:
  struct Entry {
    uint64_t idx;
    uint64_t high;
    bool bounded;
  };

  size_t capacity_;
  std::vector<absl::btree_map<uint64_t, Entry>> parts_;  // per node: leaf low -> where
  std::optional<uint64_t> started_at_;                  // the entry Start used, if any
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_LEAF_CACHE_H_
