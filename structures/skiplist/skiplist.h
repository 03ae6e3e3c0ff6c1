#ifndef STRUCTURES_SKIPLIST_SKIPLIST_H_
#define STRUCTURES_SKIPLIST_SKIPLIST_H_

// A distributed ordered map from 64-bit keys to trivially copyable values of
// up to 56 bytes. The key space is range-partitioned over the nodes (split
// keys given at creation); each node's range lives in its registered arena as
// a skiplist of wide nodes (B-link leaves with towers, layout.h). Any thread
// on any node may use the whole map. Linearizable for any mix of paths
// (Get, Contains, Put, Insert, Erase, LowerBound); Scan is weakly consistent.
//
//   ASSIGN_OR_RETURN(auto map, structures::SkipList<Row>::Create(*cluster, {}));
//   // per thread, on node n, with that thread's own Session:
//   ASSIGN_OR_RETURN(auto client, map.NewClient(node, session.get()));
//   absl::StatusOr<std::optional<Row>> prev = client->Put(42, row);
//   absl::StatusOr<std::optional<std::pair<uint64_t, Row>>> lb = client->LowerBound(40);
//   absl::StatusOr<std::vector<std::pair<uint64_t, Row>>> some = client->Scan(0, 100);
//
// Paths (per operation, rdma::Path; an ordered read that runs past its home's
// range continues into the next nodes' parts on the path it can take there):
//   native    the key's home is the client's node (kAuto or kNative): CPU
//             loads, stores and ALock's native cohort. No NIC op unless a NIC
//             writer holds the node's lock.
//   loopback  the home is the client's node and path == kLoopback.
//   remote    the home is another node: one-sided READ/WRITE and ALock's NIC
//             cohort, no RPC, no help from the home's CPU; new nodes are
//             allocated (and emptied ones freed) one-sidedly too: the part's
//             allocator is a counter and a free list under their own ALock.
//
// Concurrency (invariants in layout.h; the argument in structures/README.md,
// "Ordered map"): writers lock the node that owns the key (ALock: native
// cohort on CPU atomics, NIC cohort on RDMA CAS) and publish a new version of
// it; readers take no lock and validate what they copied (native: the node's
// version, a seqlock; NIC: the node's checksum), then move right when the key
// is past the node's high fence (a split since they read the link). Erased
// entries are reused in place; an emptied node is unlinked (its range merged
// into its predecessor), marked dead and reused by a later split. Every
// reader checks on a validated copy that the node is live and owns the key,
// so a stale link or remembered location (clients remember where leaves are:
// low key -> node) is only a longer walk.
//
// Costs (uncontended, asserted by tests/structures/skiplist_test.cc):
//   native, any operation: 0 NIC ops.
//   remote/loopback Get or Contains with the leaf's location remembered:
//     1 READ, 1 round trip. Without it: one READ per node the descent looks
//     at (about 2 per level used), then the leaf's.
//   remote/loopback Put/Insert/Erase without a split, location remembered:
//     2 round trips: {CAS lock, READ lock line, READ image} in one doorbell;
//     {WRITE version+1, WRITE the changed words (the value; an insert also
//     the key and the occupancy bitmap), WRITE checksum, WRITE version+2}
//     posted inline without waiting; the unlocking CAS. 8 NIC ops for an
//     overwrite or an erase, 10 for an insert.
//   A split adds the allocator's lock (2 round trips), the new node's lock
//   and WRITE, and, for a node with a tower, its links (2 locks per level);
//   an erase that empties a node adds its reclamation (2 locks per level it
//   was linked at, then the allocator's).
//   remote/loopback Scan(k, n): the start node's READ, then the nodes after
//   it that the client remembers, READ in one doorbell (as many as the rest
//   of the scan needs at the last node's fill): 13 READs in 3 round trips
//   for 100 keys over nodes of 8 keys.
//
// Errors: InvalidArgument (bad options, a zero Scan limit, a path that cannot
// be honoured), FailedPrecondition (the client's node is shut down; a NIC
// path without a Session), Unavailable (the home is a node of this process
// that is shut down), ResourceExhausted (a part's node pool is used up:
// the message names part_bytes), DataLoss (a node fails validation even under
// its lock: a writer broke the protocol), Aborted (LowerBound kept meeting
// writers for 1000 attempts). Lock waits are bounded by lock_timeout.

#include <chrono>
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
#include "structures/common/client.h"
#include "structures/common/parts.h"
#include "structures/skiplist/client.h"
#include "structures/skiplist/layout.h"
#include "structures/skiplist/policy.h"

namespace structures {

struct SkipListOptions {
  // Node i owns keys [split_keys[i-1], split_keys[i]): num_nodes - 1 strictly
  // increasing keys. Empty: the 64-bit key space in equal ranges.
  std::vector<uint64_t> split_keys;
  // Bytes of each node's part (its pool of wide nodes) in its arena.
  uint64_t part_bytes = uint64_t{16} << 20;
  locks::Budgets budgets;  // ALock budgets of every node lock
  std::chrono::nanoseconds lock_timeout = std::chrono::seconds(30);
  // Leaf locations a NIC client remembers (0: as many as a part has nodes).
  size_t cache_entries = 0;
};

template <typename V, typename Policy = SkipListPolicy>
class SkipList {
  static_assert(skiplist_internal::SkipListValue<V>,
                "SkipList<V>: V must be trivially copyable and at most 56 bytes");
  static_assert(skiplist_internal::NodeLayoutOk<V>() && skiplist_internal::WordsOk<V>());
  using L = skiplist_internal::NodeLayout<V>;

 public:
  using Client = SkipListClient<V, Policy>;
  static constexpr size_t kFanout = skiplist_internal::kFanout;
  static constexpr uint64_t kNodeBytes = L::kNodeBytes;

  // Creates the parts of `local_nodes` (the nodes this process hosts) for a
  // map over peers.num_nodes() nodes; processes hosting other nodes create
  // theirs with the same options at the same point of their allocation
  // sequence (structures/common/parts.h). Errors: InvalidArgument (bad
  // options or nodes), FailedPrecondition (a node shut down or without RDMA
  // atomics), ResourceExhausted (an arena too small for part_bytes).
  static absl::StatusOr<SkipList> Create(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes,
                                         const SkipListOptions& options) {
    const int n = peers.num_nodes();
    SkipListOptions o = options;
    if (o.split_keys.empty() && n > 1) {
      for (int i = 1; i < n; ++i) {
        o.split_keys.push_back(static_cast<uint64_t>((static_cast<unsigned __int128>(i) << 64) / n));
      }
    }
    if (o.split_keys.size() != static_cast<size_t>(n - 1)) {
      return absl::InvalidArgumentError(absl::StrCat("SkipList: ", o.split_keys.size(), " split keys for ", n,
                                                     " nodes; give num_nodes - 1 (or none for equal ranges)"));
    }
    for (size_t i = 0; i < o.split_keys.size(); ++i) {
      if ((i > 0 && o.split_keys[i] <= o.split_keys[i - 1]) || o.split_keys[i] == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("SkipList: split keys must be positive and strictly increasing; split_keys[", i,
                         "] = ", o.split_keys[i]));
      }
    }
    if (L::NodesIn(o.part_bytes) < 2) {
      return absl::InvalidArgumentError(absl::StrCat("SkipList: part_bytes ", o.part_bytes,
                                                     " holds fewer than 2 nodes of ", kNodeBytes, " bytes"));
    }
    if (o.lock_timeout <= std::chrono::nanoseconds::zero()) {
      return absl::InvalidArgumentError("SkipList: lock_timeout must be positive");
    }
    if (absl::Status s = CheckALockParts("SkipList", local_nodes, o.budgets); !s.ok()) return s;
    const uint64_t nodes = L::NodesIn(o.part_bytes);
    absl::StatusOr<PartDirectory> parts = PartDirectory::Create(
        "SkipList", n, local_nodes, o.part_bytes, [&o, nodes](rdma::Node& node, rdma::RemotePtr part) -> absl::Status {
          if (DefaultBudgets(o.budgets)) return absl::OkStatus();
          const locks::LockInit init{locks::LockKind::kALock, o.budgets};
          if (absl::Status s = locks::InitLock(part + offsetof(skiplist_internal::PartHeader, alloc_lock), node.id(), init);
              !s.ok()) {
            return s;
          }
          for (uint64_t i = 0; i < nodes; ++i) {
            if (absl::Status s = locks::InitLock(part + L::NodeOffset(i), node.id(), init); !s.ok()) return s;
          }
          return absl::OkStatus();
        });
    if (!parts.ok()) return parts.status();
    return SkipList(std::move(*parts), std::move(o));
  }
  // Every node of an in-process cluster.
  static absl::StatusOr<SkipList> Create(rdma::Cluster& cluster, const SkipListOptions& options) {
    return Create(cluster, AllNodes(cluster), options);
  }

  SkipList(SkipList&&) = default;
  SkipList& operator=(SkipList&&) = default;

  // A client for the calling thread on `node` (hosted by this process) with
  // `session`, that thread's own Session there (null: native paths only).
  // Allocates two ALock descriptor lines in `node`'s arena (a split holds a
  // node's lock and the allocator's).
  absl::StatusOr<std::unique_ptr<Client>> NewClient(rdma::Node& node, rdma::Session* session) const {
    locks::ClientOptions lock_options = StructureClient::OneLock();
    lock_options.max_held = 2;
    lock_options.timeout = options_.lock_timeout;
    absl::StatusOr<StructureClient> common = StructureClient::Create(parts_, node, session, lock_options);
    if (!common.ok()) return common.status();
    return std::make_unique<Client>(std::move(*common), options_.split_keys, options_.part_bytes,
                                    options_.cache_entries == 0 ? nodes_per_part() : options_.cache_entries);
  }

  int num_nodes() const { return parts_.num_nodes(); }
  const std::vector<uint64_t>& split_keys() const { return options_.split_keys; }
  rdma::NodeId HomeOf(uint64_t key) const { return skiplist_internal::HomeOf(options_.split_keys, key); }
  uint64_t nodes_per_part() const { return L::NodesIn(options_.part_bytes); }

 private:
  SkipList(PartDirectory parts, SkipListOptions options) : parts_(std::move(parts)), options_(std::move(options)) {}

  PartDirectory parts_;
  SkipListOptions options_;
};

}  // namespace structures

#endif  // STRUCTURES_SKIPLIST_SKIPLIST_H_
