// Linearizability of the hash map under mixed paths (docs/design.md §7): threads on
// node 0 take the native and the loopback path, threads on nodes 1 and 2 the
// remote path (and the native one for their own keys), all on the same keys.
// Every history is checked by lincheck per key against HashMapModel.
// Backends from RDMADS_FABRICS (default soft); fixed seeds; bounded ops and
// time per worker.

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/test_util.h"
#include "tests/structures/map_models.h"
#include "tests/structures/hash_map_stress.h"
#include "tests/structures/map_mutant_util.h"

namespace structures::testing {
namespace {

class HashMapLincheckTest : public ::testing::TestWithParam<std::string> {
 protected:
  StressConfig Base() const {
    StressConfig c;
    c.backend = GetParam();
    c.nodes = 3;
    c.workers = MixedPathWorkers(c.backend);
    // The soft NIC runs ~1 µs per op; verbs in the TCG guest ~100x slower.
    c.ops_per_worker = c.backend == "soft" ? 4000 : 800;
    c.duration = std::chrono::milliseconds(c.backend == "soft" ? 4000 : 15000);
    return c;
  }
  void RunAndCheck(const StressConfig& c) {
    ExpectLinearizable<HashMap<StressValue>>(c, HashMapModel(), absl::Seconds(20), "");
  }


  // Few keys take most operations: heavy contention on the same slots across
  // all three paths, with slot reuse (erase + insert) inside shared units.
  StressConfig HotKeys(uint64_t seed) {
    StressConfig c = Base();
    c.seed = seed;
    c.num_keys = 24;
    c.hot_keys = 3;
    c.hot_percent = 90;
    c.groups_per_node = 2;  // one unit per node: ~8 keys share its 24 slots
    return c;
  }

  // Keys all homed on node 0, two native writers there, readers on every
  // path: native writers against remote and loopback optimistic readers.
  StressConfig NativeWritersRemoteReaders(uint64_t seed) {
    StressConfig c = Base();
    c.seed = seed;
    c.home = 0;
    c.num_keys = 4;
    c.hot_keys = 0;
    const auto think = c.workers[0].think;
    c.workers = {{0, Path::kAuto, StressWorker::kWriter, think},
                 {0, Path::kAuto, StressWorker::kMixed, think},
                 {0, Path::kLoopback, StressWorker::kReader},
                 {1, Path::kAuto, StressWorker::kReader},
                 {2, Path::kAuto, StressWorker::kMixed}};
    return c;
  }

  // Full speed (FullSpeed: no pauses) on node 0's keys: two native writers
  // and a native reader loop on the same keys, next to loopback and remote
  // readers and writers. `keys`: 3 (every operation contended) or 96.
  StressConfig FullSpeedAllPaths(uint64_t seed, int keys) {
    StressConfig c = Base();
    c.seed = seed;
    c.home = 0;
    c.num_keys = keys;
    c.hot_keys = 0;
    c.groups_per_node = keys <= 8 ? 2 : 24;
    c.workers = {{0, Path::kAuto, StressWorker::kWriter},  {0, Path::kAuto, StressWorker::kMixed},
                 {0, Path::kAuto, StressWorker::kReader},  {0, Path::kLoopback, StressWorker::kMixed},
                 {1, Path::kAuto, StressWorker::kReader},  {2, Path::kAuto, StressWorker::kMixed}};
    return FullSpeed(c);
  }
};

TEST_P(HashMapLincheckTest, HotKeysMixedPaths) { RunAndCheck(HotKeys(11)); }

TEST_P(HashMapLincheckTest, FullSpeedFewKeys) { RunAndCheck(FullSpeedAllPaths(15, 3)); }
TEST_P(HashMapLincheckTest, FullSpeedManyKeys) { RunAndCheck(FullSpeedAllPaths(16, 96)); }

// Uniform keys over all nodes.
TEST_P(HashMapLincheckTest, UniformMixedPaths) {
  StressConfig c = Base();
  c.seed = 12;
  c.num_keys = 96;
  c.hot_keys = 0;
  c.groups_per_node = 24;  // 8 units per node, ~4 keys per unit
  RunAndCheck(c);
}

TEST_P(HashMapLincheckTest, NativeWritersRemoteReaders) { RunAndCheck(NativeWritersRemoteReaders(13)); }

// Growth: each node's part starts as one segment of one unit (24 slots) with
// room for 64; 80 keys per node, 4 of them hot, so the map splits several
// times per node while native, loopback and remote workers read and write
// the same keys (hot ones contended, cold ones inserted, erased and
// re-inserted across the splits).
StressConfig GrowthConfig(const std::string& backend, uint64_t seed) {
  StressConfig c;
  c.backend = backend;
  c.nodes = 3;
  c.workers = MixedPathWorkers(c.backend);
  c.ops_per_worker = c.backend == "soft" ? 3000 : 600;
  c.duration = std::chrono::milliseconds(c.backend == "soft" ? 4000 : 15000);
  c.seed = seed;
  c.groups_per_node = 3;
  c.max_groups_per_node = 3 * 64;
  c.num_keys = 240;
  c.hot_keys = 4;
  c.hot_percent = 50;
  c.put_percent = 40;
  c.insert_percent = 15;
  c.erase_percent = 10;
  return c;
}

TEST_P(HashMapLincheckTest, GrowingMapMixedPaths) {
  const StressResult r = ExpectLinearizable<HashMap<StressValue>>(
      GrowthConfig(GetParam(), 14), HashMapModel(), absl::Seconds(20), "");
  std::printf("%llu splits, %llu operations met a split and retried\n", static_cast<unsigned long long>(r.splits),
              static_cast<unsigned long long>(r.stale));
  EXPECT_GE(r.splits, 6u);  // at least two per node
}

TEST_P(HashMapLincheckTest, FullSpeedGrowingMap) {
  const StressResult r = ExpectLinearizable<HashMap<StressValue>>(FullSpeed(GrowthConfig(GetParam(), 17)),
                                                                  HashMapModel(), absl::Seconds(20), "");
  EXPECT_GE(r.splits, 6u);
}

// The same workloads with the soft NIC copying READ/WRITE payloads a byte at a
// time (SoftDeviceOptions::byte_granular_copies), as Soft-RoCE does: every
// slot word an optimistic remote or loopback reader fetches can itself be
// torn against a native writer, and a NIC writer's words can be seen half
// written by native readers. The per-slot checksum must turn every such read
// into a retry. Soft only (verbs on rxe does this natively), so the suite is
// instantiated only when soft is a backend under test: in the guest
// (RDMADS_FABRICS=verbs) it does not exist, rather than being skipped.
class HashMapLincheckByteCopiesTest : public HashMapLincheckTest {};

TEST_P(HashMapLincheckByteCopiesTest, HotKeysMixedPaths) {
  StressConfig c = HotKeys(21);
  c.byte_granular_copies = true;
  // Without a pause the soft NIC copies a slot too fast for a reader to
  // catch a write inside it; park node 0's slot copies mid-word briefly.
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(10);
  RunAndCheck(c);
}

TEST_P(HashMapLincheckByteCopiesTest, NativeWritersRemoteReaders) {
  StressConfig c = NativeWritersRemoteReaders(23);
  c.byte_granular_copies = true;
  // Park every NIC copy of node 0's slots in the middle of the slot's third
  // word for a moment, so native writes land inside a word being READ.
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(20);
  RunAndCheck(c);
}

TEST_P(HashMapLincheckByteCopiesTest, FullSpeedFewKeys) {
  StressConfig c = FullSpeedAllPaths(25, 3);
  c.byte_granular_copies = true;
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(10);
  RunAndCheck(c);
}

TEST_P(HashMapLincheckByteCopiesTest, FullSpeedManyKeys) {
  StressConfig c = FullSpeedAllPaths(26, 96);
  c.byte_granular_copies = true;
  RunAndCheck(c);
}

TEST_P(HashMapLincheckByteCopiesTest, GrowingMapMixedPaths) {
  StressConfig c = GrowthConfig(GetParam(), 24);
  c.byte_granular_copies = true;
  c.slow_copy_node = 0;
  c.slow_copy = std::chrono::microseconds(10);
  const StressResult r =
      ExpectLinearizable<HashMap<StressValue>>(c, HashMapModel(), absl::Seconds(20), "");
  std::printf("%llu splits, %llu operations met a split and retried\n", static_cast<unsigned long long>(r.splits),
              static_cast<unsigned long long>(r.stale));
  EXPECT_GE(r.splits, 6u);
}

INSTANTIATE_TEST_SUITE_P(Backends, HashMapLincheckTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Backends, HashMapLincheckByteCopiesTest, ::testing::ValuesIn(rdma::testing::SoftIfUnderTest()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HashMapLincheckByteCopiesTest);


// A remote writer dies mid-operation (map_mutant_util.h).
class HashMapCrashLincheckTest : public ::testing::TestWithParam<std::string> {};
TEST_P(HashMapCrashLincheckTest, ARemoteWriterThatDiesStaysPending) {
  ExpectLinearizableWithACrash<HashMap<StressValue>>(GetParam(), HashMapModel());
}
INSTANTIATE_TEST_SUITE_P(Backends, HashMapCrashLincheckTest, ::testing::ValuesIn(rdma::testing::SoftIfUnderTest()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(HashMapCrashLincheckTest);

}  // namespace
}  // namespace structures::testing
