// The verbs QP's post path: a chain becomes one linked ibv_send_wr list and
// one ibv_post_send, each WR tagged for the completion queue's translation.

#include <algorithm>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "rdma/verbs/internal/queue_pair.h"

namespace rdma::verbs {

absl::Status VerbsQueuePair::Arm() {
  auto ring = cq_->AcquireRing(max_send_wr_);
  if (!ring.ok()) return ring.status();
  wrs_ = std::make_unique<ibv_send_wr[]>(max_send_wr_);
  sges_ = std::make_unique<ibv_sge[]>(max_send_wr_);
  posted_ = 0;
  ring_ = *ring;
  return absl::OkStatus();
}

absl::Status VerbsQueuePair::Post(absl::Span<const WorkRequest> chain) {
  if (state_.load(std::memory_order_acquire) != QpState::kReadyToSend) return NotReady();
  if (ring_ != nullptr && ring_->error.load(std::memory_order_acquire) != 0) return NotReady();
  const size_t n = chain.size();
  if (n == 0) return absl::OkStatus();
  if (ring_ == nullptr) {
    if (absl::Status s = Arm(); !s.ok()) return s;
  }
  const uint64_t outstanding = posted_ - ring_->completed.load(std::memory_order_acquire);
  if (n > max_send_wr_ - std::min<uint64_t>(outstanding, max_send_wr_)) {
    return absl::ResourceExhaustedError(absl::StrCat("QP ", qp_->qp_num, ": send queue full (", max_send_wr_,
                                                     " WRs, ", outstanding, " outstanding, chain of ", n, ")"));
  }
  for (const WorkRequest& wr : chain) {
    if ((wr.opcode == Opcode::kCompareSwap || wr.opcode == Opcode::kFetchAdd) &&
        (wr.length != 8 || wr.remote_addr % 8 != 0)) {
      // rxe rejects these in ibv_post_send, mlx5 completes them with an
      // error: refuse them here so every provider behaves as device.h says.
      return absl::InvalidArgumentError(absl::StrCat(OpcodeName(wr.opcode), " needs an 8-byte local buffer and an "
                                                     "8-byte aligned remote address (got length ", wr.length,
                                                     ", remote 0x", absl::Hex(wr.remote_addr), ")"));
    }
    if (wr.inline_data && (wr.opcode != Opcode::kWrite || wr.length > max_inline_)) {
      return absl::InvalidArgumentError(absl::StrCat("inline data only for WRITEs of at most ", max_inline_,
                                                     " bytes (got ", OpcodeName(wr.opcode), " of ", wr.length,
                                                     ")"));
    }
  }
  const uint32_t mask = ring_->capacity - 1;
  const uint8_t gen = ring_->gen.load(std::memory_order_relaxed);
  for (size_t i = 0; i < n; ++i) {
    const WorkRequest& wr = chain[i];
    const uint64_t seq = posted_ + i;
    SendSlot& slot = ring_->slots[seq & mask];
    slot.seq = seq;
    slot.wr_id = wr.wr_id;
    slot.length = wr.length;
    slot.opcode = wr.opcode;

    ibv_sge& g = sges_[i];
    g.addr = reinterpret_cast<uintptr_t>(wr.local);
    g.length = wr.length;
    g.lkey = wr.lkey;
    ibv_send_wr& w = wrs_[i];
    w.wr_id = MakeTag(ring_->index, gen, seq);
    w.next = i + 1 < n ? &wrs_[i + 1] : nullptr;
    w.sg_list = &g;
    w.num_sge = wr.length == 0 ? 0 : 1;
    unsigned flags = 0;
    if (wr.signaled) flags |= IBV_SEND_SIGNALED;
    if (wr.inline_data) flags |= IBV_SEND_INLINE;
    if (wr.fence) flags |= IBV_SEND_FENCE;
    w.send_flags = flags;
    switch (wr.opcode) {
      case Opcode::kRead:
      case Opcode::kWrite:
        w.opcode = wr.opcode == Opcode::kRead ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
        w.wr.rdma.remote_addr = wr.remote_addr;
        w.wr.rdma.rkey = wr.rkey;
        break;
      case Opcode::kCompareSwap:
      case Opcode::kFetchAdd:
        w.opcode = wr.opcode == Opcode::kCompareSwap ? IBV_WR_ATOMIC_CMP_AND_SWP : IBV_WR_ATOMIC_FETCH_AND_ADD;
        w.wr.atomic.remote_addr = wr.remote_addr;
        w.wr.atomic.compare_add = wr.compare_add;
        w.wr.atomic.swap = wr.swap;
        w.wr.atomic.rkey = wr.rkey;
        break;
    }
  }
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_, wrs_.get(), &bad); rc != 0) {
    const size_t accepted = bad != nullptr ? static_cast<size_t>(bad - wrs_.get()) : 0;
    posted_ += accepted;
    const int e = rc > 0 ? rc : -rc;
    const std::string msg = absl::StrCat("ibv_post_send on QP ", qp_->qp_num, " rejected WR ", accepted, " of ", n,
                                         " (", OpcodeName(chain[std::min(accepted, n - 1)].opcode),
                                         "): ", ErrnoText(e));
    if (e == ENOMEM) return absl::ResourceExhaustedError(msg);
    if (e == EINVAL) return absl::InvalidArgumentError(msg);
    return absl::InternalError(msg);
  }
  posted_ += n;
  return absl::OkStatus();
}

}  // namespace rdma::verbs
