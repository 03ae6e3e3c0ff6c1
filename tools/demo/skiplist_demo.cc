#include "tools/demo/skiplist_demo.h"

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "structures/skiplist/skiplist.h"
#include "util/status_macros.h"

namespace demo {
namespace {

struct Record {  // 24 bytes, as in the hash map demo
  uint64_t id;
  uint64_t version;
  uint64_t payload;
  bool operator==(const Record&) const = default;
};
using Map = structures::SkipList<Record>;
constexpr uint64_t kKeys = 64;

}  // namespace

absl::Status RunSkipListDemo(rdma::Cluster& cluster, int reps, std::vector<Row>& rows) {
  if (cluster.num_nodes() < 2) return absl::InvalidArgumentError("the ordered-map demo needs at least 2 nodes");
  structures::SkipListOptions options;
  options.split_keys.push_back(uint64_t{1} << 32);  // node 0: [0, 2^32)
  for (int n = 2; n < cluster.num_nodes(); ++n) options.split_keys.push_back(static_cast<uint64_t>(n) << 32);
  options.part_bytes = 4 << 20;
  ASSIGN_OR_RETURN(Map map, Map::Create(cluster, options));

  // Cross-path visibility: lane i puts keys 1000*(i+1) and +1, lane i+1 finds
  // them by Get, LowerBound and Scan, and erases them.
  for (size_t i = 0; i < std::size(kLanes); ++i) {
    const Lane& writer = kLanes[i];
    const Lane& reader = kLanes[(i + 1) % std::size(kLanes)];
    const uint64_t key = 1000 * (i + 1);
    const Record a{key, 1, 0xfeed}, b{key + 1, 1, 0xbeef};
    RETURN_IF_ERROR(OnThread(cluster, map, writer.node, [&](Map::Client& c) -> absl::Status {
      for (const Record& r : {a, b}) {
        ASSIGN_OR_RETURN(std::optional<Record> prev, c.Put(r.id, r, writer.path));
        RETURN_IF_ERROR(Check(!prev.has_value(), absl::StrCat("ordered map: ", writer.name, " put of a new key")));
      }
      return absl::OkStatus();
    }));
    RETURN_IF_ERROR(OnThread(cluster, map, reader.node, [&](Map::Client& c) -> absl::Status {
      const std::string who = absl::StrCat("ordered map: ", reader.name, " after ", writer.name, "'s puts: ");
      ASSIGN_OR_RETURN(std::optional<Record> got, c.Get(key, reader.path));
      RETURN_IF_ERROR(Check(got == a, who + "get"));
      ASSIGN_OR_RETURN(auto lb, c.LowerBound(key - 500, reader.path));
      RETURN_IF_ERROR(Check(lb.has_value() && lb->first == key && lb->second == a, who + "lower bound"));
      ASSIGN_OR_RETURN(auto scan, c.Scan(key, 10, reader.path));
      RETURN_IF_ERROR(Check(scan.size() == 2 && scan[0].second == a && scan[1].second == b, who + "scan"));
      for (const Record& r : {a, b}) {
        ASSIGN_OR_RETURN(std::optional<Record> erased, c.Erase(r.id, reader.path));
        RETURN_IF_ERROR(Check(erased == r, who + "erase"));
      }
      return absl::OkStatus();
    }));
  }

  // 64 keys in node 0's range (native puts; several nodes after the splits).
  RETURN_IF_ERROR(OnThread(cluster, map, 0, [&](Map::Client& c) -> absl::Status {
    for (uint64_t k = 0; k < kKeys; ++k) RETURN_IF_ERROR(c.Put(100 * k, Record{100 * k, 0, 0}).status());
    return absl::OkStatus();
  }));
  // Costs per path: get, then put (overwrites), after one unmeasured get of
  // every key (the client learns where the leaves are).
  for (const Lane& lane : kLanes) {
    RETURN_IF_ERROR(OnThread(cluster, map, lane.node, [&](Map::Client& c) -> absl::Status {
      for (uint64_t k = 0; k < kKeys; ++k) RETURN_IF_ERROR(c.Get(100 * k, lane.path).status());
      RETURN_IF_ERROR(Measure(lane.name, "ordered-get", reps, rows, [&](int i) -> absl::Status {
        const uint64_t key = 100 * (static_cast<uint64_t>(i) % kKeys);
        ASSIGN_OR_RETURN(std::optional<Record> got, c.Get(key, lane.path));
        return Check(got.has_value() && got->id == key, absl::StrCat("ordered map: ", lane.name, " lost key ", key));
      }));
      return Measure(lane.name, "ordered-put", reps, rows, [&](int i) -> absl::Status {
        const uint64_t key = 100 * (static_cast<uint64_t>(i) % kKeys);
        ASSIGN_OR_RETURN(std::optional<Record> prev, c.Put(key, Record{key, static_cast<uint64_t>(i) + 1, 0}, lane.path));
        return Check(prev.has_value(), absl::StrCat("ordered map: ", lane.name, " put found no key ", key));
      });
    }));
  }
  return absl::OkStatus();
}

}  // namespace demo
