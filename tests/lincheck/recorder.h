#ifndef TESTS_LINCHECK_RECORDER_H_
#define TESTS_LINCHECK_RECORDER_H_

// Records a concurrent history with low overhead.
//
//   lincheck::Recorder rec;
//   // in worker thread `t` on node `n`:
//   auto token = rec.Invoke(t, n, lincheck::Path::kRemote, "put", {key, value});
//   auto [found, prev] = map.Put(key, value);
//   rec.Complete(token, {found, prev});
//   // after joining all workers:
//   lincheck::History history = rec.Finish();
//
// Each logical thread id owns a private buffer, so recording takes no lock and
// shares no cache line with other threads; Finish merges the buffers.

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "tests/lincheck/history.h"

namespace lincheck {

class Recorder {
 public:
  // Identifies one invoked operation until it is completed.
  struct Token {
    int thread = -1;
    uint32_t index = 0;
  };

  // Logical thread ids must lie in [0, max_threads).
  explicit Recorder(int max_threads = 1024);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records the invocation of `op(args)` by logical thread `thread`, running
  // on cluster node `node`, through `path`. The invoke time is read last, just
  // before returning, so it precedes the operation itself.
  //
  // Thread safety: concurrent calls are safe provided each logical thread id
  // is used by one OS thread at a time (normally the worker's index). The
  // token must be completed by the same logical thread.
  Token Invoke(int thread, int node, Path path, absl::string_view op,
               absl::Span<const int64_t> args);

  // Records the response of the operation `token` names. The response time is
  // read first, so it follows the operation. Each token is completed at most
  // once; a token never completed stays pending.
  void Complete(Token token, absl::Span<const int64_t> result);

  // Returns every recorded operation sorted by invoke time and resets the
  // recorder. Operations never completed are pending (response kPendingNs,
  // empty result). Call only once all recording threads are done (joined).
  History Finish();

  // The clock the recorder uses: CLOCK_MONOTONIC in nanoseconds. It is
  // system-wide, so histories recorded by several processes of one machine
  // share a time base.
  static int64_t NowNs();

 private:
  struct ThreadBuffer;
  ThreadBuffer& BufferFor(int thread);

  const int max_threads_;
  std::unique_ptr<std::atomic<ThreadBuffer*>[]> buffers_;
};

// Binds a thread's fixed attributes so a worker loop stays short:
//
//   lincheck::ThreadRecorder r(rec, /*thread=*/t, /*node=*/0, Path::kNative);
//   auto token = r.Invoke("get", {key});
//   r.Complete(token, {found, value});
class ThreadRecorder {
 public:
  ThreadRecorder(Recorder& recorder, int thread, int node, Path path)
      : recorder_(recorder), thread_(thread), node_(node), path_(path) {}

  Recorder::Token Invoke(absl::string_view op, absl::Span<const int64_t> args) {
    return recorder_.Invoke(thread_, node_, path_, op, args);
  }
  void Complete(Recorder::Token token, absl::Span<const int64_t> result) {
    recorder_.Complete(token, result);
  }

  int thread() const { return thread_; }

 private:
  Recorder& recorder_;
  const int thread_;
  const int node_;
  const Path path_;
};

// RAII form: the invocation is recorded on construction. Call Complete with
// the result once the operation returns; if the scope is left without it (an
// exception, an early return on a transport error) the operation stays
// pending, which is exactly right for an operation that may have taken effect.
class ScopedOp {
 public:
  ScopedOp(ThreadRecorder& recorder, absl::string_view op,
           absl::Span<const int64_t> args)
      : recorder_(recorder), token_(recorder.Invoke(op, args)) {}
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

  void Complete(absl::Span<const int64_t> result) {
    if (done_) return;
    done_ = true;
    recorder_.Complete(token_, result);
  }

 private:
  ThreadRecorder& recorder_;
  const Recorder::Token token_;
  bool done_ = false;
};

}  // namespace lincheck

#endif  // TESTS_LINCHECK_RECORDER_H_
