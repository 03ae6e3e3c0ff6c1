#ifndef RDMA_VERBS_INTERNAL_QUEUE_PAIR_H_
#define RDMA_VERBS_INTERNAL_QUEUE_PAIR_H_

// Internal to //rdma/verbs: the RC queue pair. Its state machine (Connect,
// Reset, state) is in queue_pair_state.cc, the post path in
// queue_pair_post.cc; verbs_device.h states the contract.

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rdma/verbs/internal/completion_queue.h"
#include "rdma/verbs/verbs_device.h"

namespace rdma::verbs {

class VerbsQueuePair final : public QueuePair {
 public:
  VerbsQueuePair(VerbsDevice* device, VerbsCompletionQueue* cq, ibv_qp* qp, const QpOptions& options)
      : device_(device), cq_(cq), qp_(qp), max_send_wr_(options.max_send_wr),
        max_inline_(options.max_inline_data) {
    // A PSN that differs between QPs and between runs (24 bits).
    const uint64_t t = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
    psn_ = static_cast<uint32_t>((qp->qp_num * 2654435761u) ^ (t >> 10)) & 0xffffff;
  }
  ~VerbsQueuePair() override {
    ibv_destroy_qp(qp_);
    if (ring_ != nullptr) cq_->ReleaseRing(ring_, max_send_wr_);
  }

  uint32_t qp_num() const override { return qp_->qp_num; }
  QpEndpoint endpoint() const override {
    QpEndpoint ep;
    ep.node = device_->node();
    ep.qp_num = qp_->qp_num;
    ep.psn = psn_;
    ep.lid = device_->port().lid;
    ep.gid = device_->port().gid;
    return ep;
  }
  QpState state() const override;
  absl::Status Connect(const QpEndpoint& remote) override;
  absl::Status Reset() override;
  absl::Status Post(absl::Span<const WorkRequest> chain) override;

 private:
  absl::Status Arm();
  absl::Status NotReady() const;
  absl::Status Modify(ibv_qp_attr& attr, int mask, absl::string_view what, const QpEndpoint* remote);

  VerbsDevice* device_;
  VerbsCompletionQueue* cq_;
  ibv_qp* qp_;
  const uint32_t max_send_wr_;
  const uint32_t max_inline_;
  uint32_t psn_ = 0;
  std::atomic<QpState> state_{QpState::kReset};

  // Send side, touched by the posting thread only (the ring also by the poller).
  SendRing* ring_ = nullptr;
  uint64_t posted_ = 0;  // sequence number of the next WR
  std::unique_ptr<ibv_send_wr[]> wrs_;
  std::unique_ptr<ibv_sge[]> sges_;
};

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_INTERNAL_QUEUE_PAIR_H_
