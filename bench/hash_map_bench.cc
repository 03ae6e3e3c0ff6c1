// Throughput and per-operation costs of structures::HashMap on its three
// access paths, next to the single-machine maps a user would pick instead
// (docs/design.md §8).
//
//   bazel run -c opt //bench:hash_map_bench -- --benchmark_counters_tabular=true
//
// Setup (once per process, lazily): a 2-node cluster; one HashMap<Value32>
// (32-byte values); a key set of --keys=N (default 100000) random keys all
// homed on node 0, pre-populated; node 0's part of the map is sized for a
// load factor of --load_percent (default 80%). The two baselines hold the
// same keys and values:
//   std_mutex       std::unordered_map + one std::mutex
//   absl_sharded64  absl::flat_hash_map in 64 shards, one absl::Mutex each
//
// Benchmarks, each with 1 and 2 threads (every thread on the same node, with
// its own rdma::Session and map Client), for 95% get / 5% put, 50/50 and
// gets only (YCSB B, A, C), over uniform and Zipf(0.99) key popularity
// (bench/zipf.h):
//   native/{map,std_mutex,absl_sharded64}  threads on node 0, Path::kAuto
//   loopback/map                           threads on node 0, Path::kLoopback
//   remote/map                             threads on node 1, Path::kAuto
// Then, one thread, uniform keys, for each path of the map: put100 (puts
// only, every put overwrites): the uncontended per-operation cost of a put
// (get100 with 1 thread is a get's).
// The main map is created without room to grow (max_groups_per_node ==
// groups_per_node), so its load is exactly --load_percent. Growth has its
// own benchmarks:
//   loadsweep/{native,remote}/map/get95_put5/uniform/load:{50,80,90}
//       the same workload on maps of the same keys at 50, 80 and 90 % load
//       (each its own fixed-size map, built once, in a cluster of its own).
//   grow/{native,loopback,remote}/map/insert
//       one thread inserts 10 x the initial capacity of fresh keys into a
//       map created for 1/10 of them (room for 32x): every run starts from
//       a fresh map, so the measured loop includes every split; counters
//       splits_per_1k, segments and load (entries / slots in use) at the end.
//   grow/mixed/map/native_insert+remote_get
//       the same inserts on node 0 natively while a thread on node 1 gets
//       keys stored before the run (every get must hit): the remote reader
//       meets the splits through its cached directory (refreshes_per_1k).
// Every thread replays a pre-generated trace (identical for the map and the
// baselines), so random number generation is not measured. Puts overwrite
// existing keys, so the map's size stays constant and every get hits.
//
// Reported: items_per_second (all threads together; wall-clock time) and, per
// operation, the calling threads' rdma::ThisThreadCounters deltas (NIC ops,
// doorbells, round trips waited, bytes), summed over the threads and divided
// by the total iteration count. `misses` and `wrong` count gets/puts that did
// not find the key or returned a value of another key; both must be 0.
//
// Flags (ours, mixed freely with the Google Benchmark ones):
// --fabric=soft|verbs|auto, --keys=N, --load_percent=P. Each benchmark runs
// MinTime(0.4 s) unless --benchmark_min_time is given.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/map_baselines.h"
#include "bench/zipf.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_main.h"
#include "benchmark/benchmark.h"
#include "rdma/cluster.h"
#include "rdma/verbs/flags.h"
#include "rdma/op_counters.h"
#include "structures/hash_map/hash_map.h"

namespace {

using bench::KeyDist;

struct Value32 {
  uint64_t w[4];
};
static_assert(sizeof(Value32) == 32);

Value32 MakeValue(uint64_t key, uint64_t seq) { return Value32{{key, seq, ~key, seq ^ key}}; }

using Map = structures::HashMap<Value32>;
using MapClient = Map::Client;

constexpr rdma::NodeId kHome = 0;   // owns every benchmark key
constexpr rdma::NodeId kOther = 1;  // remote-path threads live here
constexpr size_t kTraceLen = size_t{1} << 18;
constexpr size_t kShards = 64;

rdma::FabricKind g_fabric = rdma::FabricKind::kAuto;
rdma::verbs::DeviceFlags g_device_flags;  // --device/--port/--gid-index
size_t g_num_keys = 100000;
size_t g_load_percent = 80;  // of node 0's part
constexpr int kSweepLoads[] = {50, 80, 90};

struct Workload {
  int put_percent;
  KeyDist dist;
};

// Everything shared by all benchmarks: created once, destroyed in main after
// the run (after every benchmark thread has dropped its session and client).
struct Env {
  absl::Status map_status;  // why the map benchmarks are skipped, if they are
  std::unique_ptr<rdma::Cluster> cluster;
  std::unique_ptr<Map> map;
  std::vector<uint64_t> keys;
  std::unique_ptr<bench::MutexUnorderedMap<Value32>> std_map;
  std::unique_ptr<bench::ShardedFlatHashMap<Value32, kShards>> absl_map;

  using Trace = bench::KeyTrace;
  bench::TraceCache traces;

  const Trace& GetTrace(const Workload& w, int thread) {
    return traces.Get(w.put_percent, w.dist, thread, [&] {
      const uint64_t seed = 0x5eed0000u + 1000u * static_cast<uint64_t>(thread) +
                            10u * static_cast<uint64_t>(w.put_percent) + static_cast<uint64_t>(w.dist);
      return bench::MakeKeyTrace(keys, w.dist, w.put_percent, kTraceLen, seed);
    });
  }
};

Env* g_env = nullptr;
std::once_flag g_env_once;

absl::Status BuildMap(Env& env) {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = 2;
  o.fabric.kind = g_fabric;
  (void)g_device_flags.Apply(&o.fabric);  // validated in main
  // Node 0 holds every key: size its part for a load factor of
  // --load_percent (default 80%).
  structures::HashMapOptions mo;
  const size_t groups =
      (g_num_keys * 100 + Map::kSlotsPerGroup * g_load_percent - 1) / (Map::kSlotsPerGroup * g_load_percent);
  mo.groups_per_node = groups;
  mo.max_groups_per_node = groups;  // a fixed-size map: exactly --load_percent
  // Each node's arena holds its part plus sessions' and clients' lines.
  o.node.arena_bytes = Map::PartBytes(mo) + (size_t{16} << 20);
  auto cluster = rdma::Cluster::Create(o);
  if (!cluster.ok()) return cluster.status();
  env.cluster = std::move(*cluster);
  auto map = Map::Create(*env.cluster, mo);
  if (!map.ok()) return map.status();
  env.map = std::make_unique<Map>(std::move(*map));
  // Populate through the native path. A key whose two windows are already
  // full (below a load of ~0.85 this does not happen) is dropped and
  // replaced by another one.
  auto session = env.cluster->NewSession(kHome);
  if (!session.ok()) return session.status();
  auto client = env.map->NewClient(**session);
  if (!client.ok()) return client.status();
  absl::Status error;
  size_t dropped = 0;
  env.keys = bench::MakeKeys(g_num_keys, 42, [&](uint64_t k) {
    if (!error.ok()) return true;  // end MakeKeys quickly; the error is returned below
    if (env.map->HomeOf(k) != kHome) return false;
    auto r = (*client)->Put(k, MakeValue(k, 0));
    if (r.ok()) return true;
    if (absl::IsResourceExhausted(r.status())) {
      ++dropped;
    } else {
      error = r.status();
    }
    return false;
  });
  if (!error.ok()) return error;
  if (dropped > 0) fprintf(stderr, "hash_map_bench: %zu keys dropped (both windows full)\n", dropped);
  return absl::OkStatus();
}

Env& GetEnv() {
  std::call_once(g_env_once, [] {
    g_env = new Env;
    g_env->map_status = BuildMap(*g_env);
    if (!g_env->map_status.ok()) {
      fprintf(stderr, "hash_map_bench: map setup failed, map benchmarks skipped: %s\n",
              g_env->map_status.ToString().c_str());
      g_env->keys = bench::MakeKeys(g_num_keys, 42, [](uint64_t) { return true; });
    }
    g_env->std_map = std::make_unique<bench::MutexUnorderedMap<Value32>>(g_env->keys.size());
    g_env->absl_map = std::make_unique<bench::ShardedFlatHashMap<Value32, kShards>>(g_env->keys.size());
    // In shuffled order: keys are in Zipf rank order, and filling the
    // node-based std::unordered_map in that order would put the hottest
    // nodes next to each other in memory, a locality the map (and the flat
    // absl map) cannot have.
    for (uint64_t k : bench::Shuffled(g_env->keys, 7)) {
      g_env->std_map->Put(k, MakeValue(k, 0));
      g_env->absl_map->Put(k, MakeValue(k, 0));
    }
  });
  return *g_env;
}

// Result checks, without costing the baselines a StatusOr.
struct Tally {
  uint64_t misses = 0;
  uint64_t wrong = 0;
};
inline bool Check(const std::optional<Value32>& r, uint64_t key, Tally& t, benchmark::State&) {
  if (!r.has_value()) {
    ++t.misses;
  } else if (r->w[0] != key) {
    ++t.wrong;
  }
  return true;
}
inline bool Check(const absl::StatusOr<std::optional<Value32>>& r, uint64_t key, Tally& t, benchmark::State& state) {
  if (!r.ok()) {
    state.SkipWithError(r.status().ToString().c_str());
    return false;
  }
  return Check(*r, key, t, state);
}

template <typename Target>
void RunTrace(benchmark::State& state, Target& target, const Workload& w) {
  Env& env = GetEnv();
  const Env::Trace& trace = env.GetTrace(w, state.thread_index());
  const uint64_t* keys = trace.keys.data();
  Tally tally;
  size_t i = 0;
  uint64_t seq = 0;
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  for (auto _ : state) {
    const uint64_t key = keys[i];
    const bool put = trace.is_put(i);
    i = (i + 1) & (kTraceLen - 1);
    if (put) {
      auto r = target.Put(key, MakeValue(key, ++seq));
      if (!Check(r, key, tally, state)) break;
      benchmark::DoNotOptimize(r);
    } else {
      auto r = target.Get(key);
      if (!Check(r, key, tally, state)) break;
      benchmark::DoNotOptimize(r);
    }
  }
  const rdma::OpCounters d = rdma::ThisThreadCounters() - before;
  using C = benchmark::Counter;
  bench::SetPerOpCounters(state, d);
  state.counters["misses"] = C(static_cast<double>(tally.misses));
  state.counters["wrong"] = C(static_cast<double>(tally.wrong));
  state.SetItemsProcessed(state.iterations());
}

template <typename M>
struct BaselineTarget {
  M& m;
  std::optional<Value32> Get(uint64_t key) { return m.Get(key); }
  std::optional<Value32> Put(uint64_t key, const Value32& v) { return m.Put(key, v); }
};

struct MapTarget {
  MapClient& c;
  structures::Path path;
  absl::StatusOr<std::optional<Value32>> Get(uint64_t key) { return c.Get(key, path); }
  absl::StatusOr<std::optional<Value32>> Put(uint64_t key, const Value32& v) { return c.Put(key, v, path); }
};

enum class Kind { kMapNative, kStdMutex, kAbslSharded, kMapLoopback, kMapRemote };

// --- Load sweep: one fixed-size map per load, same keys, own cluster. -------
struct SweepEnv {
  absl::Status status;
  std::unique_ptr<rdma::Cluster> cluster;
  std::map<int, std::unique_ptr<Map>> maps;  // by load percent
};
SweepEnv* g_sweep = nullptr;
std::once_flag g_sweep_once;

structures::HashMapOptions FixedOptions(size_t keys, size_t load_percent) {
  structures::HashMapOptions mo;
  mo.groups_per_node = (keys * 100 + Map::kSlotsPerGroup * load_percent - 1) / (Map::kSlotsPerGroup * load_percent);
  mo.max_groups_per_node = mo.groups_per_node;
  return mo;
}

absl::Status BuildSweep(SweepEnv& sw, const std::vector<uint64_t>& keys) {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = 2;
  o.fabric.kind = g_fabric;
  (void)g_device_flags.Apply(&o.fabric);
  o.node.arena_bytes = size_t{16} << 20;
  for (int p : kSweepLoads) o.node.arena_bytes += Map::PartBytes(FixedOptions(keys.size(), p));
  auto cluster = rdma::Cluster::Create(o);
  if (!cluster.ok()) return cluster.status();
  sw.cluster = std::move(*cluster);
  auto session = sw.cluster->NewSession(kHome);
  if (!session.ok()) return session.status();
  for (int p : kSweepLoads) {
    fprintf(stderr, "hash_map_bench: building the %d %% load map\n", p);
    auto map = Map::Create(*sw.cluster, FixedOptions(keys.size(), p));
    if (!map.ok()) return map.status();
    auto client = map->NewClient(**session);
    if (!client.ok()) return client.status();
    size_t dropped = 0;
    for (uint64_t k : keys) {  // the main map's keys: the traces are shared
      auto r = (*client)->Put(k, MakeValue(k, 0));
      if (absl::IsResourceExhausted(r.status())) {
        ++dropped;  // both windows full: its gets will count as misses
      } else if (!r.ok()) {
        return r.status();
      }
    }
    if (dropped > 0) fprintf(stderr, "hash_map_bench: %d %% load map: %zu keys did not fit\n", p, dropped);
    client->reset();
    sw.maps[p] = std::make_unique<Map>(std::move(*map));
  }
  return absl::OkStatus();
}

SweepEnv& GetSweep() {
  std::call_once(g_sweep_once, [] {
    g_sweep = new SweepEnv;
    g_sweep->status = BuildSweep(*g_sweep, GetEnv().keys);
  });
  return *g_sweep;
}

void BM_LoadSweep(benchmark::State& state, Kind kind, int load, Workload w) {
  SweepEnv& sw = GetSweep();
  if (!sw.status.ok()) {
    state.SkipWithError(sw.status.ToString().c_str());
    return;
  }
  const rdma::NodeId node = kind == Kind::kMapRemote ? kOther : kHome;
  auto session = sw.cluster->NewSession(node);
  if (!session.ok()) {
    state.SkipWithError(session.status().ToString().c_str());
    return;
  }
  auto client = sw.maps.at(load)->NewClient(**session);
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  MapTarget t{**client, structures::Path::kAuto};
  RunTrace(state, t, w);
  auto size = (*client)->Size(kHome);
  if (size.ok()) {
    state.counters["load"] = static_cast<double>(*size) / (sw.maps.at(load)->capacity() / 2);
  }
  client->reset();
}

// --- Growth: a fresh small map per run, grown by the measured inserts. ------
enum class GrowKind { kNative, kLoopback, kRemote, kMixed };

struct GrowRun {
  std::unique_ptr<rdma::Cluster> cluster;  // destroyed after the map (declared first)
  std::unique_ptr<Map> map;
  std::vector<uint64_t> stored;  // in the map before the run (the mixed reader's keys)
};
GrowRun* g_grow = nullptr;  // the current run's (set by thread 0 before the loop)

// Fresh keys homed on node 0 of `map`.
std::vector<uint64_t> FreshKeys(const Map& map, size_t n, uint64_t seed) {
  return bench::MakeKeys(n, seed, [&map](uint64_t k) { return map.HomeOf(k) == kHome; });
}

absl::StatusOr<std::unique_ptr<GrowRun>> NewGrowRun(size_t inserts) {
  auto run = std::make_unique<GrowRun>();
  // Created for a tenth of the inserts at 80 % load, with room for 32x.
  structures::HashMapOptions mo = FixedOptions(inserts / 10, 80);
  mo.max_groups_per_node = 32 * mo.groups_per_node;
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = 2;
  o.fabric.kind = g_fabric;
  (void)g_device_flags.Apply(&o.fabric);
  o.node.arena_bytes = Map::PartBytes(mo) + (size_t{16} << 20);
  auto cluster = rdma::Cluster::Create(o);
  if (!cluster.ok()) return cluster.status();
  run->cluster = std::move(*cluster);
  auto map = Map::Create(*run->cluster, mo);
  if (!map.ok()) return map.status();
  run->map = std::make_unique<Map>(std::move(*map));
  return run;
}

void BM_Grow(benchmark::State& state, GrowKind kind) {
  const size_t inserts = static_cast<size_t>(state.max_iterations);
  const bool reader = kind == GrowKind::kMixed && state.thread_index() == 1;
  static std::vector<uint64_t> fresh;  // set by thread 0 before the loop
  if (state.thread_index() == 0) {
    auto run = NewGrowRun(inserts);
    if (!run.ok()) {
      state.SkipWithError(run.status().ToString().c_str());
      return;
    }
    delete g_grow;  // the previous run's: every thread of it is done
    g_grow = run->release();
    fresh = FreshKeys(*g_grow->map, inserts + inserts / 20, 0x9e0000u);
    if (kind == GrowKind::kMixed) {  // the reader's keys: the last 5 %, stored first
      auto s = g_grow->cluster->NewSession(kHome);
      auto c = s.ok() ? g_grow->map->NewClient(**s)
                      : absl::StatusOr<std::unique_ptr<MapClient>>(s.status());
      for (size_t i = inserts; c.ok() && i < fresh.size(); ++i) {
        if ((*c)->Put(fresh[i], MakeValue(fresh[i], 0)).ok()) g_grow->stored.push_back(fresh[i]);
      }
    }
  }
  // Threads meet at the loop's start: g_grow and `fresh` are set from here on.
  const rdma::NodeId node = kind == GrowKind::kRemote || reader ? kOther : kHome;
  const structures::Path path = kind == GrowKind::kLoopback ? structures::Path::kLoopback : structures::Path::kAuto;
  std::unique_ptr<rdma::Session> session;
  std::unique_ptr<MapClient> client;
  Tally tally;
  size_t i = 0;
  rdma::OpCounters before;
  for (auto _ : state) {
    if (client == nullptr) {  // first iteration: g_grow is set; not timed
      state.PauseTiming();
      auto s = g_grow->cluster->NewSession(node);
      auto c = s.ok() ? g_grow->map->NewClient(**s)
                      : absl::StatusOr<std::unique_ptr<MapClient>>(s.status());
      state.ResumeTiming();
      if (!c.ok()) {
        state.SkipWithError(c.status().ToString().c_str());
        break;
      }
      session = std::move(*s);
      client = std::move(*c);
      before = rdma::ThisThreadCounters();
    }
    if (reader) {
      const uint64_t k = g_grow->stored[i++ % g_grow->stored.size()];
      auto r = client->Get(k);
      if (!Check(r, k, tally, state)) break;
    } else {
      const uint64_t k = fresh[i++];
      auto r = client->Insert(k, MakeValue(k, 0), path);
      if (!r.ok()) {
        state.SkipWithError(r.status().ToString().c_str());
        break;
      }
    }
  }
  const rdma::OpCounters d = rdma::ThisThreadCounters() - before;
  using C = benchmark::Counter;
  if (client != nullptr) {
    const auto& g = client->growth_stats();
    if (reader) {
      state.counters["refreshes_per_1k"] = C(1000.0 * g.refreshes / std::max<size_t>(1, i));
      state.counters["misses"] = C(static_cast<double>(tally.misses + tally.wrong));
      if (tally.misses + tally.wrong > 0) state.SkipWithError("a get of a stored key missed during growth");
    } else {
      bench::SetPerOpCounters(state, d);
      state.counters["splits_per_1k"] = C(1000.0 * g.splits / std::max<size_t>(1, i));
    }
    if (state.thread_index() == 0) {
      auto segs = client->SegmentsInUse(kHome);
      auto size = client->Size(kHome);
      if (segs.ok() && size.ok()) {
        state.counters["segments"] = C(static_cast<double>(*segs));
        state.counters["load"] = C(static_cast<double>(*size) /
                                   (*segs * g_grow->map->geometry().segment_units * Map::kSlotsPerUnit));
      }
    }
  }
  state.SetItemsProcessed(state.iterations());
  client.reset();
  session.reset();
}

void BM_Map(benchmark::State& state, Kind kind, Workload w) {
  Env& env = GetEnv();
  switch (kind) {
    case Kind::kStdMutex: {
      BaselineTarget<bench::MutexUnorderedMap<Value32>> t{*env.std_map};
      RunTrace(state, t, w);
      return;
    }
    case Kind::kAbslSharded: {
      BaselineTarget<bench::ShardedFlatHashMap<Value32, kShards>> t{*env.absl_map};
      RunTrace(state, t, w);
      return;
    }
    default:
      break;
  }
  if (!env.map_status.ok()) {
    state.SkipWithError(env.map_status.ToString().c_str());
    return;
  }
  const rdma::NodeId node = kind == Kind::kMapRemote ? kOther : kHome;
  const structures::Path path = kind == Kind::kMapLoopback ? structures::Path::kLoopback : structures::Path::kAuto;
  // Per thread: its own session and client, both dropped before returning
  // (the client first).
  auto session = env.cluster->NewSession(node);
  if (!session.ok()) {
    state.SkipWithError(session.status().ToString().c_str());
    return;
  }
  auto client = env.map->NewClient(**session);
  if (!client.ok()) {
    state.SkipWithError(client.status().ToString().c_str());
    return;
  }
  MapTarget t{**client, path};
  RunTrace(state, t, w);
  client->reset();
}

std::string MixName(int put_percent) {
  switch (put_percent) {
    case 0:
      return "get100";
    case 100:
      return "put100";
    default:
      return "get" + std::to_string(100 - put_percent) + "_put" + std::to_string(put_percent);
  }
}

void Register(bool set_min_time) {
  auto add = [&](const char* name, Kind kind, Workload w, bool two_threads) {
    const std::string label = std::string(name) + "/" + MixName(w.put_percent) + "/" + bench::KeyDistName(w.dist);
    auto* b = benchmark::RegisterBenchmark(label.c_str(), [kind, w](benchmark::State& st) { BM_Map(st, kind, w); });
    b->Threads(1);
    if (two_threads) b->Threads(2);
    b->UseRealTime();
    if (set_min_time) b->MinTime(0.4);
  };
  // Throughput: the three mixes, 1 and 2 threads per node.
  // YCSB-like: B 95/5, A 50/50, C 100/0 get/put.
  const Workload workloads[] = {{5, KeyDist::kUniform},  {5, KeyDist::kZipf}, {50, KeyDist::kUniform},
                                {50, KeyDist::kZipf},    {0, KeyDist::kUniform}, {0, KeyDist::kZipf}};
  const std::pair<const char*, Kind> kinds[] = {{"native/map", Kind::kMapNative},
                                                {"native/std_mutex", Kind::kStdMutex},
                                                {"native/absl_sharded64", Kind::kAbslSharded},
                                                {"loopback/map", Kind::kMapLoopback},
                                                {"remote/map", Kind::kMapRemote}};
  for (const Workload& w : workloads) {
    for (auto [name, kind] : kinds) add(name, kind, w, /*two_threads=*/true);
  }
  // Uncontended cost of a put alone (one thread, uniform keys; a get alone is
  // get100 above): the per-op counters of a pure put (overwrite) workload.
  const std::pair<const char*, Kind> map_kinds[] = {
      {"native/map", Kind::kMapNative}, {"loopback/map", Kind::kMapLoopback}, {"remote/map", Kind::kMapRemote}};
  for (auto [name, kind] : map_kinds) add(name, kind, {100, KeyDist::kUniform}, /*two_threads=*/false);
  // Load sweep: 95/5, uniform, one thread, native and remote.
  for (int load : kSweepLoads) {
    for (auto [name, kind] : {std::pair{"native", Kind::kMapNative}, std::pair{"remote", Kind::kMapRemote}}) {
      const std::string label = absl::StrCat("loadsweep/", name, "/map/get95_put5/uniform/load:", load);
      auto* b = benchmark::RegisterBenchmark(label.c_str(), [kind, load](benchmark::State& st) {
        BM_LoadSweep(st, kind, load, {5, KeyDist::kUniform});
      });
      b->UseRealTime();
      if (set_min_time) b->MinTime(0.4);
    }
  }
  // Growth: a fixed number of inserts per run (10x the initial capacity's
  // worth of keys), each run on a fresh map.
  const size_t grow_inserts = std::max<size_t>(10000, g_num_keys / 2);
  for (auto [name, kind, threads] :
       {std::tuple{"grow/native/map/insert", GrowKind::kNative, 1},
        std::tuple{"grow/loopback/map/insert", GrowKind::kLoopback, 1},
        std::tuple{"grow/remote/map/insert", GrowKind::kRemote, 1},
        std::tuple{"grow/mixed/map/native_insert+remote_get", GrowKind::kMixed, 2}}) {
    const size_t n = kind == GrowKind::kNative || kind == GrowKind::kMixed ? grow_inserts : grow_inserts / 5;
    auto* b = benchmark::RegisterBenchmark(name, [kind](benchmark::State& st) { BM_Grow(st, kind); });
    b->Threads(threads)->Iterations(static_cast<benchmark::IterationCount>(n))->UseRealTime();
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The absl baseline as a production build runs it: Debian's libabsl is
  // compiled without NDEBUG, so absl::Mutex's deadlock detection is on by
  // default, and it takes a process-wide spin lock on every Lock/ReaderLock,
  // which would make the 64-shard map measure that lock rather than itself.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bench::MainSpec spec;
  spec.name = "hash_map_bench";
  spec.usage =
      "hash_map_bench [--fabric=soft|verbs|auto] [--device=NAME] [--port=N] [--gid-index=N] [--keys=N] "
      "[--load_percent=P] [Google Benchmark flags]\n"
      "structures::HashMap get/put throughput on the native, loopback and remote paths,\n"
      "with per-op NIC ops, doorbells, round trips and bytes, next to std::unordered_map+std::mutex\n"
      "and a 64-shard absl::flat_hash_map+absl::Mutex. --keys: key set size (default 100000);\n"
      "--load_percent: keys / slots of the home node's part (default 80).\n";
  spec.own_flag = [](absl::string_view arg, std::string* error) {
    uint64_t n = 0;
    if (arg.substr(0, 7) == "--keys=") {
      if (!absl::SimpleAtoi(arg.substr(7), &n) || n == 0 || n > bench::kIndexMask) *error = absl::StrCat("bad ", arg);
      g_num_keys = n;
      return true;
    }
    if (arg.substr(0, 15) == "--load_percent=") {
      if (!absl::SimpleAtoi(arg.substr(15), &n) || n == 0 || n > 90) *error = absl::StrCat("bad ", arg, " (1..90)");
      g_load_percent = n;
      return true;
    }
    return false;
  };
  spec.register_benchmarks = Register;
  spec.teardown = [] {  // map before cluster
    delete g_grow;  // map before cluster (GrowRun's member order)
    g_grow = nullptr;
    if (g_sweep != nullptr) {
      g_sweep->maps.clear();
      g_sweep->cluster.reset();
      delete g_sweep;
    }
    if (g_env == nullptr) return;
    g_env->map.reset();
    g_env->cluster.reset();
    delete g_env;
  };
  return bench::RunBenchmarkMain(argc, argv, spec, &g_fabric, &g_device_flags);
}
