#ifndef STRUCTURES_HASH_MAP_CLIENT_H_
#define STRUCTURES_HASH_MAP_CLIENT_H_

// One thread's handle on a HashMap (hash_map.h has the contract). The
// algorithm is written once, over a unit accessor: NativeUnits
// (native_path.h: CPU loads and stores in place) or RemoteUnits
// (rdma_path.h: READs into private copies, one WRITE per slot). Routing and
// the optimistic read loop are StructureClient's (structures/common/client.h);
// a split's pure steps are in split.h.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/session.h"
#include "structures/common/client.h"
#include "structures/common/held_locks.h"
#include "structures/hash_map/directory.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/placement.h"
#include "structures/hash_map/search.h"
#include "structures/hash_map/split.h"
#include "structures/hash_map/native_path.h"
#include "structures/hash_map/policy.h"
#include "structures/hash_map/rdma_path.h"
#include "util/status_macros.h"

namespace structures::hash_map_internal {

// Not thread-safe; use one per thread (each with the thread's own Session).
// Every operation is linearizable with every other operation of every client
// on every path. Made by HashMap::NewClient. `Checks` is ShippedChecks except
// in tests (policy.h).
template <typename V, typename Checks>
class BasicHashMapClient {
  using L = SlotLayout<V>;
  using Unit = hash_map_internal::Unit<V>;
  // Windows a reader looks in (2; 1 only in a test-only mutant).
  static constexpr int kReaderWindows = Checks::kReadBothWindows ? 2 : 1;

 public:
  static constexpr size_t kUnitBytes = L::kUnitBytes;
  static constexpr size_t kSlotsPerGroup = hash_map_internal::kSlotsPerGroup;

  // Counters of the map's growth as this client saw it (plain; read by the
  // client's thread or after it stops).
  struct GrowthStats {
    uint64_t stale = 0;      // operations that met a newer epoch and retried
    uint64_t refreshes = 0;  // directory re-reads (NIC paths)
    uint64_t splits = 0;     // segments this client split
  };

  BasicHashMapClient(StructureClient common, const Geometry& g)
      : c_(std::move(common)), g_(g) {
    for (int n = 0; n < c_.num_nodes(); ++n) dirs_.push_back(DirectoryCopy::Initial(g_));
    // This node's part, in place: what every native operation starts from.
    Route r;
    if (c_.RouteTo(c_.node().id(), Path::kNative, &r).ok()) {
      local_.emplace(&rdma::RemoteRef<Unit>::At(r.base).Local(c_.node().id()), g_);
    }
  }
  BasicHashMapClient(const BasicHashMapClient&) = delete;
  BasicHashMapClient& operator=(const BasicHashMapClient&) = delete;

  // The value bound to `key`, or nullopt. Lock-free in the common case.
  absl::StatusOr<std::optional<V>> Get(uint64_t key, Path path = Path::kAuto) {
    Op op;
    RETURN_IF_ERROR(RouteFor(key, path, &op));
    if (op.route.native()) {
      // The common case, inlined: `w` never leaves this frame, so the found
      // slot's words can stay in registers, and the value is constructed in
      // place in the result (copies through memory with mismatched widths
      // stall store forwarding; that was a measurable part of a cached get).
      uint64_t w[L::kWords] = {};  // (every path that reads it fills it; GCC cannot always tell)
      const Lookup l = NativeFindBoth<V>(LocalUnits(), op.p, kReaderWindows, op.epoch,
                                                            Checks::kReadersCheckEpoch, key, Checks::kVerifyReads, w);
      if (l.kind == Lookup::kFound) {
        return absl::StatusOr<std::optional<V>>(absl::in_place, L::DecodeValue(w + L::kValueWord));
      }
      if (l.kind == Lookup::kAbsent) return absl::StatusOr<std::optional<V>>(absl::in_place);
    }
    uint64_t words[L::kWords];
    bool found = false;
    RETURN_IF_ERROR(FindUnlocked(key, path, op, words, &found));
    if (!found) return std::optional<V>();
    return std::optional<V>(L::DecodeValue(words + L::kValueWord));
  }

  absl::StatusOr<bool> Contains(uint64_t key, Path path = Path::kAuto) {
    Op op;
    RETURN_IF_ERROR(RouteFor(key, path, &op));
    uint64_t words[L::kWords];
    bool found = false;
    RETURN_IF_ERROR(FindUnlocked(key, path, op, words, &found));
    return found;
  }

  // Binds key to value. Returns the previous value, or nullopt if the key was
  // absent. When the key is absent and both its windows are full, the key's
  // segment is split (the map grows) and the put retried; ResourceExhausted
  // only when the part's pool of segments is used up (or growth is off).
  absl::StatusOr<std::optional<V>> Put(uint64_t key, const V& value, Path path = Path::kAuto) {
    Write w{WriteKind::kPut, &value, {}, false};
    RETURN_IF_ERROR(WriteKey(key, path, w));
    return std::move(w.prev);
  }

  // Binds key to value only if the key is absent. True if it was inserted
  // (then it was absent); false if present (nothing changes).
  // Grows and ResourceExhausted as Put.
  absl::StatusOr<bool> Insert(uint64_t key, const V& value, Path path = Path::kAuto) {
    Write w{WriteKind::kInsert, &value, {}, false};
    RETURN_IF_ERROR(WriteKey(key, path, w));
    return w.inserted;
  }

  // Unbinds key. Returns the previous value, or nullopt if it was absent.
  absl::StatusOr<std::optional<V>> Erase(uint64_t key, Path path = Path::kAuto) {
    Write w{WriteKind::kErase, nullptr, {}, false};
    RETURN_IF_ERROR(WriteKey(key, path, w));
    return std::move(w.prev);
  }

  // Entries stored on `node` (natively when it is the client's node, else with
  // RDMA READs of the part in chunks). Exact when no writer runs. Under
  // concurrent writers each unit is counted at its own instant during the
  // call, so the result may differ from the size at any single instant by at
  // most the number of writes that overlap the call, plus the entries a split
  // overlapping the call moves (they may be counted twice or not at all).
  absl::StatusOr<size_t> Size(rdma::NodeId node) {
    Op op;
    RETURN_IF_ERROR(c_.RouteTo(node, Path::kAuto, &op.route));
    size_t segments = 0;
    RETURN_IF_ERROR(WithAccessor(op, [&](auto& units) { return units.SegmentsInUse(&segments); }));
    const size_t units_in_use = std::min(segments, g_.max_segments) * g_.segment_units;
    size_t total = 0;
    const size_t chunk_units = std::max<size_t>(1, (size_t{256} << 10) / kUnitBytes);
    std::vector<uint64_t> buf;
    for (size_t u0 = 0; u0 < units_in_use; u0 += chunk_units) {
      const size_t n = std::min(chunk_units, units_in_use - u0);
      if (!op.route.native()) {  // one READ for the whole chunk
        buf.resize(n * kUnitBytes / 8);
        RETURN_IF_ERROR(c_.session()->Read(op.route.base + u0 * kUnitBytes, buf.data(), n * kUnitBytes));
      }
      for (size_t u = 0; u < n; ++u) {
        const size_t unit = u0 + u;
        int count;
        if (op.route.native()) {
          NativeSnapshot<V>(LocalUnits()[unit], unit_snap_.data());
          count = CountOccupied<V>(unit_snap_.data(), kSlotsPerUnit);
        } else {
          count = CountOccupied<V>(buf.data() + (u * kUnitBytes + L::kSlotsOffset) / 8,
                                                      kSlotsPerUnit);
        }
        if (count < 0) {  // torn: read this unit again on its own
          RETURN_IF_ERROR(WithAccessor(op, [&](auto& units) {
            return c_.ReadValidated(op.route, UnitLock(op, unit), [&](bool* valid) {
              RETURN_IF_ERROR(units.Snapshot(unit, unit_snap_.data()));
              count = CountOccupied<V>(unit_snap_.data(), kSlotsPerUnit);
              *valid = count >= 0;
              return absl::OkStatus();
            }, [&] { return Broken(op, unit); });
          }));
        }
        total += static_cast<size_t>(count);
      }
    }
    return total;
  }

  // Segments in use on `node` (each geometry().segment_units units): how far
  // its part has grown.
  absl::StatusOr<size_t> SegmentsInUse(rdma::NodeId node) {
    Op op;
    RETURN_IF_ERROR(c_.RouteTo(node, Path::kAuto, &op.route));
    size_t segments = 0;
    RETURN_IF_ERROR(WithAccessor(op, [&](auto& units) { return units.SegmentsInUse(&segments); }));
    return segments;
  }

  rdma::NodeId node() const { return c_.node().id(); }
  const ReadStats& read_stats() const { return c_.stats(); }
  const GrowthStats& growth_stats() const { return growth_; }

  // Re-reads node `node`'s directory now (NIC paths cache it; natively it is
  // always read in place, so this does nothing). Operations refresh by
  // themselves when they meet a split; this is for a client that wants the
  // newest layout ahead of time.
  absl::Status RefreshDirectory(rdma::NodeId node) {
    Op op;
    RETURN_IF_ERROR(c_.RouteTo(node, Path::kAuto, &op.route));
    return WithAccessor(op, [&](auto& units) { return units.Refresh(); });
  }

 private:
  // One operation's target: the route to the key's home and the key's
  // placement there (two candidate windows, as units of the part, and the
  // scan start), with the segment the directory gave and its epoch.
  struct Op {
    Route route;
    Placement p;
    size_t segment = 0;
    int depth = 0;       // the segment's local depth per the directory used
    uint64_t epoch = 0;  // EpochBits(depth - base depth): what its state words must carry
  };
  // One Put, Insert or Erase: what it asks for and what it found.
  enum class WriteKind { kPut, kInsert, kErase };
  struct Write {
    WriteKind kind;
    const V* value;           // kPut, kInsert
    std::optional<V> prev;    // kPut, kErase: the value the key had
    bool inserted = false;    // kInsert
  };
  // How a writer's attempt ended.
  enum class Outcome { kDone, kStale, kFull };

  // Routes `key` and looks its segment up: natively in the directory in
  // place, on the NIC paths in the client's cached copy. Always inlined: out
  // of line, the Placement went through the stack in mismatched widths and
  // the stalled store forwarding cost about a third of a native get.
  ABSL_ATTRIBUTE_ALWAYS_INLINE absl::Status RouteFor(uint64_t key, Path path, Op* op) {
    op->p = Place(key, c_.num_nodes(), g_.segment_units);
    RETURN_IF_ERROR(c_.RouteTo(op->p.node, path, &op->route));
    uint64_t e = 0;  // set on both branches; initialized for -Wmaybe-uninitialized
    if (op->route.native()) {
      RETURN_IF_ERROR(local_->DirLookup(op->p.dir, &e));
    } else {
      e = dirs_[op->route.home].Lookup(op->p.dir);
    }
    op->segment = EntrySegment(e);
    op->depth = EntryDepth(e);
    if (ABSL_PREDICT_FALSE(op->segment >= g_.max_segments || op->depth < g_.base_depth ||
                           op->depth > g_.max_depth)) {
      return c_.Corrupt(absl::StrCat("directory entry ", e, " of node ", op->route.home, " is out of range"));
    }
    const size_t first_unit = op->segment * g_.segment_units;
    op->p.c[0].unit += first_unit;
    op->p.c[1].unit += first_unit;
    op->epoch = EpochBits(op->depth - g_.base_depth);
    return absl::OkStatus();
  }

  // After an attempt met a newer epoch: count it, back off after a few, and
  // refresh the NIC path's directory copy (natively the next lookup reads it
  // in place). A split in progress (old segment restamped, directory not yet
  // published) keeps readers here briefly.
  absl::Status AfterStale(const Op& op, int round) {
    ++growth_.stale;
    if (round >= 4) std::this_thread::yield();
    if (round >= (1 << 20)) {
      return absl::DeadlineExceededError(absl::StrCat("HashMap: node ", op.route.home,
                                                      "'s directory kept changing under the operation"));
    }
    if (op.route.native()) return absl::OkStatus();
    ++growth_.refreshes;
    return WithAccessor(op, [&](auto& units) { return units.Refresh(); });
  }

  // This node's part in place (a native route's home is this node; its part
  // does not move while the client lives).
  Unit* LocalUnits() const { return local_->units(); }
  rdma::RemotePtr DirLock(const Op& op) const { return op.route.base + g_.pool_units() * kUnitBytes; }
  rdma::RemotePtr UnitLock(const Op& op, size_t unit) const {
    return UnitPtr<V>(op.route.base, unit);  // the lock is the unit's first line
  }

  // Runs `f` with the accessor for `op`'s path: the one native/NIC branch.
  template <typename F>
  absl::Status WithAccessor(const Op& op, F&& f) {
    if (op.route.native()) return f(*local_);
    RemoteUnits<V> units(*c_.session(), op.route.base, win_[0].data(), win_[1].data(), g_,
                                            &dirs_[op.route.home]);
    return f(units);
  }

  std::string Broken(const Op& op, size_t unit) const {
    return absl::StrCat("unit ", unit, " on node ", op.route.home, " has a slot whose checksum does not match");
  }

  // A full key's error when the map cannot grow (growth off, or `why`).
  absl::Status Full(uint64_t key, const Op& op, absl::string_view why) const {
    return absl::ResourceExhaustedError(absl::StrCat(
        "HashMap: key ", key, " may live in units ", op.p.c[0].unit, " and ", op.p.c[1].unit, " on node ",
        op.route.home, ", both its windows of ", kSlotsPerWindow, " slots are full, and ", why,
        "; the key was not stored and nothing stored was lost (see docs/design.md §9.2.6)"));
  }

  // Get/Contains: optimistic reads of both windows (NIC: one doorbell, 1
  // round trip) until the key is found in a slot whose checksum matches or
  // is absent, else one read under both unit locks. `*found` says which;
  // when found, the slot's words are in `words`. A stale epoch ends the
  // round: the directory is looked up again and the read starts over.
  absl::Status FindUnlocked(uint64_t key, Path path, Op& op, uint64_t* words, bool* found) {
    for (int round = 0;; ++round) {
      Lookup l;
      RETURN_IF_ERROR(WithAccessor(op, [&](auto& units) {
        return c_.ReadValidatedUnder(
            [&](auto&& step) {
              HeldLocks held(c_.lock(), op.route);
              bool fetched[2];
              absl::Status s = LockUnits(op, units, /*chain=*/false, held, fetched);
              if (s.ok()) s = step();
              return held.Release(std::move(s));
            },
            [&](bool* valid) {
              RETURN_IF_ERROR(units.FetchWindows(op.p, kReaderWindows));
              RETURN_IF_ERROR(units.Find(op.p, kReaderWindows, op.epoch, Checks::kReadersCheckEpoch, key,
                                         Checks::kVerifyReads, words, &l));
              *valid = l.kind != Lookup::kTorn;
              return absl::OkStatus();
            },
            [&] { return Broken(op, op.p.c[0].unit); });
      }));
      if (l.kind != Lookup::kStale) {
        *found = l.kind == Lookup::kFound;
        return absl::OkStatus();
      }
      RETURN_IF_ERROR(AfterStale(op, round));
      RETURN_IF_ERROR(RouteFor(key, path, &op));
    }
  }

  // Takes the locks of both candidate units into `held` (one lock when they
  // are the same unit), in unit order (address order, so two writers never
  // wait for each other crosswise). With `chain` on the NIC path, each
  // acquire READs its unit's window(s) in its own round trip (ALock's
  // LockAndRead); fetched[w] says whether window w was read that way, as a
  // holder. On error `held` keeps what was taken, for its Release.
  template <typename Units>
  absl::Status LockUnits(const Op& op, Units& units, bool chain, HeldLocks& held, bool* fetched) {
    constexpr bool kNic = std::is_same_v<Units, RemoteUnits<V>>;
    const Candidate* c = op.p.c;
    fetched[0] = fetched[1] = false;
    std::array<rdma::ChainedRead, 2> reads;
    size_t n = 0;
    if (op.p.same_unit()) {
      if constexpr (kNic) {
        if (chain) {
          reads = {units.WindowRead(op.p, 0), units.WindowRead(op.p, 1)};
          n = 2;
        }
      }
      RETURN_IF_ERROR(held.LockAndRead(UnitLock(op, c[0].unit), absl::MakeConstSpan(reads.data(), n), &fetched[0]));
      fetched[1] = fetched[0];
      return absl::OkStatus();
    }
    const int lo = c[0].unit < c[1].unit ? 0 : 1;
    const int hi = 1 - lo;
    if constexpr (kNic) {
      if (chain) {
        reads = {units.WindowRead(op.p, lo), units.WindowRead(op.p, hi)};
        n = 1;
      }
    }
    RETURN_IF_ERROR(held.LockAndRead(UnitLock(op, c[lo].unit), absl::MakeConstSpan(reads.data(), n), &fetched[lo]));
    return held.LockAndRead(UnitLock(op, c[hi].unit), absl::MakeConstSpan(reads.data() + 1, n), &fetched[hi]);
  }

  // The writer protocol: lock both candidate units, look for the key in both
  // windows, store one slot as `w` asks, unlock. A new key goes to the window
  // with more free slots, main group first. Under the locks the state words
  // must carry the directory's epoch, else the write retries with a fresh
  // directory; a key whose windows are full splits its segment and retries.
  // Native stores are CPU stores, checksum last; the NIC path's one WRITE is
  // ordered before the unlock by the QP (rdma_path.h).
  absl::Status WriteKey(uint64_t key, Path path, Write& w) {
    for (int round = 0;; ++round) {
      Op op;
      RETURN_IF_ERROR(RouteFor(key, path, &op));
      Outcome out = Outcome::kDone;
      RETURN_IF_ERROR(WithAccessor(op, [&](auto& units) { return WriteOnce(op, units, key, w, &out); }));
      switch (out) {
        case Outcome::kDone:
          return absl::OkStatus();
        case Outcome::kStale:
          RETURN_IF_ERROR(AfterStale(op, round));
          break;
        case Outcome::kFull:
          if (!g_.can_grow()) {
            return Full(key, op,
                        absl::StrCat("the map cannot grow (max_groups_per_node leaves no room for a segment of ",
                                     g_.segment_units * kGroupsPerUnit,
                                     " groups beyond groups_per_node)"));
          }
          RETURN_IF_ERROR(Split(key, op));
          break;
      }
    }
  }

  // One attempt of WriteKey, with both unit locks held.
  template <typename Units>
  absl::Status WriteOnce(const Op& op, Units& units, uint64_t key, Write& w, Outcome* out) {
    if (op.route.native() && !Checks::kNativeWritersLock) {  // a test-only mutant
      const bool none[2] = {false, false};
      return WriteUnderLocks(op, units, none, key, w, out);
    }
    HeldLocks held(c_.lock(), op.route);
    bool fetched[2];
    absl::Status s = LockUnits(op, units, /*chain=*/true, held, fetched);
    if (s.ok()) s = WriteUnderLocks(op, units, fetched, key, w, out);
    return held.Release(std::move(s));
  }

  template <typename Units>
  absl::Status WriteUnderLocks(const Op& op, Units& units, const bool* fetched, uint64_t key, Write& w,
                               Outcome* out) {
    uint64_t found[L::kWords] = {};  // the key's slot as read (kFound)
    Lookup l[2];
    int which = -1;  // the window the key is in
    for (int w = 0; w < 2 && which < 0; ++w) {
      RETURN_IF_ERROR(units.FindUnderLock(op.p, w, fetched[w], op.epoch, key, found, &l[w]));
      if (l[w].kind == Lookup::kTorn) return c_.Corrupt(Broken(op, op.p.c[w].unit));
      if (l[w].kind == Lookup::kStale) {
        *out = Outcome::kStale;
        return absl::OkStatus();
      }
      if (l[w].kind == Lookup::kFound) which = w;
    }
    if (which < 0) which = l[1].free_count > l[0].free_count ? 1 : 0;
    const Lookup& lw = l[which];
    const bool overwrite = lw.kind == Lookup::kFound;  // else a free slot, if any
    int at;
    if (overwrite) {
      if (w.kind == WriteKind::kInsert) return absl::OkStatus();
      w.prev = L::DecodeValue(found + L::kValueWord);
      at = lw.slot;
    } else {
      if (w.kind == WriteKind::kErase) return absl::OkStatus();
      if (lw.first_free < 0) {
        *out = Outcome::kFull;
        return absl::OkStatus();
      }
      w.inserted = true;
      at = lw.first_free;
    }
    const V* value = w.kind == WriteKind::kErase ? nullptr : w.value;  // null: the slot becomes empty
    uint64_t words[L::kWords];
    L::MakeSlot(overwrite ? found[L::kStateWord] : lw.free_state, key, value, words);
    const bool key_unchanged = overwrite && value != nullptr;
    const Candidate& c = op.p.c[which];
    const size_t slot = L::WindowFirstSlot(c.side) + static_cast<size_t>(at);
    if constexpr (!Checks::kReleaseAfterRemoteWrite) {
      if (!op.route.native()) {
        // Test-only mutant: release the unit first, then write.
        RETURN_IF_ERROR(c_.lock().Unlock(UnitLock(op, c.unit)));
        return units.StoreSlot(c.unit, slot, words, key_unchanged, /*wait=*/true);
      }
    }
    return units.StoreSlot(c.unit, slot, words, key_unchanged, /*wait=*/false);
  }

  // Splits the segment `op` found full into it and a fresh segment, unless
  // someone split it meanwhile (growth.h; docs/design.md §9.2.4).
  absl::Status Split(uint64_t key, const Op& op);
  template <typename Units>
  absl::Status SplitUnderDirLock(uint64_t key, const Op& op, Units& units);
  template <typename Units>
  absl::Status MoveHalf(Units& units, const Op& op, DirectoryCopy& d, size_t x, size_t y);

  StructureClient c_;
  const Geometry g_;
  std::vector<DirectoryCopy> dirs_;  // per node: the NIC paths' directory copy
  // The native accessor of this node's part, when it has one (empty
  // otherwise; RouteTo then never takes the native path).
  std::optional<NativeUnits<V>> local_;
  GrowthStats growth_;
  // Private copies of the last windows and unit read.
  std::array<std::array<uint64_t, L::kWindowWords>, 2> win_{};
  std::array<uint64_t, L::kUnitSlotsWords> unit_snap_{};
};

}  // namespace structures::hash_map_internal

#include "structures/hash_map/growth.h"  // IWYU pragma: export

#endif  // STRUCTURES_HASH_MAP_CLIENT_H_
