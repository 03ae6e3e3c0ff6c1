#include "tools/demo/map_demo.h"

#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rdma/path.h"
#include "structures/hash_map/hash_map.h"
#include "util/status_macros.h"

namespace demo {
namespace {

struct Record {  // 24 bytes: a typical small value
  uint64_t id;
  uint64_t version;
  uint64_t payload;
  bool operator==(const Record&) const = default;
};
using Map = structures::HashMap<Record>;

}  // namespace

absl::Status RunMapDemo(rdma::Cluster& cluster, int reps, std::vector<Row>& rows) {
  if (cluster.num_nodes() < 2) return absl::InvalidArgumentError("the map demo needs at least 2 nodes");
  structures::HashMapOptions options;
  options.groups_per_node = 4096;  // 32,784 slots per node (1,366 units); the demo stores at most 1024 keys
  ASSIGN_OR_RETURN(Map map, Map::Create(cluster, options));

  // Keys homed on node 0, so node 0's threads are native/loopback and node 1's
  // remote; and with their two windows in two units, so every put costs the
  // documented two-unit row (one key in S, S = units per segment, has both
  // windows in one unit and a cheaper put: docs/design.md §9.2.5).
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; keys.size() < 1024; ++k) {
    if (map.HomeOf(k) == 0 && map.CandidatesOf(k)[0] != map.CandidatesOf(k)[1]) keys.push_back(k);
  }

  // Cross-path visibility: lane i puts, lane i+1 gets it and erases it.
  for (size_t i = 0; i < std::size(kLanes); ++i) {
    const Lane& writer = kLanes[i];
    const Lane& reader = kLanes[(i + 1) % std::size(kLanes)];
    const uint64_t key = keys[i];
    const Record record{key, i + 1, 0xfeed};
    absl::Status s = OnThread(cluster, map, writer.node, [&](Map::Client& c) -> absl::Status {
      ASSIGN_OR_RETURN(std::optional<Record> prev, c.Put(key, record, writer.path));
      return Check(!prev.has_value(), absl::StrCat("hash map: ", writer.name, " put of a new key returned a previous value"));
    });
    RETURN_IF_ERROR(s);
    s = OnThread(cluster, map, reader.node, [&](Map::Client& c) -> absl::Status {
      ASSIGN_OR_RETURN(std::optional<Record> got, c.Get(key, reader.path));
      RETURN_IF_ERROR(Check(got == record, absl::StrCat("hash map: ", reader.name, " get missed ", writer.name, "'s put")));
      ASSIGN_OR_RETURN(std::optional<Record> erased, c.Erase(key, reader.path));
      return Check(erased == record, absl::StrCat("hash map: ", reader.name, " erase did not return ", writer.name, "'s value"));
    });
    RETURN_IF_ERROR(s);
  }

  // Costs per path: put (new keys first, then overwrites) and get.
  for (const Lane& lane : kLanes) {
    absl::Status s = OnThread(cluster, map, lane.node, [&](Map::Client& c) -> absl::Status {
      absl::Status put = Measure(lane.name, "put", reps, rows, [&](int i) {
        const uint64_t key = keys[i % keys.size()];
        return c.Put(key, Record{key, static_cast<uint64_t>(i), 0}, lane.path).status();
      });
      RETURN_IF_ERROR(put);
      return Measure(lane.name, "get", reps, rows, [&](int i) -> absl::Status {
        const uint64_t key = keys[i % keys.size()];
        ASSIGN_OR_RETURN(std::optional<Record> got, c.Get(key, lane.path));
        return Check(got.has_value() && got->id == key, absl::StrCat("hash map: ", lane.name, " get lost key ", key));
      });
    });
    RETURN_IF_ERROR(s);
  }
  return absl::OkStatus();
}

}  // namespace demo
