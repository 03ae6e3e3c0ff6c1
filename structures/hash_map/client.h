#ifndef STRUCTURES_HASH_MAP_CLIENT_H_
#define STRUCTURES_HASH_MAP_CLIENT_H_

// One thread's handle on a HashMap (hash_map.h has the contract: paths,
// concurrency, costs, errors). The algorithm is written once, over a unit
// accessor: NativeUnits (native_path.h: CPU loads and stores in place) or
// RemoteUnits (rdma_path.h: READs into private copies, one WRITE per slot).
// Routing, the optimistic read loop and lock handling are the shared
// StructureClient's (structures/common/client.h).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/session.h"
#include "structures/common/client.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/native_path.h"
#include "structures/hash_map/policy.h"
#include "structures/hash_map/rdma_path.h"
#include "util/status_macros.h"

namespace structures {

// Not thread-safe; use one per thread (each with the thread's own Session).
// Every operation is linearizable with every other operation of every client
// on every path. Made by HashMap::NewClient.
template <typename V, typename Policy = HashMapPolicy>
class HashMapClient {
  using L = hash_map_internal::SlotLayout<V>;
  using Unit = hash_map_internal::Unit<V>;
  using Lookup = hash_map_internal::Lookup;
  using Placement = hash_map_internal::Placement;
  using Candidate = hash_map_internal::Candidate;
  // Windows a reader looks in (2; 1 only in a test-only mutant).
  static constexpr int kReaderWindows = Policy::kReadBothWindows ? 2 : 1;

 public:
  static constexpr size_t kUnitBytes = L::kUnitBytes;
  static constexpr size_t kSlotsPerGroup = hash_map_internal::kSlotsPerGroup;

  HashMapClient(StructureClient common, size_t units_per_node)
      : c_(std::move(common)), units_per_node_(units_per_node) {}
  HashMapClient(const HashMapClient&) = delete;
  HashMapClient& operator=(const HashMapClient&) = delete;

  // The value bound to `key`, or nullopt. Lock-free in the common case.
  absl::StatusOr<std::optional<V>> Get(uint64_t key, Path path = Path::kAuto) {
    Op op;
    RETURN_IF_ERROR(RouteFor(key, path, &op));
    if (op.route.native()) {
      // The common case, inlined: `w` never leaves this frame, so the found
      // slot's words can stay in registers, and the value is constructed in
      // place in the result (copies through memory with mismatched widths
      // stall store forwarding; that was a measurable part of a cached get).
      uint64_t w[L::kWords];
      const Lookup l = hash_map_internal::NativeFindBoth<V>(LocalUnits(op), op.p, kReaderWindows, key,
                                                            Policy::kVerifyReads, w);
      if (l.kind == Lookup::kFound) {
        return absl::StatusOr<std::optional<V>>(absl::in_place, L::DecodeValue(w + L::kValueWord));
      }
      if (l.kind == Lookup::kAbsent) return absl::StatusOr<std::optional<V>>(absl::in_place);
    }
    uint64_t words[L::kWords];
    bool found = false;
    RETURN_IF_ERROR(FindUnlocked(op, key, words, &found));
    if (!found) return std::optional<V>();
    return std::optional<V>(L::DecodeValue(words + L::kValueWord));
  }

  absl::StatusOr<bool> Contains(uint64_t key, Path path = Path::kAuto) {
    Op op;
    RETURN_IF_ERROR(RouteFor(key, path, &op));
    uint64_t words[L::kWords];
    bool found = false;
    RETURN_IF_ERROR(FindUnlocked(op, key, words, &found));
    return found;
  }

  // Binds key to value. Returns the previous value, or nullopt if the key was
  // absent. ResourceExhausted when absent and both its windows are full.
  absl::StatusOr<std::optional<V>> Put(uint64_t key, const V& value, Path path = Path::kAuto) {
    std::optional<V> prev;
    RETURN_IF_ERROR(WriteLocked(key, path, [&](const Lookup& l, const uint64_t* found, Action* a) -> absl::Status {
      if (l.kind == Lookup::kFound) {
        prev = L::DecodeValue(found + L::kValueWord);
        *a = {l.slot, &value};
        return absl::OkStatus();
      }
      if (l.first_free < 0) return Full(key);
      *a = {l.first_free, &value};
      return absl::OkStatus();
    }));
    return prev;
  }

  // Binds key to value only if the key is absent. True if it was inserted
  // (then it was absent); false if present (nothing changes).
  // ResourceExhausted when absent and both its windows are full.
  absl::StatusOr<bool> Insert(uint64_t key, const V& value, Path path = Path::kAuto) {
    bool inserted = false;
    RETURN_IF_ERROR(WriteLocked(key, path, [&](const Lookup& l, const uint64_t*, Action* a) -> absl::Status {
      if (l.kind == Lookup::kFound) return absl::OkStatus();
      if (l.first_free < 0) return Full(key);
      *a = {l.first_free, &value};
      inserted = true;
      return absl::OkStatus();
    }));
    return inserted;
  }

  // Unbinds key. Returns the previous value, or nullopt if it was absent.
  absl::StatusOr<std::optional<V>> Erase(uint64_t key, Path path = Path::kAuto) {
    std::optional<V> prev;
    RETURN_IF_ERROR(WriteLocked(key, path, [&](const Lookup& l, const uint64_t* found, Action* a) -> absl::Status {
      if (l.kind != Lookup::kFound) return absl::OkStatus();
      prev = L::DecodeValue(found + L::kValueWord);
      *a = {l.slot, nullptr};
      return absl::OkStatus();
    }));
    return prev;
  }

  // Entries stored on `node` (natively when it is the client's node, else with
  // RDMA READs of the part in chunks). Exact when no writer runs. Under
  // concurrent writers each unit is counted at its own instant during the
  // call, so the result may differ from the size at any single instant by at
  // most the number of writes that overlap the call.
  absl::StatusOr<size_t> Size(rdma::NodeId node) {
    Op op;
    RETURN_IF_ERROR(c_.RouteTo(node, Path::kAuto, &op.route));
    size_t total = 0;
    const size_t chunk_units = std::max<size_t>(1, (size_t{256} << 10) / kUnitBytes);
    std::vector<uint64_t> buf;
    for (size_t u0 = 0; u0 < units_per_node_; u0 += chunk_units) {
      const size_t n = std::min(chunk_units, units_per_node_ - u0);
      if (!op.route.native()) {  // one READ for the whole chunk
        buf.resize(n * kUnitBytes / 8);
        RETURN_IF_ERROR(c_.session()->Read(op.route.base + u0 * kUnitBytes, buf.data(), n * kUnitBytes));
      }
      for (size_t u = 0; u < n; ++u) {
        const size_t unit = u0 + u;
        int count;
        if (op.route.native()) {
          hash_map_internal::NativeSnapshot<V>(LocalUnits(op)[unit], unit_snap_.data());
          count = hash_map_internal::CountOccupied<V>(unit_snap_.data(), hash_map_internal::kSlotsPerUnit);
        } else {
          count = hash_map_internal::CountOccupied<V>(buf.data() + (u * kUnitBytes + L::kSlotsOffset) / 8,
                                                      hash_map_internal::kSlotsPerUnit);
        }
        if (count < 0) {  // torn: read this unit again on its own
          RETURN_IF_ERROR(WithAccessor(op, [&](auto& units) {
            return c_.ReadValidated(op.route, UnitLock(op, unit), [&](bool* valid) {
              RETURN_IF_ERROR(units.Snapshot(unit, unit_snap_.data()));
              count = hash_map_internal::CountOccupied<V>(unit_snap_.data(), hash_map_internal::kSlotsPerUnit);
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

  rdma::NodeId node() const { return c_.node().id(); }
  const ReadStats& read_stats() const { return c_.stats(); }

 private:
  // One operation's target: the route to the key's home and the key's
  // placement there (two candidate windows and the scan start).
  struct Op {
    Route route;
    Placement p;
  };
  // What a writer decided to store: slot index within the window of the
  // lookup (-1: nothing) and the value (null: make the slot empty).
  struct Action {
    int slot = -1;
    const V* value = nullptr;
  };

  absl::Status RouteFor(uint64_t key, Path path, Op* op) const {
    op->p = hash_map_internal::Place(key, c_.num_nodes(), units_per_node_);
    return c_.RouteTo(op->p.node, path, &op->route);
  }

  Unit* LocalUnits(const Op& op) const { return &rdma::RemoteRef<Unit>::At(op.route.base).Local(c_.node().id()); }
  rdma::RemotePtr UnitLock(const Op& op, size_t unit) const {
    return hash_map_internal::UnitPtr<V>(op.route.base, unit);  // the lock is the unit's first line
  }

  // Runs `f` with the accessor for `op`'s path: the one native/NIC branch.
  template <typename F>
  absl::Status WithAccessor(const Op& op, F&& f) {
    if (op.route.native()) {
      hash_map_internal::NativeUnits<V> units(LocalUnits(op));
      return f(units);
    }
    hash_map_internal::RemoteUnits<V> units(*c_.session(), op.route.base, win_[0].data(), win_[1].data());
    return f(units);
  }

  std::string Broken(const Op& op, size_t unit) const {
    return absl::StrCat("unit ", unit, " on node ", op.route.home, " has a slot whose checksum does not match");
  }

  absl::Status Full(uint64_t key) const {
    const Placement p = hash_map_internal::Place(key, c_.num_nodes(), units_per_node_);
    return absl::ResourceExhaustedError(absl::StrCat(
        "HashMap: key ", key, " may live in units ", p.c[0].unit, " and ", p.c[1].unit, " on node ", p.node,
        ", and both its windows of ", hash_map_internal::kSlotsPerWindow,
        " slots are full; the key was not stored and nothing stored was lost. Create the map with more "
        "groups_per_node (see structures/README.md, Capacity)"));
  }

  // Get/Contains: optimistic reads until the key is found in a slot whose
  // checksum matches, or is absent from both windows (ScanWindows: absence
  // needs no checksum); then, if that never happens, one read under both
  // unit locks. `*found` says which; when found, the slot's words are in
  // `words` (L::kWords). NIC: both windows in one doorbell (RemoteUnits::
  // FetchWindows), 1 round trip.
  absl::Status FindUnlocked(const Op& op, uint64_t key, uint64_t* words, bool* found) {
    Lookup l;
    RETURN_IF_ERROR(WithAccessor(op, [&](auto& units) {
      return c_.ReadValidatedUnder(
          [&](auto&& step) { return WithUnitLocks(op, units, /*chain=*/false, [&](const bool*) { return step(); }); },
          [&](bool* valid) {
            RETURN_IF_ERROR(units.FetchWindows(op.p, kReaderWindows));
            RETURN_IF_ERROR(units.Find(op.p, kReaderWindows, key, Policy::kVerifyReads, words, &l));
            *valid = l.kind != Lookup::kTorn;
            return absl::OkStatus();
          },
          [&] { return Broken(op, op.p.c[0].unit); });
    }));
    *found = l.kind == Lookup::kFound;
    return absl::OkStatus();
  }

  // Holds the locks of both candidate units (one lock when they are the same
  // unit) around `step(fetched)`, taken in unit order (address order, so two
  // writers never wait for each other crosswise) and released in reverse.
  // With `chain` on the NIC path, each acquire READs its unit's window(s) in
  // its own round trip (ALock's LockAndRead); fetched[w] says whether window
  // w was read that way, as a holder. Every exit releases what was taken.
  template <typename Units, typename Step>
  absl::Status WithUnitLocks(const Op& op, Units& units, bool chain, Step&& step) {
    constexpr bool kNic = std::is_same_v<Units, hash_map_internal::RemoteUnits<V>>;
    const Candidate* c = op.p.c;
    bool fetched[2] = {false, false};
    std::array<rdma::ChainedRead, 2> reads;
    if (op.p.same_unit()) {
      size_t n = 0;
      if constexpr (kNic) {
        if (chain) {
          reads = {units.WindowRead(op.p, 0), units.WindowRead(op.p, 1)};
          n = 2;
        }
      }
      return c_.WithLockAndRead(op.route, UnitLock(op, c[0].unit), absl::MakeConstSpan(reads.data(), n),
                                [&](bool done) {
                                  fetched[0] = fetched[1] = done;
                                  return step(static_cast<const bool*>(fetched));
                                });
    }
    const int lo = c[0].unit < c[1].unit ? 0 : 1;
    const int hi = 1 - lo;
    size_t n = 0;
    if constexpr (kNic) {
      if (chain) {
        reads = {units.WindowRead(op.p, lo), units.WindowRead(op.p, hi)};
        n = 1;
      }
    }
    return c_.WithLockAndRead(op.route, UnitLock(op, c[lo].unit), absl::MakeConstSpan(reads.data(), n),
                              [&](bool done_lo) {
                                fetched[lo] = done_lo;
                                return c_.WithLockAndRead(
                                    op.route, UnitLock(op, c[hi].unit), absl::MakeConstSpan(reads.data() + 1, n),
                                    [&](bool done_hi) {
                                      fetched[hi] = done_hi;
                                      return step(static_cast<const bool*>(fetched));
                                    });
                              });
  }

  // The writer protocol: lock both candidate units, look for the key in both
  // windows, let `decide` choose what to store (it may also fail, e.g.
  // ResourceExhausted), store one slot, unlock. A new key goes to the window
  // with more free slots (the first on a tie), main group first (ScanSlot).
  // Every exit releases the locks.
  //
  // Native: lock (ALock local cohort: CPU atomics only when uncontended),
  // in-place scans with CPU loads (no checksums: the lock holder is the only
  // writer, so the words are stable), CPU stores of the one changed slot
  // (checksum last), unlock.
  // NIC: lock each unit with its window READ in the acquire's round trip, one
  // WRITE posted without waiting, unlock (its CAS on the same QP orders after
  // the WRITE: rdma_path.h).
  template <typename Decide>
  absl::Status WriteLocked(uint64_t key, Path path, Decide&& decide) {
    Op op;
    RETURN_IF_ERROR(RouteFor(key, path, &op));
    return WithAccessor(op, [&](auto& units) {
      if (op.route.native() && !Policy::kNativeWritersLock) {
        const bool none[2] = {false, false};
        return WriteUnderLocks(op, units, none, key, decide);  // test-only mutant: no lock
      }
      return WithUnitLocks(op, units, /*chain=*/true,
                           [&](const bool* fetched) { return WriteUnderLocks(op, units, fetched, key, decide); });
    });
  }

  template <typename Units, typename Decide>
  absl::Status WriteUnderLocks(const Op& op, Units& units, const bool* fetched, uint64_t key, Decide& decide) {
    uint64_t found[L::kWords] = {};  // the key's slot as read (kFound)
    Lookup l[2];
    int which = -1;  // the window the key is in
    for (int w = 0; w < 2 && which < 0; ++w) {
      RETURN_IF_ERROR(units.FindUnderLock(op.p, w, fetched[w], key, found, &l[w]));
      if (l[w].kind == Lookup::kTorn) return c_.Corrupt(Broken(op, op.p.c[w].unit));
      if (l[w].kind == Lookup::kFound) which = w;
    }
    if (which < 0) which = l[1].free_count > l[0].free_count ? 1 : 0;
    const Lookup& lw = l[which];
    Action a;
    RETURN_IF_ERROR(decide(lw, static_cast<const uint64_t*>(found), &a));
    if (a.slot < 0) return absl::OkStatus();
    const bool overwrite = a.slot == lw.slot && lw.kind == Lookup::kFound;
    uint64_t words[L::kWords];
    L::MakeSlot(overwrite ? found[L::kStateWord] : lw.free_state, key, a.value, words);
    const bool key_unchanged = overwrite && a.value != nullptr;
    const Candidate& c = op.p.c[which];
    const size_t slot = L::WindowFirstSlot(c.side) + static_cast<size_t>(a.slot);
    if constexpr (!Policy::kReleaseAfterRemoteWrite) {
      if (!op.route.native()) {
        // Test-only mutant: release the unit first, then write.
        RETURN_IF_ERROR(c_.lock().Unlock(UnitLock(op, c.unit)));
        return units.StoreSlot(c.unit, slot, words, key_unchanged, /*wait=*/true);
      }
    }
    return units.StoreSlot(c.unit, slot, words, key_unchanged, /*wait=*/false);
  }

  StructureClient c_;
  const size_t units_per_node_;
  // Private copies of the last windows and unit read.
  std::array<std::array<uint64_t, L::kWindowWords>, 2> win_{};
  std::array<uint64_t, L::kUnitSlotsWords> unit_snap_{};
};

}  // namespace structures

#endif  // STRUCTURES_HASH_MAP_CLIENT_H_
