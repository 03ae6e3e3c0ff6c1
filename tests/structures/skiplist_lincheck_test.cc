// Linearizability of the ordered map under mixed paths (docs/design.md §7):
// threads on node 0 take the native and the loopback path, threads on nodes 1
// and 2 the remote path, all on the same keys, which sit around the split
// points between the nodes' ranges. Get/Put/Insert/Erase/Contains histories
// are checked per key; LowerBound, which crosses node boundaries, in shorter
// runs checked whole against the ordered-map model. Runs with many keys per
// node force splits (and tower links) under concurrent readers. Backends from
// RDMADS_FABRICS (default soft); fixed seeds; bounded ops and time per worker.

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/test_util.h"
#include "tests/structures/map_models.h"
#include "tests/structures/map_mutant_util.h"
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
    c.workers = MixedPathWorkers(c.backend);
    c.ops_per_worker = c.backend == "soft" ? 3000 : 600;
    c.duration = std::chrono::milliseconds(c.backend == "soft" ? 4000 : 15000);
    return c;
  }
  void RunAndCheck(const StressConfig& c) {
    ExpectLinearizable<SkipList<StressValue>>(c, SkipListModel(), absl::Seconds(60), "");
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
  // 30 keys per node and an erase-heavy mix: nodes split, empty out, are
  // unlinked, freed and reused while readers on every path (some through
  // remembered locations of reclaimed nodes) look keys up.
  StressConfig Reclaims(uint64_t seed) const {
    StressConfig c = Base();
    c.seed = seed;
    c.num_keys = 90;
    c.hot_keys = 0;
    c.put_percent = 20;
    c.insert_percent = 25;
    c.erase_percent = 35;
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
TEST_P(SkipListLincheckTest, ReclamationUnderReaders) { RunAndCheck(Reclaims(16)); }
TEST_P(SkipListLincheckTest, LowerBoundAcrossNodes) {
  for (uint64_t seed : {13, 14, 15}) RunAndCheck(LowerBounds(seed));
}

// Full speed (FullSpeed: no pauses): the native workers on node 0 loop on
// the same keys as each other and as the NIC workers. Few hot keys, many
// keys that split and reclaim nodes, and LowerBound across the parts.
TEST_P(SkipListLincheckTest, FullSpeedHotKeys) { RunAndCheck(FullSpeed(HotKeys(17))); }
TEST_P(SkipListLincheckTest, FullSpeedSplitsAndReclaims) {
  RunAndCheck(FullSpeed(Splits(18)));
  RunAndCheck(FullSpeed(Reclaims(19)));
}
TEST_P(SkipListLincheckTest, FullSpeedLowerBound) {
  for (uint64_t seed : {31, 32}) RunAndCheck(FullSpeed(LowerBounds(seed)));
}

// The same with the soft NIC copying payloads a byte at a time, as Soft-RoCE
// does, and node 0's image copies parked mid-word: every optimistic NIC read
// can be torn against native writers, and NIC writes half seen by native
// readers. Soft only (rxe does this natively).
class SkipListLincheckByteCopiesTest : public SkipListLincheckTest {
 protected:
  // Byte copies, and node 0's image copies parked mid-word for 10 µs.
  static StressConfig ByteCopies(StressConfig c) {
    c.byte_granular_copies = true;
    c.slow_copy_node = 0;
    c.slow_copy = std::chrono::microseconds(10);
    return c;
  }
};

TEST_P(SkipListLincheckByteCopiesTest, HotKeysMixedPaths) {
  RunAndCheck(ByteCopies(HotKeys(21)));
}
TEST_P(SkipListLincheckByteCopiesTest, SplitsUnderReaders) {
  RunAndCheck(ByteCopies(Splits(22)));
}
TEST_P(SkipListLincheckByteCopiesTest, ReclamationUnderReaders) {
  RunAndCheck(ByteCopies(Reclaims(24)));
}
TEST_P(SkipListLincheckByteCopiesTest, LowerBoundAcrossNodes) {
  RunAndCheck(ByteCopies(LowerBounds(23)));
}
TEST_P(SkipListLincheckByteCopiesTest, FullSpeedHotKeys) {
  RunAndCheck(ByteCopies(FullSpeed(HotKeys(27))));
}
TEST_P(SkipListLincheckByteCopiesTest, FullSpeedSplits) {
  RunAndCheck(ByteCopies(FullSpeed(Splits(28))));
}

// Scan is weakly consistent. Writers on every path insert and erase
// "volatile" keys (each inserted once, erased once) among "stable" keys bound
// before the scans start and never changed, across all three parts; scanners
// on every path scan from random keys. Every scan must return strictly
// ascending keys, each with the value its writer bound, no volatile key whose
// erase had completed before the scan began, and every stable key between its
// start and its last key (when it stopped at its limit) or the end.
TEST_P(SkipListLincheckTest, ScanIsWeaklyConsistent) {
  const std::string backend = GetParam();
  std::unique_ptr<rdma::Cluster> cluster = rdma::testing::MakeCluster(backend, 3, 16 << 20, {});
  ASSERT_NE(cluster, nullptr);
  SkipListOptions o;
  o.split_keys = {1000, 2000};
  o.part_bytes = 1 << 20;
  auto map = SkipList<StressValue>::Create(*cluster, o);
  ASSERT_TRUE(map.ok()) << map.status();
  auto value_of = [](uint64_t k) { return StressValue{{int64_t(k), int64_t(k) * 3, 7, 11}}; };
  // Stable keys: every 10th key of [0, 3000); volatile: the others ending in 5.
  std::vector<uint64_t> stable, volatile_keys;
  for (uint64_t k = 0; k < 3000; k += 10) stable.push_back(k);
  for (uint64_t k = 5; k < 3000; k += 10) volatile_keys.push_back(k);
  {
    auto c = map->NewClient(cluster->node(0));
    ASSERT_TRUE(c.ok());
    auto s1 = cluster->NewSession(0);
    ASSERT_TRUE(s1.ok());
    auto cr = map->NewClient(**s1);
    ASSERT_TRUE(cr.ok());
    for (uint64_t k : stable) ASSERT_TRUE((*cr)->Put(k, value_of(k)).ok()) << k;
  }
  std::vector<std::atomic<int64_t>> erased_at(3000);  // steady-clock ns when the erase completed; 0 = not yet
  for (auto& e : erased_at) e.store(0);
  auto now_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::mutex mu;
  std::string first_failure;
  auto fail = [&](const std::string& what) {
    failures.fetch_add(1);
    std::lock_guard<std::mutex> l(mu);
    if (first_failure.empty()) first_failure = what;
  };
  struct Who {
    rdma::NodeId node;
    Path path;
  };
  const std::vector<Who> writers = {{0, Path::kAuto}, {1, Path::kAuto}, {0, Path::kLoopback}};
  const std::vector<Who> scanners = {{0, Path::kAuto}, {2, Path::kAuto}, {1, Path::kLoopback}};
  std::atomic<uint64_t> scans{0};
  // Writers go at the scanners' pace, whatever the machine's load: before
  // each insert/erase pair a writer waits (up to 2 ms) for another scan to
  // complete, so scans overlap the writes throughout.
  auto pace = [&](uint64_t* seen) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (scans.load() == *seen && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    *seen = scans.load();
  };
  std::vector<std::thread> threads;
  for (size_t w = 0; w < writers.size(); ++w) {
    threads.emplace_back([&, w] {
      auto s = cluster->NewSession(writers[w].node);
      if (!s.ok()) return fail(s.status().ToString());
      auto c = map->NewClient(**s);
      if (!c.ok()) return fail(c.status().ToString());
      uint64_t seen = 0;
      for (size_t i = w; i < volatile_keys.size(); i += writers.size()) {
        pace(&seen);
        const uint64_t k = volatile_keys[i];
        // A key's path: the writer's own, or kAuto where that is impossible.
        const Path p = writers[w].path == Path::kLoopback && map->HomeOf(k) != writers[w].node ? Path::kAuto
                                                                                                 : writers[w].path;
        if (auto r = (*c)->Insert(k, value_of(k), p); !r.ok()) return fail(r.status().ToString());
        if (auto r = (*c)->Erase(k, p); !r.ok()) return fail(r.status().ToString());
        erased_at[k].store(now_ns());
      }
    });
  }
  for (size_t t = 0; t < scanners.size(); ++t) {
    threads.emplace_back([&, t] {
      auto s = cluster->NewSession(scanners[t].node);
      if (!s.ok()) return fail(s.status().ToString());
      auto c = map->NewClient(**s);
      if (!c.ok()) return fail(c.status().ToString());
      std::mt19937_64 rng(t);
      while (!stop.load()) {
        const uint64_t from = rng() % 3000;
        const size_t limit = 1 + rng() % 120;
        const Path p = scanners[t].path == Path::kLoopback && map->HomeOf(from) != scanners[t].node
                           ? Path::kAuto
                           : scanners[t].path;
        const int64_t began = now_ns();
        auto r = (*c)->Scan(from, limit, p);
        if (!r.ok()) return fail(r.status().ToString());
        scans.fetch_add(1);
        const auto& v = *r;
        for (size_t i = 0; i < v.size(); ++i) {
          const uint64_t k = v[i].first;
          if (k < from || (i > 0 && k <= v[i - 1].first)) return fail(absl::StrCat("scan from ", from, ": key ", k, " out of order"));
          const StressValue want = value_of(k);
          if (std::memcmp(&v[i].second, &want, sizeof(StressValue)) != 0) return fail(absl::StrCat("key ", k, ": a value nobody bound"));
          if (k % 10 == 5) {
            const int64_t e = erased_at[k].load();
            if (e != 0 && e < began) return fail(absl::StrCat("key ", k, " erased before the scan began"));
          } else if (k % 10 != 0) {
            return fail(absl::StrCat("key ", k, " was never bound"));
          }
        }
        // Stable keys in [from, end] must all be there.
        const uint64_t end = v.size() == limit ? v.back().first : 2999;
        size_t j = 0;
        for (uint64_t k = (from + 9) / 10 * 10; k <= end; k += 10) {
          while (j < v.size() && v[j].first < k) ++j;
          if (j == v.size() || v[j].first != k) return fail(absl::StrCat("scan from ", from, " missed stable key ", k));
        }
      }
    });
  }
  for (size_t w = 0; w < writers.size(); ++w) threads[w].join();
  stop.store(true);
  for (size_t t = writers.size(); t < threads.size(); ++t) threads[t].join();
  EXPECT_EQ(failures.load(), 0) << first_failure;
  EXPECT_GT(scans.load(), 50u);
  std::printf("%llu scans checked\n", static_cast<unsigned long long>(scans.load()));
}

INSTANTIATE_TEST_SUITE_P(Backends, SkipListLincheckTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Backends, SkipListLincheckByteCopiesTest,
                         ::testing::ValuesIn(rdma::testing::SoftIfUnderTest()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SkipListLincheckByteCopiesTest);


// A remote writer dies mid-operation (map_mutant_util.h).
class SkipListCrashLincheckTest : public ::testing::TestWithParam<std::string> {};
TEST_P(SkipListCrashLincheckTest, ARemoteWriterThatDiesStaysPending) {
  ExpectLinearizableWithACrash<SkipList<StressValue>>(GetParam(), SkipListModel());
}
INSTANTIATE_TEST_SUITE_P(Backends, SkipListCrashLincheckTest, ::testing::ValuesIn(rdma::testing::SoftIfUnderTest()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(SkipListCrashLincheckTest);

}  // namespace
}  // namespace structures::testing
