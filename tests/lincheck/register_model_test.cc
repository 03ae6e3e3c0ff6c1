// Hand-written register histories, linearizable and not.

#include "tests/lincheck/register_model.h"

#include "gtest/gtest.h"
#include "tests/lincheck/test_util.h"

namespace lincheck {
namespace {

const RegisterModel kRegister;

TEST(RegisterModelTest, SequentialWriteThenRead) {
  EXPECT_TRUE(IsLinearizable(kRegister, {
      Op(0, 0, 10, "write", {5}, {}),
      Op(0, 20, 30, "read", {}, {5}),
  }));
}

TEST(RegisterModelTest, InitialValueIsZeroOrConfigured) {
  EXPECT_TRUE(IsLinearizable(kRegister, {Op(0, 0, 10, "read", {}, {0})}));
  EXPECT_TRUE(IsNotLinearizable(kRegister, {Op(0, 0, 10, "read", {}, {7})}));
  EXPECT_TRUE(IsLinearizable(RegisterModel(7), {Op(0, 0, 10, "read", {}, {7})}));
}

// Trap: a read that starts after a write completed must not return the old
// value.
TEST(RegisterModelTest, StaleReadAfterCompletedWriteIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kRegister, {
      Op(0, 0, 10, "write", {1}, {}),
      Op(1, 20, 30, "read", {}, {0}),
  }));
}

TEST(RegisterModelTest, ReadConcurrentWithWriteMaySeeEitherValue) {
  for (int64_t seen : {0, 1}) {
    EXPECT_TRUE(IsLinearizable(kRegister, {
        Op(0, 0, 100, "write", {1}, {}),
        Op(1, 50, 60, "read", {}, {seen}),
    })) << seen;
  }
}

// Once a read observed the new value, a later read may not see the old one
// (no "flickering"), even though both overlap the write.
TEST(RegisterModelTest, NewOldInversionIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kRegister, {
      Op(0, 0, 100, "write", {1}, {}),
      Op(1, 10, 20, "read", {}, {1}),
      Op(2, 30, 40, "read", {}, {0}),
  }));
}

TEST(RegisterModelTest, CasSucceedsOnlyOnExpectedValue) {
  EXPECT_TRUE(IsLinearizable(kRegister, {
      Op(0, 0, 10, "cas", {0, 3}, {1}),
      Op(0, 20, 30, "cas", {0, 4}, {0}),
      Op(0, 40, 50, "read", {}, {3}),
  }));
  EXPECT_TRUE(IsNotLinearizable(kRegister, {
      Op(0, 0, 10, "cas", {5, 3}, {1}),
  }));
}

// Trap: a lost update. Two concurrent CAS(0 -> x) cannot both succeed.
TEST(RegisterModelTest, LostUpdateTwoCasBothSucceedIsIllegal) {
  EXPECT_TRUE(IsNotLinearizable(kRegister, {
      Op(0, 0, 100, "cas", {0, 1}, {1}),
      Op(1, 0, 100, "cas", {0, 2}, {1}),
  }));
  EXPECT_TRUE(IsLinearizable(kRegister, {
      Op(0, 0, 100, "cas", {0, 1}, {1}),
      Op(1, 0, 100, "cas", {0, 2}, {0}),
      Op(1, 200, 300, "read", {}, {1}),
  }));
}

TEST(RegisterModelTest, PendingWriteMayOrMayNotTakeEffect) {
  // Never observed: fine.
  EXPECT_TRUE(IsLinearizable(kRegister, {
      PendingOp(0, 0, "write", {1}),
      Op(1, 10, 20, "read", {}, {0}),
      Op(1, 30, 40, "read", {}, {0}),
  }));
  // Observed long after its invocation: fine too.
  EXPECT_TRUE(IsLinearizable(kRegister, {
      PendingOp(0, 0, "write", {1}),
      Op(1, 10, 20, "read", {}, {0}),
      Op(1, 1000, 1010, "read", {}, {1}),
  }));
  // But once observed it stays in effect.
  EXPECT_TRUE(IsNotLinearizable(kRegister, {
      PendingOp(0, 0, "write", {1}),
      Op(1, 10, 20, "read", {}, {1}),
      Op(1, 30, 40, "read", {}, {0}),
  }));
}

TEST(RegisterModelTest, RejectsMalformedOperations) {
  EXPECT_FALSE(kRegister.Validate(Op(0, 0, 1, "read", {1}, {0})).ok());
  EXPECT_FALSE(kRegister.Validate(Op(0, 0, 1, "write", {1}, {1})).ok());
  EXPECT_FALSE(kRegister.Validate(Op(0, 0, 1, "cas", {1, 2}, {})).ok());
  EXPECT_FALSE(kRegister.Validate(Op(0, 0, 1, "swap", {1}, {})).ok());
  EXPECT_TRUE(kRegister.Validate(PendingOp(0, 0, "read", {})).ok());
}

}  // namespace
}  // namespace lincheck
