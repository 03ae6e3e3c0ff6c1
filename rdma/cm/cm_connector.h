#ifndef RDMA_CM_CM_CONNECTOR_H_
#define RDMA_CM_CM_CONNECTOR_H_

// CmConnector: the rdma::Connector for one node per process, on rdma_cm
// (librdmacm) and an rdma::Bootstrap (docs/design.md §5, "Connecting").
//
//   ASSIGN_OR_RETURN(auto boot, rdma::Bootstrap::FromEnvironment());
//   ASSIGN_OR_RETURN(auto node, rdma::Node::Create(boot->rank(), std::move(device)));
//   ASSIGN_OR_RETURN(auto peers, rdma::cm::CmConnector::Create(*node, *boot));
//   ASSIGN_OR_RETURN(auto session, rdma::Session::Create(*node, *peers));
//
// What it does:
//  * Create binds an rdma_cm listener to the node's RDMA address (options, or
//    RDMADS_RDMA_ADDR, or the IPv4 address in the device's RoCE v2 GID),
//    checks rdma_cm resolves it to the node's own device and GID, publishes
//    the node's card (address, port, arena, incarnation) with one
//    Bootstrap::AllGather, opens a control connection to every other node and
//    returns after a Bootstrap::Barrier: every node is then reachable.
//  * Connect(target) resolves the route, connects with the session's own QP
//    (rdma_cm's external-QP mode, so the verbs layer and per-op counts are
//    the project's own), and returns the responder's endpoint from the
//    accept. The route's GIDs must equal the ones the QPs use, else
//    FailedPrecondition naming both. Connect to the node itself stays in
//    process. Disconnect sends the CM disconnect; the responder frees its QP.
//  * A responder QP is freed when its initiator disconnects or its process
//    ends (the kernel sends the disconnect for a process that exits).
//  * Failure detection: a control connection's DISCONNECTED means that peer
//    process is gone; PeerStatus(node) is then Unavailable naming it, and
//    Sessions waiting on that node return it within SessionOptions'
//    liveness_check. A host that dies sends no CM event: the first QP to run
//    out of retries (~7.5 s) reports it (ReportUnreachable), with the same
//    effect (docs/design.md §5 gives the bounds).
//    A restarted peer is another incarnation and is refused, never silently
//    connected to, until Readmit (the job's membership admitted it).
//
// Thread-safe. Destroy the Sessions that use it before it, and it before the
// Node. Verbs devices only (a soft-NIC node has no rdma_cm).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rdma/bootstrap.h"
#include "rdma/node.h"

namespace rdma::cm {

struct CmConnectorOptions {
  // The RDMA interface's IP address to listen on; empty = RDMADS_RDMA_ADDR,
  // else the IPv4 address of the device's RoCE v2 GID.
  std::string address;
  // 0 = a free port (it is published through the bootstrap).
  uint16_t port = 0;
  // Route resolution plus the peer's answer, per connection.
  std::chrono::milliseconds connect_timeout{15'000};
};

class CmConnector final : public Connector {
 public:
  static absl::StatusOr<std::unique_ptr<CmConnector>> Create(Node& local, Bootstrap& bootstrap,
                                                             const CmConnectorOptions& options = {});
  // A restarted process joining a running job of `size` nodes (no
  // collectives): it listens, hands its encoded card to `admit`, which
  // returns every rank's encoded card as the job's configuration has them
  // ("" for a rank not in it, marked dead here), and connects control
  // connections to every live rank, retrying refusals for connect_timeout
  // while those peers have not yet readmitted this node (Readmit).
  using Admit = std::function<absl::StatusOr<std::vector<std::string>>(const std::string& my_card)>;
  static absl::StatusOr<std::unique_ptr<CmConnector>> Rejoin(Node& local, const std::string& job, int size,
                                                             const Admit& admit,
                                                             const CmConnectorOptions& options = {});
  ~CmConnector() override;

  // Connector:
  int num_nodes() const override;
  absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator) override;
  absl::StatusOr<ArenaInfo> Arena(NodeId node) const override;
  absl::Status Disconnect(NodeId target, const QpEndpoint& responder) override;
  absl::Status PeerStatus(NodeId node) const override;
  void ReportUnreachable(NodeId node, const absl::Status& why) override;

  // Membership (rdma/cluster.h with a coordinator). A death this connector
  // detects (a CM disconnect, a QP out of retries) is fenced here as always
  // and then told to `listener` (on the detecting thread, with the
  // connector's lock held: it must not block or call back into the
  // connector); deaths detected before the call are told at once.
  void SetDeathListener(std::function<void(NodeId node, const std::string& why)> listener);
  // Fences `node` as a detected death does (its responder QPs here go, its
  // connections close, PeerStatus turns Unavailable), without telling the
  // listener: the agreed view dropped it.
  void Fence(NodeId node, const std::string& why);
  // This process's incarnation, and `node`'s as its card said.
  uint64_t incarnation() const;
  uint64_t incarnation_of(NodeId node) const;
  uint64_t Incarnation(NodeId node) const override { return incarnation_of(node); }
  // This node's card, encoded (what the membership registers).
  std::string card() const;
  // `node`, fenced here, is back as another process (a new incarnation) with
  // `card` (encoded): its requests are accepted and new connections reach
  // it. Sessions made before keep refusing it (Session's contract).
  absl::Status Readmit(NodeId node, const std::string& card);

  // Diagnostics: where this node's listener is bound ("10.0.2.15:43211"),
  // and how many responder QPs it holds for other nodes' sessions.
  std::string listen_address() const;
  size_t responder_connections() const;

 private:
  class Impl;
  explicit CmConnector(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdma::cm

#endif  // RDMA_CM_CM_CONNECTOR_H_
