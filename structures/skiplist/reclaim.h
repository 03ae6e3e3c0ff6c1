#ifndef STRUCTURES_SKIPLIST_RECLAIM_H_
#define STRUCTURES_SKIPLIST_RECLAIM_H_

// Reclaimer: removes a node that an erase left empty, and frees it.
//
//   // after the erase's unlock, n (not the head) was emptied; its low was low:
//   RETURN_IF_ERROR(reclaimer.Reclaim(r, n, low));
//
// Steps: (1) under n's lock its height drops to 1, so no tower level links
// it from then on; (2) from the top level down, under the locks of n's
// predecessor p there and of n (lower key first), p.next[i] = n.next[i];
// (3) at level 0, under the same two locks, p's write extends p's range over
// n's and links past n, then n's write marks it dead; (4) the allocator puts
// n on the free list. Between (3)'s two writes both claim n's range, which is
// empty, so no answer differs. Every level stays sorted (layout.h invariant
// 4). Any step that finds n no longer empty gives up, leaving n in place,
// which is always correct.
//
// Contract: not thread-safe (one per client). Errors: the transport's,
// DataLoss for a corrupt pool, Aborted when a level fails to unlink in 1000
// attempts. Costs: per level n was linked at, a descent and 2 locks; then the
// allocator's lock. docs/design.md §9.3.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "structures/common/client.h"
#include "structures/common/held_locks.h"
#include "structures/skiplist/allocator.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/node_access.h"
#include "util/status_macros.h"

namespace structures::skiplist_internal {

template <typename V, typename Checks>
class Reclaimer {
  using I = NodeImage<V>;
  using W = Words<V>;

 public:
  Reclaimer(NodeAccess<V, Checks>* nodes, NodeAllocator<V, Checks>* alloc) : n_(*nodes), alloc_(*alloc) {}

  // Removes node n (low `low`) from r's part if it is still live and empty.
  absl::Status Reclaim(const Route& r, uint64_t n, uint64_t low) {
    return n_.WithNodes(r, [&](auto& a) -> absl::Status {
      size_t height = 0;  // 0: n is no longer empty; leave it
      RETURN_IF_ERROR(Lower(a, r, n, low, &height));
      if (height == 0) return absl::OkStatus();
      for (size_t level = height; level-- > 0;) {
        bool give_up = false;
        RETURN_IF_ERROR(UnlinkLevel(a, r, n, low, level, &give_up));
        if (give_up) return absl::OkStatus();
      }
      ++n_.stats().reclaimed;
      Checks::BetweenUnlinkAndFree();
      return alloc_.Free(a, r, n);
    });
  }

 private:
  // Step (1): n's height to 1; *height: the height it had (at least 1), or 0
  // when n is dead, not empty or reused.
  template <typename A>
  absl::Status Lower(A& a, const Route& r, uint64_t n, uint64_t low, size_t* height) {
    I nimg;
    HeldLocks held(n_.common().lock(), r);
    absl::Status s = n_.LockNode(a, held, r, n, &nimg);
    if (s.ok() && nimg.live() && nimg.bitmap() == 0 && nimg.low == low) {
      *height = std::max<size_t>(1, nimg.height());
      nimg.meta = (nimg.meta & ~(uint64_t{0xff} << 16)) | (uint64_t{1} << 16);
      n_.Commit(a, n, nimg, Ranges().Add(W::kMeta, W::kMeta + 1));
    }
    return n_.PublishAndRelease(a, held, r, n, std::move(s));
  }

  // Where one attempt at unlinking n from a level leaves it.
  enum class Outcome { kAgain, kDone, kGiveUp };

  // Steps (2) and (3) at one level: until n is unlinked there (or found no
  // longer empty: *give_up).
  template <typename A>
  absl::Status UnlinkLevel(A& a, const Route& r, uint64_t n, uint64_t low, size_t level, bool* give_up) {
    for (int attempt = 0;; ++attempt) {
      if (attempt > 1000) return absl::AbortedError("SkipList: could not unlink an empty node in 1000 attempts");
      a.Forget();
      uint64_t preds[kMaxHeight] = {};
      uint64_t unused;
      RETURN_IF_ERROR(n_.Descend(a, r, low - 1, level, &unused, preds));
      const uint64_t p = preds[level];
      Outcome outcome = Outcome::kAgain;
      I pimg;
      HeldLocks held(n_.common().lock(), r);
      absl::Status s = n_.LockNode(a, held, r, p, &pimg);
      if (s.ok()) s = UnlinkAfter(a, r, p, &pimg, n, low, level, &outcome);
      RETURN_IF_ERROR(n_.PublishAndRelease(a, held, r, p, std::move(s)));
      if (outcome == Outcome::kGiveUp) *give_up = true;
      if (outcome != Outcome::kAgain) return absl::OkStatus();
    }
  }

  // Under the lock of p (its image in *pimg), n's predecessor at `level` as
  // a descent saw it: when p still is and links n, unlinks n under n's lock.
  template <typename A>
  absl::Status UnlinkAfter(A& a, const Route& r, uint64_t p, I* pimg, uint64_t n, uint64_t low, size_t level,
                           Outcome* outcome) {
    if (p != 0 && (!pimg->live() || pimg->low >= low || pimg->height() <= level)) return absl::OkStatus();
    if (pimg->next[level] != n) {
      uint64_t s = pimg->next[level];
      uint64_t slow = 0;
      if (s != 0) RETURN_IF_ERROR(n_.LoadWord(a, r, s, W::kLow, &slow));
      // n is not linked here (the levels are sorted and p is its
      // predecessor): done with this level, unless p is stale.
      if (s == 0 || slow > low) *outcome = level == 0 ? Outcome::kGiveUp : Outcome::kDone;
      return absl::OkStatus();
    }
    I img;
    HeldLocks held(n_.common().lock(), r);
    absl::Status s = n_.LockNode(a, held, r, n, &img);
    if (s.ok() && (!img.live() || img.bitmap() != 0)) {
      *outcome = Outcome::kGiveUp;
    } else if (s.ok()) {
      pimg->next[level] = img.next[level];
      Ranges prg;
      prg.Add(W::kNext + level, W::kNext + level + 1);
      if (level == 0) {
        pimg->high = img.high;
        pimg->meta = (pimg->meta & ~kBounded) | (img.meta & kBounded);
        prg.Add(W::kMeta, W::kHigh + 1);
      }
      n_.Commit(a, p, *pimg, prg);
      if (level == 0 && Checks::kMarkReclaimedDead) {
        img.meta &= ~kLive;
        n_.Commit(a, n, img, Ranges().Add(W::kMeta, W::kMeta + 1));
      }  // (else the mutant: n still claims its range)
      *outcome = Outcome::kDone;
    }
    return n_.PublishAndRelease(a, held, r, n, std::move(s));
  }

  NodeAccess<V, Checks>& n_;
  NodeAllocator<V, Checks>& alloc_;
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_RECLAIM_H_
