#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "locks/lock.h"

namespace locks {
namespace {

template <typename Client>
absl::StatusOr<std::unique_ptr<LockClient>> Make(rdma::Node& node, rdma::Session* session,
                                                 const ClientOptions& options) {
  auto c = Client::Create(node, session, options);
  if (!c.ok()) return c.status();
  return std::unique_ptr<LockClient>(std::move(*c));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LockClient>> NewLockClient(LockKind kind, rdma::Node& node, rdma::Session* session,
                                                          const ClientOptions& options) {
  switch (kind) {
    case LockKind::kALock:
      return Make<ALockClient>(node, session, options);
    case LockKind::kRdmaSpin:
      return Make<RdmaSpinClient>(node, session, options);
    case LockKind::kRdmaMcs:
      return Make<RdmaMcsClient>(node, session, options);
    case LockKind::kLocalMcs:
      return Make<LocalMcsClient>(node, session, options);
  }
  return absl::InvalidArgumentError("NewLockClient: unknown lock kind");
}

}  // namespace locks
