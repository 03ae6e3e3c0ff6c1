#ifndef STRUCTURES_QUEUE_LAYOUT_H_
#define STRUCTURES_QUEUE_LAYOUT_H_

// The queue's memory layout in registered memory, and the slot sequence
// encoding. Pure types and functions: no I/O.
//
// One node's part is one bounded ring:
//
//   offset 0          Header   per side (producers: tail, consumers: head):
//                              ALock, counter, repair flag, claim word
//   kSeqOffset        seq[capacity]      one PlainWord per slot
//   payload_offset    payload[capacity]  kValueWords words per slot
//
// Word domains (docs/design.md §3), fixed by type: the lock lines' as in
// locks/alock.h; the claim words are CpuWords (native threads' CAS, NIC
// READs); counters, repair flags, seq and payload words are PlainWords,
// stored by whoever owns the position or the side and loaded by anyone.
//
// Positions are absolute counters: position p = r * capacity + i is slot i
// in round r. Slot i's seq word is r * capacity while free for p, and
// r * capacity + 1 while it holds p's value; a consumer frees it for
// p + capacity. The all-zero part is an empty queue, both sides closed.
//
// Invariants (docs/design.md §9.4.1): a side's counter is stored only by
// its NIC holder or by the closer of its native lease, its claim word only
// by CAS of native threads and by the lease's opener; a payload is complete
// before its seq publish is visible; a seq value other than the one or two
// a reader expects is a half-written word and is read again.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/rmw_word.h"
#include "structures/common/value_words.h"

namespace structures::queue_internal {

inline constexpr size_t kMaxValueBytes = 56;
inline constexpr uint64_t kMaxCapacity = uint64_t{1} << 32;
// With one slot, "holds position p's value" (p + 1) and "free for position
// p + 1" (also p + 1) would be the same seq word: a full ring would read as
// free. Two slots keep r * capacity + 1 below (r + 1) * capacity.
inline constexpr uint64_t kMinCapacity = 2;

template <typename V>
concept QueueValue = std::is_trivially_copyable_v<V> && sizeof(V) <= kMaxValueBytes;

// The producers' two lines, then the consumers' two: each side's lock and
// counter share a 128-byte pair, which CPUs prefetch together, and the two
// sides share none.
struct alignas(64) Header {
  locks::ALockWord tail_lock;  // producers
  rdma::PlainWord tail;        // next position to enqueue
  // Nonzero: a holder of tail_lock died and the home released it; the next
  // holder looks for what it completed (LeftByDeadProducer) and clears it.
  rdma::PlainWord tail_repair;
  // The native producers' claim word while their lease is open (native_lease.h):
  // kClaimOpen | next position. NIC code only READs it.
  rdma::CpuWord tail_claim;
  uint64_t pad_t_[5];
  locks::ALockWord head_lock;  // consumers
  rdma::PlainWord head;        // next position to dequeue
  rdma::PlainWord head_repair;  // as tail_repair, for head_lock
  rdma::CpuWord head_claim;     // as tail_claim, for the native consumers
  uint64_t pad_h_[5];
};
static_assert(std::is_standard_layout_v<Header> && sizeof(Header) == 256);
static_assert(offsetof(Header, tail_lock) == 0 && offsetof(Header, tail) == 64 &&
              offsetof(Header, tail_repair) == 72 && offsetof(Header, tail_claim) == 80 &&
              offsetof(Header, head_lock) == 128 && offsetof(Header, head) == 192 &&
              offsetof(Header, head_repair) == 200 && offsetof(Header, head_claim) == 208);

inline constexpr uint64_t kSeqOffset = sizeof(Header);

// A claim word (Header::tail_claim, head_claim) with this bit is open: native
// threads claim positions from its low bits (structures/queue/native_lease.h).
inline constexpr uint64_t kClaimOpen = uint64_t{1} << 63;
// How far a side has got: the larger of its counter (the NIC holders') and
// its claim word's position (the native threads'), from the three words
// counter, repair flag, claim word as they lie in the header.
inline uint64_t Frontier(uint64_t counter, uint64_t claim) {
  const uint64_t claimed = claim & ~kClaimOpen;
  return claimed > counter ? claimed : counter;
}
// A side's counter, from the ring's base (its repair flag and claim word follow it).
inline constexpr uint64_t CounterOffset(bool producer) {
  return producer ? offsetof(Header, tail) : offsetof(Header, head);
}

// The claim word of the side opposite to `producer`'s, from the ring's base:
// what a producer finding its slot not yet freed, or a consumer finding its
// slot not yet published, looks at (native_claims.h).
inline constexpr uint64_t OtherClaimOffset(bool producer) {
  return producer ? offsetof(Header, head_claim) : offsetof(Header, tail_claim);
}

// The producers' (tail) or consumers' (head) lock, from the ring's base.
inline constexpr uint64_t LockOffset(bool producer) {
  return producer ? offsetof(Header, tail_lock) : offsetof(Header, head_lock);
}

// The ring's offsets for a value type and a capacity (known at run time).
template <typename V>
struct RingLayout {
  static constexpr size_t kValueWords = ::structures::kValueWords<V>;
  static constexpr size_t kValueBytes = 8 * kValueWords;

  uint64_t capacity = 0;

  static constexpr uint64_t RoundUp64(uint64_t n) { return (n + 63) / 64 * 64; }
  uint64_t seq_offset(uint64_t slot) const { return kSeqOffset + 8 * slot; }
  uint64_t payload_base() const { return kSeqOffset + RoundUp64(8 * capacity); }
  uint64_t payload_offset(uint64_t slot) const { return payload_base() + kValueBytes * slot; }
  uint64_t part_bytes() const { return payload_base() + RoundUp64(kValueBytes * capacity); }

  // A power-of-two capacity takes a mask instead of a division (tens of
  // cycles, several per operation).
  uint64_t Slot(uint64_t position) const {
    return (capacity & (capacity - 1)) == 0 ? position & (capacity - 1) : position % capacity;
  }
  // seq word values for `position`.
  uint64_t FreeFor(uint64_t position) const { return position - Slot(position); }
  uint64_t HoldsValueOf(uint64_t position) const { return FreeFor(position) + 1; }
  uint64_t FreedAfter(uint64_t position) const { return FreeFor(position) + capacity; }

  static void Encode(const V& v, uint64_t* words) { EncodeValueWords(v, words); }
  static V Decode(const uint64_t* words) { return DecodeValueWords<V>(words); }
};

// What a seq word says to a producer at position p, or to a consumer at h.
enum class SlotState { kFree, kFull, kTorn };

template <typename V>
SlotState ForProducer(const RingLayout<V>& l, uint64_t seq, uint64_t p) {
  if (seq == l.FreeFor(p)) return SlotState::kFree;
  if (p >= l.capacity && seq == l.HoldsValueOf(p - l.capacity)) return SlotState::kFull;
  return SlotState::kTorn;
}
template <typename V>
SlotState ForConsumer(const RingLayout<V>& l, uint64_t seq, uint64_t h) {
  if (seq == l.HoldsValueOf(h)) return SlotState::kFull;
  if (seq == l.FreeFor(h)) return SlotState::kFree;  // empty
  return SlotState::kTorn;
}

// Crash repair (docs/design.md §9.1, "Crash repair"): what a side's lock
// holder that died may have left for the next holder, which looks only
// after the home flagged the side (Header::tail_repair, head_repair). Each
// side's last WRITE moves its counter, after the seq WRITEs of the same
// chain, and a seq only moves forward (free, holds the value, freed a round
// later), so under the lock only a dead holder can have left the seq at the
// counter already past the state the counter asks for: published (or
// already consumed) at `tail`, freed (or already published again) at
// `head`. Such a position took effect and the counter moves past it. (A
// seq READ can tear while the other side stores it; the caller re-reads
// until the value is stable before it trusts a match.)
template <typename V>
bool LeftByDeadProducer(const RingLayout<V>& l, uint64_t seq, uint64_t tail) {
  return seq == l.HoldsValueOf(tail) || seq == l.FreedAfter(tail);
}
template <typename V>
bool LeftByDeadConsumer(const RingLayout<V>& l, uint64_t seq, uint64_t head) {
  return seq == l.FreedAfter(head) || seq == l.HoldsValueOf(head + l.capacity);
}

}  // namespace structures::queue_internal

#endif  // STRUCTURES_QUEUE_LAYOUT_H_
