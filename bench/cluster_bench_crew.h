#ifndef BENCH_CLUSTER_BENCH_CREW_H_
#define BENCH_CLUSTER_BENCH_CREW_H_

// Crew: a fixed set of threads that run one task at a time, all together,
// so that each keeps what lives per thread (its rdma::Session, its
// structures' clients, rdma::ThisThreadCounters) from one task to the next.
//
//   Crew crew(4);
//   std::vector<absl::Status> s = crew.RunAll([&](int i) { return workers[i].Start(); });
//   ...
//   crew.RunAll([&](int i) { workers[i].Stop(); return absl::OkStatus(); });
//
// Contract: RunAll runs task(i) on thread i for every i and returns when all
// have returned, with each one's status; one caller at a time. The
// destructor joins the threads (after the task in progress, if any).

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace bench::cluster {

class Crew {
 public:
  explicit Crew(int threads) : results_(static_cast<size_t>(threads)) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i] { Loop(i); });
  }
  ~Crew() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  Crew(const Crew&) = delete;
  Crew& operator=(const Crew&) = delete;

  std::vector<absl::Status> RunAll(const std::function<absl::Status(int)>& task) {
    std::unique_lock<std::mutex> l(mu_);
    task_ = &task;
    pending_ = static_cast<int>(threads_.size());
    ++generation_;
    wake_.notify_all();
    done_.wait(l, [this] { return pending_ == 0; });
    task_ = nullptr;
    return results_;
  }

 private:
  void Loop(int i) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<absl::Status(int)>* task = nullptr;
      {
        std::unique_lock<std::mutex> l(mu_);
        wake_.wait(l, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
        task = task_;
      }
      absl::Status s = (*task)(i);
      std::lock_guard<std::mutex> l(mu_);
      results_[static_cast<size_t>(i)] = std::move(s);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;                              // guarded by mu_
  const std::function<absl::Status(int)>* task_ = nullptr;  // guarded by mu_
  int pending_ = 0;                                      // guarded by mu_
  bool stop_ = false;                                    // guarded by mu_
  std::vector<absl::Status> results_;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace bench::cluster

#endif  // BENCH_CLUSTER_BENCH_CREW_H_
