// CmConnector's event thread: requests, disconnects, dead peers.

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "rdma/cm/internal/connector_impl.h"

namespace rdma::cm {

using internal::Await;
using internal::Errno;
using internal::GidText;
using internal::Ipv4OfGid;
using internal::NewChannel;
using internal::PortOf;
using internal::ToSockaddr;

absl::Status CmConnector::Impl::PeerStatus(NodeId node) const {
  if (node >= num_nodes()) return absl::InvalidArgumentError(absl::StrCat("no node ", node));
  if (!dead_[node].load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return absl::UnavailableError(dead_why_[node]);
}

absl::StatusOr<ArenaInfo> CmConnector::Impl::Arena(NodeId node) const {
  if (node >= num_nodes()) return absl::InvalidArgumentError(absl::StrCat("no node ", node));
  return CardOf(node).arena;
}

size_t CmConnector::Impl::responder_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, c] : conns_) n += !c.active && c.kind == ConnectionKind::kData && c.qp_num != 0;
  return n;
}

void CmConnector::Impl::ReportUnreachable(NodeId node, const absl::Status& why) {
  if (node >= num_nodes() || node == local_.id()) return;
  std::lock_guard<std::mutex> lock(mu_);
  MarkDead(node, absl::StrCat("its host stopped answering (", why.message(), ")"));
}

void CmConnector::Impl::SetDeathListener(std::function<void(NodeId, const std::string&)> listener) {
  std::lock_guard<std::mutex> lock(mu_);
  death_listener_ = std::move(listener);
  for (size_t n = 0; n < cards_.size(); ++n) {
    if (death_listener_ && dead_[n].load(std::memory_order_relaxed)) death_listener_(static_cast<NodeId>(n), dead_why_[n]);
  }
}

void CmConnector::Impl::Fence(NodeId node, const std::string& why) {
  if (node >= num_nodes() || node == local_.id()) return;
  std::lock_guard<std::mutex> lock(mu_);
  MarkDead(node, why, /*detected=*/false);
}

void CmConnector::Impl::MarkDead(NodeId node, const std::string& why, bool detected) {
  // mu_ held.
  if (dead_[node].load(std::memory_order_relaxed)) return;
  dead_why_[node] = absl::StrCat(Peer(node), " is gone: ", why);
  // Nothing of the peer's may reach this node's arena any more, even if it
  // is only slow: its responder QPs go now, and every connection with it is
  // closed (the event thread frees the ids on DISCONNECTED, which for a dead
  // host comes when the CM gives up on its disconnect). Only then is it
  // declared dead: whoever repairs what it left relies on this fence.
  for (auto& [id, c] : conns_) {
    if (c.peer != node || c.closing) continue;
    if (!c.active && c.kind == ConnectionKind::kData && c.qp_num != 0) {
      (void)local_.ReleaseConnection(c.qp_num);
      c.qp_num = 0;
    }
    c.closing = true;
    rdma_disconnect(id);
  }
  dead_[node].store(true, std::memory_order_release);
  if (detected && death_listener_) death_listener_(node, dead_why_[node]);
}

void CmConnector::Impl::MarkAllDead(const std::string& why) {
  // This node's own failure: nobody else is reported dead for it.
  for (int n = 0; n < num_nodes(); ++n)
    if (n != local_.id()) MarkDead(static_cast<NodeId>(n), why, /*detected=*/false);
}

void CmConnector::Impl::RunEvents() {
  pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) {
      // Without this thread nothing is accepted and no death is seen: say so
      // through every peer's status rather than go quiet.
      const std::string why = Errno("poll on the rdma_cm event channel");
      std::fprintf(stderr, "rdmads: node %d: %s; the connector stops\n", static_cast<int>(local_.id()), why.c_str());
      std::lock_guard<std::mutex> lock(mu_);
      MarkAllDead(absl::StrCat("this node's connector failed: ", why));
      return;
    }
    if (fds[1].revents != 0) return;
    rdma_cm_event* ev = nullptr;
    while (rdma_get_cm_event(channel_.get(), &ev) == 0) OnEvent(ev);
  }
}

void CmConnector::Impl::OnEvent(rdma_cm_event* ev) {
  rdma_cm_id* id = ev->id;
  const rdma_cm_event_type type = ev->event;
  if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
    const std::string data(static_cast<const char*>(ev->param.conn.private_data), ev->param.conn.private_data_len);
    rdma_ack_cm_event(ev);
    OnRequest(id, data);
    return;
  }
  rdma_ack_cm_event(ev);
  if (type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
    std::lock_guard<std::mutex> lock(mu_);
    MarkAllDead("the local RDMA device was removed");
    return;
  }
  if (type != RDMA_CM_EVENT_DISCONNECTED && type != RDMA_CM_EVENT_CONNECT_ERROR &&
      type != RDMA_CM_EVENT_UNREACHABLE && type != RDMA_CM_EVENT_REJECTED) {
    return;  // ESTABLISHED, TIMEWAIT_EXIT, ADDR_CHANGE: nothing to do
  }
  Conn c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = conns_.find(id);
    if (it == conns_.end()) return;
    c = it->second;
    conns_.erase(it);
    // A connection this node did not close ending means the peer's process
    // ended: the kernel disconnects every rdma_cm id of a process that exits.
    if (!c.closing && (c.kind == ConnectionKind::kControl || c.active)) {
      MarkDead(c.peer, absl::StrCat("rdma_cm reported ", rdma_event_str(type), " on its ",
                                    c.kind == ConnectionKind::kControl ? "control" : "data",
                                    " connection (its process ended or its host is unreachable)"));
    }
  }
  if (!c.active && c.kind == ConnectionKind::kData && c.qp_num != 0) (void)local_.ReleaseConnection(c.qp_num);
  rdma_destroy_id(id);
}

void CmConnector::Impl::OnRequest(rdma_cm_id* id, absl::string_view data) {
  auto refuse = [&](const absl::Status& why) {
    const std::string wire = EncodeReject(why);
    rdma_reject(id, wire.data(), static_cast<uint8_t>(wire.size()));
    rdma_destroy_id(id);
  };
  auto req = DecodeRequest(data);
  if (!req.ok()) return refuse(req.status());
  ResponderView me;
  me.self = local_.id();
  me.job_hash = job_hash_;
  me.incarnation = incarnation_;
  AcceptReply reply;
  reply.node = local_.id();
  reply.incarnation = incarnation_;
  reply.arena = local_.arena_info();
  uint32_t accept_qp = 0;
  std::shared_ptr<QueuePair> placeholder;
  // The checks and the connection's entry are one step under mu_: a Fence
  // or a Readmit of the initiator's node either comes before (and the
  // request is refused) or after (and finds the connection to close).
  std::lock_guard<std::mutex> lock(mu_);
  // A request can arrive before this node has every card (a lower rank is
  // ahead in its bootstrap).
  if (cards_.empty()) return refuse(absl::UnavailableError("still bootstrapping"));
  me.num_nodes = static_cast<int>(cards_.size());
  if (req->from < cards_.size()) me.card_incarnation_of_from = cards_[req->from].incarnation;
  if (absl::Status s = CheckRequest(*req, me); !s.ok()) return refuse(s);
  if (dead_[req->from].load(std::memory_order_acquire)) {
    // A readmitted node comes alive with its control connection.
    if (!rejoining_[req->from] || req->kind != ConnectionKind::kControl) {
      return refuse(absl::UnavailableError(dead_why_[req->from]));
    }
    rejoining_[req->from] = false;
    dead_why_[req->from].clear();
    dead_[req->from].store(false, std::memory_order_release);
  }
  if (req->kind == ConnectionKind::kControl) {
    auto qp = NewPlaceholderQp();
    if (!qp.ok()) return refuse(qp.status());
    placeholder = *std::move(qp);
    accept_qp = placeholder->qp_num();
  } else {
    // The initiator's GID comes from rdma_cm's route, not from its request.
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(id, &attr, &mask) != 0) return refuse(absl::InternalError(Errno("rdma_init_qp_attr")));
    if (dev_.port().ethernet && attr.ah_attr.grh.sgid_index != dev_.port().gid_index) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "node ", local_.id(), " is reached through GID index ", attr.ah_attr.grh.sgid_index,
          " but its QPs use ", dev_.port().gid_index, ": unset its GID index override")));
    }
    QpEndpoint initiator;
    initiator.node = req->from;
    initiator.qp_num = req->qp_num;
    initiator.psn = req->psn;
    initiator.lid = req->lid;
    std::memcpy(initiator.gid.data(), attr.ah_attr.grh.dgid.raw, 16);
    auto responder = local_.AcceptConnection(initiator);
    if (!responder.ok()) return refuse(responder.status());
    reply.responder = *responder;
    accept_qp = responder->qp_num;
  }
  conns_[id] = Conn{req->kind, req->from, /*active=*/false, accept_qp, false, placeholder};
  Accept(id, reply, accept_qp, req->kind, req->from);
}

void CmConnector::Impl::Accept(rdma_cm_id* id, const AcceptReply& reply, uint32_t accept_qp, ConnectionKind kind,
                               NodeId from) {
  // mu_ held.
  const std::string wire = EncodeAccept(reply);
  rdma_conn_param param{};
  param.private_data = wire.data();
  param.private_data_len = static_cast<uint8_t>(wire.size());
  param.responder_resources = static_cast<uint8_t>(std::clamp(dev_.attr().max_qp_rd_atom, 1, 255));
  param.initiator_depth = static_cast<uint8_t>(std::clamp(dev_.attr().max_qp_init_rd_atom, 1, 255));
  param.rnr_retry_count = 7;
  param.qp_num = accept_qp;
  if (rdma_accept(id, &param) != 0) {
    std::fprintf(stderr, "rdmads: node %d: rdma_accept for node %d failed: %s\n", static_cast<int>(local_.id()),
                 static_cast<int>(from), std::strerror(errno));
    conns_.erase(id);
    if (kind == ConnectionKind::kData) (void)local_.ReleaseConnection(accept_qp);
    rdma_destroy_id(id);
  }
}

CmConnector::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [id, c] : conns_) {
      c.closing = true;
      rdma_disconnect(id);
    }
  }
  if (events_.joinable()) {
    const uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    events_.join();
  }
  for (auto& [id, c] : conns_) {
    if (!c.active && c.kind == ConnectionKind::kData && c.qp_num != 0) (void)local_.ReleaseConnection(c.qp_num);
    rdma_destroy_id(id);
  }
  conns_.clear();
  if (listen_id_ != nullptr) rdma_destroy_id(listen_id_);
  if (wake_fd_ >= 0) close(wake_fd_);
}


}  // namespace rdma::cm
