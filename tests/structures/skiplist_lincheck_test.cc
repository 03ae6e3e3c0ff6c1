// Linearizability of the ordered map under mixed paths (docs/design.md §7):
// threads on node 0 take the native and the loopback path, threads on nodes 1
// and 2 the remote path, all on the same keys, which sit around the split
// points between the nodes' ranges. Get/Put/Insert/Erase/Contains histories
// are checked per key; LowerBound, which crosses node boundaries, in shorter
// runs checked whole against the ordered-map model. Runs with many keys per
// node force splits (and tower links) under concurrent readers. Backends from
// RDMADS_FABRICS (default soft); fixed seeds; bounded ops and time per worker.

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/test_util.h"
#include "tests/structures/map_models.h"
#include "tests/structures/skiplist_stress.h"

namespace structures::testing {
namespace {

class SkipListLincheckTest : public ::testing::TestWithParam<std::string> {
 protected:
  StressConfig Base() const {
    StressConfig c;
    c.backend = GetParam();
    c.nodes = 3;
    c.split_keys = {1000, 2000};
    c.part_bytes = 1 << 20;
    // Native operations are ~100x faster than NIC ones: the native workers
    // pause between operations so that they overlap the whole NIC run.
    const auto think = std::chrono::microseconds(c.backend == "soft" ? 30 : 1000);
    c.workers = {{0, Path::kAuto, StressWorker::kMixed, think},
                 {0, Path::kAuto, StressWorker::kMixed, think},
                 {0, Path::kLoopback},
                 {1, Path::kAuto},
                 {2, Path::kAuto}};
    c.ops_per_worker = c.backend == "soft" ? 3000 : 600;
    c.duration = std::chrono::milliseconds(c.backend == "soft" ? 4000 : 15000);
    return c;
  }
  void RunAndCheck(const StressConfig& c) {
    StressResult r = RunSkipListStress<SkipListPolicy>(c);
    EXPECT_EQ(r.errors, 0u) << r.first_error;
    std::printf("%llu ops recorded, %llu torn reads retried, %llu reads under the lock\n",
                static_cast<unsigned long long>(r.history.size()), static_cast<unsigned long long>(r.torn_reads),
                static_cast<unsigned long long>(r.locked_reads));
    EXPECT_GT(r.history.size(), c.workers.size() * 10);
    lincheck::CheckOptions o;
    o.timeout = absl::Seconds(60);
    EXPECT_TRUE(lincheck::IsLinearizable(SkipListModel(), r.history, o));
  }

  // Few keys take most operations, on all three paths.
  StressConfig HotKeys(uint64_t seed) const {
    StressConfig c = Base();
    c.seed = seed;
    c.num_keys = 24;
    c.hot_keys = 4;
    c.hot_percent = 80;
    return c;
  }
  // 60 keys per node and an insert/erase-heavy mix: nodes split (and towers
  // are linked) while readers on every path look the keys up.
  StressConfig Splits(uint64_t seed) const {
    StressConfig c = Base();
    c.seed = seed;
    c.num_keys = 180;
    c.hot_keys = 0;
    c.put_percent = 30;
    c.insert_percent = 25;
    c.erase_percent = 15;
    c.contains_percent = 5;
    return c;
  }
  // LowerBound among the other operations on 12 keys around the split
  // points, so answers cross from one node's part into the next. Whole
  // histories, so short.
  StressConfig LowerBounds(uint64_t seed) const {
    StressConfig c = Base();
    c.seed = seed;
    c.num_keys = 12;
    c.hot_keys = 0;
    c.put_percent = 20;
    c.insert_percent = 10;
    c.erase_percent = 30;
    c.contains_percent = 5;
    c.lower_bound_percent = 25;
    c.ops_per_worker = 60;
    return c;
  }
};

TEST_P(SkipListLincheckTest, HotKeysMixedPaths) { RunAndCheck(HotKeys(11)); }
TEST_P(SkipListLincheckTest, SplitsUnderReaders) { RunAndCheck(Splits(12)); }
TEST_P(SkipListLincheckTest, LowerBoundAcrossNodes) {
  for (uint64_t seed : {13, 14, 15}) RunAndCheck(LowerBounds(seed));
}

// The same with the soft NIC copying payloads a byte at a time, as Soft-RoCE
// does, and node 0's image copies parked mid-word: every optimistic NIC read
// can be torn against native writers, and NIC writes half seen by native
// readers. Soft only (rxe does this natively).
class SkipListLincheckByteCopiesTest : public SkipListLincheckTest {};

TEST_P(SkipListLincheckByteCopiesTest, HotKeysMixedPaths) {
  StressConfig c = HotKeys(21);
  c.byte_granular_copies = true;
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(10);
  RunAndCheck(c);
}
TEST_P(SkipListLincheckByteCopiesTest, SplitsUnderReaders) {
  StressConfig c = Splits(22);
  c.byte_granular_copies = true;
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(10);
  RunAndCheck(c);
}
TEST_P(SkipListLincheckByteCopiesTest, LowerBoundAcrossNodes) {
  StressConfig c = LowerBounds(23);
  c.byte_granular_copies = true;
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(10);
  RunAndCheck(c);
}

INSTANTIATE_TEST_SUITE_P(Backends, SkipListLincheckTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Backends, SkipListLincheckByteCopiesTest,
                         ::testing::ValuesIn(rdma::testing::SoftIfUnderTest()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SkipListLincheckByteCopiesTest);

}  // namespace
}  // namespace structures::testing
