// Checker performance on two reference workloads:
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
// Counters: verdict (0 ok, 1 illegal, 2 unknown), ops, partitions. A
// benchmark whose verdict is not the expected one reports an error (and no
// time) instead of a figure: a fast wrong answer is no result.
//
// --self_test_wrong_verdict (first argument; for checker_benchmark_test)
// also registers BM_SelfTestWrongVerdict, which expects "ok" from a corrupted
// history, so its error shows that the verdict check works.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Checks `history` once per iteration; each verdict must be in `expected`.
void Run(benchmark::State& state, const Model& model, const History& history,
         const CheckOptions& options, std::vector<Verdict> expected) {
  CheckResult last;
  for (auto _ : state) {
    absl::StatusOr<CheckResult> result = Check(model, history, options);
    if (!result.ok()) {
      state.SkipWithError("malformed history");
      return;
    }
    last = *std::move(result);
    if (std::find(expected.begin(), expected.end(), last.verdict) == expected.end()) {
      std::string want;
      for (Verdict v : expected) {
        absl::StrAppend(&want, want.empty() ? "" : " or ", VerdictName(v));
      }
      state.SkipWithError(absl::StrCat("wrong verdict: ", VerdictName(last.verdict),
                                       ", expected ", want)
                              .c_str());
      return;
    }
  }
  state.counters["verdict"] = static_cast<double>(last.verdict);
  state.counters["ops"] = static_cast<double>(history.size());
  state.counters["partitions"] = static_cast<double>(last.num_partitions);
}

void BM_Map100kOps1kKeys8Threads(benchmark::State& state) {
  static const History* history =
      new History(GenerateMapHistory(Workload(8, 100000, 1000, 1)));
  Run(state, MapModel(), *history, {}, {Verdict::kOk});
}
BENCHMARK(BM_Map100kOps1kKeys8Threads)->Unit(benchmark::kMillisecond);

const History& CorruptedMap100k() {
  static const History* history = [] {
    auto* h = new History(GenerateMapHistory(Workload(8, 100000, 1000, 1)));
    CorruptOneResult(*h, 3);
    return h;
  }();
  return *history;
}

// Same, with one result corrupted: the checker must find the bad key.
void BM_Map100kOps1kKeys8ThreadsCorrupted(benchmark::State& state) {
  Run(state, MapModel(), CorruptedMap100k(), {}, {Verdict::kIllegal});
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
  Run(state, QueueModel(), Queue2000(state.range(0)), {},
      {state.range(0) ? Verdict::kIllegal : Verdict::kOk});
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
  // Corrupted: illegal, or unknown when the 1 s runs out (the target: under
  // 1 s, or unknown within the timeout).
  Run(state, QueueModel(), Queue2000(state.range(0)), options,
      state.range(0) ? std::vector<Verdict>{Verdict::kIllegal, Verdict::kUnknown}
                     : std::vector<Verdict>{Verdict::kOk});
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

// Expects "ok" from a corrupted history: must end in a "wrong verdict" error.
void BM_SelfTestWrongVerdict(benchmark::State& state) {
  Run(state, MapModel(), CorruptedMap100k(), {}, {Verdict::kOk});
}

}  // namespace
}  // namespace lincheck

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--self_test_wrong_verdict") {
    benchmark::RegisterBenchmark("BM_SelfTestWrongVerdict",
                                 lincheck::BM_SelfTestWrongVerdict)
        ->Iterations(1);
    argv[1] = argv[0];  // drop the flag
    --argc;
    ++argv;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
