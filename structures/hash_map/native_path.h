#ifndef STRUCTURES_HASH_MAP_NATIVE_PATH_H_
#define STRUCTURES_HASH_MAP_NATIVE_PATH_H_

// The hash map's CPU path: how a thread on a unit's home node reads and
// writes the unit's slots with CPU loads and stores. The NIC may copy the
// same words at the same time (remote READs and WRITEs), so every access is an
// 8-byte atomic load or plain store through rdma::PlainWord (std::atomic_ref;
// the soft NIC uses 8-byte __atomic accesses, so TSan sees no race). No word
// of a slot is ever read-modify-written, by either side.

#include <cstddef>
#include <cstdint>
#include <thread>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "structures/hash_map/directory.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/placement.h"
#include "structures/hash_map/search.h"

namespace structures::hash_map_internal {

// Scans side `side`'s window of unit `u` in place for `key` (ScanWindow in
// layout.h: the argument for readers without the lock is there): one atomic
// 8-byte load per word looked at, no copy. A hit at the first probe touches
// one slot (its state, key, value and checksum words: one or two cache
// lines); a miss loads the window's 16 state words (and the key words of
// occupied slots). Without the lock, the found slot's words are checked
// against its checksum when `verify`; under the lock (writers) the slots are
// stable, `verify` = false.
template <typename V>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup NativeFind(const Unit<V>& u, int side, uint64_t key, size_t start,
                                                      uint64_t epoch, bool verify, uint64_t* found) {
  const auto* const slots = u.slots + SlotLayout<V>::WindowFirstSlot(side);
  return ScanWindow<V>([slots](size_t slot, size_t w) { return slots[slot].w[w].Load(std::memory_order_acquire); },
                       key, side, start, epoch, verify, found);
}

// A reader's search of the first `windows` windows of `p` in place
// (ScanWindows), without the lock. The start slots of both windows are
// prefetched first, so the second window's likely line is on its way while
// the first is scanned.
template <typename V>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline Lookup NativeFindBoth(const Unit<V>* units, const Placement& p, int windows,
                                                          uint64_t epoch, bool check_epoch, uint64_t key,
                                                          bool verify, uint64_t* found) {
  const auto* const s0 = units[p.c[0].unit].slots + SlotLayout<V>::WindowFirstSlot(p.c[0].side);
  const auto* const s1 = units[p.c[1].unit].slots + SlotLayout<V>::WindowFirstSlot(p.c[1].side);
  __builtin_prefetch(s0 + ScanSlot(p.c[0].side, p.start, 0));
  if (windows > 1) __builtin_prefetch(s1 + ScanSlot(p.c[1].side, p.start, 0));
  return ScanWindows<V>([s0](size_t slot, size_t w) { return s0[slot].w[w].Load(std::memory_order_acquire); },
                        [s1](size_t slot, size_t w) { return s1[slot].w[w].Load(std::memory_order_acquire); },
                        key, p, windows, epoch, check_epoch, verify, found);
}

// A seqlock read of the directory in place: `read()` (8-byte atomic loads
// of directory words; true when what it loaded is consistent in itself) runs
// between two loads of the version, and is repeated, with
// DirectoryRetryWait's policy, until both loads see the same even version
// and read() returns true. read() writes its outputs on every attempt, so
// after an error they hold an unvalidated read: use them only on OK.
template <typename Read>
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status NativeSeqlockRead(const DirectoryHeader& h, Read&& read) {
  for (int failed = 0;; ++failed) {
    const uint64_t v1 = h.version.Load(std::memory_order_acquire);
    if ((v1 & 1) == 0) {
      const bool consistent = read();
      if (ABSL_PREDICT_TRUE(h.version.Load(std::memory_order_acquire) == v1 && consistent)) {
        return absl::OkStatus();
      }
    }
    if (absl::Status s = DirectoryRetryWait(failed, 16, 1 << 20); !s.ok()) return s;
  }
}

// The directory entry for directory hash `dir`, read in place: a seqlock read
// of the version, the global depth, the entry and the version again, retried
// while a splitter is changing the directory (odd version, or a version that
// moved). 8-byte atomic loads; a NIC splitter's WRITEs may land byte by byte,
// which the seqlock covers (its WRITEs are ordered on one QP: version odd,
// entries, depth, version even; rdma_path.h). The version is one byte, so
// 128 publishes between a reader's two loads of it (a reader preempted during
// a burst of splits) bring it back to the same value: then the depth may be
// older than the entry, and an entry from a doubling names the key's old
// segment at a local depth above the depth read, where the key no longer is
// if its next hash bit is set. An entry's local depth never exceeds the global
// depth, so such a read is retried (EntryFits). DeadlineExceeded if the
// directory stays odd for about a second (a splitter died mid-publish).
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status NativeDirLookup(const DirectoryHeader& h,
                                                                 const rdma::PlainWord* entries, int max_depth,
                                                                 uint64_t dir, uint64_t* entry) {
  return NativeSeqlockRead(h, [&] {
    const int d = std::min(static_cast<int>(h.depth.Load(std::memory_order_acquire) & 0xff), max_depth);
    *entry = entries[dir & ((uint64_t{1} << d) - 1)].Load(std::memory_order_acquire);
    return EntryFits(*entry, d);
  });
}

// The directory as it is now, in place (the caller holds the directory lock,
// so nothing changes it meanwhile).
inline void NativeReadDirectory(const DirectoryHeader& h, const rdma::PlainWord* entries, DirectoryCopy* d) {
  d->version = h.version.Load(std::memory_order_acquire);
  d->depth = static_cast<int>(h.depth.Load(std::memory_order_acquire));
  d->segments = static_cast<size_t>(h.segments.Load(std::memory_order_acquire));
  d->entries.resize(size_t{1} << d->depth);
  for (size_t i = 0; i < d->entries.size(); ++i) d->entries[i] = entries[i].Load(std::memory_order_acquire);
}

// Publishes a directory change (the caller holds the directory lock): the
// version goes odd, entries [first, first + n) take `e`, the depth and
// segment count change, the version goes even. Release stores, in that order
// (a reader that sees an entry sees every store the splitter made before).
inline void NativePublishDirectory(DirectoryHeader& h, rdma::PlainWord* entries, uint64_t old_version,
                                   size_t first, const uint64_t* e, size_t n, int depth, size_t segments) {
  h.version.Store(NextVersion(old_version), std::memory_order_release);
  for (size_t i = 0; i < n; ++i) entries[first + i].Store(e[i], std::memory_order_release);
  h.depth.Store(static_cast<uint64_t>(depth), std::memory_order_release);
  h.segments.Store(segments, std::memory_order_release);
  h.version.Store(NextVersion(NextVersion(old_version)), std::memory_order_release);
}

// Copies the unit's slots into `out` (SlotLayout<V>::kUnitSlotsWords words),
// one atomic load per word (Size only). Without the lock the copy may be
// torn; CountOccupied's checksums tell.
template <typename V>
void NativeSnapshot(const Unit<V>& u, uint64_t* out) {
  using L = SlotLayout<V>;
  for (size_t s = 0; s < kSlotsPerUnit; ++s) {
    for (size_t i = 0; i < L::kWords; ++i) out[s * L::kWords + i] = u.slots[s].w[i].Load(std::memory_order_acquire);
  }
}

// Stores a slot tuple (from SlotLayout<V>::MakeSlot) into slot `slot` of the
// unit; `key_unchanged` when the slot already holds the tuple's key (an
// overwrite of a present key). Caller holds the unit lock (the only writer),
// so the slot's words are stable and nothing needs to be re-read or verified.
// Only words that can change are stored: the key word is skipped when it stays
// the same (an overwrite); storing the value it already holds would change
// nothing any reader can see. The checksum word goes last: its store is the
// write's linearization point for readers (see ScanWindow), and the release
// ordering makes the tuple's other words visible to a CPU reader that loads
// the new checksum (a NIC reader relies on the checksum match alone).
template <typename V>
void NativeStoreSlot(Unit<V>& u, size_t slot, const uint64_t* words, bool key_unchanged) {
  using L = SlotLayout<V>;
  auto& s = u.slots[slot];
  s.w[L::kStateWord].Store(words[L::kStateWord], std::memory_order_release);
  if (!key_unchanged) s.w[L::kKeyWord].Store(words[L::kKeyWord], std::memory_order_release);
  for (size_t i = L::kValueWord; i < L::kChecksumWord; ++i) s.w[i].Store(words[i], std::memory_order_release);
  s.w[L::kChecksumWord].Store(words[L::kChecksumWord], std::memory_order_release);
}

// The native word accessor: a node's part in place, read and written with CPU
// loads and stores. The same interface as RemoteUnits (rdma_path.h), so the
// client's algorithm is written once over either. No method fails; they
// return Status for the shared interface.
template <typename V>
class NativeUnits {
  using L = SlotLayout<V>;

 public:
  NativeUnits(Unit<V>* units, const Geometry& g)
      : units_(units),
        g_(g),
        dir_(reinterpret_cast<DirectoryHeader*>(reinterpret_cast<char*>(units) + g.pool_units() * L::kUnitBytes)),
        entries_(reinterpret_cast<rdma::PlainWord*>(reinterpret_cast<char*>(dir_) + kDirEntriesOffset)) {}

  // The part's first unit.
  Unit<V>* units() const { return units_; }
  // The directory entry for `dir` (NativeDirLookup: always the current one).
  absl::Status DirLookup(uint64_t dir, uint64_t* entry) {
    return NativeDirLookup(*dir_, entries_, g_.max_depth, dir, entry);
  }
  // Nothing cached natively: lookups read the directory in place.
  absl::Status Refresh() { return absl::OkStatus(); }
  // Under the directory lock: the whole directory.
  absl::Status ReadDirectory(DirectoryCopy* d) {
    NativeReadDirectory(*dir_, entries_, d);
    return absl::OkStatus();
  }
  // Under the directory lock: publishes a change (NativePublishDirectory).
  absl::Status PublishDirectory(uint64_t old_version, size_t first, const uint64_t* e, size_t n, int depth,
                                size_t segments) {
    NativePublishDirectory(*dir_, entries_, old_version, first, e, n, depth, segments);
    return absl::OkStatus();
  }
  // The segment count, under the directory's seqlock (a NIC splitter's WRITE
  // of it may land byte by byte).
  absl::Status SegmentsInUse(size_t* n) {
    return NativeSeqlockRead(*dir_, [&] {
      *n = static_cast<size_t>(dir_->segments.Load(std::memory_order_acquire));
      return true;
    });
  }
  // Every slot of segment `seg`'s units into `out` (S * kUnitSlotsWords
  // words). Under all of the segment's unit locks: the words are stable.
  absl::Status ReadSegmentSlots(size_t seg, uint64_t* out) {
    for (size_t u = 0; u < g_.segment_units; ++u) {
      NativeSnapshot<V>(units_[seg * g_.segment_units + u], out + u * L::kUnitSlotsWords);
    }
    return absl::OkStatus();
  }
  // Stores every slot of segment `seg` from `in`, each slot in
  // NativeStoreSlot's order (state first, checksum last), so a reader without
  // the lock sees, per slot, the old epoch and tuple, the new epoch (stale:
  // retry), or a mix whose checksum does not match (torn: retry).
  absl::Status WriteSegmentSlots(size_t seg, const uint64_t* in) {
    for (size_t u = 0; u < g_.segment_units; ++u) {
      for (size_t s = 0; s < kSlotsPerUnit; ++s) {
        NativeStoreSlot<V>(units_[seg * g_.segment_units + u], s, in + (u * kSlotsPerUnit + s) * L::kWords,
                           /*key_unchanged=*/false);
      }
    }
    return absl::OkStatus();
  }

  // A reader's search of the first `windows` windows of `p` for `key`,
  // without the lock (NativeFindBoth).
  absl::Status Find(const Placement& p, int windows, uint64_t epoch, bool check_epoch, uint64_t key, bool verify,
                    uint64_t* found, Lookup* l) {
    *l = NativeFindBoth<V>(units_, p, windows, epoch, check_epoch, key, verify, found);
    return absl::OkStatus();
  }
  // Nothing to fetch ahead natively: the windows are scanned in place.
  absl::Status FetchWindows(const Placement&, int) { return absl::OkStatus(); }
  // A lock holder's scan of window `which`: the slots are stable, no checksum
  // is needed. `fetched` is moot natively.
  absl::Status FindUnderLock(const Placement& p, int which, bool /*fetched*/, uint64_t epoch, uint64_t key,
                             uint64_t* found, Lookup* l) {
    *l = NativeFind<V>(units_[p.c[which].unit], p.c[which].side, key, p.start, epoch, /*verify=*/false, found);
    return absl::OkStatus();
  }
  // Every slot of unit `unit`, into `out` (SlotLayout<V>::kUnitSlotsWords).
  absl::Status Snapshot(size_t unit, uint64_t* out) {
    NativeSnapshot<V>(units_[unit], out);
    return absl::OkStatus();
  }
  // Stores a slot tuple under the unit's lock (NativeStoreSlot). `wait` is moot.
  absl::Status StoreSlot(size_t unit, size_t slot, const uint64_t* words, bool key_unchanged, bool /*wait*/) {
    NativeStoreSlot<V>(units_[unit], slot, words, key_unchanged);
    return absl::OkStatus();
  }

 private:
  Unit<V>* units_;
  Geometry g_;
  DirectoryHeader* dir_;
  rdma::PlainWord* entries_;
};

}  // namespace structures::hash_map_internal

#endif  // STRUCTURES_HASH_MAP_NATIVE_PATH_H_
