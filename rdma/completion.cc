#include "rdma/completion.h"

#include "absl/strings/str_cat.h"

namespace rdma {

absl::string_view OpcodeName(Opcode op) {
  switch (op) {
    case Opcode::kRead: return "READ";
    case Opcode::kWrite: return "WRITE";
    case Opcode::kCompareSwap: return "CAS";
    case Opcode::kFetchAdd: return "FAA";
  }
  return "?";
}

absl::string_view CompletionStatusName(CompletionStatus s) {
  switch (s) {
    case CompletionStatus::kSuccess: return "success";
    case CompletionStatus::kLocalLengthError: return "local length error";
    case CompletionStatus::kLocalProtectionError: return "local protection error";
    case CompletionStatus::kRemoteAccessError: return "remote access error";
    case CompletionStatus::kRemoteInvalidRequest: return "remote invalid request";
    case CompletionStatus::kRemoteOperationError: return "remote operation error";
    case CompletionStatus::kRetryExceeded: return "transport retry counter exceeded";
    case CompletionStatus::kFlushed: return "work request flushed (QP in error)";
    case CompletionStatus::kGeneralError: return "general error";
  }
  return "?";
}

absl::Status CompletionToStatus(const Completion& c) {
  if (c.status == CompletionStatus::kSuccess) return absl::OkStatus();
  std::string msg = absl::StrCat("RDMA ", OpcodeName(c.opcode), " on QP ", c.qp_num,
                                 " failed: ", CompletionStatusName(c.status));
  switch (c.status) {
    case CompletionStatus::kLocalProtectionError:
    case CompletionStatus::kRemoteAccessError:
      return absl::PermissionDeniedError(msg);
    case CompletionStatus::kLocalLengthError:
    case CompletionStatus::kRemoteInvalidRequest:
      return absl::InvalidArgumentError(msg);
    case CompletionStatus::kRetryExceeded:
      return absl::UnavailableError(msg);
    case CompletionStatus::kFlushed:
      return absl::AbortedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace rdma
