#ifndef BENCH_BENCH_MAIN_H_
#define BENCH_BENCH_MAIN_H_

// The command line every benchmark binary here shares: --fabric=soft|verbs|
// auto, the verbs device flags (--device/--port/--gid-index), the binary's
// own flags, --help, and the Google Benchmark flags, in any order.

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "benchmark/benchmark.h"
#include "rdma/fabric.h"
#include "rdma/op_counters.h"
#include "rdma/verbs/flags.h"

namespace bench {

// The per-operation NIC counts of a benchmark whose threads each measured
// `delta` (their rdma::ThisThreadCounters difference): Google Benchmark sums
// the counters over the threads and kAvgIterations divides by the total
// iteration count, so these are per-operation averages over all threads.
inline void SetPerOpCounters(benchmark::State& state, const rdma::OpCounters& delta) {
  using C = benchmark::Counter;
  state.counters["nic_ops/op"] = C(static_cast<double>(delta.nic_ops), C::kAvgIterations);
  state.counters["doorbells/op"] = C(static_cast<double>(delta.doorbells), C::kAvgIterations);
  state.counters["round_trips/op"] = C(static_cast<double>(delta.round_trips), C::kAvgIterations);
  state.counters["bytes/op"] = C(static_cast<double>(delta.bytes), C::kAvgIterations);
}

struct MainSpec {
  const char* name;        // the binary, for messages
  const char* usage;       // printed by --help before the device flags' help
  // The binary's own flags: returns true if `arg` was one of them (setting
  // *error to say what is wrong with its value, if anything).
  std::function<bool(absl::string_view arg, std::string* error)> own_flag = nullptr;
  // Registers the benchmarks; `set_min_time` unless --benchmark_min_time was
  // given.
  std::function<void(bool set_min_time)> register_benchmarks;
  // After the run (every benchmark thread is gone): tear down shared state.
  std::function<void()> teardown = nullptr;
};

// The display reporter Google Benchmark would use, counting the runs that
// ended in an error (SkipWithError), so that the binary can exit non-zero:
// a benchmark that failed must not read as a result.
class ErrorCountingReporter : public benchmark::BenchmarkReporter {
 public:
  explicit ErrorCountingReporter(benchmark::BenchmarkReporter* inner) : inner_(inner) {}
  bool ReportContext(const Context& context) override { return inner_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (!r.error_occurred) continue;
      if (errors_++ == 0) first_error_ = r.benchmark_name() + ": " + r.error_message;
    }
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }
  size_t errors() const { return errors_; }
  const std::string& first_error() const { return first_error_; }

 private:
  benchmark::BenchmarkReporter* inner_;  // Google Benchmark's own (not owned)
  size_t errors_ = 0;
  std::string first_error_;
};

// Parses the command line into *fabric / *device_flags and the binary's own
// flags, then runs the benchmarks. Returns the process exit code: 2 for bad
// flags (with a message on stderr), else 0.
inline int RunBenchmarkMain(int argc, char** argv, const MainSpec& spec, rdma::FabricKind* fabric,
                            rdma::verbs::DeviceFlags* device_flags) {
  if (absl::Status s = device_flags->Extract(&argc, argv); !s.ok()) {
    fprintf(stderr, "%s: %s\n", spec.name, std::string(s.message()).c_str());
    return 2;
  }
  std::vector<char*> rest;
  bool user_min_time = false;
  for (int i = 0; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    std::string error;
    if (arg.substr(0, 9) == "--fabric=") {
      auto k = rdma::ParseFabricKind(arg.substr(9));
      if (!k.ok()) {
        fprintf(stderr, "%s: %s\n", spec.name, std::string(k.status().message()).c_str());
        return 2;
      }
      *fabric = *k;
    } else if (spec.own_flag && spec.own_flag(arg, &error)) {
      if (!error.empty()) {
        fprintf(stderr, "%s: %s\n", spec.name, error.c_str());
        return 2;
      }
    } else {
      if (arg == "--help") {
        fputs(spec.usage, stdout);
        fputs(rdma::verbs::kDeviceFlagsHelp, stdout);
      }
      if (arg.substr(0, 20) == "--benchmark_min_time") user_min_time = true;
      rest.push_back(argv[i]);
    }
  }
  {
    // Device flags turn --fabric=auto into verbs and are refused with soft.
    rdma::FabricOptions fo;
    fo.kind = *fabric;
    if (absl::Status s = device_flags->Apply(&fo); !s.ok()) {
      fprintf(stderr, "%s: %s\n", spec.name, std::string(s.message()).c_str());
      return 2;
    }
    *fabric = fo.kind;
  }
  int n = static_cast<int>(rest.size());
  spec.register_benchmarks(!user_min_time);
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
  ErrorCountingReporter reporter(benchmark::CreateDefaultDisplayReporter());
  const size_t ran = benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  if (spec.teardown) spec.teardown();
  if (ran == 0) {
    fprintf(stderr, "%s: no benchmark matched --benchmark_filter\n", spec.name);
    return 1;
  }
  if (reporter.errors() > 0) {
    fprintf(stderr, "%s: %zu benchmark run(s) failed; the first: %s\n", spec.name, reporter.errors(),
            reporter.first_error().c_str());
    return 1;
  }
  return 0;
}

}  // namespace bench

#endif  // BENCH_BENCH_MAIN_H_
