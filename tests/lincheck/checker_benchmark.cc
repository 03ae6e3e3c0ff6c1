// Checker performance on the workloads the issue names:
//
//   bazel run -c opt //tests/lincheck:checker_benchmark
//
// - a per-key partitioned map history: 100,000 operations over 1,000 keys
//   from 8 threads (target: under 1 s);
// - queue histories of 2,000 operations from 4 threads (target: under 1 s, or
//   unknown within the timeout), through the queue decider and through the
//   generic search with a 1 s timeout.
//
// Histories come from history_generator.h: each operation lasts up to 2 us
// around its linearization point and points are ~10 ns apart, so all 8 (or 4)
// threads are busy at once and every operation overlaps the others'.
// Counters: verdict (0 ok, 1 illegal, 2 unknown), ops, partitions.

#include <cstdint>

#include "benchmark/benchmark.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/history_generator.h"
#include "tests/lincheck/map_model.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/recorder.h"

namespace lincheck {
namespace {

GeneratorOptions Workload(int threads, int ops, int keys, uint64_t seed) {
  GeneratorOptions options;
  options.threads = threads;
  options.ops = ops;
  options.keys = keys;
  options.max_gap_ns = 20;
  options.max_latency_ns = 1000;
  options.seed = seed;
  return options;
}

void Run(benchmark::State& state, const Model& model, const History& history,
         const CheckOptions& options) {
  CheckResult last;
  for (auto _ : state) {
    absl::StatusOr<CheckResult> result = Check(model, history, options);
    if (!result.ok()) {
      state.SkipWithError("malformed history");
      return;
    }
    last = *std::move(result);
  }
  state.counters["verdict"] = static_cast<double>(last.verdict);
  state.counters["ops"] = static_cast<double>(history.size());
  state.counters["partitions"] = static_cast<double>(last.num_partitions);
}

void BM_Map100kOps1kKeys8Threads(benchmark::State& state) {
  static const History* history =
      new History(GenerateMapHistory(Workload(8, 100000, 1000, 1)));
  Run(state, MapModel(), *history, {});
}
BENCHMARK(BM_Map100kOps1kKeys8Threads)->Unit(benchmark::kMillisecond);

// Same, with one result corrupted: the checker must find the bad key.
void BM_Map100kOps1kKeys8ThreadsCorrupted(benchmark::State& state) {
  static const History* history = [] {
    auto* h = new History(GenerateMapHistory(Workload(8, 100000, 1000, 1)));
    CorruptOneResult(*h, 3);
    return h;
  }();
  Run(state, MapModel(), *history, {});
}
BENCHMARK(BM_Map100kOps1kKeys8ThreadsCorrupted)->Unit(benchmark::kMillisecond);

const History& Queue2000(bool corrupted) {
  static const History* clean =
      new History(GenerateQueueHistory(Workload(4, 2000, 0, 1)));
  static const History* bad = [] {
    auto* h = new History(*clean);
    CorruptOneResult(*h, 3);
    return h;
  }();
  return corrupted ? *bad : *clean;
}

void BM_Queue2000Ops4ThreadsDecider(benchmark::State& state) {
  Run(state, QueueModel(), Queue2000(state.range(0)), {});
}
BENCHMARK(BM_Queue2000Ops4ThreadsDecider)
    ->ArgName("corrupted")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond);

void BM_Queue2000Ops4ThreadsGenericSearch(benchmark::State& state) {
  CheckOptions options;
  options.allow_fast_decision = false;
  options.timeout = absl::Seconds(1);
  Run(state, QueueModel(), Queue2000(state.range(0)), options);
}
BENCHMARK(BM_Queue2000Ops4ThreadsGenericSearch)
    ->ArgName("corrupted")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// Recording cost per operation (Invoke + Complete), one recorder shared by
// all benchmark threads, each with its own logical thread id. Operations
// accumulate (about 130 bytes each), hence the fixed iteration count.
void BM_RecorderInvokeComplete(benchmark::State& state) {
  static Recorder recorder;
  ThreadRecorder r(recorder, state.thread_index(), 0, Path::kNative);
  int64_t key = 0;
  for (auto _ : state) {
    Recorder::Token token = r.Invoke("put", {key, key});
    r.Complete(token, {0, key++});
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecorderInvokeComplete)->Iterations(1000000)->Threads(1)->Threads(2);

}  // namespace
}  // namespace lincheck

BENCHMARK_MAIN();
