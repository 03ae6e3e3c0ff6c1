#ifndef STRUCTURES_HASH_MAP_CLIENT_H_
#define STRUCTURES_HASH_MAP_CLIENT_H_

// One thread's handle on a HashMap (hash_map.h has the contract: paths,
// concurrency, costs, errors). The algorithm is written once, over a group
// accessor: NativeGroup (native_path.h: CPU loads and stores in place) or
// RemoteGroup (rdma_path.h: READ into a private copy, one WRITE per slot).
// Routing, the optimistic read loop and lock handling are the shared
// StructureClient's (structures/common/client.h).

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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
  using Group = hash_map_internal::Group<V>;
  using Lookup = hash_map_internal::Lookup;

 public:
  static constexpr size_t kGroupBytes = L::kGroupBytes;
  static constexpr size_t kSlotsPerGroup = hash_map_internal::kSlotsPerGroup;

  HashMapClient(StructureClient common, size_t groups_per_node)
      : c_(std::move(common)), groups_per_node_(groups_per_node) {}
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
      const Lookup l = hash_map_internal::NativeFind<V>(LocalGroup(op), key, op.start, Policy::kVerifyReads, w);
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
  // absent. ResourceExhausted when absent and its group is full.
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
  // ResourceExhausted when absent and its group is full.
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
  // concurrent writers each group is counted at its own instant during the
  // call, so the result may differ from the size at any single instant by at
  // most the number of writes that overlap the call.
  absl::StatusOr<size_t> Size(rdma::NodeId node) {
    Op op;
    RETURN_IF_ERROR(c_.RouteTo(node, Path::kAuto, &op.route));
    size_t total = 0;
    const size_t chunk_groups = std::max<size_t>(1, (size_t{256} << 10) / kGroupBytes);
    std::vector<uint64_t> buf;
    for (size_t g0 = 0; g0 < groups_per_node_; g0 += chunk_groups) {
      const size_t n = std::min(chunk_groups, groups_per_node_ - g0);
      if (!op.route.native()) {  // one READ for the whole chunk
        buf.resize(n * kGroupBytes / 8);
        RETURN_IF_ERROR(c_.session()->Read(op.route.base + g0 * kGroupBytes, buf.data(), n * kGroupBytes));
      }
      for (size_t g = 0; g < n; ++g) {
        op.group = op.route.base + (g0 + g) * kGroupBytes;
        int count;
        if (op.route.native()) {
          hash_map_internal::NativeSnapshot<V>(LocalGroup(op), snap_.data());
          count = hash_map_internal::CountOccupied<V>(snap_.data());
        } else {
          count = hash_map_internal::CountOccupied<V>(buf.data() + (g * kGroupBytes + L::kSlotsOffset) / 8);
        }
        if (count < 0) {  // torn: read this group again on its own
          RETURN_IF_ERROR(WithAccessor(op, [&](auto& group) {
            return c_.ReadValidated(op.route, op.group, [&](bool* valid) {
              RETURN_IF_ERROR(group.Snapshot(snap_.data()));
              count = hash_map_internal::CountOccupied<V>(snap_.data());
              *valid = count >= 0;
              return absl::OkStatus();
            }, [&] { return Broken(op); });
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
  // One operation's target: the route to the key's home, the group, and the
  // slot where scans for the key start.
  struct Op {
    Route route;
    rdma::RemotePtr group;  // also the group lock's line (offset 0)
    size_t start = 0;
  };
  // What a writer decided to store: slot index (-1: nothing) and the value
  // (null: make the slot empty).
  struct Action {
    int slot = -1;
    const V* value = nullptr;
  };

  absl::Status RouteFor(uint64_t key, Path path, Op* op) const {
    const hash_map_internal::Placement p = hash_map_internal::Place(key, c_.num_nodes(), groups_per_node_);
    RETURN_IF_ERROR(c_.RouteTo(p.node, path, &op->route));
    op->group = op->route.base + p.group * kGroupBytes;
    op->start = p.start;
    return absl::OkStatus();
  }

  Group& LocalGroup(const Op& op) const { return rdma::RemoteRef<Group>::At(op.group).Local(c_.node().id()); }

  // Runs `f` with the accessor for `op`'s path: the one native/NIC branch.
  template <typename F>
  absl::Status WithAccessor(const Op& op, F&& f) {
    if (op.route.native()) {
      hash_map_internal::NativeGroup<V> g(LocalGroup(op));
      return f(g);
    }
    hash_map_internal::RemoteGroup<V> g(*c_.session(), op.group, snap_.data());
    return f(g);
  }

  std::string Broken(const Op& op) const {
    return absl::StrCat("group ", (op.group.address() - op.route.base.address()) / kGroupBytes, " on node ",
                        op.route.home, " has a slot whose checksum does not match");
  }

  absl::Status Full(uint64_t key) const {
    const hash_map_internal::Placement p = hash_map_internal::Place(key, c_.num_nodes(), groups_per_node_);
    return absl::ResourceExhaustedError(absl::StrCat(
        "HashMap: key ", key, " maps to group ", p.group, " on node ", p.node, ", whose ", kSlotsPerGroup,
        " slots are all in use; the key was not stored and nothing stored was lost. Create the map with more "
        "groups_per_node (see structures/README.md, Capacity)"));
  }

  // Get/Contains: optimistic reads until the key is found in a slot whose
  // checksum matches, or is absent (ScanGroup: absence needs no checksum);
  // then, if that never happens, one read under the group lock. `*found`
  // says which; when found, the slot's words are in `words` (L::kWords).
  absl::Status FindUnlocked(const Op& op, uint64_t key, uint64_t* words, bool* found) {
    hash_map_internal::Lookup l;
    RETURN_IF_ERROR(WithAccessor(op, [&](auto& group) {
      return c_.ReadValidated(op.route, op.group, [&](bool* valid) {
        RETURN_IF_ERROR(group.Find(key, op.start, Policy::kVerifyReads, words, &l));
        *valid = l.kind != hash_map_internal::Lookup::kTorn;
        return absl::OkStatus();
      }, [&] { return Broken(op); });
    }));
    *found = l.kind == hash_map_internal::Lookup::kFound;
    return absl::OkStatus();
  }

  // The writer protocol: lock the group, read it, let `decide` choose what to
  // store (it may also fail, e.g. ResourceExhausted), store one slot, unlock.
  // Every exit releases the lock.
  //
  // Native: lock (ALock local cohort: CPU atomics only when uncontended),
  // an in-place scan with CPU loads (no checksums: the lock holder is the only
  // writer, so the words are stable), CPU stores of the one changed slot
  // (checksum last), unlock.
  // NIC: lock (remote cohort), one READ, one WRITE posted without waiting,
  // unlock (its CAS on the same QP orders after the WRITE: rdma_path.h).
  template <typename Decide>
  absl::Status WriteLocked(uint64_t key, Path path, Decide&& decide) {
    Op op;
    RETURN_IF_ERROR(RouteFor(key, path, &op));
    return WithAccessor(op, [&](auto& group) {
      if (op.route.native() && !Policy::kNativeWritersLock) {
        return WriteUnderLock(op, group, key, decide);  // test-only mutant: no lock
      }
      return c_.WithLock(op.route, op.group, [&] { return WriteUnderLock(op, group, key, decide); });
    });
  }

  template <typename Accessor, typename Decide>
  absl::Status WriteUnderLock(const Op& op, Accessor& group, uint64_t key, Decide& decide) {
    uint64_t found[L::kWords];  // the key's slot as read (kFound)
    hash_map_internal::Lookup l;
    RETURN_IF_ERROR(group.FindUnderLock(key, op.start, found, &l));
    if (l.kind == hash_map_internal::Lookup::kTorn) return c_.Corrupt(Broken(op));
    Action a;
    RETURN_IF_ERROR(decide(l, static_cast<const uint64_t*>(found), &a));
    if (a.slot < 0) return absl::OkStatus();
    const bool overwrite = a.slot == l.slot && l.kind == hash_map_internal::Lookup::kFound;
    uint64_t words[L::kWords];
    L::MakeSlot(overwrite ? found[L::kStateWord] : l.free_state, key, a.value, words);
    const bool key_unchanged = overwrite && a.value != nullptr;
    if constexpr (!Policy::kReleaseAfterRemoteWrite) {
      if (!op.route.native()) {
        // Test-only mutant: release first, then write.
        RETURN_IF_ERROR(c_.lock().Unlock(op.group));
        return group.StoreSlot(a.slot, words, key_unchanged, /*wait=*/true);
      }
    }
    return group.StoreSlot(a.slot, words, key_unchanged, /*wait=*/false);
  }

  StructureClient c_;
  const size_t groups_per_node_;
  std::array<uint64_t, L::kSnapshotWords> snap_{};  // the last group read (private memory)
};

}  // namespace structures

#endif  // STRUCTURES_HASH_MAP_CLIENT_H_
