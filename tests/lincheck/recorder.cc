#include "tests/lincheck/recorder.h"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <tuple>
#include <utility>
#include <vector>

namespace lincheck {
namespace {

[[noreturn]] void Die(const char* message, int64_t value) {
  std::fprintf(stderr, "lincheck::Recorder: %s (%lld)\n", message,
               static_cast<long long>(value));
  std::abort();
}

}  // namespace

// Owned by one logical thread while recording; padded so that two threads'
// buffers never share a cache line. Operations live in fixed-size chunks, so
// recording never moves earlier ones (no reallocation copies).
struct alignas(64) Recorder::ThreadBuffer {
  static constexpr size_t kChunk = 4096;

  Operation& Append() {
    if (size % kChunk == 0) chunks.push_back(std::make_unique<Operation[]>(kChunk));
    return at(size++);
  }
  Operation& at(size_t i) { return chunks[i / kChunk][i % kChunk]; }

  std::vector<std::unique_ptr<Operation[]>> chunks;
  size_t size = 0;
};

Recorder::Recorder(int max_threads)
    : max_threads_(max_threads),
      buffers_(new std::atomic<ThreadBuffer*>[max_threads]) {
  if (max_threads <= 0) Die("max_threads must be positive", max_threads);
  for (int i = 0; i < max_threads_; ++i) buffers_[i].store(nullptr);
}

Recorder::~Recorder() {
  for (int i = 0; i < max_threads_; ++i) delete buffers_[i].load();
}

int64_t Recorder::NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

Recorder::ThreadBuffer& Recorder::BufferFor(int thread) {
  if (thread < 0 || thread >= max_threads_) {
    Die("thread id out of range [0, max_threads)", thread);
  }
  std::atomic<ThreadBuffer*>& slot = buffers_[thread];
  ThreadBuffer* buffer = slot.load(std::memory_order_acquire);
  if (buffer != nullptr) return *buffer;
  // First use of this id. Only its owner installs it, but a CAS keeps a misuse
  // (two OS threads sharing an id) from leaking.
  auto fresh = std::make_unique<ThreadBuffer>();
  if (slot.compare_exchange_strong(buffer, fresh.get(),
                                   std::memory_order_acq_rel)) {
    return *fresh.release();
  }
  return *buffer;
}

Recorder::Token Recorder::Invoke(int thread, int node, Path path,
                                 absl::string_view op,
                                 absl::Span<const int64_t> args) {
  if (path == Path::kAuto) Die("a history records the path taken, not kAuto (thread", thread);
  ThreadBuffer& buffer = BufferFor(thread);
  Token token{thread, static_cast<uint32_t>(buffer.size)};
  Operation& record = buffer.Append();
  record.thread = thread;
  record.node = node;
  record.path = path;
  record.op.assign(op.data(), op.size());
  record.args.assign(args.begin(), args.end());
  record.invoke_ns = NowNs();
  return token;
}

void Recorder::Complete(Token token, absl::Span<const int64_t> result) {
  const int64_t now = NowNs();
  if (token.thread < 0 || token.thread >= max_threads_) {
    Die("Complete with an invalid token", token.thread);
  }
  ThreadBuffer* buffer = buffers_[token.thread].load(std::memory_order_acquire);
  if (buffer == nullptr || token.index >= buffer->size) {
    Die("Complete with an invalid token", token.index);
  }
  Operation& record = buffer->at(token.index);
  if (!record.pending()) Die("operation completed twice", token.index);
  record.response_ns = now;
  record.result.assign(result.begin(), result.end());
}

History Recorder::Finish() {
  History history;
  size_t total = 0;
  for (int i = 0; i < max_threads_; ++i) {
    if (ThreadBuffer* buffer = buffers_[i].load()) total += buffer->size;
  }
  history.reserve(total);
  for (int i = 0; i < max_threads_; ++i) {
    ThreadBuffer* buffer = buffers_[i].load();
    if (buffer == nullptr) continue;
    for (size_t k = 0; k < buffer->size; ++k) history.push_back(std::move(buffer->at(k)));
    buffer->chunks.clear();
    buffer->size = 0;
  }
  std::stable_sort(history.begin(), history.end(),
                   [](const Operation& a, const Operation& b) {
                     return std::tie(a.invoke_ns, a.thread) <
                            std::tie(b.invoke_ns, b.thread);
                   });
  return history;
}

}  // namespace lincheck
