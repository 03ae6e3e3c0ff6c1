#ifndef RDMA_FABRIC_H_
#define RDMA_FABRIC_H_

// Fabric: a backend (the soft NIC, or rdma-core verbs) and the factory for its
// devices, one per node (docs/design.md §5, §6).
//
//   FabricOptions o;  o.kind = FabricKind::kAuto;  // verbs if a device exists
//   auto fabric = OpenFabric(o);
//   auto device = (*fabric)->OpenDevice(/*node=*/0);
//
// Errors: kVerbs with no usable device or port fails (NotFound or
// FailedPrecondition) with what was found and how to fix it.

#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "rdma/device.h"

namespace rdma {

enum class FabricKind { kSoft, kVerbs, kAuto };

// Parses "soft", "verbs" or "auto" (the --fabric flag).
absl::StatusOr<FabricKind> ParseFabricKind(absl::string_view s);
absl::string_view FabricKindName(FabricKind k);

struct FabricOptions {
  FabricKind kind = FabricKind::kAuto;
  // verbs: device name (e.g. "rxe0", "mlx5_0"); empty = first active device.
  std::string device;
  // verbs: 0 = auto (the first ACTIVE port); N >= 1 = exactly port N, and
  // opening fails if it is absent or not ACTIVE (never another port).
  int port = 0;
  int gid_index = -1;  // verbs: -1 = auto-detect a RoCE v2 GID
  // soft: latency added to every NIC operation (0 = none).
  std::chrono::nanoseconds soft_latency{0};
  // soft: copy READ/WRITE payloads one byte at a time, so an aligned 8-byte
  // word can tear against CPU accesses, as on Soft-RoCE (rxe) (see
  // SoftDeviceOptions::byte_granular_copies). Default off: docs/design.md §3.
  bool soft_byte_granular_copies = false;
};

// A backend: the factory for devices. One per process is typical. With the
// soft backend all devices opened from one Fabric are NICs on one simulated
// network, so several nodes can live in one process. With verbs, each
// OpenDevice opens the physical device again (a new context and PD).
class Fabric {
 public:
  virtual ~Fabric() = default;
  virtual FabricKind kind() const = 0;
  // Opens a device for node `node`.
  virtual absl::StatusOr<std::unique_ptr<Device>> OpenDevice(NodeId node) = 0;
};

// Opens the backend named by options.kind. kAuto picks verbs when an RDMA
// device exists and falls back to soft otherwise. kVerbs with no device fails
// with NotFound and says how to get one (Soft-RoCE, tools/rxe_vm).
absl::StatusOr<std::unique_ptr<Fabric>> OpenFabric(const FabricOptions& options);

}  // namespace rdma

#endif  // RDMA_FABRIC_H_
