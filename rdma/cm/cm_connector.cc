#include "rdma/cm/cm_connector.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "rdma/cm/handshake.h"
#include "rdma/verbs/verbs_device.h"

namespace rdma::cm {
namespace {

std::string Errno(absl::string_view call) { return absl::StrCat(call, ": ", std::strerror(errno)); }

absl::StatusOr<sockaddr_storage> ToSockaddr(const std::string& ip, uint16_t port) {
  sockaddr_storage ss{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
  } else if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("'", ip, "' is not an IP address (RDMADS_RDMA_ADDR takes the RDMA interface's IPv4 or IPv6 "
                     "address, e.g. 10.0.0.5)"));
  }
  return ss;
}

uint16_t PortOf(const sockaddr* sa) {
  if (sa->sa_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(sa)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(sa)->sin6_port);
}

// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), or "".
std::string Ipv4OfGid(const std::array<uint8_t, 16>& g) {
  for (int i = 0; i < 10; ++i)
    if (g[i] != 0) return "";
  if (g[10] != 0xff || g[11] != 0xff) return "";
  return absl::StrCat(g[12], ".", g[13], ".", g[14], ".", g[15]);
}

std::string GidText(const uint8_t* g) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, g, buf, sizeof buf);
  return buf;
}

// Waits up to `deadline` for the next event on `ch`, which must be `want`.
// The caller acks it.
absl::StatusOr<rdma_cm_event*> Await(rdma_event_channel* ch, rdma_cm_event_type want,
                                     std::chrono::steady_clock::time_point deadline, absl::string_view peer,
                                     absl::string_view step) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return absl::DeadlineExceededError(absl::StrCat(peer, ": no answer to ", step, " within the connect timeout"));
    }
    pollfd pfd{ch->fd, POLLIN, 0};
    const int r = poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) return absl::InternalError(Errno("poll(rdma_cm channel)"));
    if (r <= 0) continue;
    rdma_cm_event* ev = nullptr;
    if (rdma_get_cm_event(ch, &ev) != 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::InternalError(Errno("rdma_get_cm_event"));
    }
    if (ev->event == want) return ev;
    absl::Status err;
    if (ev->event == RDMA_CM_EVENT_REJECTED) {
      err = DecodeReject(absl::string_view(static_cast<const char*>(ev->param.conn.private_data),
                                           ev->param.conn.private_data_len),
                         peer);
      if (absl::IsUnavailable(err)) {  // not our reject: say the CM's reason
        err = absl::UnavailableError(absl::StrCat(err.message(), " [", step, ": reject reason ", ev->status, "]"));
      }
    } else {
      err = absl::UnavailableError(absl::StrCat(peer, ": ", step, " failed with ", rdma_event_str(ev->event),
                                                " (status ", ev->status, ")"));
    }
    rdma_ack_cm_event(ev);
    return err;
  }
}

struct ChannelDeleter {
  void operator()(rdma_event_channel* ch) const { rdma_destroy_event_channel(ch); }
};
using Channel = std::unique_ptr<rdma_event_channel, ChannelDeleter>;

absl::StatusOr<Channel> NewChannel(bool nonblocking) {
  Channel ch(rdma_create_event_channel());
  if (!ch) {
    return absl::FailedPreconditionError(
        Errno("rdma_create_event_channel (is the rdma_ucm module loaded and /dev/infiniband/rdma_cm accessible?)"));
  }
  if (nonblocking) {
    const int flags = fcntl(ch->fd, F_GETFL);
    if (flags < 0 || fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK) < 0) return absl::InternalError(Errno("fcntl"));
  }
  return ch;
}

}  // namespace

class CmConnector::Impl {
 public:
  Impl(Node& local, verbs::VerbsDevice& dev, const CmConnectorOptions& options)
      : local_(local), dev_(dev), options_(options) {}
  ~Impl();

  absl::Status Listen(uint64_t job_hash, int num_nodes);
  absl::Status Publish(Bootstrap& boot);
  absl::Status ConnectControl();

  absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator);
  absl::Status Disconnect(NodeId target, const QpEndpoint& responder);
  absl::Status PeerStatus(NodeId node) const;
  absl::StatusOr<ArenaInfo> Arena(NodeId node) const;
  int num_nodes() const { return static_cast<int>(cards_.size()); }
  std::string listen_address() const { return absl::StrCat(address_, ":", port_); }
  size_t responder_connections() const;

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

  absl::StatusOr<AcceptReply> ConnectId(NodeId target, const ConnectRequest& req,
                                        std::shared_ptr<QueuePair> placeholder = nullptr);
  void RunEvents();
  void OnEvent(rdma_cm_event* ev);
  void OnRequest(rdma_cm_id* id, absl::string_view data);
  void MarkDead(NodeId node, const std::string& why);
  std::string Peer(NodeId n) const {
    return absl::StrCat("node ", n, " (", cards_[n].address, ":", cards_[n].cm_port, ")");
  }

  Node& local_;
  verbs::VerbsDevice& dev_;
  const CmConnectorOptions options_;
  uint64_t job_hash_ = 0;
  uint64_t incarnation_ = NewIncarnation();
  std::string address_;
  uint16_t port_ = 0;
  std::vector<NodeCard> cards_;  // by node id, fixed after Publish

  Channel channel_;  // the listener's and every established connection's events
  rdma_cm_id* listen_id_ = nullptr;
  int wake_fd_ = -1;
  std::thread events_;

  std::mutex placeholder_mu_;
  std::unique_ptr<CompletionQueue> placeholder_cq_;
  mutable std::mutex mu_;
  std::map<rdma_cm_id*, Conn> conns_;
  std::vector<std::string> dead_why_;
  std::unique_ptr<std::atomic<bool>[]> dead_;
};

absl::Status CmConnector::Impl::Listen(uint64_t job_hash, int num_nodes) {
  job_hash_ = job_hash;
  dead_why_.resize(num_nodes);
  dead_ = std::make_unique<std::atomic<bool>[]>(num_nodes);
  address_ = options_.address;
  if (address_.empty() && std::getenv("RDMADS_RDMA_ADDR") != nullptr) address_ = std::getenv("RDMADS_RDMA_ADDR");
  if (address_.empty()) address_ = Ipv4OfGid(dev_.port().gid);
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
  if (Ipv4OfGid(dev_.port().gid) != address_ && !Ipv4OfGid(dev_.port().gid).empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the node's QPs use GID index ", dev_.port().gid_index, " (", GidText(dev_.port().gid.data()),
        ") but rdma_cm routes ", address_, ": unset the GID index override (--gid-index) or set it to that "
        "address's RoCE v2 GID"));
  }
  if (rdma_listen(listen_id_, 128) != 0) return absl::InternalError(Errno("rdma_listen"));
  port_ = PortOf(rdma_get_local_addr(listen_id_));
  wake_fd_ = eventfd(0, EFD_NONBLOCK);
  if (wake_fd_ < 0) return absl::InternalError(Errno("eventfd"));
  events_ = std::thread([this] { RunEvents(); });
  return absl::OkStatus();
}

absl::Status CmConnector::Impl::Publish(Bootstrap& boot) {
  NodeCard mine;
  mine.node = local_.id();
  mine.job_hash = job_hash_;
  mine.incarnation = incarnation_;
  mine.address = address_;
  mine.cm_port = port_;
  mine.arena = local_.arena_info();
  auto all = boot.AllGather(EncodeCard(mine));
  if (!all.ok()) return all.status();
  std::vector<NodeCard> cards;
  for (size_t r = 0; r < all->size(); ++r) {
    auto card = DecodeCard((*all)[r]);
    if (!card.ok()) {
      return absl::Status(card.status().code(), absl::StrCat("rank ", r, "'s card: ", card.status().message()));
    }
    if (card->node != r || card->job_hash != job_hash_) {
      return absl::FailedPreconditionError(absl::StrCat("rank ", r, " published node ", card->node,
                                                        card->job_hash != job_hash_ ? " of another job" : "",
                                                        ": every rank must create its node with id = its rank"));
    }
    cards.push_back(*std::move(card));
  }
  std::lock_guard<std::mutex> lock(mu_);  // the event thread reads cards_
  cards_ = std::move(cards);
  return absl::OkStatus();
}

absl::Status CmConnector::Impl::ConnectControl() {
  for (int n = local_.id() + 1; n < num_nodes(); ++n) {
    ConnectRequest req;
    req.kind = ConnectionKind::kControl;
    req.from = local_.id();
    req.to = static_cast<NodeId>(n);
    req.job_hash = job_hash_;
    req.from_incarnation = incarnation_;
    req.to_incarnation = cards_[n].incarnation;
    auto qp = NewPlaceholderQp();
    if (!qp.ok()) return qp.status();
    req.qp_num = (*qp)->qp_num();
    auto reply = ConnectId(static_cast<NodeId>(n), req, *qp);
    if (!reply.ok()) return reply.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<QueuePair>> CmConnector::Impl::NewPlaceholderQp() {
  std::lock_guard<std::mutex> lock(placeholder_mu_);
  if (!placeholder_cq_) {
    auto cq = dev_.CreateCompletionQueue(4);
    if (!cq.ok()) return cq.status();
    placeholder_cq_ = std::move(*cq);
  }
  QpOptions o;
  o.max_send_wr = 1;
  o.max_inline_data = 0;
  auto qp = dev_.CreateQueuePair(placeholder_cq_.get(), o);
  if (!qp.ok()) return qp.status();
  return std::shared_ptr<QueuePair>(std::move(*qp));
}

absl::StatusOr<AcceptReply> CmConnector::Impl::ConnectId(NodeId target, const ConnectRequest& req,
                                                         std::shared_ptr<QueuePair> placeholder) {
  const std::string peer = Peer(target);
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
  auto dst = ToSockaddr(cards_[target].address, cards_[target].cm_port);
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
  absl::Status bad = reply.ok() ? CheckAccept(*reply, cards_[target]) : reply.status();
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
  ConnectRequest req;
  req.kind = ConnectionKind::kData;
  req.from = local_.id();
  req.to = target;
  req.job_hash = job_hash_;
  req.from_incarnation = incarnation_;
  req.to_incarnation = cards_[target].incarnation;
  req.qp_num = initiator.qp_num;
  req.psn = initiator.psn;
  req.lid = initiator.lid;
  auto reply = ConnectId(target, req);
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

absl::Status CmConnector::Impl::PeerStatus(NodeId node) const {
  if (node >= num_nodes()) return absl::InvalidArgumentError(absl::StrCat("no node ", node));
  if (!dead_[node].load(std::memory_order_acquire)) return absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  return absl::UnavailableError(dead_why_[node]);
}

absl::StatusOr<ArenaInfo> CmConnector::Impl::Arena(NodeId node) const {
  if (node >= num_nodes()) return absl::InvalidArgumentError(absl::StrCat("no node ", node));
  return cards_[node].arena;
}

size_t CmConnector::Impl::responder_connections() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, c] : conns_) n += !c.active && c.kind == ConnectionKind::kData;
  return n;
}

void CmConnector::Impl::MarkDead(NodeId node, const std::string& why) {
  // mu_ held.
  if (dead_[node].load(std::memory_order_relaxed)) return;
  dead_why_[node] = absl::StrCat(Peer(node), " is gone: ", why);
  dead_[node].store(true, std::memory_order_release);
}

void CmConnector::Impl::RunEvents() {
  pollfd fds[2] = {{channel_->fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
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
    for (int n = 0; n < num_nodes(); ++n)
      if (n != local_.id()) MarkDead(static_cast<NodeId>(n), "the local RDMA device was removed");
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
  if (!c.active && c.kind == ConnectionKind::kData) (void)local_.ReleaseConnection(c.qp_num);
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
  me.num_nodes = num_nodes();
  // A request can arrive before this node has every card (a lower rank is
  // ahead in its bootstrap); cards_ is set under mu_.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (cards_.empty()) return refuse(absl::UnavailableError("still bootstrapping"));
    me.num_nodes = static_cast<int>(cards_.size());
    if (req->from < cards_.size()) me.card_incarnation_of_from = cards_[req->from].incarnation;
  }
  if (absl::Status s = CheckRequest(*req, me); !s.ok()) return refuse(s);
  if (absl::Status alive = PeerStatus(req->from); !alive.ok()) return refuse(alive);
  AcceptReply reply;
  reply.node = local_.id();
  reply.incarnation = incarnation_;
  reply.arena = local_.arena_info();
  uint32_t accept_qp = 0;
  std::shared_ptr<QueuePair> placeholder;
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
  const std::string wire = EncodeAccept(reply);
  rdma_conn_param param{};
  param.private_data = wire.data();
  param.private_data_len = static_cast<uint8_t>(wire.size());
  param.responder_resources = static_cast<uint8_t>(std::clamp(dev_.attr().max_qp_rd_atom, 1, 255));
  param.initiator_depth = static_cast<uint8_t>(std::clamp(dev_.attr().max_qp_init_rd_atom, 1, 255));
  param.rnr_retry_count = 7;
  param.qp_num = accept_qp;
  {
    std::lock_guard<std::mutex> lock(mu_);
    conns_[id] = Conn{req->kind, req->from, /*active=*/false, accept_qp, false, placeholder};
  }
  if (rdma_accept(id, &param) != 0) {
    std::fprintf(stderr, "rdmads: node %d: rdma_accept for node %d failed: %s\n", static_cast<int>(local_.id()),
                 static_cast<int>(req->from), std::strerror(errno));
    {
      std::lock_guard<std::mutex> lock(mu_);
      conns_.erase(id);
    }
    if (req->kind == ConnectionKind::kData) (void)local_.ReleaseConnection(accept_qp);
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
    if (!c.active && c.kind == ConnectionKind::kData) (void)local_.ReleaseConnection(c.qp_num);
    rdma_destroy_id(id);
  }
  conns_.clear();
  if (listen_id_ != nullptr) rdma_destroy_id(listen_id_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

// ---------------------------------------------------------------- CmConnector

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
std::string CmConnector::listen_address() const { return impl_->listen_address(); }
size_t CmConnector::responder_connections() const { return impl_->responder_connections(); }

}  // namespace rdma::cm
