#ifndef STRUCTURES_QUEUE_NATIVE_CLAIMS_H_
#define STRUCTURES_QUEUE_NATIVE_CLAIMS_H_

// The queue's native operations: this process's threads at a ring it hosts,
// inside a side's open lease (native_lease.h). A thread claims positions
// with one CPU CAS on the side's claim word, then completes them: a producer
// stores the payloads and publishes the seqs, a consumer loads the payloads
// and frees the seqs. Threads complete in any order; nobody waits for an
// earlier claim except where the answer would be "full" or "empty".
//
//   NativeClaims<V> ops(layout, timeout);
//   absl::StatusOr<size_t> n = ops.Produce(lease, id, part, values, open);  // 0: full
//   absl::StatusOr<size_t> m = ops.Consume(lease, id, part, 8, open, sink);  // 0: empty
//
// `open(&counter)` is what the lease runs before it opens (native_lease.h:
// the crash repair of a dead NIC holder).
//
// Contract (docs/design.md §9.4.1, "Native claims"). An enqueue takes effect
// at its claim CAS, a dequeue at its own. A producer claims position p only
// when p's seq says free, a consumer only when it holds p's value. Where a
// position is not ready, the thread looks at the other side's claim word: if
// that side has claimed what makes the position ready (the consumer of
// p - capacity, or the producer of p) and is still at work, it waits for it;
// otherwise the ring is full (or empty) at that moment and it says so. A
// seq a lap behind (this side's thread of q - capacity still at work on the
// slot) is full (or empty) too. Any other seq value is a stale claim word
// or a half-written NIC WRITE: read again. Costs, uncontended: 0 NIC ops; a load of the claim word, a load of
// the seq, the CAS, the payload and one seq store, and the lease's two
// stores (Enter, Exit) and one load (NicWaiting).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "rdma/rmw_word.h"
#include "structures/queue/layout.h"
#include "structures/queue/native_lease.h"
#include "util/status_macros.h"

namespace structures::queue_internal {

template <typename V>
class NativeClaims {
  using L = RingLayout<V>;
  static constexpr size_t kW = L::kValueWords;

 public:
  // CAS attempts of the quick path before it hands over to the general one.
  static constexpr int kQuickTries = 8;

  // `timeout` bounds a wait for another thread's claim in flight and for a
  // torn seq word to settle.
  NativeClaims(const L& layout, std::chrono::nanoseconds timeout)
      : l_(layout),
        mask_((layout.capacity & (layout.capacity - 1)) == 0 ? layout.capacity - 1 : 0),
        payload_base_(layout.payload_base()),
        timeout_(timeout) {}

  // What the quick path did: completed the operation; found the ring full
  // (or empty) and changed nothing; or changed nothing and leaves the case
  // to Produce (or Consume).
  enum class Quick { kDone, kNone, kGeneral };

  // One value with a power-of-two capacity, in the common cases: the lease
  // open, and the slot ready or the ring plainly full; a lost CAS is retried
  // a few times. The same steps as Produce, without its loop and status
  // plumbing.
  ABSL_ATTRIBUTE_ALWAYS_INLINE Quick QuickProduce(NativeLease& lease, int id, char* part, const V& value) {
    uint64_t t, slot;
    const Quick got = QuickClaim(lease, id, part, /*producer=*/true, &t, &slot);
    if (got != Quick::kDone) return HandOverIfAsked(lease, got);
    rdma::PlainWord* const payload = reinterpret_cast<rdma::PlainWord*>(part + payload_base_ + L::kValueBytes * slot);
    const char* const src = reinterpret_cast<const char*>(&value);
    for (size_t x = 0; x < kW; ++x) payload[x].Store(WordOf(src, x), std::memory_order_relaxed);
    SeqAt(part, slot).Store(t - slot + 1, std::memory_order_release);
    lease.Exit(id);
    if (ABSL_PREDICT_FALSE(lease.NicWaiting())) lease.Close();
    return Quick::kDone;
  }
  // QuickProduce's counterpart: kDone with the value in *out.
  ABSL_ATTRIBUTE_ALWAYS_INLINE Quick QuickConsume(NativeLease& lease, int id, char* part, std::optional<V>* out) {
    uint64_t h, slot;
    const Quick got = QuickClaim(lease, id, part, /*producer=*/false, &h, &slot);
    if (got != Quick::kDone) return HandOverIfAsked(lease, got);
    const rdma::PlainWord* const payload =
        reinterpret_cast<const rdma::PlainWord*>(part + payload_base_ + L::kValueBytes * slot);
    char* const dst = reinterpret_cast<char*>(&out->emplace());
    for (size_t x = 0; x < kW; ++x) SetWord(dst, x, payload[x].Load(std::memory_order_relaxed));
    SeqAt(part, slot).Store(h - slot + l_.capacity, std::memory_order_release);
    lease.Exit(id);
    if (ABSL_PREDICT_FALSE(lease.NicWaiting())) lease.Close();
    return Quick::kDone;
  }

  // Enqueues a prefix of `values` at the ring whose first byte is `part`:
  // how many (0: full). `lease` is the ring's producer lease, `id` the
  // caller's slot in it.
  template <typename OpenFn>
  ABSL_ATTRIBUTE_ALWAYS_INLINE absl::StatusOr<size_t> Produce(NativeLease& lease, int id, char* part,
                                                              absl::Span<const V> values, OpenFn&& open) {
    uint64_t t = 0;
    ASSIGN_OR_RETURN(const size_t n, Claim(lease, id, part, /*producer=*/true, values.size(), open, &t));
    if (n == 0) {
      HandOverIfAsked(lease, Quick::kNone);
      return n;
    }
    for (size_t j = 0; j < n; ++j) {
      rdma::PlainWord* const payload = Payload(part, t + j);
      const char* const src = reinterpret_cast<const char*>(&values[j]);
      for (size_t x = 0; x < kW; ++x) payload[x].Store(WordOf(src, x), std::memory_order_relaxed);
    }
    for (size_t j = 0; j < n; ++j) Seq(part, t + j).Store(l_.HoldsValueOf(t + j), std::memory_order_release);
    lease.Exit(id);
    if (ABSL_PREDICT_FALSE(lease.NicWaiting())) lease.Close();
    return n;
  }

  // Dequeues up to `max` values, oldest first, into `sink(const V&)`: how
  // many (0: empty). `lease` is the ring's consumer lease.
  template <typename OpenFn, typename Sink>
  ABSL_ATTRIBUTE_ALWAYS_INLINE absl::StatusOr<size_t> Consume(NativeLease& lease, int id, char* part, size_t max,
                                                              OpenFn&& open, Sink&& sink) {
    uint64_t h = 0;
    ASSIGN_OR_RETURN(const size_t n, Claim(lease, id, part, /*producer=*/false, max, open, &h));
    if (n == 0) {
      HandOverIfAsked(lease, Quick::kNone);
      return n;
    }
    uint64_t one[kW];
    uint64_t* const words = n == 1 ? one : Scratch(n);
    for (size_t j = 0; j < n; ++j) {
      const rdma::PlainWord* const payload = Payload(part, h + j);
      for (size_t x = 0; x < kW; ++x) words[kW * j + x] = payload[x].Load(std::memory_order_relaxed);
    }
    for (size_t j = 0; j < n; ++j) Seq(part, h + j).Store(l_.FreedAfter(h + j), std::memory_order_release);
    lease.Exit(id);
    for (size_t j = 0; j < n; ++j) sink(L::Decode(&words[kW * j]));
    if (ABSL_PREDICT_FALSE(lease.NicWaiting())) lease.Close();
    return n;
  }

 private:
  // After a "full" or "empty" answer (`got` kNone), the lease goes to a
  // waiting NIC thread as after an operation; returns `got`.
  static Quick HandOverIfAsked(NativeLease& lease, Quick got) {
    if (got == Quick::kNone && ABSL_PREDICT_FALSE(lease.NicWaiting())) lease.Close();
    return got;
  }

  // Claim's quick form, for one position: kDone with the position (and its
  // slot) claimed and the caller inside the lease; kNone when the ring is
  // full (or empty), decided as NotReady does; kGeneral for anything else.
  ABSL_ATTRIBUTE_ALWAYS_INLINE Quick QuickClaim(NativeLease& lease, int id, const char* part, bool producer,
                                                uint64_t* q, uint64_t* slot) {
    if (ABSL_PREDICT_FALSE(mask_ == 0)) return Quick::kGeneral;
    rdma::CpuWord& claim = lease.claim();
    uint64_t c = claim.Load(std::memory_order_acquire);
    for (int tries = 0; tries < kQuickTries; ++tries) {
      if (ABSL_PREDICT_FALSE((c & kClaimOpen) == 0)) return Quick::kGeneral;
      *q = c & ~kClaimOpen;
      *slot = *q & mask_;
      const uint64_t free_for = *q - *slot;  // l_.FreeFor(*q)
      const uint64_t seq = SeqAt(part, *slot).Load(std::memory_order_acquire);
      if (ABSL_PREDICT_TRUE(seq == (producer ? free_for : free_for + 1))) {
        lease.Enter(id);
        if (ABSL_PREDICT_TRUE(claim.CompareExchange(c, c + 1, std::memory_order_acq_rel))) return Quick::kDone;
        lease.Exit(id);  // another thread claimed it: `c` holds the new word
        continue;
      }
      // Full or empty unless the other side is at work on what makes the
      // position ready (NotReady).
      if (!Blocked(producer, *q, seq)) return Quick::kGeneral;
      if (!OtherSideAtWork(part, producer, *q)) return Quick::kNone;
      locks::lock_internal::CpuRelax();
      c = claim.Load(std::memory_order_acquire);
    }
    return Quick::kGeneral;
  }

  // Claims up to `k` ready positions of the lease's side from its claim
  // word, opening the lease first if it is closed. Returns how many (at
  // *first); when more than 0 the caller is inside the lease (Enter) and
  // completes them, then calls lease.Exit(id). 0: full (producer) or empty
  // (consumer), and the caller is not inside.
  template <typename OpenFn>
  ABSL_ATTRIBUTE_ALWAYS_INLINE absl::StatusOr<size_t> Claim(NativeLease& lease, int id, const char* part,
                                                            bool producer, size_t k, OpenFn& open, uint64_t* first) {
    rdma::CpuWord& claim = lease.claim();
    for (;;) {
      uint64_t c = claim.Load(std::memory_order_acquire);
      if (ABSL_PREDICT_FALSE((c & kClaimOpen) == 0)) {
        RETURN_IF_ERROR(lease.Open(open));
        continue;
      }
      const uint64_t q0 = c & ~kClaimOpen;
      size_t n = 0;
      uint64_t seq = 0;
      for (; n < k; ++n) {
        seq = Seq(part, q0 + n).Load(std::memory_order_acquire);
        if (seq != (producer ? l_.FreeFor(q0 + n) : l_.HoldsValueOf(q0 + n))) break;
      }
      if (ABSL_PREDICT_FALSE(n == 0)) {
        // Not ready: full or empty, another side's claim in flight, or a
        // stale claim word or torn seq.
        ASSIGN_OR_RETURN(const bool answer, NotReady(claim, c, part, producer, q0, seq));
        if (answer) return size_t{0};
        continue;
      }
      lease.Enter(id);
      if (ABSL_PREDICT_TRUE(claim.CompareExchange(c, c + n, std::memory_order_acq_rel))) {
        *first = q0;
        return n;
      }
      lease.Exit(id);
    }
  }

  // Position q (the claim word's, read as `c`) holds `seq`, not ready for
  // this side. True: the ring is full (producer) or empty (consumer) now.
  // False: try again (after waiting for the other side's claim in flight).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> NotReady(const rdma::CpuWord& claim, uint64_t c, const char* part,
                                                       bool producer, uint64_t q, uint64_t seq) {
    const bool blocked = Blocked(producer, q, seq);
    // A lap behind: this side's thread of q - capacity is still at work on
    // the slot (a producer not yet published, a consumer not yet freed).
    // Then q cannot be ready: full for a producer (capacity positions
    // claimed, the oldest not even dequeued), empty for a consumer (nobody
    // can have claimed q to produce it).
    const bool lap_behind = q >= l_.capacity && (producer ? seq == l_.FreeFor(q - l_.capacity)
                                                          : seq == l_.HoldsValueOf(q - l_.capacity));
    if (lap_behind && claim.Load(std::memory_order_acquire) == c) return true;
    if (!blocked) {
      // Not blocked, not ready, not a lap behind: the claim word moved on
      // (read again at once), or the word is half
      // written by a NIC WRITE in flight: it must settle within 2 s, as for
      // the NIC path (client.h, Settle), or a writer broke the protocol.
      if (claim.Load(std::memory_order_acquire) == c) RETURN_IF_ERROR(AwaitChange(part, q, seq, /*torn=*/true));
      return false;
    }
    if (!OtherSideAtWork(part, producer, q)) return true;
    RETURN_IF_ERROR(AwaitChange(part, q, seq, /*torn=*/false));
    return false;
  }

  // Position q, whose seq is `seq`, waits for the other side: its slot
  // still holds position q - capacity's value (producer), or is still free
  // for q (consumer).
  bool Blocked(bool producer, uint64_t q, uint64_t seq) const {
    return producer ? (q >= l_.capacity && seq == l_.HoldsValueOf(q - l_.capacity)) : seq == l_.FreeFor(q);
  }
  // For a blocked position q: the other side's claim word passed the
  // position whose completion makes q ready (the consumer of q - capacity,
  // the producer of q), so a thread of that side is at work on it.
  bool OtherSideAtWork(const char* part, bool producer, uint64_t q) const {
    const Header& h = *reinterpret_cast<const Header*>(part);
    const uint64_t other = (producer ? h.head_claim : h.tail_claim).Load(std::memory_order_acquire) & ~kClaimOpen;
    return other > (producer ? q - l_.capacity : q);
  }

  // Waits until q's seq is no longer `seq`: another thread completes the
  // position it claimed (`torn` false: DeadlineExceeded after the timeout),
  // or the rest of a NIC WRITE lands (`torn`: DataLoss after 2 s, a word that
  // stays neither free nor full).
  ABSL_ATTRIBUTE_NOINLINE absl::Status AwaitChange(const char* part, uint64_t q, uint64_t seq, bool torn) {
    const auto limit = torn ? std::chrono::nanoseconds(std::chrono::seconds(2)) : timeout_;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (int spins = 0; Seq(part, q).Load(std::memory_order_acquire) == seq; ++spins) {
      if (spins < 64) continue;
      if ((spins & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
        if (torn) {
          return absl::DataLossError(absl::StrCat("Queue: slot ", l_.Slot(q), " at position ", q, " holds seq ", seq,
                                                  ", neither free nor full (a writer broke the protocol)"));
        }
        return absl::DeadlineExceededError(absl::StrCat("Queue: position ", q, " (slot ", l_.Slot(q),
                                                        "), claimed by another thread, did not complete within ",
                                                        absl::FormatDuration(absl::FromChrono(timeout_))));
      }
      std::this_thread::yield();
    }
    return absl::OkStatus();
  }

  // Word x of a value's bytes, and its inverse: one 8-byte move each (the
  // last word of a value whose size is not a multiple of 8 is shorter).
  // Word by word rather than with L::Encode and L::Decode, whose wide
  // copies of words just stored one by one stall store forwarding.
  static constexpr size_t WordBytes(size_t x) { return sizeof(V) - 8 * x < 8 ? sizeof(V) - 8 * x : 8; }
  static uint64_t WordOf(const char* v, size_t x) {
    uint64_t w = 0;
    std::memcpy(&w, v + 8 * x, WordBytes(x));
    return w;
  }
  static void SetWord(char* v, size_t x, uint64_t w) { std::memcpy(v + 8 * x, &w, WordBytes(x)); }

  rdma::PlainWord& SeqAt(const char* part, uint64_t slot) const {
    return *reinterpret_cast<rdma::PlainWord*>(const_cast<char*>(part) + l_.seq_offset(slot));
  }
  const rdma::PlainWord& Seq(const char* part, uint64_t q) const {
    return *reinterpret_cast<const rdma::PlainWord*>(part + l_.seq_offset(l_.Slot(q)));
  }
  rdma::PlainWord& Seq(char* part, uint64_t q) const {
    return *reinterpret_cast<rdma::PlainWord*>(part + l_.seq_offset(l_.Slot(q)));
  }
  rdma::PlainWord* Payload(char* part, uint64_t q) const {
    return reinterpret_cast<rdma::PlainWord*>(part + l_.payload_offset(l_.Slot(q)));
  }
  uint64_t* Scratch(size_t n) {
    if (scratch_.size() < kW * n) scratch_.resize(kW * n);
    return scratch_.data();
  }

  L l_;
  uint64_t mask_;  // capacity - 1 for a power-of-two capacity, else 0
  uint64_t payload_base_;  // l_.payload_base()
  std::chrono::nanoseconds timeout_;
  std::vector<uint64_t> scratch_;
};

}  // namespace structures::queue_internal

#endif  // STRUCTURES_QUEUE_NATIVE_CLAIMS_H_
