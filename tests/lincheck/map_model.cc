#include "tests/lincheck/map_model.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace lincheck {
namespace {

std::string Binding(int64_t found, int64_t value) {
  return found ? absl::StrCat(value) : std::string("absent");
}

bool HasLowerBound(const History& history) {
  return std::any_of(history.begin(), history.end(), [](const Operation& op) {
    return op.op == "lower_bound";
  });
}

}  // namespace

size_t MapModel::LowerBoundPair(const State& state, int64_t key) {
  size_t lo = 0, hi = state.size() / 2;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (state[2 * mid] < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

bool MapModel::Has(const State& state, size_t pair, int64_t key) {
  return 2 * pair < state.size() && state[2 * pair] == key;
}

absl::Status MapModel::Validate(const Operation& op) const {
  if (op.op == "put") return CheckShape(op, 2, {2});
  if (op.op == "get" || op.op == "erase") return CheckShape(op, 1, {2});
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown ", name(), " operation \"", op.op, "\" (put, get, erase)"));
}

StepResult MapModel::Step(const State& state, const Operation& op) const {
  const int64_t key = op.args[0];
  const size_t pair = LowerBoundPair(state, key);
  const bool found = Has(state, pair, key);
  const int64_t prev = found ? state[2 * pair + 1] : 0;
  const bool ok = Matches(op, {found ? 1 : 0, prev});
  if (op.op == "get") return {ok, state};
  State next = state;
  if (op.op == "put") {
    if (found) {
      next[2 * pair + 1] = op.args[1];
    } else {
      const int64_t binding[] = {key, op.args[1]};
      next.insert(next.begin() + 2 * pair, binding, binding + 2);
    }
  } else if (found) {  // erase
    next.erase(next.begin() + 2 * pair, next.begin() + 2 * pair + 2);
  }
  return {ok, std::move(next)};
}

std::vector<Partition> MapModel::PartitionHistory(const History& history) const {
  return PartitionByKey(history);
}

std::string MapModel::Describe(const Operation& op) const {
  std::string call =
      op.op == "put" ? absl::StrCat("put(", op.args[0], ", ", op.args[1], ")")
                     : absl::StrCat(op.op, "(", op.args[0], ")");
  if (op.pending()) return absl::StrCat(call, " -> pending");
  const std::string binding = Binding(op.result[0], op.result[1]);
  if (op.op == "get") return absl::StrCat(call, " -> ", binding);
  return absl::StrCat(call, " -> was ", binding);
}

std::string MapModel::DescribeState(const State& state) const {
  std::string out = "{";
  for (size_t i = 0; i + 1 < state.size(); i += 2) {
    absl::StrAppend(&out, i ? ", " : "", state[i], ": ", state[i + 1]);
  }
  return out + "}";
}

absl::Status OrderedMapModel::Validate(const Operation& op) const {
  if (op.op == "lower_bound") return CheckShape(op, 1, {3});
  if (op.op == "put" || op.op == "get" || op.op == "erase") {
    return MapModel::Validate(op);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown ordered_map operation \"", op.op,
      "\" (put, get, erase, lower_bound)"));
}

StepResult OrderedMapModel::Step(const State& state, const Operation& op) const {
  if (op.op != "lower_bound") return MapModel::Step(state, op);
  const size_t pair = LowerBoundPair(state, op.args[0]);
  const bool found = 2 * pair < state.size();
  const bool ok = found ? Matches(op, {1, state[2 * pair], state[2 * pair + 1]})
                        : Matches(op, {0, 0, 0});
  return {ok, state};
}

std::vector<Partition> OrderedMapModel::PartitionHistory(
    const History& history) const {
  if (HasLowerBound(history)) return Model::PartitionHistory(history);
  return PartitionByKey(history);
}

std::string OrderedMapModel::Describe(const Operation& op) const {
  if (op.op != "lower_bound") return MapModel::Describe(op);
  std::string call = absl::StrCat("lower_bound(", op.args[0], ")");
  if (op.pending()) return absl::StrCat(call, " -> pending");
  if (!op.result[0]) return absl::StrCat(call, " -> none");
  return absl::StrCat(call, " -> ", op.result[1], ": ", op.result[2]);
}

}  // namespace lincheck
