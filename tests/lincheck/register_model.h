#ifndef TESTS_LINCHECK_REGISTER_MODEL_H_
#define TESTS_LINCHECK_REGISTER_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "tests/lincheck/model.h"

namespace lincheck {

// A single int64 register, initially `initial`.
//
//   read()          -> {value}
//   write(v)        -> {}
//   cas(expected, desired) -> {ok}   ok is 1 iff the value was `expected`,
//                                    in which case it becomes `desired`
//
// State: {value}. One partition (a register has no independent parts).
class RegisterModel : public Model {
 public:
  explicit RegisterModel(int64_t initial = 0) : initial_(initial) {}

  absl::string_view name() const override { return "register"; }
  absl::Status Validate(const Operation& op) const override;
  State Init() const override { return {initial_}; }
  StepResult Step(const State& state, const Operation& op) const override;
  std::string Describe(const Operation& op) const override;
  std::string DescribeState(const State& state) const override;

 private:
  const int64_t initial_;
};

}  // namespace lincheck

#endif  // TESTS_LINCHECK_REGISTER_MODEL_H_
