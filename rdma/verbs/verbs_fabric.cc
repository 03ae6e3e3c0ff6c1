// Placeholder translation unit until the verbs backend lands (issue 4): the
// device probe is real; opening reports that the backend is not built yet.
#include "rdma/verbs/verbs_fabric.h"

#include <infiniband/verbs.h>

namespace rdma::verbs {

bool AnyVerbsDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return false;
  ibv_free_device_list(list);
  return n > 0;
}

absl::StatusOr<std::unique_ptr<Fabric>> OpenVerbsFabric(const FabricOptions&) {
  if (!AnyVerbsDevice()) {
    return absl::NotFoundError(
        "--fabric=verbs: no RDMA device found (ibv_get_device_list is empty). Use --fabric=soft, or run inside "
        "a Soft-RoCE guest: tools/rxe_vm/rxe_run -- <command>");
  }
  return absl::UnimplementedError("verbs backend not built yet");
}

}  // namespace rdma::verbs
