#ifndef STRUCTURES_COMMON_HELD_LOCKS_H_
#define STRUCTURES_COMMON_HELD_LOCKS_H_

// The locks one writer step holds, released in reverse order: a scoped guard
// in the spirit of LevelDB's MutexLock, for locks whose release can fail.
//
//   HeldLocks held(client.lock(), route);
//   absl::Status s = held.Lock(first);
//   if (s.ok()) s = held.Lock(second);
//   if (s.ok()) s = Step();
//   return held.Release(std::move(s));
//
// Contract: one thread. Lock/LockAndRead take a lock over the route's path
// (a failed acquire holds nothing). Release unlocks, last taken first, every
// lock the client still holds (a step may release one itself) and returns
// `s`, or the first unlock error when `s` is OK. The destructor releases what
// Release did not; it is reached only by an early return that already
// carries an error, so its unlock errors give way to that one. At most two
// locks at a time.

#include <array>
#include <cstddef>
#include <utility>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "locks/alock.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/common/client.h"

namespace structures {

class HeldLocks {
 public:
  HeldLocks(locks::ALockClient& lock, const Route& route) : lock_(lock), route_(route) {}
  HeldLocks(const HeldLocks&) = delete;
  HeldLocks& operator=(const HeldLocks&) = delete;
  ~HeldLocks() { (void)Release(absl::OkStatus()); }

  absl::Status Lock(rdma::RemotePtr lock) { return LockAndRead(lock, {}, nullptr); }
  // Lock, and on the NIC path READ `also` in the acquire's own round trip;
  // `*also_done` says whether they were read as the holder
  // (locks::ALockClient::LockAndRead).
  absl::Status LockAndRead(rdma::RemotePtr lock, absl::Span<const rdma::ChainedRead> also, bool* also_done) {
    if (n_ == held_.size()) return absl::InternalError("HeldLocks holds at most two locks");
    bool done = false;
    absl::Status s = lock_.LockAndRead(lock, route_.path, also, &done);
    if (also_done != nullptr) *also_done = done;
    if (s.ok()) held_[n_++] = lock;
    return s;
  }

  absl::Status Release(absl::Status s) {
    while (n_ > 0) {
      const rdma::RemotePtr lock = held_[--n_];
      if (!lock_.Holds(lock)) continue;
      absl::Status u = lock_.Unlock(lock);
      if (s.ok()) s = std::move(u);
    }
    return s;
  }

 private:
  locks::ALockClient& lock_;
  const Route route_;
  std::array<rdma::RemotePtr, 2> held_;
  size_t n_ = 0;
};

}  // namespace structures

#endif  // STRUCTURES_COMMON_HELD_LOCKS_H_
