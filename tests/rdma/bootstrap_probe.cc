// Runs the bootstrap from the environment (PMIx under a launcher, else the
// coordinator, else one process): AllGather of each rank's number, a Barrier, checks,
// and one line on stdout:
//   bootstrap_probe: ok rank R of N kind K job J
// Exit 1 with the error on stderr when anything fails.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rdma/bootstrap.h"

// Under ASan, LeakSanitizer reports a few bytes that libpmix itself never
// frees (pmix_rte_init and its value loads keep them until exit); only stacks
// through libpmix are suppressed. Unused in other builds.
extern "C" const char* __lsan_default_suppressions() { return "leak:libpmix.so\n"; }

int main() {
  absl::StatusOr<std::unique_ptr<rdma::Bootstrap>> boot = rdma::Bootstrap::FromEnvironment();
  if (!boot.ok()) {
    std::fprintf(stderr, "bootstrap_probe: FromEnvironment: %s\n", boot.status().ToString().c_str());
    return 1;
  }
  rdma::Bootstrap& b = **boot;
  absl::StatusOr<std::vector<std::string>> all = b.AllGather(absl::StrCat("rank-", b.rank()));
  if (!all.ok()) {
    std::fprintf(stderr, "bootstrap_probe: rank %d AllGather: %s\n", b.rank(), all.status().ToString().c_str());
    return 1;
  }
  if (static_cast<int>(all->size()) != b.size()) {
    std::fprintf(stderr, "bootstrap_probe: rank %d got %zu blobs for %d ranks\n", b.rank(), all->size(), b.size());
    return 1;
  }
  for (int r = 0; r < b.size(); ++r) {
    if ((*all)[r] != absl::StrCat("rank-", r)) {
      std::fprintf(stderr, "bootstrap_probe: rank %d: blob %d is '%s'\n", b.rank(), r, (*all)[r].c_str());
      return 1;
    }
  }
  if (absl::Status s = b.Barrier(); !s.ok()) {
    std::fprintf(stderr, "bootstrap_probe: rank %d Barrier: %s\n", b.rank(), s.ToString().c_str());
    return 1;
  }
  // A second AllGather, with an empty blob, after the Barrier.
  absl::StatusOr<std::vector<std::string>> again = b.AllGather("");
  if (!again.ok() || static_cast<int>(again->size()) != b.size()) {
    std::fprintf(stderr, "bootstrap_probe: rank %d second AllGather: %s\n", b.rank(),
                 again.ok() ? "wrong count" : again.status().ToString().c_str());
    return 1;
  }
  std::printf("bootstrap_probe: ok rank %d of %d kind %s job %s\n", b.rank(), b.size(), std::string(b.kind()).c_str(),
              b.job().c_str());
  std::fflush(stdout);
  return 0;
}
