#ifndef TESTS_LINCHECK_SEARCH_H_
#define TESTS_LINCHECK_SEARCH_H_

// The generic decision procedure for one partition: the Wing–Gong search as
// refined by Lowe ("Testing for linearizability", 2017), the algorithm behind
// Porcupine.
//
// The history becomes a doubly linked list of call and return events sorted by
// time (calls first on ties, so touching intervals count as concurrent). The
// search repeatedly linearizes a minimal operation — one whose call precedes
// every pending return in the list — by applying it to the model and lifting
// its two events out of the list, and backtracks when it meets the return of
// an operation it has not linearized. A cache of (linearized set, state)
// pairs already explored prunes the search: two orderings of the same set of
// operations that reach the same state have the same future.
//
// Pending operations (never returned) have their return at the end of the
// list. Once only such returns remain, the remaining pending operations are
// deemed never to have taken effect, which completes the linearization. A
// pending operation's unknown result always matches.

#include <cstddef>

#include "absl/time/time.h"
#include "tests/lincheck/history.h"
#include "tests/lincheck/model.h"
#include "tests/lincheck/verdict.h"

namespace lincheck {

struct SearchLimits {
  // The search returns kUnknown by this time, stopping early enough to free
  // its cache before it.
  absl::Time deadline = absl::InfiniteFuture();
  // Approximate bound on the memory the cache may use.
  size_t max_cache_bytes = size_t{1} << 30;
};

// Decides whether `ops` is linearizable with respect to `model`.
// Precondition: model.Validate(op) is OK for every op. kUnknown when a limit
// is hit; for kIllegal, `longest_linearization` is filled in.
PartitionOutcome SearchLinearization(const Model& model, const History& ops,
                                     const SearchLimits& limits);

}  // namespace lincheck

#endif  // TESTS_LINCHECK_SEARCH_H_
