#ifndef TESTS_STRUCTURES_MAP_STRESS_H_
#define TESTS_STRUCTURES_MAP_STRESS_H_

// A recorded concurrent workload on a distributed map of StressValue (the
// hash map or the ordered map, through a traits class: how to create it, which
// keys to use, where a NIC copy of its memory may be paused): worker threads
// on several nodes, each on a fixed path, run random operations on a shared
// key set and record every call for lincheck (docs/design.md §7). Used by the
// linearizability tests and by the mutant tests (same harness, a broken
// Policy). hash_map_stress.h and skiplist_stress.h have the traits.
//
// Values are StressValue: four int64 words that a put always sets equal (to a
// positive number unique per put). A get that sees words that differ (a torn
// read) records the value kTornValue, which no put ever wrote, so the checker
// rejects the history.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"
#include "structures/common/client.h"
#include "tests/lincheck/history.h"
#include "tests/lincheck/recorder.h"
#include "testing/backends.h"
#include "tests/structures/stress_bounds.h"

namespace structures::testing {

struct StressValue {
  int64_t w[4];
};
inline constexpr int64_t kTornValue = -1;

struct StressWorker {
  enum Role { kMixed, kWriter, kReader };
  rdma::NodeId node = 0;
  Path path = Path::kAuto;
  Role role = kMixed;  // kWriter: puts only; kReader: gets only; kMixed: the config's mix
  // Sleep between operations, so fast (native) workers spread their
  // operations over the slow (NIC) workers' run instead of finishing first.
  std::chrono::microseconds think{0};
};

struct StressConfig {
  std::string backend = "soft";
  int nodes = 3;
  std::vector<StressWorker> workers;
  // Hash map: 8-slot groups per node (whole units of three; the keys are
  // chosen so that no put finds both of its windows full).
  size_t groups_per_node = 4;
  // Hash map: room to grow, in groups per node (0: none). With room, keys are
  // not capped per unit: full windows split segments while the workers run.
  size_t max_groups_per_node = 0;
  // Ordered map: split keys (empty: the map's default) and part size.
  std::vector<uint64_t> split_keys;
  uint64_t part_bytes = 1 << 20;
  // Keys: `num_keys` keys spread over all nodes (the traits choose them), of
  // which the first `hot_keys` get `hot_percent` % of the operations. If
  // `home` >= 0 only keys homed on that node are used.
  int num_keys = 32;
  int hot_keys = 2;
  int hot_percent = 90;
  int home = -1;
  // Operation mix, in percent (the rest are gets).
  int put_percent = 30;
  int insert_percent = 10;
  int erase_percent = 20;
  int contains_percent = 10;
  int lower_bound_percent = 0;  // ordered map only
  // Per-worker bounds (tests/structures/stress_bounds.h, WorkerBounds).
  int ops_per_worker = 1500;
  int min_ops_per_worker = 40;
  std::chrono::milliseconds duration{4000};
  uint64_t seed = 1;
  // Soft backend only: latency added to every NIC operation, and a hook that
  // pauses a NIC copy of node `slow_copy_node`'s memory for `slow_copy` at
  // the traits' point of every slot or node (widens the window of torn READs).
  std::chrono::nanoseconds soft_latency{0};
  int slow_copy_node = -1;
  std::chrono::microseconds slow_copy{0};
  // With the hook: instead of sleeping slow_copy, wait until some worker
  // completes a put (at most slow_copy), so every paused slot copy straddles
  // a write: deterministic tearing when all puts hit that slot (one key).
  bool slow_copy_until_write = false;
  // Soft backend only: every NIC copies READ/WRITE payloads a byte at a time
  // (SoftDeviceOptions::byte_granular_copies), so a slot word itself can be
  // seen half written, as on Soft-RoCE (tests/verbs/README.md "rxe torn
  // WRITE"). The copy hook then pauses in the middle of a word (after its
  // 4th byte) rather than after it.
  bool byte_granular_copies = false;
  // The run ends (every worker after its current operation) as soon as a
  // worker's client has read under the lock: a test of the fallback needs no
  // more, however slow the machine, and keeps its history short.
  bool end_at_first_locked_read = false;
  // Soft backend only: node `crash_node` dies after its NIC executes
  // `crash_after_wrs` work requests from the start of its worker's run (a
  // crash point, usually in the middle of an operation;
  // rdma/soft/fault_injector.h). Give it one worker: that worker's failed
  // operation stays pending in the history and ends its run; the other
  // workers keep going through the home's crash repair.
  int crash_node = -1;
  uint64_t crash_after_wrs = 0;
};

struct StressResult {
  lincheck::History history;
  uint64_t ops = 0;
  uint64_t errors = 0;  // operations that returned a non-OK status (left pending)
  uint64_t crashed = 0;  // ... by the crashed node's workers (not counted in `errors`)
  uint64_t data_loss = 0;  // ... of which DataLoss (the map's own integrity check)
  std::string first_error;
  uint64_t torn_reads = 0;    // summed ReadStats
  uint64_t locked_reads = 0;
  uint64_t splits = 0;  // hash map: segments split by the workers
  uint64_t stale = 0;   // hash map: operations that met a split and retried
};

// The linearizability tests' usual mix on 3 nodes: two native workers on node
// 0 (pausing between operations, since native operations are ~100x faster
// than NIC ones, so that they overlap the whole NIC run), a loopback worker
// on node 0, and workers on nodes 1 and 2 (remote for node 0's keys).
inline std::vector<StressWorker> MixedPathWorkers(const std::string& backend) {
  const auto think = std::chrono::microseconds(backend == "soft" ? 30 : 1000);
  return {{0, Path::kAuto, StressWorker::kMixed, think},
          {0, Path::kAuto, StressWorker::kMixed, think},
          {0, Path::kLoopback},
          {1, Path::kAuto},
          {2, Path::kAuto}};
}

// `c` with every worker at full speed: no pause between operations, so
// native readers and writers on one node overlap on the same keys as often
// as the CPU allows (paused workers almost never do).
inline StressConfig FullSpeed(StressConfig c) {
  for (StressWorker& w : c.workers) w.think = std::chrono::microseconds(0);
  return c;
}

// What RunMapStress needs of a map type M (specialized next to each map):
//   static absl::StatusOr<M> Create(rdma::Cluster&, const StressConfig&);
//   static std::vector<uint64_t> Keys(const M&, const StressConfig&);
//   static uint64_t CopyPeriod(bool bytes), CopyAt(bool bytes): the copy
//     hook pauses where index % period == at (index counts words, or bytes
//     in byte-granular mode).
template <typename M>
struct MapStressTraits;

template <typename Map>
StressResult RunMapStress(const StressConfig& cfg) {
  using Traits = MapStressTraits<Map>;
  StressResult result;
  std::unique_ptr<rdma::Cluster> cluster =
      rdma::testing::MakeCluster(cfg.backend, cfg.nodes, 16 << 20, {cfg.soft_latency, cfg.byte_granular_copies});
  if (cluster == nullptr) {
    result.first_error = "cannot create the cluster";
    ++result.errors;
    return result;
  }
  if (cfg.crash_node >= 0 && cfg.backend != "soft") {
    result.first_error = "crash points need the soft NIC";
    ++result.errors;
    return result;
  }
  auto map = Traits::Create(*cluster, cfg);
  if (!map.ok()) {
    result.first_error = map.status().ToString();
    ++result.errors;
    return result;
  }
  const std::vector<uint64_t> keys = Traits::Keys(*map, cfg);

  std::atomic<uint64_t> puts_done{0};
  rdma::soft::SoftDevice* slow_dev = nullptr;
  if (cfg.backend == "soft" && cfg.slow_copy_node >= 0 && cfg.slow_copy.count() > 0) {
    slow_dev = rdma::soft::AsSoftDevice(cluster->node(static_cast<rdma::NodeId>(cfg.slow_copy_node)).device());
    const auto pause = cfg.slow_copy;
    const bool until_write = cfg.slow_copy_until_write;
    // The hook's index counts words, or bytes in byte-granular mode.
    const uint64_t period = Traits::CopyPeriod(cfg.byte_granular_copies);
    const uint64_t at = Traits::CopyAt(cfg.byte_granular_copies);
    if (slow_dev != nullptr) {
      slow_dev->faults().SetCopyHook([pause, until_write, period, at, &puts_done](uint64_t index) {
        if (index % period != at) return;
        if (!until_write) {
          std::this_thread::sleep_for(pause);
          return;
        }
        const uint64_t before = puts_done.load();
        const auto until = std::chrono::steady_clock::now() + pause;
        while (puts_done.load() == before && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      });
    }
  }

  lincheck::Recorder recorder;
  std::atomic<uint64_t> ops{0}, data_loss{0}, torn{0}, locked{0}, splits{0}, stale{0}, crashed{0};
  StressCrew crew(cfg.ops_per_worker, cfg.min_ops_per_worker, cfg.duration);

  auto worker = [&](int t) {
    const StressWorker w = cfg.workers[t];
    auto member = crew.Enlist(*cluster, w.node, *map);
    auto& client = member.client;
    if (client == nullptr) return;
    std::mt19937_64 rng(cfg.seed * 1000003 + t);
    const auto deadline = crew.bounds().Deadline();
    int64_t counter = 0;
    const bool dies = w.node == cfg.crash_node;
    bool dead = false;
    if (dies) {  // counted from here: the work requests of this worker's operations
      rdma::soft::AsSoftDevice(cluster->node(static_cast<rdma::NodeId>(w.node)).device())
          ->faults()
          .CrashAfterOperations(cfg.crash_after_wrs);
    }
    auto note_error = [&](const absl::Status& s) {
      if (dies && absl::IsUnavailable(s)) {  // its node crashed: the operation stays pending
        crashed.fetch_add(1);
        dead = true;
        return;
      }
      if (absl::IsDataLoss(s)) data_loss.fetch_add(1);
      crew.NoteError(s);
    };
    for (int i = 0; !dead && crew.bounds().Another(i, deadline); ++i) {
      StressCrew::Think(w.think);
      const bool hot = cfg.hot_keys > 0 && static_cast<int>(rng() % 100) < cfg.hot_percent;
      const size_t nk = hot ? std::min<size_t>(cfg.hot_keys, keys.size()) : keys.size();
      const uint64_t key = keys[rng() % nk];
      const Path lpath = rdma::TakenPath(w.path, w.node, map->HomeOf(key));
      lincheck::ThreadRecorder rec(recorder, t, w.node, lpath);
      const int64_t k = static_cast<int64_t>(key);
      const int64_t v = (static_cast<int64_t>(t + 1) << 40) | ++counter;
      const StressValue sv{{v, v, v, v}};
      auto value_of = [](const StressValue& x) {
        return x.w[0] == x.w[1] && x.w[1] == x.w[2] && x.w[2] == x.w[3] ? x.w[0] : kTornValue;
      };
      int dice = w.role == StressWorker::kWriter   ? -1
                 : w.role == StressWorker::kReader ? 100
                                                   : static_cast<int>(rng() % 100);
      ops.fetch_add(1, std::memory_order_relaxed);
      if (cfg.end_at_first_locked_read && client->read_stats().locked_reads > 0) crew.EndRun();
      if ((dice -= cfg.put_percent) < 0) {
        auto tok = rec.Invoke("put", {k, v});
        auto r = client->Put(key, sv, w.path);
        puts_done.fetch_add(1);
        if (r.ok()) {
          rec.Complete(tok, {r->has_value() ? 1 : 0, r->has_value() ? value_of(**r) : 0});
        } else {
          note_error(r.status());
        }
      } else if ((dice -= cfg.insert_percent) < 0) {
        auto tok = rec.Invoke("insert", {k, v});
        auto r = client->Insert(key, sv, w.path);
        if (r.ok()) {
          rec.Complete(tok, {*r ? 1 : 0});
        } else {
          note_error(r.status());
        }
      } else if ((dice -= cfg.erase_percent) < 0) {
        auto tok = rec.Invoke("erase", {k});
        auto r = client->Erase(key, w.path);
        if (r.ok()) {
          rec.Complete(tok, {r->has_value() ? 1 : 0, r->has_value() ? value_of(**r) : 0});
        } else {
          note_error(r.status());
        }
      } else if ((dice -= cfg.lower_bound_percent) < 0) {
        if constexpr (requires { client->LowerBound(key, w.path); }) {
          auto tok = rec.Invoke("lower_bound", {k});
          auto r = client->LowerBound(key, w.path);
          if (r.ok()) {
            if (r->has_value()) {
              rec.Complete(tok, {1, static_cast<int64_t>((*r)->first), value_of((*r)->second)});
            } else {
              rec.Complete(tok, {0, 0, 0});
            }
          } else {
            note_error(r.status());
          }
        }
      } else if ((dice -= cfg.contains_percent) < 0) {
        auto tok = rec.Invoke("contains", {k});
        auto r = client->Contains(key, w.path);
        if (r.ok()) {
          rec.Complete(tok, {*r ? 1 : 0});
        } else {
          note_error(r.status());
        }
      } else {
        auto tok = rec.Invoke("get", {k});
        auto r = client->Get(key, w.path);
        if (r.ok()) {
          rec.Complete(tok, {r->has_value() ? 1 : 0, r->has_value() ? value_of(**r) : 0});
        } else {
          note_error(r.status());
        }
      }
    }
    torn.fetch_add(client->read_stats().torn_reads);
    locked.fetch_add(client->read_stats().locked_reads);
    if constexpr (requires { client->growth_stats(); }) {
      splits.fetch_add(client->growth_stats().splits);
      stale.fetch_add(client->growth_stats().stale);
    }
  };

  crew.Run(static_cast<int>(cfg.workers.size()), worker);
  if (slow_dev != nullptr) slow_dev->faults().SetCopyHook(nullptr);

  result.history = recorder.Finish();
  result.ops = ops.load();
  result.errors += crew.errors();
  if (result.first_error.empty()) result.first_error = crew.first_error();
  result.data_loss = data_loss.load();
  result.torn_reads = torn.load();
  result.locked_reads = locked.load();
  result.splits = splits.load();
  result.stale = stale.load();
  result.crashed = crashed.load();
  return result;
}

}  // namespace structures::testing

#endif  // TESTS_STRUCTURES_MAP_STRESS_H_
