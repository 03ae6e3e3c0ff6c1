#ifndef TESTS_STRUCTURES_STRESS_BOUNDS_H_
#define TESTS_STRUCTURES_STRESS_BOUNDS_H_

// How long each worker of a recorded stress run (map_stress.h, queue_stress.h)
// keeps going: at most `max_ops` operations and until its deadline
// (`duration` after it starts), but at least `min_ops` whatever the deadline,
// so that a loaded machine, where the deadline comes early, still records the
// history the tests' checks need. Every worker ends after its current
// operation once any operation has failed (Stop): an error already decides
// the run (a mutant caught, a control failed), and a broken structure makes
// each further operation wait out a lock timeout (a queue mutant once took
// 195 s under TSan).

#include <atomic>
#include <chrono>

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

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_STRESS_BOUNDS_H_
