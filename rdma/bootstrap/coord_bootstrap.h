#ifndef RDMA_BOOTSTRAP_COORD_BOOTSTRAP_H_
#define RDMA_BOOTSTRAP_COORD_BOOTSTRAP_H_

// The coordinator Bootstrap (rdma/bootstrap.h) for jobs without a launcher:
// a rendezvous through the job's ZooKeeper ensemble, which the job's
// membership uses too (docs/design.md §5, "Bootstrap").
//
//   RDMADS_COORDINATOR=127.0.0.1:2181 RDMADS_NODES=3 RDMADS_NODE_ID=1 ./service
//   // FromEnvironment picks it when RDMADS_COORDINATOR and RDMADS_NODES are set
//
// A process allowed to rejoin (CoordConfig::rejoin) whose job runs (another
// rank's member is registered in the job's membership) skips the
// rendezvous: rejoining() is true and its collectives are refused;
// rdma::Cluster::Open then joins it through the membership.
//
// Under /rdmads/<job>/boot: each rank claims arrive/<rank> (ephemeral, its
// incarnation), so a second live process of a rank waits and then fails,
// naming the holder, and a killed earlier run's claim is waited out (its
// session, 10 s). Holding the claim, it deletes its rank's round nodes left
// by an earlier run. Collective k writes round-<k>/<rank> (persistent:
// incarnation, then blob; each rank deletes its node of k-1 once k is
// complete) and waits until every rank's node is there and names the
// incarnation that holds that rank's claim. A claim read once is remembered (a rank that finished and exited still
// counts) and read again when a node names another incarnation. Abort
// writes an ephemeral abort node naming the aborting rank and incarnation;
// it fails the others' waits at once when that incarnation holds the
// rank's claim. Every wait, the connection to the coordinator included, is
// bounded by BootstrapOptions::timeout; the coordinator's transient errors
// are retried within it.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include <functional>
#include <optional>

#include "rdma/bootstrap.h"

namespace rdma::bootstrap {

// Whether a process may rejoin a running job (RDMADS_REJOIN): never (a
// fresh start's rendezvous; unset or "0"), always ("1": FailedPrecondition
// when the job does not run), or when it runs ("auto"). A job re-opened by
// the same processes one after another (one may still be a member when the
// next opens) must not rejoin, hence no guessing by default.
enum class RejoinMode { kNever, kAlways, kAuto };

struct CoordConfig {
  std::string ensemble;  // "host:port[,host:port...]"
  std::string job = "rdmads";
  int rank = 0;
  int size = 1;
  RejoinMode rejoin = RejoinMode::kNever;
};

// Reads a variable of the environment (nullopt = unset).
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// RDMADS_COORDINATOR, RDMADS_NODES, RDMADS_NODE_ID, RDMADS_CLUSTER, RDMADS_REJOIN.
absl::StatusOr<CoordConfig> CoordConfigFromEnv(const EnvLookup& getenv);

absl::StatusOr<std::unique_ptr<Bootstrap>> CreateCoordBootstrap(const CoordConfig& config,
                                                                 const BootstrapOptions& options = {});

}  // namespace rdma::bootstrap

#endif  // RDMA_BOOTSTRAP_COORD_BOOTSTRAP_H_
