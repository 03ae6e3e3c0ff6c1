#ifndef TESTS_LINCHECK_CHECKER_H_
#define TESTS_LINCHECK_CHECKER_H_

// Checks a history for linearizability against a sequential model.
//
//   lincheck::MapModel model;
//   absl::StatusOr<lincheck::CheckResult> result = lincheck::Check(model, history);
//   ASSERT_TRUE(result.ok()) << result.status();           // malformed history
//   EXPECT_EQ(result->verdict, lincheck::Verdict::kOk) << result->report;
//
// The history is split with the model's partition function
// (P-compositionality: a history is linearizable iff each independent part
// is), and the parts are decided smallest first, each by the model's fast
// decider when it has one that applies, otherwise by the generic search
// (search.h). The first illegal part stops the check, so an illegal verdict
// names the smallest failing partition among those decided: a smaller one
// left undecided (timeout, cache bound) may be illegal too, and the report
// says how many there were.

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/lincheck/history.h"
#include "tests/lincheck/model.h"
#include "tests/lincheck/verdict.h"

namespace lincheck {

struct CheckOptions {
  // For the whole check; when it runs out the verdict is kUnknown (unless a
  // partition already proved the history illegal). Check returns within it,
  // give or take a millisecond, memory freed.
  absl::Duration timeout = absl::Seconds(60);
  // Split the history with the model's partition function. Turning this off
  // checks the whole history as one partition (slower, same verdict).
  bool partition = true;
  // Let the model's DecideFast handle the partitions it applies to. Turning
  // this off forces the generic search (for cross-checking deciders).
  bool allow_fast_decision = true;
  // Memory bound for the search cache of one partition; exceeding it gives
  // kUnknown rather than exhausting the machine.
  size_t max_cache_bytes = size_t{1} << 30;
  // Reports list at most this many operations of a failing partition.
  size_t max_report_ops = 60;
};

struct CheckResult {
  Verdict verdict = Verdict::kOk;
  size_t num_partitions = 0;
  // kIllegal: the smallest failing partition among the decided ones.
  // kUnknown: the first partition left undecided. Empty for kOk.
  std::string partition_label;
  // Partitions left undecided (timeout, cache bound). For kIllegal, only those
  // checked before the failing one (no larger than it): any of them might
  // fail too, so the failing partition is the smallest only if this is 0.
  size_t undecided_partitions = 0;
  // The first undecided partition, as "<label>: <why>"; empty if none.
  std::string first_undecided;
  History partition_ops;  // that partition's operations, by invoke time
  // Indices into partition_ops (see PartitionOutcome).
  std::vector<size_t> longest_linearization;
  std::vector<size_t> witnesses;
  std::string explanation;
  // Multi-line, readable account of the verdict (operations, the longest
  // linearizable prefix, what could not follow it). Print it on failure.
  std::string report;
  absl::Duration elapsed;
};

// OK iff every operation is valid for the model and no response precedes its
// invocation. Check calls it first.
absl::Status ValidateHistory(const Model& model, const History& history);

// Checks `history` against `model`. Fails only for a malformed history
// (InvalidArgument from ValidateHistory); the verdict is in the result.
absl::StatusOr<CheckResult> Check(const Model& model, const History& history,
                                  const CheckOptions& options = {});

}  // namespace lincheck

#endif  // TESTS_LINCHECK_CHECKER_H_
