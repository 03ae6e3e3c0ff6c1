// Memory registration on a verbs device, with the process-wide RLIMIT_MEMLOCK
// accounting that makes a too-low limit fail with the fix in the message.

#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "rdma/verbs/checks.h"
#include "rdma/verbs/internal/completion_queue.h"

namespace rdma::verbs {
namespace {

// Bytes this process has registered (over all verbs devices and nodes): the
// kernel charges every pinned page of the process against one
// RLIMIT_MEMLOCK, so the start-up check must too.
std::atomic<uint64_t> g_registered_bytes{0};

class VerbsMemoryRegion final : public MemoryRegion {
 public:
  VerbsMemoryRegion(ibv_mr* mr, uint32_t access, uint64_t charged)
      : mr_(mr), access_(access), charged_(charged) {}
  ~VerbsMemoryRegion() override {
    ibv_dereg_mr(mr_);
    g_registered_bytes.fetch_sub(charged_, std::memory_order_relaxed);
  }
  void* addr() const override { return mr_->addr; }
  size_t length() const override { return mr_->length; }
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const override { return mr_->rkey; }
  uint32_t access() const override { return access_; }

 private:
  ibv_mr* mr_;
  uint32_t access_;
  uint64_t charged_;  // what this MR added to g_registered_bytes
};

}  // namespace

absl::StatusOr<std::unique_ptr<MemoryRegion>> VerbsDevice::RegisterMemory(void* addr, size_t length,
                                                                          uint32_t access) {
  if (addr == nullptr || length == 0) {
    return absl::InvalidArgumentError("RegisterMemory: null address or zero length");
  }
  if (length > caps_.max_mr_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterMemory: ", length, " bytes exceeds ", name(), "'s max_mr_size ", caps_.max_mr_size));
  }
  int flags = 0;
  if (absl::Status s = AccessToIbvFlags(access, &flags); !s.ok()) return s;
  // The memlock check up front, on the process's running total: the node's
  // arena registration at start-up then fails with the limit, the size and
  // the fix, instead of ibv_reg_mr's bare ENOMEM (or, with several nodes,
  // a later region failing although each one alone fits).
  const uint64_t before = g_registered_bytes.fetch_add(length, std::memory_order_relaxed);
  if (absl::Status s = CheckMemlockLimit(before + length); !s.ok()) {
    g_registered_bytes.fetch_sub(length, std::memory_order_relaxed);
    if (before == 0) return s;
    return absl::ResourceExhaustedError(absl::StrCat("registering ", length, " more bytes on ", name(),
                                                     " with ", before, " bytes already registered by this process: ",
                                                     s.message()));
  }
  ibv_mr* mr = ibv_reg_mr(pd_, addr, length, flags);
  if (mr == nullptr) {
    g_registered_bytes.fetch_sub(length, std::memory_order_relaxed);
    const int e = errno;
    std::string msg = absl::StrCat("ibv_reg_mr of ", length, " bytes on ", name(), " failed: ", ErrnoText(e));
    if (e == ENOMEM || e == EPERM || e == EAGAIN) {
      rlimit rl{};
      if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        if (absl::Status s = MemlockStatus(length, rl.rlim_cur); !s.ok()) return s;
        // The limit covers this region alone but not everything already pinned.
        return absl::ResourceExhaustedError(absl::StrCat(
            msg, ". RLIMIT_MEMLOCK is ", rl.rlim_cur,
            " bytes and all memory this process registered counts against it; raise it with `ulimit -l "
            "unlimited`, a memlock line in /etc/security/limits.conf, or LimitMEMLOCK=infinity (systemd)"));
      }
      return absl::ResourceExhaustedError(msg);
    }
    return absl::InternalError(msg);
  }
  return std::unique_ptr<MemoryRegion>(new VerbsMemoryRegion(mr, access, length));
}

}  // namespace rdma::verbs
