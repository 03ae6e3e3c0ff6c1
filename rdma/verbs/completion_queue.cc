// The verbs completion queue: send-ring bookkeeping, polling and waiting.

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include "rdma/verbs/checks.h"
#include "rdma/verbs/internal/completion_queue.h"

namespace rdma::verbs {

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

}  // namespace rdma::verbs
