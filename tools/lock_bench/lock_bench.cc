// lock_bench: the lock-table microbenchmark of the ALock paper (docs/design.md §4, §8).
//
// Keys are spread over the nodes (key k lives on node k % nodes, each node
// holds one LockTable). Every thread lives on a node with its own Session and
// LockClient; each operation picks a key on its own node with probability
// p-local (else a key on a uniformly chosen other node), locks it, spends
// cs-ns in the critical section, unlocks. After warm-up, the run measures
// for a fixed duration and reports throughput, acquire latency percentiles,
// hardware-independent NIC counts per acquire (overall and split by whether
// the acquiring thread was on the lock's node), the share of acquires won by
// each cohort, and the longest run of one cohort while the other waited.
//
// Exit codes: 0 ok, 1 runtime failure (cluster, NIC, lock error), 2 bad input.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <boost/program_options.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/verbs/flags.h"

namespace {

namespace po = boost::program_options;
using Clock = std::chrono::steady_clock;

struct Config {
  std::string lock = "alock";
  std::string fabric = "soft";
  int nodes = 2;
  int threads_per_node = 2;
  int64_t keys = 1024;
  double p_local = 90;
  int local_budget = locks::kDefaultBudget;
  int remote_budget = locks::kDefaultBudget;
  int64_t cs_ns = 0;
  double warmup = 1;
  double duration = 5;
  uint64_t seed = 1;
  std::string output = "text";
  std::string local_path = "native";
  int64_t nic_latency_ns = 0;
  bool cohort_stats = true;
  bool quiet = false;

  locks::LockKind kind = locks::LockKind::kALock;
  rdma::FabricKind fabric_kind = rdma::FabricKind::kSoft;
  rdma::verbs::DeviceFlags device_flags;  // --device/--port/--gid-index
};

// Log-linear latency histogram: 2^k ranges split into 32 linear sub-buckets
// (about 3% resolution), so percentiles cost no per-sample memory.
class Histogram {
 public:
  static constexpr int kSub = 32;
  static constexpr int kRanges = 40;
  void Add(uint64_t ns) { ++counts_[Index(ns)]; ++n_; }
  void Merge(const Histogram& o) {
    for (size_t i = 0; i < counts_.size(); ++i) counts_[i] += o.counts_[i];
    n_ += o.n_;
  }
  uint64_t count() const { return n_; }
  // Upper edge of the bucket holding the q-quantile.
  double Quantile(double q) const {
    if (n_ == 0) return 0;
    const uint64_t rank = static_cast<uint64_t>(std::ceil(q * static_cast<double>(n_)));
    uint64_t seen = 0;
    for (size_t i = 0; i < counts_.size(); ++i) {
      seen += counts_[i];
      if (seen >= std::max<uint64_t>(rank, 1)) return static_cast<double>(UpperEdge(i));
    }
    return static_cast<double>(UpperEdge(counts_.size() - 1));
  }

 private:
  static size_t Index(uint64_t v) {
    if (v < kSub) return static_cast<size_t>(v);
    const int msb = 63 - __builtin_clzll(v);  // >= 5
    const int range = msb - 4;                // 1.. ; range r covers [2^(r+4), 2^(r+5))
    const uint64_t sub = (v >> (msb - 5)) & (kSub - 1);
    const size_t i = static_cast<size_t>(range) * kSub + sub;
    return std::min(i, static_cast<size_t>(kRanges * kSub - 1));
  }
  static uint64_t UpperEdge(size_t i) {
    if (i < kSub) return i + 1;
    const size_t range = i / kSub, sub = i % kSub;
    const int msb = static_cast<int>(range) + 4;
    return (uint64_t{1} << msb) + ((sub + 1) << (msb - 5));
  }
  std::vector<uint64_t> counts_ = std::vector<uint64_t>(kRanges * kSub, 0);
  uint64_t n_ = 0;
};

// Per-lock cohort bookkeeping in process memory (all nodes share the process
// on the soft backend). `waiting` counts threads of each cohort inside Lock();
// the rest is only touched inside the lock's critical section.
struct alignas(64) LockCohortState {
  std::atomic<int> waiting[2] = {0, 0};
  uint64_t run[2] = {0, 0};
  uint64_t max_run[2] = {0, 0};
};

struct ThreadResult {
  uint64_t acquires[2] = {0, 0};  // by cohort of the acquiring thread (0 local, 1 remote)
  rdma::OpCounters cost[2];       // NIC counts of those acquires (lock + unlock)
  Histogram latency;              // Lock() call latency, ns
  locks::ALockStats alock;        // ALock only: whole run (warm-up included)
  std::string error;
};

struct alignas(64) Progress {
  std::atomic<uint64_t> ops{0};
};

enum Phase : int { kWarmup = 0, kMeasure = 1, kStop = 2 };

int BadInput(const std::string& msg) {
  std::cerr << "lock_bench: error: " << msg << "\nTry 'lock_bench --help'.\n";
  return 2;
}

void BusyFor(int64_t ns) {
  if (ns <= 0) return;
  const auto end = Clock::now() + std::chrono::nanoseconds(ns);
  while (Clock::now() < end) {
  }
}

double PerAcquire(uint64_t v, uint64_t acquires) {
  return acquires == 0 ? 0.0 : static_cast<double>(v) / static_cast<double>(acquires);
}

int Run(const Config& cfg) {
  rdma::ClusterOptions co;
  co.named_bytes = 0;  // no named structures: nothing registered for them
  co.num_nodes = cfg.nodes;
  const int64_t keys_per_node = (cfg.keys + cfg.nodes - 1) / cfg.nodes;
  co.node.arena_bytes = std::max<size_t>(size_t{16} << 20, static_cast<size_t>(keys_per_node) * 64 + (8 << 20));
  co.fabric.kind = cfg.fabric_kind;
  if (absl::Status s = cfg.device_flags.Apply(&co.fabric); !s.ok()) {
    std::cerr << "lock_bench: error: " << s.message() << "\n";
    return 2;
  }
  co.fabric.soft_latency = std::chrono::nanoseconds(cfg.nic_latency_ns);
  auto cluster_or = rdma::Cluster::Create(co);
  if (!cluster_or.ok()) {
    std::cerr << "lock_bench: cannot create the cluster: " << cluster_or.status() << "\n";
    return 1;
  }
  rdma::Cluster& cluster = **cluster_or;

  // Key k lives on node k % nodes, at index k / nodes of that node's table.
  std::vector<locks::LockTable> tables(cfg.nodes);
  std::vector<int64_t> keys_on(cfg.nodes, 0);
  for (int64_t k = 0; k < cfg.keys; ++k) ++keys_on[k % cfg.nodes];
  const locks::LockInit init{cfg.kind, {cfg.local_budget, cfg.remote_budget}};
  for (int n = 0; n < cfg.nodes; ++n) {
    auto t = locks::LockTable::Create(cluster.node(static_cast<rdma::NodeId>(n)), keys_on[n], init);
    if (!t.ok()) {
      std::cerr << "lock_bench: cannot allocate the lock table on node " << n << ": " << t.status() << "\n";
      return 1;
    }
    tables[n] = *t;
  }
  std::vector<std::vector<LockCohortState>> cohort(cfg.nodes);
  for (int n = 0; n < cfg.nodes; ++n) cohort[n] = std::vector<LockCohortState>(keys_on[n]);

  const int num_threads = cfg.nodes * cfg.threads_per_node;
  std::vector<ThreadResult> results(num_threads);
  std::vector<Progress> progress(num_threads);
  std::atomic<int> phase{kWarmup};
  std::atomic<int> ready{0};
  std::atomic<bool> failed{false};
  const locks::Path local_path = cfg.local_path == "loopback" ? locks::Path::kLoopback : locks::Path::kAuto;

  auto worker = [&](int t) {
    ThreadResult& r = results[t];
    const auto self = static_cast<rdma::NodeId>(t % cfg.nodes);
    auto session = cluster.NewSession(self);
    if (!session.ok()) {
      r.error = absl::StrCat("NewSession: ", session.status().ToString());
      failed = true;
      ready.fetch_add(1);
      return;
    }
    locks::ClientOptions o;
    o.timeout = std::chrono::seconds(30);
    auto client =
        locks::NewLockClient(cfg.kind, cluster.node(self), cfg.kind == locks::LockKind::kLocalMcs ? nullptr : session->get(), o);
    if (!client.ok()) {
      r.error = absl::StrCat("client: ", client.status().ToString());
      failed = true;
      ready.fetch_add(1);
      return;
    }
    locks::LockClient& c = **client;
    std::mt19937_64 rng(cfg.seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(t));
    std::uniform_real_distribution<double> coin(0, 100);
    ready.fetch_add(1);
    uint64_t ops = 0;
    for (;;) {
      const int ph = phase.load(std::memory_order_relaxed);
      if (ph == kStop || failed.load(std::memory_order_relaxed)) break;
      int node = self;
      if (cfg.nodes > 1 && !(coin(rng) < cfg.p_local)) {
        node = static_cast<int>(rng() % (cfg.nodes - 1));
        if (node >= self) ++node;
      }
      const int64_t idx = static_cast<int64_t>(rng() % static_cast<uint64_t>(keys_on[node]));
      const rdma::RemotePtr lock = tables[node].at(idx);
      const int who = node == self ? 0 : 1;  // cohort of this acquire, by thread origin
      LockCohortState& cs = cohort[node][idx];
      const locks::Path path = node == self ? local_path : locks::Path::kAuto;

      const rdma::OpCounters before = rdma::ThisThreadCounters();
      if (cfg.cohort_stats) cs.waiting[who].fetch_add(1, std::memory_order_relaxed);
      const auto t0 = Clock::now();
      absl::Status s = c.Lock(lock, path);
      const auto t1 = Clock::now();
      if (cfg.cohort_stats) cs.waiting[who].fetch_sub(1, std::memory_order_relaxed);
      if (!s.ok()) {
        r.error = absl::StrCat("Lock: ", s.ToString());
        failed = true;
        break;
      }
      // ---- critical section
      const bool measuring = ph == kMeasure;
      if (cfg.cohort_stats) {
        const int other = 1 - who;
        cs.run[other] = 0;
        if (cs.waiting[other].load(std::memory_order_relaxed) > 0) {
          ++cs.run[who];
          if (measuring) cs.max_run[who] = std::max(cs.max_run[who], cs.run[who]);
        } else {
          cs.run[who] = 0;
        }
      }
      BusyFor(cfg.cs_ns);
      // ---- end of critical section
      s = c.Unlock(lock);
      if (!s.ok()) {
        r.error = absl::StrCat("Unlock: ", s.ToString());
        failed = true;
        break;
      }
      if (measuring) {
        ++r.acquires[who];
        r.cost[who] += rdma::ThisThreadCounters() - before;
        r.latency.Add(static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
        if ((++ops & 255) == 0) progress[t].ops.store(ops, std::memory_order_relaxed);
      }
    }
    progress[t].ops.store(ops, std::memory_order_relaxed);
    if (auto* a = dynamic_cast<locks::ALockClient*>(&c)) r.alock = a->stats();
    client->reset();
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < num_threads; ++t) threads.emplace_back(worker, t);
  while (ready.load() < num_threads) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  auto sleep_phase = [&](double seconds, const char* name, bool show_rate) {
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    auto next_report = start + std::chrono::seconds(1);
    while (Clock::now() < end && !failed.load()) {
      std::this_thread::sleep_until(std::min(end, next_report));
      if (Clock::now() >= next_report && !cfg.quiet) {
        const double el = std::chrono::duration<double>(Clock::now() - start).count();
        if (show_rate) {
          uint64_t ops = 0;
          for (const Progress& p : progress) ops += p.ops.load(std::memory_order_relaxed);
          std::fprintf(stderr, "[lock_bench] %s %.0f/%.0f s: %.3f Macq/s so far\n", name, el, seconds,
                       static_cast<double>(ops) / el / 1e6);
        } else {
          std::fprintf(stderr, "[lock_bench] %s %.0f/%.0f s\n", name, el, seconds);
        }
        next_report += std::chrono::seconds(1);
      }
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  sleep_phase(cfg.warmup, "warmup", false);
  phase.store(kMeasure);
  const double measured = sleep_phase(cfg.duration, "measure", true);
  phase.store(kStop);
  for (auto& t : threads) t.join();

  for (int t = 0; t < num_threads; ++t) {
    if (!results[t].error.empty()) {
      std::cerr << "lock_bench: thread " << t << " (node " << t % cfg.nodes << ") failed: " << results[t].error
                << "\n";
      return 1;
    }
  }

  // ---- aggregate
  uint64_t acq[2] = {0, 0};
  rdma::OpCounters cost[2];
  Histogram lat;
  for (const ThreadResult& r : results) {
    for (int c = 0; c < 2; ++c) {
      acq[c] += r.acquires[c];
      cost[c] += r.cost[c];
    }
    lat.Merge(r.latency);
  }
  locks::ALockStats as;
  for (const ThreadResult& r : results) {
    for (int c = 0; c < 2; ++c) {
      as.acquires[c] += r.alock.acquires[c];
      as.handovers_in[c] += r.alock.handovers_in[c];
      as.peterson_runs[c] += r.alock.peterson_runs[c];
      as.peterson_waits[c] += r.alock.peterson_waits[c];
    }
    as.cas_retries += r.alock.cas_retries;
  }
  uint64_t max_run[2] = {0, 0};
  for (const auto& per_node : cohort) {
    for (const LockCohortState& s : per_node) {
      max_run[0] = std::max(max_run[0], s.max_run[0]);
      max_run[1] = std::max(max_run[1], s.max_run[1]);
    }
  }
  const uint64_t total = acq[0] + acq[1];
  if (total == 0) {
    // Reported, not fatal: on a loaded machine a very short window (the
    // quick suite measures 10 ms) may see no acquire complete at all; the
    // row says 0 and this line says why it is empty.
    std::cerr << "lock_bench: warning: no acquire completed in the " << measured
              << " s measured (threads not scheduled, or a lock wait longer than the run); the row is empty\n";
  }
  rdma::OpCounters all = cost[0];
  all += cost[1];
  const double tput = static_cast<double>(total) / measured;
  const double p50 = lat.Quantile(0.5), p99 = lat.Quantile(0.99), p999 = lat.Quantile(0.999);
  const double share_local = total ? 100.0 * static_cast<double>(acq[0]) / static_cast<double>(total) : 0;
  const std::string lock_name(locks::LockKindName(cfg.kind));
  const std::string fabric_name(rdma::FabricKindName(cfg.fabric_kind));

  if (cfg.output == "json") {
    std::printf(
        "{\"lock\":\"%s\",\"fabric\":\"%s\",\"nodes\":%d,\"threads_per_node\":%d,\"keys\":%ld,\"p_local\":%g,"
        "\"local_budget\":%d,\"remote_budget\":%d,\"cs_ns\":%ld,\"warmup_s\":%g,\"duration_s\":%g,\"seed\":%lu,"
        "\"local_path\":\"%s\",\"nic_latency_ns\":%ld,"
        "\"measured_s\":%.6f,\"acquires\":%lu,\"throughput_acq_per_s\":%.1f,"
        "\"latency_ns\":{\"p50\":%.0f,\"p99\":%.0f,\"p999\":%.0f},"
        "\"per_acquire\":{\"nic_ops\":%.4f,\"doorbells\":%.4f,\"round_trips\":%.4f,\"bytes\":%.2f},"
        "\"per_local_acquire\":{\"nic_ops\":%.4f,\"doorbells\":%.4f,\"round_trips\":%.4f},"
        "\"per_remote_acquire\":{\"nic_ops\":%.4f,\"doorbells\":%.4f,\"round_trips\":%.4f},"
        "\"cohorts\":{\"local_acquires\":%lu,\"remote_acquires\":%lu,\"local_share_pct\":%.2f,"
        "\"longest_local_run_while_remote_waited\":%lu,\"longest_remote_run_while_local_waited\":%lu}}\n",
        lock_name.c_str(), fabric_name.c_str(), cfg.nodes, cfg.threads_per_node, (long)cfg.keys, cfg.p_local,
        cfg.local_budget, cfg.remote_budget, (long)cfg.cs_ns, cfg.warmup, cfg.duration, (unsigned long)cfg.seed,
        cfg.local_path.c_str(), (long)cfg.nic_latency_ns, measured, (unsigned long)total, tput, p50, p99, p999,
        PerAcquire(all.nic_ops, total), PerAcquire(all.doorbells, total), PerAcquire(all.round_trips, total),
        PerAcquire(all.bytes, total), PerAcquire(cost[0].nic_ops, acq[0]), PerAcquire(cost[0].doorbells, acq[0]),
        PerAcquire(cost[0].round_trips, acq[0]), PerAcquire(cost[1].nic_ops, acq[1]),
        PerAcquire(cost[1].doorbells, acq[1]), PerAcquire(cost[1].round_trips, acq[1]), (unsigned long)acq[0],
        (unsigned long)acq[1], share_local, (unsigned long)max_run[0], (unsigned long)max_run[1]);
  } else if (cfg.output == "csv") {
    std::printf(
        "lock,fabric,nodes,threads_per_node,keys,p_local,local_budget,remote_budget,cs_ns,duration_s,seed,"
        "local_path,acquires,throughput_acq_per_s,p50_ns,p99_ns,p999_ns,nic_ops_per_acq,doorbells_per_acq,"
        "round_trips_per_acq,bytes_per_acq,local_nic_ops_per_acq,remote_nic_ops_per_acq,"
        "remote_round_trips_per_acq,local_share_pct,max_local_run,max_remote_run\n");
    std::printf("%s,%s,%d,%d,%ld,%g,%d,%d,%ld,%.3f,%lu,%s,%lu,%.1f,%.0f,%.0f,%.0f,%.4f,%.4f,%.4f,%.2f,%.4f,%.4f,%.4f,"
                "%.2f,%lu,%lu\n",
                lock_name.c_str(), fabric_name.c_str(), cfg.nodes, cfg.threads_per_node, (long)cfg.keys,
                cfg.p_local, cfg.local_budget, cfg.remote_budget, (long)cfg.cs_ns, measured,
                (unsigned long)cfg.seed, cfg.local_path.c_str(), (unsigned long)total, tput, p50, p99, p999,
                PerAcquire(all.nic_ops, total), PerAcquire(all.doorbells, total), PerAcquire(all.round_trips, total),
                PerAcquire(all.bytes, total), PerAcquire(cost[0].nic_ops, acq[0]),
                PerAcquire(cost[1].nic_ops, acq[1]), PerAcquire(cost[1].round_trips, acq[1]), share_local,
                (unsigned long)max_run[0], (unsigned long)max_run[1]);
  } else {
    std::printf("lock_bench: %s on %s, %d nodes x %d threads, %ld keys, p-local %g%%, budgets %d/%d, cs %ld ns\n",
                lock_name.c_str(), fabric_name.c_str(), cfg.nodes, cfg.threads_per_node, (long)cfg.keys, cfg.p_local,
                cfg.local_budget, cfg.remote_budget, (long)cfg.cs_ns);
    std::printf("  measured            %.3f s, %lu acquires\n", measured, (unsigned long)total);
    std::printf("  throughput          %.0f acquires/s (%.3f M/s)\n", tput, tput / 1e6);
    std::printf("  acquire latency     p50 %.0f ns, p99 %.0f ns, p99.9 %.0f ns\n", p50, p99, p999);
    std::printf("  per acquire         %.3f NIC ops, %.3f doorbells, %.3f round trips, %.1f bytes\n",
                PerAcquire(all.nic_ops, total), PerAcquire(all.doorbells, total), PerAcquire(all.round_trips, total),
                PerAcquire(all.bytes, total));
    std::printf("    local acquires    %.3f NIC ops, %.3f round trips\n", PerAcquire(cost[0].nic_ops, acq[0]),
                PerAcquire(cost[0].round_trips, acq[0]));
    std::printf("    remote acquires   %.3f NIC ops, %.3f round trips\n", PerAcquire(cost[1].nic_ops, acq[1]),
                PerAcquire(cost[1].round_trips, acq[1]));
    if (cfg.cohort_stats) {
      std::printf("  cohort share        local %.1f%% (%lu), remote %.1f%% (%lu)\n", share_local, (unsigned long)acq[0],
                  total ? 100.0 - share_local : 0.0, (unsigned long)acq[1]);
      std::printf("  longest run         local %lu while a remote thread waited; remote %lu while a local thread waited\n",
                  (unsigned long)max_run[0], (unsigned long)max_run[1]);
    }
    if (cfg.kind == locks::LockKind::kALock) {
      std::printf("  alock (whole run)   native: %lu acq, %lu handovers in, %lu Peterson waits; NIC side: %lu acq, "
                  "%lu Peterson waits, %lu CAS retries\n",
                  (unsigned long)as.acquires[0], (unsigned long)as.handovers_in[0],
                  (unsigned long)as.peterson_waits[0], (unsigned long)as.acquires[1],
                  (unsigned long)as.peterson_waits[1], (unsigned long)as.cas_retries);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  // --device/--port/--gid-index first (shared with the other programs), so
  // program_options sees only its own flags.
  if (absl::Status s = cfg.device_flags.Extract(&argc, argv); !s.ok()) return BadInput(std::string(s.message()));
  std::string seed_text = std::to_string(cfg.seed);
  po::options_description desc(
      "lock_bench: lock-table microbenchmark (ALock paper shape).\n"
      "Keys are spread over the nodes; each operation locks a key on the thread's own node with\n"
      "probability --p-local (else on another node), runs a critical section of --cs-ns, unlocks.\n"
      "Reports throughput, acquire latency p50/p99/p99.9, NIC ops / doorbells / round trips per\n"
      "acquire, the share of acquires won by each cohort (local = thread on the lock's node) and the\n"
      "longest run of one cohort while a thread of the other waited in Lock().\n\n"
      "Options");
  // clang-format off
  desc.add_options()
      ("help,h", "show this help and exit")
      ("lock", po::value(&cfg.lock)->default_value(cfg.lock), "alock | rdma-spin | rdma-mcs | local-mcs (local-mcs needs --p-local 100)")
      ("fabric", po::value(&cfg.fabric)->default_value(cfg.fabric), "soft | verbs | auto")
      ("nodes", po::value(&cfg.nodes)->default_value(cfg.nodes), "nodes in the in-process cluster (1..64)")
      ("threads-per-node", po::value(&cfg.threads_per_node)->default_value(cfg.threads_per_node), "threads on each node, each with its own Session (1..256)")
      ("keys", po::value(&cfg.keys)->default_value(cfg.keys), "locks in the table, spread round-robin over the nodes (>= nodes)")
      ("p-local", po::value(&cfg.p_local)->default_value(cfg.p_local), "percent of operations on the thread's own node (0..100)")
      ("local-budget", po::value(&cfg.local_budget)->default_value(cfg.local_budget), "ALock local-cohort budget (>= 1)")
      ("remote-budget", po::value(&cfg.remote_budget)->default_value(cfg.remote_budget), "ALock remote-cohort budget (>= 1)")
      ("cs-ns", po::value(&cfg.cs_ns)->default_value(cfg.cs_ns), "critical-section length in ns (busy wait, >= 0)")
      ("warmup", po::value(&cfg.warmup)->default_value(cfg.warmup), "warm-up seconds, not measured (>= 0)")
      ("duration", po::value(&cfg.duration)->default_value(cfg.duration), "measured seconds (> 0)")
      ("seed", po::value(&seed_text)->default_value(seed_text), "random seed (key choice), 0..2^64-1")
      ("output", po::value(&cfg.output)->default_value(cfg.output), "text | json | csv")
      ("local-path", po::value(&cfg.local_path)->default_value(cfg.local_path), "native | loopback: how threads reach locks of their own node (alock)")
      ("nic-latency-ns", po::value(&cfg.nic_latency_ns)->default_value(cfg.nic_latency_ns), "soft fabric: latency added to every NIC operation")
      ("no-cohort-stats", po::bool_switch(), "skip the per-lock cohort bookkeeping (two atomics per acquire)")
      ("quiet,q", po::bool_switch(&cfg.quiet), "no progress lines on stderr");
  // clang-format on
  po::variables_map vm;
  try {
    po::store(po::command_line_parser(argc, argv).options(desc).run(), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    return BadInput(e.what());
  }
  if (vm.count("help")) {
    std::cout << desc << rdma::verbs::kDeviceFlagsHelp << "\nExample:\n  lock_bench --lock alock --nodes 2 --threads-per-node 2 --keys 1024 "
                         "--p-local 90 --duration 5 --output json\n";
    return 0;
  }
  cfg.cohort_stats = !vm["no-cohort-stats"].as<bool>();

  auto kind = locks::ParseLockKind(cfg.lock);
  if (!kind.ok()) return BadInput(std::string(kind.status().message()));
  cfg.kind = *kind;
  auto fabric = rdma::ParseFabricKind(cfg.fabric);
  if (!fabric.ok()) return BadInput(absl::StrCat("--fabric: ", fabric.status().message()));
  cfg.fabric_kind = *fabric;
  {
    // Device flags turn --fabric=auto into verbs and are refused with soft.
    rdma::FabricOptions fo;
    fo.kind = cfg.fabric_kind;
    if (absl::Status s = cfg.device_flags.Apply(&fo); !s.ok()) return BadInput(std::string(s.message()));
    cfg.fabric_kind = fo.kind;
  }
  if (cfg.nodes < 1 || cfg.nodes > 64) return BadInput(absl::StrCat("--nodes must be in 1..64 (got ", cfg.nodes, ")"));
  if (cfg.threads_per_node < 1 || cfg.threads_per_node > 256) {
    return BadInput(absl::StrCat("--threads-per-node must be in 1..256 (got ", cfg.threads_per_node, ")"));
  }
  if (cfg.keys < cfg.nodes) {
    return BadInput(absl::StrCat("--keys must be at least --nodes (", cfg.nodes, "), got ", cfg.keys));
  }
  if (!(cfg.p_local >= 0 && cfg.p_local <= 100)) {
    return BadInput(absl::StrCat("--p-local must be in 0..100 (got ", cfg.p_local, ")"));
  }
  if (cfg.nodes == 1 && cfg.p_local < 100) {
    return BadInput("--p-local below 100 needs at least 2 nodes (a remote key must exist)");
  }
  if (cfg.local_budget < 1 || cfg.local_budget > locks::kMaxBudget || cfg.remote_budget < 1 ||
      cfg.remote_budget > locks::kMaxBudget) {
    return BadInput(absl::StrCat("--local-budget and --remote-budget must be in 1..", locks::kMaxBudget));
  }
  if (!absl::SimpleAtoi(seed_text, &cfg.seed) || seed_text.empty() || seed_text[0] == '-' || seed_text[0] == '+') {
    return BadInput(absl::StrCat("--seed must be an integer in 0..2^64-1 (got '", seed_text, "')"));
  }
  if (cfg.cs_ns < 0) return BadInput(absl::StrCat("--cs-ns must be >= 0 (got ", cfg.cs_ns, ")"));
  if (!(cfg.warmup >= 0)) return BadInput(absl::StrCat("--warmup must be >= 0 (got ", cfg.warmup, ")"));
  if (!(cfg.duration > 0)) return BadInput(absl::StrCat("--duration must be > 0 (got ", cfg.duration, ")"));
  // Finite and at most a day: larger values overflow the clock's duration
  // (inf would make a window that ends at once, and a row of zeros).
  constexpr double kMaxSeconds = 86400;
  if (!(cfg.warmup <= kMaxSeconds)) return BadInput(absl::StrCat("--warmup must be at most ", kMaxSeconds, " s"));
  if (!(cfg.duration <= kMaxSeconds)) return BadInput(absl::StrCat("--duration must be at most ", kMaxSeconds, " s"));
  if (static_cast<double>(cfg.cs_ns) >= cfg.duration * 1e9) {
    return BadInput(absl::StrCat("--cs-ns (", cfg.cs_ns, " ns) must be shorter than --duration (", cfg.duration,
                                 " s): no acquire could complete inside the measured window"));
  }
  if (cfg.output != "text" && cfg.output != "json" && cfg.output != "csv") {
    return BadInput(absl::StrCat("--output must be text, json or csv (got '", cfg.output, "')"));
  }
  if (cfg.local_path != "native" && cfg.local_path != "loopback") {
    return BadInput(absl::StrCat("--local-path must be native or loopback (got '", cfg.local_path, "')"));
  }
  if (cfg.nic_latency_ns < 0) return BadInput("--nic-latency-ns must be >= 0");
  if (cfg.kind == locks::LockKind::kLocalMcs && (cfg.p_local < 100 || cfg.local_path == "loopback")) {
    return BadInput(
        "--lock local-mcs is native-only (the native ceiling): it needs --p-local 100 and --local-path native");
  }
  return Run(cfg);
}
