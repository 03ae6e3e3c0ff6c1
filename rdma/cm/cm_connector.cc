#include "rdma/cm/cm_connector.h"

#include "absl/strings/str_cat.h"
#include "rdma/cm/internal/connector_impl.h"

namespace rdma::cm {

absl::StatusOr<std::unique_ptr<CmConnector>> CmConnector::Create(Node& local, Bootstrap& bootstrap,
                                                                  const CmConnectorOptions& options) {
  if (local.id() != bootstrap.rank()) {
    return absl::InvalidArgumentError(absl::StrCat("the node's id (", local.id(), ") must be the bootstrap's rank (",
                                                   bootstrap.rank(), ")"));
  }
  verbs::VerbsDevice* dev = verbs::AsVerbsDevice(local.device());
  if (dev == nullptr) {
    return absl::FailedPreconditionError(
        "CmConnector needs a verbs device (rdma_cm connects real QPs); the soft NIC's nodes live in one process: "
        "use rdma::Cluster");
  }
  auto impl = std::make_unique<Impl>(local, *dev, options);
  if (absl::Status s = impl->Listen(JobHash(bootstrap.job()), bootstrap.size()); !s.ok()) return s;
  if (absl::Status s = impl->Publish(bootstrap); !s.ok()) return s;
  // Every node holds every card before any control connection arrives.
  if (absl::Status s = bootstrap.Barrier(); !s.ok()) return s;
  if (absl::Status s = impl->ConnectControl(); !s.ok()) return s;
  // Every lower rank's control connection to this node is up once all ranks
  // are past their ConnectControl.
  if (absl::Status s = bootstrap.Barrier(); !s.ok()) return s;
  return std::unique_ptr<CmConnector>(new CmConnector(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<CmConnector>> CmConnector::Rejoin(Node& local, const std::string& job, int size,
                                                                  const Admit& admit,
                                                                  const CmConnectorOptions& options) {
  if (local.id() >= static_cast<NodeId>(size)) {
    return absl::InvalidArgumentError(absl::StrCat("node ", local.id(), " is outside a job of ", size));
  }
  verbs::VerbsDevice* dev = verbs::AsVerbsDevice(local.device());
  if (dev == nullptr) return absl::FailedPreconditionError("CmConnector needs a verbs device");
  auto impl = std::make_unique<Impl>(local, *dev, options);
  if (absl::Status s = impl->Listen(JobHash(job), size); !s.ok()) return s;
  absl::StatusOr<std::vector<std::string>> cards = admit(EncodeCard(impl->MyCard()));
  if (!cards.ok()) return cards.status();
  if (absl::Status s = impl->AdoptCards(*cards); !s.ok()) return s;
  if (absl::Status s = impl->ConnectControlToAll(); !s.ok()) return s;
  return std::unique_ptr<CmConnector>(new CmConnector(std::move(impl)));
}

CmConnector::CmConnector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CmConnector::~CmConnector() = default;

int CmConnector::num_nodes() const { return impl_->num_nodes(); }
absl::StatusOr<QpEndpoint> CmConnector::Connect(NodeId target, const QpEndpoint& initiator) {
  return impl_->Connect(target, initiator);
}
absl::StatusOr<ArenaInfo> CmConnector::Arena(NodeId node) const { return impl_->Arena(node); }
absl::Status CmConnector::Disconnect(NodeId target, const QpEndpoint& responder) {
  return impl_->Disconnect(target, responder);
}
absl::Status CmConnector::PeerStatus(NodeId node) const { return impl_->PeerStatus(node); }
void CmConnector::ReportUnreachable(NodeId node, const absl::Status& why) { impl_->ReportUnreachable(node, why); }
void CmConnector::SetDeathListener(std::function<void(NodeId, const std::string&)> listener) {
  impl_->SetDeathListener(std::move(listener));
}
void CmConnector::Fence(NodeId node, const std::string& why) { impl_->Fence(node, why); }
uint64_t CmConnector::incarnation() const { return impl_->incarnation(); }
uint64_t CmConnector::incarnation_of(NodeId node) const { return impl_->incarnation_of(node); }
std::string CmConnector::card() const { return EncodeCard(impl_->MyCard()); }
absl::Status CmConnector::Readmit(NodeId node, const std::string& card) { return impl_->Readmit(node, card); }
std::string CmConnector::listen_address() const { return impl_->listen_address(); }
size_t CmConnector::responder_connections() const { return impl_->responder_connections(); }

}  // namespace rdma::cm
