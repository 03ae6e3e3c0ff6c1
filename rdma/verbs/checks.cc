#include "rdma/verbs/checks.h"

#include <infiniband/verbs.h>
#include <sys/resource.h>

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace rdma::verbs {

absl::Status RequireAtomics(const DeviceCaps& caps, bool need_global, absl::string_view device_name) {
  switch (caps.atomic_scope) {
    case DeviceCaps::AtomicScope::kNone:
      return absl::FailedPreconditionError(absl::StrCat(
          device_name,
          " reports atomic_cap = IBV_ATOMIC_NONE: it cannot execute RDMA compare-and-swap or fetch-and-add, "
          "which the locks and structures need. Use an RNIC with atomics (ConnectX reports IBV_ATOMIC_HCA; "
          "so does Soft-RoCE, e.g. inside tools/rxe_vm/rxe_run), or --fabric=soft"));
    case DeviceCaps::AtomicScope::kHca:
      if (need_global) {
        return absl::FailedPreconditionError(absl::StrCat(
            device_name,
            " reports atomic_cap = IBV_ATOMIC_HCA: its atomics are atomic only among NIC operations on this "
            "device, not with CPU atomics on the same word. Give every word one RMW domain (DESIGN §3: NIC-RMW "
            "words are updated through loopback RDMA) instead of requiring IBV_ATOMIC_GLOB"));
      }
      return absl::OkStatus();
    case DeviceCaps::AtomicScope::kGlobal:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

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

absl::Status CheckMemlockLimit(uint64_t requested_bytes) {
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

}  // namespace rdma::verbs
