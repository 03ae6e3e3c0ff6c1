#ifndef STRUCTURES_HASH_MAP_RDMA_PATH_H_
#define STRUCTURES_HASH_MAP_RDMA_PATH_H_

// The hash map's NIC path: how a thread reads and writes a node's units
// through its Session, remote or over the loopback QP. Only one-sided READ
// and WRITE touch slot words (they are PlainWords: never RMW'd by the NIC or
// the CPU); the unit locks' NIC atomics are ALock's business.

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/session.h"
#include "structures/hash_map/layout.h"

namespace structures::hash_map_internal {

template <typename V>
rdma::RemotePtr UnitPtr(rdma::RemotePtr base, size_t unit) {
  return base + unit * SlotLayout<V>::kUnitBytes;
}
template <typename V>
rdma::RemotePtr WindowPtr(rdma::RemotePtr base, const Candidate& c) {
  return UnitPtr<V>(base, c.unit) + SlotLayout<V>::WindowOffset(c.side);
}
template <typename V>
rdma::RemotePtr SlotPtr(rdma::RemotePtr base, size_t unit, size_t slot) {
  return rdma::RemoteRef<Unit<V>>::At(UnitPtr<V>(base, unit)).Field(&Unit<V>::slots)[slot].ptr();
}

// Writes a whole slot tuple with one RDMA WRITE. Caller holds the unit lock.
//
// Ordering with the release: when `wait` is false the WRITE is posted without
// waiting (it must fit inline; otherwise this falls back to waiting). That is
// safe only because the caller then releases its unit locks with ALock's
// remote Unlock, whose first step is an RDMA CAS on a lock line of the same
// node's part, hence on the same RC QP: RC executes a QP's requests in order
// at the responder, so the WRITE has landed before the CAS executes, and the
// CAS's completion (which Unlock waits for) comes after both. Anyone who
// acquires the unit's lock next, natively or through the NIC, does so only
// after that CAS (or after a hand-over that Unlock sends once the CAS
// completed).
template <typename V>
absl::Status RemoteStoreSlot(rdma::Session& s, rdma::RemotePtr dst, const uint64_t* words, bool wait) {
  using L = SlotLayout<V>;
  if (!wait && s.FitsInline(L::kBytes)) {
    rdma::Batch b(s, dst.node());
    b.Write(dst, words, L::kBytes);
    return b.PostWithoutWaiting();
  }
  return s.Write(dst, words, L::kBytes);
}

// The RDMA word accessor: the same interface as NativeUnits (native_path.h),
// over the thread's Session and the part at `base`. Reads copy windows into
// private buffers (`win0`, `win1`: kWindowWords words each) and scan the
// copies; a slot store is one WRITE.
template <typename V>
class RemoteUnits {
  using L = SlotLayout<V>;

 public:
  RemoteUnits(rdma::Session& s, rdma::RemotePtr base, uint64_t* win0, uint64_t* win1)
      : s_(s), base_(base), win_{win0, win1} {}

  // READs the first `n` (1 or 2) windows of `p`, each with its own READ, all
  // in one doorbell: one round trip, n NIC ops. The NIC copies 8-byte words
  // (rxe: bytes) in an unspecified order, so a copy may be torn; ScanWindow's
  // checksums tell. The two READs need no order between them: a key present
  // throughout the round trip sits in one slot of one window all along, and
  // whichever READ covers that slot sees it (layout.h, ScanWindow).
  absl::Status FetchWindows(const Placement& p, int n) {
    rdma::Batch b(s_, base_.node());
    for (int w = 0; w < n; ++w) b.Read(WindowPtr<V>(base_, p.c[w]), win_[w], L::kWindowBytes);
    return b.Execute();
  }
  // Searches the copies of the first `windows` windows that FetchWindows
  // made (ScanWindows).
  absl::Status Find(const Placement& p, int windows, uint64_t key, bool verify, uint64_t* found, Lookup* l) {
    const uint64_t* w0 = win_[0];
    const uint64_t* w1 = win_[1];
    *l = ScanWindows<V>([w0](size_t slot, size_t x) { return w0[slot * L::kWords + x]; },
                        [w1](size_t slot, size_t x) { return w1[slot * L::kWords + x]; }, key, p, windows, verify,
                        found);
    return absl::OkStatus();
  }
  // What a unit lock's acquire may READ in its own chain (ALock's
  // LockAndRead): window `which` of `p`, into its buffer.
  rdma::ChainedRead WindowRead(const Placement& p, int which) const {
    return {WindowPtr<V>(base_, p.c[which]), win_[which], L::kWindowBytes};
  }
  // Under the lock of window `which`'s unit: READs the window unless the
  // acquire already did (`fetched`), then scans it. The copy must be whole
  // (every slot matches its checksum): a torn one means a writer bypassed the
  // lock, reported as kTorn.
  absl::Status FindUnderLock(const Placement& p, int which, bool fetched, uint64_t key, uint64_t* found,
                             Lookup* l) {
    if (!fetched) {
      if (absl::Status st = s_.Read(WindowPtr<V>(base_, p.c[which]), win_[which], L::kWindowBytes); !st.ok()) {
        return st;
      }
    }
    if (CountOccupied<V>(win_[which], kSlotsPerWindow) < 0) {
      l->kind = Lookup::kTorn;
      return absl::OkStatus();
    }
    *l = FindKey<V>(win_[which], key, p.c[which].side, p.start, /*verify=*/false, found);
    return absl::OkStatus();
  }
  // Every slot of unit `unit`, into `out` (kUnitSlotsWords): one READ.
  absl::Status Snapshot(size_t unit, uint64_t* out) {
    return s_.Read(UnitPtr<V>(base_, unit) + L::kSlotsOffset, out, L::kUnitSlotsBytes);
  }
  // Under the unit's lock: one WRITE, posted without waiting unless `wait`
  // (or the slot does not fit inline). See RemoteStoreSlot for why the
  // release that follows orders after it.
  absl::Status StoreSlot(size_t unit, size_t slot, const uint64_t* words, bool /*key_unchanged*/, bool wait) {
    return RemoteStoreSlot<V>(s_, SlotPtr<V>(base_, unit, slot), words, wait);
  }

 private:
  rdma::Session& s_;
  rdma::RemotePtr base_;
  uint64_t* win_[2];
};

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_RDMA_PATH_H_
