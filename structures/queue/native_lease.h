#ifndef STRUCTURES_QUEUE_NATIVE_LEASE_H_
#define STRUCTURES_QUEUE_NATIVE_LEASE_H_

// NativeLease: this process's native threads' turn at one side (producers'
// tail, or consumers' head) of one ring it hosts. While the lease is open
// the native side holds the side's ALock (a locks::NativeHold: the native
// Peterson flag up), and native threads claim positions with CPU CAS
// on the side's claim word (a CpuWord) without touching the lock. A NIC
// thread that wants the side takes the ALock's NIC side as usual and waits
// in Peterson; the lease is then closed (by the next native operation, or by
// the keeper within kKeeperPeriod when none comes), which waits for the
// claims already made, hands the index to the NIC side in the side's
// counter (a PlainWord), and lowers the native flag. The keeper also closes
// a lease nobody claimed from for two periods, so that a NIC thread arriving
// later finds the side free. The next native operation opens it again after
// the NIC holders are done.
//
//   NativeLeases leases(...);                     // one per Queue, shared in-process
//   NativeLease& l = leases.at(node, producer);
//   l.Enter(id); ... claim with CAS on l.claim() while it has kClaimOpen ...; l.Exit(id);
//   if (l.NicWaiting()) l.Close();
//
// Claim word: bit 63 (kClaimOpen) set while open; the low bits are the next
// position to claim. The all-zero ring is closed at position 0: the first
// native operation opens it.
//
// Invariants (docs/design.md §9.4.1, "Sides and leases", "Hand-over"):
//  * the claim word has kClaimOpen only while the NativeHold is held: no NIC
//    holder is inside;
//  * a claim is a CAS from an open value, so no position is claimed after
//    the close's CAS; the close stores the counter only after every client
//    that was inside (Enter .. Exit) when it closed has left, so every claimed
//    position's seq store landed before the NIC side reads the counter;
//  * only the opener stores an open claim word, and only from the counter.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/internal.h"
#include "locks/native_hold.h"
#include "rdma/remote_ptr.h"
#include "rdma/rmw_word.h"
#include "structures/queue/layout.h"

namespace structures::queue_internal {

// Clients of one Queue in one process that may use native leases at once.
inline constexpr int kMaxLeaseClients = 256;
// How often the keeper looks for NIC waiters at open leases no native
// operation is closing.
inline constexpr std::chrono::microseconds kKeeperPeriod{200};

class NativeLease {
 public:
  // The lease of side `producer` of the ring whose header is at `ring` (on
  // this process's node `ring.node()`). `timeout` bounds every wait.
  NativeLease(rdma::RemotePtr ring, bool producer, const locks::ClientOptions& options)
      : ring_(ring),
        claim_(producer ? &ring.local<Header>()->tail_claim : &ring.local<Header>()->head_claim),
        producer_(producer),
        options_(options),
        hold_(ring + LockOffset(producer), options),
        active_(kMaxLeaseClients) {}
  NativeLease(const NativeLease&) = delete;
  NativeLease& operator=(const NativeLease&) = delete;

  rdma::CpuWord& claim() const { return *claim_; }
  rdma::PlainWord& counter() const { return producer_ ? header().tail : header().head; }

  // Client `id` is inside (Enter before its claim CAS, Exit after its last
  // store): what Close waits for.
  void Enter(int id) { active_[id].v.store(1, std::memory_order_relaxed); }
  void Exit(int id) { active_[id].v.store(0, std::memory_order_release); }

  // A NIC thread holds or waits for the side's ALock.
  bool NicWaiting() const { return hold_.NicWaiting(); }

  // Opens the lease if it is closed: takes the native side of the ALock
  // (locks::NativeHold: Peterson against the NIC side), runs `fix(&counter)`
  // (crash repair of what a dead NIC holder left; it may move the counter),
  // then stores the open claim word. OK at once when it is open, or once
  // another thread opened it. DeadlineExceeded after the timeout.
  template <typename Fix>
  absl::Status Open(Fix&& fix) {
    locks::lock_internal::Spinner spin(options_);
    for (;;) {
      if (claim().Load(std::memory_order_acquire) & kClaimOpen) return absl::OkStatus();
      absl::StatusOr<bool> taken = hold_.TryTake();
      if (!taken.ok()) return taken.status();
      if (*taken) break;
      if (!spin.Spin()) return spin.Timeout("Queue: waiting for another thread to open the native lease", hold_.lock());
    }
    uint64_t c = 0;
    if (absl::Status s = fix(&c); !s.ok()) {
      hold_.Give();
      return s;
    }
    claim().Store(c | kClaimOpen, std::memory_order_release);
    NotifyOpened();
    return absl::OkStatus();
  }

  // Closes the lease if it is open, for a NIC thread: no claim after this
  // CAS; waits until every client inside has left (its seq stores landed);
  // hands the index over in the counter; lowers the native flag. Only the
  // thread whose CAS closed it does the rest. Between Enter and Exit a
  // client runs a bounded number of its own steps (no lock, no I/O, no
  // callback), so the wait ends once the scheduler runs them.
  void Close() {
    uint64_t c = claim().Load(std::memory_order_relaxed);
    do {
      if ((c & kClaimOpen) == 0) return;
    } while (!claim().CompareExchange(c, c & ~kClaimOpen, std::memory_order_acq_rel));
    for (Slot& a : active_) {
      for (int spins = 0; a.v.load(std::memory_order_acquire) != 0; ++spins) {
        if (spins > 64) std::this_thread::yield();
      }
    }
    counter().Store(c & ~kClaimOpen, std::memory_order_release);
    hold_.Give();
  }

  bool open() const { return (claim().Load(std::memory_order_relaxed) & kClaimOpen) != 0; }

  // The keeper's look at this lease, every kKeeperPeriod (NativeLeases):
  // closes it when a NIC thread waits, or when no position was claimed for
  // two periods (a NIC thread arriving later then finds the side free).
  // True while it stays open. Keeper thread only.
  bool Tick() {
    const uint64_t c = claim().Load(std::memory_order_relaxed);
    idle_ticks_ = c == last_seen_ ? idle_ticks_ + 1 : 0;
    last_seen_ = c;
    if ((c & kClaimOpen) == 0) return false;
    if (!NicWaiting() && idle_ticks_ < 2) return true;
    Close();
    return false;
  }

  // The keeper's hook: wakes it when a lease opens (set by NativeLeases).
  void set_on_open(std::function<void()> f) { on_open_ = std::move(f); }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> v{0};
  };
  Header& header() const { return *ring_.local<Header>(); }
  void NotifyOpened() {
    if (on_open_) on_open_();
  }

  rdma::RemotePtr ring_;
  rdma::CpuWord* const claim_;  // the side's claim word in the ring's header
  bool producer_;
  locks::ClientOptions options_;
  locks::NativeHold hold_;
  std::vector<Slot> active_;
  uint64_t last_seen_ = 0;  // Tick's: the claim word at the last tick
  int idle_ticks_ = 0;      // Tick's: ticks since it changed
  std::function<void()> on_open_;
};

// The leases of the rings this process hosts (both sides of each), and the
// keeper thread that closes an open lease a NIC thread waits for when no
// native operation does. Shared by every client (and every Queue object of
// one named queue) in the process.
class NativeLeases {
 public:
  NativeLeases(size_t num_nodes) : leases_(2 * num_nodes) {}
  // Stops the keeper, then closes the leases still open: the rings outlive
  // this process's use of them (a named queue), and a lease left open would
  // keep every NIC thread out. No client is inside: each holds these leases.
  ~NativeLeases() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (keeper_.joinable()) keeper_.join();
    for (const auto& lease : leases_) {
      if (lease != nullptr) lease->Close();
    }
  }

  void Add(rdma::NodeId node, rdma::RemotePtr ring, std::chrono::nanoseconds timeout) {
    locks::ClientOptions options;
    options.timeout = timeout;
    for (const bool producer : {true, false}) {
      auto lease = std::make_unique<NativeLease>(ring, producer, options);
      lease->set_on_open([this] { Wake(); });
      leases_[Index(node, producer)] = std::move(lease);
    }
  }
  // Null for a ring another process hosts.
  NativeLease* at(rdma::NodeId node, bool producer) const {
    const size_t i = Index(node, producer);
    return i < leases_.size() ? leases_[i].get() : nullptr;
  }

  // A client's slot (Enter/Exit), or ResourceExhausted.
  absl::StatusOr<int> Join() {
    std::lock_guard<std::mutex> l(mu_);
    for (int i = 0; i < kMaxLeaseClients; ++i) {
      if (!used_[i]) {
        used_[i] = true;
        return i;
      }
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("Queue: more than ", kMaxLeaseClients, " clients of one queue in this process"));
  }
  void Leave(int id) {
    std::lock_guard<std::mutex> l(mu_);
    used_[id] = false;
  }

 private:
  static size_t Index(rdma::NodeId node, bool producer) { return 2 * size_t{node} + (producer ? 0 : 1); }

  void Wake() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!keeper_.joinable() && !stop_) keeper_ = std::thread([this] { Keep(); });
      woken_ = true;
    }
    cv_.notify_one();
  }
  // Every kKeeperPeriod while a lease is open: NativeLease::Tick. Sleeps on
  // the condition variable while none is open.
  void Keep() {
    std::unique_lock<std::mutex> l(mu_);
    while (!stop_) {
      bool any_open = false;
      l.unlock();
      for (const auto& lease : leases_) {
        if (lease != nullptr && lease->Tick()) any_open = true;
      }
      l.lock();
      if (any_open) {
        cv_.wait_for(l, kKeeperPeriod, [this] { return stop_; });
      } else {
        cv_.wait(l, [this] { return stop_ || woken_; });
      }
      woken_ = false;
    }
  }

  std::vector<std::unique_ptr<NativeLease>> leases_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  bool used_[kMaxLeaseClients] = {};
  std::thread keeper_;
};

}  // namespace structures::queue_internal

#endif  // STRUCTURES_QUEUE_NATIVE_LEASE_H_
