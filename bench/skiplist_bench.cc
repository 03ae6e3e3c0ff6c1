// Throughput and per-operation costs of structures::SkipList (the ordered
// map) on its three access paths, next to the single-machine ordered maps a
// user would pick instead (docs/design.md §8).
//
//   bazel build -c opt //bench:skiplist_bench && bazel-bin/bench/skiplist_bench --benchmark_counters_tabular=true
//
// Setup (once per process, lazily): a 2-node cluster; one SkipList<Value32>
// (32-byte values) whose node 0 owns the keys below 2^63 (split key 2^63);
// --keys=N (default 1000000) random keys below 2^63, pre-populated natively.
// The baselines hold the same keys and values:
//   std_map_mutex     std::map behind one std::mutex
//   btree_map_mutex   absl::btree_map behind one std::mutex
//
// Benchmarks (threads replay pre-generated traces, identical for the map and
// the baselines; items_per_second counts operations of all threads):
//   {native,loopback,remote}/skiplist and native/{std_map_mutex,btree_map_mutex}
//     /{get95_put5,get50_put50,get100}/{uniform,zipf0.99}
//                 YCSB B, A and C: 1 and 2 threads on node 0 (node 1 for
//                 remote); puts overwrite, so the size stays
//     /scan95_insert5/uniform   YCSB-E: 95% Scan(k, 50), 5% inserts of new
//                 keys (the map grows during the run), 1 and 2 threads
//   {native,loopback,remote}/skiplist/put100/uniform
//                 1 thread: the uncontended cost of a put (get100 with 1
//                 thread is a get's)
//   remote/skiplist/get100_cold/uniform
//                 1 thread, the client's leaf cache cleared before every
//                 get: the descent's cost without the cache
//   remote/skiplist/scan100     1 thread, Scan(k, 100)
// Per operation, the calling threads' rdma::ThisThreadCounters deltas (NIC
// ops, doorbells, round trips waited, bytes), summed over the threads and
// divided by the total iteration count; for NIC-path gets also rt_p50 and
// rt_p99 (round trips of one get, median and 99th percentile) and
// cache_pct (the client's leaf cache, 16 bytes an entry, as a percentage of
// the part's bytes in use). `misses`/`wrong` count gets that did not find
// their key or found another key's value: both must be 0.
//
// Flags (ours, mixed freely with the Google Benchmark ones):
// --fabric=soft|verbs|auto, --keys=N. Each benchmark runs MinTime(0.4 s)
// unless --benchmark_min_time is given.

#include <algorithm>
#include <atomic>
#include <limits>
#include <array>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "bench/bench_main.h"
#include "bench/zipf.h"
#include "benchmark/benchmark.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "rdma/verbs/flags.h"
#include "structures/skiplist/skiplist.h"

namespace {

using bench::KeyDist;

struct Value32 {
  uint64_t w[4];
};
Value32 MakeValue(uint64_t key, uint64_t seq) { return Value32{{key, seq, ~key, seq ^ key}}; }

using Map = structures::SkipList<Value32>;
using MapClient = Map::Client;
using Pairs = std::vector<std::pair<uint64_t, Value32>>;

constexpr rdma::NodeId kHome = 0;
constexpr rdma::NodeId kOther = 1;
constexpr uint64_t kSplit = uint64_t{1} << 63;
constexpr size_t kTraceLen = size_t{1} << 18;
constexpr size_t kScanLen = 50;

rdma::FabricKind g_fabric = rdma::FabricKind::kAuto;
rdma::verbs::DeviceFlags g_device_flags;
size_t g_num_keys = 1000000;

// An ordered map behind one std::mutex, with the SkipList client's shape.
template <typename M>
class LockedOrderedMap {
 public:
  std::optional<Value32> Get(uint64_t key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = m_.find(key);
    if (it == m_.end()) return std::nullopt;
    return it->second;
  }
  std::optional<Value32> Put(uint64_t key, const Value32& v) {
    std::lock_guard<std::mutex> l(mu_);
    auto [it, inserted] = m_.try_emplace(key, v);
    if (inserted) return std::nullopt;
    std::optional<Value32> old = it->second;
    it->second = v;
    return old;
  }
  bool Insert(uint64_t key, const Value32& v) {
    std::lock_guard<std::mutex> l(mu_);
    return m_.try_emplace(key, v).second;
  }
  Pairs Scan(uint64_t from, size_t limit) {
    Pairs out;
    out.reserve(limit);
    std::lock_guard<std::mutex> l(mu_);
    for (auto it = m_.lower_bound(from); it != m_.end() && out.size() < limit; ++it) out.emplace_back(*it);
    return out;
  }

 private:
  std::mutex mu_;
  M m_;
};
using StdMap = LockedOrderedMap<std::map<uint64_t, Value32>>;
using BtreeMap = LockedOrderedMap<absl::btree_map<uint64_t, Value32>>;

enum class Mix { kGet50Put50, kGet95Put5, kScan95Insert5, kGet100, kPut100, kGet100Cold, kScan100 };
const char* MixName(Mix m) {
  switch (m) {
    case Mix::kGet50Put50:
      return "get50_put50";
    case Mix::kGet95Put5:
      return "get95_put5";
    case Mix::kScan95Insert5:
      return "scan95_insert5";
    case Mix::kGet100:
      return "get100";
    case Mix::kPut100:
      return "put100";
    case Mix::kGet100Cold:
      return "get100_cold";
    case Mix::kScan100:
      return "scan100";
  }
  return "?";
}
int PutPercent(Mix m) {
  switch (m) {
    case Mix::kGet50Put50:
      return 50;
    case Mix::kGet95Put5:
    case Mix::kScan95Insert5:
      return 5;
    case Mix::kPut100:
      return 100;
    default:
      return 0;
  }
}

struct Env {
  absl::Status status;  // why the skiplist benchmarks are skipped, if they are
  std::unique_ptr<rdma::Cluster> cluster;
  std::unique_ptr<Map> map;
  std::vector<uint64_t> keys;
  // Every 4th key in key order: one at least in every leaf (a split leaves
  // each half 7 keys or more, and the benchmarks never erase), so a Get of
  // each remembers every leaf's location.
  std::vector<uint64_t> warm_keys;
  std::unique_ptr<StdMap> std_map;
  std::unique_ptr<BtreeMap> btree_map;

  using Trace = bench::KeyTrace;
  bench::TraceCache traces;

  const Trace& GetTrace(Mix mix, KeyDist dist, int thread) {
    return traces.Get(static_cast<int>(mix), dist, thread, [&] {
      return bench::MakeKeyTrace(keys, dist, PutPercent(mix), kTraceLen,
                                 0x51c0 + 100u * thread + 10u * static_cast<int>(mix));
    });
  }
};
Env* g_env = nullptr;
std::once_flag g_env_once;

absl::Status Build(Env& env) {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = 2;
  o.fabric.kind = g_fabric;
  (void)g_device_flags.Apply(&o.fabric);  // validated in main
  structures::SkipListOptions so;
  so.split_keys = {kSplit};
  // Nodes are at least half full; room for 3x the keys (the scan mix inserts).
  so.part_bytes = std::max<uint64_t>(uint64_t{16} << 20, 3 * g_num_keys / 8 * Map::kNodeBytes);
  o.node.arena_bytes = so.part_bytes + (size_t{32} << 20);
  auto cluster = rdma::Cluster::Create(o);
  if (!cluster.ok()) return cluster.status();
  env.cluster = std::move(*cluster);
  auto map = Map::Create(*env.cluster, so);
  if (!map.ok()) return map.status();
  env.map = std::make_unique<Map>(std::move(*map));
  auto client = env.map->NewClient(env.cluster->node(kHome));
  if (!client.ok()) return client.status();
  absl::Status error;
  env.keys = bench::MakeKeys(g_num_keys, 42, [&](uint64_t k) {
    if (!error.ok()) return true;
    if (k >= kSplit) return false;
    if (auto r = (*client)->Put(k, MakeValue(k, 0)); !r.ok()) error = r.status();
    return true;
  });
  return error;
}

Env& GetEnv() {
  std::call_once(g_env_once, [] {
    g_env = new Env;
    fprintf(stderr, "skiplist_bench: populating %zu keys...\n", g_num_keys);
    g_env->status = Build(*g_env);
    if (!g_env->status.ok()) {
      fprintf(stderr, "skiplist_bench: setup failed, skiplist benchmarks skipped: %s\n",
              g_env->status.ToString().c_str());
      g_env->keys = bench::MakeKeys(g_num_keys, 42, [](uint64_t k) { return k < kSplit; });
    }
    std::vector<uint64_t> sorted = g_env->keys;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); i += 4) g_env->warm_keys.push_back(sorted[i]);
    g_env->std_map = std::make_unique<StdMap>();
    g_env->btree_map = std::make_unique<BtreeMap>();
    // In shuffled order: keys are in Zipf rank order, and filling a
    // node-based map in that order would put the hottest nodes next to each
    // other in memory, a locality no hash- or key-placed structure gets.
    for (uint64_t k : bench::Shuffled(g_env->keys, 7)) {
      g_env->std_map->Put(k, MakeValue(k, 0));
      g_env->btree_map->Put(k, MakeValue(k, 0));
    }
  });
  return *g_env;
}

// The operations on the map through a client, with its path.
struct MapTarget {
  MapClient& c;
  structures::Path path;
  absl::StatusOr<std::optional<Value32>> Get(uint64_t k) { return c.Get(k, path); }
  absl::StatusOr<std::optional<Value32>> Put(uint64_t k, const Value32& v) { return c.Put(k, v, path); }
  absl::StatusOr<bool> Insert(uint64_t k, const Value32& v) { return c.Insert(k, v, path); }
  absl::StatusOr<Pairs> Scan(uint64_t k, size_t n) { return c.Scan(k, n, path); }
};
template <typename M>
struct BaselineTarget {
  M& m;
  absl::StatusOr<std::optional<Value32>> Get(uint64_t k) { return m.Get(k); }
  absl::StatusOr<std::optional<Value32>> Put(uint64_t k, const Value32& v) { return m.Put(k, v); }
  absl::StatusOr<bool> Insert(uint64_t k, const Value32& v) { return m.Insert(k, v); }
  absl::StatusOr<Pairs> Scan(uint64_t k, size_t n) { return m.Scan(k, n); }
};

// Fresh keys for the inserts of thread t (below 2^63, distinct across threads
// and runs with high probability).
uint64_t FreshKey(int thread, uint64_t i) {
  uint64_t x = (uint64_t(thread) << 56) ^ (i * 0x9e3779b97f4a7c15ULL) ^ 0x1234567;
  x ^= x >> 31;
  return x & (kSplit - 1);
}

// Runs of RunTrace so far: folded into the fresh keys, so that a repetition
// (or the same benchmark on another path, over the same map) inserts keys no
// earlier run inserted (with one key sequence for every run, every insert
// from the second repetition on would find its key present).
std::atomic<uint64_t> g_trace_runs{0};

template <typename Target>
void RunTrace(benchmark::State& state, Target& t, Mix mix, KeyDist dist, MapClient* client) {
  Env& env = GetEnv();
  const Env::Trace& trace = env.GetTrace(mix, dist, state.thread_index());
  const uint64_t run = g_trace_runs.fetch_add(1);
  uint64_t misses = 0, wrong = 0, seq = 0,
           fresh = (static_cast<uint64_t>(state.thread_index()) << 40) | (run << 28);
  std::array<uint64_t, 8> rt_hist{};  // gets by round trips (7 = 7 or more)
  size_t i = 0;
  const bool scan_mix = mix == Mix::kScan95Insert5 || mix == Mix::kScan100;
  const size_t scan_len = mix == Mix::kScan100 ? 100 : kScanLen;
  // A client's first visit to a leaf costs a search READ. One walk over every
  // key warms its leaf cache, so that a row counts a warm client's costs
  // however many iterations it runs (the cold row clears the cache itself).
  if (client != nullptr && mix != Mix::kGet100Cold) {
    auto walk = t.Scan(0, std::numeric_limits<uint32_t>::max());
    if (!walk.ok()) return state.SkipWithError(walk.status().ToString().c_str());
  }
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  for (auto _ : state) {
    const uint64_t key = trace.keys[i];
    const bool put = trace.is_put(i);
    i = (i + 1) & (kTraceLen - 1);
    if (scan_mix) {
      if (put) {
        auto r = t.Insert(FreshKey(state.thread_index(), ++fresh), MakeValue(key, ++seq));
        if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
      } else {
        auto r = t.Scan(key, scan_len);
        if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
        if (r->empty() || r->front().first != key) ++misses;
        benchmark::DoNotOptimize(r);
      }
      continue;
    }
    if (put) {
      auto r = t.Put(key, MakeValue(key, ++seq));
      if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
      benchmark::DoNotOptimize(r);
      continue;
    }
    if (mix == Mix::kGet100Cold && client != nullptr) client->ClearCache();
    // Round trips are sampled only for the map's NIC rows (a baseline's get
    // does not pay the two counter reads).
    const uint64_t rt0 = client != nullptr ? rdma::ThisThreadCounters().round_trips : 0;
    auto r = t.Get(key);
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    benchmark::DoNotOptimize(r);
    if (client != nullptr) ++rt_hist[std::min<uint64_t>(rdma::ThisThreadCounters().round_trips - rt0, 7)];
    if (!r->has_value()) {
      ++misses;
    } else if ((*r)->w[0] != key) {
      ++wrong;
    }
  }
  const rdma::OpCounters d = rdma::ThisThreadCounters() - before;
  using C = benchmark::Counter;
  bench::SetPerOpCounters(state, d);
  state.counters["misses"] = C(static_cast<double>(misses));
  state.counters["wrong"] = C(static_cast<double>(wrong));
  uint64_t gets = 0;
  for (uint64_t n : rt_hist) gets += n;
  if (client != nullptr && gets > 0 && d.round_trips > 0) {
    auto percentile = [&](double p) {
      uint64_t seen = 0;
      for (size_t r = 0; r < rt_hist.size(); ++r) {
        seen += rt_hist[r];
        if (static_cast<double>(seen) >= p * static_cast<double>(gets)) return static_cast<double>(r);
      }
      return 7.0;
    };
    // Per thread, averaged over the threads (a plain counter would sum them).
    state.counters["rt_p50"] = C(percentile(0.5), C::kAvgThreads);
    state.counters["rt_p99"] = C(percentile(0.99), C::kAvgThreads);
    const double used = static_cast<double>(Map::kNodeBytes) * static_cast<double>(env.keys.size()) / 8.0;
    state.counters["cache_pct"] = C(100.0 * 16.0 * static_cast<double>(client->cache_size()) / used, C::kAvgThreads);
  }
  state.SetItemsProcessed(state.iterations());
}

enum class Kind { kNative, kStdMap, kBtree, kLoopback, kRemote };

void BM(benchmark::State& state, Kind kind, Mix mix, KeyDist dist) {
  Env& env = GetEnv();
  if (kind == Kind::kStdMap) {
    BaselineTarget<StdMap> t{*env.std_map};
    return RunTrace(state, t, mix, dist, nullptr);
  }
  if (kind == Kind::kBtree) {
    BaselineTarget<BtreeMap> t{*env.btree_map};
    return RunTrace(state, t, mix, dist, nullptr);
  }
  if (!env.status.ok()) return state.SkipWithError(env.status.ToString().c_str());
  const rdma::NodeId node = kind == Kind::kRemote ? kOther : kHome;
  auto session = env.cluster->NewSession(node);
  if (!session.ok()) return state.SkipWithError(session.status().ToString().c_str());
  auto client = env.map->NewClient(**session);
  if (!client.ok()) return state.SkipWithError(client.status().ToString().c_str());
  MapTarget t{**client, kind == Kind::kLoopback ? structures::Path::kLoopback : structures::Path::kAuto};
  if (kind != Kind::kNative) {
    // Warm the leaf cache as a long-running client's would be: a Get in
    // every leaf (not timed).
    for (uint64_t k : env.warm_keys) (void)(*client)->Get(k, t.path);
  }
  RunTrace(state, t, mix, dist, kind == Kind::kNative ? nullptr : client->get());
  client->reset();
}

void Register(bool set_min_time) {
  auto add = [&](const std::string& name, Kind kind, Mix mix, KeyDist dist, bool two_threads) {
    const std::string label = name + "/" + MixName(mix) + "/" + bench::KeyDistName(dist);
    auto* b = benchmark::RegisterBenchmark(label.c_str(),
                                           [kind, mix, dist](benchmark::State& st) { BM(st, kind, mix, dist); });
    b->Threads(1);
    if (two_threads) b->Threads(2);
    b->UseRealTime();
    if (set_min_time) b->MinTime(0.4);
  };
  // YCSB-like mixes (A 50/50, B 95/5, C 100/0 get/put; E 95% Scan(50) / 5%
  // insert) on every path and the baselines, 1 and 2 threads.
  const std::pair<const char*, Kind> kinds[] = {{"native/skiplist", Kind::kNative},
                                                {"native/std_map_mutex", Kind::kStdMap},
                                                {"native/btree_map_mutex", Kind::kBtree},
                                                {"loopback/skiplist", Kind::kLoopback},
                                                {"remote/skiplist", Kind::kRemote}};
  for (KeyDist dist : {KeyDist::kUniform, KeyDist::kZipf}) {
    for (Mix mix : {Mix::kGet95Put5, Mix::kGet50Put50, Mix::kGet100}) {
      for (auto [name, kind] : kinds) add(name, kind, mix, dist, true);
    }
  }
  for (auto [name, kind] : kinds) add(name, kind, Mix::kScan95Insert5, KeyDist::kUniform, true);
  // Uncontended cost of a put alone, per path.
  const std::pair<const char*, Kind> paths[] = {
      {"native/skiplist", Kind::kNative}, {"loopback/skiplist", Kind::kLoopback}, {"remote/skiplist", Kind::kRemote}};
  for (auto [name, kind] : paths) add(name, kind, Mix::kPut100, KeyDist::kUniform, false);
  add("remote/skiplist", Kind::kRemote, Mix::kGet100Cold, KeyDist::kUniform, false);
  add("remote/skiplist", Kind::kRemote, Mix::kScan100, KeyDist::kUniform, false);
}

}  // namespace

int main(int argc, char** argv) {
  bench::MainSpec spec;
  spec.name = "skiplist_bench";
  spec.usage =
      "skiplist_bench [--fabric=soft|verbs|auto] [--device=NAME] [--port=N] [--gid-index=N] [--keys=N] "
      "[Google Benchmark flags]\n"
      "structures::SkipList (ordered map) throughput on the native, loopback and remote paths,\n"
      "with per-op NIC ops, doorbells, round trips and bytes, next to std::map and absl::btree_map\n"
      "behind a std::mutex. --keys: keys pre-populated on node 0 (default 1000000).\n";
  spec.own_flag = [](absl::string_view arg, std::string* error) {
    uint64_t n = 0;
    if (arg.substr(0, 7) == "--keys=") {
      if (!absl::SimpleAtoi(arg.substr(7), &n) || n < 100 || n > bench::kIndexMask) {
        *error = absl::StrCat("bad ", arg, " (100..", bench::kIndexMask, ")");
      }
      g_num_keys = n;
      return true;
    }
    return false;
  };
  spec.register_benchmarks = Register;
  spec.teardown = [] {
    if (g_env == nullptr) return;
    g_env->map.reset();
    g_env->cluster.reset();
    delete g_env;
  };
  return bench::RunBenchmarkMain(argc, argv, spec, &g_fabric, &g_device_flags);
}
