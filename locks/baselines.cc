#include "locks/baselines.h"

#include <atomic>
#include <string>

#include "absl/strings/str_cat.h"
#include "rdma/rmw_word.h"

namespace locks {
namespace {

constexpr uint64_t kWait = static_cast<uint64_t>(ALockDescriptor::kWaiting);
constexpr uint64_t kGo = 1;

absl::Status CheckOptions(const ClientOptions& o) {
  if (o.max_held < 1 || o.max_held > 4096) {
    return absl::InvalidArgumentError(absl::StrCat("ClientOptions::max_held must be in 1..4096 (got ", o.max_held, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckSession(rdma::Node& node, rdma::Session* session, absl::string_view who, bool required) {
  if (session == nullptr) {
    return required ? absl::InvalidArgumentError(absl::StrCat(who, " needs a Session (every acquire uses the NIC)"))
                    : absl::OkStatus();
  }
  if (session->self() != node.id()) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": the session lives on node ", session->self(),
                                                   " but the client on node ", node.id()));
  }
  return absl::OkStatus();
}

absl::Status CheckReach(rdma::Session& s, rdma::RemotePtr lock) {
  if (lock.node() >= s.num_nodes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lock names node ", lock.node(), " but the cluster has ", s.num_nodes(), " nodes"));
  }
  return absl::OkStatus();
}

std::atomic<uint64_t> next_token{1};

// A token is the holder's node in the top 16 bits, as in a RemotePtr
// (RepairDeadHolder reads it so), over a per-process count.
uint64_t TokenOf(rdma::NodeId node) {
  return rdma::RemotePtr(node, next_token.fetch_add(1, std::memory_order_relaxed)).raw();
}

}  // namespace

// ------------------------------------------------------------ RDMA spin

RdmaSpinClient::RdmaSpinClient(rdma::Node& node, rdma::Session* session, const ClientOptions& options)
    : LockClient(node.id(), session),
      options_(options),
      token_(TokenOf(node.id())),
      held_(options.max_held) {}

absl::StatusOr<std::unique_ptr<RdmaSpinClient>> RdmaSpinClient::Create(rdma::Node& node, rdma::Session* session,
                                                                       const ClientOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (absl::Status s = CheckSession(node, session, "RdmaSpinClient", true); !s.ok()) return s;
  return std::unique_ptr<RdmaSpinClient>(new RdmaSpinClient(node, session, options));
}

absl::Status RdmaSpinClient::Lock(rdma::RemotePtr lock, Path path) {
  if (absl::Status s = lock_internal::CheckLockPtr(lock); !s.ok()) return s;
  if (absl::Status s = rdma::CheckPath(path, self(), lock.node()); !s.ok()) return s;
  if (path == Path::kNative) {
    return absl::FailedPreconditionError("rdma-spin always goes through the NIC: request kAuto or kLoopback (use alock or local-mcs for the native path)");
  }
  if (absl::Status s = CheckReach(*session(), lock); !s.ok()) return s;
  auto slot = held_.Reserve(lock);
  if (!slot.ok()) return slot.status();
  const rdma::RemoteWord<rdma::NicWord> word = rdma::RemoteRef<NicLockLine>::At(lock).Field(&NicLockLine::word);
  lock_internal::Spinner spin(options_);
  int backoff = 1;
  for (;;) {
    auto old = word.CompareAndSwap(*session(), 0, token_);
    if (!old.ok()) return old.status();
    if (*old == 0) break;
    if (*old == token_) {
      // Only this client's CAS writes token_, and this client does not hold
      // the lock: one of its earlier CASes took effect again after its
      // release (a responder re-executing a retransmitted CAS). Nobody will
      // ever release the lock, so say so now instead of timing out.
      return absl::DataLossError(absl::StrCat(
          "RdmaSpin: lock ", lock.node(), ":0x", absl::Hex(lock.address()), " holds this client's own token 0x",
          absl::Hex(token_), " although it released the lock: an earlier CAS of ours was executed twice "
          "(a retransmitted atomic re-executed by the responder; see tests/verbs/README.md \"rxe duplicate CAS\")"));
    }
    // Exponential backoff between CASes, so the holder's release gets through.
    for (int i = 0; i < backoff; ++i) {
      if (!spin.Spin()) return spin.Timeout("RdmaSpin: acquire", lock);
    }
    backoff = std::min(backoff * 2, 64);
  }
  held_[*slot].lock = lock;
  return absl::OkStatus();
}

absl::Status RdmaSpinClient::Unlock(rdma::RemotePtr lock) {
  auto slot = held_.Held(lock);
  if (!slot.ok()) return slot.status();
  held_[*slot].lock = rdma::RemotePtr();
  // A plain WRITE of a NIC-domain word: allowed (not an RMW).
  return rdma::RemoteRef<NicLockLine>::At(lock).Field(&NicLockLine::word).Write(*session(), 0);
}

// ------------------------------------------------------------ MCS, both clients

McsClientBase::McsClientBase(rdma::Node& node, rdma::Session* session, const ClientOptions& options)
    : LockClient(node.id(), session), options_(options), held_(options.max_held), node_(node) {}

McsClientBase::~McsClientBase() = default;  // lines_ frees what no queue can still name

absl::Status McsClientBase::AllocateDescriptors() { return lines_.Allocate(node_, options_.max_held); }

template <typename Enqueue>
absl::Status McsClientBase::LockSlot(rdma::RemotePtr lock, bool native, Enqueue enqueue) {
  auto slot = Reserve(lock);
  if (!slot.ok()) return slot.status();
  const uint64_t mark = lock_internal::DescriptorLines::AttemptMark();
  absl::Status st = enqueue(Descriptor(*slot));
  if (!st.ok()) {
    RetireAfterFailedLock(*slot, native, mark);
    return st;
  }
  held_[*slot].lock = lock;
  return absl::OkStatus();
}

template <typename Dequeue>
absl::Status McsClientBase::UnlockSlot(rdma::RemotePtr lock, Dequeue dequeue) {
  auto slot = held_.Held(lock);
  if (!slot.ok()) return slot.status();
  held_[*slot].lock = rdma::RemotePtr();
  absl::Status st = dequeue(Descriptor(*slot));
  if (!st.ok()) Retire(*slot);
  return st;
}

namespace {

// The MCS enqueue of both clients, with descriptor `me`: reset it, swap it
// into the tail (`swap(me.raw())` returns the old tail), and with a predecessor,
// link behind it (`link(pred)`) and wait for the handover. The waiter takes
// exactly kGo, not just "no longer kWait": an RDMA WRITE may be seen half
// landed (tests/verbs/README.md "rxe torn WRITE"), and kWait and kGo differ
// in every byte, so reading kGo means the whole WRITE has landed.
template <typename Swap, typename Link>
absl::Status McsEnqueue(rdma::RemotePtr lock, rdma::RemotePtr me, const ClientOptions& options, absl::string_view who,
                        Swap swap, Link link) {
  ALockDescriptor& d = *me.local<ALockDescriptor>();
  d.budget.Store(kWait, std::memory_order_relaxed);
  d.next.Store(0, std::memory_order_relaxed);
  absl::StatusOr<uint64_t> pred = swap(me.raw());
  if (!pred.ok()) return pred.status();
  if (*pred == 0) return absl::OkStatus();
  if (absl::Status st = link(*pred); !st.ok()) return st;
  lock_internal::Spinner spin(options);
  uint64_t b;
  while ((b = d.budget.Load(std::memory_order_acquire)) != kGo) {
    if (!spin.Spin()) {
      if (b != kWait) {
        return absl::DataLossError(absl::StrCat(who, " Lock: my descriptor's budget word holds 0x", absl::Hex(b),
                                                ", neither waiting nor go; lock ", lock.node(), ":0x",
                                                absl::Hex(lock.address())));
      }
      return spin.Timeout(absl::StrCat(who, ": waiting for the predecessor's handover"), lock);
    }
  }
  return absl::OkStatus();
}

}  // namespace

// ------------------------------------------------------------ RDMA MCS

absl::StatusOr<std::unique_ptr<RdmaMcsClient>> RdmaMcsClient::Create(rdma::Node& node, rdma::Session* session,
                                                                     const ClientOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (absl::Status s = CheckSession(node, session, "RdmaMcsClient", true); !s.ok()) return s;
  std::unique_ptr<RdmaMcsClient> c(new RdmaMcsClient(node, session, options));
  if (absl::Status s = c->AllocateDescriptors(); !s.ok()) return s;
  return c;
}

absl::Status RdmaMcsClient::Lock(rdma::RemotePtr lock, Path path) {
  if (absl::Status s = lock_internal::CheckLockPtr(lock); !s.ok()) return s;
  if (absl::Status s = rdma::CheckPath(path, self(), lock.node()); !s.ok()) return s;
  if (path == Path::kNative) {
    return absl::FailedPreconditionError("rdma-mcs always goes through the NIC: request kAuto or kLoopback (use alock or local-mcs for the native path)");
  }
  if (absl::Status s = CheckReach(*session(), lock); !s.ok()) return s;
  return LockSlot(lock, /*native=*/false, [&](rdma::RemotePtr me) { return Enqueue(lock, me); });
}

absl::Status RdmaMcsClient::Enqueue(rdma::RemotePtr lock, rdma::RemotePtr me) {
  rdma::Session& s = *session();
  // Always through the NIC, even when the predecessor is on this node.
  auto swap = [&](uint64_t raw) {
    std::atomic_thread_fence(std::memory_order_release);  // the reset before the NIC can link to it
    return rdma::RemoteRef<NicLockLine>::At(lock).Field(&NicLockLine::word).Swap(s, raw, /*guess=*/0);
  };
  auto link = [&](uint64_t pred) {
    if (absl::Status st = lock_internal::CheckDescriptorRaw(s, pred, "RdmaMcs Lock: the queue tail", lock, me);
        !st.ok()) {
      return st;
    }
    const rdma::RemotePtr p = rdma::RemotePtr::FromRaw(pred);
    return rdma::RemoteRef<ALockDescriptor>::At(p).Field(&ALockDescriptor::next).Write(s, me.raw());
  };
  return McsEnqueue(lock, me, options_, "RdmaMcs", swap, link);
}

absl::Status RdmaMcsClient::Unlock(rdma::RemotePtr lock) {
  return UnlockSlot(lock, [&](rdma::RemotePtr me) { return Dequeue(lock, me); });
}

absl::Status RdmaMcsClient::Dequeue(rdma::RemotePtr lock, rdma::RemotePtr me) {
  rdma::Session& s = *session();
  auto old = rdma::RemoteRef<NicLockLine>::At(lock).Field(&NicLockLine::word).CompareAndSwap(s, me.raw(), 0);
  if (!old.ok()) return old.status();
  if (*old == me.raw()) return absl::OkStatus();
  ALockDescriptor& d = *me.local<ALockDescriptor>();
  lock_internal::Spinner spin(options_);
  // The successor's link is an RDMA WRITE, which a CPU load may see half
  // landed (tests/verbs/README.md "rxe torn WRITE"): a torn value is a mix of
  // the new bytes and the reset's zeros, so wait until the word names a
  // descriptor line, not just until it is non-zero.
  uint64_t next;
  while ((next = d.next.Load(std::memory_order_acquire)) == 0 || !lock_internal::NamesDescriptorLine(s, next)) {
    if (!spin.Spin()) {
      if (next == 0) return spin.Timeout("RdmaMcs: waiting for the successor to link in", lock);
      break;  // reported below
    }
  }
  if (absl::Status st = lock_internal::CheckDescriptorRaw(s, next, "RdmaMcs Unlock: my descriptor's next word", lock, me);
      !st.ok()) {
    return st;
  }
  const rdma::RemotePtr n = rdma::RemotePtr::FromRaw(next);
  return rdma::RemoteRef<ALockDescriptor>::At(n).Field(&ALockDescriptor::budget).Write(s, kGo);
}

// ------------------------------------------------------------ local MCS

absl::StatusOr<std::unique_ptr<LocalMcsClient>> LocalMcsClient::Create(rdma::Node& node, rdma::Session* session,
                                                                       const ClientOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (absl::Status s = CheckSession(node, session, "LocalMcsClient", false); !s.ok()) return s;
  std::unique_ptr<LocalMcsClient> c(new LocalMcsClient(node, session, options));
  if (absl::Status s = c->AllocateDescriptors(); !s.ok()) return s;
  return c;
}

absl::Status LocalMcsClient::Lock(rdma::RemotePtr lock, Path path) {
  if (absl::Status s = lock_internal::CheckLockPtr(lock); !s.ok()) return s;
  if (!lock.is_local(self()) || rdma::TakenPath(path, self(), lock.node()) != Path::kNative) {
    return absl::FailedPreconditionError(absl::StrCat(
        "local-mcs is native-only: lock on node ", lock.node(), " requested from node ", self(),
        path == Path::kLoopback ? " over loopback" : "", " (use alock, rdma-mcs or rdma-spin for NIC paths)"));
  }
  return LockSlot(lock, /*native=*/true, [&](rdma::RemotePtr me) { return Enqueue(lock, me); });
}

absl::Status LocalMcsClient::Enqueue(rdma::RemotePtr lock, rdma::RemotePtr me) {
  rdma::CpuWord& tail = lock.local<CpuLockLine>()->tail;
  auto swap = [&](uint64_t raw) { return absl::StatusOr<uint64_t>(tail.Swap(raw, std::memory_order_acq_rel)); };
  auto link = [&](uint64_t pred) {
    rdma::RemotePtr::FromRaw(pred).local<ALockDescriptor>()->next.Store(me.raw(), std::memory_order_release);
    return absl::OkStatus();
  };
  return McsEnqueue(lock, me, options_, "LocalMcs", swap, link);
}

absl::Status LocalMcsClient::Unlock(rdma::RemotePtr lock) {
  return UnlockSlot(lock, [&](rdma::RemotePtr me) { return Dequeue(lock, me); });
}

absl::Status LocalMcsClient::Dequeue(rdma::RemotePtr lock, rdma::RemotePtr me) {
  rdma::CpuWord& tail = lock.local<CpuLockLine>()->tail;
  uint64_t expected = me.raw();
  if (tail.CompareExchange(expected, 0, std::memory_order_acq_rel)) return absl::OkStatus();
  ALockDescriptor& d = *me.local<ALockDescriptor>();
  lock_internal::Spinner spin(options_);
  uint64_t next;
  while ((next = d.next.Load(std::memory_order_acquire)) == 0) {
    if (!spin.Spin()) return spin.Timeout("LocalMcs: waiting for the successor to link in", lock);
  }
  rdma::RemotePtr::FromRaw(next).local<ALockDescriptor>()->budget.Store(kGo, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace locks
