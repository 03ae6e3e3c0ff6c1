// Latency of the transport's own one-sided verbs, one op in flight, on the
// loopback and remote paths. Reports median and p99 per op (µs) and the
// hardware-independent counts per op. On rxe0 (inside tools/rxe_vm) these are
// compared with perftest's ib_*_lat on the same device (bench/README.md).
//
//   bazel run -c opt //bench:transport_latency -- --fabric=soft
//   (in the guest) bazel-bin/bench/transport_latency --fabric=verbs

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "rdma/cluster.h"

namespace {

rdma::FabricKind g_fabric = rdma::FabricKind::kAuto;

enum class Verb { kRead, kWrite, kCas, kFaa };

void BM_Latency(benchmark::State& state, Verb verb, bool remote) {
  rdma::ClusterOptions o;
  o.num_nodes = 2;
  o.node.arena_bytes = 1 << 20;
  o.fabric.kind = g_fabric;
  auto cluster = rdma::Cluster::Create(o);
  if (!cluster.ok()) {
    state.SkipWithError(std::string(cluster.status().message()).c_str());
    return;
  }
  auto session = (*cluster)->NewSession(remote ? 1 : 0);
  if (!session.ok()) {
    state.SkipWithError(std::string(session.status().message()).c_str());
    return;
  }
  rdma::RemotePtr word = *(*cluster)->node(0).Allocate(64);
  rdma::Session& s = **session;
  std::vector<double> lat_us;
  lat_us.reserve(1 << 16);
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
    if (lat_us.size() < lat_us.capacity()) lat_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (lat_us.empty()) return;
  std::sort(lat_us.begin(), lat_us.end());
  const rdma::OpCounters d = rdma::ThisThreadCounters() - before;
  const double n = static_cast<double>(state.iterations());
  state.counters["median_us"] = lat_us[lat_us.size() / 2];
  state.counters["p99_us"] = lat_us[std::min(lat_us.size() - 1, lat_us.size() * 99 / 100)];
  state.counters["nic_ops/op"] = d.nic_ops / n;
  state.counters["doorbells/op"] = d.doorbells / n;
  state.counters["round_trips/op"] = d.round_trips / n;
  state.counters["bytes/op"] = d.bytes / n;
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
}

}  // namespace

int main(int argc, char** argv) {
  // Our own flag first: --fabric=soft|verbs|auto (default auto).
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--fabric=", 9) == 0) {
      auto k = rdma::ParseFabricKind(argv[i] + 9);
      if (!k.ok()) {
        fprintf(stderr, "transport_latency: %s\n", std::string(k.status().message()).c_str());
        return 2;
      }
      g_fabric = *k;
    } else if (std::strcmp(argv[i], "--help") == 0) {
      printf("transport_latency [--fabric=soft|verbs|auto] [Google Benchmark flags]\n"
             "Median/p99 latency and counts per op of READ, WRITE, CAS, FAA on loopback and remote QPs.\n");
      rest.push_back(argv[i]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  Register();
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
