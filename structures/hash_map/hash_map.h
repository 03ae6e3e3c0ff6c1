#ifndef STRUCTURES_HASH_MAP_HASH_MAP_H_
#define STRUCTURES_HASH_MAP_HASH_MAP_H_

// A distributed hash map from uint64_t keys to small trivially copyable
// values, living in the registered arenas of a cluster's nodes and usable by
// any thread on any node. Linearizable for any mix of paths.
//
//   ASSIGN_OR_RETURN(auto map, structures::HashMap<Value>::Open(*cluster, "sessions", {.groups_per_node = 4096}));
//   ASSIGN_OR_RETURN(auto client, map.NewClient(*thread));  // thread = cluster->ThisThread()
//   absl::StatusOr<std::optional<Value>> prev = client->Put(key, value);
//   absl::StatusOr<std::optional<Value>> v = client->Get(key);
//
// Open creates the map or attaches to it by name, in any process and any
// order (structures/common/catalogue.h); Create(cluster, options) makes an
// unnamed map over an in-process cluster's nodes.
//
// Contract. A client is one thread's (with that thread's Session); the map
// is move-only, owns the unnamed parts it created, and is destroyed after its
// clients and before its nodes. Paths (rdma/path.h): native when the key's
// home is the client's node (CPU loads and stores, 0 NIC ops uncontended),
// loopback on request, remote otherwise (one-sided RDMA). Writers hold the
// ALock of both candidate units; readers take no lock and validate slot
// checksums and epochs, falling back to the locks after kOptimisticReads
// torn reads. A key whose two windows are full splits its segment (the map
// grows online up to max_groups_per_node).
//
// Costs, uncontended (asserted by tests/structures/hash_map_test.cc):
//   native Get/Put/Insert/Erase         0 NIC ops
//   remote Get, Contains                2 NIC ops, 1 round trip
//   remote Put/Insert/Erase, two units  9 NIC ops, 4 round trips, 5 doorbells
//   remote Put/Insert/Erase, one unit   6 NIC ops, 2 round trips
//
// Errors: InvalidArgument (bad node, option, Session or path),
// FailedPrecondition (no Session for a NIC path), Unavailable (own node
// shut down or fenced, or the key's home is known to be down), ResourceExhausted (a
// key's windows are full and its segment cannot split; nothing stored is
// lost), DeadlineExceeded (a lock or completion wait ran out), DataLoss (a
// slot inconsistent under the lock: a bug). Layout, protocol and proofs:
// docs/design.md §9.2.

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/node.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "structures/common/client.h"
#include "structures/common/parts.h"
#include "structures/hash_map/client.h"
#include "structures/hash_map/directory.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/placement.h"
#include "structures/hash_map/search.h"
#include "structures/hash_map/policy.h"

namespace structures {

using hash_map_internal::HashMapValue;  // trivially copyable, sizeof <= 56
using HashMapClientStats = ReadStats;

namespace hash_map_internal {
template <typename V, typename Checks>
class BasicHashMap;
}  // namespace hash_map_internal

// The map and its per-thread client.
template <typename V>
using HashMap = hash_map_internal::BasicHashMap<V, hash_map_internal::ShippedChecks>;
template <typename V>
using HashMapClient = hash_map_internal::BasicHashMapClient<V, hash_map_internal::ShippedChecks>;

struct HashMapOptions {
  // 8-slot groups per node at creation, rounded up to whole units of three
  // groups and then to whole segments (capacity(); docs/design.md
  // §9.2.6).
  size_t groups_per_node = 1024;
  // How far each node's part may grow, in groups: its pool of segments is
  // reserved in the node's arena at creation (PartBytes). 0: 4 x
  // groups_per_node. Equal to groups_per_node: the map never grows, and a
  // key whose two windows are full gets ResourceExhausted.
  size_t max_groups_per_node = 0;
  locks::Budgets budgets;  // ALock budgets of every unit lock (and of the directory lock)
};

namespace hash_map_internal {

// HashMap<V>. `Checks` is ShippedChecks except in tests (policy.h).
template <typename V, typename Checks>
class BasicHashMap : public CreateOnCluster<BasicHashMap<V, Checks>, HashMapOptions> {
  using L = hash_map_internal::SlotLayout<V>;
  static_assert(HashMapValue<V>, "HashMap<V>: V must be trivially copyable and at most 56 bytes");
  static_assert(hash_map_internal::UnitLayoutOk<V>());

 public:
  using Client = BasicHashMapClient<V, Checks>;
  static constexpr size_t kSlotsPerGroup = hash_map_internal::kSlotsPerGroup;
  static constexpr size_t kSlotsPerUnit = hash_map_internal::kSlotsPerUnit;
  static constexpr size_t kUnitBytes = L::kUnitBytes;
  static constexpr size_t kSlotBytes = L::kBytes;
  static constexpr int kOptimisticReads = StructureClient::kOptimisticReads;

  // Creates the parts of `local_nodes` (the nodes this process hosts, all of
  // them or some) for a map over peers.num_nodes() nodes; each part is
  // PartBytes(options) of its node's arena. Processes that host the other
  // nodes create theirs with the same options, at the same point of their
  // allocation sequence (structures/common/parts.h). Errors:
  // InvalidArgument (bad options or nodes), FailedPrecondition (a node shut
  // down or without RDMA atomics), ResourceExhausted (an arena too small).
  static absl::StatusOr<BasicHashMap> Create(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes,
                                             const HashMapOptions& options) {
    return Build(PartSource::Fresh(peers, local_nodes), options);
  }
  // The map named `name` in `cluster`: created by whichever process asks
  // first, attached to by every later Open in any process
  // (structures/common/catalogue.h). Errors: Create's, and
  // FailedPrecondition when `name` exists as another structure, value size
  // or options (naming both), ResourceExhausted when the catalogue or the
  // cluster's named_bytes is full.
  static absl::StatusOr<BasicHashMap> Open(rdma::Cluster& cluster, absl::string_view name,
                                           const HashMapOptions& options = {}) {
    return Build(PartSource::Named(cluster, name, StructureKind::kHashMap, sizeof(V)), options);
  }
  // Every node of an in-process cluster.
  using CreateOnCluster<BasicHashMap, HashMapOptions>::Create;

  BasicHashMap(BasicHashMap&&) = default;
  BasicHashMap& operator=(BasicHashMap&&) = default;

  // A client for the calling thread, from its handle on the cluster
  // (rdma::Cluster::ThisThread): it lives on thread.node() and uses the
  // session for the NIC paths. It allocates its lock descriptors in that
  // node's arena; the session outlives it, and the structure outlives its use.
  absl::StatusOr<std::unique_ptr<Client>> NewClient(rdma::Session& thread) const {
    return NewClientOn(thread.node(), &thread);
  }
  // A client that takes only native paths, on `node` (hosted by this
  // process): without a Session, an operation whose key is homed on another
  // node, or that asks for a NIC path, is FailedPrecondition.
  absl::StatusOr<std::unique_ptr<Client>> NewClient(rdma::Node& node) const { return NewClientOn(node, nullptr); }

  rdma::NodeId HomeOf(uint64_t key) const { return Place(key).node; }
  // Slots at creation, and the most the map can grow to.
  size_t capacity() const { return static_cast<size_t>(num_nodes()) * units_per_node() * kSlotsPerUnit; }
  size_t max_capacity() const {
    return static_cast<size_t>(num_nodes()) * g_.pool_units() * kSlotsPerUnit;
  }
  int num_nodes() const { return parts_.num_nodes(); }
  // Units per node at creation (whole segments).
  size_t units_per_node() const { return g_.initial_units(); }
  const hash_map_internal::Geometry& geometry() const { return g_; }
  // The two units (within its home node's part) whose windows may hold `key`
  // in the layout at creation, before any split (equal when both windows are
  // the two sides of one unit).
  std::array<size_t, 2> CandidatesOf(uint64_t key) const {
    const hash_map_internal::Placement p = Place(key);
    const size_t first = (p.dir & (g_.initial_segments() - 1)) * g_.segment_units;
    return {first + p.c[0].unit, first + p.c[1].unit};
  }
  // The bytes of one node's part (each node's arena must have them): the
  // pool of segments for max_groups_per_node, and the directory.
  static size_t PartBytes(const HashMapOptions& o) {
    const hash_map_internal::Geometry g = GeometryOf(o);
    return g.pool_units() * kUnitBytes + hash_map_internal::kDirEntriesOffset + (size_t{8} << g.max_depth);
  }
  // Where node `n`'s part starts when this process created it, else null.
  rdma::RemotePtr PartBase(rdma::NodeId n) const { return parts_.local_base(n); }

 private:
  // A client for the calling thread, living on `node` (hosted by this
  // process), using `session` (that thread's own Session on `node`) for the
  // NIC paths. `session` may be null for a client that only takes native
  // paths. The client allocates one ALock descriptor line in `node`'s arena.
  // `node` must outlive it; the map must outlive its use.
  absl::StatusOr<std::unique_ptr<Client>> NewClientOn(rdma::Node& node, rdma::Session* session) const {
    // A splitter holds the directory lock and every unit lock of a segment.
    locks::ClientOptions lock_options = StructureClient::TwoLocks();
    if (g_.can_grow()) lock_options.max_held = std::max<size_t>(2, g_.segment_units + 1);
    return MakeClient<Client>(parts_, node, session, lock_options, g_);
  }

  BasicHashMap(PartDirectory parts, const HashMapOptions& options) : parts_(std::move(parts)), g_(GeometryOf(options)) {}

  // max_groups_per_node with its default (0: 4 x groups_per_node) applied.
  static size_t MaxGroupsOf(const HashMapOptions& o) {
    return o.max_groups_per_node == 0 ? 4 * o.groups_per_node : o.max_groups_per_node;
  }
  static hash_map_internal::Geometry GeometryOf(const HashMapOptions& o) {
    return hash_map_internal::GeometryFor(o.groups_per_node, MaxGroupsOf(o));
  }

  static absl::StatusOr<BasicHashMap> Build(const PartSource& source, const HashMapOptions& options) {
    if (absl::Status s = Validate(options); !s.ok()) return s;
    // Every unit is guarded by an ALock.
    if (absl::Status s = CheckALockParts("HashMap", source.local_nodes(), options.budgets); !s.ok()) return s;
    absl::StatusOr<PartDirectory> parts = source.Make(
        "HashMap", OptionsText(options), PartBytes(options),
        [&options](rdma::Node& node, rdma::RemotePtr part) { return InitPart(node, part, options); },
        // Every unit's lock, then the directory's.
        {LockLines{.offset = 0, .stride = kUnitBytes, .count = GeometryOf(options).pool_units() + 1}});
    if (absl::IsResourceExhausted(parts.status()) && GeometryOf(options).can_grow()) {
      // Most of a growing map's part is its reserved pool: say so.
      return absl::ResourceExhaustedError(absl::StrCat(
          parts.status().message(), " (the part reserves room to grow to max_groups_per_node = ",
          MaxGroupsOf(options),
          " groups: ", PartBytes(options), " bytes; lower max_groups_per_node, down to groups_per_node for a map "
          "that never grows, or enlarge the arena)"));
    }
    if (!parts.ok()) return parts.status();
    return BasicHashMap(std::move(*parts), options);
  }
  // What a named map's processes must agree on (catalogue.h).
  static std::string OptionsText(const HashMapOptions& o) {
    return absl::StrCat("groups_per_node=", o.groups_per_node, " max_groups_per_node=", MaxGroupsOf(o),
                        " budgets=", o.budgets.local, "/", o.budgets.remote);
  }
  static absl::Status Validate(const HashMapOptions& o) {
    const size_t max_groups = (size_t{1} << 40) / kUnitBytes * hash_map_internal::kGroupsPerUnit;
    if (o.groups_per_node < 1 || o.groups_per_node > max_groups) {
      return absl::InvalidArgumentError(
          absl::StrCat("HashMap: groups_per_node ", o.groups_per_node, " out of range 1..", max_groups));
    }
    if (o.max_groups_per_node != 0 &&
        (o.max_groups_per_node < o.groups_per_node || o.max_groups_per_node > max_groups)) {
      return absl::InvalidArgumentError(absl::StrCat("HashMap: max_groups_per_node ", o.max_groups_per_node,
                                                     " out of range ", o.groups_per_node, "..", max_groups,
                                                     " (or 0 for 4 x groups_per_node)"));
    }
    return absl::OkStatus();
  }

  // A new part is zero-filled: every slot is an empty slot of epoch 0 (the
  // initial layout's) and every lock free with default budgets. The
  // directory is written here (initial layout: entry i -> segment i), and
  // lock words only for other budgets.
  static absl::Status InitPart(rdma::Node& node, rdma::RemotePtr part, const HashMapOptions& o) {
    const hash_map_internal::Geometry g = GeometryOf(o);
    const rdma::RemotePtr dir = part + g.pool_units() * kUnitBytes;
    auto* h = &rdma::RemoteRef<hash_map_internal::DirectoryHeader>::At(dir).Local(node.id());
    auto* entries = reinterpret_cast<rdma::PlainWord*>(reinterpret_cast<char*>(h) + hash_map_internal::kDirEntriesOffset);
    for (size_t i = 0; i < g.initial_segments(); ++i) {
      entries[i].Store(hash_map_internal::DirEntry(i, g.base_depth), std::memory_order_relaxed);
    }
    h->depth.Store(static_cast<uint64_t>(g.base_depth), std::memory_order_relaxed);
    h->segments.Store(g.initial_segments(), std::memory_order_release);
    if (DefaultBudgets(o.budgets)) return absl::OkStatus();
    for (size_t u = 0; u <= g.pool_units(); ++u) {  // every unit's lock, then the directory lock
      absl::Status s = locks::InitLock(part + u * kUnitBytes, node.id(), {locks::LockKind::kALock, o.budgets});
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  hash_map_internal::Placement Place(uint64_t key) const {
    return hash_map_internal::Place(key, num_nodes(), g_.segment_units);
  }

  PartDirectory parts_;
  hash_map_internal::Geometry g_;
};

}  // namespace hash_map_internal
}  // namespace structures

#endif  // STRUCTURES_HASH_MAP_HASH_MAP_H_
