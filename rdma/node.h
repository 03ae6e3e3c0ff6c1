#ifndef RDMA_NODE_H_
#define RDMA_NODE_H_

// Node and Connector (docs/design.md §5). A Node is one machine of the
// cluster: a Device, one registered arena holding all of that node's shared
// memory, and the responder ends of the RC QPs peers connect to it. A
// Connector is how a Session reaches the nodes (in one process rdma::Cluster,
// across processes rdma::cm::CmConnector).
//
//   auto node = Node::Create(id, std::move(device));  // registers the arena
//   absl::StatusOr<RemotePtr> p = (*node)->Allocate(64);  // zero-filled
//
// Contract:
//  * Node is thread-safe.
//  * The arena is registered for local write and remote read, write and
//    atomic; every word in it has exactly one RMW domain (rdma/rmw_word.h,
//    docs/design.md §3).
//  * Allocation is deterministic: the same sequence of calls gives the same
//    offsets on every node, so processes agree on addresses without
//    exchanging them.
//  * Destroy the Sessions and Connectors that use a Node before the Node.

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include <mutex>
#include "rdma/device.h"
#include "rdma/remote_ptr.h"

namespace rdma {

// Where a node's registered arena lives, as its peers must know it.
struct ArenaInfo {
  NodeId node = 0;
  uint64_t base = 0;
  uint64_t length = 0;
  uint32_t rkey = 0;
};

struct NodeOptions {
  size_t arena_bytes = size_t{64} << 20;
  // Bytes registered before the arena_bytes that Allocate hands out, at
  // arena offset 0 on every node: the layers above keep there what every
  // process must find without asking (the structures keep their catalogue of
  // named structures there). A multiple of 64.
  size_t reserved_bytes = 0;
  // Completion queue depth of the responder side.
  int responder_cq_depth = 1024;
};

// One machine in the cluster (see the top of this file). Thread-safe.
class Node {
 public:
  static absl::StatusOr<std::unique_ptr<Node>> Create(NodeId id, std::unique_ptr<Device> device,
                                                      const NodeOptions& options = {});
  ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  NodeId id() const { return id_; }
  Device& device() { return *device_; }
  const MemoryRegion& arena() const { return *arena_mr_; }
  ArenaInfo arena_info() const;

  // Zero-filled memory in the arena. ResourceExhausted when the arena is full
  // (say how big it is and how to raise it). `align` must be a power of two.
  absl::StatusOr<RemotePtr> Allocate(size_t bytes, size_t align = 64);
  // Returns memory to a per-size free list for reuse by Allocate.
  void Free(RemotePtr p, size_t bytes);
  // The reserved region (NodeOptions::reserved_bytes) at arena offset 0;
  // null when none was reserved.
  RemotePtr reserved() const;
  size_t reserved_bytes() const { return reserved_bytes_; }
  // Offset of `p` from the arena base; p must be on this node.
  uint64_t OffsetOf(RemotePtr p) const { return p.address() - arena_info().base; }

  // Creates a responder QP connected to `initiator` and returns its endpoint.
  // This is what a peer's connection request reaches, in-process or via rdma_cm.
  // The QP lives until ReleaseConnection or Shutdown.
  absl::StatusOr<QpEndpoint> AcceptConnection(const QpEndpoint& initiator);
  // Destroys the responder QP `responder_qp_num` (an endpoint AcceptConnection
  // returned) once its initiator is done with it (session closed or
  // reconnected). NotFound when this node holds no such QP (already released,
  // or the node was shut down).
  absl::Status ReleaseConnection(uint32_t responder_qp_num);
  // Responder QPs currently held (diagnostics and leak tests).
  size_t responder_qp_count();

  // Stops serving: responder QPs are destroyed and new connections refused
  // (Unavailable). Structures check this to fail cleanly after shutdown.
  void Shutdown();
  bool is_shut_down() const { return shut_down_.load(std::memory_order_acquire); }

 private:
  Node(NodeId id, std::unique_ptr<Device> device);

  const NodeId id_;
  std::unique_ptr<Device> device_;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  size_t reserved_bytes_ = 0;
  std::unique_ptr<MemoryRegion> arena_mr_;
  std::unique_ptr<CompletionQueue> responder_cq_;
  std::atomic<bool> shut_down_{false};

  std::mutex mu_;  // not absl::Mutex: must be visible to TSan
  size_t next_offset_ = 0;
  absl::flat_hash_map<size_t, std::vector<uint64_t>> free_lists_;
  absl::flat_hash_map<uint32_t, std::unique_ptr<QueuePair>> responder_qps_;  // by qp_num
};

// How a session reaches the other nodes: turns a connection request into the
// responder's endpoint, and tells where each node's arena is. The in-process
// Cluster implements it by calling Node directly; across processes
// rdma::cm::CmConnector does it with rdma_cm.
class Connector {
 public:
  virtual ~Connector() = default;
  virtual int num_nodes() const = 0;
  virtual absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator) = 0;
  virtual absl::StatusOr<ArenaInfo> Arena(NodeId node) const = 0;
  // Tells `target` that the initiator is done with the responder QP
  // `responder` (an endpoint Connect returned), so the target can free it.
  // Sessions call this when they close or reconnect; errors are advisory (the
  // target may be gone). The default does nothing, which leaks the responder
  // QP until the target shuts down.
  virtual absl::Status Disconnect(NodeId target, const QpEndpoint& responder) {
    (void)target;
    (void)responder;
    return absl::OkStatus();
  }
  // OK while `node` is believed alive; Unavailable naming it once the
  // connector knows its process is gone. Sessions ask while they wait on
  // that node (SessionOptions::liveness_check). The default knows of no death.
  virtual absl::Status PeerStatus(NodeId node) const {
    (void)node;
    return absl::OkStatus();
  }
  // Which process hosts `node` now: a number that changes when the node
  // rejoins as a new process (0 when it never does, as in process). A
  // Session reaches only the incarnation it connected to (rdma/session.h).
  virtual uint64_t Incarnation(NodeId node) const {
    (void)node;
    return 0;
  }
  // OK while this process may post work requests at all; Sessions ask before
  // every post. With a coordinator, Unavailable once the process is fenced
  // (rdma/cluster.h, docs/design.md §5 "Membership"). The default: always OK.
  virtual absl::Status ServingStatus() const { return absl::OkStatus(); }
  // A session's QP to `node` ran out of retries (`why`): its host stopped
  // answering. A connector that tracks liveness marks it dead, so every
  // session learns it at once. The default ignores it.
  virtual void ReportUnreachable(NodeId node, const absl::Status& why) {
    (void)node;
    (void)why;
  }
};

}  // namespace rdma

#endif  // RDMA_NODE_H_
