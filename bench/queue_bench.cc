// Throughput and per-operation costs of structures::Queue on its three access
// paths, next to the single-machine queues a user would pick instead
// (docs/design.md §8).
//
//   bazel build -c opt //bench:queue_bench && bazel-bin/bench/queue_bench --benchmark_counters_tabular=true
//
// Setup (once per process, lazily): a 2-node cluster and one Queue<Value32>
// (32-byte values) of --capacity=N slots per node (default 4096); node 0's
// queue is the benchmarked one. The baselines, of the same capacity:
//   boost_lockfree  boost::lockfree::queue<Value32> with a fixed-size node pool
//   std_mutex       std::deque<Value32> behind one std::mutex (capacity checked)
//   tbb_bounded     tbb::concurrent_bounded_queue<Value32>, capacity set
//
// Benchmarks (each iteration is one operation; items_per_second counts the
// operations that moved a value, all threads together, wall-clock):
//   native/<q>/1p1c       2 threads on node 0: thread 0 enqueues, thread 1 dequeues
//   native/<q>/2both      2 threads on node 0, each enqueue then dequeue
//   {loopback,remote}/queue/{1p1c,2both}
//                         the same through the NIC (threads on node 0 over
//                         loopback, or on node 1)
//   {native,loopback,remote}/queue/batch:{1,4,16}
//                         1 thread (node 0, or node 1 for remote): enqueue a
//                         batch, dequeue a batch; items count values moved
//   mixed/queue/2native_1remote
//                         threads 0-1 native (enqueue then dequeue), thread 2
//                         on node 1 remote (the same), as fast as each can;
//                         `native_ops` is the native threads' rate alone, each
//                         native thread timing its own loop (every thread
//                         runs the same number of iterations, and the remote
//                         thread's loop takes longer or shorter), to compare
//                         with native/queue/2both
//   mixed/queue/2native_1remote_10pct
//                         the same, but the remote thread skips iterations
//                         (yields) while it has moved more than 1/9 of what
//                         the native threads moved: remote operations are
//                         about 10% of all
//   mixed/queue/2native_1remote_producer_10pct_batch:{1,16}
//                         the remote thread only enqueues
//                         (one value, or EnqueueBatch of 16, per acquisition
//                         of the tail lock), paced to about 10% of all
//                         values; the native threads enqueue then dequeue as
//                         in 2both, and every 32 iterations also dequeue as
//                         many values as the remote thread enqueued
//   mixed/queue/2native_1remote_arrival
//                         what a remote thread arriving at a ring two native
//                         threads are using waits for its first Enqueue and
//                         Dequeue: median and p99 (BM_NicArrival)
//   native/<q>/1thread    1 thread on node 0, enqueue then dequeue: the cost
//                         of an operation with nobody else around (for the
//                         queue the same operations as native/queue/batch:1,
//                         on the shared queue, next to the baselines')
// Every run of a benchmark starts from an empty queue: thread 0 drains the
// shared queue (ours, boost's, tbb's or the deque) before the timed loop,
// which the other threads enter only together with it (Google Benchmark's
// start barrier). Otherwise a run would inherit whatever the run before it (in
// random order, with --benchmark_enable_random_interleaving) left in the
// queue, full or empty, and a 1p1c run's regime (the producer pressing on a
// full ring, or the consumer on an empty one) with it.
// Per operation (a batch counts as one): the calling threads' rdma::
// ThisThreadCounters deltas (NIC ops, doorbells, round trips waited, bytes),
// summed over the threads and divided by the total iteration count. `lost`
// counts values that came out wrong; it must be 0.
//
// Flags (ours, mixed freely with the Google Benchmark ones):
// --fabric=soft|verbs|auto, --capacity=N. Each benchmark runs MinTime(0.4 s)
// unless --benchmark_min_time is given.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/lockfree/queue.hpp>
#include <oneapi/tbb/concurrent_queue.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "rdma/verbs/flags.h"
#include "structures/queue/queue.h"

namespace {

struct Value32 {
  uint64_t w[4];
};
Value32 MakeValue(uint64_t x) { return {{x, ~x, x * 3, x ^ 0x5a5a}}; }
bool Whole(const Value32& v) { return v.w[1] == ~v.w[0] && v.w[2] == v.w[0] * 3 && v.w[3] == (v.w[0] ^ 0x5a5a); }

using Queue = structures::Queue<Value32>;
constexpr rdma::NodeId kHome = 0;
constexpr rdma::NodeId kOther = 1;

rdma::FabricKind g_fabric = rdma::FabricKind::kAuto;
rdma::verbs::DeviceFlags g_device_flags;
uint64_t g_capacity = 4096;

// std::deque behind one std::mutex, bounded like the others.
class MutexDeque {
 public:
  explicit MutexDeque(size_t capacity) : capacity_(capacity) {}
  bool Enqueue(const Value32& v) {
    std::lock_guard<std::mutex> l(mu_);
    if (q_.size() >= capacity_) return false;
    q_.push_back(v);
    return true;
  }
  std::optional<Value32> Dequeue() {
    std::lock_guard<std::mutex> l(mu_);
    if (q_.empty()) return std::nullopt;
    Value32 v = q_.front();
    q_.pop_front();
    return v;
  }

 private:
  const size_t capacity_;
  std::mutex mu_;
  std::deque<Value32> q_;
};

// boost::lockfree::queue with its node pool fixed at the capacity.
class BoostQueue {
 public:
  explicit BoostQueue(size_t capacity) : q_(capacity) {}
  bool Enqueue(const Value32& v) { return q_.bounded_push(v); }
  std::optional<Value32> Dequeue() {
    Value32 v;
    if (!q_.pop(v)) return std::nullopt;
    return v;
  }

 private:
  boost::lockfree::queue<Value32, boost::lockfree::fixed_sized<true>> q_;
};

// oneTBB's bounded MPMC queue, its capacity set; try_push/try_pop, never
// blocking, like the others.
class TbbQueue {
 public:
  explicit TbbQueue(size_t capacity) { q_.set_capacity(static_cast<std::ptrdiff_t>(capacity)); }
  bool Enqueue(const Value32& v) { return q_.try_push(v); }
  std::optional<Value32> Dequeue() {
    Value32 v;
    if (!q_.try_pop(v)) return std::nullopt;
    return v;
  }

 private:
  tbb::concurrent_bounded_queue<Value32> q_;
};

struct Env {
  absl::Status status;  // why the queue benchmarks are skipped, if they are
  std::unique_ptr<rdma::Cluster> cluster;
  std::unique_ptr<Queue> queue;
  std::unique_ptr<MutexDeque> deque;
  std::unique_ptr<BoostQueue> boost;
  std::unique_ptr<TbbQueue> tbb;
};
Env* g_env = nullptr;
std::once_flag g_env_once;

Env& GetEnv() {
  std::call_once(g_env_once, [] {
    g_env = new Env;
    g_env->deque = std::make_unique<MutexDeque>(g_capacity);
    g_env->boost = std::make_unique<BoostQueue>(g_capacity);
    g_env->tbb = std::make_unique<TbbQueue>(g_capacity);
    rdma::ClusterOptions o;
    o.named_bytes = 0;  // no named structures: nothing registered for them
    o.num_nodes = 2;
    o.fabric.kind = g_fabric;
    (void)g_device_flags.Apply(&o.fabric);  // validated in main
    structures::QueueOptions qo;
    qo.capacity = g_capacity;
    o.node.arena_bytes = 64 * g_capacity + (size_t{16} << 20);
    auto cluster = rdma::Cluster::Create(o);
    if (!cluster.ok()) {
      g_env->status = cluster.status();
      return;
    }
    g_env->cluster = std::move(*cluster);
    auto q = Queue::Create(*g_env->cluster, qo);
    if (!q.ok()) {
      g_env->status = q.status();
      return;
    }
    g_env->queue = std::make_unique<Queue>(std::move(*q));
  });
  return *g_env;
}

void Report(benchmark::State& state, const rdma::OpCounters& delta, int64_t moved, int64_t lost) {
  state.SetItemsProcessed(moved);
  state.counters["lost"] = benchmark::Counter(static_cast<double>(lost), benchmark::Counter::kAvgThreads);
  bench::SetPerOpCounters(state, delta);
}

// Runs `body(i)` -> values moved (or -1 for a lost value) per iteration.
template <typename Body>
void Loop(benchmark::State& state, Body&& body) {
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  int64_t moved = 0, lost = 0;
  uint64_t i = 0;
  for (auto _ : state) {
    const int64_t m = body(i++);
    if (m < 0) {
      ++lost;
    } else {
      moved += m;
    }
  }
  Report(state, rdma::ThisThreadCounters() - before, moved, lost);
}

template <typename Q>
void BM_Baseline(benchmark::State& state, Q* (*get)(), bool one_producer_one_consumer) {
  Q& q = *get();
  if (state.thread_index() == 0) {
    while (q.Dequeue().has_value()) {
    }
  }
  const bool producer = state.thread_index() == 0;
  const uint64_t base = uint64_t(state.thread_index()) << 40;
  Loop(state, [&](uint64_t i) -> int64_t {
    if (one_producer_one_consumer) {
      if (producer) return q.Enqueue(MakeValue(base + i)) ? 1 : 0;
      std::optional<Value32> v = q.Dequeue();
      return !v.has_value() ? 0 : Whole(*v) ? 1 : -1;
    }
    int64_t m = q.Enqueue(MakeValue(base + i)) ? 1 : 0;
    std::optional<Value32> v = q.Dequeue();
    return v.has_value() ? (Whole(*v) ? m + 1 : -1) : m;
  });
}

// Our queue in BM_Baseline's shape (the same loop, a client per thread), so
// the native rows compare the queues and not their loops. An error ends the
// run with it.
void BM_QueueNative(benchmark::State& state, bool one_producer_one_consumer) {
  Env& env = GetEnv();
  if (!env.status.ok()) {
    state.SkipWithError(env.status.ToString().c_str());
    return;
  }
  auto client = env.queue->NewClient(env.cluster->node(kHome));
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  structures::QueueClient<Value32>& c = **client;
  if (state.thread_index() == 0) {
    for (;;) {
      absl::StatusOr<std::vector<Value32>> out = c.DequeueBatch(kHome, 16);
      if (!out.ok() || out->empty()) break;
    }
  }
  const bool producer = state.thread_index() == 0;
  const uint64_t base = uint64_t(state.thread_index()) << 40;
  absl::Status error;
  Loop(state, [&](uint64_t i) -> int64_t {
    if (one_producer_one_consumer) {
      if (producer) {
        absl::StatusOr<bool> in = c.Enqueue(kHome, MakeValue(base + i));
        if (ABSL_PREDICT_FALSE(!in.ok())) error.Update(in.status());
        return in.ok() && *in ? 1 : 0;
      }
      absl::StatusOr<std::optional<Value32>> v = c.Dequeue(kHome);
      if (ABSL_PREDICT_FALSE(!v.ok())) error.Update(v.status());
      return !v.ok() || !v->has_value() ? 0 : Whole(**v) ? 1 : -1;
    }
    absl::StatusOr<bool> in = c.Enqueue(kHome, MakeValue(base + i));
    if (ABSL_PREDICT_FALSE(!in.ok())) error.Update(in.status());
    const int64_t m = in.ok() && *in ? 1 : 0;
    absl::StatusOr<std::optional<Value32>> v = c.Dequeue(kHome);
    if (ABSL_PREDICT_FALSE(!v.ok())) error.Update(v.status());
    return v.ok() && v->has_value() ? (Whole(**v) ? m + 1 : -1) : m;
  });
  if (!error.ok()) state.SkipWithError(error.ToString().c_str());
}

MutexDeque* GetDeque() { return GetEnv().deque.get(); }
BoostQueue* GetBoost() { return GetEnv().boost.get(); }
TbbQueue* GetTbb() { return GetEnv().tbb.get(); }

// kMixedProducer: the remote thread only enqueues (`batch` values at a
// time), paced like kMixed10; the native threads enqueue then dequeue, and
// also dequeue what it enqueued.
enum class Mode { k1p1c, k2Both, kBatch, kMixed, kMixed10, kMixedProducer };

// Values moved by the native threads of a paced mixed run, published every
// 32 iterations (the remote thread paces itself by it).
std::atomic<int64_t> g_native_moved{0};
// kMixedProducer: values the remote thread enqueued, and the extra dequeues
// the native threads have claimed to take them out again.
std::atomic<int64_t> g_remote_enqueued{0};
std::atomic<int64_t> g_extra_dequeues{0};
// Native threads of the current mixed run that have left their loop.
std::atomic<int> g_natives_done{0};

void BM_Queue(benchmark::State& state, Mode mode, structures::Path path, size_t batch) {
  Env& env = GetEnv();
  if (!env.status.ok()) {
    state.SkipWithError(env.status.ToString().c_str());
    return;
  }
  rdma::NodeId node = path == structures::Path::kRemote ? kOther : kHome;
  const bool paced = mode == Mode::kMixed10 || mode == Mode::kMixedProducer;
  const bool mixed = mode == Mode::kMixed || paced;
  if (mixed && state.thread_index() == 2) {
    node = kOther;
    path = structures::Path::kRemote;
  }
  auto session = env.cluster->NewSession(node);
  if (!session.ok()) {
    state.SkipWithError(session.status().ToString().c_str());
    return;
  }
  // Batches run on a queue of their own, so the ring starts at slot 0 and a
  // batch that divides the capacity never straddles the ring's end (which
  // costs a second READ or WRITE): the counts per op are the uncontended
  // ones the tests assert, however few the iterations.
  std::unique_ptr<Queue> own;
  Queue* queue = env.queue.get();
  if (mode == Mode::kBatch) {
    structures::QueueOptions qo;
    qo.capacity = g_capacity;
    auto q = Queue::Create(*env.cluster, qo);
    if (!q.ok()) {
      state.SkipWithError(q.status().ToString().c_str());
      return;
    }
    own = std::make_unique<Queue>(std::move(*q));
    queue = own.get();
  }
  auto client = queue->NewClient(**session);
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  structures::QueueClient<Value32>& c = **client;
  const uint64_t base = uint64_t(state.thread_index()) << 40;
  std::vector<Value32> values(batch);
  absl::Status error;
  auto check = [&](const absl::Status& s) {
    if (!s.ok() && error.ok()) error = s;
    return s.ok();
  };
  int64_t native_moved = 0, published = 0, remote_moved = 0;
  const bool native_thread = !(mixed && state.thread_index() == 2);
  const int64_t native_base = g_native_moved.load();
  if (state.thread_index() == 0) {  // before the start barrier: no thread is done yet, nothing enqueued
    g_natives_done.store(0);
    g_remote_enqueued.store(0);
    g_extra_dequeues.store(0);
  }
  if (state.thread_index() == 0 && mode != Mode::kBatch) {  // a batch run has a fresh queue of its own
    for (;;) {
      absl::StatusOr<std::vector<Value32>> out = c.DequeueBatch(kHome, 16, path);
      if (!check(out.status()) || out->empty()) break;
    }
  }
  if (mode == Mode::kBatch) {
    // One unmeasured round first: a new client's first operation READs once
    // more (its guess of the ring position is cold), which with the few
    // iterations of a quick or sanitizer run would show in the per-op counts.
    for (size_t j = 0; j < batch; ++j) values[j] = MakeValue(base + (uint64_t{1} << 39) + j);
    absl::StatusOr<size_t> n = c.EnqueueBatch(kHome, values, path);
    absl::StatusOr<std::vector<Value32>> out = c.DequeueBatch(kHome, batch, path);
    if (!check(n.status()) || !check(out.status()) || out->size() != *n) {
      if (error.ok()) error = absl::InternalError("queue_bench: the warm-up round lost values");
    }
  }
  // A mixed run's native rate is timed by the native threads themselves,
  // from their first iteration to their last: Google Benchmark gives every
  // thread the same number of iterations, makes them wait for each other at
  // the loop's end, and reports the mean of their times, so neither its time
  // nor a clock read after the loop says how fast the native threads went
  // next to the remote one.
  std::chrono::steady_clock::time_point loop_start, loop_end;
  auto op = [&](uint64_t i) -> int64_t {
    if (i == 0) loop_start = std::chrono::steady_clock::now();
    int64_t m = 0;
    if (paced && !native_thread && 9 * remote_moved > g_native_moved.load() - native_base) {
      std::this_thread::yield();  // ahead of 10% of all values: skip this iteration
      return 0;
    }
    if (mode == Mode::kMixedProducer && !native_thread) {
      for (size_t j = 0; j < batch; ++j) values[j] = MakeValue(base + i * batch + j);
      absl::StatusOr<size_t> n = c.EnqueueBatch(kHome, values, path);
      m = check(n.status()) ? static_cast<int64_t>(*n) : 0;
      g_remote_enqueued.fetch_add(m);
    } else if (mode == Mode::k1p1c) {
      if (state.thread_index() == 0) {
        absl::StatusOr<bool> in = c.Enqueue(kHome, MakeValue(base + i), path);
        m = check(in.status()) && *in ? 1 : 0;
      } else {
        absl::StatusOr<std::optional<Value32>> v = c.Dequeue(kHome, path);
        if (!check(v.status()) || !v->has_value()) return 0;
        m = Whole(**v) ? 1 : -1;
      }
    } else if (batch == 1 || mode == Mode::kMixedProducer) {
      absl::StatusOr<bool> in = c.Enqueue(kHome, MakeValue(base + i), path);
      m = check(in.status()) && *in ? 1 : 0;
      absl::StatusOr<std::optional<Value32>> v = c.Dequeue(kHome, path);
      if (check(v.status()) && v->has_value()) m = Whole(**v) ? m + 1 : -1;
    } else {
      for (size_t j = 0; j < batch; ++j) values[j] = MakeValue(base + i * batch + j);
      absl::StatusOr<size_t> n = c.EnqueueBatch(kHome, values, path);
      m = check(n.status()) ? static_cast<int64_t>(*n) : 0;
      absl::StatusOr<std::vector<Value32>> out = c.DequeueBatch(kHome, batch, path);
      if (check(out.status())) {
        for (const Value32& v : *out) m = Whole(v) && m >= 0 ? m + 1 : -1;
      }
    }
    if (mode == Mode::kMixedProducer && native_thread && (i & 31) == 31) {
      // Take out what the remote thread put in: one Dequeue per value it
      // enqueued, shared by the native threads (a claim may find the queue
      // empty; then the next value of a native thread's pair comes out).
      // A claim is one CAS, so the two native threads never claim the same
      // value.
      int64_t claimed = g_extra_dequeues.load();
      while (m >= 0 && claimed < g_remote_enqueued.load()) {
        if (!g_extra_dequeues.compare_exchange_weak(claimed, claimed + 1)) continue;  // `claimed` reloaded
        absl::StatusOr<std::optional<Value32>> v = c.Dequeue(kHome, path);
        if (check(v.status()) && v->has_value()) m = Whole(**v) ? m + 1 : -1;
        claimed = g_extra_dequeues.load();
      }
    }
    if (native_thread && m > 0) native_moved += m;
    if (!native_thread && m > 0) remote_moved += m;
    if (paced && native_thread && (i & 31) == 31) {
      g_native_moved.fetch_add(native_moved - published);
      published = native_moved;
    }
    return m;
  };
  // Mixed runs, on each thread's last iteration (before Google Benchmark's
  // end-of-loop barrier, where the threads wait for each other): a native
  // thread notes its end time and says it is done; the remote thread keeps
  // going, with the same pacing, until both native threads are done, so that
  // they never run without it.
  const uint64_t last = static_cast<uint64_t>(state.max_iterations) - 1;
  auto body = [&](uint64_t i) -> int64_t {
    const int64_t m = op(i);
    if (!mixed || i != last) return m;
    if (native_thread) {
      loop_end = std::chrono::steady_clock::now();
      g_natives_done.fetch_add(1);
      return m;
    }
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);  // a native thread failed
    for (uint64_t j = i + 1; g_natives_done.load() < 2 && error.ok(); ++j) {
      if (op(j) < 0) return -1;
      if ((j & 1023) == 0 && std::chrono::steady_clock::now() > give_up) break;
    }
    return m;
  };
  Loop(state, body);
  if (mixed) {
    // Values per second of this native thread over its own loop (0 for the
    // remote thread); the counter sums them over the threads.
    const double secs = std::chrono::duration<double>(loop_end - loop_start).count();
    state.counters["native_ops"] =
        benchmark::Counter(native_thread && secs > 0 ? static_cast<double>(native_moved) / secs : 0.0);
    // Values moved by the native threads and by the remote thread (its
    // share: remote_values / (native_values + remote_values), at most about
    // 10% in the paced rows).
    state.counters["native_values"] = benchmark::Counter(static_cast<double>(native_moved));
    state.counters["remote_values"] = benchmark::Counter(static_cast<double>(remote_moved));
  }
  if (!error.ok()) state.SkipWithError(error.ToString().c_str());
  client->reset();
}

// mixed/queue/2native_1remote_arrival: what a NIC thread arriving at a ring
// the native side is using waits. Two native threads (node 0) enqueue then
// dequeue without pause; the benchmark's thread, remote on node 1, sleeps
// kArrivalGap (the native threads have the ring to themselves), then times
// one Enqueue and one Dequeue. The manual time is the Enqueue's;
// arrival_enq_p50_us / _p99_us and arrival_deq_p50_us / _p99_us are each
// operation's median and 99th percentile over the run, native_ops the
// native threads' values per second meanwhile.
constexpr std::chrono::microseconds kArrivalGap{200};

void BM_NicArrival(benchmark::State& state) {
  Env& env = GetEnv();
  if (!env.status.ok()) {
    state.SkipWithError(env.status.ToString().c_str());
    return;
  }
  auto session = env.cluster->NewSession(kOther);
  if (!session.ok()) {
    state.SkipWithError(session.status().ToString().c_str());
    return;
  }
  auto client = env.queue->NewClient(**session);
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  structures::QueueClient<Value32>& c = **client;
  for (;;) {  // start empty
    absl::StatusOr<std::vector<Value32>> out = c.DequeueBatch(kHome, 16, structures::Path::kRemote);
    if (!out.ok()) {
      state.SkipWithError(out.status().ToString().c_str());
      return;
    }
    if (out->empty()) break;
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> native_moved{0};
  std::atomic<int> natives_running{0};
  std::mutex mu;
  absl::Status error;
  auto fail = [&](const absl::Status& s) {
    std::lock_guard<std::mutex> l(mu);
    if (error.ok()) error = s;
  };
  std::vector<std::thread> natives;
  for (int t = 0; t < 2; ++t) {
    natives.emplace_back([&, t] {
      auto s = env.cluster->NewSession(kHome);
      auto nc = s.ok() ? env.queue->NewClient(**s) : absl::StatusOr<std::unique_ptr<structures::QueueClient<Value32>>>(
                                                         s.status());
      if (!nc.ok()) {
        fail(nc.status());
        natives_running.fetch_add(1);
        return;
      }
      const uint64_t base = uint64_t{static_cast<uint64_t>(t) + 8} << 40;
      for (uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        absl::StatusOr<bool> in = (*nc)->Enqueue(kHome, MakeValue(base + i), structures::Path::kNative);
        absl::StatusOr<std::optional<Value32>> out = (*nc)->Dequeue(kHome, structures::Path::kNative);
        if (!in.ok() || !out.ok()) {
          fail(!in.ok() ? in.status() : out.status());
          break;
        }
        if (i == 1000) natives_running.fetch_add(1);
        if ((i & 255) == 255) native_moved.fetch_add(256 * 2);
      }
    });
  }
  while (natives_running.load() < 2) std::this_thread::yield();
  std::vector<double> enq_us, deq_us;
  const int64_t moved0 = native_moved.load();
  const auto start = std::chrono::steady_clock::now();
  uint64_t i = 0;
  for (auto _ : state) {
    std::this_thread::sleep_for(kArrivalGap);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<bool> in = c.Enqueue(kHome, MakeValue((uint64_t{1} << 44) + i++), structures::Path::kRemote);
    const auto t1 = std::chrono::steady_clock::now();
    absl::StatusOr<std::optional<Value32>> out = c.Dequeue(kHome, structures::Path::kRemote);
    const auto t2 = std::chrono::steady_clock::now();
    if (!in.ok() || !out.ok()) {
      fail(!in.ok() ? in.status() : out.status());
      state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
      break;
    }
    state.SetIterationTime(std::chrono::duration<double>(t1 - t0).count());
    enq_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    deq_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t moved = native_moved.load() - moved0;
  stop.store(true);
  for (std::thread& t : natives) t.join();
  auto percentile = [](std::vector<double> v, double q) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  state.counters["arrival_enq_p50_us"] = percentile(enq_us, 0.5);
  state.counters["arrival_enq_p99_us"] = percentile(enq_us, 0.99);
  state.counters["arrival_deq_p50_us"] = percentile(deq_us, 0.5);
  state.counters["arrival_deq_p99_us"] = percentile(deq_us, 0.99);
  state.counters["native_ops"] = secs > 0 ? static_cast<double>(moved) / secs : 0.0;
  if (!error.ok()) state.SkipWithError(error.ToString().c_str());
  client->reset();
}

void Register(bool set_min_time) {
  auto finish = [&](benchmark::internal::Benchmark* b, int threads) {
    b->Threads(threads)->UseRealTime();
    if (set_min_time) b->MinTime(0.4);
  };
  // Our queue (in `mode`), boost's, tbb's and the deque side by side, natively,
  // with `threads` threads.
  auto native_three = [&](const std::string& shape, bool one_producer_one_consumer, int threads) {
    finish(benchmark::RegisterBenchmark(("native/queue/" + shape).c_str(),
                                        [one_producer_one_consumer](benchmark::State& s) {
                                          BM_QueueNative(s, one_producer_one_consumer);
                                        }),
           threads);
    finish(benchmark::RegisterBenchmark(("native/boost_lockfree/" + shape).c_str(),
                                        [one_producer_one_consumer](benchmark::State& s) {
                                          BM_Baseline<BoostQueue>(s, GetBoost, one_producer_one_consumer);
                                        }),
           threads);
    finish(benchmark::RegisterBenchmark(("native/std_mutex/" + shape).c_str(),
                                        [one_producer_one_consumer](benchmark::State& s) {
                                          BM_Baseline<MutexDeque>(s, GetDeque, one_producer_one_consumer);
                                        }),
           threads);
    finish(benchmark::RegisterBenchmark(("native/tbb_bounded/" + shape).c_str(),
                                        [one_producer_one_consumer](benchmark::State& s) {
                                          BM_Baseline<TbbQueue>(s, GetTbb, one_producer_one_consumer);
                                        }),
           threads);
  };
  native_three("1p1c", /*one_producer_one_consumer=*/true, 2);
  native_three("2both", false, 2);
  // One thread enqueuing then dequeuing: each queue's cost per operation
  // with no other thread, the most a 2-thread run can get when one thread
  // runs alone while the other waits (as behind a mutex).
  native_three("1thread", false, 1);
  // The same two 2-thread shapes through the NIC.
  for (auto [name, path] : {std::pair{"loopback", structures::Path::kLoopback},
                            std::pair{"remote", structures::Path::kRemote}}) {
    for (auto [shape, mode] : {std::pair{"1p1c", Mode::k1p1c}, std::pair{"2both", Mode::k2Both}}) {
      const std::string label = std::string(name) + "/queue/" + shape;
      finish(benchmark::RegisterBenchmark(label.c_str(),
                                          [path, mode](benchmark::State& s) { BM_Queue(s, mode, path, 1); }),
             2);
    }
  }
  finish(benchmark::RegisterBenchmark(
             "mixed/queue/2native_1remote",
             [](benchmark::State& s) { BM_Queue(s, Mode::kMixed, structures::Path::kNative, 1); }),
         3);
  finish(benchmark::RegisterBenchmark(
             "mixed/queue/2native_1remote_10pct",
             [](benchmark::State& s) { BM_Queue(s, Mode::kMixed10, structures::Path::kNative, 1); }),
         3);
  // A fixed count: each iteration sleeps kArrivalGap, which manual time leaves out.
  benchmark::RegisterBenchmark("mixed/queue/2native_1remote_arrival", BM_NicArrival)
      ->UseManualTime()
      ->Iterations(400);
  for (size_t batch : {1, 16}) {
    const std::string label = "mixed/queue/2native_1remote_producer_10pct_batch:" + std::to_string(batch);
    finish(benchmark::RegisterBenchmark(
               label.c_str(),
               [batch](benchmark::State& s) { BM_Queue(s, Mode::kMixedProducer, structures::Path::kNative, batch); }),
           3);
  }
  for (auto [name, path] : {std::pair{"native", structures::Path::kNative},
                            std::pair{"loopback", structures::Path::kLoopback},
                            std::pair{"remote", structures::Path::kRemote}}) {
    for (size_t batch : {1, 4, 16}) {
      const std::string label = std::string(name) + "/queue/batch:" + std::to_string(batch);
      finish(benchmark::RegisterBenchmark(
                 label.c_str(), [path, batch](benchmark::State& s) { BM_Queue(s, Mode::kBatch, path, batch); }),
             1);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::MainSpec spec;
  spec.name = "queue_bench";
  spec.usage =
      "queue_bench [--fabric=soft|verbs|auto] [--device=NAME] [--port=N] [--gid-index=N] [--capacity=N] "
      "[Google Benchmark flags]\n"
      "structures::Queue throughput on the native, loopback and remote paths (batches of 1, 4, 16), with\n"
      "per-op NIC ops, doorbells, round trips and bytes, next to boost::lockfree::queue,\n"
      "tbb::concurrent_bounded_queue and a std::deque+std::mutex of the same capacity.\n"
      "--capacity: slots per queue (default 4096).\n";
  spec.own_flag = [](absl::string_view arg, std::string* error) {
    if (arg.substr(0, 11) != "--capacity=") return false;
    uint64_t n = 0;
    // At most 65534: boost::lockfree::queue's fixed-size pool indexes its
    // nodes with 16 bits (one node is its dummy), and it throws beyond that.
    if (!absl::SimpleAtoi(arg.substr(11), &n) || n < 16 || n > 65534) {
      *error = absl::StrCat("bad ", arg, " (16..65534: boost::lockfree::queue's fixed-size pool limit)");
    }
    g_capacity = n;
    return true;
  };
  spec.register_benchmarks = Register;
  spec.teardown = [] {  // queues before cluster
    if (g_env == nullptr) return;
    g_env->queue.reset();
    g_env->cluster.reset();
    delete g_env;
  };
  return bench::RunBenchmarkMain(argc, argv, spec, &g_fabric, &g_device_flags);
}
