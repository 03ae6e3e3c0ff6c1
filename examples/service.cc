// The program of README.md's "Use it in your service": open the cluster,
// create or attach to a map by name, one Put and one checked Get, shut down.
// Run it under a launcher: `mpirun -np 3 bazel-bin/examples/service`.
#include <cstdio>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"
#include "util/status_macros.h"

struct Login {
  uint64_t user, expires;
};

absl::Status Run() {
  ASSIGN_OR_RETURN(auto cluster, rdma::Cluster::Open());  // mpirun, srun, a coordinator, or alone
  ASSIGN_OR_RETURN(auto logins, structures::HashMap<Login>::Open(*cluster, "logins"));
  ASSIGN_OR_RETURN(auto thread, cluster->ThisThread());  // one per thread
  ASSIGN_OR_RETURN(auto client, logins.NewClient(*thread));
  const uint64_t me = cluster->rank(), next = (me + 1) % cluster->processes();
  RETURN_IF_ERROR(client->Put(me, Login{me, 1700000000}).status());
  RETURN_IF_ERROR(cluster->Barrier());  // every rank has put its login
  ASSIGN_OR_RETURN(std::optional<Login> got, client->Get(next));
  if (!got || got->user != next) return absl::NotFoundError(absl::StrCat("no login of rank ", next));
  std::printf("rank %llu read rank %llu's login\n", static_cast<unsigned long long>(me),
              static_cast<unsigned long long>(next));
  return cluster->Barrier();  // nobody leaves while another still reads its part
}

int main() {
  absl::Status s = Run();
  if (!s.ok()) std::fprintf(stderr, "service: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
