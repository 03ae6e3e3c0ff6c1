#ifndef TESTS_LINCHECK_TEST_UTIL_H_
#define TESTS_LINCHECK_TEST_UTIL_H_

// Helpers for gtest-based tests that check histories.
//
//   EXPECT_TRUE(lincheck::IsLinearizable(lincheck::MapModel(), history));
//
// On failure the message is the checker's report (the smallest failing
// partition, its operations and where the search got stuck).

#include <cstdint>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history.h"
#include "tests/lincheck/model.h"

namespace lincheck {

// Success iff the verdict is kOk. A malformed history or kUnknown fails too.
::testing::AssertionResult IsLinearizable(const Model& model,
                                          const History& history,
                                          const CheckOptions& options = {});

// Success iff the verdict is kIllegal.
::testing::AssertionResult IsNotLinearizable(const Model& model,
                                             const History& history,
                                             const CheckOptions& options = {});

// The verdict; a malformed history is a test failure and yields kUnknown.
Verdict VerdictOf(const Model& model, const History& history,
                  const CheckOptions& options = {});

// A completed operation by `thread` over [invoke, response], for
// hand-written histories.
Operation Op(int thread, int64_t invoke, int64_t response,
             absl::string_view name, Values args, Values result);

// An operation invoked at `invoke` that never returned.
Operation PendingOp(int thread, int64_t invoke, absl::string_view name,
                    Values args);

}  // namespace lincheck

#endif  // TESTS_LINCHECK_TEST_UTIL_H_
