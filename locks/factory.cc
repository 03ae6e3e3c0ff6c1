#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "locks/lock.h"

namespace locks {

absl::StatusOr<std::unique_ptr<LockClient>> NewLockClient(LockKind kind, rdma::Node& node, rdma::Session* session,
                                                          const ClientOptions& options) {
  switch (kind) {
    case LockKind::kALock: {
      auto c = ALockClient::Create(node, session, options);
      if (!c.ok()) return c.status();
      return std::unique_ptr<LockClient>(std::move(*c));
    }
    case LockKind::kRdmaSpin: {
      auto c = RdmaSpinClient::Create(node, session, options);
      if (!c.ok()) return c.status();
      return std::unique_ptr<LockClient>(std::move(*c));
    }
    case LockKind::kRdmaMcs: {
      auto c = RdmaMcsClient::Create(node, session, options);
      if (!c.ok()) return c.status();
      return std::unique_ptr<LockClient>(std::move(*c));
    }
    case LockKind::kLocalMcs: {
      auto c = LocalMcsClient::Create(node, session, options);
      if (!c.ok()) return c.status();
      return std::unique_ptr<LockClient>(std::move(*c));
    }
  }
  return absl::InvalidArgumentError("NewLockClient: unknown lock kind");
}

}  // namespace locks
