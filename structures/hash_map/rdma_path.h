#ifndef STRUCTURES_HASH_MAP_RDMA_PATH_H_
#define STRUCTURES_HASH_MAP_RDMA_PATH_H_

// The hash map's NIC path: how a thread reads and writes a group through its
// Session, remote or over the loopback QP. Only one-sided READ and WRITE touch
// slot words (they are PlainWords: never RMW'd by the NIC or the CPU); the
// group lock's NIC atomics are ALock's business.

#include <cstdint>

#include "absl/status/status.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/session.h"
#include "structures/hash_map/layout.h"

namespace structures::hash_map_internal {

// One RDMA READ of the group's slots (all of them, lock line excluded) into
// `out` (SlotLayout<V>::kSnapshotWords words): one NIC op, one round trip.
// The NIC copies 8-byte words in an unspecified order, so the copy may be
// torn; FindKey's checksums tell.
template <typename V>
absl::Status RemoteSnapshot(rdma::Session& s, rdma::RemotePtr group, uint64_t* out) {
  using L = SlotLayout<V>;
  return s.Read(group + L::kSlotsOffset, out, L::kSlotsBytes);
}

template <typename V>
rdma::RemotePtr SlotPtr(rdma::RemotePtr group, int slot) {
  return rdma::RemoteRef<Group<V>>::At(group).Field(&Group<V>::slots)[static_cast<size_t>(slot)].ptr();
}

// Writes a whole slot tuple with one RDMA WRITE. Caller holds the group lock.
//
// Ordering with the release: when `wait` is false the WRITE is posted without
// waiting (it must fit inline; otherwise this falls back to waiting). That is
// safe only because the caller then releases the group lock with ALock's
// remote Unlock, whose first step is an RDMA CAS on the lock line of the same
// group, hence on the same RC QP: RC executes a QP's requests in order at the
// responder, so the WRITE has landed before the CAS executes, and the CAS's
// completion (which Unlock waits for) comes after both. Anyone who acquires
// the lock next, natively or through the NIC, does so only after that CAS (or
// after a hand-over that Unlock sends once the CAS completed).
// `*posted_inline` says which way it went.
template <typename V>
absl::Status RemoteStoreSlot(rdma::Session& s, rdma::RemotePtr group, int slot, const uint64_t* words,
                             bool wait, bool* posted_inline) {
  using L = SlotLayout<V>;
  *posted_inline = false;
  const rdma::RemotePtr dst = SlotPtr<V>(group, slot);
  if (!wait && s.FitsInline(L::kBytes)) {
    rdma::Batch b(s, group.node());
    b.Write(dst, words, L::kBytes);
    *posted_inline = true;
    return b.PostWithoutWaiting();
  }
  return s.Write(dst, words, L::kBytes);
}

// The RDMA word accessor: the same interface as NativeGroup (native_path.h),
// over the thread's Session. Reads copy the group's slots into a private
// snapshot (`snap`, kSnapshotWords words) with one READ and scan the copy;
// the slot store is one WRITE.
template <typename V>
class RemoteGroup {
 public:
  RemoteGroup(rdma::Session& s, rdma::RemotePtr group, uint64_t* snap) : s_(s), group_(group), snap_(snap) {}

  absl::Status Find(uint64_t key, size_t start, bool verify, uint64_t* found, Lookup* l) {
    if (absl::Status st = RemoteSnapshot<V>(s_, group_, snap_); !st.ok()) return st;
    *l = FindKey<V>(snap_, key, start, verify, found);
    return absl::OkStatus();
  }
  // Under the lock. The READ costs the same either way; checking every slot
  // of the copy (CPU only) reports a writer that bypassed the lock as kTorn.
  absl::Status FindUnderLock(uint64_t key, size_t start, uint64_t* found, Lookup* l) {
    if (absl::Status st = RemoteSnapshot<V>(s_, group_, snap_); !st.ok()) return st;
    if (CountOccupied<V>(snap_) < 0) {
      l->kind = Lookup::kTorn;
      return absl::OkStatus();
    }
    *l = FindKey<V>(snap_, key, start, /*verify=*/false, found);
    return absl::OkStatus();
  }
  absl::Status Snapshot(uint64_t* out) { return RemoteSnapshot<V>(s_, group_, out); }
  // Under the lock: one WRITE, posted without waiting unless `wait` (or the
  // slot does not fit inline). See RemoteStoreSlot for why the release that
  // follows orders after it.
  absl::Status StoreSlot(int slot, const uint64_t* words, bool /*key_unchanged*/, bool wait) {
    bool inlined;
    return RemoteStoreSlot<V>(s_, group_, slot, words, wait, &inlined);
  }

 private:
  rdma::Session& s_;
  rdma::RemotePtr group_;
  uint64_t* snap_;
};

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_RDMA_PATH_H_
