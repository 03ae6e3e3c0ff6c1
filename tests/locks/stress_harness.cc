#include "tests/locks/stress_harness.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "locks/lock.h"
#include "rdma/soft/soft_nic.h"
#include "testing/backends.h"

#if defined(__SANITIZE_THREAD__)
#define LOCKS_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOCKS_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define LOCKS_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOCKS_TEST_ASAN 1
#endif
#endif

namespace locks::testing {

rdma::FabricKind FabricUnderTest() {
  const std::vector<std::string> backends = rdma::testing::BackendsUnderTest();
  return !backends.empty() && backends.front() == "verbs" ? rdma::FabricKind::kVerbs : rdma::FabricKind::kSoft;
}

bool OnVerbs() { return FabricUnderTest() == rdma::FabricKind::kVerbs; }

bool UnderTsan() {
#ifdef LOCKS_TEST_TSAN
  return true;
#else
  return false;
#endif
}

int Scaled(int n) {
  // Real verbs in the Soft-RoCE guest run under qemu TCG: ~50 us per op.
  if (OnVerbs()) return std::max(1, n / 20);
#if defined(LOCKS_TEST_TSAN)
  return std::max(1, n / 8);
#elif defined(LOCKS_TEST_ASAN)
  return std::max(1, n / 2);
#else
  return n;
#endif
}

std::string StressResult::Summary() const {
  std::string s = absl::StrCat(acquisitions, " acquisitions in ", seconds, " s; counters sum ", counter_total,
                               "; ", mismatched_locks, " lock(s) with a wrong count; ", overlaps,
                               " overlapping holders; ", pauses, " NIC atomics stalled");
  if (!errors.empty()) {
    absl::StrAppend(&s, "; ", errors.size(), " error(s), first: ", errors.front());
  }
  return s;
}

std::vector<ThreadSpec> MixedThreads(int num_nodes, int per_node, const std::vector<rdma::NodeId>& lock_nodes,
                                     int loopback) {
  std::vector<ThreadSpec> t;
  for (int n = 0; n < num_nodes; ++n) {
    for (int i = 0; i < per_node; ++i) t.push_back({static_cast<rdma::NodeId>(n), Path::kAuto});
  }
  for (rdma::NodeId n : lock_nodes) {
    for (int i = 0; i < loopback; ++i) t.push_back({n, Path::kLoopback});
  }
  return t;
}

namespace {

struct LockUnderTest {
  rdma::RemotePtr lock;
  rdma::RemotePtr counter;
  std::atomic<int> occupancy{0};
  std::atomic<uint64_t> acquisitions{0};
};

void BusyFor(std::chrono::nanoseconds d) {
  if (d.count() <= 0) return;
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) {
  }
}

}  // namespace

StressResult RunStress(const StressConfig& config) {
  StressResult result;
  rdma::ClusterOptions co;
  co.named_bytes = 0;  // no named structures: nothing registered for them
  co.num_nodes = config.num_nodes;
  co.node.arena_bytes = size_t{8} << 20;
  co.fabric.kind = FabricUnderTest();
  co.fabric.soft_byte_granular_copies = config.byte_granular_copies;
  auto cluster_or = rdma::Cluster::Create(co);
  if (!cluster_or.ok()) {
    result.errors.push_back(std::string(cluster_or.status().message()));
    return result;
  }
  rdma::Cluster& cluster = **cluster_or;
  if (config.byte_copies_descending) {
    for (int n = 0; n < config.num_nodes; ++n) {
      if (auto* dev = rdma::soft::AsSoftDevice(cluster.node(n).device())) dev->SetByteCopiesDescending(true);
    }
  }
  if (config.byte_granular_copies && config.yield_after_byte >= 0) {
    // Descriptors (next, budget) live on every node, so every NIC stalls.
    const uint64_t at = static_cast<uint64_t>(config.yield_after_byte) % 8;
    for (int n = 0; n < config.num_nodes; ++n) {
      if (auto* dev = rdma::soft::AsSoftDevice(cluster.node(n).device())) {
        dev->faults().SetCopyHook([at](uint64_t byte) {
          if (byte % 8 == at) std::this_thread::yield();
        });
      }
    }
  }

  std::vector<std::unique_ptr<LockUnderTest>> locks;
  for (rdma::NodeId n : config.lock_nodes) {
    auto table = LockTable::Create(cluster.node(n), config.locks_per_node, config.init);
    auto counters = cluster.node(n).Allocate(64 * config.locks_per_node, 64);
    if (!table.ok() || !counters.ok()) {
      result.errors.push_back(absl::StrCat("setup: ", table.status().ToString(), counters.status().ToString()));
      return result;
    }
    for (int i = 0; i < config.locks_per_node; ++i) {
      auto l = std::make_unique<LockUnderTest>();
      l->lock = table->at(i);
      l->counter = *counters + 64 * i;
      locks.push_back(std::move(l));
    }
  }

  std::mutex errors_mu;
  std::atomic<uint64_t> overlaps{0};
  std::atomic<bool> stop{false};
  std::atomic<bool> stall_armed{false};
  std::atomic<int> running{static_cast<int>(config.threads.size())};
  const auto start = std::chrono::steady_clock::now();

  auto worker = [&](size_t index) {
    const ThreadSpec spec = config.threads[index];
    auto record = [&](absl::string_view what, const absl::Status& s) {
      std::lock_guard<std::mutex> g(errors_mu);
      result.errors.push_back(absl::StrCat("thread ", index, " (node ", spec.node, "): ", what, ": ", s.ToString()));
    };
    auto session = cluster.NewSession(spec.node);
    if (!session.ok()) {
      record("NewSession", session.status());
      running.fetch_sub(1);
      return;
    }
    auto client = config.factory(cluster.node(spec.node), session->get());
    if (!client.ok()) {
      record("client", client.status());
      running.fetch_sub(1);
      return;
    }
    rdma::Session& s = **session;
    std::vector<std::unique_ptr<LockClient>> graveyard;
    auto replace_client = [&]() -> bool {
      if (!config.continue_after_error) return false;
      graveyard.push_back(std::move(*client));
      client = config.factory(cluster.node(spec.node), session->get());
      return client.ok();
    };
    std::mt19937_64 rng(config.seed * 1000003 + index);
    for (int it = 0; it < config.iterations_per_thread && !stop.load(std::memory_order_relaxed); ++it) {
      LockUnderTest& l = *locks[rng() % locks.size()];
      if (config.pause_remote_acquires_every > 0 && it % config.pause_remote_acquires_every == 0 &&
          (*client)->CohortFor(l.lock, spec.path) == Cohort::kRemote) {
        // One stall armed at a time (re-arming would orphan a paused atomic).
        bool expected = false;
        auto* dev = rdma::soft::AsSoftDevice(cluster.node(l.lock.node()).device());
        if (dev != nullptr && stall_armed.compare_exchange_strong(expected, true)) dev->faults().PauseNextAtomic();
      }
      if (absl::Status st = (*client)->Lock(l.lock, spec.path); !st.ok()) {
        record("Lock", st);
        if (replace_client()) continue;
        break;
      }
      if (l.occupancy.fetch_add(1, std::memory_order_acq_rel) != 0) {
        overlaps.fetch_add(1);
        if (config.stop_on_violation) stop = true;
      }
      const bool yield = config.yield_in_cs_every > 0 && it % config.yield_in_cs_every == 0;
      absl::Status cs;
      if ((*client)->CohortFor(l.lock, spec.path) == Cohort::kLocal) {
        uint64_t* c = l.counter.local<uint64_t>();
        if (config.atomic_cpu_counter) {
          const uint64_t v = std::atomic_ref<uint64_t>(*c).load(std::memory_order_relaxed);
          if (yield) std::this_thread::yield();
          BusyFor(config.cs_delay);
          std::atomic_ref<uint64_t>(*c).store(v + 1, std::memory_order_relaxed);
        } else {
          const uint64_t v = *c;  // plain: TSan checks the lock's happens-before
          if (yield) std::this_thread::yield();
          BusyFor(config.cs_delay);
          *c = v + 1;
        }
      } else {
        auto v = s.Read64(l.counter);
        if (yield) std::this_thread::yield();
        BusyFor(config.cs_delay);
        cs = v.ok() ? s.Write64(l.counter, *v + 1) : v.status();
      }
      l.occupancy.fetch_sub(1, std::memory_order_acq_rel);
      if (cs.ok()) l.acquisitions.fetch_add(1, std::memory_order_relaxed);
      if (absl::Status st = (*client)->Unlock(l.lock); !st.ok()) {
        record("Unlock", st);
        if (cs.ok() && replace_client()) continue;
        break;
      }
      if (!cs.ok()) {
        record("critical section RDMA", cs);
        break;
      }
      if ((it & 63) == 0 && std::chrono::steady_clock::now() - start > config.max_duration) stop = true;
    }
    if (client.ok()) client->reset();
    graveyard.clear();
    running.fetch_sub(1);
  };

  std::vector<std::thread> threads;
  for (size_t i = 0; i < config.threads.size(); ++i) threads.emplace_back(worker, i);

  std::atomic<uint64_t> pauses{0};
  std::thread pauser;
  if (config.pause_nic_atomics || config.pause_remote_acquires_every > 0) {
    pauser = std::thread([&] {
      size_t k = 0;
      while (running.load() > 0) {
        auto* dev = rdma::soft::AsSoftDevice(cluster.node(config.lock_nodes[k++ % config.lock_nodes.size()]).device());
        if (dev == nullptr) return;
        if (config.pause_nic_atomics) {
          dev->faults().PauseNextAtomic();
          if (dev->faults().WaitUntilAtomicPaused(std::chrono::milliseconds(20))) {
            std::this_thread::sleep_for(config.pause_length);
            pauses.fetch_add(1);
          }
          dev->faults().ResumeAtomic();  // also disarms a pause that never hit
          std::this_thread::sleep_for(config.pause_length / 4);
        } else if (dev->faults().WaitUntilAtomicPaused(std::chrono::milliseconds(1))) {
          // A NIC-path thread armed this stall right before its Lock.
          std::this_thread::sleep_for(config.pause_length);
          pauses.fetch_add(1);
          dev->faults().ResumeAtomic();
          stall_armed.store(false);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (pauser.joinable()) pauser.join();
  for (rdma::NodeId n : config.lock_nodes) {
    if (auto* dev = rdma::soft::AsSoftDevice(cluster.node(n).device())) dev->faults().ResumeAtomic();
  }

  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.overlaps = overlaps.load();
  result.pauses = pauses.load();
  for (const auto& l : locks) {
    const uint64_t acq = l->acquisitions.load();
    const uint64_t count = std::atomic_ref<uint64_t>(*l->counter.local<uint64_t>()).load();
    result.acquisitions += acq;
    result.counter_total += count;
    if (acq != count) ++result.mismatched_locks;
  }
  return result;
}

}  // namespace locks::testing
