#ifndef STRUCTURES_SKIPLIST_SKIPLIST_H_
#define STRUCTURES_SKIPLIST_SKIPLIST_H_

// SkipList<V>: a distributed ordered map from 64-bit keys to trivially
// copyable values of up to 56 bytes. The key space is range-partitioned over
// the nodes by split keys fixed at creation; each node's range is a skiplist
// of wide nodes (B-link leaves with towers, layout.h) in its arena. Any
// thread on any node may use the whole map.
//
//   ASSIGN_OR_RETURN(auto map, structures::SkipList<Row>::Open(*cluster, "index"));  // by name
//   ASSIGN_OR_RETURN(auto client, map.NewClient(*thread));  // thread = cluster->ThisThread()
//   absl::StatusOr<std::optional<Row>> prev = client->Put(42, row);
//   auto lb = client->LowerBound(40);     // smallest key >= 40, with its value
//   auto some = client->Scan(0, 100);     // up to 100 pairs from key 0 on
//
// Open creates the map or attaches to it, in any process, in any order
// (structures/common/catalogue.h); Create(cluster, options) makes an unnamed
// one over an in-process cluster's nodes. Contract. Thread safety: the map
// is shared; a Client is one thread's (with that thread's own Session). Ownership: the caller
// owns its clients; the cluster's nodes and the Session outlive them.
// Linearizable for any mix of paths (Get, Contains, Put, Insert, Erase,
// LowerBound); Scan is weakly consistent. Paths (rdma::Path): native (CPU
// loads, stores, ALock's native cohort) when the key's home is the client's
// node; loopback; remote (one-sided READ/WRITE/CAS, no RPC, the home's CPU
// not involved). Ordered reads continue into the next nodes' parts. Costs,
// uncontended (asserted by tests/structures/skiplist_test.cc):
//
//   native                      any operation          0 NIC ops
//   remote/loopback, leaf known Get / Contains         1 READ, 1 round trip
//                               Put, Erase / Insert    8 / 10 NIC ops, 2 round trips
//                               Scan(k, 100), 8/node   13 READs, 3 round trips
//   a split adds the allocator's lock, the new node's lock and its tower links
//
// Errors: InvalidArgument (options, Scan limit 0, a path that cannot be
// honoured), FailedPrecondition (NIC path without Session), Unavailable
// (own node shut down or fenced; home shut down), ResourceExhausted (a part's pool is full:
// names part_bytes), DataLoss (a node invalid under its lock), Aborted
// (LowerBound met writers 1000 times). Lock waits end at lock_timeout.
// Invariants: layout.h. The argument: docs/design.md §9.3.

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
  // Leaf locations a client remembers (0: as many as a part has nodes).
  size_t cache_entries = 0;
};

namespace skiplist_internal {

// The map, with its correctness switches (policy.h; only tests pass other
// than ShippedChecks). Users name it SkipList<V>.
template <typename V, typename Checks>
class BasicSkipList : public CreateOnCluster<BasicSkipList<V, Checks>, SkipListOptions> {
  static_assert(SkipListValue<V>, "SkipList<V>: V must be trivially copyable and at most 56 bytes");
  static_assert(NodeLayoutOk<V>() && WordsOk<V>());
  using L = NodeLayout<V>;

 public:
  using Client = BasicSkipListClient<V, Checks>;
  static constexpr size_t kFanout = skiplist_internal::kFanout;
  static constexpr uint64_t kNodeBytes = L::kNodeBytes;

  // Creates the parts of `local_nodes` (the nodes this process hosts) for a
  // map over peers.num_nodes() nodes; processes hosting other nodes create
  // theirs with the same options at the same point of their allocation
  // sequence (structures/common/parts.h). Errors: InvalidArgument (bad
  // options or nodes), FailedPrecondition (a node shut down or without RDMA
  // atomics), ResourceExhausted (an arena too small for part_bytes).
  static absl::StatusOr<BasicSkipList> Create(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes,
                                              const SkipListOptions& options) {
    return Build(PartSource::Fresh(peers, local_nodes), options);
  }
  // The ordered map named `name` in `cluster`: created by whichever process
  // asks first, attached to by every later Open in any process
  // (structures/common/catalogue.h). Errors: Create's, and
  // FailedPrecondition when `name` exists as another structure, value size
  // or options (naming both), ResourceExhausted when the catalogue or the
  // cluster's named_bytes is full.
  static absl::StatusOr<BasicSkipList> Open(rdma::Cluster& cluster, absl::string_view name,
                                            const SkipListOptions& options = {}) {
    return Build(PartSource::Named(cluster, name, StructureKind::kOrderedMap, sizeof(V)), options);
  }
  // Every node of an in-process cluster.
  using CreateOnCluster<BasicSkipList<V, Checks>, SkipListOptions>::Create;

  BasicSkipList(BasicSkipList&&) = default;
  BasicSkipList& operator=(BasicSkipList&&) = default;

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

  int num_nodes() const { return parts_.num_nodes(); }
  const std::vector<uint64_t>& split_keys() const { return options_.split_keys; }
  rdma::NodeId HomeOf(uint64_t key) const { return skiplist_internal::HomeOf(options_.split_keys, key); }
  uint64_t nodes_per_part() const { return L::NodesIn(options_.part_bytes); }

 private:
  // A client for the calling thread on `node` (hosted by this process) with
  // `session`, that thread's own Session there (null: native paths only).
  // Allocates two ALock descriptor lines in `node`'s arena (a split holds a
  // node's lock and the allocator's).
  absl::StatusOr<std::unique_ptr<Client>> NewClientOn(rdma::Node& node, rdma::Session* session) const {
    locks::ClientOptions lock_options = StructureClient::OneLock();
    lock_options.max_held = 2;
    lock_options.timeout = options_.lock_timeout;
    return MakeClient<Client>(parts_, node, session, lock_options, options_.split_keys, options_.part_bytes,
                              options_.cache_entries == 0 ? nodes_per_part() : options_.cache_entries);
  }

  static absl::StatusOr<BasicSkipList> Build(const PartSource& source, const SkipListOptions& options) {
    const int n = source.num_nodes();
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
    if (absl::Status s = CheckALockParts("SkipList", source.local_nodes(), o.budgets); !s.ok()) return s;
    const uint64_t nodes = L::NodesIn(o.part_bytes);
    absl::StatusOr<PartDirectory> parts = source.Make(
        "SkipList", OptionsText(o), o.part_bytes, [&o, nodes](rdma::Node& node, rdma::RemotePtr part) -> absl::Status {
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
        },
        {LockLines{.offset = offsetof(skiplist_internal::PartHeader, alloc_lock)},
         LockLines{.offset = L::NodeOffset(0), .stride = kNodeBytes, .count = nodes,
                   .fix = [](rdma::RemotePtr lock, rdma::NodeId dead) {
                     skiplist_internal::RepairAfterDeadWriter(*lock.local<skiplist_internal::Node<V>>(), dead);
                     return absl::OkStatus();
                   }}});
    if (!parts.ok()) return parts.status();
    return BasicSkipList(std::move(*parts), std::move(o));
  }
  // What a named map's processes must agree on (catalogue.h): the split
  // keys by count and hash, to stay short.
  static std::string OptionsText(const SkipListOptions& o) {
    return absl::StrCat("part_bytes=", o.part_bytes, " split_keys=", o.split_keys.size(), "#",
                        absl::Hex(HashWords(o.split_keys.data(), o.split_keys.size())), " budgets=", o.budgets.local,
                        "/", o.budgets.remote);
  }

  BasicSkipList(PartDirectory parts, SkipListOptions options) : parts_(std::move(parts)), options_(std::move(options)) {}

  PartDirectory parts_;
  SkipListOptions options_;
};

}  // namespace skiplist_internal

template <typename V>
using SkipList = skiplist_internal::BasicSkipList<V, skiplist_internal::ShippedChecks>;
template <typename V>
using SkipListClient = skiplist_internal::BasicSkipListClient<V, skiplist_internal::ShippedChecks>;

}  // namespace structures

#endif  // STRUCTURES_SKIPLIST_SKIPLIST_H_
