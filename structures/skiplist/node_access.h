#ifndef STRUCTURES_SKIPLIST_NODE_ACCESS_H_
#define STRUCTURES_SKIPLIST_NODE_ACCESS_H_

// NodeAccess: one client's reach into the parts' wide nodes, the primitives
// every other piece of the client is built from.
//
//   NodeAccess<V, ShippedChecks> nodes(std::move(common), splits, part_bytes);
//   RETURN_IF_ERROR(nodes.WithNodes(r, [&](auto& a) {
//     HeldLocks held(nodes.common().lock(), r);
//     absl::Status s = nodes.LockNode(a, held, r, idx, &img);
//     if (s.ok()) s = ...;  // change img, then nodes.Commit(a, idx, img, rg)
//     return nodes.PublishAndRelease(a, held, r, idx, std::move(s));
//   }));
//
//   WithNodes     picks the accessor of r's path: NativeNodes (native_path.h)
//                 or RemoteNodes (rdma_path.h); the algorithm is written once
//   ReadNodeWith  a validated copy: optimistic reads, then one under the lock
//   LockNode      lock (NIC: image READ in the acquire's round trip), check
//                 the checksum
//   Commit        stage an image as the node's next version (lock held)
//   PublishAndRelease  post the committed writes, unlock
//   Descend       head -> the node with the largest low <= key, per level
//
// Contract: not thread-safe (one per client, so per thread). Errors come from
// the transport and the lock (StructureClient), or DataLoss when a node fails
// validation under its lock or the links lead out of the pool. Descend reads
// hints only; callers decide on a validated copy (layout.h invariants 2, 4).
// docs/design.md §9.3.

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/common/client.h"
#include "structures/common/held_locks.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/native_path.h"
#include "structures/skiplist/rdma_path.h"
#include "util/status_macros.h"

namespace structures {

// Per-client counters (plain; read by the client's thread or after it stops).
struct SkipListStats {
  uint64_t cache_hits = 0;     // lookups that started at a remembered leaf
  uint64_t descents = 0;       // lookups that descended from a part's head
  uint64_t move_rights = 0;    // leaf hops past a high fence (a split since the link was read)
  uint64_t split_waits = 0;    // waits for a right node's lock after a move right (a split between its writes)
  uint64_t splits = 0;         // nodes this client split
  uint64_t reclaimed = 0;      // emptied nodes this client unlinked and freed
  uint64_t lower_bound_retries = 0;
};

namespace skiplist_internal {

template <typename V, typename Checks>
class NodeAccess {
 public:
  using I = NodeImage<V>;
  using L = NodeLayout<V>;
  using W = Words<V>;
  using View = LeafView<V>;

  // `splits`: node i owns keys [splits[i-1], splits[i]). `part_bytes`: every
  // part's size (its node pool).
  NodeAccess(StructureClient common, std::vector<uint64_t> splits, uint64_t part_bytes)
      : c_(std::move(common)), splits_(std::move(splits)), part_bytes_(part_bytes), nodes_(L::NodesIn(part_bytes)) {}
  NodeAccess(const NodeAccess&) = delete;
  NodeAccess& operator=(const NodeAccess&) = delete;

  StructureClient& common() { return c_; }
  const StructureClient& common() const { return c_; }
  const std::vector<uint64_t>& splits() const { return splits_; }
  uint64_t part_bytes() const { return part_bytes_; }
  uint64_t nodes() const { return nodes_; }  // per part
  SkipListStats& stats() { return stats_; }
  const SkipListStats& stats() const { return stats_; }

  rdma::NodeId HomeOf(uint64_t key) const { return skiplist_internal::HomeOf(splits_, key); }
  absl::Status RouteKey(uint64_t key, Path path, Route* r) const { return c_.RouteTo(HomeOf(key), path, r); }
  rdma::RemotePtr NodePtr(const Route& r, uint64_t idx) const { return r.base + L::NodeOffset(idx); }
  bool InPool(uint64_t idx) const { return idx < nodes_; }
  absl::Status Corrupt(const Route& r, uint64_t idx, absl::string_view what) const {
    return absl::DataLossError(absl::StrCat("SkipList: node ", idx, " of node ", r.home, "'s part ", what));
  }

  // Runs f(accessor) with the accessor of r's path.
  template <typename F>
  absl::Status WithNodes(const Route& r, F&& f) {
    if (r.native()) {
      NativeNodes<V> a(reinterpret_cast<char*>(r.base.template local<char>()));
      return f(a);
    }
    RemoteNodes<V> a(*c_.session(), r.base, descent_cache_.data());
    return f(a);
  }

  // A validated copy of node idx: its image, or a lookup's view of it for
  // `key` (optimistic, then under its lock).
  template <typename A, typename T>
  absl::Status ReadNodeWith(A& a, const Route& r, uint64_t idx, uint64_t key, T* out) {
    return c_.ReadValidated(
        r, NodePtr(r, idx), [&](bool* valid) { return CopyOnce(a, idx, key, out, valid); },
        [&] { return absl::StrCat("SkipList: node ", idx, " of node ", r.home, "'s part fails validation"); });
  }
  absl::Status ReadNode(const Route& r, uint64_t idx, I* img) {
    return WithNodes(r, [&](auto& a) { return ReadNodeWith(a, r, idx, 0, img); });
  }

  // One word of node idx for the descent: natively a load in place; on the
  // NIC path from a validated image of the node, read once per descent step.
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
  // reachable at `stop_level`, recording each level's last node in preds
  // (when not null).
  template <typename A>
  absl::Status Descend(A& a, const Route& r, uint64_t key, size_t stop_level, uint64_t* x_out, uint64_t* preds) {
    ++stats_.descents;
    uint64_t x = 0;
    for (size_t level = kMaxHeight; level-- > stop_level;) {
      for (uint64_t steps = 0; steps <= nodes_; ++steps) {
        uint64_t n = 0, meta = 0, low = 0;
        RETURN_IF_ERROR(LoadWord(a, r, x, W::kNext + level, &n));
        if (n == 0 || !InPool(n)) break;  // a link seen half written is a hint gone bad: stop here
        RETURN_IF_ERROR(LoadWord(a, r, n, W::kMeta, &meta));
        if ((meta & kLive) == 0) break;
        RETURN_IF_ERROR(LoadWord(a, r, n, W::kLow, &low));
        if (low > key) break;
        x = n;
      }
      if (preds != nullptr) preds[level] = x;
    }
    *x_out = x;
    return absl::OkStatus();
  }

  // Stages `img` (changed in the words of `rg`) as node idx's next version;
  // the accessor's Flush posts it. Caller holds idx's lock.
  template <typename A>
  void Commit(A& a, uint64_t idx, I& img, const Ranges& rg) {
    img.version += 2;
    img.checksum = img.Checksum();
    a.Store(idx, img, rg);
  }

  // A writer's step on node idx, between these two calls:
  //
  //   HeldLocks held(nodes.common().lock(), r);
  //   absl::Status s = nodes.LockNode(a, held, r, idx, &img);
  //   if (s.ok()) s = Step(...);  // may Commit images
  //   return nodes.PublishAndRelease(a, held, r, idx, std::move(s));
  //
  // LockNode takes idx's lock into `held` (the NIC path READs its image into
  // *img in the acquire's round trip, else it is read under the lock) and
  // checks the image's checksum.
  template <typename A>
  absl::Status LockNode(A& a, HeldLocks& held, const Route& r, uint64_t idx, I* img) {
    if (r.native() && !Checks::kNativeWritersLock) return a.SnapshotLocked(idx, img);  // mutant: no lock
    const rdma::RemotePtr lock = NodePtr(r, idx);
    rdma::ChainedRead also[1] = {{lock + L::kImageOffset, img, sizeof(I)}};
    bool also_done = false;
    RETURN_IF_ERROR(held.LockAndRead(
        lock, r.native() ? absl::Span<const rdma::ChainedRead>() : absl::MakeConstSpan(also), &also_done));
    if (!also_done) RETURN_IF_ERROR(a.SnapshotLocked(idx, img));
    if (!img->Valid()) return c_.Corrupt(absl::StrCat("node ", idx, " of node ", r.home, "'s part fails its checksum"));
    return absl::OkStatus();
  }
  // When the step succeeded (`s` OK), posts the writes it committed; then
  // releases `held`. The step's error wins over the unlock's.
  template <typename A>
  absl::Status PublishAndRelease(A& a, HeldLocks& held, const Route& r, uint64_t idx, absl::Status s) {
    if constexpr (!Checks::kWriteBeforeUnlock) {  // mutant: unlock first
      if (s.ok() && !r.native()) s = c_.lock().Unlock(NodePtr(r, idx));
    }
    if (s.ok()) s = a.Flush();
    return held.Release(std::move(s));
  }
  // Waits for node idx's lock and releases it (nothing to change).
  template <typename A>
  absl::Status WaitForLock(A& a, const Route& r, uint64_t idx) {
    HeldLocks held(c_.lock(), r);
    I unused;
    absl::Status s = LockNode(a, held, r, idx, &unused);
    return PublishAndRelease(a, held, r, idx, std::move(s));
  }

 private:
  template <typename A>
  absl::Status CopyOnce(A& a, uint64_t idx, uint64_t, I* out, bool* valid) {
    return a.template Snapshot<Checks::kValidateReads>(idx, out, valid);
  }
  template <typename A>
  absl::Status CopyOnce(A& a, uint64_t idx, uint64_t key, View* out, bool* valid) {
    return a.template View<Checks::kValidateReads>(idx, key, out, valid);
  }

  StructureClient c_;
  std::vector<uint64_t> splits_;
  uint64_t part_bytes_;
  uint64_t nodes_;
  std::array<I, 3> descent_cache_{};  // RemoteNodes' images
  SkipListStats stats_;
};

}  // namespace skiplist_internal
}  // namespace structures

#endif  // STRUCTURES_SKIPLIST_NODE_ACCESS_H_
