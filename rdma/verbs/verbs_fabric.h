#ifndef RDMA_VERBS_VERBS_FABRIC_H_
#define RDMA_VERBS_VERBS_FABRIC_H_

// The rdma-core backend's entry points (called by rdma/fabric.cc). See
// rdma/verbs/verbs_device.h for how the verbs objects map onto rdma/device.h,
// and docs/design.md §5 for why QPs are connected out of band, not by rdma_cm.

#include <memory>

#include "absl/status/statusor.h"
#include "rdma/fabric.h"
#include "rdma/verbs/verbs_device.h"

namespace rdma::verbs {

// True when libibverbs lists at least one device with an active port.
bool AnyVerbsDevice();

// The rdma-core backend. Chooses the device, port and GID once (see
// SelectPort) and probes the inline-data limit; every OpenDevice then opens
// that device again (a new context and PD). NotFound with how to get a device
// ("use --fabric=soft or run inside tools/rxe_vm/rxe_run") when there is none.
absl::StatusOr<std::unique_ptr<Fabric>> OpenVerbsFabric(const FabricOptions& options);

class VerbsFabric final : public Fabric {
 public:
  VerbsFabric(const PortInfo& port, uint32_t max_inline_data) : port_(port), max_inline_data_(max_inline_data) {}
  FabricKind kind() const override { return FabricKind::kVerbs; }
  absl::StatusOr<std::unique_ptr<Device>> OpenDevice(NodeId node) override;

  const PortInfo& port() const { return port_; }

 private:
  PortInfo port_;
  uint32_t max_inline_data_;
};

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_VERBS_FABRIC_H_
