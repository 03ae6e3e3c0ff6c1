#ifndef STRUCTURES_QUEUE_QUEUE_H_
#define STRUCTURES_QUEUE_QUEUE_H_

// A distributed set of bounded multi-producer, multi-consumer FIFO queues:
// one ring per node, living in that node's registered arena (its home), of
// trivially copyable values up to 56 bytes. Any thread on any node may
// enqueue to and dequeue from any node's queue. Linearizable for any mix of
// paths (docs/design.md §9; the argument in structures/README.md, "Queue").
//
//   ASSIGN_OR_RETURN(auto q, structures::Queue<Msg>::Create(*cluster, {.capacity = 4096}));
//   // per thread, on node n, with that thread's own Session:
//   ASSIGN_OR_RETURN(auto client, q.NewClient(node, session.get()));
//   absl::StatusOr<bool> in = client->Enqueue(/*home=*/0, msg);         // false: full
//   absl::StatusOr<std::optional<Msg>> out = client->Dequeue(0);        // nullopt: empty
//   absl::StatusOr<size_t> n = client->EnqueueBatch(0, msgs);           // a prefix, one lock hold
//   absl::StatusOr<std::vector<Msg>> some = client->DequeueBatch(0, 16);
//
// Like the hash map, it owns the rings it created (one per node hosted by
// this process) and frees them when destroyed; move-only.
//
// Paths (per operation, rdma::Path):
//   native    the home is the client's node (kAuto or kNative): CPU loads,
//             stores, and the ring's lock through this process's native gate
//             for it (locks/native_gate.h: unfair among native threads, its
//             word is the ALock's native flag, and the ALock stays with the
//             native side while they keep coming, up to its budget when NIC
//             threads wait). No NIC op; two CPU CASes on the lock word.
//   loopback  the home is the client's node and path == kLoopback: the NIC
//             path over the loopback QP.
//   remote    the home is another node: one-sided RDMA, no RPC, no help from
//             the home's CPU.
//
// Concurrency (invariants in layout.h; the argument in structures/README.md):
//   producers serialize on the ring's tail ALock, consumers on its head ALock,
//   so producers and consumers do not contend with each other. The Queue
//   owns one native gate per local ring and side, shared by its native
//   clients (they take the ring's locks through it, never otherwise):
//   destroy the clients before the Queue. Each slot has
//   a seq word, published by the producer after its payload (natively a
//   release store after the payload stores; over the NIC a later WRITE on the
//   same QP) and freed by the consumer after reading it. Enqueue takes effect
//   at its publish, dequeue at its free, "full" and "empty" at the load of
//   the seq that said so. ALock's budgets keep a local-heavy mix at CPU speed.
//
// Costs (uncontended, asserted by tests/structures/queue_test.cc):
//   native Enqueue/Dequeue (and batches):  0 NIC ops.
//   remote/loopback Enqueue: 2 round trips, 8 NIC ops, 3 doorbells:
//     {CAS tail lock, READ lock line, READ tail, READ seq} in one doorbell;
//     {WRITE payload, WRITE seq, WRITE tail} posted inline without waiting;
//     the unlocking CAS. (+1 READ round trip when another producer moved the
//     tail since this client's last enqueue: the chained seq READ guessed
//     the position from this client's last one.)
//   remote/loopback Dequeue: 2 round trips, 8 NIC ops, 3 doorbells: the same
//     with the payload READ chained after the seq READ, and {WRITE seq,
//     WRITE head}. Empty dequeue: 2 round trips, 6 NIC ops.
//   EnqueueBatch / DequeueBatch of 16: 3 round trips, 8 NIC ops (the
//     16-slot WRITEs are too large to go inline, so they are waited for
//     before the unlock).
//
// Errors: InvalidArgument (bad options, a node out of range, a batch of 0 or
// more than the capacity, a path that cannot be honoured); FailedPrecondition
// (the client's node is shut down; a NIC path without a Session; a native
// operation by a client that has no gate for the ring);
// Unavailable (the home is a node of this process that is shut down);
// DataLoss (a slot's seq word stayed neither free nor full: a writer broke the
// protocol). Full and empty are results, not errors. Lock waits are bounded
// by locks::ClientOptions::timeout, NIC waits by the session's completion
// timeout. An error that a NIC operation reports after it took its lock
// (a completion that timed out, an unlock that failed) may come after its
// WRITEs landed: the enqueue or dequeue may then have taken effect although
// it reports the error (a dequeue's values are then gone with it; a retried
// enqueue puts its value in twice). The transport cannot tell a WRITE that
// never landed from one whose completion was lost; no error is reported for
// an operation that did not take effect otherwise.

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
#include "locks/native_gate.h"
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
  // Longest a client waits for a head or tail lock (or, holding one, for
  // its successor to link in) before the operation fails with
  // DeadlineExceeded: what bounds the wait for a holder that died.
  std::chrono::nanoseconds lock_timeout = std::chrono::seconds(30);
  // How native threads wait for a ring side held by another native thread
  // of this process (locks::NativeGateOptions::park): 0 (the default) spin,
  // then yield; > 0 spin, then sleep about this long plus the timer slack.
  // Parking suits native-only workloads where several threads take the same
  // side back to back (2 threads that both enqueue and dequeue: 30-130%
  // more values); next to NIC threads it costs the native threads 20-50%
  // (README, "Queue").
  std::chrono::microseconds native_park{0};
};

template <typename V, typename Policy = QueuePolicy>
class Queue {
  static_assert(QueueValue<V>, "Queue<V>: V must be trivially copyable and at most 56 bytes");
  using L = queue_internal::RingLayout<V>;

 public:
  using Client = QueueClient<V, Policy>;

  // Creates the rings of `local_nodes` (the nodes this process hosts) for
  // queues over peers.num_nodes() nodes; processes that host other nodes
  // create theirs with the same options at the same point of their
  // allocation sequence (structures/common/parts.h). Errors: InvalidArgument
  // (bad options or nodes), FailedPrecondition (a node shut down or without
  // RDMA atomics), ResourceExhausted (an arena too small for the ring).
  static absl::StatusOr<Queue> Create(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes,
                                      const QueueOptions& options) {
    if (options.capacity < queue_internal::kMinCapacity || options.capacity > queue_internal::kMaxCapacity) {
      return absl::InvalidArgumentError(absl::StrCat("Queue: capacity ", options.capacity, " out of range ",
                                                     queue_internal::kMinCapacity, "..",
                                                     queue_internal::kMaxCapacity));
    }
    if (options.lock_timeout <= std::chrono::nanoseconds::zero()) {
      return absl::InvalidArgumentError("Queue: lock_timeout must be positive");
    }
    if (options.native_park < std::chrono::microseconds::zero()) {
      return absl::InvalidArgumentError("Queue: native_park must not be negative");
    }
    if (absl::Status s = CheckALockParts("Queue", local_nodes, options.budgets); !s.ok()) return s;
    const L layout{options.capacity};
    absl::StatusOr<PartDirectory> parts =
        PartDirectory::Create("Queue", peers.num_nodes(), local_nodes, layout.part_bytes(),
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
                              });
    if (!parts.ok()) return parts.status();
    // One native gate per local ring and side: what this process's native
    // clients share (locks/native_gate.h).
    auto gates = std::make_shared<queue_internal::NativeGates>(2 * static_cast<size_t>(peers.num_nodes()));
    locks::ClientOptions lock_options;
    lock_options.timeout = options.lock_timeout;
    for (rdma::Node* node : local_nodes) {
      const rdma::RemotePtr base = parts->local_base(node->id());
      for (const bool producer : {true, false}) {
        absl::StatusOr<std::unique_ptr<locks::NativeGate>> gate =
            locks::NativeGate::Create(*node, base + queue_internal::LockOffset(producer), lock_options,
                                      {.park = options.native_park});
        if (!gate.ok()) return gate.status();
        (*gates)[queue_internal::GateIndex(node->id(), producer)] = std::move(*gate);
      }
    }
    return Queue(std::move(*parts), std::move(gates), options);
  }
  // Every node of an in-process cluster.
  static absl::StatusOr<Queue> Create(rdma::Cluster& cluster, const QueueOptions& options) {
    return Create(cluster, AllNodes(cluster), options);
  }

  Queue(Queue&&) = default;
  Queue& operator=(Queue&&) = default;

  // A client for the calling thread on `node` (hosted by this process) with
  // `session`, that thread's own Session there (null: native paths only).
  // Allocates one ALock descriptor line in `node`'s arena.
  absl::StatusOr<std::unique_ptr<Client>> NewClient(rdma::Node& node, rdma::Session* session) const {
    locks::ClientOptions lock_options = StructureClient::OneLock();
    lock_options.timeout = lock_timeout_;
    absl::StatusOr<StructureClient> common = StructureClient::Create(parts_, node, session, lock_options);
    if (!common.ok()) return common.status();
    return std::make_unique<Client>(std::move(*common), capacity_, gates_);
  }

  uint64_t capacity() const { return capacity_; }
  // Times this process's native threads parked at its rings' gates
  // (QueueOptions::native_park; always 0 without it). Any time, any thread.
  uint64_t native_parks() const {
    uint64_t n = 0;
    for (const auto& g : *gates_) n += g != nullptr ? g->parks() : 0;
    return n;
  }
  int num_nodes() const { return parts_.num_nodes(); }
  // Bytes of one node's ring in its arena.
  uint64_t part_bytes() const { return L{capacity_}.part_bytes(); }

 private:
  Queue(PartDirectory parts, std::shared_ptr<const queue_internal::NativeGates> gates, const QueueOptions& options)
      : parts_(std::move(parts)),
        gates_(std::move(gates)),
        capacity_(options.capacity),
        lock_timeout_(options.lock_timeout) {}

  PartDirectory parts_;
  // Declared after parts_: destroyed first (they refer to the lock words in
  // the arenas). Shared with the clients.
  std::shared_ptr<const queue_internal::NativeGates> gates_;
  uint64_t capacity_ = 0;
  std::chrono::nanoseconds lock_timeout_;
};

}  // namespace structures

#endif  // STRUCTURES_QUEUE_QUEUE_H_
