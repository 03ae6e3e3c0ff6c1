#include "tests/lincheck/register_model.h"

#include "absl/strings/str_cat.h"

namespace lincheck {

absl::Status RegisterModel::Validate(const Operation& op) const {
  if (op.op == "read") return CheckShape(op, 0, {1});
  if (op.op == "write") return CheckShape(op, 1, {0});
  if (op.op == "cas") return CheckShape(op, 2, {1});
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown register operation \"", op.op, "\" (read, write, cas)"));
}

StepResult RegisterModel::Step(const State& state, const Operation& op) const {
  const int64_t value = state[0];
  if (op.op == "read") return {Matches(op, {value}), state};
  if (op.op == "write") return {true, {op.args[0]}};
  // cas
  const bool swapped = value == op.args[0];
  return {Matches(op, {swapped ? 1 : 0}), {swapped ? op.args[1] : value}};
}

std::string RegisterModel::Describe(const Operation& op) const {
  std::string call;
  if (op.op == "read") {
    call = "read()";
  } else if (op.op == "write") {
    call = absl::StrCat("write(", op.args[0], ")");
  } else {
    call = absl::StrCat("cas(expected=", op.args[0], ", desired=", op.args[1],
                        ")");
  }
  if (op.pending()) return absl::StrCat(call, " -> pending");
  if (op.op == "read") return absl::StrCat(call, " -> ", op.result[0]);
  if (op.op == "write") return call;
  return absl::StrCat(call, " -> ", op.result[0] ? "swapped" : "failed");
}

std::string RegisterModel::DescribeState(const State& state) const {
  return absl::StrCat("value ", state[0]);
}

}  // namespace lincheck
