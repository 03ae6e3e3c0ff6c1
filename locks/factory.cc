#include "absl/strings/str_cat.h"
#include "locks/alock.h"
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
    default:
      return absl::UnimplementedError(absl::StrCat(LockKindName(kind), ": not built yet"));
  }
}

}  // namespace locks
