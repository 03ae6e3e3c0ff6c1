#include "tests/lincheck/model.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lincheck {

std::vector<Partition> Model::PartitionHistory(const History& history) const {
  Partition all{"whole history", {}};
  all.ops.reserve(history.size());
  for (size_t i = 0; i < history.size(); ++i) all.ops.push_back(i);
  return {std::move(all)};
}

std::string Model::Describe(const Operation& op) const { return FormatCall(op); }

std::string Model::DescribeState(const State& state) const {
  return absl::StrCat("[", absl::StrJoin(state, ", "), "]");
}

std::optional<PartitionOutcome> Model::DecideFast(const History&,
                                                  absl::Time) const {
  return std::nullopt;
}

bool Model::Matches(const Operation& op,
                    std::initializer_list<int64_t> expected) {
  return op.pending() ||
         std::equal(op.result.begin(), op.result.end(), expected.begin(),
                    expected.end());
}

absl::Status Model::CheckShape(const Operation& op, size_t num_args,
                               std::initializer_list<size_t> result_sizes) {
  if (op.args.size() != num_args) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.op, " takes ", num_args, " argument(s), got ",
                     op.args.size(), ": ", FormatCall(op)));
  }
  if (op.pending()) {
    if (!op.result.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a pending operation has no result: ", FormatCall(op)));
    }
    return absl::OkStatus();
  }
  if (std::find(result_sizes.begin(), result_sizes.end(), op.result.size()) ==
      result_sizes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(op.op, " returns ", absl::StrJoin(result_sizes, " or "),
                     " value(s), got ", op.result.size(), ": ", FormatCall(op)));
  }
  return absl::OkStatus();
}

std::vector<Partition> Model::PartitionByKey(const History& history) {
  std::vector<Partition> partitions;
  absl::flat_hash_map<int64_t, size_t> index_of_key;
  for (size_t i = 0; i < history.size(); ++i) {
    const int64_t key = history[i].args.empty() ? 0 : history[i].args[0];
    auto [it, inserted] = index_of_key.try_emplace(key, partitions.size());
    if (inserted) partitions.push_back({absl::StrCat("key ", key), {}});
    partitions[it->second].ops.push_back(i);
  }
  return partitions;
}

}  // namespace lincheck
