#ifndef TESTS_STRUCTURES_SKIPLIST_STRESS_H_
#define TESTS_STRUCTURES_SKIPLIST_STRESS_H_

// The ordered map in the shared map stress harness (map_stress.h).

#include <cstdint>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "rdma/cluster.h"
#include "structures/skiplist/skiplist.h"
#include "tests/structures/map_stress.h"

namespace structures::testing {

template <typename Checks>
struct MapStressTraits<skiplist_internal::BasicSkipList<StressValue, Checks>> {
  using Map = skiplist_internal::BasicSkipList<StressValue, Checks>;
  using W = skiplist_internal::Words<StressValue>;
  static absl::StatusOr<Map> Create(rdma::Cluster& cluster, const StressConfig& cfg) {
    SkipListOptions o;
    o.split_keys = cfg.split_keys;
    o.part_bytes = cfg.part_bytes;
    return Map::Create(cluster, o);
  }
  // num_keys keys, deterministic: each node's range gets its share, half at
  // its low end and half just below its high end, so keys sit around the
  // split points, and (with more than kFanout per node) nodes split.
  static std::vector<uint64_t> Keys(const Map& map, const StressConfig& cfg) {
    const std::vector<uint64_t>& s = map.split_keys();
    const int n = map.num_nodes();
    std::set<uint64_t> keys;
    const uint64_t per = static_cast<uint64_t>(cfg.num_keys) / static_cast<uint64_t>(cfg.home >= 0 ? 1 : n) + 1;
    for (int h = 0; h < n; ++h) {
      if (cfg.home >= 0 && h != cfg.home) continue;
      const uint64_t lo = h == 0 ? 0 : s[h - 1];
      // lincheck's models order keys as int64: the last range stops at
      // INT64_MAX here (skiplist_test covers keys up to UINT64_MAX).
      const uint64_t hi = h + 1 == n ? uint64_t{INT64_MAX} : s[h] - 1;  // inclusive
      for (uint64_t i = 0; i < per && keys.size() < static_cast<size_t>(cfg.num_keys); ++i) {
        keys.insert(i % 2 == 0 ? lo + i / 2 : hi - i / 2);
      }
    }
    std::vector<uint64_t> v(keys.begin(), keys.end());
    // Hot keys are the first ones: take them from around the split points.
    std::stable_partition(v.begin(), v.end(), [&](uint64_t k) {
      for (uint64_t x : s) {
        if (k + 2 >= x && k < x + 2) return true;
      }
      return false;
    });
    return v;
  }
  // Once per node image: inside the first entry's value.
  static uint64_t CopyPeriod(bool bytes) { return (bytes ? 8 : 1) * skiplist_internal::NodeImage<StressValue>::kWords; }
  static uint64_t CopyAt(bool bytes) { return bytes ? 8 * (W::Value(0) + 1) + 3 : W::Value(0) + 1; }
};

template <typename Checks>
StressResult RunSkipListStress(const StressConfig& cfg) {
  return RunMapStress<skiplist_internal::BasicSkipList<StressValue, Checks>>(cfg);
}

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_SKIPLIST_STRESS_H_
