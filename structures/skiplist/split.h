#ifndef STRUCTURES_SKIPLIST_SPLIT_H_
#define STRUCTURES_SKIPLIST_SPLIT_H_

// Splitter: splits a full node and links the new node's tower.
//
//   // x locked, its image in leaf, no free entry for key:
//   RETURN_IF_ERROR(splitter.Split(a, r, x, &leaf, key, value, &made));
//   // after x's unlock:
//   if (made.height > 1) RETURN_IF_ERROR(splitter.LinkTower(r, made));
//
// Split moves the upper half of x's entries (from the median key m) to a new
// node n from the allocator and binds key in the half that owns it. Both
// writes happen under n's lock, x's first (its high lowered to m, next[0] =
// n), then n's ([m, old high), entries, kLive); n's lock is released after
// both have landed, so a reused n never owns its range while x still does
// (layout.h invariant 3). LinkTower then links n into levels 1..height-1,
// per level under the locks of its predecessor there and of n (lower key
// first); the links are hints, so giving up there loses no key.
//
// Contract: not thread-safe (one per client). Heights are geometric
// (p = 1/4, at most kMaxHeight). Errors: the allocator's (ResourceExhausted),
// DataLoss for a corrupt pool, Aborted when a tower level fails to link in
// 1000 attempts. Costs: the allocator (2 round trips), n's lock and WRITEs;
// per tower level a descent and 2 locks. docs/design.md §9.3.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "structures/common/client.h"
#include "structures/common/held_locks.h"
#include "structures/skiplist/allocator.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/node_access.h"
#include "util/status_macros.h"

namespace structures::skiplist_internal {

// The node a split made.
struct SplitNode {
  uint64_t idx = 0;
  uint64_t low = 0;
  size_t height = 0;  // 0: no split
};

template <typename V, typename Checks>
class Splitter {
  using I = NodeImage<V>;
  using W = Words<V>;
  static constexpr size_t kF = kFanout;

 public:
  Splitter(NodeAccess<V, Checks>* nodes, NodeAllocator<V, Checks>* alloc, uint64_t seed)
      : n_(*nodes), alloc_(*alloc), rng_(seed) {}

  // Splits the full node x (locked; its image in *leaf) around its median key
  // and binds key -> value in the half that owns it.
  template <typename A>
  absl::Status Split(A& a, const Route& r, uint64_t x, I* leaf, uint64_t key, const V& value, SplitNode* made) {
    uint64_t n = 0;
    RETURN_IF_ERROR(alloc_.Allocate(a, r, &n));
    ++n_.stats().splits;
    std::array<int, kF> order;
    for (size_t i = 0; i < kF; ++i) order[i] = static_cast<int>(i);
    std::sort(order.begin(), order.end(), [leaf](int p, int q) { return leaf->keys[p] < leaf->keys[q]; });
    const uint64_t m = leaf->keys[order[kF / 2]];
    const size_t h = RandomHeight();
    I fresh{};
    fresh.meta = kLive | (leaf->meta & kBounded) | (uint64_t{h} << 16);
    fresh.low = m;
    fresh.high = leaf->high;
    fresh.next[0] = leaf->next[0];
    uint32_t left_bits = leaf->bitmap(), right_bits = 0;
    for (size_t j = kF / 2, k = 0; j < kF; ++j, ++k) {
      fresh.keys[k] = leaf->keys[order[j]];
      std::memcpy(fresh.values[k], leaf->values[order[j]], sizeof(fresh.values[k]));
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
      const int j = order[kF / 2];  // free on the left now
      leaf->keys[j] = key;
      I::EncodeValue(value, leaf->values[j]);
      left_bits |= uint32_t{1} << j;
      rg.Add(W::Key(j), W::Key(j) + 1).Add(W::Value(j), W::Value(j) + W::kValueWords);
    }
    fresh.SetBitmap(right_bits);
    leaf->SetBitmap(left_bits);
    leaf->meta |= kBounded;
    leaf->high = m;
    leaf->next[0] = n;
    rg.Add(W::kMeta, W::kNext + 1);
    // Until n's write lands, [m, old high) has no live owner: a reader that
    // follows x's new link finds n not owning the key and waits for n's lock.
    // NIC: both WRITEs go out in this order on one QP when they are
    // published, before n's unlock. n's version goes on from its old one.
    I old;
    HeldLocks held(n_.common().lock(), r);
    absl::Status s = n_.LockNode(a, held, r, n, &old);
    if (s.ok()) s = alloc_.ExpectDead(r, n, old, "was allocated but is live");
    if (s.ok()) {
      fresh.version = old.version;
      if constexpr (Checks::kSplitLeftFirst) {
        n_.Commit(a, x, *leaf, rg);
        Checks::BetweenSplitWrites();
        n_.Commit(a, n, fresh, Ranges().Add(W::kMeta, W::kChecksum));
      } else {  // mutant: the right node first
        n_.Commit(a, n, fresh, Ranges().Add(W::kMeta, W::kChecksum));
        Checks::BetweenSplitWrites();
        n_.Commit(a, x, *leaf, rg);
      }
    }
    RETURN_IF_ERROR(n_.PublishAndRelease(a, held, r, n, std::move(s)));
    *made = {n, m, h};
    return absl::OkStatus();
  }

  // Links the node a split made into levels 1..height-1: at each level,
  // under the locks of its predecessor p there and of the node (p's low is
  // smaller), node.next[level] = p.next[level], then p.next[level] = node.
  // Stops when the node is being reclaimed.
  absl::Status LinkTower(const Route& r, const SplitNode& made) {
    return n_.WithNodes(r, [&](auto& a) -> absl::Status {
      for (size_t level = 1; level < made.height; ++level) {
        bool gone = false;
        RETURN_IF_ERROR(LinkLevel(a, r, made, level, &gone));
        if (gone) break;
      }
      return absl::OkStatus();
    });
  }

 private:
  size_t RandomHeight() {
    size_t h = 1;
    while (h < kMaxHeight && (rng_() & 3) == 0) ++h;  // p = 1/4 per level
    return h;
  }

  // One level of LinkTower; *gone when the node is no longer the one made.
  template <typename A>
  absl::Status LinkLevel(A& a, const Route& r, const SplitNode& made, size_t level, bool* gone) {
    for (int attempt = 0;; ++attempt) {
      if (attempt > 1000) return absl::AbortedError("SkipList: could not link a tower level in 1000 attempts");
      a.Forget();
      uint64_t preds[kMaxHeight] = {};
      uint64_t unused;
      RETURN_IF_ERROR(n_.Descend(a, r, made.low - 1, level, &unused, preds));
      const uint64_t p = preds[level];
      bool linked = false;
      I pimg;
      HeldLocks held(n_.common().lock(), r);
      absl::Status s = n_.LockNode(a, held, r, p, &pimg);
      if (s.ok()) s = LinkAfter(a, r, made, level, p, &pimg, &linked, gone);
      RETURN_IF_ERROR(n_.PublishAndRelease(a, held, r, p, std::move(s)));
      if (linked) return absl::OkStatus();
    }
  }

  // Under the lock of p (its image in *pimg), the node's predecessor at
  // `level` as a descent saw it: when p still is (else neither *linked nor
  // *gone: again), links the node after p under its own lock.
  template <typename A>
  absl::Status LinkAfter(A& a, const Route& r, const SplitNode& made, size_t level, uint64_t p, I* pimg,
                         bool* linked, bool* gone) {
    const uint64_t m = made.low;
    if (p != 0 && (!pimg->live() || pimg->height() <= level || pimg->low >= m)) return absl::OkStatus();
    const uint64_t s = pimg->next[level];
    if (s != 0) {
      uint64_t slow = 0;
      RETURN_IF_ERROR(n_.LoadWord(a, r, s, W::kLow, &slow));
      if (slow < m) return absl::OkStatus();  // p is no longer the predecessor: again
    }
    RETURN_IF_ERROR(LinkNode(a, r, made, level, s, gone));
    *linked = true;
    if (*gone) return absl::OkStatus();
    pimg->next[level] = made.idx;
    n_.Commit(a, p, *pimg, Ranges().Add(W::kNext + level, W::kNext + level + 1));
    return absl::OkStatus();
  }

  // Under the made node's lock: its next[level] = succ, or *gone when it is
  // being reclaimed.
  template <typename A>
  absl::Status LinkNode(A& a, const Route& r, const SplitNode& made, size_t level, uint64_t succ, bool* gone) {
    I nimg;
    HeldLocks held(n_.common().lock(), r);
    absl::Status s = n_.LockNode(a, held, r, made.idx, &nimg);
    if (s.ok() && (!nimg.live() || nimg.height() <= level || nimg.low != made.low)) {
      *gone = true;
    } else if (s.ok()) {
      nimg.next[level] = succ;
      n_.Commit(a, made.idx, nimg, Ranges().Add(W::kNext + level, W::kNext + level + 1));
    }
    return n_.PublishAndRelease(a, held, r, made.idx, std::move(s));
  }

  NodeAccess<V, Checks>& n_;
  NodeAllocator<V, Checks>& alloc_;
  std::mt19937_64 rng_;
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_SPLIT_H_
