#ifndef RDMA_COMPLETION_H_
#define RDMA_COMPLETION_H_

// Completions as rdma::CompletionQueue returns them, and their conversion to
// absl::Status (docs/design.md §5, "Errors").

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "rdma/work_request.h"

namespace rdma {

// Completion status, the backend-neutral image of ibv_wc_status. Both
// backends map their failures onto these, so callers handle one set.
enum class CompletionStatus : uint8_t {
  kSuccess,
  kLocalLengthError,       // bad local length
  kLocalProtectionError,   // lkey does not cover the local buffer
  kRemoteAccessError,      // bad rkey, out of bounds, or missing permission
  kRemoteInvalidRequest,   // e.g. misaligned atomic, bad length
  kRemoteOperationError,   // the responder failed to execute (also injected faults)
  kRetryExceeded,          // peer unreachable: dead node, QP gone
  kFlushed,                // QP was already in error; the WR never ran
  kGeneralError,
};
absl::string_view CompletionStatusName(CompletionStatus s);

struct Completion {
  uint64_t wr_id = 0;
  Opcode opcode = Opcode::kRead;
  CompletionStatus status = CompletionStatus::kSuccess;
  uint32_t byte_len = 0;
  uint32_t qp_num = 0;
};

// OK for kSuccess; otherwise a status whose message names the opcode, the
// completion status and the QP. Code mapping: access/protection errors ->
// PermissionDenied, invalid request/length -> InvalidArgument, retry exceeded
// -> Unavailable, flushed -> Aborted, other -> Internal.
absl::Status CompletionToStatus(const Completion& c);

}  // namespace rdma

#endif  // RDMA_COMPLETION_H_
