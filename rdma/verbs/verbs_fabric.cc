#include "rdma/verbs/verbs_fabric.h"

#include <infiniband/verbs.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rdma::verbs {

bool AnyVerbsDevice() {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) return false;
  bool active = false;
  for (int i = 0; i < n && !active; ++i) {
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) continue;
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) == 0) {
      for (int p = 1; p <= attr.phys_port_cnt && !active; ++p) {
        ibv_port_attr pa{};
        active = ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) == 0 && pa.state == IBV_PORT_ACTIVE;
      }
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  return active;
}

absl::StatusOr<std::unique_ptr<Fabric>> OpenVerbsFabric(const FabricOptions& options) {
  auto port = SelectPort(options);
  if (!port.ok()) return port.status();
  // Probe the inline limit once, on a throw-away context.
  auto probe = VerbsDevice::Open(0, *port, 0);
  if (!probe.ok()) return probe.status();
  const uint32_t max_inline = ProbeMaxInlineData((*probe)->context(), (*probe)->pd());
  return std::unique_ptr<Fabric>(new VerbsFabric(*port, max_inline));
}

absl::StatusOr<std::unique_ptr<Device>> VerbsFabric::OpenDevice(NodeId node) {
  auto d = VerbsDevice::Open(node, port_, max_inline_data_);
  if (!d.ok()) return d.status();
  return std::unique_ptr<Device>(std::move(*d));
}

}  // namespace rdma::verbs
