// CmConnector's connecting side: listener, cards, control and data connects.

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

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

absl::Status CmConnector::Impl::Listen(uint64_t job_hash, int num_nodes) {
  job_hash_ = job_hash;
  num_nodes_ = num_nodes;
  dead_why_.resize(num_nodes);
  rejoining_.assign(num_nodes, false);
  dead_ = std::make_unique<std::atomic<bool>[]>(num_nodes);
  incarnations_ = std::make_unique<std::atomic<uint64_t>[]>(num_nodes);
  for (int n = 0; n < num_nodes; ++n) incarnations_[n].store(0, std::memory_order_relaxed);
  address_ = options_.address;
  if (address_.empty() && std::getenv("RDMADS_RDMA_ADDR") != nullptr) address_ = std::getenv("RDMADS_RDMA_ADDR");
  const std::string gid_address = Ipv4OfGid(dev_.port().gid);  // "" unless IPv4-mapped
  if (address_.empty()) address_ = gid_address;
  if (address_.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the node's device ", dev_.name(), " has no IPv4-mapped GID to listen on; set RDMADS_RDMA_ADDR to the IP "
        "address of its network interface (`rdma link` names it)"));
  }
  auto ch = NewChannel(/*nonblocking=*/true);
  if (!ch.ok()) return ch.status();
  channel_ = std::move(*ch);
  auto sa = ToSockaddr(address_, options_.port);
  if (!sa.ok()) return sa.status();
  if (rdma_create_id(channel_.get(), &listen_id_, nullptr, RDMA_PS_TCP) != 0) {
    return absl::InternalError(Errno("rdma_create_id"));
  }
  if (rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&*sa)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        Errno(absl::StrCat("rdma_bind_addr(", address_, ":", options_.port, ")")),
        " — is it the address of an RDMA interface on this host (RDMADS_RDMA_ADDR), and the port free?"));
  }
  if (listen_id_->verbs == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(address_, " is not on an RDMA device's interface"));
  }
  const std::string bound_dev = ibv_get_device_name(listen_id_->verbs->device);
  if (bound_dev != dev_.name()) {
    return absl::FailedPreconditionError(absl::StrCat("rdma_cm puts ", address_, " on device ", bound_dev,
                                                      " but the node opened ", dev_.name(),
                                                      ": pick that device (--device / FabricOptions::device) or "
                                                      "the address of ", dev_.name(), "'s interface"));
  }
  if (!gid_address.empty() && gid_address != address_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the node's QPs use GID index ", dev_.port().gid_index, " (", GidText(dev_.port().gid.data()),
        ") but rdma_cm routes ", address_, ": unset the GID index override (--gid-index) or set it to that "
        "address's RoCE v2 GID"));
  }
  if (rdma_listen(listen_id_, 128) != 0) return absl::InternalError(Errno("rdma_listen"));
  port_ = PortOf(rdma_get_local_addr(listen_id_));
  auto cq = dev_.CreateCompletionQueue(4);  // the control connections' placeholder QPs'
  if (!cq.ok()) return cq.status();
  placeholder_cq_ = std::move(*cq);
  wake_fd_ = eventfd(0, EFD_NONBLOCK);
  if (wake_fd_ < 0) return absl::InternalError(Errno("eventfd"));
  events_ = std::thread([this] { RunEvents(); });
  return absl::OkStatus();
}

NodeCard CmConnector::Impl::MyCard() const {
  NodeCard mine;
  mine.node = local_.id();
  mine.job_hash = job_hash_;
  mine.incarnation = incarnation_;
  mine.address = address_;
  mine.cm_port = port_;
  mine.arena = local_.arena_info();
  return mine;
}

absl::StatusOr<NodeCard> CmConnector::Impl::CheckedCard(absl::string_view blob, NodeId rank) const {
  auto card = DecodeCard(blob);
  if (!card.ok()) {
    return absl::Status(card.status().code(), absl::StrCat("rank ", rank, "'s card: ", card.status().message()));
  }
  if (card->node != rank || card->job_hash != job_hash_) {
    return absl::FailedPreconditionError(absl::StrCat("rank ", rank, "'s card names node ", card->node,
                                                      card->job_hash != job_hash_ ? " of another job" : "",
                                                      ": every rank must create its node with id = its rank"));
  }
  return card;
}

void CmConnector::Impl::InstallCards(std::vector<NodeCard> cards) {
  std::lock_guard<std::mutex> lock(mu_);  // the event thread reads cards_
  for (size_t n = 0; n < cards.size(); ++n) incarnations_[n].store(cards[n].incarnation, std::memory_order_release);
  cards_ = std::move(cards);
}

absl::Status CmConnector::Impl::Publish(Bootstrap& boot) {
  auto all = boot.AllGather(EncodeCard(MyCard()));
  if (!all.ok()) return all.status();
  std::vector<NodeCard> cards;
  for (size_t r = 0; r < all->size(); ++r) {
    auto card = CheckedCard((*all)[r], static_cast<NodeId>(r));
    if (!card.ok()) return card.status();
    cards.push_back(*std::move(card));
  }
  InstallCards(std::move(cards));
  return absl::OkStatus();
}

absl::Status CmConnector::Impl::AdoptCards(const std::vector<std::string>& blobs) {
  if (static_cast<int>(blobs.size()) != num_nodes()) {
    return absl::InternalError(absl::StrCat("AdoptCards: ", blobs.size(), " cards for ", num_nodes(), " nodes"));
  }
  std::vector<NodeCard> cards(blobs.size());
  std::vector<NodeId> absent;
  for (size_t r = 0; r < blobs.size(); ++r) {
    const auto rank = static_cast<NodeId>(r);
    cards[r].node = rank;
    if (rank == local_.id()) {
      cards[r] = MyCard();
    } else if (blobs[r].empty()) {
      absent.push_back(rank);
    } else {
      auto card = CheckedCard(blobs[r], rank);
      if (!card.ok()) return card.status();
      cards[r] = *std::move(card);
    }
  }
  InstallCards(std::move(cards));
  std::lock_guard<std::mutex> lock(mu_);
  for (NodeId r : absent) {
    dead_why_[r] = absl::StrCat("node ", r, " is gone: it was not in the job when this process joined");
    dead_[r].store(true, std::memory_order_release);
  }
  return absl::OkStatus();
}

ConnectRequest CmConnector::Impl::RequestTo(ConnectionKind kind, const NodeCard& target) const {
  ConnectRequest req;
  req.kind = kind;
  req.from = local_.id();
  req.to = target.node;
  req.job_hash = job_hash_;
  req.from_incarnation = incarnation_;
  req.to_incarnation = target.incarnation;
  return req;
}

absl::Status CmConnector::Impl::ConnectControlTo(NodeId n) {
  const NodeCard card = CardOf(n);
  ConnectRequest req = RequestTo(ConnectionKind::kControl, card);
  auto qp = NewPlaceholderQp();
  if (!qp.ok()) return qp.status();
  req.qp_num = (*qp)->qp_num();
  return ConnectId(card, req, *qp).status();
}

absl::Status CmConnector::Impl::ConnectControl() {
  for (int n = local_.id() + 1; n < num_nodes(); ++n) {
    if (absl::Status s = ConnectControlTo(static_cast<NodeId>(n)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status CmConnector::Impl::ConnectControlToAll() {
  for (int n = 0; n < num_nodes(); ++n) {
    if (n == local_.id() || !PeerStatus(static_cast<NodeId>(n)).ok()) continue;
    // A peer refuses this process until it applied the epoch that admitted
    // it (its card still names the old process): ask again until then.
    const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
    for (;;) {
      absl::Status s = ConnectControlTo(static_cast<NodeId>(n));
      if (s.ok()) break;
      if (!absl::IsFailedPrecondition(s) || std::chrono::steady_clock::now() > deadline) {
        return absl::Status(s.code(), absl::StrCat("rejoining: the control connection to node ", n, ": ",
                                                   s.message()));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return absl::OkStatus();
}

absl::Status CmConnector::Impl::Readmit(NodeId node, absl::string_view blob) {
  if (node >= num_nodes() || node == local_.id()) return absl::InvalidArgumentError(absl::StrCat("readmit node ", node));
  absl::StatusOr<NodeCard> checked = CheckedCard(blob, node);
  if (!checked.ok()) return checked.status();
  const NodeCard& card = *checked;
  std::lock_guard<std::mutex> lock(mu_);
  if (!dead_[node].load(std::memory_order_relaxed)) {
    return absl::FailedPreconditionError(absl::StrCat(Peer(node), " is readmitted as incarnation ",
                                                      absl::Hex(card.incarnation), " but its process of incarnation ",
                                                      absl::Hex(cards_[node].incarnation), " was never fenced here"));
  }
  cards_[node] = card;
  incarnations_[node].store(card.incarnation, std::memory_order_release);
  dead_why_[node] = absl::StrCat(Peer(node), " rejoins as incarnation ", absl::Hex(card.incarnation),
                                 ": waiting for its control connection");
  rejoining_[node] = true;  // alive once its control connection is accepted (OnRequest)
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<QueuePair>> CmConnector::Impl::NewPlaceholderQp() {
  QpOptions o;
  o.max_send_wr = 1;
  o.max_inline_data = 0;
  auto qp = dev_.CreateQueuePair(placeholder_cq_.get(), o);
  if (!qp.ok()) return qp.status();
  return std::shared_ptr<QueuePair>(std::move(*qp));
}

absl::StatusOr<AcceptReply> CmConnector::Impl::ConnectId(const NodeCard& card, const ConnectRequest& req,
                                                         std::shared_ptr<QueuePair> placeholder) {
  const NodeId target = card.node;
  const std::string peer = Peer(card);
  const auto deadline = std::chrono::steady_clock::now() + options_.connect_timeout;
  const int step_ms = static_cast<int>(std::max<int64_t>(1, options_.connect_timeout.count() / 2));
  auto ch = NewChannel(/*nonblocking=*/true);
  if (!ch.ok()) return ch.status();
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(ch->get(), &id, nullptr, RDMA_PS_TCP) != 0) return absl::InternalError(Errno("rdma_create_id"));
  bool keep = false;
  absl::Cleanup destroy = [&] {
    if (!keep) rdma_destroy_id(id);
  };
  auto src = ToSockaddr(address_, 0);
  auto dst = ToSockaddr(card.address, card.cm_port);
  if (!src.ok()) return src.status();
  if (!dst.ok()) return dst.status();
  if (rdma_resolve_addr(id, reinterpret_cast<sockaddr*>(&*src), reinterpret_cast<sockaddr*>(&*dst), step_ms) != 0) {
    return absl::UnavailableError(absl::StrCat(peer, ": ", Errno("rdma_resolve_addr")));
  }
  auto ev = Await(ch->get(), RDMA_CM_EVENT_ADDR_RESOLVED, deadline, peer, "address resolution");
  if (!ev.ok()) return ev.status();
  rdma_ack_cm_event(*ev);
  if (rdma_resolve_route(id, step_ms) != 0) return absl::UnavailableError(absl::StrCat(peer, ": ", Errno("rdma_resolve_route")));
  ev = Await(ch->get(), RDMA_CM_EVENT_ROUTE_RESOLVED, deadline, peer, "route resolution");
  if (!ev.ok()) return ev.status();
  rdma_ack_cm_event(*ev);

  const std::string wire = EncodeRequest(req);
  rdma_conn_param param{};
  param.private_data = wire.data();
  param.private_data_len = static_cast<uint8_t>(wire.size());
  param.responder_resources = static_cast<uint8_t>(std::clamp(dev_.attr().max_qp_rd_atom, 1, 255));
  param.initiator_depth = static_cast<uint8_t>(std::clamp(dev_.attr().max_qp_init_rd_atom, 1, 255));
  param.retry_count = 6;
  param.rnr_retry_count = 7;
  param.qp_num = req.qp_num;
  if (rdma_connect(id, &param) != 0) return absl::UnavailableError(absl::StrCat(peer, ": ", Errno("rdma_connect")));
  ev = Await(ch->get(), RDMA_CM_EVENT_CONNECT_RESPONSE, deadline, peer, "the connection request");
  if (!ev.ok()) return ev.status();
  auto reply = DecodeAccept(absl::string_view(static_cast<const char*>((*ev)->param.conn.private_data),
                                              (*ev)->param.conn.private_data_len));
  rdma_ack_cm_event(*ev);
  absl::Status bad = reply.ok() ? CheckAccept(*reply, card) : reply.status();
  if (bad.ok() && req.kind == ConnectionKind::kData) {
    // The route rdma_cm resolved must be the one the QPs are set up with.
    ibv_qp_attr attr{};
    int mask = 0;
    attr.qp_state = IBV_QPS_RTR;
    if (rdma_init_qp_attr(id, &attr, &mask) != 0) {
      bad = absl::InternalError(Errno("rdma_init_qp_attr"));
    } else if (dev_.port().ethernet &&
               (attr.ah_attr.grh.sgid_index != dev_.port().gid_index ||
                std::memcmp(attr.ah_attr.grh.dgid.raw, reply->responder.gid.data(), 16) != 0)) {
      bad = absl::FailedPreconditionError(absl::StrCat(
          peer, ": rdma_cm routes from GID index ", attr.ah_attr.grh.sgid_index, " to ",
          GidText(attr.ah_attr.grh.dgid.raw), " but the QPs use GID index ", dev_.port().gid_index, " and the peer "
          "announced ", GidText(reply->responder.gid.data()), ": unset the GID index override (--gid-index)"));
    } else if (attr.dest_qp_num != reply->responder.qp_num) {
      bad = absl::InternalError(absl::StrCat(peer, ": the reply names QP ", reply->responder.qp_num,
                                             " but the CM's answer QP ", attr.dest_qp_num));
    }
  }
  // External-QP mode wants the initiator's QP at RTR/RTS before this RTU;
  // the session moves it there right after Connect returns. That order is
  // safe because the responder never sends first: its QP only answers.
  if (rdma_establish(id) != 0 && bad.ok()) bad = absl::UnavailableError(absl::StrCat(peer, ": ", Errno("rdma_establish")));
  if (!bad.ok()) {
    rdma_disconnect(id);  // the responder frees what it set up
    return bad;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_[id] = Conn{req.kind, target, /*active=*/true, reply->responder.qp_num, false, std::move(placeholder)};
    if (rdma_migrate_id(id, channel_.get()) != 0) {
      conns_.erase(id);
      rdma_disconnect(id);
      return absl::InternalError(Errno("rdma_migrate_id"));
    }
    keep = true;
  }
  return *std::move(reply);
}

absl::StatusOr<QpEndpoint> CmConnector::Impl::Connect(NodeId target, const QpEndpoint& initiator) {
  if (target >= num_nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("no node ", target, " (the job has ", num_nodes(), ")"));
  }
  if (target == local_.id()) return local_.AcceptConnection(initiator);  // rdma_cm cannot route to itself
  if (absl::Status alive = PeerStatus(target); !alive.ok()) return alive;
  const NodeCard card = CardOf(target);
  ConnectRequest req = RequestTo(ConnectionKind::kData, card);
  req.qp_num = initiator.qp_num;
  req.psn = initiator.psn;
  req.lid = initiator.lid;
  auto reply = ConnectId(card, req);
  if (!reply.ok()) return reply.status();
  QpEndpoint responder = reply->responder;
  responder.node = target;
  return responder;
}

absl::Status CmConnector::Impl::Disconnect(NodeId target, const QpEndpoint& responder) {
  if (target == local_.id()) return local_.ReleaseConnection(responder.qp_num);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, c] : conns_) {
    if (c.active && c.kind == ConnectionKind::kData && c.peer == target && c.qp_num == responder.qp_num) {
      if (c.closing) break;
      c.closing = true;
      if (rdma_disconnect(id) != 0) return absl::UnavailableError(absl::StrCat(Peer(target), ": ", Errno("rdma_disconnect")));
      return absl::OkStatus();  // the event thread destroys the id on DISCONNECTED
    }
  }
  return absl::NotFoundError(absl::StrCat("no connection to ", Peer(target), " for its QP ", responder.qp_num));
}


}  // namespace rdma::cm
