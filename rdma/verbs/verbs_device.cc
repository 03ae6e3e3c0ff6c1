#include "rdma/verbs/verbs_device.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rdma/verbs/checks.h"

namespace rdma::verbs {
namespace {

using Clock = std::chrono::steady_clock;

std::string ErrnoText(int e) { return absl::StrCat(std::strerror(e), " (errno ", e, ")"); }

uint32_t NextPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// ----------------------------------------------------------------- wr_id tags
// The verbs wr_id of a posted WR: [ring index:16][generation:8][sequence:40].
constexpr int kSeqBits = 40;
constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;

uint64_t MakeTag(uint32_t index, uint8_t gen, uint64_t seq) {
  return (uint64_t{index} << 48) | (uint64_t{gen} << kSeqBits) | (seq & kSeqMask);
}

}  // namespace

// One posted WR, as the poller needs to report it.
struct SendSlot {
  uint64_t seq = ~uint64_t{0};
  uint64_t wr_id = 0;
  uint32_t length = 0;
  Opcode opcode = Opcode::kRead;
};

// The send-side bookkeeping of one QP, owned by its CQ (it outlives the QP so
// that completions still queued when a QP is destroyed never touch freed
// memory; they fail the generation check and are dropped). Reused by later
// QPs of the same CQ.
struct SendRing {
  uint32_t index = 0;       // in the CQ's table
  uint32_t capacity = 0;    // power of two >= the QP's max_send_wr
  std::unique_ptr<SendSlot[]> slots;
  std::atomic<uint8_t> gen{0};
  // Written by the poller: every WR with seq < completed has completed, so
  // its send-queue slot is free again (verbs frees unsignaled WRs' slots when
  // a later signaled WR completes).
  std::atomic<uint64_t> completed{0};
  // Errors of WRs posted before the last Reset do not make the QP "in error".
  std::atomic<uint64_t> epoch_start{0};
  // 1 + CompletionStatus of the first error polled since the last Reset; 0 = none.
  std::atomic<uint8_t> error{0};

  void AdvanceCompleted(uint64_t done) {
    uint64_t cur = completed.load(std::memory_order_relaxed);
    while (cur < done && !completed.compare_exchange_weak(cur, done, std::memory_order_release)) {
    }
  }
};

// ================================================================ CQ

class VerbsCompletionQueue final : public CompletionQueue {
 public:
  static absl::StatusOr<std::unique_ptr<VerbsCompletionQueue>> Create(VerbsDevice* device, int depth);
  ~VerbsCompletionQueue() override;

  int Poll(absl::Span<Completion> out) override;
  int Wait(absl::Span<Completion> out, PollMode mode, std::chrono::nanoseconds timeout) override;

  ibv_cq* cq() const { return cq_; }
  VerbsDevice* device() const { return device_; }

  // A ring for a QP that is about to post its first WR; grows the CQ so that
  // every WR outstanding on its QPs fits (no CQ overrun even when an error
  // flushes whole send queues).
  absl::StatusOr<SendRing*> AcquireRing(uint32_t max_send_wr);
  void ReleaseRing(SendRing* ring, uint32_t max_send_wr);

 private:
  static constexpr int kChunkBits = 10;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr int kChunks = 64;  // 64 Ki rings per CQ: the 16-bit index
  static constexpr int kPollBatch = 32;

  VerbsCompletionQueue(VerbsDevice* device) : device_(device) {
    for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
  }
  SendRing* Lookup(uint32_t index) const {
    std::atomic<SendRing*>* chunk = chunks_[index >> kChunkBits].load(std::memory_order_acquire);
    return chunk == nullptr ? nullptr : chunk[index & (kChunkSize - 1)].load(std::memory_order_acquire);
  }
  bool Translate(const ibv_wc& wc, Completion* c) const;
  int WaitNotify(absl::Span<Completion> out, Clock::time_point deadline);

  VerbsDevice* device_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  int base_depth_ = 0;

  std::mutex mu_;  // ring table changes and CQ resizing only (cold)
  std::atomic<std::atomic<SendRing*>*> chunks_[kChunks];
  std::unique_ptr<std::atomic<SendRing*>[]> chunk_storage_[kChunks];
  std::vector<std::unique_ptr<SendRing>> rings_;
  std::vector<SendRing*> free_rings_;
  uint64_t reserved_cqe_ = 0;
};

absl::StatusOr<std::unique_ptr<VerbsCompletionQueue>> VerbsCompletionQueue::Create(VerbsDevice* device,
                                                                                  int depth) {
  if (depth <= 0) return absl::InvalidArgumentError("CreateCompletionQueue: depth must be positive");
  if (depth > device->attr().max_cqe) {
    return absl::InvalidArgumentError(absl::StrCat("CreateCompletionQueue: depth ", depth, " exceeds ",
                                                   device->name(), "'s max_cqe ", device->attr().max_cqe));
  }
  std::unique_ptr<VerbsCompletionQueue> q(new VerbsCompletionQueue(device));
  q->base_depth_ = depth;
  q->channel_ = ibv_create_comp_channel(device->context());
  if (q->channel_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("ibv_create_comp_channel on ", device->name(),
                                                     " failed: ", ErrnoText(errno)));
  }
  // Never block in ibv_get_cq_event: Wait polls the fd with its own timeout.
  const int fl = fcntl(q->channel_->fd, F_GETFL);
  if (fl < 0 || fcntl(q->channel_->fd, F_SETFL, fl | O_NONBLOCK) < 0) {
    return absl::InternalError(absl::StrCat("cannot make the completion channel non-blocking: ", ErrnoText(errno)));
  }
  q->cq_ = ibv_create_cq(device->context(), depth, nullptr, q->channel_, 0);
  if (q->cq_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("ibv_create_cq(", depth, ") on ", device->name(),
                                                     " failed: ", ErrnoText(errno)));
  }
  return q;
}

VerbsCompletionQueue::~VerbsCompletionQueue() {
  if (cq_ != nullptr) {
    if (int rc = ibv_destroy_cq(cq_); rc != 0) {
      // EBUSY: a QP still uses it. Leak rather than crash.
      return;
    }
  }
  if (channel_ != nullptr) ibv_destroy_comp_channel(channel_);
}

absl::StatusOr<SendRing*> VerbsCompletionQueue::AcquireRing(uint32_t max_send_wr) {
  const uint32_t capacity = NextPow2(max_send_wr);
  std::lock_guard<std::mutex> l(mu_);
  SendRing* ring = nullptr;
  for (size_t i = 0; i < free_rings_.size(); ++i) {
    if (free_rings_[i]->capacity >= capacity) {
      ring = free_rings_[i];
      free_rings_.erase(free_rings_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  if (ring == nullptr) {
    const size_t index = rings_.size();
    if (index >= size_t{kChunks} * kChunkSize) {
      return absl::ResourceExhaustedError(
          absl::StrCat("more than ", kChunks * kChunkSize, " posting QPs on one completion queue"));
    }
    auto owned = std::make_unique<SendRing>();
    owned->index = static_cast<uint32_t>(index);
    owned->capacity = capacity;
    owned->slots = std::make_unique<SendSlot[]>(capacity);
    const size_t c = index >> kChunkBits;
    if (chunk_storage_[c] == nullptr) {
      chunk_storage_[c] = std::make_unique<std::atomic<SendRing*>[]>(kChunkSize);
      for (uint32_t k = 0; k < kChunkSize; ++k) chunk_storage_[c][k].store(nullptr, std::memory_order_relaxed);
      chunks_[c].store(chunk_storage_[c].get(), std::memory_order_release);
    }
    chunk_storage_[c][index & (kChunkSize - 1)].store(owned.get(), std::memory_order_release);
    ring = owned.get();
    rings_.push_back(std::move(owned));
  }
  ring->completed.store(0, std::memory_order_relaxed);
  ring->epoch_start.store(0, std::memory_order_relaxed);
  ring->error.store(0, std::memory_order_release);

  reserved_cqe_ += max_send_wr;
  const uint64_t want = std::max<uint64_t>(reserved_cqe_, static_cast<uint64_t>(base_depth_));
  const uint64_t limit = static_cast<uint64_t>(std::max(device_->attr().max_cqe, 1));
  if (want > static_cast<uint64_t>(cq_->cqe) && static_cast<uint64_t>(cq_->cqe) < limit) {
    // Best effort: a provider without resize keeps the requested depth.
    (void)ibv_resize_cq(cq_, static_cast<int>(std::min(want, limit)));
  }
  return ring;
}

void VerbsCompletionQueue::ReleaseRing(SendRing* ring, uint32_t max_send_wr) {
  std::lock_guard<std::mutex> l(mu_);
  // Completions of the old QP still in the CQ now fail the generation check.
  ring->gen.fetch_add(1, std::memory_order_acq_rel);
  free_rings_.push_back(ring);
  reserved_cqe_ -= std::min<uint64_t>(reserved_cqe_, max_send_wr);
}

bool VerbsCompletionQueue::Translate(const ibv_wc& wc, Completion* c) const {
  const uint64_t tag = wc.wr_id;
  SendRing* ring = Lookup(static_cast<uint32_t>(tag >> 48));
  if (ring == nullptr) return false;
  if (ring->gen.load(std::memory_order_acquire) != static_cast<uint8_t>(tag >> kSeqBits)) return false;
  const uint64_t seq = tag & kSeqMask;
  const SendSlot& slot = ring->slots[seq & (ring->capacity - 1)];
  if (slot.seq != seq) return false;  // left over from before a Reset; its slot was reused
  c->wr_id = slot.wr_id;
  c->opcode = slot.opcode;
  c->qp_num = wc.qp_num;
  c->status = MapWcStatus(wc.status);
  c->byte_len = c->status == CompletionStatus::kSuccess ? slot.length : 0;
  ring->AdvanceCompleted(seq + 1);
  if (c->status != CompletionStatus::kSuccess && seq >= ring->epoch_start.load(std::memory_order_acquire)) {
    uint8_t none = 0;
    ring->error.compare_exchange_strong(none, static_cast<uint8_t>(1 + static_cast<uint8_t>(c->status)),
                                        std::memory_order_acq_rel);
  }
  return true;
}

int VerbsCompletionQueue::Poll(absl::Span<Completion> out) {
  ibv_wc wc[kPollBatch];
  size_t produced = 0;
  while (produced < out.size()) {
    const int want = static_cast<int>(std::min<size_t>(kPollBatch, out.size() - produced));
    const int n = ibv_poll_cq(cq_, want, wc);
    if (n <= 0) break;
    for (int i = 0; i < n; ++i) {
      if (Translate(wc[i], &out[produced])) ++produced;
    }
    if (n < want) break;
  }
  return static_cast<int>(produced);
}

int VerbsCompletionQueue::Wait(absl::Span<Completion> out, PollMode mode, std::chrono::nanoseconds timeout) {
  if (out.empty()) return 0;
  // Clamp absurd timeouts so the deadline does not overflow.
  timeout = std::clamp(timeout, std::chrono::nanoseconds::zero(),
                       std::chrono::nanoseconds(std::chrono::hours(24 * 365)));
  const Clock::time_point deadline = Clock::now() + timeout;
  if (mode == PollMode::kNotify) return WaitNotify(out, deadline);
  for (uint32_t spins = 0;; ++spins) {
    const int n = Poll(out);
    if (n > 0) return n;
    if ((spins & 15) == 0 && Clock::now() >= deadline) return 0;
    // Soft-RoCE executes WRs in kernel threads on the same CPUs: after a
    // while, give them the CPU. A real RNIC completes long before this.
    if (spins >= 2048) sched_yield();
  }
}

int VerbsCompletionQueue::WaitNotify(absl::Span<Completion> out, Clock::time_point deadline) {
  for (;;) {
    int n = Poll(out);
    if (n > 0) return n;
    // Arm, then poll again: a completion that arrived before arming raises
    // no event.
    const bool armed = ibv_req_notify_cq(cq_, 0) == 0;
    n = Poll(out);
    if (n > 0) return n;
    const auto left = deadline - Clock::now();
    if (left <= std::chrono::nanoseconds::zero()) return 0;
    if (!armed) {
      // Cannot arm (should not happen): degrade to a short sleep-poll.
      timespec ts{0, 50'000};
      nanosleep(&ts, nullptr);
      continue;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
    pollfd pfd{channel_->fd, POLLIN, 0};
    const int r = ppoll(&pfd, 1, &ts, nullptr);
    if (r > 0 && (pfd.revents & POLLIN)) {
      ibv_cq* ev_cq = nullptr;
      void* ev_ctx = nullptr;
      // Non-blocking fd: EAGAIN if another thread took the event.
      while (ibv_get_cq_event(channel_, &ev_cq, &ev_ctx) == 0) ibv_ack_cq_events(ev_cq, 1);
    }
  }
}

// ================================================================ MR

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

// ================================================================ QP

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
    // Local ACK timeout 4.096 us * 2^18 ~ 1.07 s, 7 retries: a dead peer is
    // reported (kRetryExceeded) after ~8.6 s, inside the Session's 10 s
    // completion timeout. Shorter is dangerous on Soft-RoCE under emulation:
    // with 268 ms, a loaded host delayed ACKs past the timeout about once per
    // lock stress run, and rxe mishandles the retransmissions (it re-executed
    // a retransmitted CAS, and deadlocks on a retransmitted fenced READ; see
    // tests/verbs/README.md "rxe duplicate CAS" and "rxe fence").
    a.timeout = 18;
    a.retry_cnt = 7;
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

}  // namespace

// ================================================================ device

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

// ================================================================ port / GID selection

namespace {

std::string SysfsGidType(const std::string& dev, int port, int index) {
  std::ifstream f(absl::StrCat("/sys/class/infiniband/", dev, "/ports/", port, "/gid_attrs/types/", index));
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

std::string GidTypeName(uint32_t t) {
  switch (t) {
    case IBV_GID_TYPE_IB: return "IB";
    case IBV_GID_TYPE_ROCE_V1: return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2: return "RoCE v2";
  }
  return "unknown";
}

// The GID table of `port` with types (zero entries included; PickGid skips them).
std::vector<GidEntry> ListGids(ibv_context* ctx, const std::string& dev, int port, int table_len) {
  std::vector<GidEntry> out;
  // One call for all valid GIDs (the per-index path reads sysfs, slow under
  // emulation). Keep the buffer under 64 KiB: the ioctl attribute length is
  // 16 bits and libibverbs 44 crashes on a larger one.
  std::vector<ibv_gid_entry> entries(1024);
  const ssize_t got = ibv_query_gid_table(ctx, entries.data(), entries.size(), 0);
  if (got >= 0) {
    for (ssize_t i = 0; i < got; ++i) {
      const ibv_gid_entry& e = entries[i];
      if (static_cast<int>(e.port_num) != port) continue;
      GidEntry c;
      c.index = static_cast<int>(e.gid_index);
      std::memcpy(c.gid.data(), e.gid.raw, 16);
      c.type = GidTypeName(e.gid_type);
      out.push_back(c);
    }
    return out;
  }
  for (int i = 0; i < table_len; ++i) {
    ibv_gid g{};
    if (ibv_query_gid(ctx, static_cast<uint8_t>(port), i, &g) != 0) continue;
    GidEntry c;
    c.index = i;
    std::memcpy(c.gid.data(), g.raw, 16);
    c.type = SysfsGidType(dev, port, i);
    if (c.type.empty()) c.type = "RoCE v1";
    out.push_back(c);
  }
  return out;
}

const char* PortStateName(ibv_port_state s) { return ibv_port_state_str(s); }

absl::Status ResolveGid(ibv_context* ctx, const ibv_port_attr& pa, const FabricOptions& options, PortInfo* info) {
  info->lid = pa.lid;
  info->active_mtu = pa.active_mtu;
  info->ethernet = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (!info->ethernet) {
    // InfiniBand: LID-routed within the subnet, no GRH.
    info->gid_index = -1;
    info->gid_type = "IB";
    ibv_gid g{};
    if (ibv_query_gid(ctx, static_cast<uint8_t>(info->port), 0, &g) == 0) std::memcpy(info->gid.data(), g.raw, 16);
    return absl::OkStatus();
  }
  auto picked = PickGid(ListGids(ctx, info->device, info->port, pa.gid_tbl_len), options.gid_index,
                        absl::StrCat(info->device, " port ", info->port));
  if (!picked.ok()) return picked.status();
  info->gid_index = picked->index;
  info->gid = picked->gid;
  info->gid_type = picked->type;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PortInfo> SelectPort(const FabricOptions& options) {
  errno = 0;
  int n = 0;
  ibv_device** list = ibv_get_device_list(&n);
  const int list_errno = errno;
  if (list == nullptr || n == 0) {
    if (list != nullptr) ibv_free_device_list(list);
    std::string why = list == nullptr ? absl::StrCat(" (ibv_get_device_list: ", ErrnoText(list_errno),
                                                     list_errno == ENOSYS ? "; this kernel has no RDMA support" : "",
                                                     ")")
                                      : " (ibv_get_device_list is empty)";
    return absl::NotFoundError(absl::StrCat(
        "no RDMA device", why, "; use --fabric=soft or run inside tools/rxe_vm/rxe_run (Soft-RoCE guest)"));
  }
  std::vector<std::string> names;
  std::vector<std::string> problems;
  absl::StatusOr<PortInfo> result = absl::NotFoundError("");
  bool done = false;
  for (int i = 0; i < n && !done; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    names.push_back(name);
    if (!options.device.empty() && name != options.device) continue;
    ibv_context* ctx = ibv_open_device(list[i]);
    if (ctx == nullptr) {
      problems.push_back(absl::StrCat(name, ": ibv_open_device: ", ErrnoText(errno)));
      continue;
    }
    ibv_device_attr attr{};
    if (ibv_query_device(ctx, &attr) != 0) {
      problems.push_back(absl::StrCat(name, ": ibv_query_device: ", ErrnoText(errno)));
      ibv_close_device(ctx);
      continue;
    }
    // An explicit port is the only candidate: traffic on another port than
    // the one asked for (another link, subnet or switch) would be a silent
    // misconfiguration, so a missing or down port is an error.
    const bool explicit_port = options.port > 0;
    std::vector<int> ports;
    if (explicit_port) {
      if (options.port > attr.phys_port_cnt) {
        problems.push_back(absl::StrCat(name, " has no port ", options.port, " (it has ", int{attr.phys_port_cnt},
                                        attr.phys_port_cnt == 1 ? " port" : " ports", ")"));
      } else {
        ports.push_back(options.port);
      }
    } else {
      for (int p = 1; p <= attr.phys_port_cnt; ++p) ports.push_back(p);
    }
    for (int p : ports) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0) {
        problems.push_back(absl::StrCat(name, " port ", p, ": ibv_query_port: ", ErrnoText(errno)));
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        problems.push_back(absl::StrCat(name, " port ", p, " is ", PortStateName(pa.state), " (not ACTIVE)"));
        continue;
      }
      PortInfo info;
      info.device = name;
      info.port = p;
      absl::Status st = ResolveGid(ctx, pa, options, &info);
      if (!st.ok()) {
        problems.push_back(std::string(st.message()));
        if (!options.device.empty()) {
          result = st;
          done = true;
          break;
        }
        continue;
      }
      result = info;
      done = true;
      break;
    }
    ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (done) return result;
  if (!options.device.empty() &&
      std::find(names.begin(), names.end(), options.device) == names.end()) {
    return absl::NotFoundError(absl::StrCat("no RDMA device named '", options.device,
                                            "' (found: ", absl::StrJoin(names, ", "), ")"));
  }
  if (options.port > 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the requested RDMA port ", options.port, " is not usable: ", absl::StrJoin(problems, "; "),
        ". Pick an ACTIVE port with --port=N (see `ibv_devinfo`), or --port=auto for the first active one"));
  }
  return absl::FailedPreconditionError(absl::StrCat("no usable RDMA port: ", absl::StrJoin(problems, "; "),
                                                    ". Bring a port up (for Soft-RoCE: the netdev must be up)"));
}

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
