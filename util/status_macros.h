#ifndef UTIL_STATUS_MACROS_H_
#define UTIL_STATUS_MACROS_H_

// Early-return helpers for absl::Status / absl::StatusOr, in the shape
// Abseil-based code bases use:
//
//   absl::StatusOr<uint64_t> Bump(rdma::Session& s, rdma::RemotePtr p) {
//     ASSIGN_OR_RETURN(uint64_t v, s.Read64(p));
//     RETURN_IF_ERROR(s.Write64(p, v + 1));
//     return v + 1;
//   }
//
// RETURN_IF_ERROR(expr): evaluates `expr` (a Status) once; returns it from the
// enclosing function unless it is OK.
// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (a StatusOr<T>) once; returns
// its status unless OK, else moves the value into `lhs` (a declaration such as
// `auto x` or an existing lvalue). Usable once per line.
//
// util::Annotate(status, prefix) prefixes a non-OK status's message, keeping
// its code: for saying where an error came from when it crosses a boundary.
// Header-only; no state, so safe from any thread.

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#define UTIL_STATUS_MACROS_CONCAT_INNER_(a, b) a##b
#define UTIL_STATUS_MACROS_CONCAT_(a, b) UTIL_STATUS_MACROS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                                                  \
  do {                                                                         \
    if (absl::Status util_status_macros_st_ = (expr); !util_status_macros_st_.ok()) \
      return util_status_macros_st_;                                           \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  UTIL_STATUS_MACROS_ASSIGN_OR_RETURN_(UTIL_STATUS_MACROS_CONCAT_(util_status_or_, __LINE__), lhs, expr)

#define UTIL_STATUS_MACROS_ASSIGN_OR_RETURN_(statusor, lhs, expr) \
  auto statusor = (expr);                                         \
  if (!statusor.ok()) return std::move(statusor).status();        \
  lhs = std::move(*statusor)

namespace util {

inline absl::Status Annotate(const absl::Status& s, absl::string_view prefix) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(prefix, ": ", s.message()));
}

}  // namespace util

#endif  // UTIL_STATUS_MACROS_H_
