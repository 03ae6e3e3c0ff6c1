#ifndef TESTS_LINCHECK_VERDICT_H_
#define TESTS_LINCHECK_VERDICT_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace lincheck {

enum class Verdict {
  kOk,       // some linearization exists
  kIllegal,  // provably none exists
  kUnknown,  // the search ran out of time or memory before deciding
};

// "ok", "illegal" or "unknown".
absl::string_view VerdictName(Verdict verdict);

// The outcome of deciding one partition (an independent sub-history).
// Indices refer to the partition's operations as handed to the decider.
struct PartitionOutcome {
  Verdict verdict = Verdict::kOk;
  // Generic search. kOk: a linearization (pending operations left out never
  // took effect). kIllegal: the longest legal sequential ordering of a subset
  // of the operations that the search reached. Either way, in order.
  std::vector<size_t> longest_linearization;
  // Specialized deciders, kIllegal: the operations that show the violation.
  std::vector<size_t> witnesses;
  // Readable detail, e.g. which property is violated or why it stopped.
  std::string explanation;
};

}  // namespace lincheck

#endif  // TESTS_LINCHECK_VERDICT_H_
