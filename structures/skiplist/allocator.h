#ifndef STRUCTURES_SKIPLIST_ALLOCATOR_H_
#define STRUCTURES_SKIPLIST_ALLOCATOR_H_

// NodeAllocator: hands out and takes back a part's wide nodes, one-sidedly
// on every path. The allocator's state is two words of the part header
// (layout.h PartHeader) under its own ALock, alloc_lock:
//
//   next_free   never-used nodes start at next_free + 1 (node 0 is the head)
//   free_head   the first freed node, 0 for none; each links the next in next[0]
//
//   uint64_t idx;
//   RETURN_IF_ERROR(alloc.Allocate(a, r, &idx));  // a freed node first
//   RETURN_IF_ERROR(alloc.Free(a, r, idx));       // idx: dead, unlinked everywhere
//
// Contract: not thread-safe (one per client); the parts' allocators are
// shared by every client through alloc_lock. Lock order: a node's lock
// before alloc_lock (Split and Free hold one of each). Errors:
// ResourceExhausted when the pool is used up (names part_bytes); DataLoss
// when the free list leads out of the pool or to a live node. Costs over the
// NIC: Allocate 2 round trips (the acquire READs both words; the WRITE is
// posted before the unlock), plus one READ of a freed node's link.
// docs/design.md §9.3.

#include <cstddef>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "rdma/session.h"
#include "structures/common/client.h"
#include "structures/common/held_locks.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/node_access.h"
#include "util/status_macros.h"

namespace structures::skiplist_internal {

template <typename V, typename Checks>
class NodeAllocator {
  using I = NodeImage<V>;
  using L = NodeLayout<V>;
  using W = Words<V>;
  static constexpr uint64_t kNextFree = offsetof(PartHeader, next_free);
  static constexpr uint64_t kFreeHead = offsetof(PartHeader, free_head);

 public:
  explicit NodeAllocator(NodeAccess<V, Checks>* nodes) : n_(*nodes) {}

  // Takes a node from r's pool: a freed one (dead: nothing writes it but the
  // alloc_lock holder) if there is one, else a never-used one.
  template <typename A>
  absl::Status Allocate(A& a, const Route& r, uint64_t* idx) {
    uint64_t hdr[2] = {0, 0};  // next_free, free_head
    rdma::ChainedRead also[1] = {{r.base + kNextFree, hdr, 16}};
    HeldLocks held(n_.common().lock(), r);
    bool also_done = false;
    absl::Status s = held.LockAndRead(
        AllocLock(r), r.native() ? absl::Span<const rdma::ChainedRead>() : absl::MakeConstSpan(also), &also_done);
    if (s.ok() && !also_done) s = a.LoadPartWord(kNextFree, &hdr[0]);
    if (s.ok() && !also_done) s = a.LoadPartWord(kFreeHead, &hdr[1]);
    if (s.ok()) s = hdr[1] != 0 ? PopFree(a, r, hdr[1], idx) : TakeNew(a, r, hdr[0], idx);
    return held.Release(std::move(s));
  }

  // Puts the dead node idx (unlinked everywhere) on r's free list: under
  // idx's lock (stale writers may take it; they find it dead and leave) and
  // then alloc_lock, idx.next[0] = free_head, free_head = idx.
  template <typename A>
  absl::Status Free(A& a, const Route& r, uint64_t idx) {
    I img;
    HeldLocks held(n_.common().lock(), r);
    absl::Status s = n_.LockNode(a, held, r, idx, &img);
    if (s.ok()) s = ExpectDead(r, idx, img, "is being freed but live");
    if (s.ok()) s = PushFree(a, r, idx, &img);
    return n_.PublishAndRelease(a, held, r, idx, std::move(s));
  }

  // DataLoss when `img`, a node the allocator handles, is live (unless the
  // mutant that leaves reclaimed nodes live is built).
  absl::Status ExpectDead(const Route& r, uint64_t idx, const I& img, absl::string_view what) const {
    if (img.live() && Checks::kMarkReclaimedDead) return n_.Corrupt(r, idx, what);
    return absl::OkStatus();
  }

 private:
  rdma::RemotePtr AllocLock(const Route& r) const { return r.base + offsetof(PartHeader, alloc_lock); }

  // Takes the never-used node after next_free (alloc_lock held).
  template <typename A>
  absl::Status TakeNew(A& a, const Route& r, uint64_t next_free, uint64_t* idx) {
    if (next_free + 1 >= n_.nodes()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "SkipList: node ", r.home, "'s part is full: all ", n_.nodes(), " nodes of ", L::kNodeBytes,
          " bytes (part_bytes = ", n_.part_bytes(),
          ") are in use; raise SkipListOptions::part_bytes (and the arena size)"));
    }
    *idx = next_free + 1;
    a.StorePartWord(kNextFree, next_free + 1);
    return a.Flush();
  }

  // Under alloc_lock (idx's lock held, its image in *img): idx.next[0] =
  // free_head, free_head = idx.
  template <typename A>
  absl::Status PushFree(A& a, const Route& r, uint64_t idx, I* img) {
    HeldLocks held(n_.common().lock(), r);
    absl::Status s = held.Lock(AllocLock(r));
    uint64_t head = 0;
    if (s.ok()) s = a.LoadPartWord(kFreeHead, &head);
    if (s.ok()) {
      img->next[0] = head;
      n_.Commit(a, idx, *img, Ranges().Add(W::kNext, W::kNext + 1));
      a.StorePartWord(kFreeHead, idx);
      s = a.Flush();
    }
    return held.Release(std::move(s));
  }

  // Takes the free list's head (alloc_lock held).
  template <typename A>
  absl::Status PopFree(A& a, const Route& r, uint64_t head, uint64_t* idx) {
    if (!n_.InPool(head)) return n_.Corrupt(r, head, "heads the free list but is outside the pool");
    // Its link: a validated copy without the lock fallback (node locks come
    // before alloc_lock, and a dead node's words are stable here).
    I img;
    bool valid = false;
    for (int tries = 0; !valid; ++tries) {
      if (tries == StructureClient::kOptimisticReads) return n_.Corrupt(r, head, "(free) fails validation");
      RETURN_IF_ERROR(a.template Snapshot<true>(head, &img, &valid));
    }
    RETURN_IF_ERROR(ExpectDead(r, head, img, "is on the free list but live"));
    *idx = head;
    a.StorePartWord(kFreeHead, img.next[0]);
    return a.Flush();
  }

  NodeAccess<V, Checks>& n_;
};

}  // namespace structures::skiplist_internal

#endif  // STRUCTURES_SKIPLIST_ALLOCATOR_H_
