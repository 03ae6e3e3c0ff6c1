#ifndef TESTS_LINCHECK_MODEL_H_
#define TESTS_LINCHECK_MODEL_H_

// The sequential specification a history is checked against.
//
// A model is deterministic: from a state, an operation's arguments determine
// both its result and the next state. Step compares the computed result with
// the recorded one. States are small vectors of int64 so the checker can hash
// and compare them without help from the model.

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/lincheck/history.h"
#include "tests/lincheck/verdict.h"

namespace lincheck {

// A model's state, in an encoding the model chooses (documented per model).
// Two states must be equal exactly when the object is in the same abstract
// state, or the memoized search may miss or repeat work.
using State = absl::InlinedVector<int64_t, 4>;

struct StepResult {
  bool ok = false;  // the recorded result is what the specification returns
  State next;       // the state after the operation
};

// An independent part of a history (P-compositionality): the history is
// linearizable iff every partition is. `ops` indexes the history.
struct Partition {
  std::string label;  // for reports, e.g. "key 17"
  std::vector<size_t> ops;
};

class Model {
 public:
  virtual ~Model() = default;

  // Short name used by the CLI and the JSON header, e.g. "map".
  virtual absl::string_view name() const = 0;

  // OK iff the operation's name and argument count are known and, unless the
  // operation is pending, its result has a valid shape.
  virtual absl::Status Validate(const Operation& op) const = 0;

  // The initial state.
  virtual State Init() const = 0;

  // Applies `op` to `state`. `next` must be the state after the operation
  // even when `ok` is false. For a pending operation the result is unknown
  // and empty: Step must not read it (use Matches), and the checker ignores
  // `ok`. Precondition: Validate(op) is OK.
  virtual StepResult Step(const State& state, const Operation& op) const = 0;

  // Splits a history into independent partitions. Every operation belongs to
  // exactly one. The default keeps the whole history together.
  virtual std::vector<Partition> PartitionHistory(const History& history) const;

  // Readable forms for reports. The defaults print raw integers.
  virtual std::string Describe(const Operation& op) const;
  virtual std::string DescribeState(const State& state) const;

  // An optional polynomial-time decision procedure for one partition, for
  // models where the generic search can blow up. Returns nullopt when its
  // preconditions do not hold; the generic search then runs. It must be
  // exact: kOk only if linearizable, kIllegal only if not.
  virtual std::optional<PartitionOutcome> DecideFast(const History& partition,
                                                     absl::Time deadline) const;

 protected:
  // True if `op` is pending or its recorded result equals `expected`.
  static bool Matches(const Operation& op,
                      std::initializer_list<int64_t> expected);

  // Validation helper: `op` has `num_args` arguments and, unless pending, a
  // result whose size is one of `result_sizes`.
  static absl::Status CheckShape(const Operation& op, size_t num_args,
                                 std::initializer_list<size_t> result_sizes);

  // One partition per distinct first argument (the key), labelled "key K",
  // in order of first appearance.
  static std::vector<Partition> PartitionByKey(const History& history);
};

}  // namespace lincheck

#endif  // TESTS_LINCHECK_MODEL_H_
