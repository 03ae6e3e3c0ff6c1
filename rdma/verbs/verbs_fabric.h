#ifndef RDMA_VERBS_VERBS_FABRIC_H_
#define RDMA_VERBS_VERBS_FABRIC_H_

#include <memory>

#include "absl/status/statusor.h"
#include "rdma/fabric.h"

namespace rdma::verbs {

// True when libibverbs lists at least one device with an active port.
bool AnyVerbsDevice();

// The rdma-core backend. NotFound (with how to get a device) when there is none.
absl::StatusOr<std::unique_ptr<Fabric>> OpenVerbsFabric(const FabricOptions& options);

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_VERBS_FABRIC_H_
