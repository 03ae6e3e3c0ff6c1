#ifndef TESTS_LINCHECK_ORDERED_SET_MODEL_H_
#define TESTS_LINCHECK_ORDERED_SET_MODEL_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/lincheck/model.h"

namespace lincheck {

// An ordered set of int64 keys (e.g. a skiplist).
//
//   insert(k)      -> {inserted}    1 iff k was absent
//   erase(k)       -> {erased}      1 iff k was present
//   contains(k)    -> {found}
//   lower_bound(k) -> {found, key}  the smallest key >= k; {0, 0} when none
//
// lower_bound reads many keys, so a history containing one is checked as a
// single partition; without any it is partitioned per key.
// State: the keys, sorted.
class OrderedSetModel : public Model {
 public:
  absl::string_view name() const override { return "ordered_set"; }
  absl::Status Validate(const Operation& op) const override;
  State Init() const override { return {}; }
  StepResult Step(const State& state, const Operation& op) const override;
  std::vector<Partition> PartitionHistory(const History& history) const override;
  std::string Describe(const Operation& op) const override;
  std::string DescribeState(const State& state) const override;
};

}  // namespace lincheck

#endif  // TESTS_LINCHECK_ORDERED_SET_MODEL_H_
