#ifndef RDMA_CLUSTER_H_
#define RDMA_CLUSTER_H_

// Cluster: several nodes in one process on one fabric, and the in-process
// Connector between them (docs/design.md §5). Tests, benchmarks and the demo
// use it; one node per process uses rdma::cm::CmConnector instead.
//
//   ClusterOptions o;  o.num_nodes = 3;  o.fabric.kind = FabricKind::kSoft;
//   auto cluster = Cluster::Create(o);
//   auto session = (*cluster)->NewSession(/*self=*/1);  // this thread is node 1
//
// Thread-safe. Destroy all Sessions before the Cluster.

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "rdma/fabric.h"
#include "rdma/node.h"
#include "rdma/session.h"

namespace rdma {

struct ClusterOptions {
  int num_nodes = 3;
  NodeOptions node;
  FabricOptions fabric;
};

// Several nodes in one process, on one fabric: what tests, benchmarks and
// the demo use. On the soft backend every node has its own simulated NIC; on
// verbs every node opens the device again (its own context and PD), and
// their QPs meet through the device's loopback.
//
// Thread-safe. Destroy all Sessions before the Cluster.
class Cluster final : public Connector {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(const ClusterOptions& options);

  Fabric& fabric() { return *fabric_; }
  Node& node(NodeId id) { return *nodes_[id]; }
  int num_nodes() const override { return static_cast<int>(nodes_.size()); }

  // A session for the calling thread, living on node `self`.
  absl::StatusOr<std::unique_ptr<Session>> NewSession(NodeId self, const SessionOptions& options = {});

  // Connector:
  absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator) override;
  absl::StatusOr<ArenaInfo> Arena(NodeId node) const override;
  absl::Status Disconnect(NodeId target, const QpEndpoint& responder) override;

 private:
  Cluster() = default;
  std::unique_ptr<Fabric> fabric_;
  std::vector<std::unique_ptr<Node>> nodes_;
};

}  // namespace rdma

#endif  // RDMA_CLUSTER_H_
