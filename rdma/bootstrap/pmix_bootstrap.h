#ifndef RDMA_BOOTSTRAP_PMIX_BOOTSTRAP_H_
#define RDMA_BOOTSTRAP_PMIX_BOOTSTRAP_H_

// The PMIx Bootstrap (rdma/bootstrap.h): PMIx alone, no MPI. Create calls
// PMIx_Init (so the launcher's PMIX_* variables must be set) and reads
// PMIX_JOB_SIZE; AllGather is PMIx_Put + PMIx_Commit + PMIx_Fence (collecting
// data) + one PMIx_Get per rank under a key per collective; Barrier is a
// PMIx_Fence; the destructor calls PMIx_Finalize. One at a time per process;
// the process keeps one PMIx reference of its own until it exits, so
// Bootstraps made one after the other never disconnect it in between.

#include <memory>

#include "absl/status/statusor.h"
#include "rdma/bootstrap.h"

namespace rdma::bootstrap {

absl::StatusOr<std::unique_ptr<Bootstrap>> CreatePmixBootstrap(const BootstrapOptions& options);

}  // namespace rdma::bootstrap

#endif  // RDMA_BOOTSTRAP_PMIX_BOOTSTRAP_H_
