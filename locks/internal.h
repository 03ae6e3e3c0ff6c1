#ifndef LOCKS_INTERNAL_H_
#define LOCKS_INTERNAL_H_

// Internal helpers of the lock clients in locks/ (ALock and the baselines);
// not part of the API, and nothing outside locks/ and its tests uses them.
//
//   Spinner          a bounded wait: spin, then yield, until ClientOptions::timeout
//   CheckLockPtr     a lock pointer's null / alignment check (InvalidArgument)
//   CompareAndSwapReconnecting
//                    a NIC CAS that must land even after the QP failed:
//                    reconnect and try again, three attempts in all
//   NamesDescriptorLine, CheckDescriptorRaw
//                    whether a queue word read from registered memory names a
//                    descriptor line; a waiter acts only on complete values
//                    (docs/design.md §4, "Defending against torn WRITEs")
//   DescriptorLines  a client's descriptor lines; a line an error may have
//                    left in a queue is retired, never reused
//   HeldSlots        the locks a client holds, one slot each
//
// Like the clients that use them, none of these is thread-safe: each belongs
// to one client, used by one thread. Errors are returned as statuses, never
// aborts: a corrupted queue word is DataLoss naming where it was read.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "locks/lock.h"
#include "rdma/node.h"
#include "rdma/op_counters.h"
#include "rdma/remote_ptr.h"
#include "rdma/remote_ref.h"
#include "rdma/rmw_word.h"
#include "rdma/session.h"

namespace locks::lock_internal {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A bounded wait: busy-spins `spins_before_yield` times, then yields the CPU
// on every poll, and reports when `timeout` has passed. Reads the clock only
// once it yields, so short waits cost nothing extra.
class Spinner {
 public:
  explicit Spinner(const ClientOptions& o) : timeout_(o.timeout), yield_after_(o.spins_before_yield) {}

  // Call after each unsuccessful poll. False once the deadline has passed.
  // The deadline starts at the first yield (at once when
  // spins_before_yield <= 0).
  bool Spin() {
    ++n_;
    if (n_ < yield_after_) {
      CpuRelax();
      return true;
    }
    if (!deadline_set_) {
      deadline_ = std::chrono::steady_clock::now() + timeout_;
      deadline_set_ = true;
    }
    std::this_thread::yield();
    return (n_ & 15) != 0 || std::chrono::steady_clock::now() < deadline_;
  }
  uint64_t spins() const { return n_; }

  absl::Status Timeout(absl::string_view what, rdma::RemotePtr lock) const {
    return absl::DeadlineExceededError(absl::StrCat(what, " on lock ", lock.node(), ":0x",
                                                    absl::Hex(lock.address()), " took longer than ",
                                                    absl::FormatDuration(absl::FromChrono(timeout_)),
                                                    " (ClientOptions::timeout); a holder may have died"));
  }

 private:
  std::chrono::nanoseconds timeout_;
  int64_t yield_after_;
  int64_t n_ = 0;
  bool deadline_set_ = false;
  std::chrono::steady_clock::time_point deadline_{};
};

// CAS on `word` (on node `node`) through `s`; if the NIC op fails (a QP in
// error after an earlier failed chain), reconnect `s` to `node` and try
// again, three attempts in all. For the CASes that undo or release a hold
// nobody else would: a repair's release, a NIC locker taking its token or
// announced turn back after an error.
inline absl::StatusOr<uint64_t> CompareAndSwapReconnecting(rdma::Session& s, rdma::NodeId node,
                                                           const rdma::RemoteWord<rdma::NicWord>& word,
                                                           uint64_t expected, uint64_t desired) {
  absl::StatusOr<uint64_t> old = word.CompareAndSwap(s, expected, desired);
  for (int attempt = 1; !old.ok() && attempt < 3; ++attempt) {
    (void)s.Reconnect(node);
    old = word.CompareAndSwap(s, expected, desired);
  }
  return old;
}

inline absl::Status CheckLockPtr(rdma::RemotePtr lock) {
  if (lock.is_null()) return absl::InvalidArgumentError("null lock pointer");
  if (lock.address() % kLockAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat("lock pointer 0x", absl::Hex(lock.address()), " is not ",
                                                   kLockAlign, "-byte aligned"));
  }
  return absl::OkStatus();
}

// Every queue lock's descriptor (ALock's and the MCS baselines') is one line.
inline constexpr size_t kDescriptorBytes = 64;

// Whether `raw` names a descriptor line: kDescriptorBytes-aligned, inside its
// node's registered arena as `s` knows it. A queue link arrives by RDMA WRITE,
// and on Soft-RoCE a CPU load can see that 8-byte WRITE half landed
// (tests/verbs/README.md "rxe torn WRITE"): waiters use this to wait for the
// whole value before acting on it.
inline bool NamesDescriptorLine(const rdma::Session& s, uint64_t raw) {
  const rdma::RemotePtr p = rdma::RemotePtr::FromRaw(raw);
  return p.address() % kDescriptorBytes == 0 && s.InArena(p, kDescriptorBytes);
}

// OK when `raw` (read from a lock word or a descriptor) names a descriptor
// line; otherwise DataLoss saying where it came from (`what`), for lock
// `lock` and the caller's descriptor `me`. A corrupted word is an error the
// caller returns, never an abort.
inline absl::Status CheckDescriptorRaw(rdma::Session& s, uint64_t raw, absl::string_view what, rdma::RemotePtr lock,
                                rdma::RemotePtr me) {
  const rdma::RemotePtr p = rdma::RemotePtr::FromRaw(raw);
  if (lock_internal::NamesDescriptorLine(s, raw)) return absl::OkStatus();
  std::string arena = "no such node";
  if (p.node() < s.num_nodes()) {
    const rdma::ArenaInfo& a = s.arena(p.node());
    arena = absl::StrCat("[0x", absl::Hex(a.base), ", 0x", absl::Hex(a.base + a.length), ")");
  }
  return absl::DataLossError(absl::StrCat(
      what, " holds 0x", absl::Hex(raw), " (node ", p.node(), ", address 0x", absl::Hex(p.address()),
      "), which is not a queue-lock descriptor (64-byte aligned, inside node ", p.node(), "'s arena ", arena,
      "); lock ", lock.node(), ":0x", absl::Hex(lock.address()), ", my descriptor ", me.node(), ":0x",
      absl::Hex(me.address()), "; the address is in ", s.DescribeAddress(p.address()),
      ". The word was corrupted: only descriptor pointers are ever written there (a WRITE seen half landed "
      "is waited out until ClientOptions::timeout; see tests/verbs/README.md \"rxe torn WRITE\")"));
}

// The descriptor lines of a queue lock's client (ALock and the MCS
// baselines): one 64-byte line per slot in the client's node's arena, first
// allocated as one block. After an error inside Lock or Unlock a slot's line
// may still be linked in that lock's queue, where a late hand-over or link
// could reach it; Retire gives the slot a fresh line and never frees or
// reuses the old one (one leaked line per error), so the broken lock cannot
// grant another. A slot whose fresh line cannot be allocated stays unusable.
class DescriptorLines {
 public:
  static constexpr size_t kLineBytes = 64;
  DescriptorLines() = default;
  DescriptorLines(const DescriptorLines&) = delete;
  DescriptorLines& operator=(const DescriptorLines&) = delete;
  ~DescriptorLines() {
    if (node_ == nullptr) return;
    for (size_t i = 0; i < lines_.size(); ++i) {
      if (fresh_[i] && !lines_[i].is_null()) node_->Free(lines_[i], kLineBytes);
    }
    if (retired_from_block_ == 0) node_->Free(block_, kLineBytes * lines_.size());
  }

  absl::Status Allocate(rdma::Node& node, int n) {
    auto b = node.Allocate(kLineBytes * static_cast<size_t>(n), kLineBytes);
    if (!b.ok()) return b.status();
    node_ = &node;
    block_ = *b;
    lines_.resize(static_cast<size_t>(n));
    fresh_.assign(static_cast<size_t>(n), false);
    for (size_t i = 0; i < lines_.size(); ++i) lines_[i] = block_ + i * kLineBytes;
    return absl::OkStatus();
  }
  // Slot i's line; null once the slot is unusable.
  rdma::RemotePtr operator[](size_t i) const { return lines_[i]; }
  bool usable(size_t i) const { return !lines_[i].is_null(); }
  // After an error that may have left slot i's line in a queue.
  void Retire(size_t i) {
    if (lines_[i].is_null()) return;
    ++retired_;
    if (!fresh_[i]) ++retired_from_block_;
    auto line = node_->Allocate(kLineBytes, kLineBytes);
    lines_[i] = line.ok() ? *line : rdma::RemotePtr();
    fresh_[i] = line.ok();
  }
  int retired() const { return retired_; }

  // The rule for a Lock attempt with slot i's line: take a mark just before
  // it and, if it fails, call RetireAfterFailedLock. The line is retired
  // when the attempt may have put it in the lock's queue: a native attempt
  // always swaps it in first; a NIC attempt only if it posted something (a
  // post that fails, e.g. to a QP reset after a timeout, counts no
  // doorbell), so attempts that fail before the swap leak nothing.
  static uint64_t AttemptMark() { return rdma::ThisThreadCounters().doorbells; }
  void RetireAfterFailedLock(size_t i, bool native, uint64_t mark) {
    if (native || rdma::ThisThreadCounters().doorbells != mark) Retire(i);
  }

 private:
  rdma::Node* node_ = nullptr;
  rdma::RemotePtr block_;
  std::vector<rdma::RemotePtr> lines_;
  std::vector<bool> fresh_;  // lines_[i] allocated by Retire, not part of block_
  int retired_ = 0, retired_from_block_ = 0;
};

// The error of a client (`who`: "client", "ALock client") whose `slots`
// slots are all held or unusable.
inline absl::Status SlotsExhausted(absl::string_view who, size_t slots, const DescriptorLines* lines) {
  return absl::ResourceExhaustedError(absl::StrCat(
      who, " already holds ", slots, " locks (ClientOptions::max_held)",
      lines != nullptr && lines->retired() > 0
          ? absl::StrCat(", or lost their descriptors to ", lines->retired(), " errors")
          : ""));
}

// The locks a client holds, one descriptor line each.
template <typename Extra>
class HeldSlots {
 public:
  struct Slot {
    rdma::RemotePtr lock;  // null = free
    Extra extra{};
  };
  explicit HeldSlots(int n) : slots_(static_cast<size_t>(n)) {}

  // Index of the slot holding `lock`, or -1.
  int Find(rdma::RemotePtr lock) const {
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].lock == lock) return static_cast<int>(i);
    }
    return -1;
  }
  // A free slot for `lock` (one that `usable` accepts, when given), or an
  // error (already held / all in use).
  absl::StatusOr<int> Reserve(rdma::RemotePtr lock, const DescriptorLines* usable = nullptr) const {
    int free = -1;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].lock == lock) {
        return absl::FailedPreconditionError(absl::StrCat("lock ", lock.node(), ":0x", absl::Hex(lock.address()),
                                                          " is already held by this client (not reentrant)"));
      }
      if (free < 0 && slots_[i].lock.is_null() && (usable == nullptr || usable->usable(i))) {
        free = static_cast<int>(i);
      }
    }
    if (free < 0) return SlotsExhausted("client", slots_.size(), usable);
    return free;
  }
  absl::StatusOr<int> Held(rdma::RemotePtr lock) const {
    int i = Find(lock);
    if (i < 0 || lock.is_null()) {
      return absl::FailedPreconditionError(absl::StrCat("Unlock: lock ", lock.node(), ":0x",
                                                        absl::Hex(lock.address()), " is not held by this client"));
    }
    return i;
  }
  Slot& operator[](int i) { return slots_[static_cast<size_t>(i)]; }
  const Slot& operator[](int i) const { return slots_[static_cast<size_t>(i)]; }
  size_t size() const { return slots_.size(); }

 private:
  std::vector<Slot> slots_;
};

}  // namespace locks::lock_internal

#endif  // LOCKS_INTERNAL_H_
