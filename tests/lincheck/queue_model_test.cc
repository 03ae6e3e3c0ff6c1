// Hand-written FIFO queue histories, linearizable and not. Every case runs
// twice: through the queue-specific decider and through the generic search.

#include "tests/lincheck/queue_model.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/queue_decider.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

class QueueModelTest : public ::testing::TestWithParam<bool> {
 protected:
  CheckOptions Options() const {
    CheckOptions options;
    options.allow_fast_decision = GetParam();
    return options;
  }
  ::testing::AssertionResult Ok(const History& h) const {
    return IsLinearizable(model_, h, Options());
  }
  ::testing::AssertionResult Bad(const History& h) const {
    return IsNotLinearizable(model_, h, Options());
  }

  const QueueModel model_;
};

INSTANTIATE_TEST_SUITE_P(FastAndGeneric, QueueModelTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Fast" : "Generic";
                         });

TEST_P(QueueModelTest, SequentialFifo) {
  EXPECT_TRUE(Ok({
      Op(0, 0, 10, "dequeue", {}, {0, 0}),
      Op(0, 20, 30, "enqueue", {1}, {}),
      Op(0, 40, 50, "enqueue", {2}, {1}),
      Op(0, 60, 70, "dequeue", {}, {1, 1}),
      Op(0, 80, 90, "dequeue", {}, {1, 2}),
      Op(0, 100, 110, "dequeue", {}, {0, 0}),
  }));
}

// Trap: a dequeue that overtakes an earlier enqueue.
TEST_P(QueueModelTest, DequeueOvertakingEarlierEnqueueIsIllegal) {
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(0, 20, 30, "enqueue", {2}, {}),
      Op(1, 40, 50, "dequeue", {}, {1, 2}),
  }));
  // Also when 1 is dequeued eventually, but only after 2 was.
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(0, 20, 30, "enqueue", {2}, {}),
      Op(1, 40, 50, "dequeue", {}, {1, 2}),
      Op(1, 60, 70, "dequeue", {}, {1, 1}),
  }));
}

TEST_P(QueueModelTest, ConcurrentEnqueuesMayBeDequeuedInEitherOrder) {
  EXPECT_TRUE(Ok({
      Op(0, 0, 30, "enqueue", {1}, {}),
      Op(1, 10, 20, "enqueue", {2}, {}),
      Op(2, 40, 50, "dequeue", {}, {1, 2}),
      Op(2, 60, 70, "dequeue", {}, {1, 1}),
  }));
  // Dequeues overlapping each other may also swap.
  EXPECT_TRUE(Ok({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(0, 20, 30, "enqueue", {2}, {}),
      Op(1, 40, 60, "dequeue", {}, {1, 2}),
      Op(2, 50, 70, "dequeue", {}, {1, 1}),
  }));
}

TEST_P(QueueModelTest, ValueDequeuedTwiceIsIllegal) {
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 20, 30, "dequeue", {}, {1, 1}),
      Op(2, 20, 30, "dequeue", {}, {1, 1}),
  }));
}

TEST_P(QueueModelTest, ValueNeverEnqueuedIsIllegal) {
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 20, 30, "dequeue", {}, {1, 9}),
  }));
  // Or dequeued before its enqueue began.
  EXPECT_TRUE(Bad({
      Op(1, 0, 10, "dequeue", {}, {1, 1}),
      Op(0, 20, 30, "enqueue", {1}, {}),
  }));
}

TEST_P(QueueModelTest, EmptyWhileProvablyNonEmptyIsIllegal) {
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 20, 30, "dequeue", {}, {0, 0}),
  }));
  // The value stays until a dequeue that starts after the empty one ends.
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 20, 30, "dequeue", {}, {0, 0}),
      Op(2, 40, 50, "dequeue", {}, {1, 1}),
  }));
}

// No single value is present throughout the empty dequeue, but together two
// are: 1 until its dequeue (>= 30) and 2 from 25 on.
TEST_P(QueueModelTest, EmptyCoveredByTwoValuesIsIllegal) {
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 5, 25, "enqueue", {2}, {}),
      Op(2, 20, 100, "dequeue", {}, {0, 0}),
      Op(3, 30, 50, "dequeue", {}, {1, 1}),
  }));
  // With 2's enqueue ending only after 1's dequeue may have happened, there
  // is a moment when the queue is empty.
  EXPECT_TRUE(Ok({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 5, 60, "enqueue", {2}, {}),
      Op(2, 20, 100, "dequeue", {}, {0, 0}),
      Op(3, 30, 50, "dequeue", {}, {1, 1}),
  }));
}

TEST_P(QueueModelTest, EmptyConcurrentWithEnqueueOrDequeueIsFine) {
  EXPECT_TRUE(Ok({
      Op(0, 0, 50, "enqueue", {1}, {}),
      Op(1, 10, 20, "dequeue", {}, {0, 0}),
      Op(1, 60, 70, "dequeue", {}, {1, 1}),
  }));
  EXPECT_TRUE(Ok({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 20, 50, "dequeue", {}, {1, 1}),
      Op(2, 30, 40, "dequeue", {}, {0, 0}),
  }));
  // Touching intervals count as concurrent.
  EXPECT_TRUE(Ok({
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(1, 10, 20, "dequeue", {}, {0, 0}),
      Op(1, 30, 40, "dequeue", {}, {1, 1}),
  }));
}

TEST_P(QueueModelTest, PendingOperations) {
  // A pending enqueue whose value is dequeued took effect.
  EXPECT_TRUE(Ok({
      PendingOp(0, 0, "enqueue", {1}),
      Op(1, 100, 110, "dequeue", {}, {1, 1}),
  }));
  // One never seen may be ignored, even though it was invoked long ago.
  EXPECT_TRUE(Ok({
      PendingOp(0, 0, "enqueue", {1}),
      Op(1, 100, 110, "dequeue", {}, {0, 0}),
  }));
  // A pending dequeue may have removed a value (generic search only).
  EXPECT_TRUE(Ok({
      Op(0, 0, 10, "enqueue", {1}, {}),
      PendingOp(1, 20, "dequeue", {}),
      Op(2, 40, 50, "dequeue", {}, {0, 0}),
  }));
  EXPECT_TRUE(Bad({
      Op(0, 0, 10, "enqueue", {1}, {}),
      PendingOp(1, 20, "dequeue", {}),
      Op(2, 40, 50, "dequeue", {}, {0, 0}),
      Op(3, 60, 70, "dequeue", {}, {1, 1}),
  }));
}

TEST_P(QueueModelTest, DuplicateValuesFallBackToTheGenericSearch) {
  History history = {
      Op(0, 0, 10, "enqueue", {7}, {}),
      Op(0, 20, 30, "enqueue", {7}, {}),
      Op(1, 40, 50, "dequeue", {}, {1, 7}),
      Op(1, 60, 70, "dequeue", {}, {1, 7}),
  };
  EXPECT_FALSE(DecideUniqueValueQueue(history).has_value());
  EXPECT_TRUE(Ok(history));
  history.push_back(Op(1, 80, 90, "dequeue", {}, {1, 7}));
  EXPECT_TRUE(Bad(history));
}

TEST_P(QueueModelTest, BoundedQueueReportsFull) {
  const QueueModel bounded(1);
  CheckOptions options = Options();
  EXPECT_TRUE(IsLinearizable(bounded, {
      Op(0, 0, 10, "enqueue", {1}, {1}),
      Op(0, 20, 30, "enqueue", {2}, {0}),
      Op(0, 40, 50, "dequeue", {}, {1, 1}),
  }, options));
  EXPECT_TRUE(IsNotLinearizable(bounded, {
      Op(0, 0, 10, "enqueue", {1}, {0}),
  }, options));
  // Unbounded: an enqueue never fails.
  EXPECT_TRUE(Bad({Op(0, 0, 10, "enqueue", {1}, {0})}));
}

// Flags other than 0/1 (and an empty dequeue with a value) are malformed:
// the decider would read any nonzero flag as 1 while the search matches
// exactly, so without this check `lincheck_cli FILE` and `--generic` could
// disagree on a hand-written history.
TEST(QueueModelValidation, RejectsFlagsTheModelCannotMatch) {
  const QueueModel model;
  EXPECT_TRUE(model.Validate(Op(0, 0, 1, "enqueue", {1}, {1})).ok());
  EXPECT_TRUE(model.Validate(Op(0, 0, 1, "dequeue", {}, {0, 0})).ok());
  EXPECT_TRUE(model.Validate(Op(0, 0, 1, "dequeue", {}, {1, 0})).ok());
  EXPECT_FALSE(model.Validate(Op(0, 0, 1, "enqueue", {1}, {2})).ok());
  EXPECT_FALSE(model.Validate(Op(0, 0, 1, "dequeue", {}, {7, 1})).ok());
  EXPECT_FALSE(model.Validate(Op(0, 0, 1, "dequeue", {}, {0, 5})).ok());
  const History h = {Op(0, 0, 1, "enqueue", {1}, {}), Op(0, 2, 3, "dequeue", {}, {7, 1})};
  EXPECT_FALSE(Check(model, h).ok());
}

TEST(QueueDeciderTest, ExplainsViolations) {
  const History overtaking = {
      Op(0, 0, 10, "enqueue", {1}, {}),
      Op(0, 20, 30, "enqueue", {2}, {}),
      Op(1, 40, 50, "dequeue", {}, {1, 2}),
  };
  std::optional<PartitionOutcome> outcome = DecideUniqueValueQueue(overtaking);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->verdict, Verdict::kIllegal);
  EXPECT_TRUE(absl::StrContains(outcome->explanation, "order")) << outcome->explanation;
  EXPECT_EQ(outcome->witnesses, (std::vector<size_t>{0, 1, 2}));

  absl::StatusOr<CheckResult> result = Check(QueueModel(), overtaking);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(absl::StrContains(result->report, "dequeue() -> 2")) << result->report;
  EXPECT_TRUE(absl::StrContains(result->report, "violation: order")) << result->report;
}

}  // namespace
}  // namespace lincheck
