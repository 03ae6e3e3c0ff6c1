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
// Placement (docs/design.md §9.2): a node's part is a pool of segments of S
// units and a directory; a unit is a lock line and three 8-slot groups
// [main 0][overflow][main 1]. A fixed 64-bit mixer of the key picks its home
// node (HomeOf), its segment through the home node's directory, and two
// candidate windows in that segment: a window is one side of a unit, its
// main group plus the unit's shared overflow group, 16 contiguous slots. A
// key is in one slot of one of its windows while present and moves only when
// a split moves it to the same slot of a new segment. Two choices over shared
// overflow groups fill a segment to about 0.9 before a key finds both windows
// full (structures/README.md, Capacity); then the segment splits (extendible
// hashing): the map grows while every client keeps working, and clients
// learn the new layout from the directory alone. Deterministic across
// processes.
//
// Paths (chosen per operation from rdma::Path, rdma/path.h):
//   native    the key's home is the client's node (kAuto or kNative): CPU
//             loads and stores only; the unit locks are ALock's local cohort.
//             No NIC operation unless remote writers contend for a unit.
//   loopback  the key's home is the client's node and path == kLoopback: the
//             same operations as remote, over the client's loopback QP.
//   remote    the key lives on another node: one-sided RDMA.
//
// Concurrency (invariants in layout.h; the proof in structures/README.md):
//   * Growth: a write that finds both windows of a new key full splits the
//     key's segment X: under the node's directory lock and every unit lock of
//     X it copies the keys of X whose hash has the next directory bit set to
//     the same slots of a fresh segment Y, rewrites X's slots with the next
//     epoch (moved ones empty), then publishes the directory (a seqlock).
//     Every slot's state word carries its segment's epoch, so a reader or
//     writer whose directory (native: read in place; NIC: a cached copy) is
//     stale sees another epoch and retries with a fresh directory.
//   * Writers (Put, Insert, Erase) hold the ALock lines of both candidate
//     units (taken in unit order; one lock when the windows share a unit).
//     Under them they scan both windows (natively: CPU loads in place), and
//     store one slot tuple (state/version, key, value, checksum): over the
//     key's slot if present, else into the window with more free slots.
//   * Readers (Get, Contains) take no lock. Each key has a start slot (from its
//     hash); readers scan the two main groups and then the overflow groups,
//     each circularly from it, looking at state and key words only
//     (natively: CPU loads in place, usually one slot; NIC: both windows
//     with two READs in one doorbell, scanned in private memory). The slot holding the key is
//     accepted only if its checksum matches; a torn found slot is read again.
//     "Absent" needs no checksum (layout.h). After kOptimisticReads torn
//     reads in a row a reader takes both unit locks and reads under them, so
//     readers never starve and never fail because of contention.
//
// Costs (uncontended, asserted by tests/structures/hash_map_test.cc):
//   native Get/Put/Insert/Erase:   0 NIC ops, also while other segments
//                                  split (and splits by native writers). A Get
//                                  looks the segment up in place, then scans
//                                  from the key's start slot: usually one slot
//                                  loaded and one slot checksum.
//   remote/loopback Get, Contains: 2 NIC ops (one READ per window, in one
//                                  doorbell), 1 round trip, hit or miss.
//   remote/loopback Put/Insert/Erase that writes, windows in two units, slot
//     <= 64 bytes (values of up to 40 bytes): lock each unit with its window
//     READ in the acquire's chain (CAS + READ + READ, 1 RT each), WRITE slot
//     posted without waiting, unlock each (CAS, 1 RT each): 9 NIC ops, 4 round
//     trips, 5 doorbells. Windows in one unit: one lock whose chain READs
//     both (4 NIC ops, 1 RT), WRITE, unlock: 6 NIC ops, 2 round trips. Larger
//     slots are not inlined: the WRITE is waited for, one round trip more.
//   one that does not write (Insert of a present key, Erase of an absent one):
//     the same without the WRITE (8 NIC ops, 4 round trips).
//   an operation whose cached directory is stale: + 1 round trip to re-read
//     the directory (seqlock: 4 READs in one doorbell) + the operation again.
//   a split (remote): the directory lock, S unit locks (1 RT each), READs of
//     the directory and the segment, WRITEs of two segments and the
//     directory (1 RT each), S + 1 unlocks; about 2S + 6 round trips,
//     amortized over the ~S * 10 inserts that fill a half-full segment.
//
// Capacity: nodes * units * 24 slots at creation (groups_per_node rounded up
// to whole units of three groups and whole segments), growing to
// max_groups_per_node (default 4 x groups_per_node; its memory is reserved
// in the arena at creation). Put/Insert fail with ResourceExhausted only when
// a key's windows are full and its segment cannot split (the pool is used
// up, or growth is off: max_groups_per_node == groups_per_node); nothing
// already stored is affected. A map without room to grow is one segment and
// says full first at a load of about 0.9. See structures/README.md.
//
// Errors (absl::Status): InvalidArgument for a node id out of range, a bad
// option (max_groups_per_node below groups_per_node), a Session of another node, a path that cannot be honoured (kNative
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
#include "structures/hash_map/layout.h"
#include "structures/hash_map/policy.h"

namespace structures {

using hash_map_internal::HashMapValue;  // trivially copyable, sizeof <= 56
using HashMapClientStats = ReadStats;

struct HashMapOptions {
  // 8-slot groups per node at creation, rounded up to whole units of three
  // groups and then to whole segments (capacity(); structures/README.md,
  // Capacity).
  size_t groups_per_node = 1024;
  // How far each node's part may grow, in groups: its pool of segments is
  // reserved in the node's arena at creation (PartBytes). 0: 4 x
  // groups_per_node. Equal to groups_per_node: the map never grows, and a
  // key whose two windows are full gets ResourceExhausted.
  size_t max_groups_per_node = 0;
  locks::Budgets budgets;  // ALock budgets of every unit lock (and of the directory lock)
};

// `Policy` exists only so tests can build deliberately broken variants from
// this same source (tests/structures/hash_map_mutants.h). Use the default.
template <typename V, typename Policy = HashMapPolicy>
class HashMap {
  using L = hash_map_internal::SlotLayout<V>;
  static_assert(HashMapValue<V>, "HashMap<V>: V must be trivially copyable and at most 56 bytes");
  static_assert(hash_map_internal::UnitLayoutOk<V>());

 public:
  using Client = HashMapClient<V, Policy>;
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
  static absl::StatusOr<HashMap> Create(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes,
                                        const HashMapOptions& options) {
    const int num_nodes = peers.num_nodes();
    if (absl::Status s = Validate(options); !s.ok()) return s;
    // Every unit is guarded by an ALock.
    if (absl::Status s = CheckALockParts("HashMap", local_nodes, options.budgets); !s.ok()) return s;
    absl::StatusOr<PartDirectory> parts = PartDirectory::Create(
        "HashMap", num_nodes, local_nodes, PartBytes(options),
        [&options](rdma::Node& node, rdma::RemotePtr part) { return InitPart(node, part, options); });
    if (absl::IsResourceExhausted(parts.status()) && GeometryOf(options).can_grow()) {
      // Most of a growing map's part is its reserved pool: say so.
      return absl::ResourceExhaustedError(absl::StrCat(
          parts.status().message(), " (the part reserves room to grow to max_groups_per_node = ",
          MaxGroupsOf(options),
          " groups: ", PartBytes(options), " bytes; lower max_groups_per_node, down to groups_per_node for a map "
          "that never grows, or enlarge the arena)"));
    }
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
    // A splitter holds the directory lock and every unit lock of a segment.
    locks::ClientOptions lock_options = StructureClient::TwoLocks();
    if (g_.can_grow()) lock_options.max_held = std::max<size_t>(2, g_.segment_units + 1);
    absl::StatusOr<StructureClient> common = StructureClient::Create(parts_, node, session, lock_options);
    if (!common.ok()) return common.status();
    return std::make_unique<Client>(std::move(*common), g_);
  }

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
  HashMap(PartDirectory parts, const HashMapOptions& options) : parts_(std::move(parts)), g_(GeometryOf(options)) {}

  // max_groups_per_node with its default (0: 4 x groups_per_node) applied.
  static size_t MaxGroupsOf(const HashMapOptions& o) {
    return o.max_groups_per_node == 0 ? 4 * o.groups_per_node : o.max_groups_per_node;
  }
  static hash_map_internal::Geometry GeometryOf(const HashMapOptions& o) {
    return hash_map_internal::GeometryFor(o.groups_per_node, MaxGroupsOf(o));
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

}  // namespace structures

#endif  // STRUCTURES_HASH_MAP_HASH_MAP_H_
