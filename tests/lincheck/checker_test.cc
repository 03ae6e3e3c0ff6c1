// The checker's own semantics: timing rules, pending operations, limits,
// validation, reports, and agreement with a brute-force oracle.

#include "tests/lincheck/checker.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/lincheck/history_generator.h"
#include "tests/lincheck/history_json.h"
#include "tests/lincheck/map_model.h"
#include "tests/lincheck/model_registry.h"
#include "tests/lincheck/ordered_set_model.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/register_model.h"
#include "tests/lincheck/search.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

const RegisterModel kRegister;

TEST(CheckerTest, EmptyHistoryIsLinearizable) {
  EXPECT_TRUE(IsLinearizable(kRegister, {}));
  EXPECT_TRUE(IsLinearizable(MapModel(), {}));
}

TEST(CheckerTest, TouchingIntervalsAreConcurrent) {
  // The read is invoked at the very nanosecond the write returns: either
  // order is possible, so the old value is allowed.
  EXPECT_TRUE(IsLinearizable(kRegister, {
      Op(0, 0, 10, "write", {1}, {}),
      Op(1, 10, 20, "read", {}, {0}),
  }));
  EXPECT_TRUE(IsNotLinearizable(kRegister, {
      Op(0, 0, 10, "write", {1}, {}),
      Op(1, 11, 20, "read", {}, {0}),
  }));
}

TEST(CheckerTest, InputOrderDoesNotMatter) {
  History history = {
      Op(1, 20, 30, "read", {}, {1}),
      Op(0, 0, 10, "write", {1}, {}),
  };
  EXPECT_TRUE(IsLinearizable(kRegister, history));
}

TEST(CheckerTest, MalformedHistoriesAreErrors) {
  EXPECT_FALSE(Check(kRegister, {Op(0, 10, 5, "read", {}, {0})}).ok());
  EXPECT_FALSE(Check(kRegister, {Op(0, 0, 5, "read", {}, {})}).ok());
  EXPECT_FALSE(Check(kRegister, {Op(0, 0, 5, "frobnicate", {}, {})}).ok());
  absl::StatusOr<CheckResult> result =
      Check(MapModel(), {Op(0, 0, 5, "put", {1}, {0, 0})});
  ASSERT_FALSE(result.ok());
  EXPECT_TRUE(absl::StrContains(result.status().message(), "put takes 2"))
      << result.status();
}

TEST(CheckerTest, TimeoutGivesUnknown) {
  GeneratorOptions options;
  options.ops = 5000;
  History history = GenerateRegisterHistory(options);
  CheckOptions check;
  check.timeout = absl::ZeroDuration();
  absl::StatusOr<CheckResult> result = Check(kRegister, history, check);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->verdict, Verdict::kUnknown);
  EXPECT_TRUE(absl::StrContains(result->report, "timed out")) << result->report;
}

TEST(CheckerTest, CacheBoundGivesUnknown) {
  GeneratorOptions options;
  options.ops = 500;
  History history = GenerateRegisterHistory(options);
  CheckOptions check;
  check.max_cache_bytes = 1000;
  absl::StatusOr<CheckResult> result = Check(kRegister, history, check);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->verdict, Verdict::kUnknown);
  EXPECT_TRUE(absl::StrContains(result->report, "cache")) << result->report;
}

// An illegal partition wins over one that timed out.
TEST(CheckerTest, IllegalBeatsUnknown) {
  GeneratorOptions options;
  options.ops = 3000;
  options.keys = 1;
  History history = GenerateMapHistory(options);
  for (Operation& op : history) op.args[0] = 1;  // all on key 1
  history.push_back(Op(0, 0, 10, "put", {2, 5}, {0, 0}));
  history.push_back(Op(1, 20, 30, "get", {2}, {0, 0}));  // stale, key 2
  CheckOptions check;
  check.timeout = absl::ZeroDuration();
  absl::StatusOr<CheckResult> result = Check(MapModel(), history, check);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->verdict, Verdict::kIllegal);
  EXPECT_EQ(result->partition_label, "key 2");
}

// A smaller partition left undecided (here by the cache bound) may be illegal
// too, so the report must not call a larger illegal one "the smallest failing
// one": it says how many smaller ones were undecided.
TEST(CheckerTest, IllegalReportCountsSmallerUndecidedPartitions) {
  GeneratorOptions options;
  options.ops = 500;
  options.keys = 1;
  History history = GenerateMapHistory(options);  // key 0: needs the cache
  // Key 2, larger than key 0's partition: a get of a value never written,
  // before anything else on the key, so it fails at once without the cache.
  history.push_back(Op(0, -100, -90, "get", {2}, {1, kNeverWritten}));
  for (int i = 0; i < 600; ++i) {
    history.push_back(Op(1, -80 + 2 * i, -79 + 2 * i, "get", {2}, {0, 0}));
  }
  CheckOptions check;
  check.max_cache_bytes = 1000;
  absl::StatusOr<CheckResult> result = Check(MapModel(), history, check);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->verdict, Verdict::kIllegal) << result->report;
  EXPECT_EQ(result->partition_label, "key 2");
  EXPECT_EQ(result->undecided_partitions, 1);
  EXPECT_FALSE(absl::StrContains(result->report, "is the smallest failing one"))
      << result->report;
  EXPECT_TRUE(absl::StrContains(
      result->report,
      "is the smallest failing partition among the decided ones (of 2 "
      "partition(s)); 1 partition(s) no larger than it were undecided "
      "(first: \"key 0\": "))
      << result->report;

  // Without the cache bound every partition is decided: key 0 is legal, and
  // key 2 is then the smallest failing one.
  result = Check(MapModel(), history);
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->verdict, Verdict::kIllegal) << result->report;
  EXPECT_EQ(result->undecided_partitions, 0);
  EXPECT_TRUE(absl::StrContains(result->report,
                                "is the smallest failing one of 2 partition(s)"))
      << result->report;
}

TEST(CheckerTest, ReportShowsLongestPrefixAndStuckPoint) {
  absl::StatusOr<CheckResult> result = Check(kRegister, {
      Op(0, 0, 10, "write", {1}, {}),
      Op(0, 20, 30, "write", {2}, {}),
      Op(1, 40, 50, "read", {}, {1}),
  });
  ASSERT_TRUE(result.ok());
  ASSERT_EQ(result->verdict, Verdict::kIllegal);
  EXPECT_EQ(result->longest_linearization, (std::vector<size_t>{0, 1}));
  EXPECT_TRUE(absl::StrContains(result->report, "longest linearizable prefix found: 2 of 3"))
      << result->report;
  EXPECT_TRUE(absl::StrContains(result->report, "state after it: value 2"))
      << result->report;
  EXPECT_TRUE(absl::StrContains(result->report, "read() -> 1")) << result->report;
  EXPECT_TRUE(absl::StrContains(result->report, "impossible in this state"))
      << result->report;
}

// test_util: a failed expectation carries the report and saves the history
// for replay under Bazel's undeclared test outputs.
TEST(CheckerTest, FailedExpectationSavesHistoryForReplay) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  ASSERT_EQ(setenv("TEST_UNDECLARED_OUTPUTS_DIR", tmp ? tmp : "/tmp", 1), 0);
  const History bad = {
      Op(0, 0, 10, "write", {1}, {}),
      Op(1, 20, 30, "read", {}, {0}),
  };
  ::testing::AssertionResult result = IsLinearizable(kRegister, bad);
  ASSERT_FALSE(result);
  const std::string message = result.message();
  EXPECT_TRUE(absl::StrContains(message, "expected ok, got illegal")) << message;
  EXPECT_TRUE(absl::StrContains(message, "history saved as lincheck_register_"))
      << message;
  EXPECT_TRUE(absl::StrContains(message, "read() -> 0")) << message;
  const std::string file = message.substr(message.find("lincheck_register_"));
  absl::StatusOr<JsonHistory> saved = ReadJsonLinesFile(
      absl::StrCat(tmp ? tmp : "/tmp", "/", file.substr(0, file.find(' '))));
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ(saved->model, "register");
  EXPECT_EQ(saved->history, bad);
}

// --- Agreement with a brute-force oracle on tiny random histories. ---

// Tries every subset of pending operations and every order of the chosen
// operations that respects real time.
bool BruteForceLinearizable(const Model& model, const History& ops) {
  const size_t n = ops.size();
  std::vector<bool> used(n, false);
  std::function<bool(const State&, size_t, size_t)> extend =
      [&](const State& state, size_t placed, size_t needed) -> bool {
    if (placed == needed) return true;
    for (size_t i = 0; i < n; ++i) {
      if (used[i]) continue;
      // i may come next only if no unplaced op (that must be placed, or is
      // completed) returned before i was invoked.
      bool minimal = true;
      for (size_t j = 0; j < n && minimal; ++j) {
        if (j != i && !used[j] && HappensBefore(ops[j], ops[i])) minimal = false;
      }
      if (!minimal) continue;
      StepResult step = model.Step(state, ops[i]);
      if (!step.ok && !ops[i].pending()) continue;
      used[i] = true;
      const bool done = extend(step.next, placed + 1, needed);
      used[i] = false;
      if (done) return true;
    }
    return false;
  };
  std::vector<size_t> pending;
  for (size_t i = 0; i < n; ++i) {
    if (ops[i].pending()) pending.push_back(i);
  }
  for (uint32_t mask = 0; mask < (1u << pending.size()); ++mask) {
    std::fill(used.begin(), used.end(), false);
    size_t dropped = 0;
    for (size_t k = 0; k < pending.size(); ++k) {
      if (!(mask & (1u << k))) {
        used[pending[k]] = true;  // never takes effect
        ++dropped;
      }
    }
    if (extend(model.Init(), 0, n - dropped)) return true;
  }
  return false;
}

// A random history with random (mostly wrong) results from small domains.
History RandomTinyHistory(absl::string_view model, std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const int n = static_cast<int>(pick(1, 6));
  History history;
  for (int i = 0; i < n; ++i) {
    Operation op;
    op.thread = i;
    op.invoke_ns = pick(0, 20);
    op.response_ns = op.invoke_ns + pick(0, 10);
    const int64_t kind = pick(0, 3);
    if (model == "register") {
      if (kind == 0) op = Op(i, op.invoke_ns, op.response_ns, "write", {pick(0, 2)}, {});
      else if (kind == 1) op = Op(i, op.invoke_ns, op.response_ns, "cas", {pick(0, 2), pick(0, 2)}, {pick(0, 1)});
      else op = Op(i, op.invoke_ns, op.response_ns, "read", {}, {pick(0, 2)});
    } else if (model == "map") {
      const int64_t key = pick(0, 1);
      const int64_t found = pick(0, 1);
      const Values prev = {found, found ? pick(1, 2) : 0};
      if (kind <= 1) op = Op(i, op.invoke_ns, op.response_ns, "put", {key, pick(1, 2)}, prev);
      else if (kind == 2) op = Op(i, op.invoke_ns, op.response_ns, "get", {key}, prev);
      else op = Op(i, op.invoke_ns, op.response_ns, "erase", {key}, prev);
    } else if (model == "ordered_set") {
      const int64_t key = pick(0, 2);
      if (kind == 0) op = Op(i, op.invoke_ns, op.response_ns, "insert", {key}, {pick(0, 1)});
      else if (kind == 1) op = Op(i, op.invoke_ns, op.response_ns, "erase", {key}, {pick(0, 1)});
      else if (kind == 2) op = Op(i, op.invoke_ns, op.response_ns, "contains", {key}, {pick(0, 1)});
      else {
        const int64_t found = pick(0, 1);
        op = Op(i, op.invoke_ns, op.response_ns, "lower_bound", {key},
                {found, found ? pick(key, 2) : 0});
      }
    } else {  // queue
      if (kind <= 1) {
        op = Op(i, op.invoke_ns, op.response_ns, "enqueue", {pick(1, 3)}, {});
      } else {
        const int64_t found = pick(0, 1);
        op = Op(i, op.invoke_ns, op.response_ns, "dequeue", {},
                {found, found ? pick(1, 3) : 0});
      }
    }
    if (pick(0, 6) == 0) {
      op.response_ns = kPendingNs;
      op.result.clear();
    }
    history.push_back(std::move(op));
  }
  return history;
}

class OracleTest : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(Models, OracleTest,
                         ::testing::Values("register", "map", "ordered_set",
                                           "queue"));

TEST_P(OracleTest, SearchAgreesWithBruteForce) {
  std::unique_ptr<Model> model = *MakeModel(GetParam());
  std::mt19937_64 rng(42);
  int legal = 0, illegal = 0;
  for (int round = 0; round < 3000; ++round) {
    History history = RandomTinyHistory(GetParam(), rng);
    const bool expected = BruteForceLinearizable(*model, history);
    CheckOptions generic;
    generic.allow_fast_decision = false;
    const Verdict verdict = VerdictOf(*model, history, generic);
    ASSERT_EQ(verdict, expected ? Verdict::kOk : Verdict::kIllegal)
        << "round " << round << "\n"
        << Check(*model, history, generic)->report;
    // Partitioned and fast paths agree as well.
    ASSERT_EQ(VerdictOf(*model, history), verdict) << "round " << round;
    (expected ? legal : illegal)++;
  }
  // The generator produces a useful mix.
  EXPECT_GT(legal, 300);
  EXPECT_GT(illegal, 300);
}

// On kOk the search returns a linearization: check it is one.
TEST(CheckerTest, WitnessLinearizationIsValid) {
  const MapModel model;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    GeneratorOptions options;
    options.ops = 200;
    options.keys = 3;
    options.seed = seed;
    options.pending_probability = 0.5;
    const History history = GenerateMapHistory(options);
    PartitionOutcome outcome = SearchLinearization(model, history, {});
    ASSERT_EQ(outcome.verdict, Verdict::kOk);
    const std::vector<size_t>& order = outcome.longest_linearization;
    std::vector<bool> placed(history.size(), false);
    State state = model.Init();
    for (size_t k = 0; k < order.size(); ++k) {
      const Operation& op = history[order[k]];
      StepResult step = model.Step(state, op);
      ASSERT_TRUE(step.ok || op.pending()) << "seed " << seed << " step " << k;
      state = step.next;
      placed[order[k]] = true;
      // Nothing placed later returned before this one was invoked.
      for (size_t later = k + 1; later < order.size(); ++later) {
        ASSERT_FALSE(HappensBefore(history[order[later]], op)) << "seed " << seed;
      }
    }
    for (size_t i = 0; i < history.size(); ++i) {
      ASSERT_TRUE(placed[i] || history[i].pending()) << "seed " << seed;
    }
  }
}

}  // namespace
}  // namespace lincheck
