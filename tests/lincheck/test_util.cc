#include "tests/lincheck/test_util.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/lincheck/history_json.h"

namespace lincheck {
namespace {

// Under `bazel test`, saves a failing history where Bazel collects test
// outputs (bazel-testlogs/<package>/<test>/test.outputs/outputs.zip), so it
// can be replayed with lincheck_cli. Returns a note for the failure message.
std::string SaveForReplay(const Model& model, const History& history) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir == nullptr) return "";
  static std::atomic<int> counter{0};
  const std::string file =
      absl::StrCat("lincheck_", model.name(), "_", counter++, ".jsonl");
  if (!WriteJsonLinesFile(absl::StrCat(dir, "/", file), history, model.name()).ok()) {
    return "";
  }
  return absl::StrCat("history saved as ", file,
                      " in the test's undeclared outputs (test.outputs/outputs.zip);"
                      " replay: bazel run //tests/lincheck:lincheck_cli -- FILE\n");
}

::testing::AssertionResult ExpectVerdict(const Model& model,
                                         const History& history,
                                         const CheckOptions& options,
                                         Verdict expected) {
  absl::StatusOr<CheckResult> result = Check(model, history, options);
  if (!result.ok()) {
    return ::testing::AssertionFailure()
           << "malformed history: " << result.status().message();
  }
  if (result->verdict != expected) {
    return ::testing::AssertionFailure()
           << "expected " << VerdictName(expected) << ", got "
           << VerdictName(result->verdict) << "\n"
           << SaveForReplay(model, history) << result->report;
  }
  return ::testing::AssertionSuccess() << result->report;
}

}  // namespace

::testing::AssertionResult IsLinearizable(const Model& model,
                                          const History& history,
                                          const CheckOptions& options) {
  return ExpectVerdict(model, history, options, Verdict::kOk);
}

::testing::AssertionResult IsNotLinearizable(const Model& model,
                                             const History& history,
                                             const CheckOptions& options) {
  return ExpectVerdict(model, history, options, Verdict::kIllegal);
}

Verdict VerdictOf(const Model& model, const History& history,
                  const CheckOptions& options) {
  absl::StatusOr<CheckResult> result = Check(model, history, options);
  if (!result.ok()) {
    ADD_FAILURE() << "malformed history: " << result.status().message();
    return Verdict::kUnknown;
  }
  return result->verdict;
}

Operation Op(int thread, int64_t invoke, int64_t response,
             absl::string_view name, Values args, Values result) {
  Operation op;
  op.thread = thread;
  op.invoke_ns = invoke;
  op.response_ns = response;
  op.op = std::string(name);
  op.args = std::move(args);
  op.result = std::move(result);
  return op;
}

Operation PendingOp(int thread, int64_t invoke, absl::string_view name,
                    Values args) {
  Operation op = Op(thread, invoke, kPendingNs, name, std::move(args), {});
  return op;
}

}  // namespace lincheck
