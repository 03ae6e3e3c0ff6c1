#ifndef STRUCTURES_QUEUE_RDMA_PATH_H_
#define STRUCTURES_QUEUE_RDMA_PATH_H_

// The queue's RDMA word accessor: the same interface as NativeRing
// (native_path.h), over the thread's Session. Loads are READs (or values
// already read in the lock acquire's own chain: Prime); stores are staged and
// go out in Flush as one chain to the home node, in the order they were
// staged, with one doorbell.
//
// Ordering argument. The caller holds the ring's tail (or head) lock, taken
// over the NIC path, and releases it right after Flush with ALock's remote
// Unlock, whose first step is an RDMA CAS on the lock line, on the same RC QP.
// The responder executes a QP's requests in order, so
//  * a payload WRITE staged before a seq WRITE has landed whole before any
//    byte of the seq word changes (two WRs; within one WRITE the words land
//    in no fixed order, which is why payload and seq never share a WRITE);
//  * every staged WRITE has landed before the unlocking CAS executes, so the
//    next holder (native or NIC) sees them; Flush therefore posts without
//    waiting when every WRITE fits inline, and the Unlock's CAS completion
//    is the one wait (otherwise it waits here: the payload must stay
//    readable until the NIC has copied it).
//  * READs chained after the acquire's CAS (Prime) execute after it, so when
//    the acquire took its uncontended fast path they see memory as the holder.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/common/staged_writes.h"
#include "structures/queue/layout.h"

namespace structures::queue_internal {

template <typename V>
class RemoteRing {
 public:
  static constexpr size_t kW = RingLayout<V>::kValueWords;

  RemoteRing(rdma::Session& s, rdma::RemotePtr part, const RingLayout<V>& layout, bool producer)
      : s_(s), part_(part), l_(layout), producer_(producer) {}

  // Values the acquire's chain read as the holder: the counter, and the seq
  // words (and payload words, when `payloads` is not null) of positions
  // [first, first + n).
  void Prime(uint64_t counter, uint64_t repair, uint64_t other_claim, uint64_t first, size_t n,
             const uint64_t* seqs, const uint64_t* payloads) {
    primed_ = true;
    other_primed_ = true;
    other_claim_ = other_claim;
    counter_ = counter;
    repair_ = repair;
    first_ = first;
    n_ = n;
    seqs_ = seqs;
    payloads_ = payloads;
  }

  // The counter, and with it (the next word: one READ) the side's repair
  // flag, which repair() then returns.
  absl::Status LoadCounter(uint64_t* v) {
    if (primed_) {
      *v = counter_;
      return absl::OkStatus();
    }
    uint64_t both[2];
    if (absl::Status st = s_.Read(CounterPtr(), both, sizeof both); !st.ok()) return st;
    *v = both[0];
    repair_ = both[1];
    return absl::OkStatus();
  }
  uint64_t repair() const { return repair_; }
  // The other side's claim word (layout.h: its native threads' next
  // position), as the acquire's chain read it or in a READ of its own. Any
  // one whole read during the operation serves (docs/design.md §9.4.1).
  absl::Status LoadOtherClaim(uint64_t* v) {
    if (other_primed_) {
      *v = other_claim_;
      return absl::OkStatus();
    }
    return ReadOtherClaim(v);
  }
  // The other side's claim word in a READ of its own (never the primed copy).
  absl::Status ReadOtherClaim(uint64_t* v) {
    other_primed_ = false;
    return s_.Read(part_ + OtherClaimOffset(producer_), v, sizeof *v);
  }
  // How far side `producer` has got (Frontier): its counter, repair flag
  // and claim word in one READ. Approximate: the claim word may change, and
  // be torn, while the READ copies it (Size only).
  absl::Status LoadFrontier(bool producer, uint64_t* v) {
    uint64_t words[3];
    if (absl::Status st = s_.Read(part_ + CounterOffset(producer), words, sizeof words); !st.ok()) return st;
    *v = Frontier(words[0], words[2]);
    return absl::OkStatus();
  }
  void ClearRepair() { staged_.Stage64(CounterPtr() + 8, 0); }
  absl::Status LoadSeqs(uint64_t first, size_t n, uint64_t* out) {
    if (Primed(first, n, seqs_)) {
      std::memcpy(out, seqs_ + (first - first_), 8 * n);
      return absl::OkStatus();
    }
    return ReadRange(first, n, out, /*payload=*/false);
  }
  absl::Status LoadPayloads(uint64_t first, size_t n, uint64_t* out) {
    if (Primed(first, n, payloads_)) {
      std::memcpy(out, payloads_ + (first - first_) * kW, 8 * kW * n);
      return absl::OkStatus();
    }
    return ReadRange(first, n, out, /*payload=*/true);
  }
  // Drops primed values (after the caller re-reads a word that was torn).
  void Unprime() { primed_ = false; }

  void StorePayloads(uint64_t first, size_t n, const uint64_t* words) { Stage(first, n, words, true); }
  void StoreSeqs(uint64_t first, size_t n, const uint64_t* values) { Stage(first, n, values, false); }
  void StoreCounter(uint64_t v) { staged_.Stage64(CounterPtr(), v); }

  // Posts the staged WRITEs, in order, in one chain (see the top of this file).
  absl::Status Flush() { return staged_.Flush(s_, part_.node()); }

 private:
  rdma::RemotePtr CounterPtr() const { return part_ + CounterOffset(producer_); }
  rdma::RemotePtr Ptr(uint64_t position, bool payload) const {
    const uint64_t slot = l_.Slot(position);
    return part_ + (payload ? l_.payload_offset(slot) : l_.seq_offset(slot));
  }
  bool Primed(uint64_t first, size_t n, const uint64_t* values) const {
    return primed_ && values != nullptr && first >= first_ && first + n <= first_ + n_;
  }
  // Positions [first, first + n) in at most two READs (the ring may wrap),
  // chained in one doorbell.
  absl::Status ReadRange(uint64_t first, size_t n, uint64_t* out, bool payload) {
    const size_t per = payload ? kW : 1;
    const size_t head_n = static_cast<size_t>(std::min<uint64_t>(n, l_.capacity - l_.Slot(first)));
    rdma::Batch b(s_, part_.node());
    b.Read(Ptr(first, payload), out, 8 * per * head_n);
    if (head_n < n) b.Read(Ptr(first + head_n, payload), out + per * head_n, 8 * per * (n - head_n));
    return b.Execute();
  }
  void Stage(uint64_t first, size_t n, const uint64_t* words, bool payload) {
    const size_t per = payload ? kW : 1;
    size_t done = 0;
    while (done < n) {
      const size_t run = static_cast<size_t>(std::min<uint64_t>(n - done, l_.capacity - l_.Slot(first + done)));
      staged_.Stage(Ptr(first + done, payload), words + per * done, per * run);
      done += run;
    }
  }

  rdma::Session& s_;
  rdma::RemotePtr part_;
  RingLayout<V> l_;
  bool producer_;
  bool primed_ = false;
  uint64_t counter_ = 0;
  uint64_t repair_ = 0;
  bool other_primed_ = false;
  uint64_t other_claim_ = 0;
  uint64_t first_ = 0;
  size_t n_ = 0;
  const uint64_t* seqs_ = nullptr;
  const uint64_t* payloads_ = nullptr;
  StagedWrites staged_;
};

}  // namespace structures::queue_internal

#endif  // STRUCTURES_QUEUE_RDMA_PATH_H_
