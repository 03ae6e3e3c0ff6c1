#ifndef TESTS_LINCHECK_HISTORY_H_
#define TESTS_LINCHECK_HISTORY_H_

// A concurrent history: the operations one test run performed, each with the
// interval [invoke_ns, response_ns] in which it took effect (docs/design.md §7).

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "rdma/path.h"

namespace lincheck {

// How the operation reached the data structure (docs/design.md §2): the one
// rdma::Path of the library. Histories record the path *taken*: kNative,
// kLoopback or kRemote, never kAuto.
using rdma::Path;

// "native", "loopback" or "remote".
using rdma::PathName;
// Inverse of PathName for the three taken paths; nullopt for any other
// string (including "auto").
std::optional<Path> ParsePath(absl::string_view name);

// Arguments and results are int64 (keys, values, flags). Three inline slots
// cover every operation of the bundled models without allocating.
using Values = absl::InlinedVector<int64_t, 3>;

// The response time of an operation that never returned (the thread crashed,
// timed out, or the test stopped it). Such an operation is *pending*: it may or
// may not have taken effect, at any time after its invocation, and its result
// is unknown (and empty).
inline constexpr int64_t kPendingNs = std::numeric_limits<int64_t>::max();

struct Operation {
  // Both on one monotonic clock (CLOCK_MONOTONIC, see Recorder::NowNs).
  // invoke_ns <= response_ns; response_ns == kPendingNs for a pending op.
  int64_t invoke_ns = 0;
  int64_t response_ns = kPendingNs;
  int thread = 0;  // logical thread id within the test
  int node = 0;    // cluster node the thread runs on
  Path path = Path::kNative;
  std::string op;  // operation name, e.g. "put"; models define the names
  Values args;
  Values result;  // empty for a pending operation

  bool pending() const { return response_ns == kPendingNs; }

  friend bool operator==(const Operation&, const Operation&) = default;
};

// Operations in no particular order (the checker sorts what it needs).
// Recorder::Finish returns them sorted by invoke time.
using History = std::vector<Operation>;

// x happened before y in real time: x returned strictly before y was invoked.
// Equal timestamps count as concurrent, so either order is allowed.
inline bool HappensBefore(const Operation& x, const Operation& y) {
  return x.response_ns < y.invoke_ns;
}

// "put(1, 2) -> [0, 0]" or "put(1, 2) -> pending". Models give nicer names.
std::string FormatCall(const Operation& op);

// One line for reports: thread, node, path, interval and FormatCall.
// `time_origin` is subtracted from the timestamps to keep them short.
std::string FormatOperationLine(const Operation& op, absl::string_view call,
                                int64_t time_origin);

}  // namespace lincheck

#endif  // TESTS_LINCHECK_HISTORY_H_
