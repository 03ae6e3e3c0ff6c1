#ifndef RDMA_SOFT_SOFT_NIC_INTERNAL_H_
#define RDMA_SOFT_SOFT_NIC_INTERNAL_H_

// Internal to //rdma/soft: the NIC-side state of a QP, the completion queue,
// and the engine entry points shared by soft_nic.cc (device), queues.cc (CQ
// and QP handles) and engine.cc (WR execution). See soft_nic.h for the contract.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "rdma/soft/soft_nic.h"

namespace rdma::soft {

using Clock = std::chrono::steady_clock;

struct PendingWr {
  WorkRequest wr;
  absl::InlinedVector<uint8_t, 64> inline_payload;
  Clock::time_point ready_at;
};

// The NIC-side state of one QP. Shared between its QueuePair handle, the
// network registry, the CQ (for helping) and the engine.
struct QpCore {
  uint32_t qp_num = 0;
  SoftDevice* device = nullptr;
  SoftCompletionQueue* cq = nullptr;
  uint32_t max_send_wr = 0;
  uint32_t max_inline = 0;

  std::mutex mu;
  std::deque<PendingWr> sq;
  QpState state = QpState::kReset;
  uint32_t remote_qp_num = 0;
  bool destroyed = false;
  std::atomic<bool> has_work{false};
  // Held by whoever executes this QP's WRs: keeps execution in order.
  std::mutex exec_mu;
};

class SoftCompletionQueue final : public CompletionQueue {
 public:
  SoftCompletionQueue(SoftDevice* device, int depth) : device_(device), depth_(depth) {}

  int Poll(absl::Span<Completion> out) override;
  int Wait(absl::Span<Completion> out, PollMode mode, std::chrono::nanoseconds timeout) override;

  void Push(const Completion& c) {
    device_->OnCompletion();
    std::lock_guard<std::mutex> l(mu_);
    completions_.push_back(c);
    cv_.notify_all();
  }
  void Attach(std::shared_ptr<QpCore> qp) {
    std::lock_guard<std::mutex> l(mu_);
    attached_.push_back(std::move(qp));
  }
  void Detach(QpCore* qp) {
    std::lock_guard<std::mutex> l(mu_);
    std::erase_if(attached_, [qp](const auto& p) { return p.get() == qp; });
  }

 private:
  int Pop(absl::Span<Completion> out) {
    int n = 0;
    while (n < static_cast<int>(out.size()) && !completions_.empty()) {
      out[n++] = completions_.front();
      completions_.pop_front();
    }
    return n;
  }
  bool HasCompletions() const { return !completions_.empty(); }

  SoftDevice* device_;
  [[maybe_unused]] int depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Completion> completions_;
  std::vector<std::shared_ptr<QpCore>> attached_;
};

// Moves `qp` to the error state and returns flush completions for every WR
// still queued (verbs generates them whether signaled or not). Needs qp.mu.
std::vector<Completion> EnterErrorLocked(QpCore& qp);

// Executes the ready WRs of `qp` in order. Returns whether it did anything.
// Non-blocking: if another thread is executing this QP, leaves it to them.
bool DrainQp(QpCore& qp);

}  // namespace rdma::soft

#endif  // RDMA_SOFT_SOFT_NIC_INTERNAL_H_
