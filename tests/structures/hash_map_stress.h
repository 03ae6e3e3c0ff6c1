#ifndef TESTS_STRUCTURES_HASH_MAP_STRESS_H_
#define TESTS_STRUCTURES_HASH_MAP_STRESS_H_

// The hash map in the shared map stress harness (map_stress.h).

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/status/statusor.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"
#include "tests/structures/map_stress.h"

namespace structures::testing {

template <typename Policy>
struct MapStressTraits<hash_map_internal::BasicHashMap<StressValue, Policy>> {
  using Map = hash_map_internal::BasicHashMap<StressValue, Policy>;
  using SlotL = hash_map_internal::SlotLayout<StressValue>;
  static absl::StatusOr<Map> Create(rdma::Cluster& cluster, const StressConfig& cfg) {
    HashMapOptions mo;
    mo.groups_per_node = cfg.groups_per_node;
    mo.max_groups_per_node = cfg.max_groups_per_node == 0 ? cfg.groups_per_node : cfg.max_groups_per_node;
    return Map::Create(cluster, mo);
  }
  // Deterministic. Without room to grow no put can find both windows full:
  // each unit is a candidate of at most kSlotsPerWindow keys, so neither of
  // its 16-slot windows can fill up (a window holds only keys that have its
  // unit as a candidate). With room to grow, any keys: full windows split.
  static std::vector<uint64_t> Keys(const Map& map, const StressConfig& cfg) {
    const bool grows = cfg.max_groups_per_node > cfg.groups_per_node;
    const size_t per_unit = grows ? SIZE_MAX : hash_map_internal::kSlotsPerWindow;
    std::vector<uint64_t> keys;
    std::vector<size_t> per(cfg.nodes * map.units_per_node(), 0);
    for (uint64_t k = 1; keys.size() < static_cast<size_t>(cfg.num_keys) && k < 1000000; ++k) {
      const rdma::NodeId home = map.HomeOf(k);
      if (cfg.home >= 0 && home != cfg.home) continue;
      const std::array<size_t, 2> u = map.CandidatesOf(k);
      size_t& a = per[home * map.units_per_node() + u[0]];
      size_t& b = per[home * map.units_per_node() + u[1]];
      if (a >= per_unit || b >= per_unit) continue;
      ++a;
      if (&b != &a) ++b;
      keys.push_back(k);
    }
    return keys;
  }
  // After the third word of every slot (in the middle of it, byte-granular).
  static uint64_t CopyPeriod(bool bytes) { return bytes ? SlotL::kWords * 8 : SlotL::kWords; }
  static uint64_t CopyAt(bool bytes) { return bytes ? 2 * 8 + 3 : 2; }
};

template <typename Policy>
StressResult RunStress(const StressConfig& cfg) {
  return RunMapStress<hash_map_internal::BasicHashMap<StressValue, Policy>>(cfg);
}

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_HASH_MAP_STRESS_H_
