#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "locks/internal.h"
#include "locks/lock.h"

namespace locks {
namespace {

template <typename Client>
absl::StatusOr<std::unique_ptr<LockClient>> Make(rdma::Node& node, rdma::Session* session,
                                                 const ClientOptions& options) {
  auto c = Client::Create(node, session, options);
  if (!c.ok()) return c.status();
  return std::unique_ptr<LockClient>(std::move(*c));
}

// RepairDeadHolder's repair of the holder: takes a dead holder's token in
// the lock's NIC word over, runs `fix`, releases.
absl::StatusOr<bool> RepairToken(rdma::Session& home, rdma::RemotePtr lock, rdma::NodeId dead,
                                 const std::function<absl::Status()>& fix) {
  const rdma::RemoteWord<rdma::NicWord> word = rdma::RemoteRef<ALockWord>::At(lock).Field(&ALockWord::r_tail);
  // A CPU load of a NIC word (allowed: only its RMWs are the NIC's).
  const uint64_t token = lock.local<ALockWord>()->r_tail.Load(std::memory_order_acquire);
  if (token == 0 || rdma::RemotePtr::FromRaw(token).node() != dead) return false;
  // Take the NIC side over from the dead holder, with a token of the home's
  // own: the lock's line, which names a line of a live node's arena.
  const uint64_t mine = lock.raw();
  auto old = word.CompareAndSwap(home, token, mine);
  if (!old.ok()) return old.status();
  if (*old != token) return false;  // another repair, or the token changed meanwhile
  // No Peterson: the dead holder may have been inside (native threads then
  // wait for the NIC side, and must not see what it left before the fix) or
  // waiting with a native thread inside (which the fix must not disturb),
  // and nothing tells the two apart. So the fix runs at once and touches
  // only what the dead holder marked as its own.
  const absl::Status fixed = fix ? fix() : absl::OkStatus();
  // Nobody would ever release the home's own token: retry a release the NIC
  // failed (the session reconnects to its own node).
  const absl::StatusOr<uint64_t> released = lock_internal::CompareAndSwapReconnecting(home, lock.node(), word, mine, 0);
  if (!fixed.ok()) return fixed;
  if (!released.ok()) return released.status();
  if (*released != mine) {
    return absl::DataLossError(absl::StrCat("repairing lock ", lock.node(), ":0x", absl::Hex(lock.address()),
                                            ": its NIC word changed to 0x", absl::Hex(*released),
                                            " while the repair held it"));
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LockClient>> NewLockClient(LockKind kind, rdma::Node& node, rdma::Session* session,
                                                          const ClientOptions& options) {
  switch (kind) {
    case LockKind::kALock:
      return Make<ALockClient>(node, session, options);
    case LockKind::kRdmaSpin:
      return Make<RdmaSpinClient>(node, session, options);
    case LockKind::kRdmaMcs:
      return Make<RdmaMcsClient>(node, session, options);
    case LockKind::kLocalMcs:
      return Make<LocalMcsClient>(node, session, options);
  }
  return absl::InvalidArgumentError("NewLockClient: unknown lock kind");
}

absl::StatusOr<bool> RepairDeadHolder(LockKind kind, rdma::Session& home, rdma::RemotePtr lock, rdma::NodeId dead,
                                      const std::function<absl::Status()>& fix) {
  if (kind != LockKind::kALock && kind != LockKind::kRdmaSpin) {
    return absl::UnimplementedError(absl::StrCat(LockKindName(kind), " locks cannot be repaired: their queue links "
                                                 "live in the waiters' own memory"));
  }
  if (absl::Status s = lock_internal::CheckLockPtr(lock); !s.ok()) return s;
  if (lock.node() != home.self()) {
    return absl::InvalidArgumentError(absl::StrCat("a lock is repaired by its own node (", lock.node(),
                                                   "), not from node ", home.self()));
  }
  // Both kinds keep the NIC word that names the holder first in the line.
  static_assert(offsetof(ALockWord, r_tail) == offsetof(NicLockLine, word));
  // A dead waiter's announced turn (ALock): NIC lockers would step aside for
  // it forever. One CAS frees it; a live waiter's is never touched. Its
  // error is returned after the holder's repair below has run.
  absl::Status turn_freed;
  if (kind == LockKind::kALock) {
    const uint64_t turn = lock.local<ALockWord>()->r_next.Load(std::memory_order_acquire);
    if (turn != 0 && rdma::RemotePtr::FromRaw(turn).node() == dead) {
      const auto r_next = rdma::RemoteRef<ALockWord>::At(lock).Field(&ALockWord::r_next);
      const absl::StatusOr<uint64_t> freed =
          lock_internal::CompareAndSwapReconnecting(home, lock.node(), r_next, turn, 0);
      if (!freed.ok()) turn_freed = freed.status();
    }
  }
  absl::StatusOr<bool> held = RepairToken(home, lock, dead, fix);
  if (!turn_freed.ok()) {
    return absl::Status(turn_freed.code(),
                        absl::StrCat("freeing a dead waiter's turn on lock ", lock.node(), ":0x",
                                     absl::Hex(lock.address()), ": ", turn_freed.message(),
                                     held.ok() ? "" : absl::StrCat("; and the holder's repair: ",
                                                                   held.status().ToString())));
  }
  return held;
}

}  // namespace locks
