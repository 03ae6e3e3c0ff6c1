#include "rdma/fabric.h"

#include "absl/strings/str_cat.h"
#include "rdma/soft/soft_nic.h"
#include "rdma/verbs/verbs_fabric.h"

namespace rdma {

absl::StatusOr<FabricKind> ParseFabricKind(absl::string_view s) {
  if (s == "soft") return FabricKind::kSoft;
  if (s == "verbs") return FabricKind::kVerbs;
  if (s == "auto") return FabricKind::kAuto;
  return absl::InvalidArgumentError(absl::StrCat("unknown fabric '", s, "' (expected soft, verbs or auto)"));
}

absl::string_view FabricKindName(FabricKind k) {
  switch (k) {
    case FabricKind::kSoft: return "soft";
    case FabricKind::kVerbs: return "verbs";
    case FabricKind::kAuto: return "auto";
  }
  return "?";
}

absl::string_view AtomicScopeName(DeviceCaps::AtomicScope s) {
  switch (s) {
    case DeviceCaps::AtomicScope::kNone: return "none";
    case DeviceCaps::AtomicScope::kHca: return "HCA (NIC atomics are not atomic with CPU atomics)";
    case DeviceCaps::AtomicScope::kGlobal: return "global";
  }
  return "?";
}

absl::Status RequireAtomics(const DeviceCaps& caps, bool need_global, absl::string_view device_name) {
  switch (caps.atomic_scope) {
    case DeviceCaps::AtomicScope::kNone:
      return absl::FailedPreconditionError(absl::StrCat(
          device_name,
          " reports atomic_cap=NONE (IBV_ATOMIC_NONE): it cannot execute RDMA compare-and-swap or fetch-and-add, "
          "which the locks and structures need. Use an RNIC with atomics (ConnectX reports IBV_ATOMIC_HCA; "
          "so does Soft-RoCE, e.g. inside tools/rxe_vm/rxe_run), or --fabric=soft"));
    case DeviceCaps::AtomicScope::kHca:
      if (need_global) {
        return absl::FailedPreconditionError(absl::StrCat(
            device_name,
            " reports atomic_cap = IBV_ATOMIC_HCA: its atomics are atomic only among NIC operations on this "
            "device, not with CPU atomics on the same word. Give every word one RMW domain (docs/design.md §3: NIC-RMW "
            "words are updated through loopback RDMA) instead of requiring IBV_ATOMIC_GLOB"));
      }
      return absl::OkStatus();
    case DeviceCaps::AtomicScope::kGlobal:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

namespace {

soft::SoftDeviceOptions SoftOptionsOf(const FabricOptions& options) {
  soft::SoftDeviceOptions o;
  o.latency = options.soft_latency;
  o.byte_granular_copies = options.soft_byte_granular_copies;
  return o;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Fabric>> OpenFabric(const FabricOptions& options) {
  switch (options.kind) {
    case FabricKind::kSoft:
      return std::unique_ptr<Fabric>(new soft::SoftFabric(SoftOptionsOf(options)));
    case FabricKind::kVerbs:
      return verbs::OpenVerbsFabric(options);
    case FabricKind::kAuto: {
      if (verbs::AnyVerbsDevice()) return verbs::OpenVerbsFabric(options);
      return std::unique_ptr<Fabric>(new soft::SoftFabric(SoftOptionsOf(options)));
    }
  }
  return absl::InvalidArgumentError("bad fabric kind");
}

}  // namespace rdma
