// ALock's remote-acquire chain, {CAS word, READ line} in one doorbell on one
// QP, from many threads over loopback QPs at once: the READ must observe the
// CAS (the responder executes a QP's requests in order; ALock relies on it
// with no fence), and no chain may stall.
//
// With FENCE_REPRO_FENCE=1 the READ carries IBV_SEND_FENCE:
// on Soft-RoCE that reproduces the rxe fence deadlock within a few runs
// (tests/verbs/README.md, "rxe fence"). On a stall the thread posts one more
// READ on the same QP (which reruns rxe's requester) and, with
// FENCE_REPRO_DUMP=1, prints `rdma res show qp` / `rdma statistic` for it.
// Not in run_guest_tests.sh; run it by hand in a guest:
//   tools/rxe_vm/rxe_run --env RDMADS_FABRICS=verbs --env FENCE_REPRO_FENCE=1
//     -- bazel-bin/tests/verbs/fence_repro_test
//
// Also: an aligned 8-byte RDMA WRITE is never seen torn by CPU loads on the
// target (lock hand-over words rely on it).
//
// Env knobs: FENCE_REPRO_FENCE (0), FENCE_REPRO_THREADS (6),
// FENCE_REPRO_ITERS (3000 on verbs), FENCE_REPRO_SPINNERS (2: busy-looping
// threads, as the lock stress has), FENCE_REPRO_TIMEOUT_MS (3000).

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/session.h"
#include "testing/backends.h"

namespace rdma {
namespace {

int EnvInt(const char* name, int def) {
  const char* v = std::getenv(name);
  return v == nullptr || *v == '\0' ? def : std::atoi(v);
}

TEST(FenceRepro, CasThenReadChains) {
  const std::string backend = testing::BackendsUnderTest().front();
  const bool fence = EnvInt("FENCE_REPRO_FENCE", 0) != 0;
  const int threads = EnvInt("FENCE_REPRO_THREADS", 6);
  const int iters = EnvInt("FENCE_REPRO_ITERS", backend == "verbs" ? 3000 : 20000);
  const int spinners = EnvInt("FENCE_REPRO_SPINNERS", backend == "verbs" ? 2 : 0);
  const int timeout_ms = EnvInt("FENCE_REPRO_TIMEOUT_MS", 3000);
  auto cluster = testing::MakeCluster(backend, 3);
  ASSERT_NE(cluster, nullptr);
  auto line = cluster->node(0).Allocate(64 * threads, 64);
  ASSERT_TRUE(line.ok());

  std::mutex mu;
  std::vector<std::string> log;
  std::atomic<int> stalls{0}, kicked{0}, misordered{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> spin;
  for (int i = 0; i < spinners; ++i) {
    spin.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      SessionOptions so;
      so.completion_timeout = std::chrono::milliseconds(timeout_ms);
      auto s = cluster->NewSession(static_cast<NodeId>(t % 3), so);
      ASSERT_TRUE(s.ok()) << s.status();
      const RemotePtr word = *line + 64 * t;
      uint64_t cur = 0;
      for (int i = 0; i < iters; ++i) {
        uint64_t old = ~uint64_t{0};
        alignas(64) uint64_t buf[8];
        absl::Status st;
        {
          Batch b(**s, 0);
          b.CompareAndSwap(word, cur, cur + 1, &old);
          if (fence) b.Fence();
          b.Read(word, buf, 64);
          st = b.Execute();
        }
        if (!st.ok()) {
          stalls.fetch_add(1);
          const uint32_t qpn = (*s)->queue_pair(0).qp_num();
          if (std::getenv("FENCE_REPRO_DUMP") != nullptr) {
            std::lock_guard<std::mutex> g(mu);
            std::printf("== stall on thread %d, QP %u (node %d -> node 0), iter %d\n", t, qpn, t % 3, i);
            std::fflush(stdout);
            const std::string cmd = absl::StrCat("rdma -d res show qp lqpn ", qpn, "; rdma -d res show qp | grep -B1 -A3 'rqpn ",
                                                 qpn, " '; rdma statistic show link rxe0/1");
            (void)std::system(cmd.c_str());
            std::fflush(stdout);
          }
          // Kick: post one more WR on the same QP and wait for it.
          auto v = (*s)->Read64(word + 8);
          const bool ok = v.ok();
          if (ok) kicked.fetch_add(1);
          std::lock_guard<std::mutex> g(mu);
          log.push_back(absl::StrCat("thread ", t, " (node ", t % 3, ") iter ", i, ": ", st.ToString(),
                                     "; a later READ on the same QP ", ok ? "completed" : v.status().ToString()));
          return;
        }
        if (old != cur || buf[0] != cur + 1) misordered.fetch_add(1);
        cur = cur + 1;
      }
    });
  }
  for (auto& th : ts) th.join();
  stop = true;
  for (auto& th : spin) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[fence_repro] backend=%s fence=%d threads=%d iters=%d spinners=%d: %.1f s, %d stalls, %d "
              "recovered by a later post, %d misordered\n",
              backend.c_str(), fence, threads, iters, spinners, secs, stalls.load(), kicked.load(),
              misordered.load());
  for (const auto& l : log) std::printf("  %s\n", l.c_str());
  EXPECT_EQ(stalls.load(), 0);
  EXPECT_EQ(misordered.load(), 0);
}

}  // namespace
}  // namespace rdma

namespace rdma {
namespace {

// Is an aligned 8-byte RDMA WRITE single-copy atomic against CPU loads of the
// target word? Lock hand-over words (MCS `next`, `budget`) assume so. The
// writer WRITEs words whose 8 bytes are all equal; a CPU reader on the
// target node checks every value it sees.
TEST(FenceRepro, Aligned8ByteWriteVsCpuLoads) {
  const std::string backend = testing::BackendsUnderTest().front();
  const int iters = EnvInt("FENCE_REPRO_ITERS", backend == "verbs" ? 20000 : 50000);
  auto cluster = testing::MakeCluster(backend, 2);
  ASSERT_NE(cluster, nullptr);
  auto word = cluster->node(0).Allocate(64, 64);
  ASSERT_TRUE(word.ok());
  uint64_t* w = word->local<uint64_t>();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> torn{0}, loads{0};
  std::atomic<uint64_t> first_torn{0};
  std::thread reader([&] {
    uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const uint64_t v = std::atomic_ref<uint64_t>(*w).load(std::memory_order_relaxed);
      ++n;
      if (v != (v & 0xff) * 0x0101010101010101ull) {
        if (torn.fetch_add(1) == 0) first_torn = v;
      }
    }
    loads = n;
  });
  auto s = cluster->NewSession(1);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < iters; ++i) {
    const uint64_t v = uint64_t(i % 255 + 1) * 0x0101010101010101ull;
    ASSERT_TRUE((*s)->Write64(*word, v).ok());
  }
  stop = true;
  reader.join();
  std::printf("[write_tearing] backend=%s: %d WRITEs, %lu CPU loads, %lu torn (first 0x%016lx)\n", backend.c_str(),
              iters, (unsigned long)loads.load(), (unsigned long)torn.load(), (unsigned long)first_torn.load());
  EXPECT_EQ(torn.load(), 0u);
}

}  // namespace
}  // namespace rdma
