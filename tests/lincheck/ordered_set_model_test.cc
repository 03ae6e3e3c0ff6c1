// Hand-written ordered set histories, linearizable and not.

#include "tests/lincheck/ordered_set_model.h"

#include "gtest/gtest.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

const OrderedSetModel kSet;

TEST(OrderedSetModelTest, SequentialSemantics) {
  EXPECT_TRUE(IsLinearizable(kSet, {
      Op(0, 0, 10, "contains", {3}, {0}),
      Op(0, 20, 30, "insert", {3}, {1}),
      Op(0, 40, 50, "insert", {3}, {0}),
      Op(0, 60, 70, "contains", {3}, {1}),
      Op(0, 80, 90, "lower_bound", {1}, {1, 3}),
      Op(0, 100, 110, "lower_bound", {4}, {0, 0}),
      Op(0, 120, 130, "erase", {3}, {1}),
      Op(0, 140, 150, "erase", {3}, {0}),
      Op(0, 160, 170, "contains", {3}, {0}),
  }));
}

// Trap: a contains that starts after an insert completed must find the key.
TEST(OrderedSetModelTest, StaleReadAfterCompletedInsertIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kSet, {
      Op(0, 0, 10, "insert", {3}, {1}),
      Op(1, 20, 30, "contains", {3}, {0}),
  }));
}

// Trap: a lost update. Two concurrent inserts of one key cannot both insert.
TEST(OrderedSetModelTest, DoubleInsertIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kSet, {
      Op(0, 0, 100, "insert", {3}, {1}),
      Op(1, 0, 100, "insert", {3}, {1}),
  }));
  EXPECT_TRUE(IsNotLinearizable(kSet, {
      Op(2, 0, 10, "insert", {3}, {1}),
      Op(0, 20, 100, "erase", {3}, {1}),
      Op(1, 20, 100, "erase", {3}, {1}),
  }));
}

TEST(OrderedSetModelTest, LowerBoundWithConcurrentInsertMaySeeIt) {
  for (Values seen : {Values{1, 5}, Values{1, 8}}) {
    EXPECT_TRUE(IsLinearizable(kSet, {
        Op(0, 0, 10, "insert", {8}, {1}),
        Op(1, 20, 100, "insert", {5}, {1}),
        Op(2, 30, 40, "lower_bound", {4}, seen),
    }));
  }
}

// lower_bound reads across keys, so a stale answer involves two keys.
TEST(OrderedSetModelTest, LowerBoundSkippingAPresentKeyIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kSet, {
      Op(0, 0, 10, "insert", {8}, {1}),
      Op(1, 0, 10, "insert", {5}, {1}),
      Op(2, 20, 30, "lower_bound", {4}, {1, 8}),
  }));
  // And one returning a key that was erased before it began.
  EXPECT_TRUE(IsNotLinearizable(kSet, {
      Op(0, 0, 10, "insert", {8}, {1}),
      Op(1, 20, 30, "erase", {8}, {1}),
      Op(2, 40, 50, "lower_bound", {4}, {1, 8}),
  }));
}

// Cross-key anomaly only lower_bound can expose: it saw 5 but not 3, though
// 3 was inserted before 5.
TEST(OrderedSetModelTest, LowerBoundSeesLaterKeyButNotEarlierOne) {
  EXPECT_TRUE(IsNotLinearizable(kSet, {
      Op(0, 0, 10, "insert", {3}, {1}),
      Op(0, 20, 30, "insert", {5}, {1}),
      Op(1, 5, 40, "lower_bound", {1}, {1, 5}),
  }));
}

TEST(OrderedSetModelTest, PartitionsPerKeyOnlyWithoutLowerBound) {
  History history = {
      Op(0, 0, 10, "insert", {3}, {1}),
      Op(0, 20, 30, "insert", {5}, {1}),
      Op(0, 40, 50, "contains", {7}, {0}),
  };
  EXPECT_EQ(kSet.PartitionHistory(history).size(), 3);
  history.push_back(Op(0, 60, 70, "lower_bound", {4}, {1, 5}));
  EXPECT_EQ(kSet.PartitionHistory(history).size(), 1);
  EXPECT_TRUE(IsLinearizable(kSet, history));
}

TEST(OrderedSetModelTest, RejectsMalformedOperations) {
  EXPECT_FALSE(kSet.Validate(Op(0, 0, 1, "insert", {}, {1})).ok());
  EXPECT_FALSE(kSet.Validate(Op(0, 0, 1, "lower_bound", {1}, {1})).ok());
  EXPECT_FALSE(kSet.Validate(Op(0, 0, 1, "put", {1, 2}, {0, 0})).ok());
}

}  // namespace
}  // namespace lincheck
