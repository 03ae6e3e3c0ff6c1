#include "tests/lincheck/checker.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tests/lincheck/search.h"

namespace lincheck {
namespace {

// The operations of one partition, sorted by invoke time.
History Materialize(const History& history, const Partition& partition) {
  History ops;
  ops.reserve(partition.ops.size());
  for (size_t i : partition.ops) ops.push_back(history[i]);
  std::stable_sort(ops.begin(), ops.end(),
                   [](const Operation& a, const Operation& b) {
                     return a.invoke_ns < b.invoke_ns;
                   });
  return ops;
}

PartitionOutcome Decide(const Model& model, const History& ops,
                        const CheckOptions& options, absl::Time deadline) {
  if (options.allow_fast_decision) {
    if (std::optional<PartitionOutcome> fast = model.DecideFast(ops, deadline)) {
      return *std::move(fast);
    }
  }
  return SearchLinearization(model, ops,
                             {.deadline = deadline,
                              .max_cache_bytes = options.max_cache_bytes});
}

int64_t TimeOrigin(const History& ops) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  for (const Operation& op : ops) origin = std::min(origin, op.invoke_ns);
  return ops.empty() ? 0 : origin;
}

void AppendOpLine(const Model& model, const History& ops, size_t i,
                  int64_t origin, std::string& out) {
  absl::StrAppend(&out, absl::StrFormat("  #%-4d ", i),
                  FormatOperationLine(ops[i], model.Describe(ops[i]), origin),
                  "\n");
}

// After the longest linearizable prefix: the operations that could be
// linearized next (minimal among the rest), and why each fails there.
void AppendStuckPoint(const Model& model, const History& ops,
                      const std::vector<size_t>& prefix, int64_t origin,
                      std::string& out) {
  State state = model.Init();
  for (size_t i : prefix) state = model.Step(state, ops[i]).next;
  absl::flat_hash_set<size_t> done(prefix.begin(), prefix.end());
  int64_t first_response = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!done.contains(i)) first_response = std::min(first_response, ops[i].response_ns);
  }
  absl::StrAppend(&out, "  state after it: ", model.DescribeState(state), "\n",
                  "operations that could come next, and why each fails:\n");
  for (size_t i = 0; i < ops.size(); ++i) {
    if (done.contains(i) || ops[i].invoke_ns > first_response) continue;
    const bool legal = ops[i].pending() || model.Step(state, ops[i]).ok;
    AppendOpLine(model, ops, i, origin, out);
    absl::StrAppend(
        &out, legal ? "        legal here, but every continuation fails later\n"
                    : "        its result is impossible in this state\n");
  }
}

std::string IllegalReport(const Model& model, const CheckResult& result,
                          const CheckOptions& options) {
  const History& ops = result.partition_ops;
  const int64_t origin = TimeOrigin(ops);
  std::string out = absl::StrCat(
      "NOT LINEARIZABLE (model \"", model.name(), "\"): partition \"",
      result.partition_label, "\", ", ops.size(), " operation(s), ");
  if (result.undecided_partitions == 0) {
    absl::StrAppend(&out, "is the smallest failing one of ",
                    result.num_partitions, " partition(s)\n");
  } else {
    // Partitions are checked smallest first, so the undecided ones counted
    // here are no larger than this one and might be failing ones too.
    absl::StrAppend(&out,
                    "is the smallest failing partition among the decided ones "
                    "(of ", result.num_partitions, " partition(s)); ",
                    result.undecided_partitions,
                    " partition(s) no larger than it were undecided (first: ",
                    result.first_undecided, ")\n");
  }
  if (!result.explanation.empty()) {
    absl::StrAppend(&out, "violation: ", result.explanation, "\n");
  }
  if (!result.witnesses.empty()) {
    absl::StrAppend(&out, "operations that show it:\n");
    for (size_t i : result.witnesses) AppendOpLine(model, ops, i, origin, out);
  }
  absl::StrAppend(&out, "operations by invoke time (ns from the first):\n");
  const size_t shown = std::min(ops.size(), options.max_report_ops);
  for (size_t i = 0; i < shown; ++i) AppendOpLine(model, ops, i, origin, out);
  if (shown < ops.size()) {
    absl::StrAppend(&out, "  ... ", ops.size() - shown,
                    " more (export the history as JSON lines to see all)\n");
  }
  if (result.witnesses.empty()) {
    const std::vector<size_t>& prefix = result.longest_linearization;
    absl::StrAppend(&out, "longest linearizable prefix found: ", prefix.size(),
                    " of ", ops.size(), " operation(s)\n");
    const size_t skip =
        prefix.size() > options.max_report_ops ? prefix.size() - options.max_report_ops : 0;
    if (skip > 0) absl::StrAppend(&out, "  ... ", skip, " earlier ones\n");
    for (size_t k = skip; k < prefix.size(); ++k) {
      AppendOpLine(model, ops, prefix[k], origin, out);
    }
    AppendStuckPoint(model, ops, prefix, origin, out);
  }
  return out;
}

}  // namespace

absl::Status ValidateHistory(const Model& model, const History& history) {
  for (size_t i = 0; i < history.size(); ++i) {
    const Operation& op = history[i];
    if (op.response_ns < op.invoke_ns) {
      return absl::InvalidArgumentError(
          absl::StrCat("operation ", i, " responds before it is invoked: ",
                       FormatCall(op)));
    }
    if (absl::Status status = model.Validate(op); !status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operation ", i, " is invalid for model \"", model.name(),
          "\": ", status.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<CheckResult> Check(const Model& model, const History& history,
                                  const CheckOptions& options) {
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + options.timeout;
  if (absl::Status status = ValidateHistory(model, history); !status.ok()) {
    return status;
  }
  std::vector<Partition> partitions;
  if (options.partition) {
    partitions = model.PartitionHistory(history);
  } else {
    partitions = model.Model::PartitionHistory(history);
  }
  std::vector<size_t> order(partitions.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return partitions[a].ops.size() < partitions[b].ops.size();
  });

  CheckResult result;
  result.num_partitions = partitions.size();
  for (size_t p : order) {
    History ops = Materialize(history, partitions[p]);
    PartitionOutcome outcome = Decide(model, ops, options, deadline);
    if (outcome.verdict == Verdict::kOk) continue;
    if (outcome.verdict == Verdict::kUnknown) {
      if (++result.undecided_partitions == 1) {
        result.first_undecided =
            absl::StrCat("\"", partitions[p].label, "\": ", outcome.explanation);
      }
      // Keep reporting the first undecided partition.
      if (result.verdict == Verdict::kUnknown) continue;
    }
    result.verdict = outcome.verdict;
    result.partition_label = partitions[p].label;
    result.partition_ops = std::move(ops);
    result.longest_linearization = std::move(outcome.longest_linearization);
    result.witnesses = std::move(outcome.witnesses);
    result.explanation = std::move(outcome.explanation);
    if (result.verdict == Verdict::kIllegal) break;
  }
  result.elapsed = absl::Now() - start;

  switch (result.verdict) {
    case Verdict::kOk:
      result.report = absl::StrCat("linearizable (model \"", model.name(),
                                   "\"): ", history.size(), " operation(s) in ",
                                   result.num_partitions, " partition(s)\n");
      break;
    case Verdict::kIllegal:
      result.report = IllegalReport(model, result, options);
      break;
    case Verdict::kUnknown:
      result.report = absl::StrCat(
          "UNKNOWN (model \"", model.name(), "\"): partition \"",
          result.partition_label, "\" (", result.partition_ops.size(),
          " operation(s)) was not decided: ", result.explanation,
          "; no partition was found illegal\n");
      break;
  }
  return result;
}

}  // namespace lincheck
