// Prints what the verbs backend picks on this machine: device, port, GID,
// link layer, MTU and DeviceCaps. Exit 0 on success, 1 if OpenFabric fails.
// Usage: verbs_probe [device] [gid_index]
#include <cstdio>
#include <cstdlib>

#include "rdma/fabric.h"
#include "rdma/verbs/checks.h"
#include "rdma/verbs/verbs_fabric.h"

int main(int argc, char** argv) {
  rdma::FabricOptions o;
  o.kind = rdma::FabricKind::kVerbs;
  if (argc > 1) o.device = argv[1];
  if (argc > 2) o.gid_index = std::atoi(argv[2]);
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
