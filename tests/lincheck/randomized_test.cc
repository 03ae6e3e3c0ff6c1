// Randomized self-checks: histories generated from a sequential run with
// random overlapping intervals must pass; the same histories with one result
// corrupted (so that no linearization exists) must fail, and the failing
// partition must contain the corrupted operation. Corruptions: an impossible
// result (CorruptOneResult) and a stale but really written value
// (CorruptWithStaleValue), which only the real-time order exposes.

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history_generator.h"
#include "tests/lincheck/map_model.h"
#include "tests/lincheck/ordered_set_model.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/register_model.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

struct Case {
  std::string name;
  std::function<std::unique_ptr<Model>()> model;
  std::function<History(const GeneratorOptions&)> generate;
  bool fast = true;  // allow model-specific deciders
};

std::vector<Case> Cases() {
  return {
      {"Register", [] { return std::make_unique<RegisterModel>(); },
       GenerateRegisterHistory},
      {"Map", [] { return std::make_unique<MapModel>(); }, GenerateMapHistory},
      {"OrderedMap", [] { return std::make_unique<OrderedMapModel>(); },
       GenerateOrderedMapHistory},
      {"OrderedSet", [] { return std::make_unique<OrderedSetModel>(); },
       [](const GeneratorOptions& o) { return GenerateOrderedSetHistory(o, false); }},
      {"OrderedSetWithLowerBound",
       [] { return std::make_unique<OrderedSetModel>(); },
       [](const GeneratorOptions& o) { return GenerateOrderedSetHistory(o, true); }},
      {"QueueFast", [] { return std::make_unique<QueueModel>(); },
       GenerateQueueHistory},
      {"QueueGeneric", [] { return std::make_unique<QueueModel>(); },
       GenerateQueueHistory, false},
  };
}

// `history`, whose operation `index` was corrupted, must be illegal, and the
// failing partition must hold that operation.
void ExpectIllegalAt(const Model& model, const History& history, int index,
                     const CheckOptions& check, const std::string& what) {
  absl::StatusOr<CheckResult> result = Check(model, history, check);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->verdict, Verdict::kIllegal)
      << what << ", corrupted operation " << index << ": "
      << model.Describe(history[index]) << "\n"
      << result->report;
  EXPECT_NE(std::find(result->partition_ops.begin(),
                      result->partition_ops.end(), history[index]),
            result->partition_ops.end())
      << what << ": the failing partition \"" << result->partition_label
      << "\" lacks the corrupted operation";
}

class RandomizedTest : public ::testing::TestWithParam<Case> {};

INSTANTIATE_TEST_SUITE_P(Models, RandomizedTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

GeneratorOptions OptionsFor(uint64_t seed) {
  GeneratorOptions options;
  options.seed = seed;
  options.threads = 2 + seed % 7;        // 2..8
  options.ops = 40 + (seed * 37) % 260;  // 40..299
  options.keys = 1 + seed % 6;
  options.max_gap_ns = 1 + (seed * 13) % 200;
  options.max_latency_ns = 50 + (seed * 101) % 2000;
  options.pending_probability = seed % 3 == 0 ? 0.5 : 0;
  return options;
}

TEST_P(RandomizedTest, GeneratedHistoriesPassAndCorruptedOnesFail) {
  const Case& c = GetParam();
  std::unique_ptr<Model> model = c.model();
  CheckOptions check;
  check.allow_fast_decision = c.fast;
  check.timeout = absl::Seconds(20);
  int corrupted = 0;
  int stale_corrupted = 0;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    GeneratorOptions options = OptionsFor(seed);
    // The generic search on queues is exponential in the worst case
    // (wrong guesses about the order of concurrent enqueues surface only
    // when the values come out): keep those histories short.
    if (!c.fast && c.name.starts_with("Queue")) {
      options.ops = 10 + seed % 30;
      options.threads = 2 + seed % 3;
    }
    History history = c.generate(options);
    ASSERT_TRUE(IsLinearizable(*model, history, check)) << "seed " << seed;

    // Two corruptions of the same history: an impossible result, and (for
    // reads) a stale value that really was written but overwritten before
    // the read began.
    History stale = history;
    const int stale_index = CorruptWithStaleValue(stale, seed);
    if (stale_index >= 0) {
      ++stale_corrupted;
      ASSERT_NO_FATAL_FAILURE(ExpectIllegalAt(*model, stale, stale_index, check,
                                              "stale, seed " + std::to_string(seed)));
    }
    const int index = CorruptOneResult(history, seed);
    if (index < 0) continue;
    ++corrupted;
    ASSERT_NO_FATAL_FAILURE(
        ExpectIllegalAt(*model, history, index, check, "seed " + std::to_string(seed)));
  }
  EXPECT_GT(corrupted, 40);
  // Registers and maps have reads that a stale value can corrupt; sets and
  // queues have none.
  if (c.name == "Register" || c.name == "Map" || c.name == "OrderedMap") {
    EXPECT_GT(stale_corrupted, 30);
  }
}

// Large per-key histories stay fast: P-compositionality at work.
TEST(RandomizedScaleTest, LargeMapHistory) {
  GeneratorOptions options;
  options.threads = 8;
  options.ops = 20000;
  options.keys = 200;
  options.max_gap_ns = 20;
  options.max_latency_ns = 2000;
  History history = GenerateMapHistory(options);
  absl::StatusOr<CheckResult> result = Check(MapModel(), history);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->verdict, Verdict::kOk) << result->report;
  EXPECT_EQ(result->num_partitions, 200);
  CorruptOneResult(history, 7);
  EXPECT_EQ(VerdictOf(MapModel(), history), Verdict::kIllegal);
}

}  // namespace
}  // namespace lincheck
