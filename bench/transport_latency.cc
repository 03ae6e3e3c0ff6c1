// Latency of the transport's own one-sided verbs, one op in flight, on the
// loopback and remote paths. Reports median and p99 per op (µs) and the
// hardware-independent counts per op. On rxe0 (inside tools/rxe_vm) these are
// compared with perftest's ib_*_lat on the same device by
// bench/latency_vs_perftest.sh (bench/README.md).
//
// pingpong/WRITE measures WRITE latency the way perftest's ib_write_lat does:
// two sides take turns WRITing a counter into each other's memory, each
// spinning on its own copy, and the latency is half the round trip. The
// loopback/remote WRITE rows instead wait for the WRITE's completion.
//
//   bazel run -c opt //bench:transport_latency -- --fabric=soft
//   (in the guest) bazel-bin/bench/transport_latency --fabric=verbs

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "rdma/cluster.h"
#include "rdma/verbs/flags.h"

namespace {

rdma::FabricKind g_fabric = rdma::FabricKind::kAuto;
rdma::verbs::DeviceFlags g_device_flags;  // --device/--port/--gid-index

enum class Verb { kRead, kWrite, kCas, kFaa };

// Latency samples of one run: the first kWarmupOps operations are set aside
// (a fresh cluster's first operations pay cold caches and page faults), then
// the last kKept are kept, overwriting the oldest, so the percentiles
// describe the run's steady state, not only its beginning. A run shorter
// than the warm-up (a quick or sanitizer run) reports its warm-up samples.
class Samples {
 public:
  static constexpr size_t kWarmupOps = 1000;
  static constexpr size_t kKept = size_t{1} << 16;
  void Add(double us) {
    if (seen_++ < kWarmupOps) {
      warm_.push_back(us);
    } else if (v_.size() < kKept) {
      v_.push_back(us);
    } else {
      v_[next_++ % kKept] = us;
    }
  }
  std::vector<double>& values() { return v_.empty() ? warm_ : v_; }

 private:
  std::vector<double> warm_, v_;
  size_t seen_ = 0, next_ = 0;
};

// Fills the median and p99 of `lat_us` (scaled by `scale`) and the counts per
// iteration into the benchmark's counters.
void Report(benchmark::State& state, std::vector<double>& lat_us, double scale, const rdma::OpCounters& d) {
  if (state.iterations() == 0) return;
  const double n = static_cast<double>(state.iterations());
  if (!lat_us.empty()) {
    std::sort(lat_us.begin(), lat_us.end());
    state.counters["median_us"] = lat_us[lat_us.size() / 2] * scale;
    state.counters["p99_us"] = lat_us[std::min(lat_us.size() - 1, lat_us.size() * 99 / 100)] * scale;
  }
  state.counters["nic_ops/op"] = d.nic_ops / n;
  state.counters["doorbells/op"] = d.doorbells / n;
  state.counters["round_trips/op"] = d.round_trips / n;
  state.counters["bytes/op"] = d.bytes / n;
}

// The 2-node cluster every benchmark here runs on, on the fabric and device
// the flags name; null (and the benchmark marked skipped) when it fails.
std::unique_ptr<rdma::Cluster> TwoNodeClusterOrSkip(benchmark::State& state) {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = 2;
  o.node.arena_bytes = 1 << 20;
  o.fabric.kind = g_fabric;
  (void)g_device_flags.Apply(&o.fabric);  // validated in main
  auto cluster = rdma::Cluster::Create(o);
  if (!cluster.ok()) {
    state.SkipWithError(std::string(cluster.status().message()).c_str());
    return nullptr;
  }
  return std::move(*cluster);
}

void BM_Latency(benchmark::State& state, Verb verb, bool remote) {
  auto cluster = TwoNodeClusterOrSkip(state);
  if (cluster == nullptr) return;
  auto session = cluster->NewSession(remote ? 1 : 0);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  rdma::RemotePtr word = *cluster->node(0).Allocate(64);
  rdma::Session& s = **session;
  Samples lat_us;
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  uint64_t v = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status st;
    switch (verb) {
      case Verb::kRead: st = s.Read64(word).status(); break;
      case Verb::kWrite: st = s.Write64(word, ++v); break;
      case Verb::kCas: st = s.CompareAndSwap(word, v, v + 1).status(), ++v; break;
      case Verb::kFaa: st = s.FetchAndAdd(word, 1).status(); break;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      break;
    }
    lat_us.Add(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  Report(state, lat_us.values(), 1.0, rdma::ThisThreadCounters() - before);
}

// Spins until `word` (written by a NIC) holds `want`. False after `timeout`
// or once `stop` is set.
bool SpinUntil(const uint64_t* word, uint64_t want, const std::atomic<bool>& stop,
               std::chrono::steady_clock::duration timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (uint32_t spins = 0;; ++spins) {
    // The NIC writes this aligned word; an acquire load orders what follows.
    if (std::atomic_ref<const uint64_t>(*word).load(std::memory_order_acquire) == want) return true;
    if ((spins & 1023) == 0 &&
        (stop.load(std::memory_order_relaxed) || std::chrono::steady_clock::now() > deadline)) {
      return false;
    }
  }
}

// Node 0's thread WRITEs i into node 1's arena; node 1's thread sees it and
// WRITEs i back into node 0's arena. Both WRITEs are inline and posted without
// waiting for their completions, as in ib_write_lat. Latency = round trip / 2.
void BM_WritePingPong(benchmark::State& state) {
  auto cluster = TwoNodeClusterOrSkip(state);
  if (cluster == nullptr) return;
  const rdma::RemotePtr ping = *cluster->node(1).Allocate(64);  // node 0 -> node 1
  const rdma::RemotePtr pong = *cluster->node(0).Allocate(64);  // node 1 -> node 0
  const uint64_t* ping_word = ping.local<uint64_t>();
  const uint64_t* pong_word = pong.local<uint64_t>();
  constexpr auto kTimeout = std::chrono::seconds(10);
  std::atomic<bool> stop{false};
  absl::Status responder_status;
  std::thread responder([&] {
    auto session = cluster->NewSession(1);
    if (!session.ok()) {
      responder_status = session.status();
      return;
    }
    for (uint64_t i = 1;; ++i) {
      if (!SpinUntil(ping_word, i, stop, kTimeout)) break;
      if (absl::Status s = rdma::Batch(**session, 0).Write64(pong, i).PostWithoutWaiting(); !s.ok()) {
        responder_status = s;
        break;
      }
    }
    if (absl::Status s = (*session)->Drain(); responder_status.ok()) responder_status = s;
  });
  auto session = cluster->NewSession(0);
  Samples rtt_us;
  absl::Status error;
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  uint64_t i = 0;
  for (auto _ : state) {
    if (!session.ok()) {
      error = session.status();
      break;
    }
    ++i;
    const auto t0 = std::chrono::steady_clock::now();
    if (absl::Status s = rdma::Batch(**session, 1).Write64(ping, i).PostWithoutWaiting(); !s.ok()) {
      error = s;
      break;
    }
    if (!SpinUntil(pong_word, i, stop, kTimeout)) {
      error = absl::DeadlineExceededError("no pong within 10 s");
      break;
    }
    const auto t1 = std::chrono::steady_clock::now();
    rtt_us.Add(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (session.ok()) {
    if (absl::Status s = (*session)->Drain(); error.ok()) error = s;
  }
  const rdma::OpCounters d = rdma::ThisThreadCounters() - before;
  stop.store(true);
  responder.join();
  if (error.ok()) error = responder_status;
  if (!error.ok()) {
    state.SkipWithError(std::string(error.message()).c_str());
    return;
  }
  Report(state, rtt_us.values(), 0.5, d);
}

void Register() {
  const std::pair<const char*, Verb> verbs[] = {
      {"READ", Verb::kRead}, {"WRITE", Verb::kWrite}, {"CAS", Verb::kCas}, {"FAA", Verb::kFaa}};
  for (bool remote : {false, true}) {
    for (auto [name, verb] : verbs) {
      std::string label = std::string(remote ? "remote/" : "loopback/") + name;
      benchmark::RegisterBenchmark(label.c_str(), [verb = verb, remote](benchmark::State& st) {
        BM_Latency(st, verb, remote);
      })->UseRealTime();
    }
  }
  benchmark::RegisterBenchmark("pingpong/WRITE", BM_WritePingPong)->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  bench::MainSpec spec;
  spec.name = "transport_latency";
  spec.usage =
      "transport_latency [--fabric=soft|verbs|auto] [--device=NAME] [--port=N] [--gid-index=N] [Google Benchmark flags]\n"
      "Median/p99 latency and counts per op of READ, WRITE, CAS, FAA on loopback and remote QPs.\n";
  spec.register_benchmarks = [](bool) { Register(); };
  return bench::RunBenchmarkMain(argc, argv, spec, &g_fabric, &g_device_flags);
}
