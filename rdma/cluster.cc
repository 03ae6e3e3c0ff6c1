#include "rdma/cluster.h"

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rdma/cm/handshake.h"
#include "util/status_macros.h"

namespace rdma {
namespace {

// The reservation every node makes for named structures.
size_t NamedBytes(const ClusterOptions& o) {
  return o.named_bytes & ~size_t{63};
}

NodeOptions NodeOptionsOf(const ClusterOptions& o) {
  NodeOptions n = o.node;
  n.reserved_bytes = NamedBytes(o);
  return n;
}

// Every process must lay out its arena the same way: a named structure's
// part sits at one offset on every node, inside every node's reservation.
absl::Status CheckSameLayout(Bootstrap& boot, const NodeOptions& mine) {
  const std::string card = absl::StrCat(mine.arena_bytes, ",", mine.reserved_bytes);
  ASSIGN_OR_RETURN(std::vector<std::string> all, boot.AllGather(card));
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r] == card) continue;
    std::vector<std::string> theirs = absl::StrSplit(all[r], ',');
    return absl::FailedPreconditionError(absl::StrCat(
        "Cluster::Open: rank ", r, " has arena_bytes ", theirs.empty() ? "?" : theirs[0], " and named_bytes ",
        theirs.size() < 2 ? "?" : theirs[1], ", rank ", boot.rank(), " has ", mine.arena_bytes, " and ",
        mine.reserved_bytes, "; every process of a job must open the cluster with the same ClusterOptions"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Open(const ClusterOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> boot, Bootstrap::FromEnvironment(options.bootstrap));
  return Open(std::move(boot), options);
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Open(std::unique_ptr<Bootstrap> bootstrap,
                                                       const ClusterOptions& options) {
  if (bootstrap == nullptr) return absl::InvalidArgumentError("Cluster::Open: null bootstrap");
  std::unique_ptr<Cluster> c(new Cluster());
  c->bootstrap_ = std::move(bootstrap);
  const int size = c->bootstrap_->size();
  const NodeId rank = static_cast<NodeId>(c->bootstrap_->rank());
  FabricOptions fo = options.fabric;
  if (fo.kind == FabricKind::kAuto) {
    const char* env = std::getenv("RDMADS_FABRIC");
    if (env == nullptr || *env == '\0') {
      fo.kind = FabricKind::kVerbs;
    } else {
      absl::StatusOr<FabricKind> k = ParseFabricKind(env);
      if (!k.ok()) return util::Annotate(k.status(), "RDMADS_FABRIC");
      fo.kind = *k == FabricKind::kAuto ? FabricKind::kVerbs : *k;
    }
  }
  if (fo.kind == FabricKind::kSoft && size > 1) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Cluster::Open: the soft NIC connects nodes of one process only, and this job has ", size,
        " processes; use the verbs fabric (Soft-RoCE or a real NIC), or Cluster::Create for every node in one "
        "process"));
  }
  ASSIGN_OR_RETURN(c->fabric_, OpenFabric(fo));
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, c->fabric_->OpenDevice(rank));
  const NodeOptions no = NodeOptionsOf(options);
  ASSIGN_OR_RETURN(std::unique_ptr<Node> node, Node::Create(rank, std::move(device), no));
  c->num_nodes_ = size;
  c->nodes_.resize(static_cast<size_t>(size));
  c->nodes_[rank] = std::move(node);
  c->local_.push_back(c->nodes_[rank].get());
  std::string ensemble = options.coordinator;
  if (ensemble.empty()) {
    const char* env = std::getenv("RDMADS_COORDINATOR");
    if (env != nullptr) ensemble = env;
  }
  if (c->bootstrap_->rejoining()) {
    if (ensemble.empty() || size < 2) {
      return absl::FailedPreconditionError(
          "Cluster::Open: the bootstrap rejoins a running job, which needs the coordinator and another process");
    }
    RETURN_IF_ERROR(c->Rejoin(ensemble, options));
    return c;
  }
  RETURN_IF_ERROR(CheckSameLayout(*c->bootstrap_, no));
  if (size > 1) {
    ASSIGN_OR_RETURN(c->remote_, cm::CmConnector::Create(*c->nodes_[rank], *c->bootstrap_, options.connect));
  }
  if (!ensemble.empty()) RETURN_IF_ERROR(c->StartWithJob(ensemble, options));
  return c;
}

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Create(const ClusterOptions& options) {
  if (options.num_nodes < 1 || options.num_nodes > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("num_nodes must be in 1..1024, got ", options.num_nodes));
  }
  std::unique_ptr<Cluster> c(new Cluster());
  ASSIGN_OR_RETURN(c->fabric_, OpenFabric(options.fabric));
  const NodeOptions no = NodeOptionsOf(options);
  for (int i = 0; i < options.num_nodes; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<Device> dev, c->fabric_->OpenDevice(static_cast<NodeId>(i)));
    ASSIGN_OR_RETURN(std::unique_ptr<Node> node, Node::Create(static_cast<NodeId>(i), std::move(dev), no));
    c->local_.push_back(node.get());
    c->nodes_.push_back(std::move(node));
  }
  c->num_nodes_ = options.num_nodes;
  return c;
}

absl::Status Cluster::JoinMembership(const std::string& ensemble, const ClusterOptions& options,
                                     const std::string& card, uint64_t incarnation) {
  agreed_dead_ = std::make_unique<std::atomic<bool>[]>(static_cast<size_t>(num_nodes_));
  joined_epoch_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(num_nodes_));
  for (int n = 0; n < num_nodes_; ++n) {
    agreed_dead_[n].store(false, std::memory_order_relaxed);
    joined_epoch_[n].store(0, std::memory_order_relaxed);
  }
  agreed_why_.assign(static_cast<size_t>(num_nodes_), "");
  coord::MembershipOptions mo;
  mo.ensemble = ensemble;
  mo.job = bootstrap_->job();
  mo.size = static_cast<uint32_t>(num_nodes_);
  mo.rank = self();
  mo.incarnation = incarnation;
  mo.card = card;
  mo.session_timeout = options.coordinator_session;
  mo.join_timeout = options.bootstrap.timeout;
  mo.on_epoch = [this](const coord::Configuration& before, const coord::Configuration& after) {
    OnEpoch(before, after);
  };
  mo.on_fenced = [this](const absl::Status& why) { OnFenced(why); };
  absl::StatusOr<std::unique_ptr<coord::Membership>> m = coord::Membership::Join(std::move(mo));
  if (!m.ok()) return util::Annotate(m.status(), "Cluster::Open: joining the membership");
  membership_ = *std::move(m);
  const coord::Configuration cfg = membership_->current();
  start_epoch_.store(cfg.start, std::memory_order_release);
  if (!bootstrap_->rejoining()) {
    std::lock_guard<std::mutex> l(readmit_mu_);
    seen_epoch_ = cfg.epoch;
  }
  for (const coord::Member& mem : cfg.members) {
    if (mem.rank < static_cast<uint32_t>(num_nodes_)) joined_epoch_[mem.rank].store(mem.since, std::memory_order_release);
  }
  return absl::OkStatus();
}

absl::Status Cluster::StartWithJob(const std::string& ensemble, const ClusterOptions& options) {
  RETURN_IF_ERROR(JoinMembership(ensemble, options, remote_ != nullptr ? remote_->card() : "",
                                 remote_ != nullptr ? remote_->incarnation() : cm::NewIncarnation()));
  // The first epoch must hold the very processes that bootstrapped together.
  const coord::Configuration cfg = membership_->current();
  for (int n = 0; n < num_nodes_ && remote_ != nullptr; ++n) {
    const uint64_t inc = n == static_cast<int>(self()) ? remote_->incarnation() : remote_->incarnation_of(n);
    if (!cfg.Has(static_cast<uint32_t>(n), inc)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "Cluster::Open: the coordinator's ", cfg.ToString(), " does not hold rank ", n, " as the process this one ",
          "bootstrapped with (incarnation ", absl::Hex(inc), "): it was dropped before this process joined, or ",
          "another run of job '", bootstrap_->job(), "' holds the name"));
    }
  }
  if (remote_ != nullptr) ReportDetectedDeaths();
  return absl::OkStatus();
}

absl::Status Cluster::Rejoin(const std::string& ensemble, const ClusterOptions& options) {
  coord::Configuration adopted;
  // A card carries its arena's registered size, not the split into
  // arena_bytes and named_bytes: the total is what a rejoiner can check.
  const size_t my_arena = nodes_[self()]->arena_info().length;
  // Called by the connector once it listens, with this node's card: join,
  // wait to be admitted, and hand back every member's card.
  const auto admit = [&](const std::string& card) -> absl::StatusOr<std::vector<std::string>> {
    absl::StatusOr<cm::NodeCard> mine = cm::DecodeCard(card);
    if (!mine.ok()) return mine.status();
    RETURN_IF_ERROR(JoinMembership(ensemble, options, card, mine->incarnation));
    adopted = membership_->current();
    std::vector<std::string> cards(static_cast<size_t>(num_nodes_));
    for (const coord::Member& m : adopted.members) {
      if (m.rank >= static_cast<uint32_t>(num_nodes_) || m.rank == self()) continue;
      absl::StatusOr<cm::NodeCard> theirs = cm::DecodeCard(m.card);
      if (!theirs.ok()) return util::Annotate(theirs.status(), absl::StrCat("rank ", m.rank, "'s card"));
      if (theirs->arena.length != my_arena) {
        return absl::FailedPreconditionError(absl::StrCat(
            "Cluster::Open: rejoining, rank ", m.rank, "'s arena has ", theirs->arena.length, " bytes and this one ",
            my_arena, " (arena_bytes plus named_bytes): every process of a job must open the cluster with the same ",
            "ClusterOptions"));
      }
      cards[m.rank] = m.card;
    }
    return cards;
  };
  absl::StatusOr<std::unique_ptr<cm::CmConnector>> conn =
      cm::CmConnector::Rejoin(*nodes_[self()], bootstrap_->job(), num_nodes_, admit, options.connect);
  if (!conn.ok()) return util::Annotate(conn.status(), "Cluster::Open: rejoining the running job");
  {
    std::lock_guard<std::mutex> l(epoch_mu_);
    remote_ = *std::move(conn);
    for (int n = 0; n < num_nodes_; ++n) {
      if (n == static_cast<int>(self()) || adopted.Find(static_cast<uint32_t>(n)) != nullptr) continue;
      std::lock_guard<std::mutex> a(agreed_mu_);
      agreed_why_[n] = absl::StrCat("node ", n, " was not in the job when this process rejoined (", adopted.ToString(), ")");
      agreed_dead_[n].store(true, std::memory_order_release);
    }
  }
  // Epochs applied while this process connected found no connector yet.
  OnEpoch(adopted, membership_->current());
  ReportDetectedDeaths();
  return absl::OkStatus();
}

void Cluster::ReportDetectedDeaths() {
  coord::Membership* mem = membership_.get();
  cm::CmConnector* conn = remote_.get();
  remote_->SetDeathListener([mem, conn](NodeId n, const std::string& why) {
    mem->ReportDeathAsync(n, conn->incarnation_of(n), why);
  });
}

void Cluster::OnEpoch(const coord::Configuration& before, const coord::Configuration& after) {
  std::lock_guard<std::mutex> e(epoch_mu_);
  if (remote_ == nullptr) return;
  start_epoch_.store(after.start, std::memory_order_release);
  for (int n = 0; n < num_nodes_; ++n) {
    if (n == static_cast<int>(self()) || agreed_dead_[n].load(std::memory_order_acquire)) continue;
    const uint64_t inc = remote_->incarnation_of(static_cast<NodeId>(n));
    if (!before.Has(static_cast<uint32_t>(n), inc) || after.Has(static_cast<uint32_t>(n), inc)) continue;
    const std::string why =
        absl::StrCat("node ", n, " (incarnation ", absl::Hex(inc), ") was dropped in epoch ", after.epoch);
    // Fence first: once the node is declared, repairs may run, and nothing
    // of it may reach this process's memory by then.
    remote_->Fence(static_cast<NodeId>(n), why);
    {
      std::lock_guard<std::mutex> l(agreed_mu_);
      agreed_why_[n] = why;
    }
    agreed_dead_[n].store(true, std::memory_order_release);
  }
  // New processes of ranks this process fenced (a drop and an admission
  // may come in one epoch: the drop above runs first) are let in once the
  // repairs of their old processes ran here (ReadmitReady), never waited
  // for on this thread: the membership goes on meanwhile. A pending one
  // that this epoch no longer lists is forgotten.
  {
    std::lock_guard<std::mutex> l(readmit_mu_);
    for (auto it = pending_readmit_.begin(); it != pending_readmit_.end();) {
      it = after.Has(it->second.rank, it->second.incarnation) ? std::next(it) : pending_readmit_.erase(it);
    }
    for (const coord::Member& m : after.members) {
      if (m.rank >= static_cast<uint32_t>(num_nodes_) || m.rank == self()) continue;
      if (m.incarnation != remote_->incarnation_of(static_cast<NodeId>(m.rank))) pending_readmit_[m.rank] = m;
    }
    seen_epoch_ = after.epoch;
  }
  std::unique_lock<std::mutex> r(repair_mu_, std::try_to_lock);
  // Else the recovery thread holds it, and readmits after its repairs.
  if (r.owns_lock()) ReadmitReady();
}

void Cluster::ReadmitReady() {
  // repair_mu_ held: no repair starts while a node flips back to alive.
  std::lock_guard<std::mutex> l(readmit_mu_);
  for (auto it = pending_readmit_.begin(); it != pending_readmit_.end();) {
    const coord::Member& m = it->second;
    const auto n = static_cast<NodeId>(m.rank);
    // Every watch told of the old process's death, so its repairs ran: a
    // repair that ran after the new process came in could take a lock its
    // clients hold (their tokens name the same node).
    bool told = !Declared(n).ok();
    {
      std::lock_guard<std::mutex> w(watch_mu_);
      for (const Watcher& x : watchers_) told = told && x.told[n];
    }
    if (!told) {
      ++it;
      continue;
    }
    // Its epoch first: a session that reaches the new process is made only
    // after the connector readmits it, and by then JoinedEpoch tells which
    // structures' parts it lost (structures/common/parts.h).
    joined_epoch_[n].store(m.since, std::memory_order_release);
    if (absl::Status st = remote_->Readmit(n, m.card); !st.ok()) {
      // It stays dead here; its own Open fails connecting to this process.
      std::fprintf(stderr, "rdmads: node %d does not readmit node %d: %s\n", static_cast<int>(self()),
                   static_cast<int>(n), st.ToString().c_str());
      it = pending_readmit_.erase(it);
      continue;
    }
    {
      std::lock_guard<std::mutex> a(agreed_mu_);
      agreed_why_[n].clear();
    }
    agreed_dead_[n].store(false, std::memory_order_release);
    {
      std::lock_guard<std::mutex> w(watch_mu_);
      for (Watcher& x : watchers_) x.told[n] = false;  // its next death is repaired too
    }
    it = pending_readmit_.erase(it);
  }
}

void Cluster::OnFenced(const absl::Status& why) {
  std::fprintf(stderr, "rdmads: node %d stops serving: %s\n", static_cast<int>(self()), std::string(why.message()).c_str());
  for (Node* n : local_) n->Shutdown();
}

uint64_t Cluster::Incarnation(NodeId node) const {
  if (remote_ == nullptr || node >= static_cast<NodeId>(num_nodes_) || is_local(node)) return 0;
  return remote_->incarnation_of(node);
}

uint64_t Cluster::epoch() const {
  std::lock_guard<std::mutex> l(readmit_mu_);
  uint64_t e = seen_epoch_;
  for (const auto& [rank, m] : pending_readmit_) e = std::min(e, m.since - 1);
  return e;
}

uint64_t Cluster::JoinedEpoch(NodeId node) const {
  if (joined_epoch_ == nullptr || node >= static_cast<NodeId>(num_nodes_)) return 0;
  return joined_epoch_[node].load(std::memory_order_acquire);
}

bool Cluster::Restarted(NodeId node) const {
  return membership_ != nullptr && JoinedEpoch(node) > start_epoch_.load(std::memory_order_acquire);
}

absl::Status Cluster::ServingStatus() const {
  return membership_ != nullptr ? membership_->Serving() : absl::OkStatus();
}

Cluster::~Cluster() {
  {
    std::lock_guard<std::mutex> l(watch_mu_);
    stopping_ = true;
  }
  watch_cv_.notify_all();
  if (recovery_.joinable()) recovery_.join();  // it asks the membership
  // The connector's death listener reports to the membership: unhook it
  // before the membership goes.
  if (remote_ != nullptr) remote_->SetDeathListener(nullptr);
  membership_.reset();
  remote_.reset();
  local_.clear();
  nodes_.clear();
  fabric_.reset();
  bootstrap_.reset();
}

absl::Status Cluster::Barrier() { return bootstrap_ ? bootstrap_->Barrier() : absl::OkStatus(); }

absl::StatusOr<std::unique_ptr<Session>> Cluster::ThisThread(const SessionOptions& options) {
  return ThisThread(self(), options);
}

absl::StatusOr<std::unique_ptr<Session>> Cluster::ThisThread(NodeId node, const SessionOptions& options) {
  RETURN_IF_ERROR(CheckRange(node));
  if (!is_local(node)) {
    return absl::InvalidArgumentError(
        absl::StrCat("node ", node, " is hosted by another process; a thread here lives on node ", self()));
  }
  return Session::Create(*nodes_[node], *this, options);
}

absl::Status Cluster::CheckRange(NodeId node) const {
  if (node >= static_cast<NodeId>(num_nodes_)) {
    return absl::InvalidArgumentError(absl::StrCat("node ", node, " out of range (", num_nodes_, " nodes)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<QpEndpoint> Cluster::Connect(NodeId target, const QpEndpoint& initiator) {
  RETURN_IF_ERROR(CheckRange(target));
  if (is_local(target)) return nodes_[target]->AcceptConnection(initiator);
  return remote_->Connect(target, initiator);
}

absl::Status Cluster::Disconnect(NodeId target, const QpEndpoint& responder) {
  RETURN_IF_ERROR(CheckRange(target));
  if (is_local(target)) return nodes_[target]->ReleaseConnection(responder.qp_num);
  return remote_->Disconnect(target, responder);
}

absl::StatusOr<ArenaInfo> Cluster::Arena(NodeId node) const {
  RETURN_IF_ERROR(CheckRange(node));
  if (is_local(node)) return nodes_[node]->arena_info();
  return remote_->Arena(node);
}

absl::Status Cluster::Declared(NodeId node) const {
  if (membership_ == nullptr || is_local(node)) return PeerStatus(node);
  if (!agreed_dead_[node].load(std::memory_order_acquire)) return absl::OkStatus();
  // Dropped, and fenced here too: whatever the order they were set in, no
  // repair runs for a node whose work requests may still reach this memory.
  if (remote_ != nullptr && remote_->PeerStatus(node).ok()) return absl::OkStatus();
  std::lock_guard<std::mutex> l(agreed_mu_);
  return absl::UnavailableError(agreed_why_[node]);
}

absl::Status Cluster::PeerStatus(NodeId node) const {
  if (node >= static_cast<NodeId>(num_nodes_)) return absl::OkStatus();
  if (membership_ != nullptr) {
    if (membership_->fenced()) return membership_->Serving();
    if (!is_local(node)) {
      // Agreed dead, or fenced here already while the agreement is pending
      // (or waits for a coordinator that is down): either way unreachable.
      if (absl::Status agreed = Declared(node); !agreed.ok()) return agreed;
      return remote_ != nullptr ? remote_->PeerStatus(node) : absl::OkStatus();
    }
  }
  if (is_local(node)) {
    if (!nodes_[node]->device().is_dead()) return absl::OkStatus();
    return absl::UnavailableError(absl::StrCat("node ", node, " is gone: its NIC died"));
  }
  if (remote_ == nullptr) return absl::OkStatus();
  return remote_->PeerStatus(node);
}

std::unique_ptr<Cluster::DeathWatch> Cluster::WatchDeaths(std::function<void(NodeId)> repair) {
  std::lock_guard<std::mutex> l(watch_mu_);
  watchers_.push_back(Watcher{std::move(repair), std::vector<bool>(static_cast<size_t>(num_nodes_), false)});
  if (!recovery_.joinable()) recovery_ = std::thread([this] { RecoveryLoop(); });
  new_watch_ = true;
  watch_cv_.notify_all();
  return std::unique_ptr<DeathWatch>(new DeathWatch(this, &watchers_.back()));
}

void Cluster::Unwatch(Watcher* w) {
  std::lock_guard<std::mutex> r(repair_mu_);  // no repair of w is running
  std::lock_guard<std::mutex> l(watch_mu_);
  watchers_.remove_if([w](const Watcher& x) { return &x == w; });
}

void Cluster::RecoveryLoop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> l(watch_mu_);
      watch_cv_.wait_for(l, kDeathPoll, [this] { return stopping_ || new_watch_; });
      if (stopping_) return;
      new_watch_ = false;
    }
    // Repairs follow declarations only: the agreed epochs with a
    // coordinator (never while this process is fenced), else PeerStatus.
    if (membership_ != nullptr && membership_->fenced()) continue;
    // repair_mu_ before watch_mu_, as Unwatch takes them; watch_mu_ is let go
    // while a repair runs (it may take time and post work requests). Held
    // from the declarations on, so no readmission flips a node meanwhile;
    // the readmissions whose repairs are done follow.
    std::lock_guard<std::mutex> r(repair_mu_);
    RunRepairs();
    if (membership_ != nullptr) ReadmitReady();
  }
}

void Cluster::RunRepairs() {
  // repair_mu_ held.
  std::vector<NodeId> dead;
  for (int n = 0; n < num_nodes_; ++n) {
    if (!Declared(static_cast<NodeId>(n)).ok()) dead.push_back(static_cast<NodeId>(n));
  }
  if (dead.empty()) return;
  for (;;) {
    std::function<void(NodeId)>* fn = nullptr;
    NodeId which = 0;
    {
      std::lock_guard<std::mutex> l(watch_mu_);
      for (Watcher& w : watchers_) {
        for (NodeId d : dead) {
          if (w.told[d]) continue;
          w.told[d] = true;
          fn = &w.repair;
          which = d;
          break;
        }
        if (fn != nullptr) break;
      }
    }
    if (fn == nullptr) break;
    (*fn)(which);
  }
}

void Cluster::ReportUnreachable(NodeId node, const absl::Status& why) {
  if (remote_ != nullptr && !is_local(node)) remote_->ReportUnreachable(node, why);
}

}  // namespace rdma
