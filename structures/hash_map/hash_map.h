#ifndef STRUCTURES_HASH_MAP_HASH_MAP_H_
#define STRUCTURES_HASH_MAP_HASH_MAP_H_

// A distributed hash map from uint64_t keys to small trivially copyable
// values, living in the registered arenas of a cluster's nodes and usable by
// any thread on any node (docs/design.md §2). Linearizable for any mix of paths.
//
//   // In-process cluster (tests, benchmarks): every node's part at once.
//   ASSIGN_OR_RETURN(auto map, structures::HashMap<Value>::Create(*cluster, {.groups_per_node = 4096}));
//   // A multi-process service: each process creates the part of the node it
//   // hosts; the Connector says how many nodes there are.
//   ASSIGN_OR_RETURN(auto map, structures::HashMap<Value>::Create(connector, {&my_node}, options));
//   // Per thread, on node n, with that thread's own Session:
//   ASSIGN_OR_RETURN(auto client, map.NewClient(node, session.get()));
//   absl::StatusOr<std::optional<Value>> prev = client->Put(key, value);
//   absl::StatusOr<std::optional<Value>> v = client->Get(key);
//
// The map owns the parts it created and frees them when destroyed: destroy it
// after its clients and before its nodes. It is move-only.
//
// Placement: a fixed 64-bit mixer of the key picks one of the
// num_nodes * groups_per_node bucket groups; group g lives on node
// g / groups_per_node (HomeOf). Deterministic across processes.
//
// Paths (chosen per operation from rdma::Path, rdma/path.h):
//   native    the key's home is the client's node (kAuto or kNative): CPU
//             loads and stores only; the group lock is ALock's local cohort.
//             No NIC operation unless remote writers contend for the group.
//   loopback  the key's home is the client's node and path == kLoopback: the
//             same operations as remote, over the client's loopback QP.
//   remote    the key lives on another node: one-sided RDMA.
//
// Concurrency (invariants in layout.h; the proof in structures/README.md):
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
// option, a Session of another node, a path that cannot be honoured (kNative
// for another node's key, kRemote for one's own); FailedPrecondition when the client's own
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
#include "structures/hash_map/layout.h"
#include "structures/hash_map/policy.h"

namespace structures {

using hash_map_internal::HashMapValue;  // trivially copyable, sizeof <= 56
using HashMapClientStats = ReadStats;

struct HashMapOptions {
  size_t groups_per_node = 1024;  // capacity = nodes * groups_per_node * kSlotsPerGroup
  locks::Budgets budgets;         // ALock budgets of every group lock
};

// `Policy` exists only so tests can build deliberately broken variants from
// this same source (tests/structures/hash_map_mutants.h). Use the default.
template <typename V, typename Policy = HashMapPolicy>
class HashMap {
  using L = hash_map_internal::SlotLayout<V>;
  static_assert(HashMapValue<V>, "HashMap<V>: V must be trivially copyable and at most 56 bytes");
  static_assert(hash_map_internal::GroupLayoutOk<V>());

 public:
  using Client = HashMapClient<V, Policy>;
  static constexpr size_t kSlotsPerGroup = hash_map_internal::kSlotsPerGroup;
  static constexpr size_t kGroupBytes = L::kGroupBytes;
  static constexpr size_t kSlotBytes = L::kBytes;
  static constexpr int kOptimisticReads = StructureClient::kOptimisticReads;

  // Creates the parts of `local_nodes` (the nodes this process hosts, all of
  // them or some) for a map over peers.num_nodes() nodes; each part is
  // groups_per_node * kGroupBytes of its node's arena. Processes that host the
  // other nodes create theirs with the same options, at the same point of
  // their allocation sequence (structures/common/parts.h). Errors:
  // InvalidArgument (bad options or nodes), FailedPrecondition (a node shut
  // down or without RDMA atomics), ResourceExhausted (an arena too small).
  static absl::StatusOr<HashMap> Create(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes,
                                        const HashMapOptions& options) {
    const int num_nodes = peers.num_nodes();
    if (absl::Status s = Validate(options); !s.ok()) return s;
    // Every group is guarded by an ALock.
    if (absl::Status s = CheckALockParts("HashMap", local_nodes, options.budgets); !s.ok()) return s;
    absl::StatusOr<PartDirectory> parts = PartDirectory::Create(
        "HashMap", num_nodes, local_nodes, options.groups_per_node * kGroupBytes,
        [&options](rdma::Node& node, rdma::RemotePtr part) { return InitPart(node, part, options); });
    if (!parts.ok()) return parts.status();
    return HashMap(std::move(*parts), options);
  }
  // Every node of an in-process cluster.
  static absl::StatusOr<HashMap> Create(rdma::Cluster& cluster, const HashMapOptions& options) {
    return Create(cluster, AllNodes(cluster), options);
  }

  HashMap(HashMap&&) = default;
  HashMap& operator=(HashMap&&) = default;

  // A client for the calling thread, living on `node` (hosted by this
  // process), using `session` (that thread's own Session on `node`) for the
  // NIC paths. `session` may be null for a client that only takes native
  // paths. The client allocates one ALock descriptor line in `node`'s arena.
  // `node` must outlive it; the map must outlive its use.
  absl::StatusOr<std::unique_ptr<Client>> NewClient(rdma::Node& node, rdma::Session* session) const {
    absl::StatusOr<StructureClient> common = StructureClient::Create(parts_, node, session);
    if (!common.ok()) return common.status();
    return std::make_unique<Client>(std::move(*common), groups_per_node_);
  }

  rdma::NodeId HomeOf(uint64_t key) const { return Place(key).node; }
  size_t capacity() const { return static_cast<size_t>(num_nodes()) * groups_per_node_ * kSlotsPerGroup; }
  int num_nodes() const { return parts_.num_nodes(); }
  size_t groups_per_node() const { return groups_per_node_; }
  // The group (within its home node's part) that `key` maps to.
  size_t GroupOf(uint64_t key) const { return Place(key).group; }
  // Where node `n`'s part starts when this process created it, else null.
  rdma::RemotePtr PartBase(rdma::NodeId n) const { return parts_.local_base(n); }

 private:
  HashMap(PartDirectory parts, const HashMapOptions& options)
      : parts_(std::move(parts)), groups_per_node_(options.groups_per_node) {}

  static absl::Status Validate(const HashMapOptions& o) {
    if (o.groups_per_node < 1 || o.groups_per_node > (size_t{1} << 40) / kGroupBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("HashMap: groups_per_node ", o.groups_per_node, " out of range 1..", (size_t{1} << 40) / kGroupBytes));
    }
    return absl::OkStatus();
  }

  // A new part is zero-filled, which is already an empty map with default
  // lock budgets; only other budgets need stores.
  static absl::Status InitPart(rdma::Node& node, rdma::RemotePtr part, const HashMapOptions& o) {
    if (DefaultBudgets(o.budgets)) return absl::OkStatus();
    for (size_t g = 0; g < o.groups_per_node; ++g) {
      absl::Status s = locks::InitLock(part + g * kGroupBytes, node.id(), {locks::LockKind::kALock, o.budgets});
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  hash_map_internal::Placement Place(uint64_t key) const {
    return hash_map_internal::Place(key, num_nodes(), groups_per_node_);
  }

  PartDirectory parts_;
  size_t groups_per_node_ = 0;
};

}  // namespace structures

#endif  // STRUCTURES_HASH_MAP_HASH_MAP_H_
