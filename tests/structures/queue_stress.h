#ifndef TESTS_STRUCTURES_QUEUE_STRESS_H_
#define TESTS_STRUCTURES_QUEUE_STRESS_H_

// A recorded concurrent workload on one node's BasicQueue<QueueStressValue,
// Policy>: producer and consumer threads on several nodes, each on a fixed
// path, record every call for lincheck (docs/design.md §7). Used by the
// linearizability tests and by the mutant tests (same harness, a broken
// Policy).
//
// Values are QueueStressValue: four int64 words that an enqueue always sets
// equal, to a value unique per enqueue (thread + 1) << 32 | counter. A dequeue
// that sees words that differ (a torn or stale read) records kTornValue,
// which nobody enqueued, so the checker rejects the history. A batch of k is
// recorded as k operations over the batch's interval; what that loses (the
// batch's values are contiguous and in order: one lock hold) is checked by
// BatchOrderViolation on the batches the result lists.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"
#include "structures/queue/queue.h"
#include "testing/backends.h"
#include "tests/lincheck/history.h"
#include "tests/lincheck/recorder.h"
#include "tests/structures/stress_bounds.h"

namespace structures::testing {

struct QueueStressValue {
  int64_t w[4];
};
inline constexpr int64_t kQueueTornValue = -1;

struct QueueWorker {
  enum Role { kProducer, kConsumer, kBoth };
  rdma::NodeId node = 0;
  Path path = Path::kAuto;
  Role role = kBoth;
  size_t batch = 1;  // values per call (EnqueueBatch / DequeueBatch when > 1)
  std::chrono::microseconds think{0};
};

struct QueueStressConfig {
  std::string backend = "soft";
  int nodes = 3;
  rdma::NodeId home = 0;
  uint64_t capacity = 4096;
  std::vector<QueueWorker> workers;
  // Per-worker bounds (tests/structures/stress_bounds.h, WorkerBounds).
  int ops_per_worker = 400;
  int min_ops_per_worker = 40;
  std::chrono::milliseconds duration{4000};
  uint64_t seed = 1;
  // Soft backend only: NICs copy payloads a byte at a time (as rxe does),
  // and a hook pauses every NIC copy of the home node's memory for `pause`
  // in the middle of each 32-byte value (after byte 12), so that a WRITE of
  // a payload is seen half done for a while.
  bool byte_granular_copies = false;
  std::chrono::microseconds pause{0};
  // Soft backend only: NIC atomics on the home node stall now and then
  // between reading the old value and writing the new one (FaultInjector::
  // PauseNextAtomic), for `atomic_stall`: the window in which a CPU atomic on
  // the same word is not atomic with the NIC's, as on real hardware.
  std::chrono::microseconds atomic_stall{0};
  // QueueOptions::lock_timeout (a broken queue can leave a lock unusable;
  // mutant runs shorten the wait for it).
  std::chrono::nanoseconds lock_timeout = std::chrono::seconds(30);
  // Soft backend only: node `crash_node` dies after its NIC executes
  // `crash_after_wrs` work requests from the start of its worker's run (a
  // crash point, rdma/soft/fault_injector.h). Give it one worker: that
  // worker's failed operation stays pending and ends its run; the others
  // keep going through the home's crash repair.
  int crash_node = -1;
  uint64_t crash_after_wrs = 0;
};

// `c` with every worker at full speed: no pause between operations.
inline QueueStressConfig FullSpeed(QueueStressConfig c) {
  for (QueueWorker& w : c.workers) w.think = std::chrono::microseconds(0);
  return c;
}

struct QueueStressResult {
  lincheck::History history;
  // The values of every batch of 2 or more that moved values, in order:
  // what an EnqueueBatch put in (its successful prefix), what a DequeueBatch
  // took out (torn values excluded: the checker rejects those anyway).
  std::vector<std::vector<int64_t>> enq_batches, deq_batches;
  uint64_t ops = 0;
  uint64_t enqueued = 0, dequeued = 0, full = 0, empty = 0;
  uint64_t errors = 0;
  uint64_t crashed = 0;  // failed operations of the crashed node's worker (not in `errors`)
  std::string first_error;
};

template <typename Policy>
QueueStressResult RunQueueStress(const QueueStressConfig& cfg) {
  using Q = queue_internal::BasicQueue<QueueStressValue, Policy>;
  QueueStressResult result;
  std::unique_ptr<rdma::Cluster> cluster =
      rdma::testing::MakeCluster(cfg.backend, cfg.nodes, 16 << 20, {.byte_granular_copies = cfg.byte_granular_copies});
  if (cluster == nullptr) {
    result.first_error = "cannot create the cluster";
    ++result.errors;
    return result;
  }
  QueueOptions qo;
  qo.capacity = cfg.capacity;
  qo.lock_timeout = cfg.lock_timeout;
  auto q = Q::Create(*cluster, qo);
  if (!q.ok()) {
    result.first_error = q.status().ToString();
    ++result.errors;
    return result;
  }
  rdma::soft::SoftDevice* slow = nullptr;
  if (cfg.backend == "soft" && cfg.pause.count() > 0) {
    slow = rdma::soft::AsSoftDevice(cluster->node(cfg.home).device());
    if (slow != nullptr) {
      const auto pause = cfg.pause;
      const uint64_t period = cfg.byte_granular_copies ? sizeof(QueueStressValue) : sizeof(QueueStressValue) / 8;
      const uint64_t at = cfg.byte_granular_copies ? 12 : 1;
      slow->faults().SetCopyHook([pause, period, at](uint64_t index) {
        if (index % period == at) std::this_thread::sleep_for(pause);
      });
    }
  }

  lincheck::Recorder recorder;
  std::atomic<bool> stop_staller{false};
  std::thread staller;
  if (cfg.backend == "soft" && cfg.atomic_stall.count() > 0) {
    if (rdma::soft::SoftDevice* dev = rdma::soft::AsSoftDevice(cluster->node(cfg.home).device())) {
      staller = std::thread([dev, &stop_staller, stall = cfg.atomic_stall] {
        while (!stop_staller.load()) {
          dev->faults().PauseNextAtomic();
          if (dev->faults().WaitUntilAtomicPaused(std::chrono::milliseconds(20))) std::this_thread::sleep_for(stall);
          dev->faults().ResumeAtomic();
        }
      });
    }
  }
  std::atomic<uint64_t> ops{0}, enq{0}, deq{0}, full{0}, empty{0}, crashed{0};
  std::mutex batches_mu;  // guards result.enq_batches and deq_batches
  StressCrew crew(cfg.ops_per_worker, cfg.min_ops_per_worker, cfg.duration);

  auto worker = [&](int t) {
    const QueueWorker w = cfg.workers[t];
    auto member = crew.Enlist(*cluster, w.node, *q);
    auto& client = member.client;
    if (client == nullptr) return;
    const Path taken = rdma::TakenPath(w.path, w.node, cfg.home);
    lincheck::ThreadRecorder rec(recorder, t, w.node, taken);
    std::mt19937_64 rng(cfg.seed * 1000003 + t);
    const auto deadline = crew.bounds().Deadline();
    int64_t counter = 0;
    std::vector<QueueStressValue> batch;
    std::vector<lincheck::Recorder::Token> tokens;
    const bool dies = w.node == cfg.crash_node;
    bool dead = false;
    if (dies) {  // counted from here: the work requests of this worker's operations
      rdma::soft::AsSoftDevice(cluster->node(w.node).device())->faults().CrashAfterOperations(cfg.crash_after_wrs);
    }
    auto note_error = [&](const absl::Status& s) {
      if (dies && absl::IsUnavailable(s)) {  // its node crashed: the operation stays pending
        crashed.fetch_add(1);
        dead = true;
        return;
      }
      crew.NoteError(s);
    };
    for (int i = 0; !dead && crew.bounds().Another(i, deadline); ++i) {
      StressCrew::Think(w.think);
      const bool produce = w.role == QueueWorker::kProducer ||
                           (w.role == QueueWorker::kBoth && rng() % 2 == 0);
      ops.fetch_add(1, std::memory_order_relaxed);
      tokens.clear();
      if (produce) {
        batch.clear();
        for (size_t j = 0; j < w.batch; ++j) {
          const int64_t v = (static_cast<int64_t>(t + 1) << 32) | ++counter;
          batch.push_back({{v, v, v, v}});
          tokens.push_back(rec.Invoke("enqueue", {v}));
        }
        absl::StatusOr<size_t> n;
        if (w.batch == 1) {
          absl::StatusOr<bool> in = client->Enqueue(cfg.home, batch[0], w.path);
          n = in.ok() ? absl::StatusOr<size_t>(*in ? 1 : 0) : absl::StatusOr<size_t>(in.status());
        } else {
          n = client->EnqueueBatch(cfg.home, batch, w.path);
        }
        if (!n.ok()) {
          note_error(n.status());  // left pending
          continue;
        }
        for (size_t j = 0; j < tokens.size(); ++j) {
          if (j < *n) {
            rec.Complete(tokens[j], {});
          } else {
            rec.Complete(tokens[j], {0});  // full
          }
        }
        enq.fetch_add(*n);
        if (*n < tokens.size()) full.fetch_add(1);
        if (*n >= 2) {
          std::vector<int64_t> vs;
          for (size_t j = 0; j < *n; ++j) vs.push_back(batch[j].w[0]);
          std::lock_guard<std::mutex> l(batches_mu);
          result.enq_batches.push_back(std::move(vs));
        }
      } else {
        for (size_t j = 0; j < w.batch; ++j) tokens.push_back(rec.Invoke("dequeue", {}));
        absl::StatusOr<std::vector<QueueStressValue>> got = client->DequeueBatch(cfg.home, w.batch, w.path);
        if (!got.ok()) {
          note_error(got.status());  // left pending
          continue;
        }
        for (size_t j = 0; j < tokens.size(); ++j) {
          if (j < got->size()) {
            const QueueStressValue& x = (*got)[j];
            const bool whole = x.w[0] == x.w[1] && x.w[1] == x.w[2] && x.w[2] == x.w[3];
            rec.Complete(tokens[j], {1, whole ? x.w[0] : kQueueTornValue});
          } else {
            rec.Complete(tokens[j], {0, 0});  // empty
          }
        }
        deq.fetch_add(got->size());
        if (got->size() < tokens.size()) empty.fetch_add(1);
        if (got->size() >= 2) {
          std::vector<int64_t> vs;
          for (const QueueStressValue& x : *got) {
            if (x.w[0] == x.w[1] && x.w[1] == x.w[2] && x.w[2] == x.w[3]) vs.push_back(x.w[0]);
          }
          std::lock_guard<std::mutex> l(batches_mu);
          result.deq_batches.push_back(std::move(vs));
        }
      }
    }
  };

  crew.Run(static_cast<int>(cfg.workers.size()), worker);
  result.crashed = crashed.load();
  stop_staller.store(true);
  if (staller.joinable()) staller.join();
  if (slow != nullptr) slow->faults().SetCopyHook(nullptr);

  result.history = recorder.Finish();
  result.ops = ops.load();
  result.enqueued = enq.load();
  result.dequeued = deq.load();
  result.full = full.load();
  result.empty = empty.load();
  result.errors += crew.errors();
  if (result.first_error.empty()) result.first_error = crew.first_error();
  return result;
}

// Two necessary conditions of a bounded queue's answers, cheap to check on a
// long history (the bounded model's generic search is not): a "full" enqueue
// needs `capacity` values in the queue at some instant of its interval, so at
// least that many successful enqueues invoked before it responded, minus the
// successful dequeues that responded before it was invoked; an "empty"
// dequeue needs the queue empty at some instant, so no surplus of enqueues
// that responded before it was invoked over dequeues invoked before it
// responded. Returns a description of the first violation, or "".
inline std::string BoundedAnswersViolation(const lincheck::History& h, uint64_t capacity) {
  auto enq_ok = [](const lincheck::Operation& o) { return o.op == "enqueue" && !o.pending() && o.result.empty(); };
  auto deq_ok = [](const lincheck::Operation& o) {
    return o.op == "dequeue" && !o.pending() && !o.result.empty() && o.result[0] == 1;
  };
  for (const lincheck::Operation& x : h) {
    if (x.pending()) continue;
    const bool full = x.op == "enqueue" && x.result.size() == 1 && x.result[0] == 0;
    const bool empty = x.op == "dequeue" && x.result.size() == 2 && x.result[0] == 0;
    if (!full && !empty) continue;
    int64_t may_in = 0, must_out = 0, must_in = 0, may_out = 0;
    for (const lincheck::Operation& o : h) {
      if (enq_ok(o)) {
        if (o.invoke_ns < x.response_ns) ++may_in;
        if (o.response_ns < x.invoke_ns) ++must_in;
      } else if (deq_ok(o)) {
        if (o.response_ns < x.invoke_ns) ++must_out;
        if (o.invoke_ns < x.response_ns) ++may_out;
      }
    }
    if (full && may_in - must_out < static_cast<int64_t>(capacity)) {
      return absl::StrCat("thread ", x.thread, " got \"full\" while at most ", may_in - must_out,
                          " values can have been in a queue of ", capacity);
    }
    if (empty && must_in - may_out > 0) {
      return absl::StrCat("thread ", x.thread, " got \"empty\" while at least ", must_in - may_out,
                          " values must have been in the queue");
    }
  }
  return "";
}

// What recording a batch as separate operations over one interval lets the
// checker miss: a batch moves its values under one hold of its side's lock,
// contiguously and in order. Returns a description of the first violation
// of these necessary conditions, or "":
//  (a) for values v_i before v_j of one EnqueueBatch: v_i comes out first,
//      so if v_j was dequeued, v_i was too (unless some dequeue is pending),
//      and deq(v_j) did not return before deq(v_i) was invoked;
//  (b) for consecutive values x, y of one DequeueBatch: x went in first, so
//      enq(y) did not return before enq(x) was invoked; and nothing went in
//      between them, so no successful enqueue was invoked after enq(x)
//      returned and returned before enq(y) was invoked.
inline std::string BatchOrderViolation(const lincheck::History& h,
                                       const std::vector<std::vector<int64_t>>& enq_batches,
                                       const std::vector<std::vector<int64_t>>& deq_batches) {
  std::map<int64_t, const lincheck::Operation*> enq_of, deq_of;
  std::vector<std::pair<int64_t, int64_t>> enqs;  // (invoke, response) of successful enqueues
  bool deq_pending = false;
  for (const lincheck::Operation& o : h) {
    if (o.op == "enqueue" && !o.pending() && o.result.empty()) {
      enq_of[o.args[0]] = &o;
      enqs.emplace_back(o.invoke_ns, o.response_ns);
    } else if (o.op == "dequeue") {
      if (o.pending()) deq_pending = true;
      if (!o.pending() && o.result.size() == 2 && o.result[0] == 1) deq_of[o.result[1]] = &o;
    }
  }
  for (const std::vector<int64_t>& b : enq_batches) {
    for (size_t i = 0; i + 1 < b.size(); ++i) {
      for (size_t j = i + 1; j < b.size(); ++j) {
        auto dj = deq_of.find(b[j]);
        if (dj == deq_of.end()) continue;
        auto di = deq_of.find(b[i]);
        if (di == deq_of.end()) {
          if (deq_pending) continue;
          return absl::StrCat("value ", b[j], " of an enqueue batch came out, but ", b[i],
                              ", before it in the batch, never did");
        }
        if (lincheck::HappensBefore(*dj->second, *di->second)) {
          return absl::StrCat("value ", b[j], " of an enqueue batch came out before ", b[i],
                              ", which was before it in the batch");
        }
      }
    }
  }
  // Successful enqueues by invoke time, with the suffix minimum of their
  // response times: "some enqueue invoked after t returned before u".
  std::sort(enqs.begin(), enqs.end());
  std::vector<int64_t> min_resp(enqs.size() + 1, lincheck::kPendingNs);
  for (size_t k = enqs.size(); k-- > 0;) min_resp[k] = std::min(min_resp[k + 1], enqs[k].second);
  for (const std::vector<int64_t>& b : deq_batches) {
    for (size_t i = 0; i + 1 < b.size(); ++i) {
      auto ex = enq_of.find(b[i]), ey = enq_of.find(b[i + 1]);
      if (ex == enq_of.end() || ey == enq_of.end()) continue;  // the decider rejects values nobody enqueued
      if (lincheck::HappensBefore(*ey->second, *ex->second)) {
        return absl::StrCat("a dequeue batch took ", b[i], " before ", b[i + 1], ", which went in first");
      }
      const auto first_after = std::upper_bound(enqs.begin(), enqs.end(),
                                                std::make_pair(ex->second->response_ns, lincheck::kPendingNs));
      if (min_resp[first_after - enqs.begin()] < ey->second->invoke_ns) {
        return absl::StrCat("a dequeue batch took ", b[i], " and then ", b[i + 1],
                            ", but another value went in between them and did not come out there");
      }
    }
  }
  return "";
}

// `h` without the "full" enqueues (they change nothing), so that the rest can
// be decided against the unbounded model by lincheck's queue decider.
inline lincheck::History WithoutFullEnqueues(const lincheck::History& h) {
  lincheck::History out;
  for (const lincheck::Operation& o : h) {
    if (o.op == "enqueue" && o.result.size() == 1 && o.result[0] == 0) continue;
    out.push_back(o);
  }
  return out;
}

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_QUEUE_STRESS_H_
