#ifndef RDMA_VERBS_VERBS_DEVICE_H_
#define RDMA_VERBS_VERBS_DEVICE_H_

// The rdma-core (libibverbs) implementation of rdma/device.h.
//
// Objects and their verbs counterparts:
//   VerbsDevice        ibv_context + ibv_pd (one per OpenDevice: every node
//                      opens the physical device again, so several nodes in
//                      one process are separate contexts whose RC QPs meet
//                      through the device's loopback)
//   MemoryRegion       ibv_mr, registered with exactly the requested access
//   CompletionQueue    ibv_cq + its own ibv_comp_channel (for PollMode::kNotify)
//   QueuePair          RC ibv_qp, sq_sig_all = 0, send CQ = recv CQ
//
// Connection bootstrap. QPs are connected by an out-of-band exchange of
// rdma::QpEndpoint (QP number, PSN, GID, LID) done above this layer by an
// rdma::Connector: in-process a direct call (rdma::Cluster), across processes
// a small TCP request/response (rdma/verbs/tcp_connector.h). QueuePair::Connect
// then walks the QP RESET -> INIT -> RTR -> RTS itself with ibv_modify_qp. We
// do not use rdma_cm because (1) the transport interface is backend-neutral and
// the soft backend has no rdma_cm, so the exchange must live above the backend
// anyway; (2) rdma_cm binds a QP to an rdma_cm_id and an IP route, which does
// not fit loopback QPs between several contexts in one process nor Reset() +
// Connect() of the same QP to a new peer; (3) its event channel would add a
// hidden thread or blocking calls, while the explicit exchange is a few dozen
// bytes we fully control (timeouts, error messages) and works unchanged on
// RoCE (GID) and InfiniBand (LID). librdmacm stays linked for tools only.
//
// Hot path (Post, Poll, busy Wait): no allocation, no locks. Each QP
// preallocates its ibv_send_wr/ibv_sge arrays (sized max_send_wr) and a ring
// of send slots on its first Post; a chain becomes one linked ibv_send_wr list
// and one ibv_post_send (one doorbell). IBV_SEND_SIGNALED only where
// WorkRequest::signaled, IBV_SEND_INLINE where inline_data, IBV_SEND_FENCE
// where fence.
//
// Completions. The verbs wr_id of every posted WR is an internal tag (QP slot
// in the CQ's table, a generation, a sequence number). Polling turns it back
// into the caller's wr_id, the opcode (verbs leaves wc.opcode undefined for
// error completions) and the byte count, and frees the send-queue slots of
// every earlier WR of that QP (so Post can report ResourceExhausted exactly
// like the soft NIC). Completions left in a CQ by a QP that was destroyed are
// dropped; those of a QP that was Reset are still delivered (as flushes).
//
// QP state. Post refuses (FailedPrecondition, posting nothing) when the QP is
// in RESET or when an error completion of it has been polled; verbs itself
// would accept the post and flush it. If nobody has polled the error yet the
// post is accepted and the WRs complete as kFlushed. state() asks the device
// (ibv_query_qp), so it also sees an error nobody polled.
//
// Post also refuses (InvalidArgument, nothing posted) an atomic that is not 8
// bytes at an 8-byte aligned remote address (rxe would fail ibv_post_send,
// mlx5 would complete it with an error), inline data on anything but a WRITE
// or beyond the QP's max_inline_data, and a chain longer than the free
// send-queue slots (ResourceExhausted).
//
// Dead peers. QPs use an ACK timeout of ~1.07 s and 7 retries, so an RNIC
// reports kRetryExceeded about 8.6 s after its peer vanished (inside the
// Session's default 10 s completion timeout). Soft-RoCE on Linux
// 6.1 (the rxe_run guest kernel) never reports it: the WR simply stays
// outstanding, and the caller's own completion timeout (SessionOptions::
// completion_timeout) is what fires. Reset() flushes such a WR either way.
//
// Thread safety: Post, Connect and Reset of one QP by one thread at a time;
// Poll/Wait of one CQ may run on another thread (one waiter per CQ in
// kNotify mode). Destroy QPs before their CQ, and everything before the device.

#include <infiniband/verbs.h>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rdma/device.h"
#include "rdma/fabric.h"

namespace rdma::verbs {

// Where a verbs device's traffic goes: the device, port and GID chosen at
// fabric open (FabricOptions::device/port/gid_index) and what the port says.
struct PortInfo {
  std::string device;         // e.g. "rxe0", "mlx5_0"
  int port = 1;
  int gid_index = -1;         // -1 for InfiniBand (LID-routed, no GRH)
  std::array<uint8_t, 16> gid{};
  std::string gid_type;       // "RoCE v2", "RoCE v1", "IB"
  bool ethernet = true;       // link layer Ethernet (RoCE) vs InfiniBand
  uint16_t lid = 0;
  ibv_mtu active_mtu = IBV_MTU_1024;
};

class VerbsCompletionQueue;

class VerbsDevice final : public Device {
 public:
  // Opens `port.device` for node `node`: a new context and PD.
  static absl::StatusOr<std::unique_ptr<VerbsDevice>> Open(NodeId node, const PortInfo& port,
                                                           uint32_t max_inline_data);
  ~VerbsDevice() override;

  std::string name() const override { return port_.device; }
  const DeviceCaps& caps() const override { return caps_; }
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t length,
                                                               uint32_t access) override;
  absl::StatusOr<std::unique_ptr<CompletionQueue>> CreateCompletionQueue(int depth) override;
  absl::StatusOr<std::unique_ptr<QueuePair>> CreateQueuePair(CompletionQueue* send_cq,
                                                             const QpOptions& options) override;

  NodeId node() const { return node_; }
  const PortInfo& port() const { return port_; }
  const ibv_device_attr& attr() const { return attr_; }
  ibv_context* context() const { return ctx_; }
  ibv_pd* pd() const { return pd_; }

 private:
  VerbsDevice(NodeId node, const PortInfo& port) : node_(node), port_(port) {}

  const NodeId node_;
  const PortInfo port_;
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_device_attr attr_{};
  DeviceCaps caps_;
};

// The VerbsDevice behind `device`, or nullptr for another backend.
VerbsDevice* AsVerbsDevice(Device& device);

// Picks the device and port (FabricOptions::device, empty = the first device
// with an ACTIVE port; FabricOptions::port 0 = the first ACTIVE port, N =
// exactly port N, FailedPrecondition if it is absent or down) and the GID
// (FabricOptions::gid_index; -1 = auto, see PickGid in checks.h: a RoCE v2
// GID holding an IPv4-mapped address, else another RoCE v2 GID, never RoCE v1
// silently; InfiniBand uses the LID).
absl::StatusOr<PortInfo> SelectPort(const FabricOptions& options);

// The largest max_inline_data (<= 1024) an RC QP on `ctx` can be created with,
// found by creating QPs. 0 when inline data is unsupported.
uint32_t ProbeMaxInlineData(ibv_context* ctx, ibv_pd* pd);

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_VERBS_DEVICE_H_
