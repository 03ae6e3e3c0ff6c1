#include "tests/lincheck/ordered_set_model.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lincheck {

absl::Status OrderedSetModel::Validate(const Operation& op) const {
  if (op.op == "insert" || op.op == "erase" || op.op == "contains") {
    return CheckShape(op, 1, {1});
  }
  if (op.op == "lower_bound") return CheckShape(op, 1, {2});
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ordered_set operation \"", op.op,
                   "\" (insert, erase, contains, lower_bound)"));
}

StepResult OrderedSetModel::Step(const State& state, const Operation& op) const {
  const int64_t key = op.args[0];
  const auto it = std::lower_bound(state.begin(), state.end(), key);
  if (op.op == "lower_bound") {
    const bool ok = it == state.end() ? Matches(op, {0, 0}) : Matches(op, {1, *it});
    return {ok, state};
  }
  const bool found = it != state.end() && *it == key;
  if (op.op == "contains") return {Matches(op, {found ? 1 : 0}), state};
  State next = state;
  const size_t pos = it - state.begin();
  if (op.op == "insert") {
    if (!found) next.insert(next.begin() + pos, key);
    return {Matches(op, {found ? 0 : 1}), std::move(next)};
  }
  // erase
  if (found) next.erase(next.begin() + pos);
  return {Matches(op, {found ? 1 : 0}), std::move(next)};
}

std::vector<Partition> OrderedSetModel::PartitionHistory(
    const History& history) const {
  const bool has_lower_bound =
      std::any_of(history.begin(), history.end(),
                  [](const Operation& op) { return op.op == "lower_bound"; });
  if (has_lower_bound) return Model::PartitionHistory(history);
  return PartitionByKey(history);
}

std::string OrderedSetModel::Describe(const Operation& op) const {
  const std::string call = absl::StrCat(op.op, "(", op.args[0], ")");
  if (op.pending()) return absl::StrCat(call, " -> pending");
  if (op.op == "lower_bound") {
    return op.result[0] ? absl::StrCat(call, " -> ", op.result[1])
                        : absl::StrCat(call, " -> none");
  }
  return absl::StrCat(call, " -> ", op.result[0] ? "true" : "false");
}

std::string OrderedSetModel::DescribeState(const State& state) const {
  return absl::StrCat("{", absl::StrJoin(state, ", "), "}");
}

}  // namespace lincheck
