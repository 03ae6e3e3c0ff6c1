#ifndef STRUCTURES_QUEUE_QUEUE_H_
#define STRUCTURES_QUEUE_QUEUE_H_

// A distributed set of bounded multi-producer, multi-consumer FIFO queues:
// one ring per node in that node's registered arena (its home), of trivially
// copyable values up to 56 bytes. Any thread on any node may enqueue to and
// dequeue from any node's queue. Linearizable for any mix of paths.
//
//   ASSIGN_OR_RETURN(auto q, structures::Queue<Msg>::Open(*cluster, "jobs", {.capacity = 4096}));
//   ASSIGN_OR_RETURN(auto client, q.NewClient(*thread));  // thread = cluster->ThisThread()
//   absl::StatusOr<bool> in = client->Enqueue(/*home=*/0, msg);         // false: full
//   absl::StatusOr<std::optional<Msg>> out = client->Dequeue(0);        // nullopt: empty
//   absl::StatusOr<size_t> n = client->EnqueueBatch(0, msgs);           // a prefix, one lock hold
//
// Open creates the queue or attaches to it by name, in any process and order
// (structures/common/catalogue.h); Create makes an unnamed one. Contract. A
// client is one thread's (with that thread's Session); the queue is
// move-only, owns the unnamed rings it created and the native leases its
// native clients share, and is destroyed after its clients and before its
// nodes. Each side of a ring (producers, consumers) belongs either to the
// home's native threads, which claim positions with a CPU CAS while their
// lease is open (native_lease.h, native_claims.h), or to one NIC thread at a
// time under the side's ALock; a NIC thread that arrives gets the side
// after the native claims in flight complete. Each slot's seq word is
// published after its payload and freed after it is read. Full and empty
// are results, not errors. At most 256 clients of one queue per process use
// native paths.
//
// Costs, uncontended (asserted by tests/structures/queue_test.cc):
//   native Enqueue/Dequeue and batches   0 NIC ops
//   remote Enqueue, Dequeue              2 round trips, 9 NIC ops, 3 doorbells
//   remote empty Dequeue                 2 round trips, 7 NIC ops
//   remote batch of 16                   3 round trips, 9 NIC ops
// A NIC operation on a side the native threads have been using waits first
// for the hand-over (bench/README.md, "NIC arrival").
//
// Errors: InvalidArgument (bad options, node, batch size or path),
// FailedPrecondition (no Session for a NIC path, no native lease for the
// ring), Unavailable (own node shut down or fenced, or the home is known to
// be down),
// DeadlineExceeded (a lock, hand-over or completion wait ran out),
// ResourceExhausted (a 257th client of the queue in this process), DataLoss
// (a seq word stayed neither free nor full: a writer broke the protocol). An
// error a NIC operation reports after it took its lock may come after its
// WRITEs landed: the operation may then have taken effect. Protocol and
// argument: docs/design.md §9.4.

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
#include "rdma/path.h"
#include "structures/common/client.h"
#include "structures/common/parts.h"
#include "structures/queue/client.h"
#include "structures/queue/layout.h"
#include "structures/queue/policy.h"

namespace structures {

using queue_internal::QueueValue;

struct QueueOptions {
  uint64_t capacity = 1024;  // values per node's ring, 2..2^32 (queue_internal::kMinCapacity)
  locks::Budgets budgets;    // ALock budgets of the head and tail locks
  // Longest a client waits for a head or tail lock, for the native lease's
  // hand-over, or for another thread's claim in flight before the operation
  // fails with DeadlineExceeded: what bounds the wait for a holder that
  // died.
  std::chrono::nanoseconds lock_timeout = std::chrono::seconds(30);
};

namespace queue_internal {

// Queue<V>. `Checks` is ShippedChecks except in tests (policy.h).
template <typename V, typename Checks>
class BasicQueue : public CreateOnCluster<BasicQueue<V, Checks>, QueueOptions> {
  static_assert(QueueValue<V>, "Queue<V>: V must be trivially copyable and at most 56 bytes");
  using L = queue_internal::RingLayout<V>;

 public:
  using Client = BasicQueueClient<V, Checks>;

  // Creates the rings of `local_nodes` (the nodes this process hosts) for
  // queues over peers.num_nodes() nodes; processes that host other nodes
  // create theirs with the same options at the same point of their
  // allocation sequence (structures/common/parts.h). Errors: InvalidArgument
  // (bad options or nodes), FailedPrecondition (a node shut down or without
  // RDMA atomics), ResourceExhausted (an arena too small for the ring).
  static absl::StatusOr<BasicQueue> Create(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes,
                                           const QueueOptions& options) {
    return Build(PartSource::Fresh(peers, local_nodes), options);
  }
  // The queue named `name` in `cluster`: created by whichever process asks
  // first, attached to by every later Open in any process
  // (structures/common/catalogue.h). Errors: Create's, and
  // FailedPrecondition when `name` exists as another structure, value size
  // or options (naming both), ResourceExhausted when the catalogue or the
  // cluster's named_bytes is full. Every Open of one name in this process
  // shares the first's native leases (and so its lock_timeout for native
  // threads): one lease per ring side.
  static absl::StatusOr<BasicQueue> Open(rdma::Cluster& cluster, absl::string_view name,
                                         const QueueOptions& options = {}) {
    return Build(PartSource::Named(cluster, name, StructureKind::kQueue, sizeof(V)), options);
  }
  // Every node of an in-process cluster.
  using CreateOnCluster<BasicQueue, QueueOptions>::Create;

  BasicQueue(BasicQueue&&) = default;
  BasicQueue& operator=(BasicQueue&&) = default;

  // The bytes of one node's ring (each node's arena, or the cluster's
  // named_bytes for a named queue, must hold them).
  static size_t PartBytes(const QueueOptions& options) { return L{options.capacity}.part_bytes(); }

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

  uint64_t capacity() const { return capacity_; }
  int num_nodes() const { return parts_.num_nodes(); }
  // Bytes of one node's ring in its arena.
  uint64_t part_bytes() const { return L{capacity_}.part_bytes(); }

 private:
  // A client for the calling thread on `node` (hosted by this process) with
  // `session`, that thread's own Session there (null: native paths only).
  // Allocates one ALock descriptor line in `node`'s arena.
  absl::StatusOr<std::unique_ptr<Client>> NewClientOn(rdma::Node& node, rdma::Session* session) const {
    locks::ClientOptions lock_options = StructureClient::OneLock();
    lock_options.timeout = lock_timeout_;
    // The native side closes its lease as soon as it sees a NIC waiter
    // (native_lease.h): poll for the hand-over without backing off.
    lock_options.max_peterson_poll_backoff = 1;
    return MakeClient<Client>(parts_, node, session, lock_options, capacity_, leases_, lock_timeout_);
  }

  static absl::StatusOr<BasicQueue> Build(const PartSource& source, const QueueOptions& options) {
    if (options.capacity < queue_internal::kMinCapacity || options.capacity > queue_internal::kMaxCapacity) {
      return absl::InvalidArgumentError(absl::StrCat("Queue: capacity ", options.capacity, " out of range ",
                                                     queue_internal::kMinCapacity, "..",
                                                     queue_internal::kMaxCapacity));
    }
    if (options.lock_timeout <= std::chrono::nanoseconds::zero()) {
      return absl::InvalidArgumentError("Queue: lock_timeout must be positive");
    }
    if (absl::Status s = CheckALockParts("Queue", source.local_nodes(), options.budgets); !s.ok()) return s;
    const L layout{options.capacity};
    absl::StatusOr<PartDirectory> parts =
        source.Make("Queue", OptionsText(options), layout.part_bytes(),
                              [&options](rdma::Node& node, rdma::RemotePtr part) -> absl::Status {
                                if (DefaultBudgets(options.budgets)) return absl::OkStatus();
                                const locks::LockInit init{locks::LockKind::kALock, options.budgets};
                                if (absl::Status s = locks::InitLock(part + offsetof(queue_internal::Header, tail_lock),
                                                                     node.id(), init);
                                    !s.ok()) {
                                  return s;
                                }
                                return locks::InitLock(part + offsetof(queue_internal::Header, head_lock), node.id(),
                                                       init);
                              },
                              // The home flags the side; its next holder makes whole what the
                              // dead one left (client.h, SkipPositionsOfTheDead).
                              {LockLines{.offset = offsetof(queue_internal::Header, tail_lock),
                                         .fix = [](rdma::RemotePtr lock, rdma::NodeId) {
                                           lock.local<queue_internal::Header>()->tail_repair.Store(1);
                                           return absl::OkStatus();
                                         }},
                               LockLines{.offset = offsetof(queue_internal::Header, head_lock),
                                         .fix = [](rdma::RemotePtr lock, rdma::NodeId) {
                                           rdma::RemotePtr ring(lock.node(), lock.address() -
                                                                                  offsetof(queue_internal::Header, head_lock));
                                           ring.local<queue_internal::Header>()->head_repair.Store(1);
                                           return absl::OkStatus();
                                         }}});
    if (!parts.ok()) return parts.status();
    // One native lease per local ring and side: what this process's native
    // clients share (native_lease.h), and so every Queue object of one named
    // queue in this process.
    absl::StatusOr<std::shared_ptr<queue_internal::NativeLeases>> leases =
        ShareInProcess<queue_internal::NativeLeases>(
            *parts, [&]() -> absl::StatusOr<std::shared_ptr<queue_internal::NativeLeases>> {
              auto made = std::make_shared<queue_internal::NativeLeases>(static_cast<size_t>(source.num_nodes()));
              for (rdma::Node* node : source.local_nodes()) {
                if (parts->local_base(node->id()).is_null()) continue;  // lost (PartDirectory::lost)
                made->Add(node->id(), parts->local_base(node->id()), options.lock_timeout);
              }
              return made;
            });
    if (!leases.ok()) return leases.status();
    return BasicQueue(std::move(*parts), std::move(*leases), options);
  }
  // What a named queue's processes must agree on (catalogue.h).
  static std::string OptionsText(const QueueOptions& o) {
    return absl::StrCat("capacity=", o.capacity, " budgets=", o.budgets.local, "/", o.budgets.remote);
  }
  BasicQueue(PartDirectory parts, std::shared_ptr<queue_internal::NativeLeases> leases, const QueueOptions& options)
      : parts_(std::move(parts)),
        leases_(std::move(leases)),
        capacity_(options.capacity),
        lock_timeout_(options.lock_timeout) {}

  PartDirectory parts_;
  // Declared after parts_: destroyed first (they refer to the lock words in
  // the arenas). Shared with the clients.
  std::shared_ptr<queue_internal::NativeLeases> leases_;
  uint64_t capacity_ = 0;
  std::chrono::nanoseconds lock_timeout_;
};

}  // namespace queue_internal

// The queue and its per-thread client.
template <typename V>
using Queue = queue_internal::BasicQueue<V, queue_internal::ShippedChecks>;
template <typename V>
using QueueClient = queue_internal::BasicQueueClient<V, queue_internal::ShippedChecks>;

}  // namespace structures

#endif  // STRUCTURES_QUEUE_QUEUE_H_
