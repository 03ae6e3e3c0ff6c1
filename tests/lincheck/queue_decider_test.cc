// Cross-checks the polynomial queue decider against the generic search on
// many random histories, both linearizable ones and mutated ones.

#include "tests/lincheck/queue_decider.h"

#include <functional>
#include <random>
#include <utility>

#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history_generator.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/search.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

// Mutations that keep values distinct (the decider's precondition) but may or
// may not break linearizability.
void Mutate(History& history, std::mt19937_64& rng) {
  auto pick = [&](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(rng);
  };
  std::vector<size_t> dequeues;
  for (size_t i = 0; i < history.size(); ++i) {
    if (history[i].op == "dequeue" && !history[i].pending()) dequeues.push_back(i);
  }
  if (dequeues.empty()) return;
  switch (pick(5)) {
    case 0: {  // swap the results of two dequeues
      std::swap(history[dequeues[pick(dequeues.size())]].result,
                history[dequeues[pick(dequeues.size())]].result);
      break;
    }
    case 1:  // a dequeue reports empty
      history[dequeues[pick(dequeues.size())]].result = {0, 0};
      break;
    case 2: {  // stretch or shift an interval
      Operation& op = history[pick(history.size())];
      if (op.pending()) break;
      const int64_t delta = std::uniform_int_distribution<int64_t>(-300, 300)(rng);
      op.invoke_ns = std::max<int64_t>(0, op.invoke_ns + delta);
      op.response_ns = std::max(op.invoke_ns, op.response_ns + delta / 2);
      break;
    }
    case 3: {  // an empty dequeue returns some enqueued value instead
      for (size_t i : dequeues) {
        if (history[i].result[0] == 0) {
          history[i].result = {1, static_cast<int64_t>(1 + pick(5))};
          break;
        }
      }
      break;
    }
    case 4: {  // a dequeued value is lost: the dequeue returns empty and a
               // later dequeue returns it
      size_t i = dequeues[pick(dequeues.size())];
      for (size_t j : dequeues) {
        if (j > i && history[j].result[0] == 0) {
          std::swap(history[i].result, history[j].result);
          break;
        }
      }
      break;
    }
  }
}

TEST(QueueDeciderTest, AgreesWithGenericSearch) {
  const QueueModel model;
  std::mt19937_64 rng(2024);
  int decided = 0, legal = 0, illegal = 0;
  for (uint64_t round = 0; round < 3000; ++round) {
    GeneratorOptions options;
    options.seed = round + 1;
    options.threads = 2 + round % 4;
    options.ops = 4 + round % 24;
    options.max_gap_ns = 1 + round % 50;
    options.max_latency_ns = 10 + (round * 7) % 200;
    options.pending_probability = round % 5 == 0 ? 0.5 : 0;
    History history = GenerateQueueHistory(options);
    const int mutations = static_cast<int>(round % 3);
    for (int m = 0; m < mutations; ++m) Mutate(history, rng);
    if (!ValidateHistory(model, history).ok()) continue;

    std::optional<PartitionOutcome> fast = DecideUniqueValueQueue(history);
    if (!fast) continue;  // outside the preconditions
    ++decided;
    PartitionOutcome generic = SearchLinearization(model, history, {});
    ASSERT_EQ(fast->verdict, generic.verdict)
        << "round " << round << ": decider says " << VerdictName(fast->verdict)
        << " (" << fast->explanation << "), search says "
        << VerdictName(generic.verdict) << "\n"
        << [&] {
             std::string ops;
             for (const Operation& op : history) {
               ops += FormatOperationLine(op, model.Describe(op), 0) + "\n";
             }
             return ops;
           }();
    (fast->verdict == Verdict::kOk ? legal : illegal)++;
  }
  EXPECT_GT(decided, 2000);
  EXPECT_GT(legal, 500);
  EXPECT_GT(illegal, 500);
}

// Exhaustive over a tiny universe: every history of up to 4 operations
// drawn from these templates, on a small grid of intervals. Parameterized by
// the first operation's template so that shards share the work.
struct Template {
  const char* name;
  Values args;
  Values result;
};
const Template kTemplates[] = {
    {"enqueue", {1}, {}},    {"enqueue", {2}, {}},    {"dequeue", {}, {1, 1}},
    {"dequeue", {}, {1, 2}}, {"dequeue", {}, {0, 0}},
};

class ExhaustiveTest : public ::testing::TestWithParam<int> {};

INSTANTIATE_TEST_SUITE_P(FirstOperation, ExhaustiveTest, ::testing::Range(0, 5));

TEST_P(ExhaustiveTest, AgreesWithGenericSearch) {
  const QueueModel model;
  const std::vector<std::pair<int64_t, int64_t>> intervals = {
      {0, 1}, {0, 3}, {2, 3}, {2, 5}, {4, 5}, {1, 4}, {3, kPendingNs}};
  int checked = 0;
  std::function<void(History&, size_t)> grow = [&](History& h, size_t max) {
    if (!h.empty()) {
      std::optional<PartitionOutcome> fast = DecideUniqueValueQueue(h);
      if (fast) {
        ++checked;
        PartitionOutcome generic = SearchLinearization(model, h, {});
        ASSERT_EQ(fast->verdict, generic.verdict) << [&] {
          std::string ops;
          for (const Operation& op : h) {
            ops += FormatOperationLine(op, model.Describe(op), 0) + "\n";
          }
          return ops;
        }();
      }
    }
    if (h.size() == max) return;
    for (size_t t = 0; t < std::size(kTemplates); ++t) {
      if (h.empty() && static_cast<int>(t) != GetParam()) continue;
      const Template& tmpl = kTemplates[t];
      for (const auto& [invoke, response] : intervals) {
        Values result = tmpl.result;
        if (response == kPendingNs) {
          // One pending dequeue template, not one per recorded result.
          if (tmpl.name == std::string("dequeue") && t != 2) continue;
          result.clear();
        }
        h.push_back(Op(static_cast<int>(h.size()), invoke, response, tmpl.name,
                       tmpl.args, result));
        grow(h, max);
        h.pop_back();
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  };
  History h;
  grow(h, 4);
  EXPECT_GT(checked, 10000);
}

}  // namespace
}  // namespace lincheck
