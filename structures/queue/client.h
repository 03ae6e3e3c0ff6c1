#ifndef STRUCTURES_QUEUE_CLIENT_H_
#define STRUCTURES_QUEUE_CLIENT_H_

// One thread's handle on a Queue (queue.h has the contract: paths,
// concurrency, costs, errors). Native operations claim positions inside the
// ring side's native lease (native_claims.h, native_lease.h); NIC operations
// run the producer and consumer steps below under the side's ALock, over
// RemoteRing (rdma_path.h: READs, and WRITEs chained before the unlock). The
// crash repair runs the same steps' repair part natively, over NativeRing
// (native_path.h), when a lease opens. Routing and lock handling are the
// shared StructureClient's.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/session.h"
#include "structures/common/client.h"
#include "structures/queue/layout.h"
#include "structures/queue/native_claims.h"
#include "structures/queue/native_lease.h"
#include "structures/queue/native_path.h"
#include "structures/queue/policy.h"
#include "structures/queue/rdma_path.h"
#include "util/status_macros.h"

namespace structures {

namespace queue_internal {

// Not thread-safe; use one per thread (each with the thread's own Session).
// Made by Queue::NewClient. `Checks` is ShippedChecks except in tests
// (policy.h).
template <typename V, typename Checks>
class BasicQueueClient {
  using L = queue_internal::RingLayout<V>;
  using SlotState = queue_internal::SlotState;
  static constexpr size_t kW = L::kValueWords;

 public:
  // `leases`: the Queue's native leases, shared by its native clients;
  // native operations go through them only (without a lease for a ring they
  // fail with FailedPrecondition).
  // `timeout` bounds a native wait for another operation in flight.
  BasicQueueClient(StructureClient common, uint64_t capacity, std::shared_ptr<NativeLeases> leases,
                   std::chrono::nanoseconds timeout)
      : c_(std::move(common)),
        l_{capacity},
        leases_(std::move(leases)),
        timeout_(timeout),
        native_(l_, timeout),
        guess_(2 * static_cast<size_t>(c_.num_nodes()), 0) {}
  BasicQueueClient(const BasicQueueClient&) = delete;
  BasicQueueClient& operator=(const BasicQueueClient&) = delete;
  ~BasicQueueClient() {
    if (lease_id_ >= 0) leases_->Leave(lease_id_);
  }

  // Appends `value` to `home`'s queue. True if enqueued; false if the queue
  // was full (nothing changed).
  absl::StatusOr<bool> Enqueue(rdma::NodeId home, const V& value, Path path = Path::kAuto) {
    if (Quick(home, path)) {
      const auto got = native_.QuickProduce(*quick_leases_[0], lease_id_, quick_part_, value);
      if (ABSL_PREDICT_TRUE(got != NativeClaims<V>::Quick::kGeneral)) return got == NativeClaims<V>::Quick::kDone;
    }
    return EnqueueOne(home, value, path);
  }
  // Removes the oldest value of `home`'s queue; nullopt if it was empty.
  absl::StatusOr<std::optional<V>> Dequeue(rdma::NodeId home, Path path = Path::kAuto) {
    // One object returned on every path (no copy of the value on the way).
    absl::StatusOr<std::optional<V>> result(std::nullopt);  // empty unless a value comes
    if (!Quick(home, path) || ABSL_PREDICT_FALSE(native_.QuickConsume(*quick_leases_[1], lease_id_, quick_part_,
                                                                      &*result) == NativeClaims<V>::Quick::kGeneral)) {
      result = DequeueOne(home, path);
    }
    return result;
  }
  // Appends a prefix of `values` in order, in one claim (natively) or under
  // one acquisition of the tail lock: as many as fit, stopping early at a
  // slot whose consumer is still freeing it. Returns how many (0 when
  // full). InvalidArgument when `values` is longer than the capacity.
  absl::StatusOr<size_t> EnqueueBatch(rdma::NodeId home, absl::Span<const V> values, Path path = Path::kAuto) {
    RETURN_IF_ERROR(CheckBatch(values.size()));
    Route r;
    RETURN_IF_ERROR(c_.RouteTo(home, path, &r));
    if (r.native()) return NativeProduce(r, values);
    size_t done = 0;
    RETURN_IF_ERROR(Locked(r, /*producer=*/true, values.size(), [&](auto& ring) -> absl::Status {
      ASSIGN_OR_RETURN(done, ProduceUnderLock(ring, values));
      return absl::OkStatus();
    }));
    return done;
  }
  // Removes up to `max` of the oldest values under one acquisition of the
  // head lock, oldest first (empty when the queue was). InvalidArgument when
  // `max` is 0 or more than the capacity.
  absl::StatusOr<std::vector<V>> DequeueBatch(rdma::NodeId home, size_t max, Path path = Path::kAuto) {
    std::vector<V> out;
    RETURN_IF_ERROR(DequeueInto(home, max, path, [&](const V& v) { out.push_back(v); }));
    return out;
  }
  // Values in `home`'s queue: the tail side's frontier minus the head
  // side's (each the larger of its counter and its native claim), loaded
  // without a lock, so under concurrent producers and consumers it is only
  // approximate (between 0 and the capacity, off by the operations that
  // overlap it).
  absl::StatusOr<size_t> Size(rdma::NodeId home, Path path = Path::kAuto) {
    Route r;
    RETURN_IF_ERROR(c_.RouteTo(home, path, &r));
    uint64_t head = 0, tail = 0;
    if (r.native()) {
      queue_internal::NativeRing<V> ring(reinterpret_cast<char*>(&Local(r)), l_, true);
      head = ring.Frontier(/*producer=*/false);
      tail = ring.Frontier(/*producer=*/true);
    } else {
      queue_internal::RemoteRing<V> ring(*c_.session(), r.base, l_, true);
      RETURN_IF_ERROR(ring.LoadFrontier(/*producer=*/false, &head));
      RETURN_IF_ERROR(ring.LoadFrontier(/*producer=*/true, &tail));
    }
    return static_cast<size_t>(std::min<uint64_t>(tail >= head ? tail - head : 0, l_.capacity));
  }

  uint64_t capacity() const { return l_.capacity; }
  rdma::NodeId node() const { return c_.node().id(); }

 private:
  // Enqueue and Dequeue past the quick path (kept out of line, so the quick
  // path stays a small function).
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<bool> EnqueueOne(rdma::NodeId home, const V& value, Path path) {
    ASSIGN_OR_RETURN(size_t n, EnqueueBatch(home, absl::MakeConstSpan(&value, 1), path));
    return n == 1;
  }
  ABSL_ATTRIBUTE_NOINLINE absl::StatusOr<std::optional<V>> DequeueOne(rdma::NodeId home, Path path) {
    std::optional<V> out;
    RETURN_IF_ERROR(DequeueInto(home, 1, path, [&](const V& v) { out = v; }));
    return out;
  }

  absl::Status CheckBatch(size_t n) const {
    if (ABSL_PREDICT_FALSE(n == 0 || n > l_.capacity)) return BadBatch(n);
    return absl::OkStatus();
  }
  ABSL_ATTRIBUTE_NOINLINE absl::Status BadBatch(size_t n) const {
    return absl::InvalidArgumentError(
        absl::StrCat("Queue: a batch of ", n, " values; batches hold 1..capacity (", l_.capacity, ") values"));
  }

  queue_internal::Header& Local(const Route& r) const {
    return rdma::RemoteRef<queue_internal::Header>::At(r.base).Local(c_.node().id());
  }

  template <typename Sink>
  absl::Status DequeueInto(rdma::NodeId home, size_t max, Path path, Sink&& sink) {
    RETURN_IF_ERROR(CheckBatch(max));
    Route r;
    RETURN_IF_ERROR(c_.RouteTo(home, path, &r));
    if (r.native()) return NativeConsume(r, max, sink);
    return Locked(r, /*producer=*/false, max, [&](auto& ring) { return ConsumeUnderLock(ring, max, sink); });
  }

  // ------------------------------------------------------- native path

  // A single-value operation on this node's own ring, natively, after a
  // native operation there set this client up (LeaseFor): the quick path
  // (NativeClaims::QuickProduce, QuickConsume) may serve it.
  ABSL_ATTRIBUTE_ALWAYS_INLINE bool Quick(rdma::NodeId home, Path path) const {
    return int{home} == quick_home_ && (path == Path::kAuto || path == Path::kNative) && !c_.node().is_shut_down();
  }

  // This process's lease of `r`'s ring side, with this client joined to the
  // leases (a slot for Enter/Exit).
  absl::StatusOr<NativeLease*> LeaseFor(const Route& r, bool producer) {
    NativeLease* lease = leases_ != nullptr ? leases_->at(r.home, producer) : nullptr;
    if (ABSL_PREDICT_FALSE(lease == nullptr)) {
      return absl::FailedPreconditionError(absl::StrCat("Queue: no native lease for node ", r.home,
                                                        "'s ring in this client (made without its Queue?)"));
    }
    if (ABSL_PREDICT_FALSE(lease_id_ < 0)) {
      ASSIGN_OR_RETURN(lease_id_, leases_->Join());
      quick_home_ = r.home;
      quick_part_ = reinterpret_cast<char*>(&Local(r));
      quick_leases_[0] = leases_->at(r.home, true);
      quick_leases_[1] = leases_->at(r.home, false);
    }
    return lease;
  }

  // What the lease opener runs under the side's ALock before it opens: the
  // crash repair of a dead NIC holder (SkipPositionsOfTheDead), which may
  // move `*counter`.
  absl::Status RepairBeforeOpen(char* part, bool producer, uint64_t* counter) {
    queue_internal::NativeRing<V> ring(part, l_, producer);
    RETURN_IF_ERROR(ring.LoadCounter(counter));
    if (ring.repair() == 0) return absl::OkStatus();
    uint64_t seq = 0;
    if (producer) {
      return SkipPositionsOfTheDead(ring, counter, 1, &seq, [&](uint64_t s, uint64_t p) {
        return queue_internal::LeftByDeadProducer(l_, s, p);
      });
    }
    return SkipPositionsOfTheDead(ring, counter, 1, &seq, [&](uint64_t s, uint64_t p) {
      return queue_internal::LeftByDeadConsumer(l_, s, p);
    });
  }

  absl::StatusOr<size_t> NativeProduce(const Route& r, absl::Span<const V> values) {
    current_home_ = r.home;
    ASSIGN_OR_RETURN(NativeLease * lease, LeaseFor(r, /*producer=*/true));
    char* const part = reinterpret_cast<char*>(&Local(r));
    return native_.Produce(*lease, lease_id_, part, values,
                           [&](uint64_t* counter) { return RepairBeforeOpen(part, true, counter); });
  }
  template <typename Sink>
  absl::Status NativeConsume(const Route& r, size_t max, Sink& sink) {
    current_home_ = r.home;
    ASSIGN_OR_RETURN(NativeLease * lease, LeaseFor(r, /*producer=*/false));
    char* const part = reinterpret_cast<char*>(&Local(r));
    return native_
        .Consume(*lease, lease_id_, part, max,
                 [&](uint64_t* counter) { return RepairBeforeOpen(part, false, counter); }, sink)
        .status();
  }

  // Takes the tail (producer) or head lock of `r`'s ring over the NIC path,
  // runs `step(ring)`, and releases. The acquire's chain also reads the counter and the seq (and, for consumers,
  // payload) words at the position this client saw last: when that guess is
  // right, the step needs no READ of its own.
  template <typename Step>
  absl::Status Locked(const Route& r, bool producer, size_t k, Step&& step) {
    current_home_ = r.home;
    const auto hdr = rdma::RemoteRef<queue_internal::Header>::At(r.base);
    const rdma::RemotePtr lock =
        (producer ? hdr.Field(&queue_internal::Header::tail_lock) : hdr.Field(&queue_internal::Header::head_lock))
            .ptr();
    queue_internal::RemoteRing<V> ring(*c_.session(), r.base, l_, producer);
    const uint64_t& guess = Guess(producer);
    const size_t n = static_cast<size_t>(std::min<uint64_t>(k, l_.capacity - l_.Slot(guess)));
    prime_seqs_.resize(n);
    rdma::ChainedRead also[4];
    size_t num_also = 0;
    also[num_also++] = {(producer ? hdr.Field(&queue_internal::Header::tail) : hdr.Field(&queue_internal::Header::head))
                            .ptr(),
                        prime_counter_, sizeof prime_counter_};  // the counter and the side's repair flag
    also[num_also++] = {r.base + l_.seq_offset(l_.Slot(guess)), prime_seqs_.data(), 8 * n};
    if (!producer) {  // after the seqs: same QP, so payloads are read after them
      prime_payloads_.resize(kW * n);
      also[num_also++] = {r.base + l_.payload_offset(l_.Slot(guess)), prime_payloads_.data(), 8 * kW * n};
    }
    also[num_also++] = {r.base + queue_internal::OtherClaimOffset(producer), &prime_other_, sizeof prime_other_};
    const uint64_t guessed = guess;
    return c_.WithLockAndRead(r, lock, absl::MakeConstSpan(also, num_also), [&](bool also_done) {
      if (also_done) {
        const bool hit = prime_counter_[0] == guessed;
        ring.Prime(prime_counter_[0], prime_counter_[1], prime_other_, guessed, hit ? n : 0, prime_seqs_.data(),
                   producer ? nullptr : prime_payloads_.data());
      }
      return step(ring);
    });
  }

  // Re-reads a seq word (and, for a consumer, its payload after it) that was
  // seen half written, until it reads whole: the other side's store is in
  // flight. DataLoss if it never does (a writer that broke the protocol).
  template <typename Ring, typename Classify>
  absl::Status Settle(Ring& ring, uint64_t position, uint64_t* seq, uint64_t* payload, Classify&& classify,
                      SlotState* state) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    ring.Unprime();
    for (int tries = 0; *state == SlotState::kTorn; ++tries) {
      if (std::chrono::steady_clock::now() > deadline) {
        return c_.Corrupt(absl::StrCat("the queue on node ", current_home_, ": slot ", l_.Slot(position),
                                       " at position ", position, " holds seq ", *seq, ", neither free nor full"));
      }
      if (tries > 2) std::this_thread::yield();
      RETURN_IF_ERROR(ring.LoadSeqs(position, 1, seq));
      if (payload != nullptr) RETURN_IF_ERROR(ring.LoadPayloads(position, 1, payload));
      *state = classify(*seq);
    }
    return absl::OkStatus();
  }

  // Under a side's lock, position `position` is not ready (its slot not yet
  // freed for a producer, not yet published for a consumer). If the other
  // side's native threads have claimed `unblocker` (the position whose
  // completion makes it ready) they are at work on it: waits until the seq
  // changes, reloads the k seqs from `position` and returns true. False:
  // the ring is full (or empty). `floor` is the least the other side's open
  // claim word can hold (native claimers are then past the other side's
  // counter: the head for a producer's check, `position` for a consumer's):
  // an open value below it is a READ torn by a claim CAS, read again (an
  // 8-byte READ on rxe copies bytes while the CPU may store them).
  // DeadlineExceeded after the lock timeout.
  template <typename Ring>
  absl::StatusOr<bool> AwaitOtherSide(Ring& ring, uint64_t position, uint64_t unblocker, uint64_t floor, size_t k,
                                      uint64_t* seqs) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    auto past_unblocker = [&](bool fresh) -> absl::StatusOr<bool> {
      uint64_t other = 0;
      RETURN_IF_ERROR(fresh ? ring.ReadOtherClaim(&other) : ring.LoadOtherClaim(&other));
      for (int tries = 0; (other & queue_internal::kClaimOpen) != 0 && (other & ~queue_internal::kClaimOpen) < floor;
           ++tries) {
        if (std::chrono::steady_clock::now() > deadline) {
          return absl::DeadlineExceededError(absl::StrCat("Queue on node ", current_home_,
                                                          ": the other side's claim word read torn for ",
                                                          absl::FormatDuration(absl::FromChrono(timeout_))));
        }
        if (tries > 2) std::this_thread::yield();
        RETURN_IF_ERROR(ring.ReadOtherClaim(&other));
      }
      return (other & ~queue_internal::kClaimOpen) > unblocker;
    };
    ASSIGN_OR_RETURN(bool in_flight, past_unblocker(/*fresh=*/false));
    if (!in_flight) return false;
    const uint64_t was = seqs[0];
    ring.Unprime();
    for (int tries = 0;; ++tries) {
      RETURN_IF_ERROR(ring.LoadSeqs(position, k, seqs));
      if (seqs[0] != was) return true;
      // A READ torn high can also look past `unblocker`: read the claim
      // word again now and then.
      if ((tries & 15) == 15) {
        ASSIGN_OR_RETURN(in_flight, past_unblocker(/*fresh=*/true));
        if (!in_flight) return false;
      }
      if (std::chrono::steady_clock::now() > deadline) {
        return absl::DeadlineExceededError(absl::StrCat("Queue on node ", current_home_, ": position ", position,
                                                        ", claimed by a native thread, did not complete within ",
                                                        absl::FormatDuration(absl::FromChrono(timeout_))));
      }
      if (tries > 2) std::this_thread::yield();
    }
  }

  // Under a side's lock, when the home flagged it (ring.repair(): a holder
  // of this lock died): positions from `*counter` that the dead holder
  // completed without moving the counter (left_by_dead says so of a seq;
  // queue_internal::LeftByDeadProducer, LeftByDeadConsumer). They took
  // effect: the counter moves past them, the flag is cleared, and the seqs
  // from the new counter are loaded into `seqs` again. A seq is trusted
  // only once two fresh reads 1 ms apart agree (a READ racing the other
  // side's store can tear into a value that looks like a match).
  template <typename Ring, typename LeftByDead>
  absl::Status SkipPositionsOfTheDead(Ring& ring, uint64_t* counter, size_t k, uint64_t* seqs, LeftByDead&& left_by_dead) {
    if (ring.repair() == 0) return absl::OkStatus();
    auto stable_seq = [&](uint64_t position, uint64_t* seq) -> absl::Status {
      for (uint64_t again = ~*seq;; *seq = again) {
        ring.Unprime();
        RETURN_IF_ERROR(ring.LoadSeqs(position, 1, seq));
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        RETURN_IF_ERROR(ring.LoadSeqs(position, 1, &again));
        if (again == *seq) return absl::OkStatus();
      }
    };
    uint64_t c = *counter;
    uint64_t seq = 0;
    RETURN_IF_ERROR(stable_seq(c, &seq));
    while (left_by_dead(seq, c) && c - *counter < l_.capacity) RETURN_IF_ERROR(stable_seq(++c, &seq));
    if (c != *counter) ring.StoreCounter(c);
    ring.ClearRepair();
    RETURN_IF_ERROR(ring.Flush());
    *counter = c;
    return ring.LoadSeqs(c, k, seqs);
  }

  // The producer step, under the tail lock: how many of `values` fit, their
  // payloads, then their seq publishes, then the new tail.
  template <typename Ring>
  absl::StatusOr<size_t> ProduceUnderLock(Ring& ring, absl::Span<const V> values) {
    uint64_t t;
    RETURN_IF_ERROR(ring.LoadCounter(&t));
    const size_t k = values.size();
    uint64_t* const seqs = SeqScratch(k);
    RETURN_IF_ERROR(ring.LoadSeqs(t, k, seqs));
    RETURN_IF_ERROR(SkipPositionsOfTheDead(ring, &t, k, seqs, [&](uint64_t s, uint64_t p) {
      return queue_internal::LeftByDeadProducer(l_, s, p);
    }));
    size_t n = 0;
    for (;;) {
      for (; n < k; ++n) {
        SlotState st = queue_internal::ForProducer(l_, seqs[n], t + n);
        if (st == SlotState::kTorn) {
          RETURN_IF_ERROR(Settle(ring, t + n, &seqs[n], nullptr,
                                 [&](uint64_t s) { return queue_internal::ForProducer(l_, s, t + n); }, &st));
        }
        if (st == SlotState::kFull) break;
      }
      // Full, unless native consumers claimed position t - capacity and are
      // still freeing it.
      if (n > 0 || t < l_.capacity) break;
      ASSIGN_OR_RETURN(const bool again, AwaitOtherSide(ring, t, t - l_.capacity, t - l_.capacity, k, seqs));
      if (!again) break;
    }
    Guess(/*producer=*/true) = t + n;
    if (n == 0) return size_t{0};
    uint64_t* const words = WordScratch(n);
    for (size_t j = 0; j < n; ++j) {
      L::Encode(values[j], &words[kW * j]);
      seqs[j] = l_.HoldsValueOf(t + j);
    }
    if constexpr (Checks::kPublishAfterPayload) {
      ring.StorePayloads(t, n, words);
      ring.StoreSeqs(t, n, seqs);
    } else {  // test-only mutant: publish, then write the payload
      ring.StoreSeqs(t, n, seqs);
      ring.StorePayloads(t, n, words);
    }
    ring.StoreCounter(t + n);
    RETURN_IF_ERROR(ring.Flush());
    return n;
  }

  // The consumer step, under the head lock: the seq words from the head, the
  // payloads after them, then the frees and the new head.
  template <typename Ring, typename Sink>
  absl::Status ConsumeUnderLock(Ring& ring, size_t max, Sink& sink) {
    uint64_t h;
    RETURN_IF_ERROR(ring.LoadCounter(&h));
    uint64_t* const seqs = SeqScratch(max);
    uint64_t* const words = WordScratch(max);
    if constexpr (Checks::kSeqBeforePayload) {
      RETURN_IF_ERROR(ring.LoadSeqs(h, max, seqs));
      RETURN_IF_ERROR(ring.LoadPayloads(h, max, words));
    } else {  // test-only mutant: payload first
      RETURN_IF_ERROR(ring.LoadPayloads(h, max, words));
      RETURN_IF_ERROR(ring.LoadSeqs(h, max, seqs));
    }
    if (ring.repair() != 0) {
      RETURN_IF_ERROR(SkipPositionsOfTheDead(ring, &h, max, seqs, [&](uint64_t s, uint64_t p) {
        return queue_internal::LeftByDeadConsumer(l_, s, p);
      }));
      RETURN_IF_ERROR(ring.LoadPayloads(h, max, words));  // after the seqs, as above
    }
    size_t n = 0;
    for (;;) {
      for (; n < max; ++n) {
        SlotState st = queue_internal::ForConsumer(l_, seqs[n], h + n);
        if (st == SlotState::kTorn) {
          RETURN_IF_ERROR(Settle(ring, h + n, &seqs[n], &words[kW * n],
                                 [&](uint64_t s) { return queue_internal::ForConsumer(l_, s, h + n); }, &st));
        }
        if (st == SlotState::kFree && (Checks::kCheckEmpty || n > 0)) break;  // empty from here
      }
      // Empty, unless native producers claimed position h and are still
      // publishing it.
      if (n > 0 || !Checks::kCheckEmpty) break;
      ASSIGN_OR_RETURN(const bool again, AwaitOtherSide(ring, h, h, h, max, seqs));
      if (!again) break;
      RETURN_IF_ERROR(ring.LoadPayloads(h, max, words));  // after the seqs, as above
    }
    Guess(/*producer=*/false) = h + n;
    if (n == 0) return absl::OkStatus();
    for (size_t j = 0; j < n; ++j) {
      sink(L::Decode(&words[kW * j]));
      seqs[j] = l_.FreedAfter(h + j);
    }
    ring.StoreSeqs(h, n, seqs);
    ring.StoreCounter(h + n);
    return ring.Flush();
  }

  // Room for the seq words (SeqScratch) or payload words (WordScratch) of n
  // positions: inline up to kInlineValues positions (every single-value
  // operation and small batches), else a member vector grown to fit.
  static constexpr size_t kInlineValues = 16;
  uint64_t* SeqScratch(size_t n) {
    if (n <= kInlineValues) return seqs_inline_.data();
    if (seqs_.size() < n) seqs_.resize(n);
    return seqs_.data();
  }
  uint64_t* WordScratch(size_t n) {
    if (n <= kInlineValues) return words_inline_.data();
    if (words_.size() < kW * n) words_.resize(kW * n);
    return words_.data();
  }

  // This client's guess of the next tail (producer) or head position of the
  // ring it is working on (used by the NIC path's chained READs).
  uint64_t& Guess(bool producer) { return guess_[2 * current_home_ + (producer ? 0 : 1)]; }

  StructureClient c_;
  const L l_;
  std::shared_ptr<NativeLeases> leases_;
  std::chrono::nanoseconds timeout_;  // the lock timeout: bounds waits for native claims
  queue_internal::NativeClaims<V> native_;
  int lease_id_ = -1;  // this client's slot in leases_ (Join on first native use)
  // The quick path's ring (Quick): this node's, once lease_id_ is set.
  int quick_home_ = -1;  // a NodeId, or -1
  char* quick_part_ = nullptr;
  NativeLease* quick_leases_[2] = {nullptr, nullptr};  // producers', consumers'
  std::vector<uint64_t> guess_;  // per node: [tail guess, head guess]
  rdma::NodeId current_home_ = 0;
  uint64_t prime_counter_[2] = {0, 0};  // a side's counter and repair flag
  uint64_t prime_other_ = 0;             // the other side's claim word
  std::vector<uint64_t> prime_seqs_, prime_payloads_;
  // Scratch for a step's seq and payload words (SeqScratch, WordScratch).
  std::array<uint64_t, kInlineValues> seqs_inline_{};
  std::array<uint64_t, kInlineValues * kW> words_inline_{};
  std::vector<uint64_t> seqs_, words_;
};

}  // namespace queue_internal
}  // namespace structures

#endif  // STRUCTURES_QUEUE_CLIENT_H_
