#ifndef LOCKS_ALOCK_IMPL_H_
#define LOCKS_ALOCK_IMPL_H_

// ALock's algorithm: the member definitions of lock_internal::BasicALockClient
// (locks/alock_client_internal.h), and the native side's Peterson half, which
// NativeGate shares. Internal; the contract is in locks/alock.h, the
// algorithm and its arguments in docs/design.md §4.
//
// Which domain touches each word (docs/design.md §3):
//   r_tail   NicWord    RMW: RDMA CAS (remote + loopback threads). CPU: load only.
//   r_next   NicWord    RMW: RDMA CAS (NIC lockers, the home's repair). CPU: load only.
//   l_tail   CpuWord    RMW: CPU exchange/CAS (native threads). NIC: READ only.
//   victim   PlainWord  CPU store / RDMA WRITE; CPU load / RDMA READ.
//   budgets  PlainWord  written once before publication.
//   descriptor budget/next  PlainWord: CPU store (native cohort); the owner loads.
//
// Peterson needs "raise my flag (swap my tail); victim = me; read the other
// flag" in that order. Natively: a seq_cst exchange, a seq_cst store and a
// full fence. Over the NIC: the chains {CAS r_tail, READ line} and {WRITE
// victim, READ line}, each on one RC QP, whose responder executes requests in
// order (docs/design.md §5), so the READ sees the CAS or WRITE. No
// IBV_SEND_FENCE: the order needs none, and a fenced READ can hang rxe (§6).

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/internal.h"
#include "rdma/remote_ref.h"
#include "rdma/rmw_word.h"
#include "rdma/session.h"

namespace locks {

namespace alock_internal {
inline uint64_t BudgetWord(int64_t b) { return static_cast<uint64_t>(b); }
inline const uint64_t kWaitingWord = static_cast<uint64_t>(ALockDescriptor::kWaiting);
// Longest pause, in Spinner steps, between two READs of a remote Peterson wait.
inline constexpr int kMaxPollBackoff = 32;

// The native side's half of the Peterson protocol between the cohorts, run by
// whoever speaks for the native side (the native cohort's MCS head, or a
// NativeGate's holder) after its flag, l_tail, went up with a seq_cst RMW.
// OK once the native side may enter: at once (`*fast`) when the NIC
// cohort's flag is down; otherwise after victim = local, when the NIC
// cohort's flag is down or the NIC side made itself the victim.
// `on_wait()` runs once if it has to wait, `on_wait_done()` after the wait.
// DeadlineExceeded after `options.timeout` of waiting.
template <typename OnWait, typename OnWaitDone>
absl::Status PetersonAsNative(ALockWord& w, rdma::RemotePtr lock, const ClientOptions& options, bool* fast,
                              OnWait&& on_wait, OnWaitDone&& on_wait_done) {
  // Fast path: my flag is up (seq_cst RMW); if the NIC side's is down,
  // enter without touching victim.
  *fast = w.r_tail.Load(std::memory_order_seq_cst) == 0;
  if (*fast) return absl::OkStatus();
  w.victim.Store(kVictimLocal, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  lock_internal::Spinner spin(options);
  bool waited = false;
  absl::Status result;
  for (;;) {
    if (w.r_tail.Load(std::memory_order_seq_cst) == 0) break;
    if (w.victim.Load(std::memory_order_seq_cst) != kVictimLocal) break;
    if (!waited) {
      waited = true;
      on_wait();
    }
    if (!spin.Spin()) {
      result = spin.Timeout("ALock: native Peterson wait for the NIC side", lock);
      break;
    }
  }
  if (waited) on_wait_done();
  // The loads above that let us in synchronize with the NIC side's
  // release (NIC CAS on r_tail, or its RDMA WRITE of victim).
  std::atomic_thread_fence(std::memory_order_acquire);
  return result;
}

// The NIC side's half of Peterson, run by the thread that holds r_tail, on
// `line`, a private copy of the lock line read after r_tail went up (the
// READ chained behind the winning CAS). OK once the NIC side may enter: at
// once (`*fast`) when the native flag is down; otherwise after victim =
// remote (WRITE, then READ of the line, one chain), when the native flag is
// down or the native side made itself the victim, polling the line with
// READs under exponential backoff. `on_wait()` runs once if it has to wait,
// `on_wait_done()` after the wait. DeadlineExceeded after `options.timeout`.
// The caller's READs `also` ride behind every line READ of the wait (same
// chain, same QP, so after it): `*also_read` says whether the READ that let
// it in carried them, and so read them as the holder would.
template <typename OnWait, typename OnWaitDone>
absl::Status PetersonAsNic(rdma::Session& s, rdma::RemotePtr lock, ALockWord& line, const ClientOptions& options,
                           absl::Span<const rdma::ChainedRead> also, bool* fast, bool* also_read, OnWait&& on_wait,
                           OnWaitDone&& on_wait_done) {
  *also_read = false;
  const auto line_ref = rdma::RemoteRef<ALockWord>::At(lock);
  // Fast path: my flag (r_tail) is up; the native side's is down.
  *fast = line.l_tail.Load(std::memory_order_relaxed) == 0;
  if (*fast) return absl::OkStatus();
  {
    // victim = remote, then read the whole line: one doorbell, one round trip.
    // Same QP: the responder executes the WRITE before the READ.
    rdma::Batch b(s, lock.node());
    line_ref.Field(&ALockWord::victim).WriteIn(b, kVictimRemote);
    line_ref.ReadIn(b, &line);
    for (const rdma::ChainedRead& r : also) b.Read(r.src, r.dst, r.len);
    if (absl::Status st = b.Execute(); !st.ok()) return st;
  }
  lock_internal::Spinner spin(options);
  bool waited = false;
  absl::Status result;
  int backoff = 1;
  for (;;) {
    const uint64_t l_tail = line.l_tail.Load(std::memory_order_relaxed);
    const uint64_t victim = line.victim.Load(std::memory_order_relaxed);
    if (l_tail == 0 || victim != kVictimRemote) {
      *also_read = true;  // the native side released (or yields): nothing of it changes meanwhile
      break;
    }
    if (!waited) {
      waited = true;
      on_wait();
    }
    // Poll with exponential backoff: each poll is a NIC READ at the lock's node.
    bool timed_out = false;
    for (int i = 0; i < backoff && !timed_out; ++i) timed_out = !spin.Spin();
    if (timed_out) {
      result = spin.Timeout("ALock: remote Peterson wait for the local cohort", lock);
      break;
    }
    backoff = std::min(backoff * 2, std::max(1, options.max_peterson_poll_backoff));
    rdma::Batch b(s, lock.node());
    line_ref.ReadIn(b, &line);
    for (const rdma::ChainedRead& r : also) b.Read(r.src, r.dst, r.len);
    if (absl::Status st = b.Execute(); !st.ok()) {
      result = st;
      break;
    }
  }
  if (waited) on_wait_done();
  return result;
}
}  // namespace alock_internal

namespace lock_internal {

template <typename P>
BasicALockClient<P>::BasicALockClient(rdma::Node& node, rdma::Session* session, const ClientOptions& options,
                                      ALockObserver* observer)
    : LockClient(node.id(), session),
      node_(node),
      options_(options),
      observer_(observer),
      slots_(static_cast<size_t>(options.max_held)) {}

template <typename P>
absl::StatusOr<std::unique_ptr<BasicALockClient<P>>> BasicALockClient<P>::Create(rdma::Node& node,
                                                                                  rdma::Session* session,
                                                                                  const ClientOptions& options,
                                                                                  ALockObserver* observer) {
  if (options.max_held < 1 || options.max_held > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("ClientOptions::max_held must be in 1..4096 (got ",
                                                   options.max_held, ")"));
  }
  if (session != nullptr && session->self() != node.id()) {
    return absl::InvalidArgumentError(absl::StrCat("ALockClient: the session lives on node ", session->self(),
                                                   " but the client on node ", node.id()));
  }
  static_assert(sizeof(ALockDescriptor) == lock_internal::DescriptorLines::kLineBytes);
  std::unique_ptr<BasicALockClient> c(new BasicALockClient(node, session, options, observer));
  if (absl::Status s = c->lines_.Allocate(node, options.max_held); !s.ok()) return s;
  return c;
}

template <typename P>
BasicALockClient<P>::~BasicALockClient() {
  // A token left in a lock by a failed call: a last try, or the lock stays
  // held by nobody alive to release it (and this process lives on).
  if (!pending_.empty()) {
    (void)RetryTakeBacks(rdma::RemotePtr());
    for (const PendingTakeBack& p : pending_) {
      std::fprintf(stderr, "rdmads: ALock client on node %d leaves its token 0x%llx in lock %d:0x%llx: taking it "
                   "back failed\n", static_cast<int>(self()), static_cast<unsigned long long>(p.token),
                   static_cast<int>(p.lock.node()), static_cast<unsigned long long>(p.lock.address()));
    }
  }
}  // lines_ frees what no queue can still name

template <typename P>
rdma::RemotePtr BasicALockClient<P>::Descriptor(size_t slot) const {
  return lines_[slot];
}

template <typename P>
bool BasicALockClient<P>::Holds(rdma::RemotePtr lock) const {
  if (lock.is_null()) return false;
  for (const Slot& s : slots_) {
    if (s.lock == lock) return true;
  }
  return false;
}

template <typename P>
absl::Status BasicALockClient<P>::LockAndRead(rdma::RemotePtr lock, Path path,
                                              absl::Span<const rdma::ChainedRead> also, bool* also_done) {
  if (also_done != nullptr) *also_done = false;
  if (absl::Status s = lock_internal::CheckLockPtr(lock); !s.ok()) return s;
  if (!pending_.empty()) {
    if (absl::Status s = RetryTakeBacks(lock); !s.ok()) return s;
  }
  if (absl::Status s = rdma::CheckPath(path, self(), lock.node()); !s.ok()) return s;
  const Cohort cohort = CohortFor(lock, path);
  if (cohort == Cohort::kRemote || P::kMutantLocalCpuOnRTail) {
    if (session() == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ALock: acquiring lock on node ", lock.node(), " from node ", self(),
          cohort == Cohort::kRemote ? " needs the NIC path, but this client has no Session"
                                    : " (mutant) needs a Session"));
    }
    if (lock.node() >= session()->num_nodes()) {
      return absl::InvalidArgumentError(absl::StrCat("ALock: lock names node ", lock.node(), " but the cluster has ",
                                                     session()->num_nodes(), " nodes"));
    }
  }
  size_t slot = slots_.size();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].lock == lock) {
      return absl::FailedPreconditionError(absl::StrCat("ALock ", lock.node(), ":0x", absl::Hex(lock.address()),
                                                        " is already held by this client (not reentrant)"));
    }
    if (slot == slots_.size() && slots_[i].lock.is_null() && lines_.usable(i)) slot = i;
  }
  if (slot == slots_.size()) return lock_internal::SlotsExhausted("ALock client", slots_.size(), &lines_);
  const uint64_t mark = lock_internal::DescriptorLines::AttemptMark();
  absl::Status s = cohort == Cohort::kLocal ? LockNative(lock, slot) : LockRemote(lock, slot, also, also_done);
  if (!s.ok()) {
    // The descriptor may be in the lock's queue (a predecessor may still
    // hand it the lock): never use it for another lock.
    lines_.RetireAfterFailedLock(slot, cohort == Cohort::kLocal, mark);
    return s;
  }
  slots_[slot].lock = lock;
  slots_[slot].cohort = cohort;
  ++stats_.acquires[static_cast<int>(cohort)];
  return absl::OkStatus();
}

template <typename P>
absl::Status BasicALockClient<P>::Unlock(rdma::RemotePtr lock) {
  if (!pending_.empty()) (void)RetryTakeBacks(rdma::RemotePtr());  // only this call's own lock matters below
  size_t slot = slots_.size();
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!lock.is_null() && slots_[i].lock == lock) slot = i;
  }
  if (slot == slots_.size()) {
    return absl::FailedPreconditionError(absl::StrCat("ALock Unlock: lock ", lock.node(), ":0x",
                                                      absl::Hex(lock.address()), " is not held by this client"));
  }
  absl::Status s = slots_[slot].cohort == Cohort::kLocal ? UnlockNative(lock, slot) : UnlockRemote(lock, slot);
  // The slot is released either way: after an error the lock is unusable, and
  // keeping the slot would only leak it. Its descriptor is not reused then (a
  // successor may still link behind it).
  slots_[slot].lock = rdma::RemotePtr();
  if (!s.ok()) lines_.Retire(slot);
  return s;
}

template <typename P>
absl::StatusOr<int64_t> BasicALockClient<P>::AwaitBudget(rdma::RemotePtr lock, size_t slot) {
  ALockDescriptor& d = *Descriptor(slot).template local<ALockDescriptor>();
  lock_internal::Spinner spin(options_);
  for (;;) {
    // Handed over by the predecessor's CPU store (native cohort only): the
    // word is whole, kWaiting or a budget in [0, INT32_MAX].
    const uint64_t b = d.budget.Load(std::memory_order_acquire);
    if (b != alock_internal::kWaitingWord) return static_cast<int64_t>(b);
    if (!spin.Spin()) return spin.Timeout("ALock: waiting for the predecessor's handover", lock);
  }
}

static_assert(sizeof(ALockDescriptor) == lock_internal::kDescriptorBytes);

template <typename P>
absl::StatusOr<uint64_t> BasicALockClient<P>::AwaitNext(rdma::RemotePtr lock, size_t slot) {
  ALockDescriptor& d = *Descriptor(slot).template local<ALockDescriptor>();
  lock_internal::Spinner spin(options_);
  for (;;) {
    // The successor links in with a CPU store (native cohort only).
    const uint64_t n = d.next.Load(std::memory_order_acquire);
    if (n != 0) return n;
    if (!spin.Spin()) return spin.Timeout("ALock: waiting for the successor to link in", lock);
  }
}

// ------------------------------------------------------------ native cohort

template <typename P>
absl::StatusOr<bool> BasicALockClient<P>::FollowPredecessor(rdma::RemotePtr lock, size_t slot, uint64_t pred) {
  const rdma::RemotePtr me = Descriptor(slot);
  // l_tail holds only this node's descriptors, swapped in by CPU: the
  // predecessor's descriptor is in my own memory (a CPU store, no NIC op).
  rdma::RemotePtr::FromRaw(pred).template local<ALockDescriptor>()->next.Store(me.raw(), std::memory_order_release);
  auto b = AwaitBudget(lock, slot);
  if (!b.ok()) return b.status();
  if (*b == 0) return false;  // the cohort's budget is spent: contend with the other cohort again
  slots_[slot].budget = *b;
  ++stats_.handovers_in[static_cast<int>(Cohort::kLocal)];
  return true;
}

template <typename P>
absl::Status BasicALockClient<P>::HandOver(rdma::RemotePtr lock, size_t slot) {
  auto next = AwaitNext(lock, slot);
  if (!next.ok()) return next.status();
  const uint64_t handed = alock_internal::BudgetWord(slots_[slot].budget - 1);
  rdma::RemotePtr::FromRaw(*next).template local<ALockDescriptor>()->budget.Store(handed, std::memory_order_release);
  return absl::OkStatus();
}

template <typename P>
absl::Status BasicALockClient<P>::LockNative(rdma::RemotePtr lock, size_t slot) {
  ALockWord& w = *lock.local<ALockWord>();
  const rdma::RemotePtr me = Descriptor(slot);
  ALockDescriptor& d = *me.local<ALockDescriptor>();
  d.budget.Store(alock_internal::kWaitingWord, std::memory_order_relaxed);
  d.next.Store(0, std::memory_order_relaxed);

  if constexpr (P::kMutantLocalCpuOnRTail) {
    // THE BUG (test-only): take the NIC's word with CPU CASes, as NIC
    // lockers do with NIC CASes. NicWord has no such member, so the mutant
    // has to launder the type to even express it.
    auto& word = reinterpret_cast<rdma::CpuWord&>(w.r_tail);
    lock_internal::Spinner spin(options_);
    for (;;) {
      uint64_t expected = 0;
      if (word.CompareExchange(expected, me.raw(), std::memory_order_seq_cst)) break;
      if (!spin.Spin()) return spin.Timeout("ALock (mutant): native CAS on r_tail", lock);
    }
    slots_[slot].budget = ALockWord::UnpackBudgets(w.budgets.Load(std::memory_order_relaxed)).remote;
    return absl::OkStatus();
  }
  const uint64_t pred = w.l_tail.Swap(me.raw(), std::memory_order_seq_cst);  // raise the local flag
  if (pred != 0) {
    auto handed = FollowPredecessor(lock, slot, pred);
    if (!handed.ok()) return handed.status();
    if (*handed) return absl::OkStatus();
  }
  return PetersonNative(lock, slot);
}

template <typename P>
absl::Status BasicALockClient<P>::PetersonNative(rdma::RemotePtr lock, size_t slot) {
  ALockWord& w = *lock.local<ALockWord>();
  const Budgets budgets = ALockWord::UnpackBudgets(w.budgets.Load(std::memory_order_relaxed));
  ++stats_.peterson_runs[0];
  bool fast = false;
  const absl::Status result = alock_internal::PetersonAsNative(
      w, lock, options_, &fast,
      [&] {
        ++stats_.peterson_waits[0];
        if (observer_ != nullptr) observer_->OnPetersonWait(lock, Cohort::kLocal);
      },
      [&] {
        if (observer_ != nullptr) observer_->OnPetersonWaitDone(lock, Cohort::kLocal);
      });
  if (fast) ++stats_.peterson_fast[0];
  if (!result.ok()) return result;
  slots_[slot].budget = budgets.local;
  return absl::OkStatus();
}

template <typename P>
absl::Status BasicALockClient<P>::UnlockNative(rdma::RemotePtr lock, size_t slot) {
  ALockWord& w = *lock.local<ALockWord>();
  const rdma::RemotePtr me = Descriptor(slot);
  uint64_t expected = me.raw();
  if constexpr (P::kMutantLocalCpuOnRTail) {
    reinterpret_cast<rdma::CpuWord&>(w.r_tail).CompareExchange(expected, 0, std::memory_order_seq_cst);
    return absl::OkStatus();
  }
  const bool alone = w.l_tail.CompareExchange(expected, 0, std::memory_order_acq_rel);  // lower the local flag
  if (alone) return absl::OkStatus();
  return HandOver(lock, slot);
}

// ------------------------------------------------------------ NIC side

template <typename P>
absl::Status BasicALockClient<P>::LockRemote(rdma::RemotePtr lock, size_t slot,
                                             absl::Span<const rdma::ChainedRead> also, bool* also_done) {
  rdma::Session& s = *session();
  // My token: my descriptor line's address, which names my node, so the
  // lock's home can release it if my node dies (RepairDeadHolder).
  const uint64_t me = Descriptor(slot).raw();
  const auto line_ref = rdma::RemoteRef<ALockWord>::At(lock);
  const rdma::RemoteWord<rdma::NicWord> r_tail = line_ref.Field(&ALockWord::r_tail);
  const rdma::RemoteWord<rdma::NicWord> r_next = line_ref.Field(&ALockWord::r_next);
  ALockWord line;  // a private, typed copy of the lock line
  lock_internal::Spinner spin(options_);
  int backoff = 1;
  bool announced = false;  // r_next holds my token
  // A CAS of mine that must land even after the chain before it failed (the
  // QP is then in error).
  const auto cas_again = [&](const rdma::RemoteWord<rdma::NicWord>& word, uint64_t expected, uint64_t desired) {
    return lock_internal::CompareAndSwapReconnecting(s, lock.node(), word, expected, desired);
  };
  // Every error return takes back whatever of this client may be in the
  // lock's words (TakeBack): its turn in r_next, and its token in r_tail,
  // which a CAS whose chain failed may have put there.
  const auto withdraw = [&](absl::Status st) -> absl::Status { return TakeBack(lock, me, std::move(st)); };
  // A turn read from r_next is mine only once my announcing CAS returned 0:
  // a READ that copied its bytes while another waiter's CAS changed it
  // (soft NIC byte copies, rxe) can mix them into my token, or into any
  // other value, which is treated as another waiter's turn and read again.
  const auto my_turn_or_none = [&](uint64_t turn) { return turn == 0 || (turn == me && announced); };
  for (;;) {
    // CAS r_tail 0 -> me and, in the same chain (one doorbell, one round
    // trip), READ the whole line and the caller's words. Same QP, so the
    // responder executes the READs after the CAS (no fence: see the top of
    // this file). If the CAS won, that line is the Peterson fast-path check
    // (taken after my flag went up) and the caller's words were read as the
    // holder would read them.
    uint64_t old = 0;
    absl::Status chain;  // the take-back, if any, after the batch is closed
    {
      rdma::Batch b(s, lock.node());
      r_tail.CompareAndSwapIn(b, 0, me, &old);
      line_ref.ReadIn(b, &line);
      for (const rdma::ChainedRead& r : also) b.Read(r.src, r.dst, r.len);
      chain = b.Execute();
    }
    if (!chain.ok()) return withdraw(chain);
    if (old == 0) {
      if (my_turn_or_none(line.r_next.Load(std::memory_order_relaxed))) break;
      // A waiter announced its turn before my CAS landed: step aside (my
      // flag was up without my entering, which Peterson allows).
      absl::StatusOr<uint64_t> back = cas_again(r_tail, me, 0);
      if (!back.ok()) {
        return withdraw(absl::Status(back.status().code(),
                                     absl::StrCat("ALock: stepping aside on lock ", lock.node(), ":0x",
                                                  absl::Hex(lock.address()), ", my token may still be in r_tail: ",
                                                  back.status().message())));
      }
      if (*back != me) {
        return withdraw(absl::DataLossError(absl::StrCat(
            "ALock: stepping aside on lock ", lock.node(), ":0x", absl::Hex(lock.address()), ", r_tail held 0x",
            absl::Hex(*back), ", not this client's token 0x", absl::Hex(me))));
      }
    } else if (!lock_internal::NamesDescriptorLine(s, old)) {
      // A token is its holder's descriptor line: anything else is a corrupt
      // word (never wait on it until the timeout).
      return withdraw(absl::DataLossError(absl::StrCat("ALock: r_tail of lock ", lock.node(), ":0x",
                                                       absl::Hex(lock.address()), " holds 0x", absl::Hex(old),
                                                       ", which names no descriptor line")));
    } else if (old == me) {
      // Only this client writes its token, and it does not hold the lock: an
      // earlier CAS of ours took effect again (a retransmitted atomic).
      return withdraw(absl::DataLossError(absl::StrCat(
          "ALock: lock ", lock.node(), ":0x", absl::Hex(lock.address()), " holds this client's own token 0x",
          absl::Hex(me), " although it does not hold the lock: an earlier CAS of ours was executed twice")));
    }
    // Wait for my turn: the NIC side free and no other waiter's turn
    // announced. Announce mine as soon as r_next is free, so that whoever
    // takes the NIC side next steps aside for me. Poll the line with READs
    // under exponential backoff, then CAS again.
    for (;;) {
      const uint64_t holder = line.r_tail.Load(std::memory_order_relaxed);
      const uint64_t turn = line.r_next.Load(std::memory_order_relaxed);
      if (holder == 0 && my_turn_or_none(turn)) break;
      for (int i = 0; i < backoff; ++i) {
        if (!spin.Spin()) return withdraw(spin.Timeout("ALock: waiting for the NIC side's holder", lock));
      }
      backoff = std::min(backoff * 2, alock_internal::kMaxPollBackoff);
      uint64_t was = 1;
      absl::Status poll;
      {
        rdma::Batch b(s, lock.node());
        if (!announced && turn == 0) r_next.CompareAndSwapIn(b, 0, me, &was);
        line_ref.ReadIn(b, &line);
        poll = b.Execute();
      }
      if (!poll.ok()) return withdraw(poll);
      if (was == 0) {
        announced = true;
        backoff = 1;  // my turn is next: poll for the holder's release promptly
      }
    }
    ++stats_.cas_retries;
    if (!spin.Spin()) return withdraw(spin.Timeout("ALock: waiting for the NIC side's holder", lock));
  }
  if (announced) {
    // My turn came: free r_next for the next waiter. Only a repair changes
    // another node's r_next, and only a dead node's.
    absl::StatusOr<uint64_t> cleared = r_next.CompareAndSwap(s, me, 0);
    if (!cleared.ok()) return withdraw(cleared.status());
    if (*cleared != me) {
      return withdraw(absl::DataLossError(absl::StrCat("ALock: r_next of lock ", lock.node(), ":0x",
                                                       absl::Hex(lock.address()), " held 0x", absl::Hex(*cleared),
                                                       ", not this client's token 0x", absl::Hex(me))));
    }
  }
  bool fast = false, also_read = false;
  // Never entered on an error: the token goes back, or the native side,
  // which waits while r_tail is up, would wait for a holder alive and gone.
  if (absl::Status st = PetersonRemote(lock, line, also, &fast, &also_read); !st.ok()) return withdraw(st);
  // The chained READs ran as the holder only if the line they followed
  // showed the native cohort empty (the CAS's chain), or showed it released
  // or yielding (the Peterson wait's last chain).
  if (also_done != nullptr) *also_done = fast || also_read;
  return absl::OkStatus();
}

template <typename P>
absl::Status BasicALockClient<P>::PetersonRemote(rdma::RemotePtr lock, ALockWord& line,
                                                 absl::Span<const rdma::ChainedRead> also, bool* fast,
                                                 bool* also_read) {
  ++stats_.peterson_runs[1];
  bool was_fast = false;
  const absl::Status st = alock_internal::PetersonAsNic(
      *session(), lock, line, options_, also, &was_fast, also_read,
      [&] {
        ++stats_.peterson_waits[1];
        if (observer_ != nullptr) observer_->OnPetersonWait(lock, Cohort::kRemote);
      },
      [&] {
        if (observer_ != nullptr) observer_->OnPetersonWaitDone(lock, Cohort::kRemote);
      });
  if (was_fast) ++stats_.peterson_fast[1];
  *fast = was_fast;
  return st;
}

template <typename P>
absl::Status BasicALockClient<P>::TakeBack(rdma::RemotePtr lock, uint64_t me, absl::Status why) {
  const absl::Status left = WithdrawToken(lock, me);
  if (left.ok()) return why;
  pending_.push_back({lock, me});
  return absl::Status(why.code(),
                      absl::StrCat(why.message(), "; taking this client's token 0x", absl::Hex(me), " back from lock ",
                                   lock.node(), ":0x", absl::Hex(lock.address()), " failed too (", left.message(),
                                   "): the lock stays held until this client's next call takes it back"));
}

template <typename P>
absl::Status BasicALockClient<P>::WithdrawToken(rdma::RemotePtr lock, uint64_t me) {
  rdma::Session& s = *session();
  const auto line_ref = rdma::RemoteRef<ALockWord>::At(lock);
  // r_next first: with the turn still announced after r_tail is free, the
  // next NIC locker would step aside for a waiter that left. A CAS of `me`
  // to 0 changes nothing where `me` is not, and an attempt whose answer was
  // lost may have landed, so any answer is success.
  for (const auto& word : {line_ref.Field(&ALockWord::r_next), line_ref.Field(&ALockWord::r_tail)}) {
    absl::StatusOr<uint64_t> old = lock_internal::CompareAndSwapReconnecting(s, lock.node(), word, me, 0);
    if (!old.ok()) return old.status();
  }
  return absl::OkStatus();
}

template <typename P>
absl::Status BasicALockClient<P>::RetryTakeBacks(rdma::RemotePtr wanted) {
  absl::Status wanted_left;
  for (size_t i = 0; i < pending_.size();) {
    const absl::Status left = WithdrawToken(pending_[i].lock, pending_[i].token);
    // Unavailable: the lock's home is gone, and its words with it.
    if (left.ok() || absl::IsUnavailable(left)) {
      pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(i));
      continue;
    }
    if (pending_[i].lock == wanted) wanted_left = left;
    ++i;
  }
  if (wanted_left.ok()) return absl::OkStatus();
  return absl::Status(wanted_left.code(),
                      absl::StrCat("ALock: lock ", wanted.node(), ":0x", absl::Hex(wanted.address()),
                                   " still holds a token of this client from a failed call, and taking it back "
                                   "failed again: ", wanted_left.message()));
}

template <typename P>
absl::Status BasicALockClient<P>::UnlockRemote(rdma::RemotePtr lock, size_t slot) {
  rdma::Session& s = *session();
  const uint64_t me = Descriptor(slot).raw();
  auto old = rdma::RemoteRef<ALockWord>::At(lock).Field(&ALockWord::r_tail).CompareAndSwap(s, me, 0);
  // A release that failed (the QP may be in error from this CAS or an
  // earlier operation) is taken back through a reconnect: the lock must not
  // stay held by a live client that believes it let go.
  if (!old.ok()) {
    const absl::Status left = WithdrawToken(lock, me);
    if (left.ok()) return absl::OkStatus();  // released, by the retry or by the attempt whose answer was lost
    return TakeBack(lock, me, old.status());
  }
  if (*old == me) return absl::OkStatus();  // lowered the NIC side's flag
  // Only a repair takes a token away, and only a dead node's: this client's
  // node was declared dead while it held the lock.
  return absl::DataLossError(absl::StrCat("ALock Unlock: lock ", lock.node(), ":0x", absl::Hex(lock.address()),
                                          " holds 0x", absl::Hex(*old), ", not this client's token 0x",
                                          absl::Hex(me), ": it was released from under this client"));
}

}  // namespace lock_internal
}  // namespace locks

#endif  // LOCKS_ALOCK_IMPL_H_
