#ifndef RDMA_PATH_H_
#define RDMA_PATH_H_

// How a thread reaches memory of a node (docs/design.md §2). One enum for
// the locks, the structures, the tests and the linearizability histories.
//
// A caller *requests* a path per operation; the path *taken* follows from
// where the target lives:
//
//   requested   target on my node        target on another node
//   ---------   ----------------------   ----------------------
//   kAuto       kNative (CPU)            kRemote (RDMA)
//   kNative     kNative                  InvalidArgument
//   kLoopback   kLoopback (NIC, my QP)   kRemote
//   kRemote     InvalidArgument          kRemote
//
// kAuto is what a user wants; the others exist for tests and benchmarks that
// must exercise one path. Histories record the taken path, never kAuto.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "rdma/remote_ptr.h"

namespace rdma {

enum class Path : uint8_t {
  kAuto,      // native when the target is on the caller's node, else remote
  kNative,    // CPU loads, stores and atomics on the caller's own node
  kLoopback,  // through the caller's NIC to its own node (the loopback QP)
  kRemote,    // one-sided RDMA to another node
};

// "auto", "native", "loopback", "remote".
constexpr absl::string_view PathName(Path p) {
  switch (p) {
    case Path::kAuto: return "auto";
    case Path::kNative: return "native";
    case Path::kLoopback: return "loopback";
    case Path::kRemote: return "remote";
  }
  return "?";
}

// The path taken for a target on `home` by a thread on `self` that requested
// `requested` (the table above). Never returns kAuto.
constexpr Path TakenPath(Path requested, NodeId self, NodeId home) {
  if (home != self) return Path::kRemote;
  return requested == Path::kLoopback || requested == Path::kRemote ? Path::kLoopback : Path::kNative;
}

// Whether `requested` can be honoured for a target on `home` from `self`
// (CheckPath without the message, for fast paths).
constexpr bool PathAllowed(Path requested, NodeId self, NodeId home) {
  return !(requested == Path::kNative && home != self) && !(requested == Path::kRemote && home == self);
}

// OK when `requested` can be honoured for a target on `home` from `self`.
inline absl::Status CheckPath(Path requested, NodeId self, NodeId home) {
  if (requested == Path::kNative && home != self) {
    return absl::InvalidArgumentError(absl::StrCat("path native requested from node ", self, " for node ", home,
                                                   "'s memory: only the owning node's threads can take it"));
  }
  if (requested == Path::kRemote && home == self) {
    return absl::InvalidArgumentError(absl::StrCat("path remote requested from node ", self,
                                                   " for its own memory: use kLoopback to go through the NIC"));
  }
  return absl::OkStatus();
}

// True when a taken path goes through the NIC.
constexpr bool ViaNic(Path taken) { return taken == Path::kLoopback || taken == Path::kRemote; }

}  // namespace rdma

#endif  // RDMA_PATH_H_
