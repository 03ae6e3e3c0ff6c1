#ifndef LOCKS_ALOCK_H_
#define LOCKS_ALOCK_H_

// ALock: a lock in one registered line that threads of the lock's own node
// take with CPU atomics alone (0 NIC ops), while threads of other nodes take
// it through the NIC (Baran, Nelson-Slivon, Tseng, Palmieri, SPAA 2024).
// Algorithm and proofs: docs/design.md §4; why each side has its own word: §3.
//
//   auto client = locks::ALockClient::Create(node, session.get());  // one per thread
//   if (absl::Status s = (*client)->Lock(lock); !s.ok()) return s;   // native if `lock` is on `node`
//   ... critical section ...
//   return (*client)->Unlock(lock);
//
// Shape: native threads queue (MCS) on the CpuWord l_tail; NIC threads (other
// nodes, and this node's with Path::kLoopback) take the NicWord r_tail one at
// a time with CAS 0 -> token (their descriptor line, which names their node),
// a waiter announcing its turn in r_next (the announced waiter goes next: a
// winning CAS steps aside for it);
// the native head and the NIC holder run Peterson over `victim`, skipping it
// when the other side's word is empty. The lock's home releases a dead
// node's token (RepairDeadHolder, lock.h). Layouts: locks/alock_types.h.
//
// Contract: ALockClient is a LockClient (lock.h: one per thread, errors,
// timeouts), plus an optional ALockObserver, LockAndRead (the acquire carries
// the caller's READs in its round trip) and stats(); members are declared in
// alock_client_internal.h. A lock's native threads use ALockClients, or one
// NativeGate (native_gate.h), or one NativeHold (native_hold.h): one kind
// per lock.
//
// Costs, uncontended (asserted by tests/locks/lock_api_test.cc):
//   native           0 NIC ops
//   remote/loopback  3 NIC ops, 2 doorbells, 2 round trips: acquire =
//                    {CAS r_tail 0->token, READ line} chained; release = CAS
//   contended        + {WRITE victim, READ line}, one READ of the line (and
//                    the caller's chained READs) per NIC poll, a
//                    {CAS, READ} chain per retry for the NIC side; a
//                    waiter's announcing CAS rides in a poll's chain, and
//                    freeing its turn, or stepping aside for another's, is
//                    one more CAS and round trip
//
// Invariants: only NIC atomics change r_tail and r_next, only CPU atomics
// l_tail; l_tail is nonzero while the native cohort holds or waits, r_tail
// while a NIC thread holds or waits in Peterson, or briefly, while one steps
// aside for an announced turn. Once a head has written `victim` and
// waits, the native side makes at most its budget (Budgets, lock.h) more
// acquisitions, the NIC side one (asserted by alock_fairness_test).

#include "locks/alock_client_internal.h"
#include "locks/alock_types.h"
#include "locks/lock.h"

namespace locks {

using ALockClient = lock_internal::BasicALockClient<lock_internal::ALockPolicy>;

}  // namespace locks

namespace locks::lock_internal {
extern template class BasicALockClient<ALockPolicy>;
}  // namespace locks::lock_internal

#endif  // LOCKS_ALOCK_H_
