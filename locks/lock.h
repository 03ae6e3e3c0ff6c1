#ifndef LOCKS_LOCK_H_
#define LOCKS_LOCK_H_

// The common lock interface: locks are 64-byte lines in registered memory,
// addressed by rdma::RemotePtr; a per-thread LockClient takes them over the
// native, loopback or remote path (docs/design.md §2, §4).
//
//   // Once, on the node that owns the locks, before publishing them:
//   auto table = locks::LockTable::Create(node0, /*count=*/1024, {locks::LockKind::kALock});
//   // Per thread, with that thread's own Session on its node:
//   auto client = locks::NewLockClient(locks::LockKind::kALock, my_node, session.get());
//   rdma::RemotePtr l = table->at(key % table->size());
//   if (absl::Status s = (*client)->Lock(l); !s.ok()) ...  // native if l is on my node
//   ... critical section ...
//   (*client)->Unlock(l);                                  // or a LockGuard
//
// Contract. A LockClient serves one thread (like its Session), holds at most
// ClientOptions::max_held locks, and is not reentrant. Every Lock/Unlock
// returns a status and never waits forever: a NIC failure comes back as its
// status, a wait past ClientOptions::timeout as DeadlineExceeded. After an
// error the lock may be unusable, like one whose holder crashed; the client
// stays usable for other locks (it never reuses a descriptor an error may
// have left in a queue: lock_internal::DescriptorLines).
// Costs per kind: locks/alock.h, locks/baselines.h, docs/design.md §4.
//
// Invariants. Every kind's lock is one kLockBytes line, kLockAlign-aligned,
// and the all-zero line is unlocked with default parameters, so a lock may
// sit in any zero-filled allocation (InitLock sets non-default budgets before
// publication).

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/attributes.h"
#include "absl/base/internal/raw_logging.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdma/node.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"

namespace locks {

// Every lock kind is one line of this size and alignment.
inline constexpr size_t kLockBytes = 64;
inline constexpr size_t kLockAlign = 64;

enum class LockKind {
  kALock,     // asymmetric cohort lock (locks/alock.h); native path uses no NIC op
  kRdmaSpin,  // NIC CAS to acquire, RDMA WRITE to release; every thread via the NIC
  kRdmaMcs,   // MCS queue, every thread (local ones too, over loopback) via the NIC
  kLocalMcs,  // MCS with CPU atomics; native path only (the native ceiling)
};
// "alock", "rdma-spin", "rdma-mcs", "local-mcs".
absl::string_view LockKindName(LockKind k);
absl::StatusOr<LockKind> ParseLockKind(absl::string_view name);

// How a thread reaches a lock: rdma::Path (rdma/path.h). kAuto: native (CPU)
// when the lock is on my node, else remote; kLoopback: through the NIC even
// when on my node; kNative / kRemote: insist on that path (InvalidArgument
// when the lock's node does not allow it).
using rdma::Path;

// Which side of an ALock an acquire joined: the native (CPU) cohort or the
// NIC (remote + loopback) cohort. For the other kinds, kLocal means "served by
// the CPU" (local MCS) and kRemote "served by the NIC".
enum class Cohort : uint8_t { kLocal = 0, kRemote = 1 };
absl::string_view CohortName(Cohort c);

// ALock budgets: how many consecutive acquisitions one cohort may make while
// the other cohort waits (docs/design.md §4). Must be >= 1; the paper used 5 and 5.
struct Budgets {
  int32_t local = 5;
  int32_t remote = 5;
};
inline constexpr int32_t kDefaultBudget = 5;
inline constexpr int32_t kMaxBudget = 1 << 30;

struct LockInit {
  LockKind kind = LockKind::kALock;
  Budgets budgets;  // ALock only; ignored by the baselines
};

// Initializes the lock line at `lock` (on node `self`, zero-filled, not yet
// visible to other threads) with CPU stores. A zero line is already a valid
// lock of every kind with default budgets; this only matters for non-default
// ALock budgets. InvalidArgument when `lock` is not on `self`, misaligned, or a
// budget is out of 1..kMaxBudget.
absl::Status InitLock(rdma::RemotePtr lock, rdma::NodeId self, const LockInit& init);

// OK when locks of `kind` can live on and be used from `node`: every kind but
// kLocalMcs takes its lock word with NIC CAS/FAA, so a device whose atomic_cap
// is NONE cannot run it. FailedPrecondition otherwise, naming the device.
// `user` names who needs the lock in the message ("ALock", "HashMap", ...).
absl::Status RequireNicAtomics(rdma::Node& node, LockKind kind, absl::string_view user);

// `count` locks in consecutive lines of one node's arena. Copyable handle; the
// memory stays until Destroy.
class LockTable {
 public:
  LockTable() = default;
  // Allocates and initializes the locks on `node`. Call on the owning node,
  // before any thread uses them (InitLock's rule). FailedPrecondition when the
  // lock kind needs NIC atomics and `node`'s device has none.
  static absl::StatusOr<LockTable> Create(rdma::Node& node, size_t count, const LockInit& init);
  // Returns the memory to the node. No thread may use or hold the locks.
  void Destroy(rdma::Node& node);

  rdma::RemotePtr at(size_t i) const { return base_ + i * kLockBytes; }
  rdma::RemotePtr base() const { return base_; }
  size_t size() const { return count_; }
  rdma::NodeId node() const { return base_.node(); }
  const LockInit& init() const { return init_; }

 private:
  rdma::RemotePtr base_;
  size_t count_ = 0;
  LockInit init_;
};

struct ClientOptions {
  // Locks this client may hold at the same time (descriptors it allocates in
  // its node's arena, one 64-byte line each).
  int max_held = 8;
  // Longest a single Lock() waits (queue + Peterson) or Unlock() waits for a
  // successor's link before returning DeadlineExceeded.
  std::chrono::nanoseconds timeout = std::chrono::seconds(30);
  // Busy-spin iterations before a waiter starts yielding its CPU (2-core
  // machines: the holder and the soft NIC need it).
  int spins_before_yield = 64;
  // ALock: the most spins between two polls (READs of the lock line) of a
  // NIC locker waiting in Peterson for the native side; the gap doubles from
  // 1 up to this. Lower it where the native side gives the lock up as soon
  // as it sees a NIC waiter (the queue's native lease), so that the NIC
  // locker notices at once.
  int max_peterson_poll_backoff = 32;
};

// One thread's handle for acquiring locks of one kind. Not thread-safe.
class LockClient {
 public:
  virtual ~LockClient() = default;
  LockClient(const LockClient&) = delete;
  LockClient& operator=(const LockClient&) = delete;

  virtual LockKind kind() const = 0;

  // Acquires `lock` (a line from a LockTable or InitLock). Blocks until held,
  // the timeout passes (DeadlineExceeded), or the NIC fails. Errors:
  //   FailedPrecondition: already held by this client; a NIC path is needed
  //     but the client has no Session; local-mcs on a lock of another node.
  //   ResourceExhausted: already holding max_held locks.
  virtual absl::Status Lock(rdma::RemotePtr lock, Path path = Path::kAuto) = 0;
  // Releases a lock this client holds (over the path it was acquired on).
  // FailedPrecondition when not held by this client.
  virtual absl::Status Unlock(rdma::RemotePtr lock) = 0;

  // The cohort/path an acquire of `lock` with `path` would take from here.
  virtual Cohort CohortFor(rdma::RemotePtr lock, Path path = Path::kAuto) const = 0;
  // Whether this client currently holds `lock`.
  virtual bool Holds(rdma::RemotePtr lock) const = 0;

  rdma::NodeId self() const { return self_; }
  rdma::Session* session() const { return session_; }

 protected:
  LockClient(rdma::NodeId self, rdma::Session* session) : self_(self), session_(session) {}

 private:
  rdma::NodeId self_;
  rdma::Session* session_;
};

// Crash repair (docs/design.md §4 "Crash repair", §5 "Failures and
// repair"), run by the process hosting `lock` once it has declared node
// `dead` dead (rdma::Cluster::WatchDeaths), with a Session on the lock's
// node. When the lock's NIC word holds the token of a client on `dead`, the
// home takes the NIC side over (a NIC CAS from that token to a token of its
// own), runs `fix`, releases it and returns true; otherwise nothing changes
// (false). The CAS makes it exactly once: a second repair, or one racing a
// live client, finds another value. `fix` runs at once, while native
// threads may be inside the lock (the dead holder may have been waiting for
// them), so it may change only what the dead holder marked as its own. An
// ALock's turn announced by a NIC waiter on `dead` is freed too (no fix).
// For kALock and kRdmaSpin, whose NIC word names its one NIC holder;
// Unimplemented for the MCS kinds, whose queue links live in the waiters'
// own memory. `fix`'s error is returned after the lock is released.
absl::StatusOr<bool> RepairDeadHolder(LockKind kind, rdma::Session& home, rdma::RemotePtr lock, rdma::NodeId dead,
                                      const std::function<absl::Status()>& fix = nullptr);

// A client of `kind` for the calling thread, living on `node`. `session` is
// the thread's own Session on `node`; it may be null only for kLocalMcs and
// for an ALock client that only ever takes local locks natively. `node` must
// outlive the client (it frees its descriptors there).
absl::StatusOr<std::unique_ptr<LockClient>> NewLockClient(LockKind kind, rdma::Node& node,
                                                          rdma::Session* session,
                                                          const ClientOptions& options = {});

// RAII: Lock in the constructor, Unlock in Release() or the destructor.
// Check status() before entering the critical section. Call Release() to see
// Unlock's status; if the destructor has to unlock and that fails, it logs the
// error to stderr (a destructor cannot return it, and it must not vanish).
class LockGuard {
 public:
  LockGuard(LockClient& client, rdma::RemotePtr lock, Path path = Path::kAuto)
      : client_(&client), lock_(lock), status_(client.Lock(lock, path)) {}
  ~LockGuard() {
    if (absl::Status s = Release(); !s.ok()) {
      ABSL_RAW_LOG(ERROR, "locks::LockGuard: Unlock of %d:0x%llx failed in the destructor: %s", int{lock_.node()},
                   static_cast<unsigned long long>(lock_.address()), s.ToString().c_str());
    }
  }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Unlocks now (once). Returns Unlock's status, or OK if not held.
  ABSL_MUST_USE_RESULT absl::Status Release() {
    if (client_ == nullptr || !status_.ok()) return absl::OkStatus();
    LockClient* c = std::exchange(client_, nullptr);
    return c->Unlock(lock_);
  }

 private:
  LockClient* client_;
  rdma::RemotePtr lock_;
  absl::Status status_;
};

}  // namespace locks

#endif  // LOCKS_LOCK_H_
