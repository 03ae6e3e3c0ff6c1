#ifndef RDMA_CM_INTERNAL_CM_UTIL_H_
#define RDMA_CM_INTERNAL_CM_UTIL_H_

// Small pieces of librdmacm plumbing shared by the connector's initiator and
// responder sides (rdma/cm/cm_connector.h). Internal.

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdma::cm::internal {

// "call: strerror(errno)".
std::string Errno(absl::string_view call);
// An IPv4 or IPv6 literal and a port; InvalidArgument naming RDMADS_RDMA_ADDR otherwise.
absl::StatusOr<sockaddr_storage> ToSockaddr(const std::string& ip, uint16_t port);
uint16_t PortOf(const sockaddr* sa);
// The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), or "".
std::string Ipv4OfGid(const std::array<uint8_t, 16>& g);
std::string GidText(const uint8_t* g);

// Waits until `deadline` for the next event on `ch`, which must be `want`
// (the caller acks it); any other event is an error naming `peer` and `step`
// (a reject carries the responder's reason, rdma/cm/handshake.h).
absl::StatusOr<rdma_cm_event*> Await(rdma_event_channel* ch, rdma_cm_event_type want,
                                     std::chrono::steady_clock::time_point deadline, absl::string_view peer,
                                     absl::string_view step);

struct ChannelDeleter {
  void operator()(rdma_event_channel* ch) const { rdma_destroy_event_channel(ch); }
};
using Channel = std::unique_ptr<rdma_event_channel, ChannelDeleter>;
absl::StatusOr<Channel> NewChannel(bool nonblocking);

}  // namespace rdma::cm::internal

#endif  // RDMA_CM_INTERNAL_CM_UTIL_H_
