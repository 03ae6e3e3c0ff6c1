#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rdma/bootstrap.h"
#include "rdma/bootstrap/coord_bootstrap.h"
#include "rdma/bootstrap/pmix_bootstrap.h"

namespace rdma {
namespace {

// A job of one process: nothing to swap with anyone.
class SingleProcessBootstrap final : public Bootstrap {
 public:
  explicit SingleProcessBootstrap(std::string job) : job_(std::move(job)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const std::string& job() const override { return job_; }
  absl::string_view kind() const override { return "single-process"; }
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view blob) override {
    if (blob.size() > kMaxBlobBytes) {
      return absl::InvalidArgumentError(absl::StrCat("AllGather: blob of ", blob.size(), " bytes, at most ", kMaxBlobBytes));
    }
    return std::vector<std::string>{std::string(blob)};
  }
  absl::Status Barrier() override { return absl::OkStatus(); }
  [[noreturn]] void Abort(int exit_code, absl::string_view reason) override {
    std::fprintf(stderr, "rdmads: aborting: %.*s\n", static_cast<int>(reason.size()), reason.data());
    std::fflush(stderr);
    std::_Exit(exit_code);
  }

 private:
  const std::string job_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Bootstrap>> Bootstrap::FromEnvironment(const BootstrapOptions& options) {
  auto env = [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
  try {
    const std::string rejoin(absl::StripAsciiWhitespace(env("RDMADS_REJOIN").value_or("")));
    if (!rejoin.empty() && rejoin != "0" && (env("PMIX_NAMESPACE") || !env("RDMADS_COORDINATOR"))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "RDMADS_REJOIN=", rejoin, " needs the coordinator's start (RDMADS_COORDINATOR, RDMADS_NODES, "
          "RDMADS_NODE_ID, no launcher): a launcher cannot add a process to its job"));
    }
    if (env("PMIX_NAMESPACE")) {
      if (!env("PMIX_RANK")) {
        return absl::InvalidArgumentError(
            "PMIX_NAMESPACE is set but PMIX_RANK is not: start the program with mpirun or srun --mpi=pmix, "
            "or unset PMIX_NAMESPACE to start without a launcher");
      }
      return bootstrap::CreatePmixBootstrap(options);
    }
    if (env("RDMADS_PEERS") || env("RDMADS_PEERS_FILE")) {
      return absl::InvalidArgumentError(
          "RDMADS_PEERS / RDMADS_PEERS_FILE are not read: without a launcher, processes meet through the "
          "coordinator: set RDMADS_COORDINATOR=host:port (tools/coordinator.sh runs one), RDMADS_NODES (the "
          "job's size) and RDMADS_NODE_ID (this rank)");
    }
    if (env("RDMADS_COORDINATOR")) {
      absl::StatusOr<bootstrap::CoordConfig> config = bootstrap::CoordConfigFromEnv(env);
      if (!config.ok()) return config.status();
      return bootstrap::CreateCoordBootstrap(*config, options);
    }
    // No launcher, no coordinator: a job of this one process.
    const std::string nodes = std::string(absl::StripAsciiWhitespace(env("RDMADS_NODES").value_or("1")));
    const std::string node = std::string(absl::StripAsciiWhitespace(env("RDMADS_NODE_ID").value_or("0")));
    if (nodes != "1" || node != "0") {
      return absl::InvalidArgumentError(absl::StrCat(
          "RDMADS_NODES=", nodes, ", RDMADS_NODE_ID=", node, " but no launcher and no coordinator: a job of more "
          "than one process starts under mpirun or srun --mpi=pmix, or with RDMADS_COORDINATOR=host:port "
          "(tools/coordinator.sh runs one)"));
    }
    std::string job = env("RDMADS_CLUSTER").value_or("rdmads");
    if (job.empty()) job = "rdmads";
    return std::unique_ptr<Bootstrap>(new SingleProcessBootstrap(std::move(job)));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("bootstrap: ", e.what()));
  }
}

}  // namespace rdma
