// The soft NIC's completion queue and queue pair handles, and their creation.

#include <thread>

#include "absl/strings/str_cat.h"
#include "rdma/soft/soft_nic_internal.h"

namespace rdma::soft {
namespace {

class SoftQueuePair final : public QueuePair {
 public:
  explicit SoftQueuePair(std::shared_ptr<QpCore> core) : core_(std::move(core)) {}
  ~SoftQueuePair() override {
    core_->device->DetachQp(core_.get());
    core_->cq->Detach(core_.get());
    core_->device->network().UnregisterQp(core_->qp_num);
    std::lock_guard<std::mutex> exec(core_->exec_mu);
    std::lock_guard<std::mutex> l(core_->mu);
    core_->destroyed = true;
    core_->sq.clear();
  }

  uint32_t qp_num() const override { return core_->qp_num; }
  QpEndpoint endpoint() const override {
    QpEndpoint ep;
    ep.node = core_->device->node();
    ep.qp_num = core_->qp_num;
    ep.psn = core_->qp_num * 2654435761u & 0xffffff;
    ep.lid = core_->device->node();
    ep.gid[15] = static_cast<uint8_t>(core_->device->node());
    ep.gid[14] = static_cast<uint8_t>(core_->device->node() >> 8);
    return ep;
  }
  QpState state() const override {
    std::lock_guard<std::mutex> l(core_->mu);
    return core_->state;
  }

  absl::Status Connect(const QpEndpoint& remote) override {
    std::lock_guard<std::mutex> l(core_->mu);
    if (core_->state != QpState::kReset) {
      return absl::FailedPreconditionError(
          absl::StrCat("QP ", core_->qp_num, " is in ", QpStateName(core_->state), "; Reset it before Connect"));
    }
    core_->remote_qp_num = remote.qp_num;
    core_->state = QpState::kReadyToSend;
    return absl::OkStatus();
  }

  absl::Status Reset() override {
    std::vector<Completion> flushed;
    {
      std::lock_guard<std::mutex> exec(core_->exec_mu);
      std::lock_guard<std::mutex> l(core_->mu);
      flushed = EnterErrorLocked(*core_);
      core_->state = QpState::kReset;
    }
    for (const Completion& f : flushed) core_->cq->Push(f);
    return absl::OkStatus();
  }

  absl::Status Post(absl::Span<const WorkRequest> chain) override {
    const auto ready_at = Clock::now() + core_->device->latency();
    {
      std::lock_guard<std::mutex> l(core_->mu);
      if (core_->state != QpState::kReadyToSend) {
        return absl::FailedPreconditionError(absl::StrCat(
            "cannot post to QP ", core_->qp_num, ": it is in ", QpStateName(core_->state),
            core_->state == QpState::kError ? " (an earlier work request failed; Reset and Connect it again)"
                                            : " (not connected)"));
      }
      if (core_->sq.size() + chain.size() > core_->max_send_wr) {
        return absl::ResourceExhaustedError(absl::StrCat("QP ", core_->qp_num, ": send queue full (",
                                                         core_->max_send_wr, " WRs)"));
      }
      for (const WorkRequest& wr : chain) {
        const bool atomic = wr.opcode == Opcode::kCompareSwap || wr.opcode == Opcode::kFetchAdd;
        if (atomic && core_->device->caps().atomic_scope == DeviceCaps::AtomicScope::kNone) {
          return absl::InvalidArgumentError(absl::StrCat("atomic WR ", wr.wr_id, ": device ", core_->device->name(),
                                                         " offers no RDMA atomics (atomic_cap=NONE)"));
        }
        if (atomic && (wr.length != 8 || wr.remote_addr % 8 != 0)) {
          // As rxe and mlx5 do at ibv_post_send (EINVAL): nothing is posted.
          return absl::InvalidArgumentError(absl::StrCat("atomic WR ", wr.wr_id, " needs length 8 and an 8-byte aligned remote address"));
        }
        if (wr.inline_data && (wr.opcode != Opcode::kWrite || wr.length > core_->max_inline)) {
          return absl::InvalidArgumentError(absl::StrCat("inline data only for WRITEs of at most ",
                                                         core_->max_inline, " bytes (got ", wr.length, ")"));
        }
      }
      core_->device->OnPosted(chain);
      for (const WorkRequest& wr : chain) {
        PendingWr p{wr, {}, ready_at};
        if (wr.inline_data) {
          const auto* b = static_cast<const uint8_t*>(wr.local);
          p.inline_payload.assign(b, b + wr.length);
        }
        core_->sq.push_back(std::move(p));
      }
      core_->has_work.store(true, std::memory_order_release);
    }
    core_->device->Doorbell();
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<QpCore> core_;
};

}  // namespace

int SoftCompletionQueue::Poll(absl::Span<Completion> out) {
  std::vector<std::shared_ptr<QpCore>> qps;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (HasCompletions()) return Pop(out);
    qps = attached_;
  }
  // Lend this CPU to the NIC engine for our own QPs.
  for (auto& qp : qps) DrainQp(*qp);
  std::lock_guard<std::mutex> l(mu_);
  return Pop(out);
}

int SoftCompletionQueue::Wait(absl::Span<Completion> out, PollMode mode, std::chrono::nanoseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  if (mode == PollMode::kNotify) {
    // Block until the engine delivers; do not execute WRs on this thread.
    device_->AddNotifyWaiter(+1);
    device_->Doorbell();
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait_until(l, deadline, [this] { return HasCompletions(); });
    device_->AddNotifyWaiter(-1);
    return Pop(out);
  }
  for (int spins = 0;; ++spins) {
    int n = Poll(out);
    if (n > 0) return n;
    if (Clock::now() >= deadline) return 0;
    if (spins >= 64) std::this_thread::yield();  // 2-core machines: let the engine run
  }
}

absl::StatusOr<std::unique_ptr<CompletionQueue>> SoftDevice::CreateCompletionQueue(int depth) {
  if (depth <= 0) return absl::InvalidArgumentError("CreateCompletionQueue: depth must be positive");
  return std::make_unique<SoftCompletionQueue>(this, depth);
}

absl::StatusOr<std::unique_ptr<QueuePair>> SoftDevice::CreateQueuePair(CompletionQueue* send_cq,
                                                                       const QpOptions& options) {
  auto* cq = dynamic_cast<SoftCompletionQueue*>(send_cq);
  if (cq == nullptr) return absl::InvalidArgumentError("CreateQueuePair: CQ is not from a soft device");
  if (options.max_send_wr == 0 || options.max_send_wr > caps_.max_send_wr) {
    return absl::InvalidArgumentError(absl::StrCat("max_send_wr must be in 1..", caps_.max_send_wr));
  }
  if (options.max_inline_data > caps_.max_inline_data) {
    return absl::InvalidArgumentError(absl::StrCat("max_inline_data must be <= ", caps_.max_inline_data));
  }
  auto core = std::make_shared<QpCore>();
  core->device = this;
  core->cq = cq;
  core->max_send_wr = options.max_send_wr;
  core->max_inline = options.max_inline_data;
  core->qp_num = network_->RegisterQp(core);
  if (is_dying()) {
    std::lock_guard<std::mutex> l(core->mu);
    core->state = QpState::kError;
  }
  AttachQp(core);
  cq->Attach(core);
  return std::make_unique<SoftQueuePair>(std::move(core));
}

}  // namespace rdma::soft
