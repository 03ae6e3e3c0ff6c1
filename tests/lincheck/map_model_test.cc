// Hand-written key-value map histories, linearizable and not.

#include "tests/lincheck/map_model.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

const MapModel kMap;

TEST(MapModelTest, SequentialSemantics) {
  EXPECT_TRUE(IsLinearizable(kMap, {
      Op(0, 0, 10, "get", {1}, {0, 0}),
      Op(0, 20, 30, "put", {1, 5}, {0, 0}),
      Op(0, 40, 50, "put", {1, 6}, {1, 5}),
      Op(0, 60, 70, "get", {1}, {1, 6}),
      Op(0, 80, 90, "erase", {1}, {1, 6}),
      Op(0, 100, 110, "erase", {1}, {0, 0}),
      Op(0, 120, 130, "get", {1}, {0, 0}),
  }));
}

TEST(MapModelTest, AbsentValueMustReadAsZero) {
  EXPECT_TRUE(IsNotLinearizable(kMap, {Op(0, 0, 10, "get", {1}, {0, 9})}));
}

// Trap: a get that starts after a put completed must see it.
TEST(MapModelTest, StaleReadAfterCompletedPutIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kMap, {
      Op(0, 0, 10, "put", {1, 5}, {0, 0}),
      Op(1, 20, 30, "get", {1}, {0, 0}),
  }));
  EXPECT_TRUE(IsNotLinearizable(kMap, {
      Op(0, 0, 10, "put", {1, 5}, {0, 0}),
      Op(0, 20, 30, "put", {1, 6}, {1, 5}),
      Op(1, 40, 50, "get", {1}, {1, 5}),
  }));
}

// Trap: a lost update. Two concurrent puts cannot both find the key absent;
// one of them must return the other's value.
TEST(MapModelTest, LostUpdateIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kMap, {
      Op(0, 0, 100, "put", {1, 10}, {0, 0}),
      Op(1, 0, 100, "put", {1, 20}, {0, 0}),
  }));
  EXPECT_TRUE(IsLinearizable(kMap, {
      Op(0, 0, 100, "put", {1, 10}, {0, 0}),
      Op(1, 0, 100, "put", {1, 20}, {1, 10}),
      Op(2, 200, 300, "get", {1}, {1, 20}),
  }));
  // Read-modify-write increments: both read 0 and both wrote 1.
  EXPECT_TRUE(IsNotLinearizable(kMap, {
      Op(0, 0, 100, "get", {1}, {0, 0}),
      Op(1, 0, 100, "get", {1}, {0, 0}),
      Op(0, 110, 200, "put", {1, 1}, {0, 0}),
      Op(1, 110, 200, "put", {1, 1}, {0, 0}),
  }));
}

TEST(MapModelTest, ConcurrentPutAndGetMaySeeEither) {
  for (Values seen : {Values{0, 0}, Values{1, 5}}) {
    EXPECT_TRUE(IsLinearizable(kMap, {
        Op(0, 0, 100, "put", {1, 5}, {0, 0}),
        Op(1, 10, 20, "get", {1}, seen),
    }));
  }
}

TEST(MapModelTest, EraseReturnsPreviousValue) {
  EXPECT_TRUE(IsNotLinearizable(kMap, {
      Op(0, 0, 10, "put", {1, 5}, {0, 0}),
      Op(0, 20, 30, "erase", {1}, {1, 4}),
  }));
}

TEST(MapModelTest, KeysAreIndependentPartitions) {
  History history = {
      Op(0, 0, 10, "put", {1, 5}, {0, 0}),
      Op(0, 20, 30, "put", {2, 6}, {0, 0}),
      Op(1, 0, 30, "get", {3}, {0, 0}),
  };
  absl::StatusOr<CheckResult> result = Check(kMap, history);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->verdict, Verdict::kOk);
  EXPECT_EQ(result->num_partitions, 3);
}

// The report names the smallest failing partition and shows its operations.
TEST(MapModelTest, ReportNamesSmallestFailingKey) {
  History history = {
      // key 1: a long legal stretch ending in a stale read.
      Op(0, 0, 10, "put", {1, 1}, {0, 0}),
      Op(0, 20, 30, "put", {1, 2}, {1, 1}),
      Op(0, 40, 50, "put", {1, 3}, {1, 2}),
      Op(1, 60, 70, "get", {1}, {1, 2}),
      // key 7: a short stale read.
      Op(2, 0, 10, "put", {7, 70}, {0, 0}),
      Op(3, 20, 30, "get", {7}, {0, 0}),
      // key 9: fine.
      Op(2, 100, 110, "put", {9, 90}, {0, 0}),
  };
  absl::StatusOr<CheckResult> result = Check(kMap, history);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->verdict, Verdict::kIllegal);
  EXPECT_EQ(result->partition_label, "key 7");
  EXPECT_EQ(result->partition_ops.size(), 2);
  EXPECT_TRUE(absl::StrContains(result->report, "key 7")) << result->report;
  EXPECT_TRUE(absl::StrContains(result->report, "put(7, 70) -> was absent"))
      << result->report;
  EXPECT_TRUE(absl::StrContains(result->report, "get(7) -> absent"))
      << result->report;
  EXPECT_TRUE(absl::StrContains(result->report, "state after it: {7: 70}"))
      << result->report;
}

TEST(MapModelTest, UnpartitionedCheckAgrees) {
  History bad = {
      Op(0, 0, 10, "put", {1, 5}, {0, 0}),
      Op(1, 0, 10, "put", {2, 6}, {0, 0}),
      Op(1, 20, 30, "get", {1}, {0, 0}),
  };
  CheckOptions whole;
  whole.partition = false;
  EXPECT_TRUE(IsNotLinearizable(kMap, bad, whole));
  bad[2].result = {1, 5};
  EXPECT_TRUE(IsLinearizable(kMap, bad, whole));
}

TEST(MapModelTest, PendingPutMayTakeEffectLater) {
  EXPECT_TRUE(IsLinearizable(kMap, {
      PendingOp(0, 0, "put", {1, 5}),
      Op(1, 10, 20, "get", {1}, {0, 0}),
      Op(1, 30, 40, "get", {1}, {1, 5}),
  }));
  EXPECT_TRUE(IsNotLinearizable(kMap, {
      PendingOp(0, 0, "put", {1, 5}),
      Op(1, 10, 20, "get", {1}, {1, 5}),
      Op(1, 30, 40, "get", {1}, {0, 0}),
  }));
}

TEST(OrderedMapModelTest, LowerBoundSeesSmallestKeyAtLeastArgument) {
  const OrderedMapModel model;
  EXPECT_TRUE(IsLinearizable(model, {
      Op(0, 0, 10, "put", {5, 50}, {0, 0}),
      Op(0, 20, 30, "put", {9, 90}, {0, 0}),
      Op(0, 40, 50, "lower_bound", {6}, {1, 9, 90}),
      Op(0, 60, 70, "lower_bound", {5}, {1, 5, 50}),
      Op(0, 80, 90, "lower_bound", {10}, {0, 0, 0}),
  }));
  // Stale: 7 was inserted before the lower_bound began, which skipped it.
  EXPECT_TRUE(IsNotLinearizable(model, {
      Op(0, 0, 10, "put", {9, 90}, {0, 0}),
      Op(1, 0, 10, "put", {7, 70}, {0, 0}),
      Op(0, 40, 50, "lower_bound", {6}, {1, 9, 90}),
  }));
}

TEST(OrderedMapModelTest, PartitionsPerKeyOnlyWithoutLowerBound) {
  const OrderedMapModel model;
  History history = {
      Op(0, 0, 10, "put", {5, 50}, {0, 0}),
      Op(0, 20, 30, "put", {9, 90}, {0, 0}),
  };
  EXPECT_EQ(model.PartitionHistory(history).size(), 2);
  history.push_back(Op(0, 40, 50, "lower_bound", {6}, {1, 9, 90}));
  EXPECT_EQ(model.PartitionHistory(history).size(), 1);
}

}  // namespace
}  // namespace lincheck
