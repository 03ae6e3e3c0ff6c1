#ifndef STRUCTURES_SKIPLIST_CLIENT_H_
#define STRUCTURES_SKIPLIST_CLIENT_H_

// One thread's handle on a SkipList (skiplist.h has the contract: paths,
// concurrency, costs, errors). The algorithm (descent, leaf read with
// move-right, locked write, split, tower linking, ordered reads) is written
// once, over a node accessor: NativeNodes (native_path.h: CPU loads and stores
// in place) or RemoteNodes (rdma_path.h: READs, and WRITEs chained before the
// unlock). Routing, the optimistic read loop and lock handling are the shared
// StructureClient's.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/common/client.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/native_path.h"
#include "structures/skiplist/policy.h"
#include "structures/skiplist/rdma_path.h"
#include "util/status_macros.h"

namespace structures {

// Per-client counters (plain; read by the client's thread or after it stops).
struct SkipListStats {
  uint64_t cache_hits = 0;     // NIC-path lookups that started at a cached node
  uint64_t descents = 0;       // lookups that descended from a part's head
  uint64_t move_rights = 0;    // leaf hops past a high fence (a split since the link was read)
  uint64_t split_waits = 0;    // waits for a right node's lock after a move right (a split between its writes)
  uint64_t splits = 0;         // nodes this client split
  uint64_t reclaimed = 0;      // emptied nodes this client unlinked and freed
  uint64_t lower_bound_retries = 0;
};

// Not thread-safe; use one per thread (each with the thread's own Session).
// Made by SkipList::NewClient.
template <typename V, typename Policy = SkipListPolicy>
class SkipListClient {
  using I = skiplist_internal::NodeImage<V>;
  using L = skiplist_internal::NodeLayout<V>;
  using W = skiplist_internal::Words<V>;
  using Ranges = skiplist_internal::Ranges;
  using View = skiplist_internal::LeafView<V>;
  static constexpr size_t kH = skiplist_internal::kMaxHeight;
  static constexpr size_t kF = skiplist_internal::kFanout;

 public:
  // `splits`: node i owns keys [splits[i-1], splits[i]) (the first from 0,
  // the last to 2^64 - 1). `part_bytes`: every part's size (its node pool).
  // `cache_entries`: the most leaf locations the client remembers.
  SkipListClient(StructureClient common, std::vector<uint64_t> splits, uint64_t part_bytes, size_t cache_entries)
      : c_(std::move(common)),
        splits_(std::move(splits)),
        part_bytes_(part_bytes),
        nodes_(L::NodesIn(part_bytes)),
        cache_entries_(cache_entries),
        cache_(static_cast<size_t>(c_.num_nodes())),
        rng_(0x5eed0000u + c_.node().id() * 7919u + reinterpret_cast<uintptr_t>(this)) {}
  SkipListClient(const SkipListClient&) = delete;
  SkipListClient& operator=(const SkipListClient&) = delete;

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
    std::optional<V> prev;
    RETURN_IF_ERROR(Write(key, path, [&](I& img, int i, bool* insert, bool* erase) {
      if (i >= 0) prev = I::DecodeValue(img.values[i]);
      *insert = true;
      *erase = false;
    }, &value));
    return prev;
  }
  // Binds key to value only if absent. True if inserted.
  absl::StatusOr<bool> Insert(uint64_t key, const V& value, Path path = Path::kAuto) {
    bool inserted = false;
    RETURN_IF_ERROR(Write(key, path, [&](I&, int i, bool* insert, bool* erase) {
      inserted = i < 0;
      *insert = i < 0;
      *erase = false;
    }, &value));
    return inserted;
  }
  // Unbinds key; the previous value, or nullopt when it was absent.
  absl::StatusOr<std::optional<V>> Erase(uint64_t key, Path path = Path::kAuto) {
    std::optional<V> prev;
    RETURN_IF_ERROR(Write(key, path, [&](I& img, int i, bool* insert, bool* erase) {
      if (i >= 0) prev = I::DecodeValue(img.values[i]);
      *insert = false;
      *erase = i >= 0;
    }, nullptr));
    return prev;
  }

  // The smallest key >= `key` with its value, or nullopt when there is none
  // (in any node's part from key's home on). Linearizable: when the answer
  // comes from a later node than key's own, the nodes passed over are read
  // again and must be unchanged.
  absl::StatusOr<std::optional<std::pair<uint64_t, V>>> LowerBound(uint64_t key, Path path = Path::kAuto) {
    for (int attempt = 0; attempt < kLowerBoundAttempts; ++attempt) {
      passed_.clear();
      std::optional<std::pair<uint64_t, V>> found;
      bool stable = true;
      RETURN_IF_ERROR(Walk(key, path, [&](const Route&, uint64_t, const I& img) {
        const int i = img.LowerBound(key);
        if (i < 0) return true;  // keep going
        found.emplace(img.keys[i], I::DecodeValue(img.values[i]));
        return false;
      }, /*record=*/true, [](const I&) { return size_t{1}; }));
      if (passed_.size() > 1) {
        // The last node read is the answer's (or the end); the ones before it
        // had nothing >= key and must still be as they were.
        for (size_t j = 0; j + 1 < passed_.size() && stable; ++j) {
          I again;
          RETURN_IF_ERROR(ReadNode(passed_[j].route, passed_[j].idx, &again));
          stable = again.version == passed_[j].version;
        }
      }
      if (stable) return found;
      ++stats_.lower_bound_retries;
    }
    return absl::AbortedError(absl::StrCat("SkipList LowerBound(", key, "): the nodes it passed over changed in ",
                                           kLowerBoundAttempts, " attempts in a row; try again"));
  }

  // Up to `limit` pairs with keys >= `from`, ascending. Weakly consistent (as
  // a ConcurrentSkipListMap iterator): each pair was bound at some instant
  // during the scan, keys strictly ascend, and a key bound throughout the
  // scan is not missed. InvalidArgument when limit is 0.
  absl::StatusOr<std::vector<std::pair<uint64_t, V>>> Scan(uint64_t from, size_t limit, Path path = Path::kAuto) {
    if (limit == 0) return absl::InvalidArgumentError("SkipList Scan: limit must be at least 1");
    std::vector<std::pair<uint64_t, V>> out;
    uint64_t cursor = from;
    RETURN_IF_ERROR(Walk(from, path, [&](const Route&, uint64_t, const I& img) {
      std::array<int, kF> order;
      size_t n = 0;
      for (size_t i = 0; i < kF; ++i) {
        if (img.Occupied(i) && img.keys[i] >= cursor) order[n++] = static_cast<int>(i);
      }
      std::sort(order.begin(), order.begin() + n,
                [&img](int a, int b) { return img.keys[a] < img.keys[b]; });
      for (size_t j = 0; j < n && out.size() < limit; ++j) {
        out.emplace_back(img.keys[order[j]], I::DecodeValue(img.values[order[j]]));
      }
      if (out.size() >= limit) return false;
      if (n > 0) {
        if (out.back().first == UINT64_MAX) return false;
        cursor = out.back().first + 1;
      }
      return true;
    }, /*record=*/false, [&](const I& last) {
      // The nodes the rest of the scan needs if they hold as many keys as
      // the last one did.
      const size_t per = std::max<size_t>(1, static_cast<size_t>(__builtin_popcount(last.bitmap())));
      return (limit - out.size() + per - 1) / per;
    }));
    return out;
  }

  rdma::NodeId HomeOf(uint64_t key) const { return skiplist_internal::HomeOf(splits_, key); }
  const SkipListStats& stats() const { return stats_; }
  const ReadStats& read_stats() const { return c_.stats(); }
  // Leaf locations the NIC path remembers, and the bytes they take (16 per
  // entry: key and node index; the map's own overhead aside).
  size_t cache_size() const {
    size_t n = 0;
    for (const auto& m : cache_) n += m.size();
    return n;
  }
  void ClearCache() {
    for (auto& m : cache_) m.clear();
  }

 private:
  static constexpr int kLowerBoundAttempts = 1000;
  static constexpr size_t kMaxAhead = 8;  // READs a scan chains in one doorbell

  absl::Status RouteKey(uint64_t key, Path path, Route* r) const { return c_.RouteTo(HomeOf(key), path, r); }
  // A point lookup's view of the node that owns `key`, into view_.
  absl::Status Lookup(uint64_t key, Path path) {
    Route r;
    RETURN_IF_ERROR(RouteKey(key, path, &r));
    uint64_t x;
    return ReadLeaf(r, key, &view_, &x);
  }

  rdma::RemotePtr NodePtr(const Route& r, uint64_t idx) const { return r.base + L::NodeOffset(idx); }
  rdma::RemotePtr AllocLock(const Route& r) const { return r.base + offsetof(skiplist_internal::PartHeader, alloc_lock); }

  // Runs f(accessor) with the accessor of r's path.
  template <typename F>
  absl::Status WithNodes(const Route& r, F&& f) {
    if (r.native()) {
      skiplist_internal::NativeNodes<V> a(reinterpret_cast<char*>(r.base.template local<char>()));
      return f(a);
    }
    skiplist_internal::RemoteNodes<V> a(*c_.session(), r.base, descent_cache_.data());
    return f(a);
  }

  absl::Status Corrupt(const Route& r, uint64_t idx, absl::string_view what) const {
    return absl::DataLossError(absl::StrCat("SkipList: node ", idx, " of node ", r.home, "'s part ", what));
  }
  bool InPool(uint64_t idx) const { return idx < nodes_; }

  // One word of node idx for the descent: natively a load in place; on the
  // NIC path from a validated image of the node (read once per descent step,
  // with ReadValidated's fallback to a read under the node's lock when
  // writers keep tearing the READs).
  template <typename A>
  absl::Status LoadWord(A& a, const Route& r, uint64_t idx, size_t word, uint64_t* out) {
    if constexpr (A::kCopiesImages) {
      if (const I* img = a.Cached(idx)) {
        *out = img->words()[word];
        return absl::OkStatus();
      }
      I* slot = a.NextSlot();
      RETURN_IF_ERROR(ReadNodeWith(a, r, idx, 0, slot));
      a.MarkCached(idx);
      *out = slot->words()[word];
      return absl::OkStatus();
    } else {
      return a.Load(idx, word, out);
    }
  }

  // Descends from the part's head to the node with the largest low <= key
  // reachable at `stop_level`, recording each level's last node in preds.
  template <typename A>
  absl::Status Descend(A& a, const Route& r, uint64_t key, size_t stop_level, uint64_t* x_out, uint64_t* preds) {
    ++stats_.descents;
    uint64_t x = 0;
    for (size_t level = kH; level-- > stop_level;) {
      for (uint64_t steps = 0; steps <= nodes_; ++steps) {
        uint64_t n = 0, meta = 0, low = 0;
        RETURN_IF_ERROR(LoadWord(a, r, x, W::kNext + level, &n));
        if (n == 0 || !InPool(n)) break;  // (a link seen half written is a hint gone bad: stop here)
        RETURN_IF_ERROR(LoadWord(a, r, n, W::kMeta, &meta));
        if ((meta & skiplist_internal::kLive) == 0) break;
        RETURN_IF_ERROR(LoadWord(a, r, n, W::kLow, &low));
        if (low > key) break;
        x = n;
      }
      if (preds != nullptr) preds[level] = x;
    }
    *x_out = x;
    return absl::OkStatus();
  }

  // Where a lookup of `key` starts: a remembered leaf, or a descent. (On
  // every path: natively it saves the descent's cache misses, one per node
  // looked at, which is what a skiplist pays over a balanced tree.)
  template <typename A>
  absl::Status Start(A& a, const Route& r, uint64_t key, uint64_t* x) {
    const auto& m = cache_[r.home];
    auto it = m.upper_bound(key);
    if (it != m.begin() && (--it, !it->second.bounded || key < it->second.high)) {
      ++stats_.cache_hits;
      *x = it->second.idx;
      started_at_ = it->first;
      return absl::OkStatus();
    }
    started_at_.reset();
    return Descend(a, r, key, 0, x, nullptr);
  }
  template <typename T>
  void Remember(const Route& r, uint64_t idx, const T& img) {
    auto& m = cache_[r.home];
    // The part's head owns keys from the part's own low end on.
    const uint64_t low = idx == 0 ? skiplist_internal::RangeLow(splits_, r.home) : img.low;
    if (cache_size() >= cache_entries_ && m.find(low) == m.end()) return;
    m[low] = {idx, img.high, img.bounded()};
  }
  // Drops the remembered location this lookup started from, when it named
  // idx (found dead or moved: it was reclaimed, maybe reused).
  void Forget(const Route& r, uint64_t idx) {
    if (!started_at_.has_value()) return;
    auto& m = cache_[r.home];
    auto it = m.find(*started_at_);
    if (it != m.end() && it->second.idx == idx) m.erase(it);
    started_at_.reset();
  }


  // One copy of node idx: its image, or a lookup's view of it (for `key`).
  template <typename A>
  absl::Status CopyOnce(A& a, uint64_t idx, uint64_t, I* out, bool* valid) {
    return a.template Snapshot<Policy::kValidateReads>(idx, out, valid);
  }
  template <typename A>
  absl::Status CopyOnce(A& a, uint64_t idx, uint64_t key, View* out, bool* valid) {
    return a.template View<Policy::kValidateReads>(idx, key, out, valid);
  }
  // A validated copy of node idx (optimistic, then under its lock).
  template <typename A, typename T>
  absl::Status ReadNodeWith(A& a, const Route& r, uint64_t idx, uint64_t key, T* out) {
    return c_.ReadValidated(
        r, NodePtr(r, idx), [&](bool* valid) { return CopyOnce(a, idx, key, out, valid); },
        [&] { return absl::StrCat("SkipList: node ", idx, " of node ", r.home, "'s part fails validation"); });
  }
  absl::Status ReadNode(const Route& r, uint64_t idx, I* img) {
    return WithNodes(r, [&](auto& a) { return ReadNodeWith(a, r, idx, 0, img); });
  }

  // The node owning `key`: a validated copy (an image, or a lookup's view)
  // and its index.
  template <typename T>
  absl::Status ReadLeaf(const Route& r, uint64_t key, T* img, uint64_t* idx) {
    return WithNodes(r, [&](auto& a) -> absl::Status {
      uint64_t x = 0;
      RETURN_IF_ERROR(Start(a, r, key, &x));
      // x came from the link of a validated copy whose high is <= key (a move
      // right), and whether this reader has waited for x's lock since.
      bool moved_right = false, waited = false;
      for (uint64_t hops = 0; hops <= nodes_ + 1; ++hops) {
        RETURN_IF_ERROR(ReadNodeWith(a, r, x, key, img));
        if (x != 0 && (!img->live() || key < img->low)) {
          if (moved_right && !waited) {
            // The copy we moved right from gave its upper range to x, yet x
            // does not own the key: a split may be between its two writes
            // (Split: the left node's, then x's, both under x's lock). Wait
            // for x's lock once, then read x again.
            waited = true;
            ++stats_.split_waits;
            I unused;
            RETURN_IF_ERROR(Locked(a, r, x, &unused, [] { return absl::OkStatus(); }));
            continue;
          }
          // A stale start (a cached location, or a link of an old copy):
          // forget it, and the accessor's cached images with it (they may
          // lead here again), and descend from the head.
          Forget(r, x);
          a.Forget();
          moved_right = false;
          RETURN_IF_ERROR(Descend(a, r, key, 0, &x, nullptr));
          continue;
        }
        if (img->bounded() && key >= img->high) {
          if constexpr (!Policy::kMoveRight) {  // test-only mutant: "absent"
            img->ForgetEntries();
            *idx = x;
            return absl::OkStatus();
          }
          ++stats_.move_rights;
          x = img->Next0();
          if (x == 0 || !InPool(x)) return Corrupt(r, x, "is past a bounded node's end");
          moved_right = true;
          waited = false;
          continue;
        }
        Remember(r, x, *img);
        *idx = x;
        return absl::OkStatus();
      }
      return Corrupt(r, x, "starts a cycle of links");
    });
  }

  // Ordered walk from `key`'s node: visit(route, idx, image) on each node in
  // key order, through the next parts, until it returns false or the last
  // part ends. With `record`, remembers (route, idx, version) of each node.
  // ahead(image just visited) says how many nodes the walk expects to need
  // next: on the NIC paths that many are READ in one doorbell (NextNode).
  template <typename Visit, typename Ahead>
  absl::Status Walk(uint64_t key, Path path, Visit&& visit, bool record, Ahead&& ahead) {
    const rdma::NodeId first = HomeOf(key);
    for (rdma::NodeId h = first; h < static_cast<rdma::NodeId>(c_.num_nodes()); ++h) {
      Route r;
      // Past key's own part, keep to the spirit of `path`: a NIC path stays
      // on the NIC (loopback for this node's part), native becomes auto.
      Path p = path;
      if (h != first) {
        p = h != c_.node().id() ? Path::kAuto
            : (path == Path::kLoopback || path == Path::kRemote) ? Path::kLoopback
                                                                 : Path::kAuto;
      }
      RETURN_IF_ERROR(c_.RouteTo(h, p, &r));
      const uint64_t from = h == first ? key : skiplist_internal::RangeLow(splits_, h);
      uint64_t x;
      RETURN_IF_ERROR(ReadLeaf(r, from, &walk_, &x));
      ahead_idx_.clear();
      ahead_pos_ = 0;
      for (uint64_t hops = 0; hops <= nodes_ + 1; ++hops) {
        if (record) passed_.push_back({r, x, walk_.version});
        if (!visit(r, x, walk_)) return absl::OkStatus();
        if (!walk_.bounded()) break;  // the part's last node
        const uint64_t low = walk_.high;
        x = walk_.next[0];
        if (x == 0 || !InPool(x)) return Corrupt(r, x, "is past a bounded node's end");
        const size_t want = ahead(walk_);
        RETURN_IF_ERROR(NextNode(r, x, low, want, &walk_));
        if (!walk_.live() || walk_.low != low) {
          // x was reclaimed (and maybe reused) since the link was read: go on
          // from the node that owns `low` now.
          RETURN_IF_ERROR(ReadLeaf(r, low, &walk_, &x));
        }
        Remember(r, x, walk_);
      }
    }
    return absl::OkStatus();
  }

  // A validated copy of node x, the next one of a walk (its low is `low`).
  // On the NIC paths, when the walk expects to need `ahead` > 1 more nodes,
  // x and the nodes the client remembers after it are READ in one doorbell
  // (same QP: the responder executes them in order, as separate reads would
  // be); later calls take those copies while they continue the chain (each
  // checksum-valid, live, with the low its predecessor's high and linked from
  // it), so a scan pays about one round trip per `ahead` nodes.
  absl::Status NextNode(const Route& r, uint64_t x, uint64_t low, size_t ahead, I* out) {
    // A copy read ahead continues the chain when it is whole, live and
    // starts where its predecessor ends.
    auto take = [&](const I& img) {
      if (!img.Valid() || !img.live() || img.low != low) return false;
      *out = img;
      return true;
    };
    if (ahead_pos_ < ahead_idx_.size() && ahead_idx_[ahead_pos_] == x && take(ahead_[ahead_pos_++])) {
      return absl::OkStatus();
    }
    ahead_idx_.clear();
    ahead_pos_ = 0;
    if (r.native() || ahead <= 1) return ReadNode(r, x, out);
    ahead_idx_.push_back(x);
    const auto& m = cache_[r.home];
    for (auto it = m.upper_bound(low); it != m.end() && ahead_idx_.size() < std::min<size_t>(ahead, kMaxAhead); ++it) {
      if (InPool(it->second.idx) && it->second.idx != 0) ahead_idx_.push_back(it->second.idx);
    }
    ahead_.resize(ahead_idx_.size());
    {
      rdma::Batch b(*c_.session(), r.home);
      for (size_t k = 0; k < ahead_idx_.size(); ++k) {
        b.Read(NodePtr(r, ahead_idx_[k]) + L::kImageOffset, &ahead_[k], sizeof(I));
      }
      RETURN_IF_ERROR(b.Execute());
    }
    ahead_pos_ = 1;
    if (take(ahead_[0])) return absl::OkStatus();
    return ReadNode(r, x, out);  // torn: the read loop with its lock fallback
  }

  // Publishes `img` (changed in the words of `rg`) as node idx's next
  // version. Caller holds idx's lock.
  template <typename A>
  void Commit(A& a, uint64_t idx, I& img, const Ranges& rg) {
    img.version += 2;
    img.checksum = img.Checksum();
    a.Store(idx, img, rg);
  }

  // Takes node idx's lock (the NIC path reads its image in the acquire's
  // round trip), runs step(image), posts its writes, unlocks.
  template <typename A, typename Step>
  absl::Status Locked(A& a, const Route& r, uint64_t idx, I* img, Step&& step) {
    const rdma::RemotePtr lock = NodePtr(r, idx);
    if (r.native() && !Policy::kNativeWritersLock) {  // test-only mutant: no lock
      RETURN_IF_ERROR(a.SnapshotLocked(idx, img));
      return step();
    }
    rdma::ChainedRead also[1] = {{lock + L::kImageOffset, img, sizeof(I)}};
    return c_.WithLockAndRead(r, lock, r.native() ? absl::Span<const rdma::ChainedRead>() : absl::MakeConstSpan(also),
                              [&](bool also_done) -> absl::Status {
                                if (!also_done) RETURN_IF_ERROR(a.SnapshotLocked(idx, img));
                                if (!img->Valid()) {
                                  return c_.Corrupt(absl::StrCat("node ", idx, " of node ", r.home,
                                                                 "'s part fails its checksum"));
                                }
                                RETURN_IF_ERROR(step());
                                if constexpr (!Policy::kWriteBeforeUnlock) {  // test-only mutant
                                  if (!r.native()) RETURN_IF_ERROR(c_.lock().Unlock(lock));
                                }
                                return a.Flush();
                              });
  }

  // The writers' frame: lock the node owning `key` (moving right, or
  // descending again, as the locked image says), let decide(image, entry
  // index or -1, &insert, &erase) choose, and apply: insert or overwrite
  // `value` (splitting a full node), or erase.
  template <typename Decide>
  absl::Status Write(uint64_t key, Path path, Decide&& decide, const V* value) {
    Route r;
    RETURN_IF_ERROR(RouteKey(key, path, &r));
    uint64_t split_node = 0, split_low = 0, reclaim_node = 0, reclaim_low = 0;
    size_t split_height = 0;
    RETURN_IF_ERROR(WithNodes(r, [&](auto& a) -> absl::Status {
      uint64_t x = 0;
      RETURN_IF_ERROR(Start(a, r, key, &x));
      for (uint64_t hops = 0; hops <= nodes_ + 1; ++hops) {
        enum { kDone, kRight, kAgain } next = kDone;
        RETURN_IF_ERROR(Locked(a, r, x, &leaf_, [&]() -> absl::Status {
          if (x != 0 && (!leaf_.live() || key < leaf_.low)) {
            next = kAgain;
            return absl::OkStatus();
          }
          if (leaf_.bounded() && key >= leaf_.high) {
            next = kRight;
            return absl::OkStatus();
          }
          Remember(r, x, leaf_);
          const int i = leaf_.Find(key);
          bool insert = false, erase = false;
          decide(leaf_, i, &insert, &erase);
          Ranges rg;
          if (erase) {
            leaf_.SetBitmap(leaf_.bitmap() & ~(uint32_t{1} << i));
            rg.Add(W::kMeta, W::kMeta + 1);
            if (x != 0 && leaf_.bitmap() == 0) {
              reclaim_node = x;
              reclaim_low = leaf_.low;
            }
          } else if (insert && i >= 0) {
            I::EncodeValue(*value, leaf_.values[i]);
            rg.Add(W::Value(i), W::Value(i) + W::kValueWords);
          } else if (insert) {
            const int j = leaf_.FreeEntry();
            if (j < 0) return Split(a, r, x, key, *value, &split_node, &split_low, &split_height);
            leaf_.keys[j] = key;
            I::EncodeValue(*value, leaf_.values[j]);
            leaf_.SetBitmap(leaf_.bitmap() | (uint32_t{1} << j));
            rg.Add(W::kMeta, W::kMeta + 1).Add(W::Key(j), W::Key(j) + 1).Add(W::Value(j), W::Value(j) + W::kValueWords);
          } else {
            return absl::OkStatus();  // nothing to change
          }
          Commit(a, x, leaf_, rg);
          return absl::OkStatus();
        }));
        if (next == kDone) return absl::OkStatus();
        if (next == kRight) {
          ++stats_.move_rights;
          x = leaf_.next[0];
          if (x == 0 || !InPool(x)) return Corrupt(r, x, "is past a bounded node's end");
        } else {
          Forget(r, x);
          a.Forget();  // cached images may lead to x again
          RETURN_IF_ERROR(Descend(a, r, key, 0, &x, nullptr));
        }
      }
      return Corrupt(r, x, "starts a cycle of links");
    }));
    if (split_height > 1) return LinkTower(r, split_node, split_low, split_height);
    if (reclaim_node != 0) return Reclaim(r, reclaim_node, reclaim_low);
    return absl::OkStatus();
  }

  // Takes a node from r's part pool, under the part's alloc lock: a freed
  // one (dead: nothing writes it but the allocator's lock holders) if there
  // is one, else a never-used one.
  template <typename A>
  absl::Status Allocate(A& a, const Route& r, uint64_t* idx) {
    constexpr uint64_t kNextFree = offsetof(skiplist_internal::PartHeader, next_free);
    constexpr uint64_t kFreeHead = offsetof(skiplist_internal::PartHeader, free_head);
    uint64_t hdr[2] = {0, 0};  // next_free, free_head
    rdma::ChainedRead also[1] = {{r.base + kNextFree, hdr, 16}};
    return c_.WithLockAndRead(
        r, AllocLock(r), r.native() ? absl::Span<const rdma::ChainedRead>() : absl::MakeConstSpan(also),
        [&](bool also_done) -> absl::Status {
          if (!also_done) {
            RETURN_IF_ERROR(a.LoadPartWord(kNextFree, &hdr[0]));
            RETURN_IF_ERROR(a.LoadPartWord(kFreeHead, &hdr[1]));
          }
          if (hdr[1] != 0) {
            const uint64_t n = hdr[1];
            if (!InPool(n)) return Corrupt(r, n, "heads the free list but is outside the pool");
            // Its link: a validated copy (no lock fallback: node locks come
            // before the alloc lock, and a dead node's words are stable here).
            I img;
            bool valid = false;
            for (int tries = 0; !valid; ++tries) {
              if (tries == StructureClient::kOptimisticReads) return Corrupt(r, n, "(free) fails validation");
              RETURN_IF_ERROR(a.template Snapshot<true>(n, &img, &valid));
            }
            if (img.live() && Policy::kMarkReclaimedDead) return Corrupt(r, n, "is on the free list but live");
            *idx = n;
            a.StorePartWord(kFreeHead, img.next[0]);
            return a.Flush();
          }
          if (hdr[0] + 1 >= nodes_) {
            return absl::ResourceExhaustedError(absl::StrCat(
                "SkipList: node ", r.home, "'s part is full: all ", nodes_, " nodes of ", L::kNodeBytes,
                " bytes (part_bytes = ", part_bytes_,
                ") are in use; raise SkipListOptions::part_bytes (and the arena size)"));
          }
          *idx = hdr[0] + 1;
          a.StorePartWord(kNextFree, hdr[0] + 1);
          return a.Flush();
        });
  }

  // Puts the dead node n (unlinked everywhere) on r's free list: under n's
  // lock (stale writers may take it; they find it dead and leave) and the
  // alloc lock, n.next[0] = free_head, free_head = n.
  template <typename A>
  absl::Status Free(A& a, const Route& r, uint64_t n) {
    constexpr uint64_t kFreeHead = offsetof(skiplist_internal::PartHeader, free_head);
    I img;
    return Locked(a, r, n, &img, [&]() -> absl::Status {
      if (img.live() && Policy::kMarkReclaimedDead) return Corrupt(r, n, "is being freed but live");
      uint64_t head = 0;
      return c_.WithLock(r, AllocLock(r), [&]() -> absl::Status {
        RETURN_IF_ERROR(a.LoadPartWord(kFreeHead, &head));
        img.next[0] = head;
        Commit(a, n, img, Ranges().Add(W::kNext, W::kNext + 1));
        a.StorePartWord(kFreeHead, n);
        return a.Flush();
      });
    });
  }

  // Removes node n (low `low`), emptied by an erase, from r's part: drops its
  // tower to height 1 (so no new level links it), unlinks it from each level
  // above 0 under the locks of its predecessor there and of n, then at level
  // 0, under the predecessor's lock and n's, extends the predecessor's range
  // over n's and links past n, and marks n dead (in that order: the two
  // ranges overlap for an instant, both empty there), and frees it. Gives up
  // (leaving n in place, which is always correct) when n is no longer empty.
  absl::Status Reclaim(const Route& r, uint64_t n, uint64_t low) {
    return WithNodes(r, [&](auto& a) -> absl::Status {
      size_t height = 1;
      bool go = false;
      I nimg;
      RETURN_IF_ERROR(Locked(a, r, n, &nimg, [&]() -> absl::Status {
        if (!nimg.live() || nimg.bitmap() != 0 || nimg.low != low) return absl::OkStatus();
        go = true;
        height = std::max<size_t>(1, nimg.height());
        nimg.meta = (nimg.meta & ~(uint64_t{0xff} << 16)) | (uint64_t{1} << 16);
        Commit(a, n, nimg, Ranges().Add(W::kMeta, W::kMeta + 1));
        return absl::OkStatus();
      }));
      if (!go) return absl::OkStatus();
      for (size_t level = height; level-- > 0;) {
        for (int attempt = 0;; ++attempt) {
          if (attempt > 1000) return absl::AbortedError("SkipList: could not unlink an empty node in 1000 attempts");
          a.Forget();
          uint64_t preds[kH] = {};
          uint64_t unused;
          RETURN_IF_ERROR(Descend(a, r, low - 1, level, &unused, preds));
          const uint64_t p = preds[level];
          enum { kAgain, kDone, kGiveUp } outcome = kAgain;
          I pimg;
          RETURN_IF_ERROR(Locked(a, r, p, &pimg, [&]() -> absl::Status {
            if (p != 0 && (!pimg.live() || pimg.low >= low || pimg.height() <= level)) return absl::OkStatus();
            if (pimg.next[level] != n) {
              uint64_t s = pimg.next[level];
              uint64_t slow = 0;
              if (s != 0) RETURN_IF_ERROR(LoadWord(a, r, s, W::kLow, &slow));
              // n is not linked here (the levels are sorted and p is its
              // predecessor): done with this level, unless p is stale.
              if (s == 0 || slow > low) outcome = level == 0 ? kGiveUp : kDone;
              return absl::OkStatus();
            }
            I img;
            return Locked(a, r, n, &img, [&]() -> absl::Status {
              if (!img.live() || img.bitmap() != 0) {
                outcome = kGiveUp;
                return absl::OkStatus();
              }
              pimg.next[level] = img.next[level];
              Ranges prg;
              prg.Add(W::kNext + level, W::kNext + level + 1);
              if (level == 0) {
                pimg.high = img.high;
                pimg.meta = (pimg.meta & ~skiplist_internal::kBounded) | (img.meta & skiplist_internal::kBounded);
                prg.Add(W::kMeta, W::kHigh + 1);
              }
              Commit(a, p, pimg, prg);
              if (level == 0 && Policy::kMarkReclaimedDead) {
                img.meta &= ~skiplist_internal::kLive;
                Commit(a, n, img, Ranges().Add(W::kMeta, W::kMeta + 1));
              }  // (else a test-only mutant: n still claims its range)
              outcome = kDone;
              return absl::OkStatus();
            });
          }));
          if (outcome == kGiveUp) return absl::OkStatus();
          if (outcome == kDone) break;
        }
      }
      ++stats_.reclaimed;
      return Free(a, r, n);
    });
  }

  size_t RandomHeight() {
    size_t h = 1;
    while (h < kH && (rng_() & 3) == 0) ++h;  // p = 1/4 per level
    return h;
  }

  // Splits the full node x (locked; its image in leaf_) around its median key
  // and binds key -> value in the half that owns it. Under the new right
  // node's lock, x's write (its high lowered, the link) lands before the new
  // node's (rdma_path.h: same QP). Its tower above level 0 is linked after
  // x's unlock (LinkTower).
  template <typename A>
  absl::Status Split(A& a, const Route& r, uint64_t x, uint64_t key, const V& value, uint64_t* n_out,
                     uint64_t* low_out, size_t* height_out) {
    uint64_t n = 0;
    RETURN_IF_ERROR(Allocate(a, r, &n));
    ++stats_.splits;
    std::array<int, kF> order;
    for (size_t i = 0; i < kF; ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(),
              [this](int p, int q) { return leaf_.keys[p] < leaf_.keys[q]; });
    const uint64_t m = leaf_.keys[order[kF / 2]];
    const size_t h = RandomHeight();
    I fresh{};
    fresh.meta = skiplist_internal::kLive | (leaf_.meta & skiplist_internal::kBounded) | (uint64_t{h} << 16);
    fresh.low = m;
    fresh.high = leaf_.high;
    fresh.next[0] = leaf_.next[0];
    uint32_t left_bits = leaf_.bitmap(), right_bits = 0;
    for (size_t j = kF / 2, k = 0; j < kF; ++j, ++k) {
      fresh.keys[k] = leaf_.keys[order[j]];
      std::memcpy(fresh.values[k], leaf_.values[order[j]], sizeof(fresh.values[k]));
      right_bits |= uint32_t{1} << k;
      left_bits &= ~(uint32_t{1} << order[j]);
    }
    Ranges rg;
    if (key >= m) {
      const size_t k = kF - kF / 2;
      fresh.keys[k] = key;
      I::EncodeValue(value, fresh.values[k]);
      right_bits |= uint32_t{1} << k;
    } else {
      const int j = order[kF / 2];  // now free on the left
      leaf_.keys[j] = key;
      I::EncodeValue(value, leaf_.values[j]);
      left_bits |= uint32_t{1} << j;
      rg.Add(W::Key(j), W::Key(j) + 1).Add(W::Value(j), W::Value(j) + W::kValueWords);
    }
    fresh.SetBitmap(right_bits);
    leaf_.SetBitmap(left_bits);
    leaf_.meta |= skiplist_internal::kBounded;
    leaf_.high = m;
    leaf_.next[0] = n;
    rg.Add(W::kMeta, W::kNext + 1);
    // Both writes under n's lock, x's first: n may be a reused node, which
    // stale links and cached locations still name, so it must not claim
    // [m, high) while x still does (two live owners: a reader through the
    // stale reference would see the new key, a later one through x would
    // not). Until n's write lands, n is dead (freed) or never used, and
    // [m, high) has no live owner: a reader that follows x's new link to n
    // finds n not owning the key and waits for n's lock (ReadLeaf), which
    // is held until n's write has landed; writers wait for x's or n's lock.
    // NIC: both WRITEs go out in this order on one QP at Locked's Flush,
    // before n's unlock. n's version goes on from its old one.
    I old;
    RETURN_IF_ERROR(Locked(a, r, n, &old, [&]() -> absl::Status {
      if (old.live() && Policy::kMarkReclaimedDead) return Corrupt(r, n, "was allocated but is live");
      fresh.version = old.version;
      if constexpr (Policy::kSplitLeftFirst) {
        Commit(a, x, leaf_, rg);
        Policy::BetweenSplitWrites();
        Commit(a, n, fresh, Ranges().Add(W::kMeta, W::kChecksum));
      } else {  // test-only mutant: the right node first
        Commit(a, n, fresh, Ranges().Add(W::kMeta, W::kChecksum));
        Policy::BetweenSplitWrites();
        Commit(a, x, leaf_, rg);
      }
      return absl::OkStatus();
    }));
    *n_out = n;
    *low_out = m;
    *height_out = h;
    return absl::OkStatus();
  }

  // Links node n (low m) into levels 1..height-1: at each level, under the
  // locks of its predecessor p there and of n (p's low is smaller: locks are
  // always taken in key order), n.next[level] = p.next[level], then
  // p.next[level] = n. Only hints: a failure here loses no key.
  absl::Status LinkTower(const Route& r, uint64_t n, uint64_t m, size_t height) {
    return WithNodes(r, [&](auto& a) -> absl::Status {
      bool stop = false;
      for (size_t level = 1; level < height; ++level) {
        for (int attempt = 0;; ++attempt) {
          if (attempt > 1000) return absl::AbortedError("SkipList: could not link a tower level in 1000 attempts");
          a.Forget();
          uint64_t preds[kH] = {};
          uint64_t unused;
          RETURN_IF_ERROR(Descend(a, r, m - 1, level, &unused, preds));
          const uint64_t p = preds[level];
          bool linked = false;
          I pimg;
          RETURN_IF_ERROR(Locked(a, r, p, &pimg, [&]() -> absl::Status {
            if (p != 0 && (!pimg.live() || pimg.height() <= level || pimg.low >= m)) return absl::OkStatus();
            const uint64_t s = pimg.next[level];
            if (s != 0) {
              uint64_t slow = 0;
              RETURN_IF_ERROR(LoadWord(a, r, s, W::kLow, &slow));
              if (slow < m) return absl::OkStatus();  // p is no longer the predecessor: again
            }
            I nimg;
            bool gone = false;
            RETURN_IF_ERROR(Locked(a, r, n, &nimg, [&]() -> absl::Status {
              if (!nimg.live() || nimg.height() <= level || nimg.low != m) {  // being reclaimed
                gone = true;
                return absl::OkStatus();
              }
              nimg.next[level] = s;
              Commit(a, n, nimg, Ranges().Add(W::kNext + level, W::kNext + level + 1));
              return absl::OkStatus();
            }));
            if (gone) {
              linked = true;
              stop = true;
              return absl::OkStatus();
            }
            pimg.next[level] = n;
            Commit(a, p, pimg, Ranges().Add(W::kNext + level, W::kNext + level + 1));
            linked = true;
            return absl::OkStatus();
          }));
          if (linked) break;
        }
        if (stop) break;
      }
      return absl::OkStatus();
    });
  }

  struct Passed {
    Route route;
    uint64_t idx;
    uint64_t version;
  };

  StructureClient c_;
  std::vector<uint64_t> splits_;
  uint64_t part_bytes_;
  uint64_t nodes_;  // per part, from part_bytes_
  size_t cache_entries_;
  // Where a NIC client last saw a leaf: its node index and high fence then.
  // A key below that fence starts there (a split since only moves it right).
  struct Cached {
    uint64_t idx;
    uint64_t high;
    bool bounded;
  };
  std::vector<absl::btree_map<uint64_t, Cached>> cache_;  // per node: leaf low -> where
  std::mt19937_64 rng_;
  std::array<I, 3> descent_cache_{};  // RemoteNodes' images
  I leaf_{}, walk_{};
  View view_{};
  std::vector<I> ahead_;            // NextNode's copies READ ahead
  std::vector<uint64_t> ahead_idx_;  // ... and their node indices
  size_t ahead_pos_ = 0;
  std::optional<uint64_t> started_at_;  // the cache key Start used, if any
  std::vector<Passed> passed_;
  SkipListStats stats_;
};

}  // namespace structures

#endif  // STRUCTURES_SKIPLIST_CLIENT_H_
