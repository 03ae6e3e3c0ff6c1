#ifndef RDMA_CM_INTERNAL_CONNECTOR_IMPL_H_
#define RDMA_CM_INTERNAL_CONNECTOR_IMPL_H_

// CmConnector's state (rdma/cm/cm_connector.h). initiator.cc holds the
// listener, the card exchange and the connecting side; responder.cc the event
// thread: requests, disconnects and which peers are dead. Internal.

#include <rdma/rdma_cma.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rdma/bootstrap.h"
#include "rdma/cm/cm_connector.h"
#include "rdma/cm/handshake.h"
#include "rdma/cm/internal/cm_util.h"
#include "rdma/verbs/verbs_device.h"

namespace rdma::cm {

using internal::Channel;

class CmConnector::Impl {
 public:
  Impl(Node& local, verbs::VerbsDevice& dev, const CmConnectorOptions& options)
      : local_(local), dev_(dev), options_(options) {}
  ~Impl();

  absl::Status Listen(uint64_t job_hash, int num_nodes);
  absl::Status Publish(Bootstrap& boot);
  // Control connections to every higher rank (a job's start).
  absl::Status ConnectControl();
  // A rejoining process: its card, then every rank's card from the job's
  // configuration ("" for a rank not in it), then control connections to
  // every live rank (refusals retried while those peers catch up).
  NodeCard MyCard() const;
  absl::Status AdoptCards(const std::vector<std::string>& cards);
  absl::Status ConnectControlToAll();
  absl::Status Readmit(NodeId node, absl::string_view card);

  absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator);
  absl::Status Disconnect(NodeId target, const QpEndpoint& responder);
  absl::Status PeerStatus(NodeId node) const;
  void ReportUnreachable(NodeId node, const absl::Status& why);
  absl::StatusOr<ArenaInfo> Arena(NodeId node) const;
  int num_nodes() const { return num_nodes_; }
  std::string listen_address() const { return absl::StrCat(address_, ":", port_); }
  size_t responder_connections() const;
  void SetDeathListener(std::function<void(NodeId, const std::string&)> listener);
  void Fence(NodeId node, const std::string& why);
  uint64_t incarnation() const { return incarnation_; }
  uint64_t incarnation_of(NodeId node) const {
    return node < static_cast<NodeId>(num_nodes_) ? incarnations_[node].load(std::memory_order_acquire) : 0;
  }

 private:
  // One rdma_cm connection this node is an end of.
  struct Conn {
    ConnectionKind kind;
    NodeId peer;
    bool active;           // this node connected (else it accepted)
    uint32_t qp_num;       // kData: the responder QP (ours if passive, theirs if active)
    bool closing = false;  // this node asked to disconnect
    // kControl: a QP that is never connected. The CM needs a QP number that
    // is unique on the device (it refuses a number it sees twice as stale).
    std::shared_ptr<QueuePair> placeholder;
  };
  absl::StatusOr<std::shared_ptr<QueuePair>> NewPlaceholderQp();
  // `blob` decoded, and checked to be rank's card in this job.
  absl::StatusOr<NodeCard> CheckedCard(absl::string_view blob, NodeId rank) const;
  // Every node's card at once (mu_ not held): cards_ and incarnations_.
  void InstallCards(std::vector<NodeCard> cards);
  // A request from this node to `target`'s process, as its card says.
  ConnectRequest RequestTo(ConnectionKind kind, const NodeCard& target) const;

  // `card` is the target's as this node knows it when the connect starts.
  absl::StatusOr<AcceptReply> ConnectId(const NodeCard& card, const ConnectRequest& req,
                                        std::shared_ptr<QueuePair> placeholder = nullptr);
  absl::Status ConnectControlTo(NodeId n);
  // cards_[n], copied under mu_ (a readmission replaces it).
  NodeCard CardOf(NodeId n) const {
    std::lock_guard<std::mutex> lock(mu_);
    return cards_[n];
  }
  void RunEvents();
  void OnEvent(rdma_cm_event* ev);
  void OnRequest(rdma_cm_id* id, absl::string_view data);
  // Accepts a checked request whose connection is recorded (mu_ held).
  void Accept(rdma_cm_id* id, const AcceptReply& reply, uint32_t accept_qp, ConnectionKind kind, NodeId from);
  // Fences `node` and declares it dead; tells the death listener unless
  // the death was agreed elsewhere (`detected` false).
  void MarkDead(NodeId node, const std::string& why, bool detected = true);
  // MarkDead for every other node (mu_ held).
  void MarkAllDead(const std::string& why);
  // mu_ held, or a card copied with CardOf.
  std::string Peer(NodeId n) const { return Peer(cards_[n]); }
  static std::string Peer(const NodeCard& c) {
    return absl::StrCat("node ", c.node, " (", c.address, ":", c.cm_port, ")");
  }

  Node& local_;
  verbs::VerbsDevice& dev_;
  const CmConnectorOptions options_;
  uint64_t job_hash_ = 0;
  uint64_t incarnation_ = NewIncarnation();
  std::string address_;
  uint16_t port_ = 0;
  int num_nodes_ = 0;
  // By node id, under mu_: set by Publish (or AdoptCards), replaced for a
  // node readmitted as a new process; incarnations_ mirrors them lock-free.
  std::vector<NodeCard> cards_;
  std::unique_ptr<std::atomic<uint64_t>[]> incarnations_;

  Channel channel_;  // the listener's and every established connection's events
  rdma_cm_id* listen_id_ = nullptr;
  int wake_fd_ = -1;
  std::thread events_;

  std::unique_ptr<CompletionQueue> placeholder_cq_;  // set in Listen
  mutable std::mutex mu_;
  std::map<rdma_cm_id*, Conn> conns_;
  std::vector<std::string> dead_why_;
  // By node, under mu_: readmitted as a new process (Readmit) and still
  // dead here until that process's control connection arrives, which it
  // opens only once it knows every card (so it can answer our requests).
  std::vector<bool> rejoining_;
  std::function<void(NodeId, const std::string&)> death_listener_;
  std::unique_ptr<std::atomic<bool>[]> dead_;
};

}  // namespace rdma::cm

#endif  // RDMA_CM_INTERNAL_CONNECTOR_IMPL_H_
