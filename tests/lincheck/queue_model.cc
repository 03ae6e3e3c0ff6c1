#include "tests/lincheck/queue_model.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/lincheck/queue_decider.h"

namespace lincheck {

absl::Status QueueModel::Validate(const Operation& op) const {
  // Flags are 0 or 1 and an empty dequeue's value is 0: the only results
  // Step can match, so the queue decider (which reads any nonzero flag as
  // 1) and the search agree on every valid history.
  if (op.op == "enqueue") {
    if (absl::Status s = CheckShape(op, 1, {0, 1}); !s.ok()) return s;
    if (op.result.size() == 1 && op.result[0] != 0 && op.result[0] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("enqueue result flag ", op.result[0], " is not 0 or 1"));
    }
    return absl::OkStatus();
  }
  if (op.op == "dequeue") {
    if (absl::Status s = CheckShape(op, 0, {2}); !s.ok()) return s;
    if (op.result.size() == 2 && op.result[0] != 0 && op.result[0] != 1) {
      return absl::InvalidArgumentError(absl::StrCat("dequeue result flag ", op.result[0], " is not 0 or 1"));
    }
    if (op.result.size() == 2 && op.result[0] == 0 && op.result[1] != 0) {
      return absl::InvalidArgumentError(absl::StrCat("an empty dequeue carries value ", op.result[1], ", not 0"));
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown queue operation \"", op.op, "\" (enqueue, dequeue)"));
}

StepResult QueueModel::Step(const State& state, const Operation& op) const {
  if (op.op == "enqueue") {
    const bool full = capacity_ != 0 && state.size() >= capacity_;
    const bool ok = op.result.empty() ? !full : Matches(op, {full ? 0 : 1});
    if (full) return {ok, state};
    State next = state;
    next.push_back(op.args[0]);
    return {ok, std::move(next)};
  }
  // dequeue
  if (state.empty()) return {Matches(op, {0, 0}), state};
  return {Matches(op, {1, state.front()}), State(state.begin() + 1, state.end())};
}

std::string QueueModel::Describe(const Operation& op) const {
  if (op.op == "enqueue") {
    std::string call = absl::StrCat("enqueue(", op.args[0], ")");
    if (op.pending()) return absl::StrCat(call, " -> pending");
    if (op.result.empty() || op.result[0]) return call;
    return absl::StrCat(call, " -> full");
  }
  if (op.pending()) return "dequeue() -> pending";
  if (!op.result[0]) {
    return op.result[1] ? absl::StrCat("dequeue() -> empty (value ", op.result[1], ")")
                        : std::string("dequeue() -> empty");
  }
  return absl::StrCat("dequeue() -> ", op.result[1]);
}

std::string QueueModel::DescribeState(const State& state) const {
  return absl::StrCat("front [", absl::StrJoin(state, ", "), "] back");
}

std::optional<PartitionOutcome> QueueModel::DecideFast(const History& partition,
                                                       absl::Time) const {
  if (capacity_ != 0) return std::nullopt;
  return DecideUniqueValueQueue(partition);
}

}  // namespace lincheck
