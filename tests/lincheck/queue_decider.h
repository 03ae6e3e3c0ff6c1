#ifndef TESTS_LINCHECK_QUEUE_DECIDER_H_
#define TESTS_LINCHECK_QUEUE_DECIDER_H_

// A polynomial-time linearizability check for unbounded FIFO queue histories
// whose enqueued values are distinct, in the style of Henzinger, Sezgin and
// Vafeiadis, "Aspect-oriented linearizability proofs" (CONCUR 2013), extended
// to dequeues that return empty (cf. Bouajjani, Emmi, Enea and Hamza, "On
// reducing linearizability to state reachability", ICALP 2015).
//
// With distinct values, such a history is linearizable iff it shows none of
// these violations (x <h y: x returned before y was invoked):
//
//   repeat   two dequeues return the same value;
//   fresh    a dequeue returns a value no operation enqueued, or returns
//            before the enqueue of its value was invoked;
//   order    enq(a) <h enq(b) and b is dequeued, but a is never dequeued or
//            deq(b) <h deq(a);
//   empty    a dequeue returns empty although, throughout its interval, some
//            value was provably in the queue: value v is provably present on
//            the open interval (response of enq(v), invoke of deq(v)), or
//            after enq(v)'s response if v is never dequeued, and the union of
//            those intervals covers the dequeue's closed interval.
//
// The check is O(n log n). A pending enqueue is treated exactly: if its
// value is dequeued it took effect (its response is unbounded), otherwise it
// is deemed never to have taken effect (the most permissive choice). A
// pending dequeue either never took effect or removed a value no completed
// dequeue returned; every such assignment is tried (values removed form a
// prefix of the enqueue order, which keeps the candidates few), so the cost
// is O(choices * n log n) with at most 4096 choices.
//
// Preconditions, else nullopt (the caller falls back to the generic search):
// enqueued values are distinct, no enqueue reports failure ({0}), and the
// pending dequeues allow at most 4096 choices (in practice: a handful of
// pending dequeues, as after a crash).
//
// The property tests cross-check the decider against the generic search,
// exhaustively on all small histories over a few values and on thousands of
// random ones.

#include <optional>

#include "tests/lincheck/history.h"
#include "tests/lincheck/verdict.h"

namespace lincheck {

// Operation names and results as in QueueModel. Precondition: every
// operation is valid for QueueModel.
std::optional<PartitionOutcome> DecideUniqueValueQueue(const History& ops);

}  // namespace lincheck

#endif  // TESTS_LINCHECK_QUEUE_DECIDER_H_
