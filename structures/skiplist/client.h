#ifndef STRUCTURES_SKIPLIST_CLIENT_H_
#define STRUCTURES_SKIPLIST_CLIENT_H_

// BasicSkipListClient: one thread's handle on a SkipList (skiplist.h has the
// contract: paths, concurrency, costs, errors); users name it
// SkipList<V>::Client. It owns the pieces and runs the point operations:
//
//   node_access.h    NodeAccess     accessor per path, validated reads,
//                                   LockNode/Commit/PublishAndRelease, Descend
//   leaf_cache.h     LeafCache      low -> node of leaves seen
//   search.h         LeafSearch     the node owning a key (move right,
//                                   descend again)
//   ordered_reads.h  OrderedReads   LowerBound, Scan
//   allocator.h      NodeAllocator  a part's node pool
//   split.h          Splitter       split a full node, link its tower
//   reclaim.h        Reclaimer      unlink and free an emptied node
//
// Writers (Put, Insert, Erase) lock the node owning the key, check under the
// lock that it still does (else move right or descend again), change the
// image and publish it; after the unlock a split's tower is linked, or an
// emptied node reclaimed. docs/design.md §9.3.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rdma/path.h"
#include "structures/common/client.h"
#include "structures/common/held_locks.h"
#include "structures/skiplist/allocator.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/leaf_cache.h"
#include "structures/skiplist/node_access.h"
#include "structures/skiplist/ordered_reads.h"
#include "structures/skiplist/reclaim.h"
#include "structures/skiplist/search.h"
#include "structures/skiplist/split.h"
#include "util/status_macros.h"

namespace structures::skiplist_internal {

// Not thread-safe; use one per thread (each with the thread's own Session).
// Made by SkipList::NewClient.
template <typename V, typename Checks>
class BasicSkipListClient {
  using I = NodeImage<V>;
  using W = Words<V>;

 public:
  // `splits`: node i owns keys [splits[i-1], splits[i]) (the first from 0,
  // the last to 2^64 - 1). `part_bytes`: every part's size (its node pool).
  // `cache_entries`: the most leaf locations the client remembers.
  BasicSkipListClient(StructureClient common, std::vector<uint64_t> splits, uint64_t part_bytes,
                      size_t cache_entries)
      : nodes_(std::move(common), std::move(splits), part_bytes),
        cache_(nodes_.common().num_nodes(), cache_entries),
        search_(&nodes_, &cache_),
        reads_(&nodes_, &search_, &cache_),
        alloc_(&nodes_),
        splitter_(&nodes_, &alloc_,
                  0x5eed0000u + nodes_.common().node().id() * 7919u + reinterpret_cast<uintptr_t>(this)),
        reclaimer_(&nodes_, &alloc_) {}
  BasicSkipListClient(const BasicSkipListClient&) = delete;
  BasicSkipListClient& operator=(const BasicSkipListClient&) = delete;

  // The value bound to `key`, or nullopt.
  absl::StatusOr<std::optional<V>> Get(uint64_t key, Path path = Path::kAuto) {
    RETURN_IF_ERROR(Lookup(key, path));
    if (view_.found < 0) return std::optional<V>();
    return std::optional<V>(I::DecodeValue(view_.value));
  }
  absl::StatusOr<bool> Contains(uint64_t key, Path path = Path::kAuto) {
    RETURN_IF_ERROR(Lookup(key, path));
    return view_.found >= 0;
  }
  // Binds key to value; the previous value, or nullopt when it was absent.
  absl::StatusOr<std::optional<V>> Put(uint64_t key, const V& value, Path path = Path::kAuto) {
    Outcome out;
    RETURN_IF_ERROR(Write(key, path, Op::kPut, &value, &out));
    return out.prev;
  }
  // Binds key to value only if absent. True if inserted.
  absl::StatusOr<bool> Insert(uint64_t key, const V& value, Path path = Path::kAuto) {
    Outcome out;
    RETURN_IF_ERROR(Write(key, path, Op::kInsert, &value, &out));
    return out.inserted;
  }
  // Unbinds key; the previous value, or nullopt when it was absent.
  absl::StatusOr<std::optional<V>> Erase(uint64_t key, Path path = Path::kAuto) {
    Outcome out;
    RETURN_IF_ERROR(Write(key, path, Op::kErase, nullptr, &out));
    return out.prev;
  }

  // The smallest key >= `key` with its value, or nullopt when there is none
  // (in any node's part from key's home on). Linearizable.
  absl::StatusOr<std::optional<std::pair<uint64_t, V>>> LowerBound(uint64_t key, Path path = Path::kAuto) {
    return reads_.LowerBound(key, path);
  }
  // Up to `limit` pairs with keys >= `from`, ascending. Weakly consistent (as
  // a ConcurrentSkipListMap iterator). InvalidArgument when limit is 0.
  absl::StatusOr<std::vector<std::pair<uint64_t, V>>> Scan(uint64_t from, size_t limit, Path path = Path::kAuto) {
    return reads_.Scan(from, limit, path);
  }

  rdma::NodeId HomeOf(uint64_t key) const { return nodes_.HomeOf(key); }
  const SkipListStats& stats() const { return nodes_.stats(); }
  const ReadStats& read_stats() const { return nodes_.common().stats(); }
  // Leaf locations the client remembers (16 bytes each: key and node index;
  // the map's own overhead aside).
  size_t cache_size() const { return cache_.size(); }
  void ClearCache() { cache_.Clear(); }

 private:
  enum class Op { kPut, kInsert, kErase };
  // What a write found and did.
  struct Outcome {
    std::optional<V> prev;  // the value bound before (Put, Erase)
    bool inserted = false;  // Insert: the key was absent
    SplitNode split;        // the node a split made, for LinkTower
    uint64_t emptied = 0;   // a node the erase emptied (not the head), for Reclaim
    uint64_t emptied_low = 0;
  };
  // Where a locked look at a node sends the writer next.
  enum class Next { kDone, kRight, kAgain };

  // A point lookup's view of the node that owns `key`, into view_.
  absl::Status Lookup(uint64_t key, Path path) {
    Route r;
    RETURN_IF_ERROR(nodes_.RouteKey(key, path, &r));
    uint64_t x;
    return search_.ReadLeaf(r, key, &view_, &x);
  }

  // Locks the node owning `key` (moving right, or descending again, as the
  // locked image says) and applies `op` there; then links a split's tower or
  // reclaims an emptied node.
  absl::Status Write(uint64_t key, Path path, Op op, const V* value, Outcome* out) {
    Route r;
    RETURN_IF_ERROR(nodes_.RouteKey(key, path, &r));
    RETURN_IF_ERROR(nodes_.WithNodes(r, [&](auto& a) { return WriteWith(a, r, key, op, value, out); }));
    if (out->split.height > 1) return splitter_.LinkTower(r, out->split);
    if (out->emptied != 0) return reclaimer_.Reclaim(r, out->emptied, out->emptied_low);
    return absl::OkStatus();
  }
  template <typename A>
  absl::Status WriteWith(A& a, const Route& r, uint64_t key, Op op, const V* value, Outcome* out) {
    uint64_t x = 0;
    RETURN_IF_ERROR(search_.Start(a, r, key, &x));
    for (uint64_t hops = 0; hops <= nodes_.nodes() + 1; ++hops) {
      Next next = Next::kDone;
      HeldLocks held(nodes_.common().lock(), r);
      absl::Status s = nodes_.LockNode(a, held, r, x, &leaf_);
      if (s.ok()) s = Apply(a, r, x, key, op, value, out, &next);
      RETURN_IF_ERROR(nodes_.PublishAndRelease(a, held, r, x, std::move(s)));
      if (next == Next::kDone) return absl::OkStatus();
      if (next == Next::kRight) {
        ++nodes_.stats().move_rights;
        x = leaf_.next[0];
        if (x == 0 || !nodes_.InPool(x)) return nodes_.Corrupt(r, x, "is past a bounded node's end");
      } else {
        search_.ForgetStart(a, r, x);
        RETURN_IF_ERROR(nodes_.Descend(a, r, key, 0, &x, nullptr));
      }
    }
    return nodes_.Corrupt(r, x, "starts a cycle of links");
  }

  // Under node x's lock, its image in leaf_: applies `op` if x owns the key
  // (splitting a full node), else says where to go (*next).
  template <typename A>
  absl::Status Apply(A& a, const Route& r, uint64_t x, uint64_t key, Op op, const V* value, Outcome* out,
                     Next* next) {
    if (x != 0 && (!leaf_.live() || key < leaf_.low)) {
      *next = Next::kAgain;
      return absl::OkStatus();
    }
    if (leaf_.bounded() && key >= leaf_.high) {
      *next = Next::kRight;
      return absl::OkStatus();
    }
    search_.Remember(r, x, leaf_);
    const int i = leaf_.Find(key);
    if (op != Op::kInsert && i >= 0) out->prev = I::DecodeValue(leaf_.values[i]);
    out->inserted = i < 0;
    Ranges rg;
    if (op == Op::kErase) {
      if (i < 0) return absl::OkStatus();  // nothing to change
      leaf_.SetBitmap(leaf_.bitmap() & ~(uint32_t{1} << i));
      rg.Add(W::kMeta, W::kMeta + 1);
      if (x != 0 && leaf_.bitmap() == 0) {
        out->emptied = x;
        out->emptied_low = leaf_.low;
      }
    } else if (i >= 0) {
      if (op == Op::kInsert) return absl::OkStatus();  // present: nothing to change
      I::EncodeValue(*value, leaf_.values[i]);
      rg.Add(W::Value(i), W::Value(i) + W::kValueWords);
    } else {
      const int j = leaf_.FreeEntry();
      if (j < 0) return splitter_.Split(a, r, x, &leaf_, key, *value, &out->split);
      leaf_.keys[j] = key;
      I::EncodeValue(*value, leaf_.values[j]);
      leaf_.SetBitmap(leaf_.bitmap() | (uint32_t{1} << j));
      rg.Add(W::kMeta, W::kMeta + 1).Add(W::Key(j), W::Key(j) + 1).Add(W::Value(j), W::Value(j) + W::kValueWords);
    }
    nodes_.Commit(a, x, leaf_, rg);
    return absl::OkStatus();
  }

  // Declared in the order they are built: each takes the ones above it.
  NodeAccess<V, Checks> nodes_;
  LeafCache cache_;
  LeafSearch<V, Checks> search_;
  OrderedReads<V, Checks> reads_;
  NodeAllocator<V, Checks> alloc_;
  Splitter<V, Checks> splitter_;
  Reclaimer<V, Checks> reclaimer_;
  I leaf_{};       // the image a writer holds under the lock
  LeafView<V> view_{};  // a point lookup's view
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_CLIENT_H_
