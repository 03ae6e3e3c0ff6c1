// Measures how full a HashMap gets before the first ResourceExhausted, for
// uniformly random keys (the numbers in bench/README.md, "Hash map load factor").
// Keys map to two candidate windows with a fixed mixer, so the load factor at
// the first key whose windows are both full depends only on the total number
// of units (nodes * units per node); a 1-node map on the native path measures
// it fastest.

#include <cstdio>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"
#include "testing/backends.h"
#include "testing/sanitizers.h"

namespace structures {
namespace {

using rdma::testing::kSanitized;

struct Load {
  double first_full = 0;   // stored / capacity when the first insert failed
  double at_1pct = 0;      // stored / capacity when 1% of inserts so far failed
};

Load Measure(rdma::Cluster& cluster, size_t groups, uint64_t seed) {
  HashMapOptions o;
  o.groups_per_node = groups;
  o.max_groups_per_node = groups;  // no growth: the load at which a fixed-size map first says full
  auto map = HashMap<uint64_t>::Create(cluster, o);
  EXPECT_TRUE(map.ok()) << map.status();
  auto c = map->NewClient(cluster.node(0));
  EXPECT_TRUE(c.ok()) << c.status();
  std::mt19937_64 rng(seed);
  Load load;
  size_t stored = 0, attempts = 0, failed = 0;
  const double cap = static_cast<double>(map->capacity());
  while (stored < map->capacity()) {
    auto r = (*c)->Insert(rng(), 1);
    ++attempts;
    if (r.ok()) {
      stored += *r ? 1 : 0;
      continue;
    }
    EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
    if (failed++ == 0) load.first_full = stored / cap;
    if (failed * 100 >= attempts) {
      load.at_1pct = stored / cap;
      break;
    }
  }
  // A small map can fill up completely before any key finds both windows
  // full (the loop ends without a failure): its first failure is at load 1.
  if (failed == 0) load.first_full = load.at_1pct = 1.0;
  c->reset();
  return load;
}

TEST(HashMapCapacityTest, LoadFactorAtFirstFullWindows) {
  auto cluster = rdma::testing::MakeCluster("soft", 1, 64 << 20);
  ASSERT_NE(cluster, nullptr);
  std::printf("groups  slots    load at first ResourceExhausted (min / mean / max of 5)   load when 1%% of inserts fail (mean)\n");
  // One thread, so a sanitizer has no race to find: sanitized builds leave
  // out the largest map, which takes most of the time.
  std::vector<size_t> sizes = {16, 256, 4096};
  if (!kSanitized) sizes.push_back(65536);
  for (size_t groups : sizes) {
    double lo = 1, hi = 0, sum = 0, sum1 = 0;
    const int kSeeds = 5;
    for (int s = 0; s < kSeeds; ++s) {
      const Load l = Measure(*cluster, groups, 1000 + s);
      lo = std::min(lo, l.first_full);
      hi = std::max(hi, l.first_full);
      sum += l.first_full;
      sum1 += l.at_1pct;
    }
    const size_t slots = (groups + 2) / 3 * HashMap<uint64_t>::kSlotsPerUnit;
    std::printf("%6zu %6zu   %.3f / %.3f / %.3f   %.3f\n", groups, slots, lo, sum / kSeeds, hi, sum1 / kSeeds);
    // The map must not report more than it holds; two windows per key over
    // shared overflow groups (RACE's layout) fill to ~0.9 before the first
    // key finds both full: at least 0.90 on average and 0.85 at worst with
    // 65,536 groups (fewer groups fill fuller: fewer bins, less variance).
    EXPECT_LE(hi, 1.0) << groups;
    EXPECT_GE(lo, 0.85) << groups;
    EXPECT_GE(sum / kSeeds, 0.90) << groups;
    EXPECT_GT(sum1 / kSeeds, sum / kSeeds) << groups;
  }
}

// A map that grows: how full its part is when the first segment splits, and
// how full it is (entries / slots of the segments in use) at every half
// initial capacity from 2x to 8x the initial capacity inserted. A segment
// splits when a key finds both its windows full, which in a segment of 16-32
// units comes a little earlier than in a whole part (the first of many small
// tables to fill), and a split leaves two half-full segments: as in any
// extendible hashing, the load then moves in waves between about half and the
// split load as the segments fill at about the same rate.
TEST(HashMapCapacityTest, GrowingMapLoad) {
  auto cluster = rdma::testing::MakeCluster("soft", 1, 256 << 20);
  ASSERT_NE(cluster, nullptr);
  std::printf("groups  initial slots  segments x units  load at first split (mean of 3)  load from 2x to 8x inserted (min / mean / max)\n");
  std::vector<size_t> sizes = {256};
  if (!kSanitized) sizes.push_back(4096);  // as above: one thread, most of the time
  for (size_t groups : sizes) {
    double first = 0, lo = 1, hi = 0, sum = 0;
    int samples = 0;
    const int kSeeds = 3;
    size_t segs0 = 0, seg_units = 0;
    for (int s = 0; s < kSeeds; ++s) {
      HashMapOptions o;
      o.groups_per_node = groups;
      o.max_groups_per_node = 16 * groups;
      auto map = HashMap<uint64_t>::Create(*cluster, o);
      ASSERT_TRUE(map.ok()) << map.status();
      segs0 = map->geometry().initial_segments();
      seg_units = map->geometry().segment_units;
      const size_t segment_slots = seg_units * HashMap<uint64_t>::kSlotsPerUnit;
      auto c = map->NewClient(cluster->node(0));
      ASSERT_TRUE(c.ok()) << c.status();
      std::mt19937_64 rng(2000 + s);
      size_t stored = 0;
      bool split_seen = false;
      const size_t half = map->capacity() / 2;
      while (stored < 8 * map->capacity()) {
        auto r = (*c)->Insert(rng(), 1);
        ASSERT_TRUE(r.ok()) << r.status();
        if (!split_seen && (*c)->growth_stats().splits > 0) {
          split_seen = true;
          first += static_cast<double>(stored) / map->capacity();
        }
        if (!*r) continue;
        ++stored;
        if (stored >= 4 * half && stored % half == 0) {
          const double load = static_cast<double>(stored) / (*(*c)->SegmentsInUse(0) * segment_slots);
          lo = std::min(lo, load);
          hi = std::max(hi, load);
          sum += load;
          ++samples;
        }
      }
      EXPECT_EQ(*(*c)->Size(0), stored);
    }
    std::printf("%6zu %14zu  %8zu x %-6zu  %.3f                            %.3f / %.3f / %.3f\n", groups,
                segs0 * seg_units * HashMap<uint64_t>::kSlotsPerUnit, segs0, seg_units, first / kSeeds, lo,
                sum / samples, hi);
    EXPECT_GE(first / kSeeds, 0.8) << groups;
    EXPECT_GE(lo, 0.45) << groups;
    EXPECT_GE(sum / samples, 0.6) << groups;
    EXPECT_LE(hi, 1.0) << groups;
  }
}

}  // namespace
}  // namespace structures
