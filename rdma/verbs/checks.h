#ifndef RDMA_VERBS_CHECKS_H_
#define RDMA_VERBS_CHECKS_H_

// Start-up checks and pure mappings of the verbs backend. None of these needs
// a device, so they are unit-tested on the host too.
//
// MemlockStatus is backend-neutral (it looks only at the process's rlimit).
// The atomics check, RequireAtomics, is backend-neutral too and lives with
// DeviceCaps in rdma/device.h.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdma/completion.h"
#include "rdma/device.h"

namespace rdma::verbs {

// The RLIMIT_MEMLOCK check behind memory registration. OK when `limit_bytes`
// (RLIM_INFINITY = unlimited) covers `requested_bytes`; otherwise
// ResourceExhausted that says the limit, the size, and how to raise it
// (`ulimit -l unlimited`, /etc/security/limits.conf memlock, LimitMEMLOCK= for
// systemd units, or CAP_IPC_LOCK).
absl::Status MemlockStatus(uint64_t requested_bytes, uint64_t limit_bytes);
// The same against this process's current soft limit; always OK for a
// process with CAP_IPC_LOCK (the kernel exempts it). Call it at start-up with
// the total you are about to register (arena + per-thread scratch):
// VerbsDevice::RegisterMemory does, with everything the process has
// registered so far plus the new region, before ibv_reg_mr.
absl::Status CheckMemlockLimit(uint64_t requested_bytes);
// True when this process has CAP_IPC_LOCK in its effective set.
bool HasCapIpcLock();

// ibv_wc_status (as int, so this header does not need <infiniband/verbs.h>)
// onto the backend-neutral CompletionStatus.
CompletionStatus MapWcStatus(int ibv_wc_status);

// rdma::Access bits -> ibv_access_flags. InvalidArgument for unknown bits or a
// combination verbs rejects (remote write/atomic without local write).
absl::Status AccessToIbvFlags(uint32_t access, int* ibv_flags);

// Formats a 16-byte GID as verbs tools print it ("fe80:0000:...").
std::string GidToString(const uint8_t gid[16]);
// True for an IPv4-mapped GID (::ffff:a.b.c.d) with a non-zero address.
bool IsIpv4MappedGid(const uint8_t gid[16]);

// One entry of a RoCE port's GID table, as ibv_query_gid_table or sysfs
// (ports/N/gids, gid_attrs/types) report it.
struct GidEntry {
  int index = -1;
  std::array<uint8_t, 16> gid{};
  // "RoCE v2", "RoCE v1" (ibv_gid_type names) or sysfs's "IB/RoCE v1";
  // matched case-insensitively on "v2".
  std::string type;
};

// The GID choice for a RoCE port, pure so it is unit-tested on the host with
// other NICs' tables. All-zero entries are unused slots and never chosen.
//  - requested_index >= 0: exactly that entry (any type: the user asked for
//    it), NotFound naming the valid indices if it is absent or zero.
//  - requested_index < 0 (auto): the lowest-index RoCE v2 entry holding an
//    IPv4-mapped address (routable over UDP/IPv4 like every peer's), else a
//    RoCE v2 global IPv6, else a RoCE v2 IPv6 link-local. ConnectX lists
//    every address twice (v1 and v2), rxe only as v2.
//  - auto with only RoCE v1 entries: FailedPrecondition. RoCE v1 is raw
//    Ethernet (not routable, and peers choosing v2 would never talk to it), so
//    it is never picked silently; pass --gid-index to use one anyway.
//  - no valid entry: FailedPrecondition (the netdev has no address).
// `where` names the port in messages ("mlx5_0 port 1").
absl::StatusOr<GidEntry> PickGid(const std::vector<GidEntry>& table, int requested_index,
                                 absl::string_view where);

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_CHECKS_H_
