#include "tests/lincheck/history.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace lincheck {

std::optional<Path> ParsePath(absl::string_view name) {
  for (Path path : {Path::kNative, Path::kLoopback, Path::kRemote}) {
    if (PathName(path) == name) return path;
  }
  return std::nullopt;
}

std::string FormatCall(const Operation& op) {
  std::string text = absl::StrCat(op.op, "(", absl::StrJoin(op.args, ", "), ")");
  if (op.pending()) return absl::StrCat(text, " -> pending");
  return absl::StrCat(text, " -> [", absl::StrJoin(op.result, ", "), "]");
}

std::string FormatOperationLine(const Operation& op, absl::string_view call,
                                int64_t time_origin) {
  std::string response =
      op.pending() ? std::string("pending")
                   : absl::StrCat(op.response_ns - time_origin);
  return absl::StrFormat("thread %d node %d %-8s [%s, %s] %s", op.thread,
                         op.node, PathName(op.path),
                         absl::StrCat(op.invoke_ns - time_origin), response,
                         call);
}

}  // namespace lincheck
