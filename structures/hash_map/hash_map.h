#ifndef STRUCTURES_HASH_MAP_HASH_MAP_H_
#define STRUCTURES_HASH_MAP_HASH_MAP_H_

// A distributed hash map from uint64_t keys to small trivially copyable
// values, living in the registered arenas of a cluster's nodes and usable by
// any thread on any node (DESIGN §2). Linearizable for any mix of paths.
//
//   auto map = structures::HashMap<Value>::Create(*cluster, {.groups_per_node = 4096});
//   // per thread, on node n, with that thread's own Session:
//   auto client = map->NewClient(cluster->node(n), session.get());
//   absl::StatusOr<std::optional<Value>> prev = (*client)->Put(key, value);
//   absl::StatusOr<std::optional<Value>> v = (*client)->Get(key);
//
// Placement: a fixed 64-bit mixer of the key picks one of the
// num_nodes * groups_per_node bucket groups; group g lives on node
// g / groups_per_node (HomeOf). Deterministic across processes.
//
// Paths (chosen per operation):
//   native    the key's home is the client's node and path == kAuto: CPU loads
//             and stores only; the group lock is ALock's local cohort. No NIC
//             operation unless remote writers contend for the same group.
//   loopback  the key's home is the client's node and path == kLoopback: the
//             same operations as remote, over the client's loopback QP.
//   remote    the key lives on another node: one-sided RDMA.
//
// Concurrency (details and proof sketch in layout.h, ScanGroup):
//   * Writers (Put, Insert, Erase) serialize per group with the group's ALock
//     line. Under it they read the group (natively: CPU loads in place), and
//     store one slot tuple (state/version, key, value, checksum).
//   * Readers (Get, Contains) take no lock. Each key has a start slot (from its
//     hash); readers scan the group's slots circularly from it, looking at
//     state and key words only (natively: CPU loads in place, usually one slot;
//     NIC: one RDMA READ of the group's slots, scanned in private memory). The
//     slot holding the key is accepted only if its checksum matches; a torn
//     found slot is read again. "Absent" needs no checksum (layout.h). After
//     kOptimisticReads torn reads in a row a reader takes the group lock and
//     reads under it, so readers never starve and never fail because of
//     contention.
//
// Costs (uncontended, asserted by tests/structures/hash_map_test.cc):
//   native Get/Put/Insert/Erase:   0 NIC ops. A Get scans the group in place
//                                  from the key's start slot: usually one slot
//                                  loaded and one slot checksum (README, Costs).
//   remote/loopback Get, Contains: 1 NIC op (one READ of the group's slots),
//                                  1 round trip, 1 doorbell.
//   remote/loopback Put/Insert/Erase that writes, slot <= 64 bytes (values of
//     up to 40 bytes): lock (CAS + READ, 1 RT), READ group (1 RT), WRITE slot
//     posted without waiting, unlock (CAS, 1 RT): 5 NIC ops, 3 round trips,
//     4 doorbells. Larger slots are not inlined: the WRITE is waited for, 4 RTs.
//   one that does not write (Insert of a present key, Erase of an absent one):
//     4 NIC ops, 3 round trips.
//
// Capacity is fixed at creation: nodes * groups_per_node * kSlotsPerGroup
// slots, but a key can only go to its own group, so Put/Insert fail with
// ResourceExhausted when that group's kSlotsPerGroup slots are full (nothing
// already stored is affected). See structures/README.md for how to size
// groups_per_node (load factor at the first ResourceExhausted).
//
// Errors (absl::Status): InvalidArgument for a node id out of range, a bad
// option, a Session of another node; FailedPrecondition when the client's own
// node is shut down or a NIC path is needed and the client has no Session;
// Unavailable when the key's home node is known to be shut down (in-process
// clusters; across processes the transport reports the failure as an error
// completion or a DeadlineExceeded within the session's completion timeout);
// DataLoss if a slot is inconsistent under the lock (only when something
// bypassed the lock: a bug). Nothing waits forever: lock waits are bounded by
// locks::ClientOptions::timeout, NIC waits by the session's completion timeout.
//
// Keys: every uint64_t is a valid key (the occupied bit is in the state word,
// not in the key). Values: trivially copyable, at most 56 bytes (compile-time
// checked), stored by memcpy.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/node.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/native_path.h"
#include "structures/hash_map/policy.h"
#include "structures/hash_map/rdma_path.h"

namespace structures {

// How a thread on a key's home node reaches it. Threads on other nodes always
// take the remote path.
enum class Path {
  kAuto,      // native when the key's home node is the client's node, else remote
  kLoopback,  // always through the NIC (the loopback QP when the key is local)
};

using hash_map_internal::HashMapValue;  // trivially copyable, sizeof <= 56

// Per-client counters (plain; read by the client's thread or after it stops).
struct HashMapClientStats {
  uint64_t torn_reads = 0;    // optimistic reads that found a slot failing its checksum
  uint64_t locked_reads = 0;  // reads that gave up optimism and took the group lock
};

struct HashMapOptions {
  size_t groups_per_node = 1024;  // capacity = nodes * groups_per_node * kSlotsPerGroup
  locks::Budgets budgets;         // ALock budgets of every group lock
};

// `Policy` exists only so tests can build deliberately broken variants from
// this same source (tests/structures/hash_map_mutants.h). Use the default.
template <typename V, typename Policy = HashMapPolicy>
class HashMap {
  using L = hash_map_internal::SlotLayout<V>;
  using Group = hash_map_internal::Group<V>;
  static_assert(HashMapValue<V>, "HashMap<V>: V must be trivially copyable and at most 56 bytes");

 public:
  static constexpr size_t kSlotsPerGroup = hash_map_internal::kSlotsPerGroup;
  static constexpr size_t kGroupBytes = L::kGroupBytes;
  static constexpr size_t kSlotBytes = L::kBytes;
  // Torn optimistic reads in a row before a reader takes the group lock.
  static constexpr int kOptimisticReads = 64;

  // Allocates and initializes every node's part (in-process cluster: tests,
  // benchmarks). Each part is groups_per_node * kGroupBytes of its node's arena.
  static absl::StatusOr<HashMap> Create(rdma::Cluster& cluster, const HashMapOptions& options) {
    if (absl::Status s = Validate(cluster.num_nodes(), options); !s.ok()) return s;
    HashMap m(cluster.num_nodes(), options);
    for (int n = 0; n < cluster.num_nodes(); ++n) {
      rdma::Node& node = cluster.node(static_cast<rdma::NodeId>(n));
      auto base = AllocatePart(node, options);
      if (!base.ok()) {
        m.Destroy(cluster);
        return base.status();
      }
      m.bases_[n] = *base;
      m.nodes_[n] = &node;
    }
    return m;
  }

  // Multi-process use (one node per process): each process calls this for its
  // own node, with the same options and num_nodes, at the same point of its
  // arena allocation sequence (rdma::Node allocates deterministically), so the
  // part sits at the same arena offset on every node; clients find the other
  // nodes' arena bases through their Session. Zero-filled memory is already a
  // valid empty part, so peers may use a part before its owner created it
  // (only non-default lock budgets take effect at creation).
  static absl::StatusOr<HashMap> CreateLocalPart(rdma::Node& self, int num_nodes, const HashMapOptions& options) {
    if (absl::Status s = Validate(num_nodes, options); !s.ok()) return s;
    if (self.id() >= num_nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat("HashMap: node id ", self.id(), " out of range for ", num_nodes, " nodes"));
    }
    HashMap m(num_nodes, options);
    auto base = AllocatePart(self, options);
    if (!base.ok()) return base.status();
    m.bases_[self.id()] = *base;
    m.nodes_[self.id()] = &self;
    m.part_offset_ = self.OffsetOf(*base);
    return m;
  }

  // Returns the parts this handle allocated to their nodes' arenas. No client
  // may be in use, and no copy of this handle may be used afterwards (copies
  // share the parts). Create's handle owns all parts; CreateLocalPart's only
  // its own (see DestroyLocalPart).
  void Destroy(rdma::Cluster& cluster) {
    for (size_t n = 0; n < bases_.size(); ++n) {
      if (nodes_[n] != nullptr && !bases_[n].is_null()) {
        cluster.node(static_cast<rdma::NodeId>(n)).Free(bases_[n], PartBytes(groups_per_node_));
        bases_[n] = rdma::RemotePtr();
      }
    }
  }

  // CreateLocalPart's counterpart: returns this process's own part to `self`.
  void DestroyLocalPart(rdma::Node& self) {
    if (self.id() < bases_.size() && nodes_[self.id()] == &self && !bases_[self.id()].is_null()) {
      self.Free(bases_[self.id()], PartBytes(groups_per_node_));
      bases_[self.id()] = rdma::RemotePtr();
    }
  }

  class Client;

  // A client for the calling thread, living on `node`, using `session` (that
  // thread's own Session on `node`) for the NIC paths. `session` may be null
  // for a client that only takes native paths. The client allocates one ALock
  // descriptor line in `node`'s arena. `node` must outlive it.
  absl::StatusOr<std::unique_ptr<Client>> NewClient(rdma::Node& node, rdma::Session* session) const {
    if (node.id() >= num_nodes_) {
      return absl::InvalidArgumentError(
          absl::StrCat("HashMap::NewClient: node ", node.id(), " out of range: the map has ", num_nodes_, " nodes"));
    }
    if (node.is_shut_down()) {
      return absl::FailedPreconditionError(absl::StrCat("HashMap::NewClient: node ", node.id(), " is shut down"));
    }
    if (session != nullptr && (session->self() != node.id() || session->num_nodes() != num_nodes_)) {
      return absl::InvalidArgumentError(absl::StrCat("HashMap::NewClient: session of node ", session->self(), " with ",
                                                     session->num_nodes(), " nodes; need node ", node.id(),
                                                     " with ", num_nodes_));
    }
    std::vector<rdma::RemotePtr> bases = bases_;
    for (int n = 0; n < num_nodes_; ++n) {
      if (!bases[n].is_null()) continue;
      if (session == nullptr) continue;  // remote parts unreachable without a session anyway
      const rdma::ArenaInfo& a = session->arena(static_cast<rdma::NodeId>(n));
      if (part_offset_ + PartBytes(groups_per_node_) > a.length) {
        return absl::FailedPreconditionError(absl::StrCat("HashMap::NewClient: node ", n, "'s arena (", a.length,
                                                          " bytes) cannot hold the part at offset ", part_offset_));
      }
      bases[n] = rdma::RemotePtr(static_cast<rdma::NodeId>(n), a.base + part_offset_);
    }
    locks::ClientOptions lo;
    lo.max_held = 1;
    auto lock = locks::ALockClient::Create(node, session, lo);
    if (!lock.ok()) return lock.status();
    return std::unique_ptr<Client>(new Client(*this, std::move(bases), node, session, std::move(*lock)));
  }

  rdma::NodeId HomeOf(uint64_t key) const { return Place(key).node; }
  size_t capacity() const { return static_cast<size_t>(num_nodes_) * groups_per_node_ * kSlotsPerGroup; }
  int num_nodes() const { return num_nodes_; }
  size_t groups_per_node() const { return groups_per_node_; }
  // The group (within its home node's part) that `key` maps to.
  size_t GroupOf(uint64_t key) const { return Place(key).group; }
  // Where node `n`'s part starts (null if unknown to this handle: another
  // process's part before a client resolved it).
  rdma::RemotePtr PartBase(rdma::NodeId n) const { return n < bases_.size() ? bases_[n] : rdma::RemotePtr(); }

 private:
  HashMap(int num_nodes, const HashMapOptions& options)
      : num_nodes_(num_nodes),
        groups_per_node_(options.groups_per_node),
        budgets_(options.budgets),
        bases_(num_nodes),
        nodes_(num_nodes, nullptr) {}

  static size_t PartBytes(size_t groups) { return groups * kGroupBytes; }

  static absl::Status Validate(int num_nodes, const HashMapOptions& o) {
    if (num_nodes < 1 || num_nodes > 65536) {
      return absl::InvalidArgumentError(absl::StrCat("HashMap: num_nodes ", num_nodes, " out of range 1..65536"));
    }
    if (o.groups_per_node < 1 || o.groups_per_node > (size_t{1} << 40) / kGroupBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("HashMap: groups_per_node ", o.groups_per_node, " out of range 1..", (size_t{1} << 40) / kGroupBytes));
    }
    if (o.budgets.local < 1 || o.budgets.local > locks::kMaxBudget || o.budgets.remote < 1 ||
        o.budgets.remote > locks::kMaxBudget) {
      return absl::InvalidArgumentError(absl::StrCat("HashMap: ALock budgets must be in 1..", locks::kMaxBudget));
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<rdma::RemotePtr> AllocatePart(rdma::Node& node, const HashMapOptions& o) {
    if (node.is_shut_down()) {
      return absl::FailedPreconditionError(absl::StrCat("HashMap: node ", node.id(), " is shut down"));
    }
    // Every group is guarded by an ALock taken with NIC atomics by remote
    // clients: refuse a device without them now, not on the first remote op.
    if (absl::Status s = locks::RequireNicAtomics(node, locks::LockKind::kALock, "HashMap"); !s.ok()) return s;
    auto base = node.Allocate(PartBytes(o.groups_per_node), 64);
    if (!base.ok()) {
      return absl::Status(base.status().code(),
                          absl::StrCat("HashMap: node ", node.id(), "'s part (", o.groups_per_node, " groups of ",
                                       kGroupBytes, " bytes): ", base.status().message()));
    }
    const locks::Budgets defaults;
    if (o.budgets.local != defaults.local || o.budgets.remote != defaults.remote) {
      for (size_t g = 0; g < o.groups_per_node; ++g) {
        absl::Status s = locks::InitLock(*base + g * kGroupBytes, node.id(), {locks::LockKind::kALock, o.budgets});
        if (!s.ok()) return s;
      }
    }
    return *base;
  }

  hash_map_internal::Placement Place(uint64_t key) const {
    return hash_map_internal::Place(key, num_nodes_, groups_per_node_);
  }

  int num_nodes_ = 0;
  size_t groups_per_node_ = 0;
  locks::Budgets budgets_;
  uint64_t part_offset_ = 0;              // CreateLocalPart: the part's arena offset on every node
  std::vector<rdma::RemotePtr> bases_;    // per node; null = resolve via the client's session
  std::vector<rdma::Node*> nodes_;        // per node when in this process, else null
};

// One thread's handle. Not thread-safe; use one per thread (each with the
// thread's own Session). Every operation is linearizable with every other
// operation of every client on every path.
template <typename V, typename Policy>
class HashMap<V, Policy>::Client {
 public:
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The value bound to `key`, or nullopt. Lock-free in the common case.
  absl::StatusOr<std::optional<V>> Get(uint64_t key, Path path = Path::kAuto) {
    Route r;
    if (absl::Status s = RouteFor(key, path, &r); !s.ok()) return s;
    if (r.native) {
      // The common case, inlined: `w` never leaves this frame, so the found
      // slot's words can stay in registers, and the value is constructed in
      // place in the result (copies through memory with mismatched widths
      // stall store forwarding; that was a measurable part of a cached get).
      uint64_t w[L::kWords];
      const hash_map_internal::Lookup l =
          hash_map_internal::NativeFind<V>(LocalGroup(r), key, r.start, Policy::kVerifyReads, w);
      if (l.kind == hash_map_internal::Lookup::kFound) {
        return absl::StatusOr<std::optional<V>>(absl::in_place, L::DecodeValue(w + L::kValueWord));
      }
      if (l.kind == hash_map_internal::Lookup::kAbsent) return absl::StatusOr<std::optional<V>>(absl::in_place);
    }
    uint64_t words[L::kWords];
    bool found = false;
    if (absl::Status s = LookupUnlocked(r, key, words, &found); !s.ok()) return s;
    if (!found) return std::optional<V>();
    return std::optional<V>(L::DecodeValue(words + L::kValueWord));
  }

  absl::StatusOr<bool> Contains(uint64_t key, Path path = Path::kAuto) {
    Route r;
    if (absl::Status s = RouteFor(key, path, &r); !s.ok()) return s;
    uint64_t words[L::kWords];
    bool found = false;
    if (absl::Status s = LookupUnlocked(r, key, words, &found); !s.ok()) return s;
    return found;
  }

  // Binds key to value. Returns the previous value, or nullopt if the key was
  // absent. ResourceExhausted when absent and its group is full.
  absl::StatusOr<std::optional<V>> Put(uint64_t key, const V& value, Path path = Path::kAuto) {
    std::optional<V> prev;
    absl::Status s = WriteLocked(key, path, [&](const hash_map_internal::Lookup& l, const uint64_t* found,
                                                Action* a) -> absl::Status {
      if (l.kind == hash_map_internal::Lookup::kFound) {
        prev = L::DecodeValue(found + L::kValueWord);
        *a = {l.slot, &value};
        return absl::OkStatus();
      }
      if (l.first_free < 0) return Full(key);
      *a = {l.first_free, &value};
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return prev;
  }

  // Binds key to value only if the key is absent. True if it was inserted
  // (then it was absent); false if present (nothing changes).
  // ResourceExhausted when absent and its group is full.
  absl::StatusOr<bool> Insert(uint64_t key, const V& value, Path path = Path::kAuto) {
    bool inserted = false;
    absl::Status s = WriteLocked(key, path, [&](const hash_map_internal::Lookup& l, const uint64_t*,
                                                Action* a) -> absl::Status {
      if (l.kind == hash_map_internal::Lookup::kFound) return absl::OkStatus();
      if (l.first_free < 0) return Full(key);
      *a = {l.first_free, &value};
      inserted = true;
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return inserted;
  }

  // Unbinds key. Returns the previous value, or nullopt if it was absent.
  absl::StatusOr<std::optional<V>> Erase(uint64_t key, Path path = Path::kAuto) {
    std::optional<V> prev;
    absl::Status s = WriteLocked(key, path, [&](const hash_map_internal::Lookup& l, const uint64_t* found,
                                                Action* a) -> absl::Status {
      if (l.kind != hash_map_internal::Lookup::kFound) return absl::OkStatus();
      prev = L::DecodeValue(found + L::kValueWord);
      *a = {l.slot, nullptr};
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return prev;
  }

  // Entries stored on `node` (natively when it is the client's node, else with
  // RDMA READs of the part in chunks). Exact when no writer runs. Under
  // concurrent writers each group is counted at its own instant during the
  // call, so the result may differ from the size at any single instant by at
  // most the number of writes that overlap the call.
  absl::StatusOr<size_t> Size(rdma::NodeId node) {
    if (node >= map_num_nodes_) {
      return absl::InvalidArgumentError(
          absl::StrCat("HashMap::Size: node ", node, " out of range: the map has ", map_num_nodes_, " nodes"));
    }
    if (absl::Status s = CheckNodes(node); !s.ok()) return s;
    const bool native = node == node_.id();
    if (bases_[node].is_null() || (!native && session_ == nullptr)) return NoSession(node);
    size_t total = 0;
    const size_t chunk_groups = std::max<size_t>(1, (size_t{256} << 10) / kGroupBytes);
    std::vector<uint64_t> buf;
    for (size_t g0 = 0; g0 < groups_per_node_; g0 += chunk_groups) {
      const size_t n = std::min(chunk_groups, groups_per_node_ - g0);
      const rdma::RemotePtr first = bases_[node] + g0 * kGroupBytes;
      if (!native) {
        buf.resize(n * kGroupBytes / 8);
        if (absl::Status s = session_->Read(first, buf.data(), n * kGroupBytes); !s.ok()) return s;
      }
      for (size_t g = 0; g < n; ++g) {
        int count;
        if (native) {
          hash_map_internal::NativeSnapshot<V>(*(first + g * kGroupBytes).template local<Group>(), snap_.data());
          count = hash_map_internal::CountOccupied<V>(snap_.data());
        } else {
          count = hash_map_internal::CountOccupied<V>(buf.data() + (g * kGroupBytes + L::kSlotsOffset) / 8);
        }
        if (count < 0) {  // torn: read this group again on its own
          Route r{node, g0 + g, 0, first + g * kGroupBytes, native,
                  native ? locks::Path::kAuto : locks::Path::kLoopback};
          absl::Status s = ReadUntil(r, [&](const uint64_t* snap) {
            count = hash_map_internal::CountOccupied<V>(snap);
            return count >= 0;
          });
          if (!s.ok()) return s;
        }
        total += static_cast<size_t>(count);
      }
    }
    return total;
  }

  rdma::NodeId node() const { return node_.id(); }
  const HashMapClientStats& stats() const { return stats_; }

 private:
  friend class HashMap;
  struct Route {
    rdma::NodeId home;
    size_t group;
    size_t start;               // the slot where scans for the key start
    rdma::RemotePtr group_ptr;
    bool native;                // CPU path
    locks::Path lock_path;      // how to take the group lock
  };
  // What a writer decided to store: slot index (-1: nothing) and the value
  // (null: make the slot empty).
  struct Action {
    int slot = -1;
    const V* value = nullptr;
  };

  Client(const HashMap& map, std::vector<rdma::RemotePtr> bases, rdma::Node& node, rdma::Session* session,
         std::unique_ptr<locks::ALockClient> lock)
      : map_num_nodes_(map.num_nodes_),
        groups_per_node_(map.groups_per_node_),
        bases_(std::move(bases)),
        nodes_(map.nodes_),
        node_(node),
        session_(session),
        lock_(std::move(lock)) {}

  absl::Status CheckNodes(rdma::NodeId home) const {
    if (node_.is_shut_down()) {
      return absl::FailedPreconditionError(
          absl::StrCat("HashMap client on node ", node_.id(), ": the node is shut down"));
    }
    if (nodes_[home] != nullptr && nodes_[home]->is_shut_down()) {
      return absl::UnavailableError(absl::StrCat("HashMap: node ", home, " is shut down"));
    }
    return absl::OkStatus();
  }

  absl::Status NoSession(rdma::NodeId home) const {
    return absl::FailedPreconditionError(absl::StrCat("HashMap client on node ", node_.id(),
                                                      " has no Session: cannot reach node ", home, " through the NIC"));
  }

  absl::Status Full(uint64_t key) const {
    const hash_map_internal::Placement p = hash_map_internal::Place(key, map_num_nodes_, groups_per_node_);
    return absl::ResourceExhaustedError(absl::StrCat(
        "HashMap: key ", key, " maps to group ", p.group, " on node ", p.node, ", whose ", kSlotsPerGroup,
        " slots are all in use; the key was not stored and nothing stored was lost. Create the map with more "
        "groups_per_node (see structures/README.md, Capacity)"));
  }

  // Fills `*r` for `key` (a Status and an out-parameter rather than a
  // StatusOr<Route>: this is on every operation's path).
  absl::Status RouteFor(uint64_t key, Path path, Route* r) const {
    const hash_map_internal::Placement p = hash_map_internal::Place(key, map_num_nodes_, groups_per_node_);
    if (absl::Status s = CheckNodes(p.node); !s.ok()) return s;
    r->home = p.node;
    r->group = p.group;
    r->start = p.start;
    r->group_ptr = bases_[p.node] + p.group * kGroupBytes;
    r->native = p.node == node_.id() && path == Path::kAuto;
    r->lock_path = path == Path::kLoopback ? locks::Path::kLoopback : locks::Path::kAuto;
    if (bases_[p.node].is_null() || (!r->native && session_ == nullptr)) return NoSession(p.node);
    return absl::OkStatus();
  }

  const Group& LocalGroup(const Route& r) const { return *r.group_ptr.template local<Group>(); }

  absl::Status Snapshot(const Route& r) {
    if (r.native) {
      hash_map_internal::NativeSnapshot<V>(*r.group_ptr.template local<Group>(), snap_.data());
      return absl::OkStatus();
    }
    return hash_map_internal::RemoteSnapshot<V>(*session_, r.group_ptr, snap_.data());
  }

  // Size's reads: whole-group copies until `accept(snapshot)` (not torn), at
  // most kOptimisticReads times; then one copy under the group lock, which a
  // correct map always accepts (writers hold the lock).
  template <typename Accept>
  absl::Status ReadUntil(const Route& r, Accept&& accept) {
    for (int attempt = 0; attempt < kOptimisticReads; ++attempt) {
      if (absl::Status s = Snapshot(r); !s.ok()) return s;
      if (accept(static_cast<const uint64_t*>(snap_.data()))) return absl::OkStatus();
      ++stats_.torn_reads;
      if (attempt >= 2) std::this_thread::yield();  // let the writer finish (2-core machines)
    }
    ++stats_.locked_reads;
    if (absl::Status s = lock_->Lock(r.group_ptr, r.lock_path); !s.ok()) return s;
    absl::Status s = Snapshot(r);
    absl::Status u = lock_->Unlock(r.group_ptr);
    if (!s.ok()) return s;
    if (!u.ok()) return u;
    if (!accept(static_cast<const uint64_t*>(snap_.data()))) return Corrupt(r);
    return absl::OkStatus();
  }

  absl::Status Corrupt(const Route& r) const {
    return absl::DataLossError(absl::StrCat("HashMap: group ", r.group, " on node ", r.home,
                                            " has a slot whose checksum does not match under the group lock "
                                            "(a writer bypassed the lock)"));
  }

  // One read of the group for `key`: native scans the slots in place; NIC
  // reads the group's slots with one READ and scans the copy. `*l` says what
  // it found; the found slot's words go to `words` (L::kWords).
  absl::Status ReadOnce(const Route& r, uint64_t key, uint64_t* words, hash_map_internal::Lookup* l) {
    if (r.native) {
      *l = hash_map_internal::NativeFind<V>(LocalGroup(r), key, r.start, Policy::kVerifyReads, words);
      return absl::OkStatus();
    }
    if (absl::Status s = hash_map_internal::RemoteSnapshot<V>(*session_, r.group_ptr, snap_.data()); !s.ok()) {
      return s;
    }
    *l = hash_map_internal::FindKey<V>(snap_.data(), key, r.start, Policy::kVerifyReads, words);
    return absl::OkStatus();
  }

  // Get/Contains: optimistic reads until the key is found in a slot whose
  // checksum matches, or is absent (ScanGroup: absence needs no checksum), at
  // most kOptimisticReads times; then one read under the group lock, which a
  // correct map always accepts (writers hold the lock). `*found` says which;
  // when found, the slot's words are in `words` (L::kWords).
  absl::Status LookupUnlocked(const Route& r, uint64_t key, uint64_t* words, bool* found) {
    hash_map_internal::Lookup l;
    for (int attempt = 0; attempt < kOptimisticReads; ++attempt) {
      if (absl::Status s = ReadOnce(r, key, words, &l); !s.ok()) return s;
      if (l.kind != hash_map_internal::Lookup::kTorn) {
        *found = l.kind == hash_map_internal::Lookup::kFound;
        return absl::OkStatus();
      }
      ++stats_.torn_reads;
      if (attempt >= 2) std::this_thread::yield();  // let the writer finish (2-core machines)
    }
    ++stats_.locked_reads;
    if (absl::Status s = lock_->Lock(r.group_ptr, r.lock_path); !s.ok()) return s;
    absl::Status s = ReadOnce(r, key, words, &l);
    absl::Status u = lock_->Unlock(r.group_ptr);
    if (!s.ok()) return s;
    if (!u.ok()) return u;
    if (l.kind == hash_map_internal::Lookup::kTorn) return Corrupt(r);
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
    Route r;
    if (absl::Status s = RouteFor(key, path, &r); !s.ok()) return s;
    const bool take_lock = !r.native || Policy::kNativeWritersLock;
    if (take_lock) {
      if (absl::Status s = lock_->Lock(r.group_ptr, r.lock_path); !s.ok()) return s;
    }
    absl::Status s = WriteUnderLock(r, key, decide);
    if (take_lock && lock_->Holds(r.group_ptr)) {
      absl::Status u = lock_->Unlock(r.group_ptr);
      if (s.ok()) s = u;
    }
    return s;
  }

  template <typename Decide>
  absl::Status WriteUnderLock(const Route& r, uint64_t key, Decide& decide) {
    uint64_t found[L::kWords];  // the key's slot as read (kFound)
    hash_map_internal::Lookup l;
    if (r.native) {
      l = hash_map_internal::NativeFind<V>(LocalGroup(r), key, r.start, /*verify=*/false, found);
    } else {
      // The READ costs the same either way; checking every slot of the copy
      // (CPU only) reports a writer that bypassed the lock as DataLoss.
      if (absl::Status s = hash_map_internal::RemoteSnapshot<V>(*session_, r.group_ptr, snap_.data()); !s.ok()) {
        return s;
      }
      if (hash_map_internal::CountOccupied<V>(snap_.data()) < 0) return Corrupt(r);
      l = hash_map_internal::FindKey<V>(snap_.data(), key, r.start, /*verify=*/false, found);
    }
    Action a;
    if (absl::Status s = decide(l, static_cast<const uint64_t*>(found), &a); !s.ok()) return s;
    if (a.slot < 0) return absl::OkStatus();
    const bool overwrite = a.slot == l.slot && l.kind == hash_map_internal::Lookup::kFound;
    uint64_t words[L::kWords];
    L::MakeSlot(overwrite ? found[L::kStateWord] : l.free_state, key, a.value, words);
    if (r.native) {
      hash_map_internal::NativeStoreSlot<V>(*r.group_ptr.template local<Group>(), a.slot, words,
                                            /*key_unchanged=*/overwrite && a.value != nullptr);
      return absl::OkStatus();
    }
    bool inlined;
    if constexpr (!Policy::kReleaseAfterRemoteWrite) {
      // Test-only mutant: release first, then write.
      if (absl::Status u = lock_->Unlock(r.group_ptr); !u.ok()) return u;
      return hash_map_internal::RemoteStoreSlot<V>(*session_, r.group_ptr, a.slot, words, /*wait=*/true, &inlined);
    }
    return hash_map_internal::RemoteStoreSlot<V>(*session_, r.group_ptr, a.slot, words, /*wait=*/false, &inlined);
  }

  const int map_num_nodes_;
  const size_t groups_per_node_;
  const std::vector<rdma::RemotePtr> bases_;
  const std::vector<rdma::Node*> nodes_;
  rdma::Node& node_;
  rdma::Session* const session_;
  std::unique_ptr<locks::ALockClient> lock_;
  HashMapClientStats stats_;
  std::array<uint64_t, L::kSnapshotWords> snap_{};  // the last group read (private memory)
};

}  // namespace structures

#endif  // STRUCTURES_HASH_MAP_HASH_MAP_H_
