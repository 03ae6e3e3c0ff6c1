#ifndef STRUCTURES_SKIPLIST_SEARCH_H_
#define STRUCTURES_SKIPLIST_SEARCH_H_

// LeafSearch: finds the node that owns a key in one part, and reads it.
//
//   LeafSearch<V, Checks> search(&nodes, &cache);
//   LeafView<V> view; uint64_t idx;
//   RETURN_IF_ERROR(search.ReadLeaf(route, key, &view, &idx));  // view owns key
//
// Start: a remembered leaf (LeafCache) or a descent from the head. ReadLeaf
// then reads validated copies along level 0: past the copy's high fence it
// moves right; at a node that is dead or starts above the key (a stale start)
// it forgets that start and descends again; after a move right into a node
// that does not own the key yet it waits once for that node's lock (a split
// between its two writes holds it). The copy it returns owns the key.
//
// Contract: not thread-safe (one per client). Errors: the transport's, and
// DataLoss when a bounded node has no link or the links cycle. Costs: one
// validated read per node visited (NIC: 1 READ for a remembered leaf).
// docs/design.md §9.3.

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "structures/common/client.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/leaf_cache.h"
#include "structures/skiplist/node_access.h"
#include "util/status_macros.h"

namespace structures::skiplist_internal {

template <typename V, typename Checks>
class LeafSearch {
 public:
  LeafSearch(NodeAccess<V, Checks>* nodes, LeafCache* cache) : n_(*nodes), cache_(*cache) {}

  // Where a lookup of `key` in r's part starts: a remembered leaf, or a
  // descent.
  template <typename A>
  absl::Status Start(A& a, const Route& r, uint64_t key, uint64_t* x) {
    if (std::optional<uint64_t> hit = cache_.Start(r.home, key)) {
      ++n_.stats().cache_hits;
      *x = *hit;
      return absl::OkStatus();
    }
    return n_.Descend(a, r, key, 0, x, nullptr);
  }
  // Remembers where node idx is, from a validated copy of it.
  template <typename T>
  void Remember(const Route& r, uint64_t idx, const T& img) {
    // The part's head owns keys from the part's own low end on.
    const uint64_t low = idx == 0 ? RangeLow(n_.splits(), r.home) : img.low;
    cache_.Remember(r.home, low, idx, img.high, img.bounded());
  }
  // Drops the start of this lookup when it named idx, and the accessor's
  // cached images (they may lead to idx again).
  template <typename A>
  void ForgetStart(A& a, const Route& r, uint64_t idx) {
    cache_.ForgetStart(r.home, idx);
    a.Forget();
  }

  // The node owning `key` in r's part: a validated copy (an image, or a
  // lookup's view) and its index.
  template <typename T>
  absl::Status ReadLeaf(const Route& r, uint64_t key, T* img, uint64_t* idx) {
    return n_.WithNodes(r, [&](auto& a) { return ReadLeafWith(a, r, key, img, idx); });
  }

 private:
  template <typename A, typename T>
  absl::Status ReadLeafWith(A& a, const Route& r, uint64_t key, T* img, uint64_t* idx) {
    uint64_t x = 0;
    RETURN_IF_ERROR(Start(a, r, key, &x));
    // Whether x came from the link of a validated copy whose high is <= key
    // (a move right), and whether this reader has waited for x's lock since.
    bool moved_right = false, waited = false;
    for (uint64_t hops = 0; hops <= n_.nodes() + 1; ++hops) {
      RETURN_IF_ERROR(n_.ReadNodeWith(a, r, x, key, img));
      if (x != 0 && (!img->live() || key < img->low)) {
        if (moved_right && !waited) {
          // The copy we moved right from gave its upper range to x, yet x
          // does not own the key: a split may be between its two writes
          // (the left node's, then x's, both under x's lock). Wait for x's
          // lock once, then read x again.
          waited = true;
          ++n_.stats().split_waits;
          RETURN_IF_ERROR(n_.WaitForLock(a, r, x));
          continue;
        }
        // A stale start (a remembered location, or a link of an old copy).
        ForgetStart(a, r, x);
        moved_right = false;
        RETURN_IF_ERROR(n_.Descend(a, r, key, 0, &x, nullptr));
        continue;
      }
      if (img->bounded() && key >= img->high) {
        if constexpr (!Checks::kMoveRight) {  // mutant: "absent"
          img->ForgetEntries();
          *idx = x;
          return absl::OkStatus();
        }
        ++n_.stats().move_rights;
        x = img->Next0();
        if (x == 0 || !n_.InPool(x)) return n_.Corrupt(r, x, "is past a bounded node's end");
        moved_right = true;
        waited = false;
        continue;
      }
      Remember(r, x, *img);
      *idx = x;
      return absl::OkStatus();
    }
    return n_.Corrupt(r, x, "starts a cycle of links");
  }

  NodeAccess<V, Checks>& n_;
  LeafCache& cache_;
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_SEARCH_H_
