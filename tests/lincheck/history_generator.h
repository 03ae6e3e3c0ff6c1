#ifndef TESTS_LINCHECK_HISTORY_GENERATOR_H_
#define TESTS_LINCHECK_HISTORY_GENERATOR_H_

// Random histories that are linearizable by construction, for self-checks
// and benchmarks.
//
// A run is generated in sequential order: each operation gets a
// linearization point later than the previous one, is assigned to a thread
// that is idle by then, and gets an interval around its point, so operations
// of different threads overlap at random. Results come from a plain
// sequential implementation (std::map, std::deque, ...), independent of the
// models under test. Ordering by linearization points therefore witnesses
// linearizability.

#include <cstdint>

#include "tests/lincheck/history.h"

namespace lincheck {

struct GeneratorOptions {
  int threads = 4;
  int ops = 100;
  int keys = 8;       // keys are drawn from [0, keys)
  int values = 1000;  // values (maps, register) are drawn from [1, values]
  // Gap between consecutive linearization points, drawn from [1, max_gap_ns].
  int64_t max_gap_ns = 100;
  // Invoke-to-point and point-to-response delays, each from [0, max_latency_ns].
  int64_t max_latency_ns = 1000;
  // Each thread's last operation is left pending with this probability; a
  // pending operation takes effect or not with equal probability.
  double pending_probability = 0;
  uint64_t seed = 1;
};

// read() / write(v) / cas(expected, desired), register initially 0.
History GenerateRegisterHistory(const GeneratorOptions& options);
// put / get / erase.
History GenerateMapHistory(const GeneratorOptions& options);
// put / get / erase / lower_bound.
History GenerateOrderedMapHistory(const GeneratorOptions& options);
// insert / erase / contains, plus lower_bound if `with_lower_bound`.
History GenerateOrderedSetHistory(const GeneratorOptions& options,
                                  bool with_lower_bound);
// enqueue / dequeue of distinct values 1, 2, ...; dequeues may find the queue
// empty. `keys` and `values` are unused.
History GenerateQueueHistory(const GeneratorOptions& options);

// A value no generator ever writes or enqueues.
inline constexpr int64_t kNeverWritten = -7777;

// Changes the result of one completed operation, chosen at random, so that
// the history has no linearization at all: a read, get, dequeue... now
// returns kNeverWritten, a lower_bound returns a key below its argument, or a
// set operation with no other operation on its key overlapping it flips its
// boolean. Returns the operation's index, or -1 if no operation qualifies.
int CorruptOneResult(History& history, uint64_t seed);

// Changes the result of one completed read (register `read`, map `get`),
// chosen at random, to a stale value that really was written: a value v,
// different from the current one, such that every operation that may write v
// (write(v), cas(_, v), put(k, v); pending ones included) returned before a
// completed write W of another value (or an erase) on the same register or
// key was invoked, and W returned before the read was invoked. Every
// linearization then orders all writes of v, W, the read, in that order, so
// the read cannot return v: the history has no linearization. Unlike
// CorruptOneResult, the value is plausible on its own; only the order
// exposes it. Returns the operation's index, or -1 if none qualifies
// (queues and sets have no such reads).
int CorruptWithStaleValue(History& history, uint64_t seed);

}  // namespace lincheck

#endif  // TESTS_LINCHECK_HISTORY_GENERATOR_H_
