#include "rdma/cluster.h"

#include "absl/strings/str_cat.h"

namespace rdma {

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(const ClusterOptions& options) {
  if (options.num_nodes < 1 || options.num_nodes > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("num_nodes must be in 1..1024, got ", options.num_nodes));
  }
  std::unique_ptr<Cluster> c(new Cluster());
  auto fabric = OpenFabric(options.fabric);
  if (!fabric.ok()) return fabric.status();
  c->fabric_ = std::move(*fabric);
  for (int i = 0; i < options.num_nodes; ++i) {
    auto dev = c->fabric_->OpenDevice(static_cast<NodeId>(i));
    if (!dev.ok()) return dev.status();
    auto node = Node::Create(static_cast<NodeId>(i), std::move(*dev), options.node);
    if (!node.ok()) return node.status();
    c->nodes_.push_back(std::move(*node));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<Session>> Cluster::NewSession(NodeId self, const SessionOptions& options) {
  if (self >= nodes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", self, " out of range (", nodes_.size(), " nodes)"));
  }
  return Session::Create(*nodes_[self], *this, options);
}

absl::StatusOr<QpEndpoint> Cluster::Connect(NodeId target, const QpEndpoint& initiator) {
  if (target >= nodes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", target, " out of range (", nodes_.size(), " nodes)"));
  }
  return nodes_[target]->AcceptConnection(initiator);
}

absl::Status Cluster::Disconnect(NodeId target, const QpEndpoint& responder) {
  if (target >= nodes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", target, " out of range (", nodes_.size(), " nodes)"));
  }
  return nodes_[target]->ReleaseConnection(responder.qp_num);
}

absl::StatusOr<ArenaInfo> Cluster::Arena(NodeId node) const {
  if (node >= nodes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("node ", node, " out of range (", nodes_.size(), " nodes)"));
  }
  return nodes_[node]->arena_info();
}

}  // namespace rdma
