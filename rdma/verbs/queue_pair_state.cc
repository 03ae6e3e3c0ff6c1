// The verbs QP's state machine: RESET -> INIT -> RTR -> RTS in Connect, back
// to RESET (through ERROR, flushing) in Reset, and state() as the device sees it.

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "rdma/verbs/checks.h"
#include "rdma/verbs/internal/queue_pair.h"

namespace rdma::verbs {

QpState VerbsQueuePair::state() const {
  const QpState s = state_.load(std::memory_order_acquire);
  if (s != QpState::kReadyToSend) return s;
  if (ring_ != nullptr && ring_->error.load(std::memory_order_acquire) != 0) return QpState::kError;
  // Ask the device: an error completion nobody has polled yet moved it too.
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  if (ibv_query_qp(qp_, &attr, IBV_QP_STATE, &init) == 0 &&
      (attr.qp_state == IBV_QPS_ERR || attr.qp_state == IBV_QPS_SQE)) {
    return QpState::kError;
  }
  return QpState::kReadyToSend;
}

absl::Status VerbsQueuePair::NotReady() const {
  const QpState s = state_.load(std::memory_order_acquire);
  if (s == QpState::kReset) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot post to QP ", qp_->qp_num, ": it is in RESET (not connected; Connect it first)"));
  }
  const uint8_t e = ring_ != nullptr ? ring_->error.load(std::memory_order_acquire) : 0;
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot post to QP ", qp_->qp_num, ": it is in ERROR (an earlier work request failed",
      e != 0 ? absl::StrCat(" with ", CompletionStatusName(static_cast<CompletionStatus>(e - 1))) : "",
      "; Reset and Connect it again)"));
}

absl::Status VerbsQueuePair::Modify(ibv_qp_attr& attr, int mask, absl::string_view what,
                                    const QpEndpoint* remote) {
  if (int rc = ibv_modify_qp(qp_, &attr, mask); rc != 0) {
    const int e = rc > 0 ? rc : errno;
    std::string detail;
    if (remote != nullptr) {
      detail = absl::StrCat(" (peer node ", remote->node, " QP ", remote->qp_num, ", GID ",
                            GidToString(remote->gid.data()), ", LID ", remote->lid, "; local ", device_->name(),
                            " port ", device_->port().port, " GID index ", device_->port().gid_index, ")");
    }
    return absl::InternalError(
        absl::StrCat("ibv_modify_qp ", what, " on QP ", qp_->qp_num, " failed: ", ErrnoText(e), detail));
  }
  return absl::OkStatus();
}

absl::Status VerbsQueuePair::Connect(const QpEndpoint& remote) {
  const QpState s = state_.load(std::memory_order_acquire);
  if (s != QpState::kReset) {
    return absl::FailedPreconditionError(
        absl::StrCat("QP ", qp_->qp_num, " is in ", QpStateName(s), "; Reset it before Connect"));
  }
  const PortInfo& port = device_->port();
  if (port.ethernet) {
    bool zero = true;
    for (uint8_t b : remote.gid) zero &= b == 0;
    if (zero) {
      return absl::InvalidArgumentError(absl::StrCat("Connect QP ", qp_->qp_num, ": the peer endpoint (node ",
                                                     remote.node, ", QP ", remote.qp_num,
                                                     ") has no GID, which RoCE needs"));
    }
  }
  const ibv_device_attr& dev = device_->attr();
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = static_cast<uint8_t>(port.port);
  a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
  absl::Status st = Modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
                           "RESET->INIT", nullptr);

  if (st.ok()) {
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = port.active_mtu;
    a.dest_qp_num = remote.qp_num;
    a.rq_psn = remote.psn & 0xffffff;
    a.max_dest_rd_atomic = static_cast<uint8_t>(std::clamp(dev.max_qp_rd_atom, 1, 255));
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = static_cast<uint8_t>(port.port);
    a.ah_attr.sl = 0;
    a.ah_attr.src_path_bits = 0;
    a.ah_attr.dlid = remote.lid;
    if (port.ethernet) {
      a.ah_attr.is_global = 1;
      std::memcpy(a.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
      a.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
      a.ah_attr.grh.hop_limit = 64;
      a.ah_attr.grh.traffic_class = 0;
      a.ah_attr.grh.flow_label = 0;
    }
    st = Modify(a,
                IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
                "INIT->RTR", &remote);
  }
  if (st.ok()) {
    a = {};
    a.qp_state = IBV_QPS_RTS;
    // Local ACK timeout 4.096 us * 2^18 ~ 1.07 s, 6 retries: a dead host is
    // reported (kRetryExceeded) after ~7.5 s, inside the Session's 10 s
    // completion timeout (7 would mean "retry forever" on rxe). A shorter
    // timeout is risky on Soft-RoCE under emulation: a loaded host delays
    // ACKs past it, and rxe mishandles the retransmissions (duplicate CAS,
    // fence deadlock: docs/design.md §6.2).
    a.timeout = 18;
    a.retry_cnt = 6;
    a.rnr_retry = 7;
    a.sq_psn = psn_;
    a.max_rd_atomic = static_cast<uint8_t>(std::clamp(dev.max_qp_init_rd_atom, 1, 255));
    st = Modify(a,
                IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                    IBV_QP_MAX_QP_RD_ATOMIC,
                "RTR->RTS", &remote);
  }
  if (!st.ok()) {
    ibv_qp_attr r{};
    r.qp_state = IBV_QPS_RESET;
    ibv_modify_qp(qp_, &r, IBV_QP_STATE);
    return st;
  }
  state_.store(QpState::kReadyToSend, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status VerbsQueuePair::Reset() {
  // To ERROR first, so outstanding WRs are flushed, then to RESET. Whether
  // the flush completions survive the RESET is provider-specific (rxe keeps
  // them, mlx5 cleans them out of the CQ); either way they are stale.
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  if (state_.load(std::memory_order_acquire) != QpState::kReset) (void)ibv_modify_qp(qp_, &a, IBV_QP_STATE);
  a.qp_state = IBV_QPS_RESET;
  if (int rc = ibv_modify_qp(qp_, &a, IBV_QP_STATE); rc != 0) {
    return absl::InternalError(absl::StrCat("ibv_modify_qp ->RESET on QP ", qp_->qp_num,
                                            " failed: ", ErrnoText(rc > 0 ? rc : errno)));
  }
  if (ring_ != nullptr) {
    ring_->epoch_start.store(posted_, std::memory_order_release);
    ring_->AdvanceCompleted(posted_);  // the send queue is empty again
    ring_->error.store(0, std::memory_order_release);
  }
  state_.store(QpState::kReset, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace rdma::verbs
