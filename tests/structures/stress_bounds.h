#ifndef TESTS_STRUCTURES_STRESS_BOUNDS_H_
#define TESTS_STRUCTURES_STRESS_BOUNDS_H_

// What the workers of one recorded stress run (map_stress.h, queue_stress.h)
// share besides the structure under test:
//  * WorkerBounds: how long each keeps going: at most `max_ops` operations
//    and until its deadline (`duration` after it starts), but at least
//    `min_ops` whatever the deadline, so that a loaded machine, where the
//    deadline comes early, still records the history the tests' checks need.
//    Every worker ends after its current operation once any operation has
//    failed (Stop): an error already decides the run (a mutant caught, a
//    control failed), and a broken structure makes each further operation
//    wait out a lock timeout (a queue mutant once took 195 s under TSan).
//  * StressCrew: the start line (every worker makes its session and client
//    first, then all start together), the bounds, and the run's error log
//    (a count, the first error's text, and the stop).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "rdma/cluster.h"
#include "rdma/session.h"

namespace structures::testing {

class WorkerBounds {
 public:
  WorkerBounds(int max_ops, int min_ops, std::chrono::milliseconds duration)
      : max_ops_(max_ops), min_ops_(min_ops), duration_(duration) {}
  WorkerBounds(const WorkerBounds&) = delete;
  WorkerBounds& operator=(const WorkerBounds&) = delete;

  // A worker's deadline, taken when it starts.
  std::chrono::steady_clock::time_point Deadline() const { return std::chrono::steady_clock::now() + duration_; }

  // Whether a worker that has done `done` operations runs another.
  bool Another(int done, std::chrono::steady_clock::time_point deadline) const {
    return done < max_ops_ && !stop_.load(std::memory_order_relaxed) &&
           (done < min_ops_ || std::chrono::steady_clock::now() < deadline);
  }

  // Called at every failed operation: all workers end after their current one.
  void Stop() { stop_.store(true, std::memory_order_relaxed); }

 private:
  const int max_ops_;
  const int min_ops_;
  const std::chrono::milliseconds duration_;
  std::atomic<bool> stop_{false};
};

// One run's workers. Thread-safe.
class StressCrew {
 public:
  StressCrew(int max_ops, int min_ops, std::chrono::milliseconds duration) : bounds_(max_ops, min_ops, duration) {}
  StressCrew(const StressCrew&) = delete;
  StressCrew& operator=(const StressCrew&) = delete;

  // Runs `worker(t)` for t in [0, n) on n threads and returns when all have
  // ended. Each worker calls ArriveAndWait once its setup is done; none gets
  // past it before all n have arrived.
  template <typename Worker>
  void Run(int n, Worker&& worker) {
    std::vector<std::thread> threads;
    for (int t = 0; t < n; ++t) threads.emplace_back([&worker, t] { worker(t); });
    while (arrived_.load() < n) std::this_thread::yield();
    go_.store(true, std::memory_order_release);
    for (auto& th : threads) th.join();
  }
  void ArriveAndWait() {
    arrived_.fetch_add(1);
    while (!go_.load(std::memory_order_acquire)) std::this_thread::yield();
  }

  // A worker's handles on the structure: its own Session and client.
  template <typename Structure>
  struct Member {
    std::unique_ptr<rdma::Session> session;
    std::unique_ptr<typename Structure::Client> client;  // destroyed first
  };
  // A worker's start: makes its Session on `node` and its client of
  // `structure`, then waits at the start line (ArriveAndWait). The client is
  // null when either could not be made; the error is noted then, and the
  // worker should end.
  template <typename Structure>
  Member<Structure> Enlist(rdma::Cluster& cluster, rdma::NodeId node, Structure& structure) {
    Member<Structure> m;
    absl::Status setup;
    auto session = cluster.NewSession(node);
    if (session.ok()) {
      m.session = std::move(*session);
      auto client = structure.NewClient(*m.session);
      if (client.ok()) {
        m.client = std::move(*client);
      } else {
        setup = client.status();
      }
    } else {
      setup = session.status();
    }
    ArriveAndWait();
    if (m.client == nullptr) NoteError(setup);
    return m;
  }

  const WorkerBounds& bounds() const { return bounds_; }

  // Records a failed operation (or a worker that could not set up): counts
  // it, keeps the first one's text, and ends every worker after its current
  // operation.
  void NoteError(const absl::Status& s) {
    errors_.fetch_add(1);
    bounds_.Stop();
    std::lock_guard<std::mutex> l(mu_);
    if (first_error_.empty()) first_error_ = s.ToString();
  }
  // Ends every worker after its current operation without an error (a run
  // that has already shown what it was for).
  void EndRun() { bounds_.Stop(); }
  uint64_t errors() const { return errors_.load(); }
  std::string first_error() const {
    std::lock_guard<std::mutex> l(mu_);
    return first_error_;
  }

  // A worker's pause between operations: yields until `think` has passed
  // (rather than sleeping: exact on slow, emulated timers too).
  static void Think(std::chrono::microseconds think) {
    if (think.count() <= 0) return;
    const auto until = std::chrono::steady_clock::now() + think;
    while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
  }

 private:
  WorkerBounds bounds_;
  std::atomic<int> arrived_{0};
  std::atomic<bool> go_{false};
  std::atomic<uint64_t> errors_{0};
  mutable std::mutex mu_;
  std::string first_error_;  // guarded by mu_
};

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_STRESS_BOUNDS_H_
