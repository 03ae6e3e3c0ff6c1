#include "structures/common/parts.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <thread>
#include <typeindex>
#include <utility>

namespace structures {
namespace internal_parts {

std::mutex& SharedStateMutex() {
  static std::mutex mu;
  return mu;
}

std::weak_ptr<void>& SharedStateSlot(const std::type_info& type, const void* node, uint64_t offset) {
  using Key = std::tuple<std::type_index, const void*, uint64_t>;
  static auto* slots = new std::map<Key, std::weak_ptr<void>>();  // never destroyed: used until exit
  return (*slots)[Key(std::type_index(type), node, offset)];
}

}  // namespace internal_parts

PartDirectory& PartDirectory::operator=(PartDirectory&& other) noexcept {
  if (this != &other) {
    FreeAll();
    what_ = std::move(other.what_);
    num_nodes_ = std::exchange(other.num_nodes_, 0);
    part_bytes_ = std::exchange(other.part_bytes_, 0);
    part_offset_ = std::exchange(other.part_offset_, 0);
    bases_ = std::move(other.bases_);
    nodes_ = std::move(other.nodes_);
    cluster_ = std::exchange(other.cluster_, nullptr);
    epoch_ = other.epoch_;
    owned_ = other.owned_;
    catalogue_watch_ = std::move(other.catalogue_watch_);
    lock_watch_ = std::move(other.lock_watch_);
    other.bases_.clear();
    other.nodes_.clear();
  }
  return *this;
}

void PartDirectory::FreeAll() {
  lock_watch_.reset();  // no repair runs on memory about to be freed
  if (!owned_) return;
  for (size_t n = 0; n < bases_.size(); ++n) {
    if (nodes_[n] != nullptr && !bases_[n].is_null()) nodes_[n]->Free(bases_[n], part_bytes_);
    bases_[n] = rdma::RemotePtr();
  }
}

absl::StatusOr<PartDirectory> PartDirectory::Create(absl::string_view what, int num_nodes,
                                                    absl::Span<rdma::Node* const> local_nodes, size_t part_bytes,
                                                    const InitPart& init) {
  if (num_nodes < 1 || num_nodes > 65536) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": num_nodes ", num_nodes, " out of range 1..65536"));
  }
  if (local_nodes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no local node to create a part on"));
  }
  PartDirectory d;
  d.what_ = std::string(what);
  d.num_nodes_ = num_nodes;
  d.part_bytes_ = part_bytes;
  d.bases_.assign(static_cast<size_t>(num_nodes), rdma::RemotePtr());
  d.nodes_.assign(static_cast<size_t>(num_nodes), nullptr);
  for (rdma::Node* node : local_nodes) {
    if (node == nullptr) return absl::InvalidArgumentError(absl::StrCat(what, ": null node"));
    if (node->id() >= num_nodes) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": node id ", node->id(), " out of range for ", num_nodes, " nodes"));
    }
    if (d.nodes_[node->id()] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": node ", node->id(), " given twice"));
    }
    if (node->is_shut_down()) {
      return absl::FailedPreconditionError(absl::StrCat(what, ": node ", node->id(), " is shut down"));
    }
    absl::StatusOr<rdma::RemotePtr> base = node->Allocate(part_bytes, 64);
    if (!base.ok()) {
      return absl::Status(base.status().code(), absl::StrCat(what, ": node ", node->id(), "'s part (", part_bytes,
                                                             " bytes): ", base.status().message()));
    }
    d.nodes_[node->id()] = node;
    d.bases_[node->id()] = *base;  // owned from here: freed by ~PartDirectory on any error below
    const uint64_t offset = node->OffsetOf(*base);
    if (node == local_nodes.front()) {
      d.part_offset_ = offset;
    } else if (offset != d.part_offset_ && static_cast<int>(local_nodes.size()) < num_nodes) {
      // With every node in this process the offsets need not agree; otherwise
      // other processes find the parts they do not host at the shared offset.
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": node ", node->id(), "'s part is at arena offset ", offset, " but node ",
                       local_nodes.front()->id(), "'s at ", d.part_offset_,
                       "; create parts at the same point of every node's allocation sequence"));
    }
    if (init) {
      if (absl::Status s = init(*node, *base); !s.ok()) return s;
    }
  }
  return d;
}

absl::StatusOr<PartDirectory> PartDirectory::OpenNamed(rdma::Cluster& cluster, const NamedSpec& spec,
                                                       const InitPart& init) {
  // First, so that a creator that died holding the catalogue's lock is
  // repaired while this call waits for it.
  std::unique_ptr<rdma::Cluster::DeathWatch> watch = WatchCatalogue(cluster);
  absl::StatusOr<NamedParts> found = FindOrCreate(cluster, spec, init);
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        absl::StrCat(StructureKindName(spec.kind), " \"", spec.name, "\": ", found.status().message()));
  }
  PartDirectory d;
  d.what_ = spec.name;
  d.num_nodes_ = cluster.num_nodes();
  d.part_bytes_ = spec.part_bytes;
  d.part_offset_ = found->offset;
  d.owned_ = false;
  d.catalogue_watch_ = std::move(watch);
  d.bases_.assign(static_cast<size_t>(d.num_nodes_), rdma::RemotePtr());
  d.nodes_.assign(static_cast<size_t>(d.num_nodes_), nullptr);
  d.cluster_ = &cluster;
  d.epoch_ = found->epoch;
  for (rdma::Node* node : cluster.local_nodes()) {
    d.nodes_[node->id()] = node;
    if (!d.lost(node->id()).empty()) continue;
    d.bases_[node->id()] = rdma::RemotePtr(node->id(), node->arena_info().base + found->offset);
  }
  return d;
}

absl::StatusOr<PartDirectory> PartSource::Make(absl::string_view what, absl::string_view options, size_t part_bytes,
                                               const PartDirectory::InitPart& init, std::vector<LockLines> locks) const {
  absl::StatusOr<PartDirectory> parts;
  if (cluster_ == nullptr) {
    parts = PartDirectory::Create(what, num_nodes_, local_nodes_, part_bytes, init);
  } else {
    NamedSpec spec;
    spec.name = name_;
    spec.kind = kind_;
    spec.value_bytes = value_bytes_;
    spec.options = std::string(options);
    spec.part_bytes = part_bytes;
    parts = PartDirectory::OpenNamed(*cluster_, spec, init);
  }
  if (parts.ok() && repair_cluster_ != nullptr) parts->RepairLocksOnDeath(*repair_cluster_, std::move(locks));
  return parts;
}

namespace {

// A session connects to every node; one that is dying but not yet declared
// dead fails the connect. Retry until the declaration catches up.
absl::StatusOr<std::unique_ptr<rdma::Session>> RepairSession(rdma::Cluster& cluster, rdma::NodeId node) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    absl::StatusOr<std::unique_ptr<rdma::Session>> s = cluster.ThisThread(node);
    if (s.ok() || std::chrono::steady_clock::now() > until) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

void RepairLocksOf(rdma::Cluster& cluster, rdma::RemotePtr part, locks::LockKind kind,
                   const std::vector<LockLines>& locks, rdma::NodeId dead, absl::string_view what) {
  // The home's own loopback QP does the CASes (a NIC word is the NIC's).
  absl::StatusOr<std::unique_ptr<rdma::Session>> s = RepairSession(cluster, part.node());
  absl::Status failed = s.status();
  uint64_t failures = s.ok() ? 0 : 1;
  for (const LockLines& l : locks) {
    for (uint64_t i = 0; s.ok() && i < l.count; ++i) {  // every lock, whatever another's repair did
      const rdma::RemotePtr lock = part + l.offset + i * l.stride;
      absl::StatusOr<bool> r = locks::RepairDeadHolder(
          kind, **s, lock, dead, l.fix ? [&l, lock, dead] { return l.fix(lock, dead); } : std::function<absl::Status()>());
      if (!r.ok()) {
        if (failed.ok()) failed = r.status();
        ++failures;
      }
    }
  }
  if (!failed.ok()) {
    std::fprintf(stderr, "rdmads: %s: node %d could not repair %llu of the locks node %d held; the first: %s\n",
                 std::string(what).c_str(), static_cast<int>(part.node()), static_cast<unsigned long long>(failures),
                 static_cast<int>(dead), failed.ToString().c_str());
  }
}

void PartDirectory::RepairLocksOnDeath(rdma::Cluster& cluster, std::vector<LockLines> locks) {
  std::vector<rdma::RemotePtr> parts;  // this process's parts
  for (rdma::RemotePtr b : bases_) {
    if (!b.is_null()) parts.push_back(b);
  }
  lock_watch_.reset();
  if (parts.empty() || locks.empty()) return;
  rdma::Cluster* c = &cluster;
  const std::string what = what_;
  lock_watch_ = cluster.WatchDeaths([c, parts, locks, what](rdma::NodeId dead) {
    for (rdma::RemotePtr part : parts) {
      // A dead node's own part is gone with it (in process: its NIC is).
      if (c->PeerStatus(part.node()).ok()) RepairLocksOf(*c, part, locks::LockKind::kALock, locks, dead, what);
    }
  });
}

std::string PartDirectory::lost(rdma::NodeId n) const {
  if (cluster_ == nullptr) return "";
  const uint64_t joined = cluster_->JoinedEpoch(n);
  if (joined <= epoch_) return "";
  return absl::StrCat("node ", n, "'s part of \"", what_, "\" is lost: the node's process joined in epoch ", joined,
                      ", after the structure was made in epoch ", epoch_,
                      ", with empty memory (without replication a restarted node's parts stay gone)");
}

absl::StatusOr<std::vector<rdma::RemotePtr>> PartDirectory::Resolve(const rdma::Session* session,
                                                                    std::vector<absl::Status>* unreachable) const {
  std::vector<rdma::RemotePtr> bases = bases_;
  if (unreachable != nullptr) unreachable->assign(static_cast<size_t>(num_nodes_), absl::OkStatus());
  for (int n = 0; n < num_nodes_; ++n) {
    const auto id = static_cast<rdma::NodeId>(n);
    // Asked now, not when the directory was opened: a node may have rejoined
    // since, and `session` may reach its new process.
    if (std::string why = lost(id); !why.empty()) {
      bases[n] = rdma::RemotePtr();
      if (unreachable != nullptr) (*unreachable)[n] = absl::DataLossError(why);
      continue;
    }
    if (!bases[n].is_null() || session == nullptr) continue;
    const rdma::ArenaInfo& a = session->arena(id);
    if (a.length == 0) {
      // No card for it: it was not in the job when this process joined.
      if (unreachable != nullptr) {
        (*unreachable)[n] = absl::UnavailableError(absl::StrCat("node ", n, " was not in the job when this process "
                                                                "joined (its session has no arena for it)"));
      }
      continue;
    }
    if (part_offset_ + part_bytes_ > a.length) {
      return absl::FailedPreconditionError(absl::StrCat(what_, ": node ", n, "'s arena (", a.length,
                                                        " bytes) cannot hold the part at offset ", part_offset_));
    }
    bases[n] = rdma::RemotePtr(static_cast<rdma::NodeId>(n), a.base + part_offset_);
  }
  return bases;
}

absl::Status CheckALockParts(absl::string_view what, absl::Span<rdma::Node* const> local_nodes,
                             const locks::Budgets& budgets) {
  if (budgets.local < 1 || budgets.local > locks::kMaxBudget || budgets.remote < 1 ||
      budgets.remote > locks::kMaxBudget) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ALock budgets must be in 1..", locks::kMaxBudget));
  }
  for (rdma::Node* node : local_nodes) {
    if (node == nullptr) continue;
    if (absl::Status s = locks::RequireNicAtomics(*node, locks::LockKind::kALock, what); !s.ok()) return s;
  }
  return absl::OkStatus();
}

bool DefaultBudgets(const locks::Budgets& budgets) {
  const locks::Budgets defaults;
  return budgets.local == defaults.local && budgets.remote == defaults.remote;
}

std::vector<rdma::Node*> AllNodes(rdma::Cluster& cluster) {
  std::vector<rdma::Node*> nodes;
  for (int n = 0; n < cluster.num_nodes(); ++n) nodes.push_back(&cluster.node(static_cast<rdma::NodeId>(n)));
  return nodes;
}

}  // namespace structures
