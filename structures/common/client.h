#ifndef STRUCTURES_COMMON_CLIENT_H_
#define STRUCTURES_COMMON_CLIENT_H_

// What every structure's per-thread client does the same way (docs/design.md
// §9): find the parts, route an operation to its home node and path, read
// optimistically with a bounded fallback to reading under the lock, and run a
// writer's step under the lock. A structure's client owns one StructureClient
// and writes only its own algorithm on top.
//
// Threading: one thread, like the Session it uses.

#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/node.h"
#include "rdma/path.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/common/parts.h"

namespace structures {

using rdma::Path;

// Per-client counters of the optimistic reads (plain; read by the client's
// thread or after it stops).
struct ReadStats {
  uint64_t torn_reads = 0;    // optimistic reads that failed validation
  uint64_t locked_reads = 0;  // reads that gave up optimism and took the lock
};

// Where one operation goes.
struct Route {
  rdma::NodeId home = 0;
  Path path = Path::kNative;  // taken: kNative, kLoopback or kRemote
  rdma::RemotePtr base;       // the home node's part
  bool native() const { return path == Path::kNative; }
};

class StructureClient {
 public:
  // Torn optimistic reads in a row before a reader takes the lock.
  static constexpr int kOptimisticReads = 64;

  // A client on `node` (hosted by this process) using `session` (that
  // thread's own Session on `node`; null for a client that only takes the
  // native path) for the structure whose parts `parts` describes. Allocates
  // an ALock client with `lock_options.max_held` descriptors in `node`'s
  // arena; its waits are bounded by `lock_options.timeout`. Errors:
  // InvalidArgument (node out of range, a session of another node or
  // cluster), FailedPrecondition (node shut down, a part unreachable).
  static absl::StatusOr<StructureClient> Create(const PartDirectory& parts, rdma::Node& node,
                                                rdma::Session* session,
                                                const locks::ClientOptions& lock_options = OneLock());
  // Lock options for a client that holds one lock at a time.
  static locks::ClientOptions OneLock() {
    locks::ClientOptions o;
    o.max_held = 1;
    return o;
  }
  // Lock options for a client that holds up to two locks at a time.
  static locks::ClientOptions TwoLocks() {
    locks::ClientOptions o;
    o.max_held = 2;
    return o;
  }

  StructureClient(StructureClient&&) = default;
  StructureClient& operator=(StructureClient&&) = delete;

  // Routes an operation on node `home`'s part requested with `requested`.
  // Errors: Unavailable (this client's node is shut down or fenced, or home
  // is a node of this process that is shut down), FailedPrecondition (a NIC
  // path is needed but there is no Session), InvalidArgument (a path that cannot be
  // honoured, rdma/path.h).
  ABSL_ATTRIBUTE_ALWAYS_INLINE absl::Status RouteTo(rdma::NodeId home, Path requested, Route* r) const {
    // The checks are cheap and always pass in the common case; the messages
    // are built out of line (RouteError), which keeps this inlinable into
    // every operation's fast path.
    if (ABSL_PREDICT_FALSE(node_.is_shut_down() || home >= bases_.size() ||
                           (nodes_[home] != nullptr && nodes_[home]->is_shut_down()) ||
                           !rdma::PathAllowed(requested, node_.id(), home))) {
      return RouteError(home, requested);
    }
    r->home = home;
    r->path = rdma::TakenPath(requested, node_.id(), home);
    r->base = bases_[home];
    if (ABSL_PREDICT_FALSE(r->base.is_null() || (!r->native() && session_ == nullptr))) return NoSession(home);
    // A QP an earlier operation broke (a transient NIC error) is connected
    // again before this one, else every later operation to the home would
    // fail: only when the home is alive and the same process (otherwise the
    // operation returns the session's error for it, as before).
    if (ABSL_PREDICT_FALSE(!r->native() && session_->broken(home))) (void)session_->Repair(home);
    return absl::OkStatus();
  }

  // Reads with `read_once(bool* valid)` until it reports a valid read, at
  // most kOptimisticReads times (yielding after the first few, so a writer
  // on the same core can finish); then once more under `lock` (taken over
  // `r`'s path), which a correct structure always validates, since writers
  // hold the lock. A read still invalid under the lock is DataLoss
  // (`what_broke()` says what, called only then): only a writer that
  // bypassed the lock causes it.
  template <typename ReadOnce, typename WhatBroke>
  absl::Status ReadValidated(const Route& r, rdma::RemotePtr lock, ReadOnce&& read_once, WhatBroke&& what_broke) {
    return ReadValidatedUnder(
        [&](auto&& step) { return WithLock(r, lock, step); }, read_once, what_broke);
  }
  // ReadValidated for a read that needs several locks: the last read runs
  // inside `under_locks(step)`, which takes them, runs `step` and releases
  // them.
  template <typename UnderLocks, typename ReadOnce, typename WhatBroke>
  absl::Status ReadValidatedUnder(UnderLocks&& under_locks, ReadOnce&& read_once, WhatBroke&& what_broke) {
    bool valid = false;
    for (int attempt = 0; attempt < kOptimisticReads; ++attempt) {
      if (absl::Status s = read_once(&valid); !s.ok()) return s;
      if (valid) return absl::OkStatus();
      ++stats_.torn_reads;
      if (attempt >= 2) std::this_thread::yield();
    }
    ++stats_.locked_reads;
    absl::Status s = under_locks([&] { return read_once(&valid); });
    if (!s.ok()) return s;
    if (!valid) return Corrupt(what_broke());
    return absl::OkStatus();
  }

  // Takes `lock` over `r`'s path, runs `step`, and releases the lock if it is
  // still held (a step may release it itself). Every exit releases it; the
  // step's error wins over the unlock's.
  template <typename Step>
  absl::Status WithLock(const Route& r, rdma::RemotePtr lock, Step&& step) {
    return WithLockAndRead(r, lock, {}, [&](bool) { return step(); });
  }
  // WithLock whose NIC-path acquire also performs the READs `also` in its own
  // round trip (locks::ALockClient::LockAndRead); `step(also_done)` learns
  // whether they were done as the holder (else it reads what it needs).
  template <typename Step>
  absl::Status WithLockAndRead(const Route& r, rdma::RemotePtr lock, absl::Span<const rdma::ChainedRead> also,
                               Step&& step) {
    bool also_done = false;
    if (absl::Status s = lock_->LockAndRead(lock, r.path, also, &also_done); !s.ok()) return s;
    absl::Status s = step(also_done);
    if (lock_->Holds(lock)) {
      absl::Status u = lock_->Unlock(lock);
      if (s.ok()) s = u;
    }
    return s;
  }

  // Why RouteTo refused `home` / `requested` (called only when it did).
  absl::Status RouteError(rdma::NodeId home, Path requested) const;

  absl::Status Corrupt(absl::string_view what_broke) const {
    return absl::DataLossError(absl::StrCat(what_, ": ", what_broke, " under the lock (a writer bypassed the lock)"));
  }
  absl::Status NoSession(rdma::NodeId home) const {
    if (!unreachable_[home].ok()) {
      return absl::Status(unreachable_[home].code(), absl::StrCat(what_, ": ", unreachable_[home].message()));
    }
    return absl::FailedPreconditionError(absl::StrCat(what_, " client on node ", node_.id(),
                                                      " has no Session: cannot reach node ", home, " through the NIC"));
  }

  rdma::Node& node() const { return node_; }
  rdma::Session* session() const { return session_; }
  locks::ALockClient& lock() { return *lock_; }
  int num_nodes() const { return static_cast<int>(bases_.size()); }
  const ReadStats& stats() const { return stats_; }

 private:
  StructureClient(std::string what, std::vector<rdma::RemotePtr> bases, std::vector<rdma::Node*> nodes,
                  std::vector<absl::Status> unreachable, rdma::Node& node, rdma::Session* session,
                  std::unique_ptr<locks::ALockClient> lock)
      : what_(std::move(what)),
        bases_(std::move(bases)),
        nodes_(std::move(nodes)),
        unreachable_(std::move(unreachable)),
        node_(node),
        session_(session),
        lock_(std::move(lock)) {}

  std::string what_;
  std::vector<rdma::RemotePtr> bases_;  // per node: its part (null: unreachable)
  std::vector<rdma::Node*> nodes_;      // per node when in this process (to see shut-downs)
  std::vector<absl::Status> unreachable_;  // per node: why its base is null (PartDirectory::Resolve), or OK
  rdma::Node& node_;
  rdma::Session* session_;
  std::unique_ptr<locks::ALockClient> lock_;
  ReadStats stats_;
};

// A structure's per-thread client: its StructureClient on `node` with
// `lock_options`, then `Client(std::move(common), args...)`. Errors are
// StructureClient::Create's.
template <typename Client, typename... Args>
absl::StatusOr<std::unique_ptr<Client>> MakeClient(const PartDirectory& parts, rdma::Node& node,
                                                   rdma::Session* session, const locks::ClientOptions& lock_options,
                                                   Args&&... args) {
  absl::StatusOr<StructureClient> common = StructureClient::Create(parts, node, session, lock_options);
  if (!common.ok()) return common.status();
  return std::make_unique<Client>(std::move(*common), std::forward<Args>(args)...);
}

}  // namespace structures

#endif  // STRUCTURES_COMMON_CLIENT_H_
