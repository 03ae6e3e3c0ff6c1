#ifndef RDMA_VERBS_VERBS_DEVICE_H_
#define RDMA_VERBS_VERBS_DEVICE_H_

// The rdma-core (libibverbs) implementation of rdma/device.h (docs/design.md §5).
//
//   VerbsDevice      ibv_context + ibv_pd, one per OpenDevice (nodes in one
//                    process are separate contexts meeting through loopback)
//   MemoryRegion     ibv_mr with exactly the requested access
//   CompletionQueue  ibv_cq + its own ibv_comp_channel (PollMode::kNotify)
//   QueuePair        RC ibv_qp, sq_sig_all = 0, send CQ = recv CQ
//
// Example (normally through rdma::OpenFabric and rdma::Node):
//   auto port = SelectPort(options);                 // device, port, GID
//   auto dev = VerbsDevice::Open(node, *port, inline_limit);
//
// Contract:
//  * QPs are connected by an out-of-band QpEndpoint exchange (an
//    rdma::Connector); Connect walks RESET -> INIT -> RTR -> RTS itself.
//  * Post, Poll and busy Wait allocate nothing and take no lock; a chain is one
//    ibv_post_send. Signaled, inline and fenced only where the WR says so.
//  * Post refuses, posting nothing: a QP in RESET or whose error completion was
//    polled (FailedPrecondition); an atomic that is not 8 bytes at an aligned
//    address, or bad inline data (InvalidArgument); a chain longer than the
//    free send-queue slots (ResourceExhausted), as the soft NIC does.
//  * Completions carry the caller's wr_id, opcode and byte count; a destroyed
//    QP's leftovers are dropped, a Reset QP's are delivered as flushes.
//  * A dead peer host is reported as kRetryExceeded after ~7.5 s (ACK timeout
//    18, 6 retries), rxe included; a peer process that exits is reported
//    sooner by rdma_cm (rdma/cm/cm_connector.h).
//  * Thread safety: Post, Connect and Reset of one QP from one thread at a
//    time; Poll/Wait of a CQ may run on another (one waiter per CQ in kNotify).
//    Destroy QPs before their CQ, and everything before the device.

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
