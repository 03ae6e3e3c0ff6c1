#ifndef STRUCTURES_COMMON_PARTS_H_
#define STRUCTURES_COMMON_PARTS_H_

// The per-node part directory every distributed structure has: where each
// node's part lives, which of those nodes are in this process, and the
// lifecycle of the parts this process allocated (docs/design.md §9).
//
// A structure's memory is one "part" per node, each in its node's registered
// arena. A process creates the parts of the nodes it hosts (all of them for an
// in-process rdma::Cluster, its own one in a multi-process service), at the
// same point of every node's deterministic allocation sequence, so a part sits
// at the same arena offset on every node; the parts of nodes in other
// processes are found from that offset and the arena bases a Session learned
// from its Connector (Resolve). Zero-filled memory is a valid empty part for
// every structure here, so peers may use a part before its owner created it.
//
// Ownership: the directory frees the parts it allocated when destroyed. It is
// move-only. It must be destroyed before its nodes, and after every client
// that uses its parts has stopped.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <typeinfo>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/node.h"
#include "rdma/remote_ptr.h"
#include "rdma/session.h"
#include "structures/common/catalogue.h"

namespace structures {
namespace internal_parts {
// ShareInProcess's registry (parts.cc).
std::mutex& SharedStateMutex();
std::weak_ptr<void>& SharedStateSlot(const std::type_info& type, const void* node, uint64_t offset);
}  // namespace internal_parts

// Where a part keeps its ALock lines: `count` lines `stride` bytes apart,
// the first `offset` bytes into the part; and what the home does with such
// a lock taken over from node `dead`, to make what that holder left whole
// (null: nothing to do; locks::RepairDeadHolder says what a fix may touch).
struct LockLines {
  uint64_t offset = 0;
  uint64_t stride = 64;
  uint64_t count = 1;
  std::function<absl::Status(rdma::RemotePtr lock, rdma::NodeId dead)> fix;
};

class PartDirectory {
 public:
  // Called once per newly allocated (zero-filled) part, before Create returns,
  // to initialize it with CPU stores (e.g. non-default lock budgets).
  using InitPart = std::function<absl::Status(rdma::Node& node, rdma::RemotePtr part)>;

  PartDirectory() = default;
  PartDirectory(PartDirectory&& other) noexcept { *this = std::move(other); }
  PartDirectory& operator=(PartDirectory&& other) noexcept;
  PartDirectory(const PartDirectory&) = delete;
  PartDirectory& operator=(const PartDirectory&) = delete;
  ~PartDirectory() { FreeAll(); }

  // Allocates a part of `part_bytes` (64-aligned) on each of `local_nodes`
  // (the nodes this process hosts; ids < num_nodes, distinct) and runs `init`
  // on it. `what` names the structure in error messages. Errors:
  // InvalidArgument (num_nodes outside 1..65536, no or repeated local nodes,
  // a node id out of range), FailedPrecondition (a node is shut down; the
  // local parts landed at different arena offsets, so remote processes could
  // not find them), ResourceExhausted (an arena is full, naming its size).
  // On error nothing stays allocated.
  static absl::StatusOr<PartDirectory> Create(absl::string_view what, int num_nodes,
                                              absl::Span<rdma::Node* const> local_nodes, size_t part_bytes,
                                              const InitPart& init = nullptr);

  // The parts of the structure spec.name in `cluster`'s catalogue
  // (structures/common/catalogue.h), created (every node's part, `init` run
  // on each) when absent. This directory does not free them: named parts
  // last as long as the cluster. Errors: FindOrCreate's.
  static absl::StatusOr<PartDirectory> OpenNamed(rdma::Cluster& cluster, const NamedSpec& spec,
                                                 const InitPart& init = nullptr);

  absl::string_view what() const { return what_; }
  // True for a named structure's parts (OpenNamed), which others share.
  bool named() const { return !owned_; }
  // The parts' arena offset, the same on every node.
  uint64_t part_offset() const { return part_offset_; }
  int num_nodes() const { return num_nodes_; }
  size_t part_bytes() const { return part_bytes_; }
  // Node n's part when this process created it, else null (another
  // process's part: see Resolve).
  rdma::RemotePtr local_base(rdma::NodeId n) const { return n < bases_.size() ? bases_[n] : rdma::RemotePtr(); }
  // Node n when this process hosts it, else null.
  rdma::Node* local_node(rdma::NodeId n) const { return n < nodes_.size() ? nodes_[n] : nullptr; }

  // Why node n's part is lost ("" while it is not): a named structure's
  // part on a node whose process joined after the structure was made
  // (rdma::Cluster::JoinedEpoch, read at each call).
  std::string lost(rdma::NodeId n) const;

  // Every node's part base as a client with `session` (may be null: then only
  // this process's parts) sees it; null for a part it cannot reach or that
  // is lost, and then `unreachable` (if given; one per node) says why:
  // DataLoss for a lost part, Unavailable for a node this process never
  // knew (not in the job when it rejoined); OK elsewhere.
  // FailedPrecondition when a node's arena (as the session knows it) cannot
  // hold the part at the shared offset.
  absl::StatusOr<std::vector<rdma::RemotePtr>> Resolve(const rdma::Session* session,
                                                       std::vector<absl::Status>* unreachable = nullptr) const;

  // Crash repair of the parts this process hosts (docs/design.md §9.1,
  // "Crash repair"): while this directory lives, once `cluster` declares a
  // node dead, every ALock of `locks` in every local part whose NIC side a
  // client of that node held is taken over, fixed (LockLines::fix) and
  // released (locks::RepairDeadHolder), on the cluster's recovery thread. A
  // repair that fails is reported on stderr.
  void RepairLocksOnDeath(rdma::Cluster& cluster, std::vector<LockLines> locks);

 private:
  void FreeAll();

  std::string what_;
  int num_nodes_ = 0;
  size_t part_bytes_ = 0;
  uint64_t part_offset_ = 0;            // the parts' arena offset on every node
  std::vector<rdma::RemotePtr> bases_;  // per node; null = not created by this process
  std::vector<rdma::Node*> nodes_;      // per node when in this process, else null
  // Named parts: the cluster (for JoinedEpoch) and the structure's epoch.
  const rdma::Cluster* cluster_ = nullptr;
  uint64_t epoch_ = 0;
  bool owned_ = true;                   // false for named parts, which are never freed
  // Named parts: the catalogue's crash repair (WatchCatalogue) while in use.
  std::unique_ptr<rdma::Cluster::DeathWatch> catalogue_watch_;
  // The local parts' lock repair (RepairLocksOnDeath), ended before the
  // parts are freed.
  std::unique_ptr<rdma::Cluster::DeathWatch> lock_watch_;
};

// Where a structure's parts come from: fresh parts on the nodes this process
// hosts (a structure's Create), or a named structure's (its Open). A
// structure writes its checks once, over a PartSource.
class PartSource {
 public:
  // Fresh parts are repaired after a death only when `peers` is an
  // rdma::Cluster (which watches for deaths).
  static PartSource Fresh(rdma::Connector& peers, absl::Span<rdma::Node* const> local_nodes) {
    PartSource p(peers.num_nodes(), local_nodes, nullptr, "", StructureKind::kHashMap, 0);
    p.repair_cluster_ = dynamic_cast<rdma::Cluster*>(&peers);
    return p;
  }
  static PartSource Named(rdma::Cluster& cluster, absl::string_view name, StructureKind kind, uint32_t value_bytes) {
    PartSource p(cluster.num_nodes(), cluster.local_nodes(), &cluster, name, kind, value_bytes);
    p.repair_cluster_ = &cluster;
    return p;
  }

  int num_nodes() const { return num_nodes_; }
  absl::Span<rdma::Node* const> local_nodes() const { return local_nodes_; }
  // The parts: `options` is the text of the options that shape the layout
  // (compared with an existing named structure's; unused for fresh parts);
  // `locks`, the part's ALock lines, repaired after a death
  // (PartDirectory::RepairLocksOnDeath).
  absl::StatusOr<PartDirectory> Make(absl::string_view what, absl::string_view options, size_t part_bytes,
                                     const PartDirectory::InitPart& init, std::vector<LockLines> locks) const;

 private:
  PartSource(int num_nodes, absl::Span<rdma::Node* const> local_nodes, rdma::Cluster* cluster,
             absl::string_view name, StructureKind kind, uint32_t value_bytes)
      : num_nodes_(num_nodes), local_nodes_(local_nodes), cluster_(cluster), name_(name), kind_(kind),
        value_bytes_(value_bytes) {}

  int num_nodes_;
  absl::Span<rdma::Node* const> local_nodes_;
  rdma::Cluster* cluster_;  // null: fresh parts
  rdma::Cluster* repair_cluster_ = nullptr;  // who reports deaths; null: nobody
  std::string name_;
  StructureKind kind_;
  uint32_t value_bytes_;
};

// One crash repair, on the cluster's recovery thread: every lock of `kind`
// among `locks` in the part at `part` (on a node hosted here) whose NIC side
// a client of `dead` held is taken over, fixed and released
// (locks::RepairDeadHolder), through a Session of its own on the part's node
// (retried for up to 5 s while a connect fails: a node that is dying but not
// yet declared dead fails a new session's connect until it is). Every lock
// is tried whatever another's repair did; failures are reported on stderr,
// naming `what`, since nobody waits for a repair's outcome.
void RepairLocksOf(rdma::Cluster& cluster, rdma::RemotePtr part, locks::LockKind kind,
                   const std::vector<LockLines>& locks, rdma::NodeId dead, absl::string_view what);

// Per-process state of a structure's local parts that every object of one
// named structure in this process must share (the queue's native leases:
// one per ring side, structures/queue/native_lease.h). For named parts, the live state of
// the same name made earlier in this process, else `make()`'s, kept while
// any object holds it; for unnamed parts, `make()`'s. `make` returns
// absl::StatusOr<std::shared_ptr<T>>.
template <typename T, typename Make>
absl::StatusOr<std::shared_ptr<T>> ShareInProcess(const PartDirectory& parts, Make make) {
  if (!parts.named()) return make();
  const void* node = nullptr;  // the first local node tells one cluster from another
  for (int n = 0; n < parts.num_nodes() && node == nullptr; ++n) node = parts.local_node(static_cast<rdma::NodeId>(n));
  std::lock_guard<std::mutex> l(internal_parts::SharedStateMutex());
  std::weak_ptr<void>& slot = internal_parts::SharedStateSlot(typeid(T), node, parts.part_offset());
  if (std::shared_ptr<void> live = slot.lock()) return std::static_pointer_cast<T>(live);
  absl::StatusOr<std::shared_ptr<T>> made = make();
  if (made.ok()) slot = *made;
  return made;
}

// What every structure whose parts hold ALocks checks at creation:
// `budgets` in 1..locks::kMaxBudget (InvalidArgument, naming `what`), and
// every one of `local_nodes` has RDMA atomics (FailedPrecondition), since
// remote clients take the locks with NIC atomics: refused now, not on the
// first remote operation. Null nodes are skipped (PartDirectory reports them).
absl::Status CheckALockParts(absl::string_view what, absl::Span<rdma::Node* const> local_nodes,
                             const locks::Budgets& budgets);
// True when `budgets` are ALock's defaults, which a zero-filled lock line
// already has; other budgets need locks::InitLock on every line.
bool DefaultBudgets(const locks::Budgets& budgets);

// Every node of an in-process cluster, for a structure's Create(cluster, ...).
std::vector<rdma::Node*> AllNodes(rdma::Cluster& cluster);

// A structure's Create over every node of an in-process cluster, from its
// Create(connector, local_nodes, options). A structure derives from it and
// says `using CreateOnCluster<S, Options>::Create;` beside its own Create.
template <typename S, typename Options>
struct CreateOnCluster {
  static absl::StatusOr<S> Create(rdma::Cluster& cluster, const Options& options) {
    return S::Create(cluster, AllNodes(cluster), options);
  }
};

}  // namespace structures

#endif  // STRUCTURES_COMMON_PARTS_H_
