// Port and GID selection for the verbs fabric (SelectPort in verbs_device.h).

#include <infiniband/verbs.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rdma/verbs/checks.h"
#include "rdma/verbs/internal/completion_queue.h"
#include "rdma/verbs/verbs_device.h"

namespace rdma::verbs {

namespace {

std::string SysfsGidType(const std::string& dev, int port, int index) {
  std::ifstream f(absl::StrCat("/sys/class/infiniband/", dev, "/ports/", port, "/gid_attrs/types/", index));
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string GidTypeName(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
  }
  return "unknown";
}

// The GID table of `port` with types (zero entries included; PickGid skips them).
std::vector<GidEntry> ListGids(ibv_context* ctx, const std::string& dev, int port, int table_len) {
  std::vector<GidEntry> out;
  // One call for all valid GIDs (the per-index path reads sysfs, slow under
  // emulation). Keep the buffer under 64 KiB: the ioctl attribute length is
  // 16 bits and libibverbs 44 crashes on a larger one.
  std::vector<ibv_gid_entry> entries(1024);
  const ssize_t got = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  if (got >= 0) {
    for (ssize_t i = 0; i < got; ++i) {
      const ibv_gid_entry& e = entries[i];
      if (static_cast<int>(e.port_num) != port) continue;
      GidEntry c;
      c.index = static_cast<int>(e.gid_index);
      std::memcpy(c.gid.data(), e.gid.raw, 16);
      c.type = GidTypeName(e.gid_type);
      out.push_back(c);
    }
    return out;
  }
  for (int i = 0; i < table_len; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port), i, &g) != 0) continue;
    GidEntry c;
    c.index = i;
    std::memcpy(c.gid.data(), g.raw, 16);
    c.type = SysfsGidType(dev, port, i);
    if (c.type.empty()) c.type = "RoCE v1";
    out.push_back(c);
  }
  return out;
}

const char* PortStateName(ibv_port_state s) { return ibv_port_state_str(s); }

absl::Status ResolveGid(ibv_context* ctx, const ibv_port_attr& pa, const FabricOptions& options, PortInfo* info) {
  info->lid = pa.lid;
  info->active_mtu = pa.active_mtu;
  info->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (!info->ethernet) {
    // InfiniBand: LID-routed within the subnet, no GRH.
    info->gid_index = -1;
    info->gid_type = "IB";
    ibv_gid g{};
    if (ibv_query_gid(ctx, static_cast<uint8_t>(info->port), 0, &g) == 0) std::memcpy(info->gid.data(), g.raw, 16);
    return absl::OkStatus();
  }
  auto picked = PickGid(ListGids(ctx, info->device, info->port, pa.gid_tbl_len), options.gid_index,
                        absl::StrCat(info->device, " port ", info->port));
  if (!picked.ok()) return picked.status();
  info->gid_index = picked->index;
  info->gid = picked->gid;
  info->gid_type = picked->type;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PortInfo> SelectPort(const FabricOptions& options) {
  errno = 0;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  const int list_errno = errno;
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    std::string why = list == nullptr ? absl::StrCat(" (ibv_get_device_list: ", ErrnoText(list_errno),
                                                     list_errno == ENOSYS ? "; this kernel has no RDMA support" : "",
                                                     ")")
                                      : " (ibv_get_device_list is empty)";
    return absl::NotFoundError(absl::StrCat(
        "no RDMA device", why, "; use --fabric=soft or run inside tools/rxe_vm/rxe_run (Soft-RoCE guest)"));
  }
  std::vector<std::string> names;
  std::vector<std::string> problems;
  absl::StatusOr<PortInfo> result = absl::NotFoundError("");
  bool done = false;
  for (int i = 0; i < n && !done; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    names.push_back(name);
    if (!options.device.empty() && name != options.device) continue;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      problems.push_back(absl::StrCat(name, ": ibv_open_device: ", ErrnoText(errno)));
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) != 0) {
      problems.push_back(absl::StrCat(name, ": ibv_query_device: ", ErrnoText(errno)));
      ibv_close_device(ctx);
      continue;
    }
    // An explicit port is the only candidate: traffic on another port than
    // the one asked for (another link, subnet or switch) would be a silent
    // misconfiguration, so a missing or down port is an error.
    const bool explicit_port = options.port > 0;
    std::vector<int> ports;
    if (explicit_port) {
      if (options.port > attr.phys_port_cnt) {
        problems.push_back(absl::StrCat(name, " has no port ", options.port, " (it has ", int{attr.phys_port_cnt},
                                        attr.phys_port_cnt == 1 ? " port" : " ports", ")"));
      } else {
        ports.push_back(options.port);
      }
    } else {
      for (int p = 1; p <= attr.phys_port_cnt; ++p) ports.push_back(p);
    }
    for (int p : ports) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0) {
        problems.push_back(absl::StrCat(name, " port ", p, ": ibv_query_port: ", ErrnoText(errno)));
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        problems.push_back(absl::StrCat(name, " port ", p, " is ", PortStateName(pa.state), " (not ACTIVE)"));
        continue;
      }
      PortInfo info;
      info.device = name;
      info.port = p;
      absl::Status st = ResolveGid(ctx, pa, options, &info);
      if (!st.ok()) {
        problems.push_back(std::string(st.message()));
        if (!options.device.empty()) {
          result = st;
          done = true;
          break;
        }
        continue;
      }
      result = info;
      done = true;
      break;
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (done) return result;
  if (!options.device.empty() &&
      std::find(names.begin(), names.end(), options.device) == names.end()) {
    return absl::NotFoundError(absl::StrCat("no RDMA device named '", options.device,
                                            "' (found: ", absl::StrJoin(names, ", "), ")"));
  }
  if (options.port > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the requested RDMA port ", options.port, " is not usable: ", absl::StrJoin(problems, "; "),
        ". Pick an ACTIVE port with --port=N (see `ibv_devinfo`), or --port=auto for the first active one"));
  }
  return absl::FailedPreconditionError(absl::StrCat("no usable RDMA port: ", absl::StrJoin(problems, "; "),
                                                    ". Bring a port up (for Soft-RoCE: the netdev must be up)"));
}

}  // namespace rdma::verbs
