// Prints what the verbs backend picks on this machine: device, port, GID,
// link layer, MTU and DeviceCaps. Exit 0 on success, 1 if OpenFabric fails.
// Usage: verbs_probe [--device=NAME] [--port=N] [--gid-index=N]
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "rdma/fabric.h"
#include "rdma/verbs/checks.h"
#include "rdma/verbs/flags.h"
#include "rdma/verbs/verbs_fabric.h"

int main(int argc, char** argv) {
  rdma::FabricOptions o;
  o.kind = rdma::FabricKind::kVerbs;
  rdma::verbs::DeviceFlags flags;
  absl::Status parsed = flags.Extract(&argc, argv);
  if (parsed.ok() && argc > 1) {
    if (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
      std::printf("verbs_probe [--device=NAME] [--port=N] [--gid-index=N]\n%s", rdma::verbs::kDeviceFlagsHelp);
      return 0;
    }
    parsed = absl::InvalidArgumentError(std::string("unknown argument '") + argv[1] + "' (see --help)");
  }
  if (parsed.ok()) parsed = flags.Apply(&o);
  if (!parsed.ok()) {
    std::fprintf(stderr, "verbs_probe: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  auto fabric = rdma::verbs::OpenVerbsFabric(o);
  if (!fabric.ok()) {
    std::fprintf(stderr, "OpenVerbsFabric: %s\n", std::string(fabric.status().ToString()).c_str());
    return 1;
  }
  auto* vf = static_cast<rdma::verbs::VerbsFabric*>(fabric->get());
  const rdma::verbs::PortInfo& p = vf->port();
  std::printf("device %s port %d link %s mtu %d gid_index %d gid %s (%s) lid %u\n", p.device.c_str(), p.port,
              p.ethernet ? "Ethernet" : "InfiniBand", 128 << p.active_mtu, p.gid_index,
              rdma::verbs::GidToString(p.gid.data()).c_str(), p.gid_type.c_str(), p.lid);
  auto dev = (*fabric)->OpenDevice(0);
  if (!dev.ok()) {
    std::fprintf(stderr, "OpenDevice: %s\n", std::string(dev.status().ToString()).c_str());
    return 1;
  }
  const rdma::DeviceCaps& c = (*dev)->caps();
  std::printf("atomic_scope %s, max_inline_data %u, max_send_wr %u, max_mr_size %llu\n",
              std::string(rdma::AtomicScopeName(c.atomic_scope)).c_str(), c.max_inline_data, c.max_send_wr,
              static_cast<unsigned long long>(c.max_mr_size));
  return 0;
}
