#ifndef STRUCTURES_COMMON_CATALOGUE_H_
#define STRUCTURES_COMMON_CATALOGUE_H_

// The catalogue of named structures: how every process of a cluster finds a
// structure by name, whichever process created it and in whatever order
// (docs/design.md §9.1, "Structures by name").
//
//   NamedSpec spec{.name = "sessions", .kind = StructureKind::kHashMap,
//                  .value_bytes = 16, .options = "groups_per_node=1024 ...",
//                  .part_bytes = bytes};
//   ASSIGN_OR_RETURN(NamedParts found, FindOrCreate(*cluster, spec, init));
//   // found.offset: every node's part sits there in its arena
//
// Where it lives: node 0's reserved region (rdma::NodeOptions::
// reserved_bytes, set by rdma::ClusterOptions::named_bytes) starts with a
// lock line (an RDMA spin lock, taken through the NIC by every process), a
// header line (the next free offset, the entries used), and kEntries entries
// of kEntryBytes. Named parts are carved from the rest of the reserved region at
// one offset on every node, so no process allocates in another's arena.
//
// Protocol: an entry is written only under the catalogue's lock and carries
// a checksum over its words. FindOrCreate first reads every entry one-sidedly
// (one READ, no lock); a whole entry with the name answers at once. Otherwise
// it takes the lock, reads again, and, if the name is still absent, records
// the slot and the parts' range in the header, initializes every node's part
// (local ones with CPU stores, others with WRITEs of the non-zero lines of
// the initialized image), and only then writes the entry and releases the
// lock. A creation that fails part way leaves its slot and range used and
// its entry empty or torn, which lookups skip. So two creators racing
// for one name make one structure, and an entry is never visible before its
// parts are ready. Named parts are never freed: they last as long as the
// cluster's arenas. Each call makes a Session of its own for the catalogue
// (across processes, a connection to node 0 and to each node a new part is
// copied to) and allocates nothing in the node's arena.
//
// Rejoin (rdma::Cluster::rejoined): an entry records the creator's epoch.
// The creator reads it before it initializes the parts, and by then every
// node admitted up to that epoch is reachable from it, so the parts of
// every node that joined by that epoch are initialized; a node that joined
// later has none (PartDirectory::OpenNamed marks it lost). When node 0's
// process is not the one the job started with, the catalogue went with its
// memory: every call fails with DataLoss rather than carve a range that
// live parts of other nodes still use.
//
// Errors: InvalidArgument (a name empty or over kMaxName bytes),
// FailedPrecondition (the name exists as another kind, value size or
// options: the message names both; the cluster reserved no room for the
// catalogue), ResourceExhausted (all kEntries used, or the reserved region
// full: the message gives its size), Unavailable (node 0, which keeps the
// catalogue, is down), DataLoss (node 0 restarted), and the lock's and
// session's errors.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdma/cluster.h"
#include "rdma/node.h"
#include "rdma/remote_ptr.h"

namespace structures {

enum class StructureKind : uint32_t { kHashMap = 1, kOrderedMap = 2, kQueue = 3 };
// "hash map", "ordered map", "queue".
absl::string_view StructureKindName(StructureKind kind);

// What a named structure is: everything two processes must agree on before
// they share its memory.
struct NamedSpec {
  std::string name;       // 1..kMaxName bytes
  StructureKind kind = StructureKind::kHashMap;
  uint32_t value_bytes = 0;
  std::string options;    // the options that shape the layout, as text
  size_t part_bytes = 0;  // each node's part
};

struct NamedParts {
  uint64_t offset = 0;   // every node's part, from its arena base
  bool created = false;  // this call created the structure
  // The creator's rdma::Cluster::epoch() when it made the structure: the
  // part of a node whose process joined later (JoinedEpoch > epoch) began
  // empty and is lost.
  uint64_t epoch = 0;
};

struct Catalogue {
  static constexpr int kEntries = 64;
  static constexpr size_t kMaxName = 47;
  static constexpr size_t kMaxOptions = 127;
  static constexpr size_t kLockOffset = 0;        // the RDMA spin lock creators take
  static constexpr size_t kEntryBytes = 256;  // the name first, NUL-padded
  static constexpr size_t kEntriesOffset = 128;  // after the lock line and the header line
  static constexpr size_t kBytes = kEntriesOffset + kEntries * kEntryBytes;
};

// Writes a new part's initial contents on `node` at `part` with CPU stores.
// The contents must not depend on where the part is (no addresses): the
// same image is copied to the parts of nodes in other processes.
using InitNamedPart = std::function<absl::Status(rdma::Node& node, rdma::RemotePtr part)>;

// Finds spec.name in `cluster`'s catalogue or creates it (see the top),
// through node `from`'s NIC (default: the cluster's self(); `from` must be
// hosted here).
absl::StatusOr<NamedParts> FindOrCreate(rdma::Cluster& cluster, const NamedSpec& spec, const InitNamedPart& init,
                                        std::optional<rdma::NodeId> from = std::nullopt);

// The catalogue's crash repair, in the process hosting node 0 (null
// elsewhere, or when no room is reserved): while the handle lives, a creator
// that dies holding the catalogue's lock has it released by node 0 once the
// cluster declares it dead (locks::RepairDeadHolder). What the dead creator
// left is already safe: its slot and range stay used and its entry, empty or
// torn, is skipped, so a later Open creates the name anew. Named structures
// hold one (PartDirectory::OpenNamed), so the lock is repaired in every
// process that uses names.
std::unique_ptr<rdma::Cluster::DeathWatch> WatchCatalogue(rdma::Cluster& cluster);

}  // namespace structures

#endif  // STRUCTURES_COMMON_CATALOGUE_H_
