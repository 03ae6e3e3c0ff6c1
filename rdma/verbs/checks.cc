#include "rdma/verbs/checks.h"

#include <infiniband/verbs.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace rdma::verbs {

namespace {
std::string Bytes(uint64_t n) {
  if (n >= (uint64_t{1} << 30) && n % (uint64_t{1} << 30) == 0) return absl::StrCat(n >> 30, " GiB");
  if (n >= (uint64_t{1} << 20) && n % (uint64_t{1} << 20) == 0) return absl::StrCat(n >> 20, " MiB");
  if (n >= 1024 && n % 1024 == 0) return absl::StrCat(n >> 10, " KiB");
  return absl::StrCat(n, " bytes");
}
}  // namespace

absl::Status MemlockStatus(uint64_t requested_bytes, uint64_t limit_bytes) {
  if (limit_bytes == static_cast<uint64_t>(RLIM_INFINITY) || requested_bytes <= limit_bytes) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "cannot register ", Bytes(requested_bytes), " of RDMA memory: the locked-memory limit RLIMIT_MEMLOCK is ",
      Bytes(limit_bytes),
      " (registered memory is pinned and counts against it). Raise it: `ulimit -l unlimited` in the shell "
      "that starts the process (needs a hard limit that allows it), or a `* - memlock unlimited` line in "
      "/etc/security/limits.conf (log in again), or LimitMEMLOCK=infinity in the systemd unit; a process "
      "with CAP_IPC_LOCK is exempt"));
}

bool HasCapIpcLock() {
  __user_cap_header_struct h{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct d[2] = {};
  if (syscall(SYS_capget, &h, d) != 0) return false;
  return (d[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32))) != 0;
}

absl::Status CheckMemlockLimit(uint64_t requested_bytes) {
  // The kernel does not apply RLIMIT_MEMLOCK to pinning by a CAP_IPC_LOCK
  // process (root, usually): refusing here would be wrong.
  if (HasCapIpcLock()) return absl::OkStatus();
  rlimit rl{};
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return absl::OkStatus();
  return MemlockStatus(requested_bytes, rl.rlim_cur);
}

CompletionStatus MapWcStatus(int s) {
  switch (static_cast<ibv_wc_status>(s)) {
    case IBV_WC_SUCCESS: return CompletionStatus::kSuccess;
    case IBV_WC_REM_ACCESS_ERR: return CompletionStatus::kRemoteAccessError;
    case IBV_WC_LOC_PROT_ERR: return CompletionStatus::kLocalProtectionError;
    case IBV_WC_LOC_LEN_ERR: return CompletionStatus::kLocalLengthError;
    case IBV_WC_REM_INV_REQ_ERR: return CompletionStatus::kRemoteInvalidRequest;
    case IBV_WC_REM_OP_ERR: return CompletionStatus::kRemoteOperationError;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR: return CompletionStatus::kRetryExceeded;
    case IBV_WC_WR_FLUSH_ERR: return CompletionStatus::kFlushed;
    default: return CompletionStatus::kGeneralError;
  }
}

absl::Status AccessToIbvFlags(uint32_t access, int* ibv_flags) {
  constexpr uint32_t kKnown = kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic;
  if ((access & ~kKnown) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown access bits 0x", absl::Hex(access & ~kKnown)));
  }
  if ((access & (kRemoteWrite | kRemoteAtomic)) != 0 && (access & kLocalWrite) == 0) {
    return absl::InvalidArgumentError(
        "verbs requires kLocalWrite together with kRemoteWrite or kRemoteAtomic (the NIC writes the "
        "region on the owner's behalf); add kLocalWrite to the access flags");
  }
  int f = 0;
  if (access & kLocalWrite) f |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteRead) f |= IBV_ACCESS_REMOTE_READ;
  if (access & kRemoteWrite) f |= IBV_ACCESS_REMOTE_WRITE;
  if (access & kRemoteAtomic) f |= IBV_ACCESS_REMOTE_ATOMIC;
  *ibv_flags = f;
  return absl::OkStatus();
}

std::string GidToString(const uint8_t gid[16]) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x", gid[0],
                gid[1], gid[2], gid[3], gid[4], gid[5], gid[6], gid[7], gid[8], gid[9], gid[10], gid[11], gid[12],
                gid[13], gid[14], gid[15]);
  return buf;
}

bool IsIpv4MappedGid(const uint8_t gid[16]) {
  for (int i = 0; i < 10; ++i) {
    if (gid[i] != 0) return false;
  }
  if (gid[10] != 0xff || gid[11] != 0xff) return false;
  return (gid[12] | gid[13] | gid[14] | gid[15]) != 0;
}

namespace {
bool IsZeroGid(const std::array<uint8_t, 16>& g) {
  for (uint8_t b : g) {
    if (b != 0) return false;
  }
  return true;
}
// Auto-selection rank: higher is better, 0 = never auto-selected (v1).
int AutoRank(const GidEntry& e) {
  if (absl::AsciiStrToLower(e.type).find("v2") == std::string::npos) return 0;
  const bool link_local = e.gid[0] == 0xfe && (e.gid[1] & 0xc0) == 0x80;
  if (IsIpv4MappedGid(e.gid.data())) return 3;
  return link_local ? 1 : 2;
}
}  // namespace

absl::StatusOr<GidEntry> PickGid(const std::vector<GidEntry>& table, int requested_index,
                                 absl::string_view where) {
  std::vector<const GidEntry*> valid;
  for (const GidEntry& e : table) {
    if (e.index >= 0 && !IsZeroGid(e.gid)) valid.push_back(&e);
  }
  auto describe = [&] {
    std::vector<std::string> parts;
    for (const GidEntry* e : valid) parts.push_back(absl::StrCat(e->index, " ", GidToString(e->gid.data()), " (", e->type, ")"));
    return parts.empty() ? std::string("none") : absl::StrJoin(parts, ", ");
  };
  if (requested_index >= 0) {
    for (const GidEntry* e : valid) {
      if (e->index == requested_index) return *e;
    }
    return absl::NotFoundError(absl::StrCat(where, " has no valid GID at index ", requested_index,
                                            "; valid GIDs: ", describe(),
                                            ". Use --gid-index=auto (-1) to auto-detect, or see `ibv_devinfo -v` / "
                                            "`show_gids`"));
  }
  if (valid.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        where,
        " is RoCE but has no GID: give its network interface an IP address (rxe: `ip addr add ... dev <netdev>` "
        "before `rdma link add rxe0 type rxe netdev <netdev>`)"));
  }
  const GidEntry* best = nullptr;
  int best_rank = 0;
  for (const GidEntry* e : valid) {
    const int r = AutoRank(*e);
    if (r > best_rank || (r == best_rank && r > 0 && e->index < best->index)) {
      best = e;
      best_rank = r;
    }
  }
  if (best == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        where, " has only RoCE v1 GIDs (", describe(),
        "). RoCE v1 is not routable and is not auto-selected: enable RoCE v2 on the NIC (mlx5: "
        "`cma_roce_mode -d <dev> -p <port> -m 2`, or a kernel/firmware with RoCE v2), or pass --gid-index=N to "
        "use a v1 GID on every node"));
  }
  return *best;
}

}  // namespace rdma::verbs
