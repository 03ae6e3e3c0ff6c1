#ifndef RDMA_VERBS_FLAGS_H_
#define RDMA_VERBS_FLAGS_H_

// The verbs device selection flags shared by every program that opens a
// fabric (cluster_demo, lock_bench, transport_latency, hash_map_bench,
// verbs_probe): --device=NAME --port=N --gid-index=N, onto
// FabricOptions::device/port/gid_index. One parser so the spelling, the
// ranges and the messages are the same everywhere.

#include <string>

#include "absl/status/status.h"
#include "rdma/fabric.h"

namespace rdma::verbs {

// For each program's --help (one line per flag, two-space indent).
inline constexpr char kDeviceFlagsHelp[] =
    "  --device=NAME      verbs: RDMA device (rxe0, mlx5_0, ...); default: the first with an active port\n"
    "  --port=N           verbs: port number (1..255), exactly that port, an error if it is down or absent;\n"
    "                     default auto: the first active port\n"
    "  --gid-index=N      verbs (RoCE): GID table index (0..255); default auto: a RoCE v2 GID with an IPv4\n"
    "                     address (see `show_gids` / `ibv_devinfo -v`)\n";

struct DeviceFlags {
  std::string device;  // "" = auto
  int port = 0;        // 0 = auto (FabricOptions::port semantics)
  int gid_index = -1;  // -1 = auto
  bool given = false;  // any of the three appeared on the command line

  // Removes every --device/--port/--gid-index from argv ("--flag=V" and
  // "--flag V"; "auto" is accepted for --port and --gid-index) and parses
  // them into *this, so the program's own parser (boost::program_options,
  // Google Benchmark) never sees them. *argc is updated and argv[*argc] stays
  // nullptr. InvalidArgument naming the flag for a missing or bad value; a
  // later occurrence overrides an earlier one.
  absl::Status Extract(int* argc, char** argv);

  // Copies the selection into `options`. When any flag was given: --fabric=auto
  // becomes verbs (an explicit device must not silently fall back to the soft
  // fabric), and --fabric=soft is InvalidArgument (the flags would be ignored).
  // Call after options->kind is set from --fabric.
  absl::Status Apply(FabricOptions* options) const;
};

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_FLAGS_H_
