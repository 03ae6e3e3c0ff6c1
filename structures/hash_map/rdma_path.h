#ifndef STRUCTURES_HASH_MAP_RDMA_PATH_H_
#define STRUCTURES_HASH_MAP_RDMA_PATH_H_

// The hash map's NIC path: how a thread reads and writes a node's units
// through its Session, remote or over the loopback QP. Only one-sided READ
// and WRITE touch slot words (they are PlainWords: never RMW'd by the NIC or
// the CPU); the unit locks' NIC atomics are ALock's business.

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/session.h"
#include "structures/hash_map/directory.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/placement.h"
#include "structures/hash_map/search.h"

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
  RemoteUnits(rdma::Session& s, rdma::RemotePtr base, uint64_t* win0, uint64_t* win1, const Geometry& g,
              DirectoryCopy* cache)
      : s_(s), base_(base), win_{win0, win1}, g_(g), cache_(cache), dir_(base + g.pool_units() * L::kUnitBytes) {}

  // The directory entry for `dir` from the client's cached copy (no I/O).
  // The copy may be stale; readers and writers notice by the epochs of the
  // state words they look at (layout.h) and then Refresh.
  absl::Status DirLookup(uint64_t dir, uint64_t* entry) {
    *entry = cache_->Lookup(dir);
    return absl::OkStatus();
  }
  // Re-reads the directory into the cache (ReadDirectory).
  absl::Status Refresh() { return ReadDirectory(cache_); }
  // A consistent copy of the directory: a seqlock read, in one doorbell, of
  // the version, the depth and segment count, the first 2^guess entries and
  // the version again (guess: the copy's depth). The responder executes a
  // QP's READs in order, so the first version is read before and the second
  // after the rest; the splitter's WRITEs land in the order version odd,
  // entries, depth, version even (PublishDirectory). Equal even versions
  // (only the lowest byte is ever non-zero, so no byte tearing) mean no
  // publish overlapped. Retried while a publish is in progress; re-read with
  // more entries if the depth grew. 1 round trip when the depth did not grow.
  absl::Status ReadDirectory(DirectoryCopy* d) {
    int guess = std::max(d->depth, g_.base_depth);
    for (int attempt = 0;; ++attempt) {
      uint64_t v1 = 0, v2 = 0, meta[2] = {0, 0};
      buf_.resize(size_t{1} << guess);
      rdma::Batch b(s_, base_.node());
      b.Read(dir_ + offsetof(DirectoryHeader, version), &v1, 8);
      b.Read(dir_ + offsetof(DirectoryHeader, depth), meta, 16);
      b.Read(dir_ + kDirEntriesOffset, buf_.data(), 8 * buf_.size());
      b.Read(dir_ + offsetof(DirectoryHeader, version), &v2, 8);
      if (absl::Status st = b.Execute(); !st.ok()) return st;
      const int depth = static_cast<int>(meta[0] & 0xff);
      // Every entry must fit the depth read with it (EntryFits: the one-byte
      // version may have wrapped between the two READs of it).
      const bool fits =
          depth > guess || std::all_of(buf_.begin(), buf_.begin() + (ptrdiff_t{1} << std::max(depth, 0)),
                                       [depth](uint64_t e) { return EntryFits(e, depth); });
      if ((v1 & 1) == 0 && v1 == v2 && depth <= g_.max_depth && fits) {
        if (depth <= guess) {
          d->version = v1;
          d->depth = depth;
          d->segments = static_cast<size_t>(meta[1]);
          d->entries.assign(buf_.begin(), buf_.begin() + (ptrdiff_t{1} << depth));
          return absl::OkStatus();
        }
        guess = depth;
        continue;
      }
      if (absl::Status st = DirectoryRetryWait(attempt, 4, 1 << 16); !st.ok()) return st;
    }
  }
  // Under the directory lock: publishes a change in one doorbell: version
  // odd, entries [first, first + n), depth and segments, version even. The
  // QP executes them in that order (the seqlock readers rely on it); waited.
  absl::Status PublishDirectory(uint64_t old_version, size_t first, const uint64_t* e, size_t n, int depth,
                                size_t segments) {
    const uint64_t meta[2] = {static_cast<uint64_t>(depth), segments};
    rdma::Batch b(s_, base_.node());
    b.Write64(dir_ + offsetof(DirectoryHeader, version), NextVersion(old_version));
    if (n > 0) b.Write(dir_ + kDirEntriesOffset + 8 * first, e, 8 * n);
    b.Write(dir_ + offsetof(DirectoryHeader, depth), meta, 16);
    b.Write64(dir_ + offsetof(DirectoryHeader, version), NextVersion(NextVersion(old_version)));
    return b.Execute();
  }
  // The segment count under the directory's seqlock: version, segments and
  // version again in one doorbell of in-order READs (a splitter's WRITE of the
  // count may land byte by byte), retried while a publish overlaps.
  absl::Status SegmentsInUse(size_t* n) {
    for (int attempt = 0;; ++attempt) {
      uint64_t v1 = 0, v2 = 0, segments = 0;
      rdma::Batch b(s_, base_.node());
      b.Read(dir_ + offsetof(DirectoryHeader, version), &v1, 8);
      b.Read(dir_ + offsetof(DirectoryHeader, segments), &segments, 8);
      b.Read(dir_ + offsetof(DirectoryHeader, version), &v2, 8);
      if (absl::Status st = b.Execute(); !st.ok()) return st;
      if ((v1 & 1) == 0 && v1 == v2) {
        *n = static_cast<size_t>(segments);
        return absl::OkStatus();
      }
      if (absl::Status st = DirectoryRetryWait(attempt, 4, 1 << 16); !st.ok()) return st;
    }
  }
  // Every slot of segment `seg` into `out` (S * kUnitSlotsWords words): one
  // READ of its units (lock lines are read and dropped). Under all of the
  // segment's unit locks, so the copy is whole.
  absl::Status ReadSegmentSlots(size_t seg, uint64_t* out) {
    const size_t words_per_unit = L::kUnitBytes / 8;
    buf_.resize(g_.segment_units * words_per_unit);
    if (absl::Status st = s_.Read(UnitPtr<V>(base_, seg * g_.segment_units), buf_.data(), 8 * buf_.size());
        !st.ok()) {
      return st;
    }
    for (size_t u = 0; u < g_.segment_units; ++u) {
      std::memcpy(out + u * L::kUnitSlotsWords, buf_.data() + u * words_per_unit + L::kSlotsOffset / 8,
                  L::kUnitSlotsBytes);
    }
    return absl::OkStatus();
  }
  // Writes every slot of segment `seg` from `in`: one WRITE per unit (its
  // slots, not its lock line), up to 64 per doorbell, each doorbell waited,
  // so everything has landed when this returns.
  absl::Status WriteSegmentSlots(size_t seg, const uint64_t* in) {
    constexpr size_t kPerDoorbell = 64;
    for (size_t u0 = 0; u0 < g_.segment_units; u0 += kPerDoorbell) {
      rdma::Batch b(s_, base_.node());
      for (size_t u = u0; u < std::min(g_.segment_units, u0 + kPerDoorbell); ++u) {
        b.Write(UnitPtr<V>(base_, seg * g_.segment_units + u) + L::kSlotsOffset, in + u * L::kUnitSlotsWords,
                L::kUnitSlotsBytes);
      }
      if (absl::Status st = b.Execute(); !st.ok()) return st;
    }
    return absl::OkStatus();
  }

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
  absl::Status Find(const Placement& p, int windows, uint64_t epoch, bool check_epoch, uint64_t key, bool verify,
                    uint64_t* found, Lookup* l) {
    const uint64_t* w0 = win_[0];
    const uint64_t* w1 = win_[1];
    *l = ScanWindows<V>([w0](size_t slot, size_t x) { return w0[slot * L::kWords + x]; },
                        [w1](size_t slot, size_t x) { return w1[slot * L::kWords + x]; }, key, p, windows, epoch,
                        check_epoch, verify, found);
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
  absl::Status FindUnderLock(const Placement& p, int which, bool fetched, uint64_t epoch, uint64_t key,
                             uint64_t* found, Lookup* l) {
    if (!fetched) {
      if (absl::Status st = s_.Read(WindowPtr<V>(base_, p.c[which]), win_[which], L::kWindowBytes); !st.ok()) {
        return st;
      }
    }
    if (CountOccupied<V>(win_[which], kSlotsPerWindow) < 0) {
      l->kind = Lookup::kTorn;
      return absl::OkStatus();
    }
    *l = FindKey<V>(win_[which], key, p.c[which].side, p.start, epoch, /*verify=*/false, found);
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
  Geometry g_;
  DirectoryCopy* cache_;
  rdma::RemotePtr dir_;
  std::vector<uint64_t> buf_;  // directory and segment copies
};

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_RDMA_PATH_H_
