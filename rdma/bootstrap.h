#ifndef RDMA_BOOTSTRAP_H_
#define RDMA_BOOTSTRAP_H_

// Bootstrap: who am I in the job, how many are we, and small collectives to
// swap connection data before any QP exists (docs/design.md §5, "Bootstrap").
// FromEnvironment picks, in this order:
//  * PMIx when a launcher set PMIX_NAMESPACE (mpirun, srun --mpi=pmix);
//  * the coordinator's rendezvous when RDMADS_COORDINATOR is set, with
//    RDMADS_NODES (the job's size), RDMADS_NODE_ID (this rank) and
//    RDMADS_CLUSTER (the job's name, default "rdmads"), and RDMADS_REJOIN
//    (1 or auto: this process restarts a rank of the running job)
//    (rdma/bootstrap/coord_bootstrap.h);
//  * else a job of this one process (RDMADS_NODES and RDMADS_NODE_ID, if
//    set, must say 1 and 0).
//
//   ASSIGN_OR_RETURN(auto boot, rdma::Bootstrap::FromEnvironment());
//   ASSIGN_OR_RETURN(std::vector<std::string> all, boot->AllGather(my_info));
//   // all[r] is rank r's blob, all[boot->rank()] == my_info
//
// Collectives (AllGather, Barrier) must be called by every rank in the same
// order; one thread at a time per object. rank(), size(), job() are constant
// and safe from any thread.
//
// Errors are absl::Status naming the variable or peer at fault and what to
// do; no exception leaves the library. A failed collective leaves the object
// failed: later collectives return FailedPrecondition with the first error.
//
// Bounds: every wait has a deadline, BootstrapOptions::timeout (60 s): the
// coordinator's rendezvous waits that long for every rank of a collective;
// PMIx gets it as PMIX_TIMEOUT, which a server may ignore. Blobs are at most
// kMaxBlobBytes each.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rdma {

struct BootstrapOptions {
  std::chrono::milliseconds timeout{60'000};
};

class Bootstrap {
 public:
  static constexpr size_t kMaxBlobBytes = 64 * 1024;

  // See the top: PMIx, the coordinator, or this one process; an error
  // saying what to set when the variables contradict each other.
  static absl::StatusOr<std::unique_ptr<Bootstrap>> FromEnvironment(const BootstrapOptions& options = {});

  virtual ~Bootstrap() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The job's identity: the PMIx namespace, or RDMADS_CLUSTER.
  virtual const std::string& job() const = 0;
  // "pmix", "coordinator" or "single-process".
  virtual absl::string_view kind() const = 0;
  // True for a process that restarts a rank of a job already running (the
  // coordinator's rendezvous found it so): the job's collectives are over,
  // so AllGather and Barrier return FailedPrecondition; it joins through the
  // job's membership instead (rdma::Cluster::Open does).
  virtual bool rejoining() const { return false; }

  // Every rank's blob, indexed by rank.
  virtual absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view blob) = 0;
  // Returns once every rank has called it.
  virtual absl::Status Barrier() = 0;
  // Ends this process with `exit_code` after printing `reason` to stderr;
  // under PMIx the launcher also ends the other ranks; with the coordinator
  // the others' next collective fails at once, naming this rank.
  [[noreturn]] virtual void Abort(int exit_code, absl::string_view reason) = 0;
};

}  // namespace rdma

#endif  // RDMA_BOOTSTRAP_H_
