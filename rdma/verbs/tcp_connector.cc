#include "rdma/verbs/tcp_connector.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace rdma::verbs {
namespace {

using Clock = std::chrono::steady_clock;
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the wire format is little-endian");

constexpr uint32_t kMagic = 0x31534452;  // "RDS1"
constexpr size_t kRequestBytes = 64;
constexpr size_t kReplyBytes = 256;
constexpr size_t kMessageOffset = 64;

enum MsgType : uint32_t { kConnect = 1, kArena = 2, kBarrier = 3, kDisconnect = 4 };

std::string ErrnoText(int e) { return absl::StrCat(std::strerror(e), " (errno ", e, ")"); }

template <typename T>
void Put(uint8_t* buf, size_t off, T v) {
  std::memcpy(buf + off, &v, sizeof v);
}
template <typename T>
T Get(const uint8_t* buf, size_t off) {
  T v;
  std::memcpy(&v, buf + off, sizeof v);
  return v;
}

absl::StatusOr<sockaddr_in> ToSockaddr(const TcpPeer& p) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(p.port);
  const std::string host = p.host == "localhost" ? "127.0.0.1" : p.host;
  if (inet_pton(AF_INET, host.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("'", p.host, "' is not a numeric IPv4 address"));
  }
  return a;
}

// Waits for `events` on fd until `deadline`. 1 ready, 0 timeout, -1 error.
int WaitFd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return 0;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r > 0) return 1;
    if (r < 0 && errno != EINTR) return -1;
  }
}

// Reads/writes exactly n bytes before `deadline` on a non-blocking socket.
absl::Status ReadFull(int fd, uint8_t* buf, size_t n, Clock::time_point deadline, absl::string_view what) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = recv(fd, buf + got, n - got, 0);
    if (r > 0) {
      got += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      return absl::UnavailableError(absl::StrCat(what, ": connection closed after ", got, " of ", n, " bytes"));
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(what, ": recv failed: ", ErrnoText(errno)));
    }
    if (WaitFd(fd, POLLIN, deadline) <= 0) {
      return absl::DeadlineExceededError(absl::StrCat(what, ": no reply in time (", got, " of ", n, " bytes)"));
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFull(int fd, const uint8_t* buf, size_t n, Clock::time_point deadline, absl::string_view what) {
  size_t put = 0;
  while (put < n) {
    const ssize_t r = send(fd, buf + put, n - put, MSG_NOSIGNAL);
    if (r > 0) {
      put += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat(what, ": send failed: ", ErrnoText(errno)));
    }
    if (WaitFd(fd, POLLOUT, deadline) <= 0) return absl::DeadlineExceededError(absl::StrCat(what, ": send timed out"));
  }
  return absl::OkStatus();
}

void SetNonBlocking(int fd) {
  const int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void EncodeEndpoint(uint8_t* b, size_t off, const QpEndpoint& ep) {
  Put<uint16_t>(b, off + 0, ep.node);
  Put<uint16_t>(b, off + 2, ep.lid);
  Put<uint32_t>(b, off + 4, ep.qp_num);
  Put<uint32_t>(b, off + 8, ep.psn);
  std::memcpy(b + off + 12, ep.gid.data(), 16);
}

QpEndpoint DecodeEndpoint(const uint8_t* b, size_t off) {
  QpEndpoint ep;
  ep.node = Get<uint16_t>(b, off + 0);
  ep.lid = Get<uint16_t>(b, off + 2);
  ep.qp_num = Get<uint32_t>(b, off + 4);
  ep.psn = Get<uint32_t>(b, off + 8);
  std::memcpy(ep.gid.data(), b + off + 12, 16);
  return ep;
}

}  // namespace

// Request: magic u32 | type u32 | from u16 | target u16 | endpoint (28 bytes
// at 12) | barrier id u64 at 40 | zero padding to 64.
struct TcpConnector::Request {
  uint32_t type = 0;
  NodeId from = 0;
  NodeId target = 0;
  QpEndpoint endpoint;
  uint64_t barrier_id = 0;

  void Encode(uint8_t* b) const {
    std::memset(b, 0, kRequestBytes);
    Put<uint32_t>(b, 0, kMagic);
    Put<uint32_t>(b, 4, type);
    Put<uint16_t>(b, 8, from);
    Put<uint16_t>(b, 10, target);
    EncodeEndpoint(b, 12, endpoint);
    Put<uint64_t>(b, 40, barrier_id);
  }
  static absl::StatusOr<Request> Decode(const uint8_t* b) {
    if (Get<uint32_t>(b, 0) != kMagic) return absl::InvalidArgumentError("bad magic (not an rdmads TcpConnector peer?)");
    Request r;
    r.type = Get<uint32_t>(b, 4);
    r.from = Get<uint16_t>(b, 8);
    r.target = Get<uint16_t>(b, 10);
    r.endpoint = DecodeEndpoint(b, 12);
    r.barrier_id = Get<uint64_t>(b, 40);
    return r;
  }
};

// Reply: magic u32 | status code u32 | endpoint (28 bytes at 8) | arena:
// node u16 at 36, rkey u32 at 40, base u64 at 44, length u64 at 52 | error
// message (NUL-terminated) from 64 to 256.
struct TcpConnector::Reply {
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string message;
  QpEndpoint endpoint;
  ArenaInfo arena;

  void Encode(uint8_t* b) const {
    std::memset(b, 0, kReplyBytes);
    Put<uint32_t>(b, 0, kMagic);
    Put<uint32_t>(b, 4, static_cast<uint32_t>(code));
    EncodeEndpoint(b, 8, endpoint);
    Put<uint16_t>(b, 36, arena.node);
    Put<uint32_t>(b, 40, arena.rkey);
    Put<uint64_t>(b, 44, arena.base);
    Put<uint64_t>(b, 52, arena.length);
    std::memcpy(b + kMessageOffset, message.data(), std::min(message.size(), kReplyBytes - kMessageOffset - 1));
  }
  static absl::StatusOr<Reply> Decode(const uint8_t* b) {
    if (Get<uint32_t>(b, 0) != kMagic) return absl::InvalidArgumentError("bad magic in reply");
    Reply r;
    r.code = static_cast<absl::StatusCode>(Get<uint32_t>(b, 4));
    r.endpoint = DecodeEndpoint(b, 8);
    r.arena.node = Get<uint16_t>(b, 36);
    r.arena.rkey = Get<uint32_t>(b, 40);
    r.arena.base = Get<uint64_t>(b, 44);
    r.arena.length = Get<uint64_t>(b, 52);
    const char* m = reinterpret_cast<const char*>(b + kMessageOffset);
    r.message.assign(m, strnlen(m, kReplyBytes - kMessageOffset));
    return r;
  }
};

absl::StatusOr<std::vector<TcpPeer>> ParseTcpPeers(absl::string_view list) {
  std::vector<TcpPeer> out;
  for (absl::string_view item : absl::StrSplit(list, ',', absl::SkipWhitespace())) {
    item = absl::StripAsciiWhitespace(item);
    const size_t colon = item.rfind(':');
    uint32_t port = 0;
    if (colon == absl::string_view::npos || !absl::SimpleAtoi(item.substr(colon + 1), &port) || port == 0 ||
        port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("peer '", item, "' is not host:port"));
    }
    TcpPeer p{std::string(item.substr(0, colon)), static_cast<uint16_t>(port)};
    if (auto a = ToSockaddr(p); !a.ok()) return a.status();
    out.push_back(std::move(p));
  }
  if (out.empty()) return absl::InvalidArgumentError("empty peer list");
  return out;
}

TcpConnector::TcpConnector(Node& local, const TcpConnectorOptions& options)
    : local_(local), options_(options), num_nodes_(static_cast<int>(options.peers.size())) {}

absl::StatusOr<std::unique_ptr<TcpConnector>> TcpConnector::Create(Node& local, const TcpConnectorOptions& options) {
  if (options.peers.empty() || options.peers.size() > 1024) {
    return absl::InvalidArgumentError("TcpConnector: peers must list 1..1024 nodes");
  }
  if (local.id() >= options.peers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TcpConnector: local node ", local.id(), " has no entry in the ", options.peers.size(),
                     "-node peer list"));
  }
  for (const TcpPeer& p : options.peers) {
    if (auto a = ToSockaddr(p); !a.ok()) return a.status();
  }
  std::unique_ptr<TcpConnector> c(new TcpConnector(local, options));
  const TcpPeer& me = options.peers[local.id()];
  auto addr = ToSockaddr(me);
  c->listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->listen_fd_ < 0) return absl::InternalError(absl::StrCat("socket: ", ErrnoText(errno)));
  const int one = 1;
  setsockopt(c->listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(c->listen_fd_, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0) {
    const int e = errno;
    close(c->listen_fd_);
    c->listen_fd_ = -1;
    return absl::UnavailableError(absl::StrCat("TcpConnector: node ", local.id(), " cannot listen on ", me.host, ":",
                                               me.port, ": ", ErrnoText(e),
                                               e == EADDRINUSE ? " (another process uses the port; pick another)"
                                               : e == EADDRNOTAVAIL ? " (no local interface has this address)"
                                                                    : ""));
  }
  if (listen(c->listen_fd_, 64) != 0) return absl::InternalError(absl::StrCat("listen: ", ErrnoText(errno)));
  sockaddr_in bound{};
  socklen_t len = sizeof bound;
  getsockname(c->listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  c->listen_port_ = ntohs(bound.sin_port);
  c->options_.peers[local.id()].port = c->listen_port_;
  SetNonBlocking(c->listen_fd_);
  if (pipe2(c->wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", ErrnoText(errno)));
  }
  c->server_ = std::thread([raw = c.get()] { raw->Serve(); });
  return c;
}

TcpConnector::~TcpConnector() {
  if (server_.joinable()) {
    const char x = 1;
    (void)!write(wake_pipe_[1], &x, 1);
    server_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  for (int fd : wake_pipe_) {
    if (fd >= 0) close(fd);
  }
}

void TcpConnector::SetPeer(NodeId node, const TcpPeer& peer) {
  std::lock_guard<std::mutex> l(mu_);
  if (node < options_.peers.size()) options_.peers[node] = peer;
}

TcpPeer TcpConnector::PeerAddress(NodeId node) const {
  std::lock_guard<std::mutex> l(mu_);
  return options_.peers[node];
}

void TcpConnector::Serve() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    const int r = poll(fds, 2, -1);
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    HandleClient(fd);
    close(fd);
  }
}

void TcpConnector::HandleClient(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const auto deadline = Clock::now() + options_.io_timeout;
  uint8_t in[kRequestBytes];
  if (!ReadFull(fd, in, sizeof in, deadline, "TcpConnector server").ok()) return;
  Reply reply;
  auto req = Request::Decode(in);
  if (!req.ok()) {
    reply.code = req.status().code();
    reply.message = std::string(req.status().message());
  } else if (req->type != kBarrier && req->target != local_.id()) {
    reply.code = absl::StatusCode::kFailedPrecondition;
    reply.message = absl::StrCat("request for node ", req->target, " reached node ", local_.id(),
                                 " (the peer lists of the processes disagree)");
  } else {
    switch (req->type) {
      case kConnect: {
        auto ep = local_.AcceptConnection(req->endpoint);
        if (ep.ok()) {
          reply.endpoint = *ep;
        } else {
          reply.code = ep.status().code();
          reply.message = std::string(ep.status().message());
        }
        break;
      }
      case kDisconnect:
        if (absl::Status st = local_.ReleaseConnection(req->endpoint.qp_num); !st.ok()) {
          reply.code = st.code();
          reply.message = std::string(st.message());
        }
        break;
      case kArena:
        reply.arena = local_.arena_info();
        break;
      case kBarrier: {
        std::lock_guard<std::mutex> l(mu_);
        arrived_[req->barrier_id].insert(req->from);
        barrier_cv_.notify_all();
        break;
      }
      default:
        reply.code = absl::StatusCode::kInvalidArgument;
        reply.message = absl::StrCat("unknown request type ", req->type);
    }
  }
  uint8_t out[kReplyBytes];
  reply.Encode(out);
  (void)WriteFull(fd, out, sizeof out, deadline, "TcpConnector server");
}

absl::StatusOr<TcpConnector::Reply> TcpConnector::Call(NodeId target, const Request& req,
                                                       Clock::time_point connect_deadline) const {
  const TcpPeer peer = PeerAddress(target);
  const std::string who = absl::StrCat("node ", target, " at ", peer.host, ":", peer.port);
  auto addr = ToSockaddr(peer);
  if (!addr.ok()) return addr.status();
  std::string last_error = "no attempt";
  int fd = -1;
  for (int attempt = 0;; ++attempt) {
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", ErrnoText(errno)));
    int rc = connect(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      // One attempt waits at most 2 s (a SYN lost while the peer boots).
      const auto attempt_deadline = std::min(connect_deadline, Clock::now() + std::chrono::seconds(2));
      const int w = WaitFd(fd, POLLOUT, attempt_deadline);
      if (w > 0) {
        socklen_t len = sizeof err;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    if (err == 0) break;
    close(fd);
    fd = -1;
    last_error = ErrnoText(err);
    const bool transient = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH ||
                           err == ENETUNREACH || err == ECONNRESET || err == EAGAIN;
    if (!transient) return absl::UnavailableError(absl::StrCat("TcpConnector: cannot connect to ", who, ": ", last_error));
    if (Clock::now() + std::chrono::milliseconds(100) >= connect_deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "TcpConnector: ", who, " did not accept a connection within ",
          std::chrono::duration_cast<std::chrono::milliseconds>(options_.connect_timeout).count(),
          " ms (", attempt + 1, " attempts, last error: ", last_error,
          "). Is its process running, listening on that address, and reachable?"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const auto io_deadline = Clock::now() + options_.io_timeout;
  uint8_t out[kRequestBytes];
  req.Encode(out);
  uint8_t in[kReplyBytes];
  const std::string what = absl::StrCat("TcpConnector: request to ", who);
  absl::Status st = WriteFull(fd, out, sizeof out, io_deadline, what);
  if (st.ok()) st = ReadFull(fd, in, sizeof in, io_deadline, what);
  close(fd);
  if (!st.ok()) return st;
  auto reply = Reply::Decode(in);
  if (!reply.ok()) return absl::DataLossError(absl::StrCat(what, ": ", reply.status().message()));
  if (reply->code != absl::StatusCode::kOk) {
    return absl::Status(reply->code, absl::StrCat(who, " refused: ", reply->message));
  }
  return reply;
}

absl::StatusOr<QpEndpoint> TcpConnector::Connect(NodeId target, const QpEndpoint& initiator) {
  if (target >= num_nodes_) {
    return absl::InvalidArgumentError(absl::StrCat("node ", target, " out of range (", num_nodes_, " nodes)"));
  }
  if (target == local_.id()) return local_.AcceptConnection(initiator);
  Request req;
  req.type = kConnect;
  req.from = local_.id();
  req.target = target;
  req.endpoint = initiator;
  auto reply = Call(target, req, Clock::now() + options_.connect_timeout);
  if (!reply.ok()) return reply.status();
  return reply->endpoint;
}

absl::Status TcpConnector::Disconnect(NodeId target, const QpEndpoint& responder) {
  if (target >= num_nodes_) {
    return absl::InvalidArgumentError(absl::StrCat("node ", target, " out of range (", num_nodes_, " nodes)"));
  }
  if (target == local_.id()) return local_.ReleaseConnection(responder.qp_num);
  Request req;
  req.type = kDisconnect;
  req.from = local_.id();
  req.target = target;
  req.endpoint = responder;
  // Advisory and called from Session teardown: a peer that is gone must not
  // hold the caller for the whole connect_timeout.
  auto reply = Call(target, req, Clock::now() + std::min<Clock::duration>(options_.connect_timeout, kDisconnectConnectTimeout));
  return reply.ok() ? absl::OkStatus() : reply.status();
}

absl::StatusOr<ArenaInfo> TcpConnector::Arena(NodeId node) const {
  if (node >= num_nodes_) {
    return absl::InvalidArgumentError(absl::StrCat("node ", node, " out of range (", num_nodes_, " nodes)"));
  }
  if (node == local_.id()) return local_.arena_info();
  {
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = arenas_.find(node); it != arenas_.end()) return it->second;
  }
  Request req;
  req.type = kArena;
  req.from = local_.id();
  req.target = node;
  auto reply = Call(node, req, Clock::now() + options_.connect_timeout);
  if (!reply.ok()) return reply.status();
  if (reply->arena.node != node) {
    return absl::FailedPreconditionError(absl::StrCat("asked node ", node, " for its arena, got node ",
                                                      reply->arena.node, "'s"));
  }
  std::lock_guard<std::mutex> l(mu_);
  arenas_[node] = reply->arena;
  return reply->arena;
}

absl::Status TcpConnector::Barrier(uint64_t id, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (int n = 0; n < num_nodes_; ++n) {
    if (n == local_.id()) continue;
    Request req;
    req.type = kBarrier;
    req.from = local_.id();
    req.target = static_cast<NodeId>(n);
    req.barrier_id = id;
    auto reply = Call(static_cast<NodeId>(n), req, deadline);
    if (!reply.ok()) {
      return absl::Status(reply.status().code(),
                          absl::StrCat("barrier ", id, ": ", reply.status().message()));
    }
  }
  std::unique_lock<std::mutex> l(mu_);
  auto all_here = [&] { return static_cast<int>(arrived_[id].size()) >= num_nodes_ - 1; };
  if (!barrier_cv_.wait_until(l, deadline, all_here)) {
    std::vector<int> missing;
    for (int n = 0; n < num_nodes_; ++n) {
      if (n != local_.id() && arrived_[id].count(static_cast<NodeId>(n)) == 0) missing.push_back(n);
    }
    return absl::DeadlineExceededError(absl::StrCat("barrier ", id, " on node ", local_.id(), ": nodes ",
                                                    absl::StrJoin(missing, ", "), " did not arrive within ",
                                                    timeout.count(), " ms"));
  }
  arrived_.erase(id);
  return absl::OkStatus();
}

}  // namespace rdma::verbs
