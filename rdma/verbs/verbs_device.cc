#include "rdma/verbs/verbs_device.h"

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "rdma/verbs/internal/completion_queue.h"
#include "rdma/verbs/internal/queue_pair.h"

namespace rdma::verbs {

// Opening a device, creating its CQs and QPs, and probing its inline limit.
// Memory registration is in memory_region.cc, port and GID choice in
// port_select.cc.

absl::StatusOr<std::unique_ptr<VerbsDevice>> VerbsDevice::Open(NodeId node, const PortInfo& port,
                                                               uint32_t max_inline_data) {
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  if (list == nullptr) {
    return absl::NotFoundError(absl::StrCat("ibv_get_device_list failed: ", ErrnoText(errno)));
  }
  ibv_device* found = nullptr;
  for (int i = 0; i < n; ++i) {
    if (port.device == ibv_get_device_name(list[i])) found = list[i];
  }
  std::unique_ptr<VerbsDevice> d(new VerbsDevice(node, port));
  if (found != nullptr) d->ctx_ = ibv_open_device(found);
  const int open_errno = errno;
  ibv_free_device_list(list);
  if (found == nullptr) return absl::NotFoundError(absl::StrCat("RDMA device ", port.device, " disappeared"));
  if (d->ctx_ == nullptr) {
    return absl::UnavailableError(absl::StrCat("ibv_open_device(", port.device, ") failed: ", ErrnoText(open_errno)));
  }
  if (ibv_query_device(d->ctx_, &d->attr_) != 0) {
    return absl::InternalError(absl::StrCat("ibv_query_device(", port.device, ") failed: ", ErrnoText(errno)));
  }
  d->pd_ = ibv_alloc_pd(d->ctx_);
  if (d->pd_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("ibv_alloc_pd(", port.device, ") failed: ", ErrnoText(errno)));
  }
  switch (d->attr_.atomic_cap) {
    case IBV_ATOMIC_NONE: d->caps_.atomic_scope = DeviceCaps::AtomicScope::kNone; break;
    case IBV_ATOMIC_HCA: d->caps_.atomic_scope = DeviceCaps::AtomicScope::kHca; break;
    case IBV_ATOMIC_GLOB: d->caps_.atomic_scope = DeviceCaps::AtomicScope::kGlobal; break;
  }
  d->caps_.max_inline_data = max_inline_data;
  d->caps_.max_send_wr = static_cast<uint32_t>(std::max(d->attr_.max_qp_wr, 0));
  d->caps_.max_mr_size = d->attr_.max_mr_size;
  return d;
}

VerbsDevice::~VerbsDevice() {
  if (pd_ != nullptr) ibv_dealloc_pd(pd_);  // EBUSY if something still uses it: leaked, not crashed
  if (ctx_ != nullptr) ibv_close_device(ctx_);
}

absl::StatusOr<std::unique_ptr<CompletionQueue>> VerbsDevice::CreateCompletionQueue(int depth) {
  auto cq = VerbsCompletionQueue::Create(this, depth);
  if (!cq.ok()) return cq.status();
  return std::unique_ptr<CompletionQueue>(std::move(*cq));
}

absl::StatusOr<std::unique_ptr<QueuePair>> VerbsDevice::CreateQueuePair(CompletionQueue* send_cq,
                                                                        const QpOptions& options) {
  auto* cq = dynamic_cast<VerbsCompletionQueue*>(send_cq);
  if (cq == nullptr || cq->device() != this) {
    return absl::InvalidArgumentError("CreateQueuePair: the CQ is not from this verbs device");
  }
  if (options.max_send_wr == 0 || options.max_send_wr > caps_.max_send_wr) {
    return absl::InvalidArgumentError(absl::StrCat("max_send_wr must be in 1..", caps_.max_send_wr));
  }
  if (options.max_inline_data > caps_.max_inline_data) {
    return absl::InvalidArgumentError(absl::StrCat("max_inline_data must be <= ", caps_.max_inline_data));
  }
  ibv_qp_init_attr init{};
  init.send_cq = cq->cq();
  init.recv_cq = cq->cq();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = options.max_send_wr;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = options.max_inline_data;
  ibv_qp* qp = ibv_create_qp(pd_, &init);
  if (qp == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("ibv_create_qp (RC, max_send_wr ", options.max_send_wr,
                                                     ", max_inline_data ", options.max_inline_data, ") on ",
                                                     name(), " failed: ", ErrnoText(errno)));
  }
  return std::unique_ptr<QueuePair>(new VerbsQueuePair(this, cq, qp, options));
}

VerbsDevice* AsVerbsDevice(Device& device) { return dynamic_cast<VerbsDevice*>(&device); }

uint32_t ProbeMaxInlineData(ibv_context* ctx, ibv_pd* pd) {
  ibv_cq* cq = ibv_create_cq(ctx, 4, nullptr, nullptr, 0);
  if (cq == nullptr) return 0;
  uint32_t result = 0;
  for (uint32_t size : {1024u, 512u, 256u, 128u, 64u, 32u, 16u}) {
    ibv_qp_init_attr init{};
    init.send_cq = cq;
    init.recv_cq = cq;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = 1;
    init.cap.max_recv_wr = 1;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = size;
    if (ibv_qp* qp = ibv_create_qp(pd, &init); qp != nullptr) {
      ibv_destroy_qp(qp);
      result = size;
      break;
    }
  }
  ibv_destroy_cq(cq);
  return result;
}

}  // namespace rdma::verbs
