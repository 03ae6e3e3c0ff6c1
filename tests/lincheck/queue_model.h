#ifndef TESTS_LINCHECK_QUEUE_MODEL_H_
#define TESTS_LINCHECK_QUEUE_MODEL_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "tests/lincheck/model.h"

namespace lincheck {

// A FIFO queue of int64 values.
//
//   enqueue(v) -> {} or {ok}   {} asserts success; ok is 0 only when a
//                              bounded queue is full (then nothing changes)
//   dequeue()  -> {found, v}   {0, 0} when the queue is empty
//
// One partition: a queue is not separable per value.
// State: the contents, front first.
//
// Deciding: the generic search is exponential in the worst case, and a queue
// history's state is its whole contents. For an unbounded queue, DecideFast
// therefore uses a polynomial check (queue_decider.h) whenever its
// preconditions hold: enqueued values are distinct (make them so in tests,
// e.g. thread id * 2^32 + counter) and at most a handful of dequeues are
// pending. Otherwise the generic search runs, bounded by
// CheckOptions::timeout; it copes with a few dozen operations, so keep such
// histories short.
class QueueModel : public Model {
 public:
  // capacity 0 means unbounded.
  explicit QueueModel(size_t capacity = 0) : capacity_(capacity) {}

  absl::string_view name() const override { return "queue"; }
  absl::Status Validate(const Operation& op) const override;
  State Init() const override { return {}; }
  StepResult Step(const State& state, const Operation& op) const override;
  std::string Describe(const Operation& op) const override;
  std::string DescribeState(const State& state) const override;
  std::optional<PartitionOutcome> DecideFast(const History& partition,
                                             absl::Time deadline) const override;

 private:
  const size_t capacity_;
};

}  // namespace lincheck

#endif  // TESTS_LINCHECK_QUEUE_MODEL_H_
