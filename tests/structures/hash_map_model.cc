#include "tests/structures/hash_map_model.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace structures::testing {

absl::Status HashMapModel::Validate(const lincheck::Operation& op) const {
  if (op.op == "insert") return CheckShape(op, 2, {1});
  if (op.op == "contains") return CheckShape(op, 1, {1});
  if (op.op == "put" || op.op == "get" || op.op == "erase") return MapModel::Validate(op);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown hash_map operation \"", op.op, "\" (put, get, erase, insert, contains)"));
}

lincheck::StepResult HashMapModel::Step(const lincheck::State& state, const lincheck::Operation& op) const {
  if (op.op != "insert" && op.op != "contains") return MapModel::Step(state, op);
  const int64_t key = op.args[0];
  const size_t pair = LowerBoundPair(state, key);
  const bool found = Has(state, pair, key);
  if (op.op == "contains") return {Matches(op, {found ? 1 : 0}), state};
  if (found) return {Matches(op, {0}), state};
  lincheck::State next = state;
  const int64_t binding[] = {key, op.args[1]};
  next.insert(next.begin() + 2 * pair, binding, binding + 2);
  return {Matches(op, {1}), std::move(next)};
}

std::string HashMapModel::Describe(const lincheck::Operation& op) const {
  if (op.op != "insert" && op.op != "contains") return MapModel::Describe(op);
  std::string call = op.op == "insert" ? absl::StrCat("insert(", op.args[0], ", ", op.args[1], ")")
                                       : absl::StrCat("contains(", op.args[0], ")");
  if (op.pending()) return absl::StrCat(call, " -> pending");
  if (op.op == "insert") return absl::StrCat(call, op.result[0] ? " -> inserted" : " -> was present");
  return absl::StrCat(call, op.result[0] ? " -> found" : " -> absent");
}

}  // namespace structures::testing
