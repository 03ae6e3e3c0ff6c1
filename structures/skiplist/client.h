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
  uint64_t splits = 0;         // nodes this client split
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
  // the last to 2^64 - 1). `nodes_per_part`: the pool size of every part.
  // `cache_entries`: the most leaf locations the NIC path remembers.
  SkipListClient(StructureClient common, std::vector<uint64_t> splits, uint64_t nodes_per_part, size_t cache_entries,
                 uint64_t part_bytes)
      : c_(std::move(common)),
        splits_(std::move(splits)),
        nodes_(nodes_per_part),
        cache_entries_(cache_entries),
        part_bytes_(part_bytes),
        cache_(static_cast<size_t>(c_.num_nodes())),
        rng_(0x5eed0000u + c_.node().id() * 7919u + reinterpret_cast<uintptr_t>(this)) {}
  SkipListClient(const SkipListClient&) = delete;
  SkipListClient& operator=(const SkipListClient&) = delete;

  // The value bound to `key`, or nullopt.
  absl::StatusOr<std::optional<V>> Get(uint64_t key, Path path = Path::kAuto) {
    Route r;
    RETURN_IF_ERROR(RouteKey(key, path, &r));
    uint64_t x;
    RETURN_IF_ERROR(ReadLeaf(r, key, &view_, &x));
    if (view_.found < 0) return std::optional<V>();
    return std::optional<V>(I::DecodeValue(view_.value));
  }
  absl::StatusOr<bool> Contains(uint64_t key, Path path = Path::kAuto) {
    Route r;
    RETURN_IF_ERROR(RouteKey(key, path, &r));
    uint64_t x;
    RETURN_IF_ERROR(ReadLeaf(r, key, &view_, &x));
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
      }, /*record=*/true));
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
    bool done = false;
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
      if (out.size() >= limit) {
        done = true;
        return false;
      }
      if (n > 0) {
        if (out.back().first == UINT64_MAX) return false;
        cursor = out.back().first + 1;
      }
      return true;
    }, /*record=*/false));
    (void)done;
    return out;
  }

  rdma::NodeId HomeOf(uint64_t key) const {
    return static_cast<rdma::NodeId>(std::upper_bound(splits_.begin(), splits_.end(), key) - splits_.begin());
  }
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

  absl::Status RouteKey(uint64_t key, Path path, Route* r) const { return c_.RouteTo(HomeOf(key), path, r); }

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
      return absl::OkStatus();
    }
    return Descend(a, r, key, 0, x, nullptr);
  }
  // The part's head owns keys from the part's own low end on.
  uint64_t RangeLow(rdma::NodeId home) const { return home == 0 ? 0 : splits_[home - 1]; }
  template <typename T>
  void Remember(const Route& r, uint64_t idx, const T& img) {
    auto& m = cache_[r.home];
    const uint64_t low = idx == 0 ? RangeLow(r.home) : img.low;
    if (cache_size() >= cache_entries_ && m.find(low) == m.end()) return;
    m[low] = {idx, img.high, img.bounded()};
  }
  void Forget(const Route& r, uint64_t idx) {
    auto& m = cache_[r.home];
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it->second.idx == idx) {
        m.erase(it);
        return;
      }
    }
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
      for (uint64_t hops = 0; hops <= nodes_ + 1; ++hops) {
        RETURN_IF_ERROR(ReadNodeWith(a, r, x, key, img));
        if (x != 0 && (!img->live() || key < img->low)) {  // a stale cached start
          Forget(r, x);
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
  template <typename Visit>
  absl::Status Walk(uint64_t key, Path path, Visit&& visit, bool record) {
    for (rdma::NodeId h = HomeOf(key); h < static_cast<rdma::NodeId>(c_.num_nodes()); ++h) {
      Route r;
      // Past key's own part, keep to the spirit of `path`: a NIC path stays
      // on the NIC (loopback for this node's part), native becomes auto.
      Path p = path;
      if (h != HomeOf(key)) {
        p = h != c_.node().id() ? Path::kAuto
            : (path == Path::kLoopback || path == Path::kRemote) ? Path::kLoopback
                                                                 : Path::kAuto;
      }
      RETURN_IF_ERROR(c_.RouteTo(h, p, &r));
      const uint64_t from = h == HomeOf(key) ? key : splits_[h - 1];
      uint64_t x;
      RETURN_IF_ERROR(ReadLeaf(r, from, &walk_, &x));
      for (uint64_t hops = 0; hops <= nodes_ + 1; ++hops) {
        if (record) passed_.push_back({r, x, walk_.version});
        if (!visit(r, x, walk_)) return absl::OkStatus();
        if (!walk_.bounded()) break;  // the part's last node
        x = walk_.next[0];
        if (x == 0 || !InPool(x)) return Corrupt(r, x, "is past a bounded node's end");
        RETURN_IF_ERROR(ReadNode(r, x, &walk_));
      }
    }
    return absl::OkStatus();
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
    uint64_t split_node = 0, split_low = 0;
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
          RETURN_IF_ERROR(Descend(a, r, key, 0, &x, nullptr));
        }
      }
      return Corrupt(r, x, "starts a cycle of links");
    }));
    if (split_height > 1) return LinkTower(r, split_node, split_low, split_height);
    return absl::OkStatus();
  }

  // Takes a never-used node from r's part pool (under the part's alloc lock).
  template <typename A>
  absl::Status Allocate(A& a, const Route& r, uint64_t* idx) {
    uint64_t next_free = 0;
    rdma::ChainedRead also[1] = {{r.base + offsetof(skiplist_internal::PartHeader, next_free), &next_free, 8}};
    return c_.WithLockAndRead(r, AllocLock(r), r.native() ? absl::Span<const rdma::ChainedRead>() : absl::MakeConstSpan(also),
                              [&](bool also_done) -> absl::Status {
                                if (!also_done) RETURN_IF_ERROR(a.LoadNextFree(&next_free));
                                if (next_free + 1 >= nodes_) {
                                  return absl::ResourceExhaustedError(absl::StrCat(
                                      "SkipList: node ", r.home, "'s part is full: all ", nodes_, " nodes of ",
                                      L::kNodeBytes, " bytes (part_bytes = ", part_bytes_,
                                      ") are in use; raise SkipListOptions::part_bytes (and the arena size)"));
                                }
                                *idx = next_free + 1;
                                a.StoreNextFree(next_free + 1);
                                return a.Flush();
                              });
  }

  size_t RandomHeight() {
    size_t h = 1;
    while (h < kH && (rng_() & 3) == 0) ++h;  // p = 1/4 per level
    return h;
  }

  // Splits the full node x (locked; its image in leaf_) around its median key
  // and binds key -> value in the half that owns it. The new right node is
  // written whole before x's write links it (rdma_path.h). Its tower above
  // level 0 is linked after x's unlock (LinkTower).
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
    fresh.version = 2;
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
    fresh.checksum = fresh.Checksum();
    a.StoreFresh(n, fresh);
    leaf_.SetBitmap(left_bits);
    leaf_.meta |= skiplist_internal::kBounded;
    leaf_.high = m;
    leaf_.next[0] = n;
    rg.Add(W::kMeta, W::kNext + 1);
    Commit(a, x, leaf_, rg);
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
            RETURN_IF_ERROR(Locked(a, r, n, &nimg, [&]() -> absl::Status {
              nimg.next[level] = s;
              Commit(a, n, nimg, Ranges().Add(W::kNext + level, W::kNext + level + 1));
              return absl::OkStatus();
            }));
            pimg.next[level] = n;
            Commit(a, p, pimg, Ranges().Add(W::kNext + level, W::kNext + level + 1));
            linked = true;
            return absl::OkStatus();
          }));
          if (linked) break;
        }
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
  uint64_t nodes_;
  size_t cache_entries_;
  uint64_t part_bytes_;
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
  std::vector<Passed> passed_;
  SkipListStats stats_;
};

}  // namespace structures

#endif  // STRUCTURES_SKIPLIST_CLIENT_H_
