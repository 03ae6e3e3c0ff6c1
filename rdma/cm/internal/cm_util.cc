#include "rdma/cm/internal/cm_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "rdma/cm/handshake.h"

namespace rdma::cm::internal {

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
      if (!IsOurReject(absl::string_view(static_cast<const char*>(ev->param.conn.private_data),
                                         ev->param.conn.private_data_len))) {  // the CM's own: say its reason
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

}  // namespace rdma::cm::internal
