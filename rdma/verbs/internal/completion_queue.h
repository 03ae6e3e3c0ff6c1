#ifndef RDMA_VERBS_INTERNAL_COMPLETION_QUEUE_H_
#define RDMA_VERBS_INTERNAL_COMPLETION_QUEUE_H_

// Internal to //rdma/verbs: the verbs completion queue and the per-QP send
// rings it owns. A posted WR's verbs wr_id is a tag naming its ring, the
// ring's generation and the WR's sequence number; polling turns the tag back
// into the caller's wr_id, opcode and byte count (verbs_device.h,
// "Completions").

#include <infiniband/verbs.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "rdma/verbs/verbs_device.h"

namespace rdma::verbs {

using Clock = std::chrono::steady_clock;

// "<strerror> (errno N)", for error messages.
inline std::string ErrnoText(int e) { return absl::StrCat(std::strerror(e), " (errno ", e, ")"); }

inline uint32_t NextPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// The verbs wr_id of a posted WR: [ring index:16][generation:8][sequence:40].
constexpr int kSeqBits = 40;
constexpr uint64_t kSeqMask = (uint64_t{1} << kSeqBits) - 1;

inline uint64_t MakeTag(uint32_t index, uint8_t gen, uint64_t seq) {
  return (uint64_t{index} << 48) | (uint64_t{gen} << kSeqBits) | (seq & kSeqMask);
}

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

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_INTERNAL_COMPLETION_QUEUE_H_
