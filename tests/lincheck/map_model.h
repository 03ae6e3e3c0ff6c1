#ifndef TESTS_LINCHECK_MAP_MODEL_H_
#define TESTS_LINCHECK_MAP_MODEL_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/lincheck/model.h"

namespace lincheck {

// A key-value map from int64 to int64. Every operation returns the previous
// binding of its key; `found` is 0 or 1, and an absent value reads as 0.
//
//   put(k, v)   -> {found, prev}   binds k to v
//   get(k)      -> {found, value}
//   erase(k)    -> {found, prev}   unbinds k
//
// Partitioned per key: operations on different keys commute.
// State: the bindings as a flat sorted list {k0, v0, k1, v1, ...}.
class MapModel : public Model {
 public:
  absl::string_view name() const override { return "map"; }
  absl::Status Validate(const Operation& op) const override;
  State Init() const override { return {}; }
  StepResult Step(const State& state, const Operation& op) const override;
  std::vector<Partition> PartitionHistory(const History& history) const override;
  std::string Describe(const Operation& op) const override;
  std::string DescribeState(const State& state) const override;

 protected:
  // State helpers for models that extend this one: the index of the first
  // pair whose key is >= `key`, and whether pair `pair` binds exactly `key`.
  static size_t LowerBoundPair(const State& state, int64_t key);
  static bool Has(const State& state, size_t pair, int64_t key);
};

// A MapModel that also answers ordered queries:
//
//   lower_bound(k) -> {found, key, value}   the binding with the smallest key
//                                           >= k; {0, 0, 0} when none
//
// lower_bound reads many keys, so a history containing one is checked as a
// single partition; without any it is partitioned per key like MapModel.
class OrderedMapModel : public MapModel {
 public:
  absl::string_view name() const override { return "ordered_map"; }
  absl::Status Validate(const Operation& op) const override;
  StepResult Step(const State& state, const Operation& op) const override;
  std::vector<Partition> PartitionHistory(const History& history) const override;
  std::string Describe(const Operation& op) const override;
};

}  // namespace lincheck

#endif  // TESTS_LINCHECK_MAP_MODEL_H_
