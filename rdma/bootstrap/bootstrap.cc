#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "rdma/bootstrap.h"
#include "rdma/bootstrap/coord_bootstrap.h"
#include "rdma/bootstrap/peer_list.h"
#include "rdma/bootstrap/pmix_bootstrap.h"

namespace rdma {

absl::StatusOr<std::unique_ptr<Bootstrap>> Bootstrap::FromEnvironment(const BootstrapOptions& options) {
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  try {
    if (env("PMIX_NAMESPACE")) {
      if (!env("PMIX_RANK")) {
        return absl::InvalidArgumentError(
            "PMIX_NAMESPACE is set but PMIX_RANK is not: start the program with mpirun or srun --mpi=pmix, "
            "or unset PMIX_NAMESPACE to use the RDMADS_* peer list");
      }
      return bootstrap::CreatePmixBootstrap(options);
    }
    if (env("RDMADS_COORDINATOR") && env("RDMADS_NODES")) {
      absl::StatusOr<bootstrap::CoordConfig> config = bootstrap::CoordConfigFromEnv(env);
      if (!config.ok()) return config.status();
      return bootstrap::CreateCoordBootstrap(*config, options);
    }
    absl::StatusOr<bootstrap::PeerListConfig> config = bootstrap::PeerListConfigFromEnv(env);
    if (!config.ok()) return config.status();
    absl::StatusOr<std::unique_ptr<bootstrap::PeerListBootstrap>> b =
        bootstrap::PeerListBootstrap::Create(*config, options);
    if (!b.ok()) return b.status();
    return std::unique_ptr<Bootstrap>(*std::move(b));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bootstrap: ", e.what()));
  }
}

}  // namespace rdma
