#ifndef RDMA_CM_HANDSHAKE_H_
#define RDMA_CM_HANDSHAKE_H_

// The bytes CmConnector (rdma/cm/cm_connector.h) exchanges: a node's card,
// swapped through the Bootstrap before any connection, and the private data
// of rdma_cm's connect, accept and reject (docs/design.md §5, "Connecting").
// Pure encoding and checks, no librdmacm, so the state machine's decisions
// are testable on any machine.
//
//   NodeCard card{.node = 1, .incarnation = NewIncarnation(), ...};
//   std::string blob = EncodeCard(card);            // into Bootstrap::AllGather
//   absl::StatusOr<NodeCard> back = DecodeCard(blob);
//
//   ConnectRequest req = ...;                       // initiator side
//   auto wire = EncodeRequest(req);                 // <= 56 bytes (CM limit)
//   absl::Status ok = CheckRequest(*DecodeRequest(wire), expected);
//
// Every message starts with magic 'RDCM' and a version; a mismatch is a clear
// InvalidArgument ("another build or another program"), never a connection.
// A request names the job (a hash of Bootstrap::job()), both nodes and both
// incarnations: a process of another job, a wrong peer, or a restarted
// process is refused by CheckRequest with FailedPrecondition saying which.
// Integers are little-endian on the wire.

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdma/device.h"
#include "rdma/node.h"

namespace rdma::cm {

inline constexpr uint32_t kMagic = 0x4d434452;  // "RDCM"
inline constexpr uint16_t kVersion = 1;
inline constexpr size_t kMaxConnectPrivateData = 56;  // RoCE/IB REQ limit via rdma_cm
inline constexpr size_t kMaxAcceptPrivateData = 196;
inline constexpr size_t kMaxRejectPrivateData = 148;

// FNV-1a of the job's name: what a request carries to say which job it is.
uint64_t JobHash(absl::string_view job);
// A fresh random number per process start (never 0).
uint64_t NewIncarnation();

// What every node publishes through the bootstrap.
struct NodeCard {
  NodeId node = 0;
  uint64_t job_hash = 0;
  uint64_t incarnation = 0;
  std::string address;  // where its rdma_cm listener is bound (IP literal)
  uint16_t cm_port = 0;
  ArenaInfo arena;
};
std::string EncodeCard(const NodeCard& card);
absl::StatusOr<NodeCard> DecodeCard(absl::string_view blob);

enum class ConnectionKind : uint8_t {
  kControl = 1,  // one per pair of nodes, no QP: its loss means the peer is gone
  kData = 2,     // a session's QP to the target's responder QP
};

// Connect private data. The initiator's GID is not in it: the responder takes
// it from rdma_cm's route (rdma_init_qp_attr), as the initiator takes the
// responder's from its own route resolution.
struct ConnectRequest {
  ConnectionKind kind = ConnectionKind::kData;
  NodeId from = 0;
  NodeId to = 0;
  uint64_t job_hash = 0;
  uint64_t from_incarnation = 0;
  uint64_t to_incarnation = 0;  // the target's, as its card said
  uint32_t qp_num = 0;          // kData: the initiator's QP
  uint32_t psn = 0;
  uint16_t lid = 0;
};
std::string EncodeRequest(const ConnectRequest& r);
absl::StatusOr<ConnectRequest> DecodeRequest(absl::string_view bytes);

// What the responder knows when a request arrives.
struct ResponderView {
  NodeId self = 0;
  uint64_t job_hash = 0;
  uint64_t incarnation = 0;
  // The initiator's incarnation as its card said; 0 if `from` is out of range.
  uint64_t card_incarnation_of_from = 0;
  int num_nodes = 0;
};
// OK, or the reason to refuse: FailedPrecondition naming the job, node or
// incarnation at fault (the initiator gets this text in the reject).
absl::Status CheckRequest(const ConnectRequest& r, const ResponderView& me);

// Accept private data: the responder's QP and arena, and who answered.
struct AcceptReply {
  NodeId node = 0;
  uint64_t incarnation = 0;
  QpEndpoint responder;  // responder.node == node
  ArenaInfo arena;
};
std::string EncodeAccept(const AcceptReply& a);
absl::StatusOr<AcceptReply> DecodeAccept(absl::string_view bytes);
// The initiator's check of a reply against the target's card.
absl::Status CheckAccept(const AcceptReply& a, const NodeCard& target);

// Reject private data: a status code and a message (cut to fit).
std::string EncodeReject(const absl::Status& why);
// The refusal as the responder stated it, or Unavailable when the bytes are
// not ours (a reject by the kernel: nobody listening, or a timeout).
absl::Status DecodeReject(absl::string_view bytes, absl::string_view peer);
// Whether `bytes` are a reject this protocol wrote (else the CM's own).
bool IsOurReject(absl::string_view bytes);

}  // namespace rdma::cm

#endif  // RDMA_CM_HANDSHAKE_H_
