#ifndef RDMA_CLUSTER_H_
#define RDMA_CLUSTER_H_

// Cluster: the one object a program opens to use rdmads. It owns, in the
// right order, the bootstrap, the fabric and device, this process's node(s)
// and the connector that reaches the others (docs/design.md §5).
//
//   // A service, one node per process, launched by mpirun, srun or through the coordinator:
//   ASSIGN_OR_RETURN(std::unique_ptr<rdma::Cluster> cluster, rdma::Cluster::Open());
//   ASSIGN_OR_RETURN(std::unique_ptr<rdma::Session> thread, cluster->ThisThread());
//
//   // Tests, benchmarks, a quick look: every node in this process.
//   ASSIGN_OR_RETURN(auto cluster, rdma::Cluster::Create({.num_nodes = 3}));
//   ASSIGN_OR_RETURN(auto thread, cluster->ThisThread(/*node=*/1));
//
// Open reads the job from the environment (rdma/bootstrap.h: PMIx under
// mpirun or srun, else the coordinator's rendezvous, else one process), opens the verbs
// device (FabricKind::kAuto means RDMADS_FABRIC if set, else verbs; the soft
// NIC only when asked, and only for a one-process job), creates node rank() and connects it to
// every other node with rdma_cm (rdma/cm/cm_connector.h). Create puts every
// node in this process on one fabric with an in-process connector. Both give the same type; structures take it.
//
// Every node registers ClusterOptions::named_bytes at arena offset 0 for
// named structures (structures/common/catalogue.h); Open refuses a job
// whose processes disagree on the arena or that reservation.
//
// With a coordinator (ClusterOptions::coordinator or RDMADS_COORDINATOR, a
// ZooKeeper ensemble), Open also joins the job's membership
// (rdma/coord/membership.h): deaths are agreed, epoch by epoch, and
// PeerStatus, WatchDeaths and the repairs follow the agreed epochs; a process
// that is dropped (its session expired, a peer reported it, it was paused
// too long) is fenced: its node shuts down, so native paths and new sessions
// return Unavailable, and its sessions post nothing more (ServingStatus).
// Without one, each process decides deaths on its own (docs/design.md §5).
// A restarted process rejoins a running job through Open (see rejoined()).
//
// Contract: thread-safe. A thread's Session (ThisThread) is that thread's
// handle on the cluster; destroy every Session, structure and client before
// the Cluster. The Cluster is the Connector its sessions use.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "rdma/bootstrap.h"
#include "rdma/cm/cm_connector.h"
#include "rdma/coord/membership.h"
#include "rdma/fabric.h"
#include "rdma/node.h"
#include "rdma/session.h"

namespace rdma {

struct ClusterOptions {
  // Create: how many nodes this process hosts. Open: ignored (the job's size).
  int num_nodes = 3;
  // arena_bytes (64 MiB by default), what each node's Allocate hands out;
  // reserved_bytes is set from named_bytes.
  NodeOptions node;
  // Open: kAuto and kVerbs open the verbs device; kSoft is refused for a job
  // of more than one process. Create: the backend every node uses (kAuto:
  // verbs when a device exists, else the soft NIC).
  FabricOptions fabric;
  // Registered memory at arena offset 0 of every node, besides arena_bytes,
  // that the node's allocator never hands out: the structures keep their
  // catalogue of named structures and the named parts there. Rounded down
  // to 64; 0 registers none (no structure can then be opened by name).
  size_t named_bytes = size_t{32} << 20;
  // Open only: the bootstrap's bounds, and where rdma_cm listens.
  BootstrapOptions bootstrap;
  cm::CmConnectorOptions connect;
  // Open only: the coordinator, "host:port[,host:port...]" of a ZooKeeper
  // ensemble; empty means RDMADS_COORDINATOR, and none if that is unset too.
  std::string coordinator;
  // The coordinator session's timeout: a process silent this long (dead
  // host, long pause) is dropped. Leave margin for loaded hosts: an expiry
  // fences a live process.
  std::chrono::milliseconds coordinator_session{2000};
};

class Cluster final : public Connector {
 public:
  // One node per process: the job in the environment (see the top).
  static absl::StatusOr<std::unique_ptr<Cluster>> Open(const ClusterOptions& options = {});
  // The same with a bootstrap the caller made.
  static absl::StatusOr<std::unique_ptr<Cluster>> Open(std::unique_ptr<Bootstrap> bootstrap,
                                                       const ClusterOptions& options = {});
  // Every node in this process (options.num_nodes, 1..1024).
  static absl::StatusOr<std::unique_ptr<Cluster>> Create(const ClusterOptions& options);

  ~Cluster() override;

  // Nodes in the whole cluster, and the ones this process hosts.
  int num_nodes() const override { return num_nodes_; }
  absl::Span<Node* const> local_nodes() const { return local_; }
  bool is_local(NodeId id) const { return id < nodes_.size() && nodes_[id] != nullptr; }
  // This process's first node (its only one under Open).
  NodeId self() const { return local_.front()->id(); }
  // A node this process hosts (is_local(id)).
  Node& node(NodeId id) { return *nodes_[id]; }
  Fabric& fabric() { return *fabric_; }
  // The job's bootstrap under Open, for the program's own collectives
  // (Barrier, AllGather); null for an in-process cluster.
  Bootstrap* bootstrap() { return bootstrap_.get(); }
  // The job's rank under Open, 0 in process; the number of processes.
  int rank() const { return bootstrap_ ? bootstrap_->rank() : 0; }
  int processes() const { return bootstrap_ ? bootstrap_->size() : 1; }
  // Every process reached this call (a no-op in process).
  absl::Status Barrier();

  // The calling thread's handle: a Session on `node` (hosted here; default
  // self()). One per thread; structures' clients are made from it.
  absl::StatusOr<std::unique_ptr<Session>> ThisThread(const SessionOptions& options = {});
  absl::StatusOr<std::unique_ptr<Session>> ThisThread(NodeId node, const SessionOptions& options = {});
  // Same as ThisThread(node, options).
  absl::StatusOr<std::unique_ptr<Session>> NewSession(NodeId node, const SessionOptions& options = {}) {
    return ThisThread(node, options);
  }

  // Connector: to the local nodes in process, to the others through rdma_cm.
  absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator) override;
  absl::StatusOr<ArenaInfo> Arena(NodeId node) const override;
  absl::Status Disconnect(NodeId target, const QpEndpoint& responder) override;
  // Unavailable naming the node once it is declared dead: its process
  // ended or its host stopped answering (the connector), or, in process, its
  // soft NIC died (Kill or a crash point). With a coordinator: once an
  // epoch dropped it, or once this process fenced it while that epoch is
  // pending; every node once this process is fenced itself.
  absl::Status PeerStatus(NodeId node) const override;
  void ReportUnreachable(NodeId node, const absl::Status& why) override;
  // OK unless this process is fenced (with a coordinator only).
  absl::Status ServingStatus() const override;
  // Which process hosts `node`: its incarnation (0 in process). It changes
  // when the node rejoins; Sessions made before then cannot reach it.
  uint64_t Incarnation(NodeId node) const override;

  // Rejoin (with a coordinator). Open in a process that restarts a rank of
  // a running job (Bootstrap::rejoining) joins the membership, is admitted
  // in the next epoch, takes every member's card from that configuration
  // and connects to them; the others readmit the node once they have
  // repaired what its old process left (WatchDeaths). Its memory began
  // empty: the parts it held of earlier structures are lost (no
  // replication), and structures made after it joined use it fully
  // (docs/design.md §5, "Rejoin").
  bool rejoined() const { return bootstrap_ != nullptr && bootstrap_->rejoining(); }
  // The epoch this process applied last (every process it admitted let in
  // here), and the one that admitted `node`'s current process; 0 for both
  // without a coordinator.
  uint64_t epoch() const;
  uint64_t JoinedEpoch(NodeId node) const;
  // `node`'s process is not one the job started with: it rejoined later,
  // with empty memory.
  bool Restarted(NodeId node) const;
  // The job's membership under Open with a coordinator; else null. Read
  // the current epoch from it; ReportDeath is for a service's own failure
  // detector (a peer that answers its NIC but not its requests).
  coord::Membership* membership() { return membership_.get(); }

  // Failures (docs/design.md §5, "Failures and repair"). By the time a node is declared
  // dead this process has fenced it: no work request of that node reaches
  // this process's memory any more, even one it posts after a long pause.
  // WatchDeaths runs `repair(dead)` on the cluster's recovery thread once
  // per death, within kDeathPoll of the declaration (at once for nodes
  // declared before the call), and stops when the handle is destroyed (after
  // a running repair returns). A repair must not destroy a watch. With a
  // coordinator the declarations are the agreed epochs' drops, and a fenced
  // process runs no repair; a node that rejoined is let in only after its
  // old process's repairs ran, and its next death is repaired again.
  static constexpr std::chrono::milliseconds kDeathPoll{5};
  class DeathWatch;
  std::unique_ptr<DeathWatch> WatchDeaths(std::function<void(NodeId dead)> repair);

 private:
  friend class DeathWatch;
  struct Watcher {
    std::function<void(NodeId)> repair;
    std::vector<bool> told;  // by node: repair already ran for it
  };
  void RecoveryLoop();
  void Unwatch(Watcher* w);

  Cluster() = default;
  // What repairs act on: with a coordinator, dropped by an agreed epoch and
  // fenced by this process's connector (both); else PeerStatus.
  absl::Status Declared(NodeId node) const;
  absl::Status JoinMembership(const std::string& ensemble, const ClusterOptions& options, const std::string& card,
                              uint64_t incarnation);
  // Open's second half for a process that bootstraps with the job (checks
  // the first epoch holds its partners), and for one that rejoins it.
  absl::Status StartWithJob(const std::string& ensemble, const ClusterOptions& options);
  absl::Status Rejoin(const std::string& ensemble, const ClusterOptions& options);
  // The connector's detected deaths go to the membership as reports.
  void ReportDetectedDeaths();
  // The pending readmissions (new processes of ranks this process fenced)
  // whose old process's repairs all ran here: each card replaces the old
  // one and the node is no longer declared dead. repair_mu_ held.
  void ReadmitReady();
  // One pass of the recovery thread's repairs (repair_mu_ held).
  void RunRepairs();
  // The membership thread's hooks: fence, then declare, each dropped peer;
  // shut this node down when it is dropped itself.
  void OnEpoch(const coord::Configuration& before, const coord::Configuration& after);
  void OnFenced(const absl::Status& why);
  absl::Status CheckRange(NodeId node) const;

  // Destroyed bottom-up: the connector before the nodes, the nodes before
  // their fabric, the bootstrap last.
  std::unique_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<Fabric> fabric_;
  int num_nodes_ = 0;
  std::vector<std::unique_ptr<Node>> nodes_;  // by id; null when another process hosts it
  std::vector<Node*> local_;
  std::unique_ptr<cm::CmConnector> remote_;   // Open with more than one process
  // With a coordinator: destroyed first, so no hook runs on a half-gone
  // cluster. agreed_dead_[n] is set only after n is fenced here.
  std::unique_ptr<coord::Membership> membership_;
  std::unique_ptr<std::atomic<bool>[]> agreed_dead_;
  std::unique_ptr<std::atomic<uint64_t>[]> joined_epoch_;  // by node: JoinedEpoch
  std::atomic<uint64_t> start_epoch_{0};
  // Serializes OnEpoch with a rejoining Open's catch-up.
  std::mutex epoch_mu_;
  // New processes admitted by an epoch and not yet let in here (by rank),
  // and the newest epoch applied; epoch() is the latter while none waits.
  mutable std::mutex readmit_mu_;
  std::map<uint32_t, coord::Member> pending_readmit_;
  uint64_t seen_epoch_ = 0;
  mutable std::mutex agreed_mu_;
  std::vector<std::string> agreed_why_;  // by node, under agreed_mu_

  // The recovery thread, started by the first watch. repair_mu_ is held
  // while repairs run, so Unwatch waits for them.
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool stopping_ = false;
  bool new_watch_ = false;  // a watch to tell of earlier deaths at once
  std::list<Watcher> watchers_;
  std::mutex repair_mu_;
  std::thread recovery_;
};

// Ends its watch when destroyed.
class Cluster::DeathWatch {
 public:
  ~DeathWatch() { cluster_->Unwatch(watcher_); }
  DeathWatch(const DeathWatch&) = delete;
  DeathWatch& operator=(const DeathWatch&) = delete;

 private:
  friend class Cluster;
  DeathWatch(Cluster* c, Watcher* w) : cluster_(c), watcher_(w) {}
  Cluster* cluster_;
  Watcher* watcher_;
};

}  // namespace rdma

#endif  // RDMA_CLUSTER_H_
