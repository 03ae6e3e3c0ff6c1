#include "structures/common/client.h"

namespace structures {

absl::Status StructureClient::RouteError(rdma::NodeId home, Path requested) const {
  if (node_.is_shut_down()) {
    return absl::UnavailableError(
        absl::StrCat(what_, " client on node ", node_.id(), ": the node is shut down (or fenced: it was dropped)"));
  }
  if (home >= bases_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what_, ": node ", home, " out of range: it has ", bases_.size(), " nodes"));
  }
  if (nodes_[home] != nullptr && nodes_[home]->is_shut_down()) {
    return absl::UnavailableError(absl::StrCat(what_, ": node ", home, " is shut down"));
  }
  return rdma::CheckPath(requested, node_.id(), home);
}

absl::StatusOr<StructureClient> StructureClient::Create(const PartDirectory& parts, rdma::Node& node,
                                                        rdma::Session* session,
                                                        const locks::ClientOptions& lock_options) {
  const std::string what(parts.what());
  if (node.id() >= parts.num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat(what, "::NewClient: node ", node.id(),
                                                   " out of range: it has ", parts.num_nodes(), " nodes"));
  }
  if (node.is_shut_down()) {
    return absl::UnavailableError(
        absl::StrCat(what, "::NewClient: node ", node.id(), " is shut down (or fenced: it was dropped)"));
  }
  if (session != nullptr && (session->self() != node.id() || session->num_nodes() != parts.num_nodes())) {
    return absl::InvalidArgumentError(absl::StrCat(what, "::NewClient: session of node ", session->self(), " with ",
                                                   session->num_nodes(), " nodes; need node ", node.id(), " with ",
                                                   parts.num_nodes()));
  }
  std::vector<absl::Status> unreachable;
  absl::StatusOr<std::vector<rdma::RemotePtr>> bases = parts.Resolve(session, &unreachable);
  if (!bases.ok()) return bases.status();
  std::vector<rdma::Node*> nodes(static_cast<size_t>(parts.num_nodes()));
  for (int n = 0; n < parts.num_nodes(); ++n) nodes[n] = parts.local_node(static_cast<rdma::NodeId>(n));
  absl::StatusOr<std::unique_ptr<locks::ALockClient>> lock = locks::ALockClient::Create(node, session, lock_options);
  if (!lock.ok()) return lock.status();
  return StructureClient(what, std::move(*bases), std::move(nodes), std::move(unreachable), node, session,
                         std::move(*lock));
}

}  // namespace structures
