// Two nodes, each with its own Node and Connector, doing READ/WRITE/CAS/FAA
// and a Batch chain against each other's arena and their own (loopback), a
// shared NIC-domain counter hit by both (remote + loopback), then checking
// every result, with bootstrap barriers in between.
//
// Modes (testing/node_harness.h): one node per process (two guests through a
// coordinator, or `mpirun -np 2`; rdma_cm between them), or one process with
// both nodes on the first backend of RDMADS_FABRICS (default soft).

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "util/status_macros.h"
#include "rdma/node.h"
#include "rdma/session.h"
#include "rdma/soft/soft_nic.h"
#include "rdma/bootstrap.h"
#include "testing/node_harness.h"

namespace rdma {
namespace {

using Clock = std::chrono::steady_clock;

uint8_t Pattern(int writer, int owner, int i) { return static_cast<uint8_t>(i * 31 + writer * 7 + owner * 3 + 1); }

#define REQUIRE(cond, ...)                                                          \
  do {                                                                              \
    if (!(cond)) return absl::InternalError(absl::StrCat(where, ": ", #cond, " failed: ", __VA_ARGS__)); \
  } while (0)

double MicrosPerOp(Clock::duration d, int n) { return std::chrono::duration<double, std::micro>(d).count() / n; }

// One node's part. Both nodes call it concurrently.
absl::Status RunNodeAt(Node& node, Connector& conn, Bootstrap& boot, std::string& where) {
  const NodeId me = node.id();
  const NodeId other = static_cast<NodeId>(1 - me);
  where = absl::StrCat("node ", me);
  // The same body runs across the two-guest UDP link, where a fenced READ or
  // atomic can hit the rxe fence deadlock (tests/verbs/README.md). On the
  // soft fabric (one process) count them, so one never creeps in unnoticed.
  auto fenced_rd_atomic = std::make_shared<std::atomic<int>>(0);
  soft::SoftDevice* soft_dev = soft::AsSoftDevice(node.device());
  if (soft_dev != nullptr) {
    soft_dev->SetPostHook([fenced_rd_atomic](const WorkRequest& wr) {
      if (wr.fence && (wr.opcode == Opcode::kRead || wr.opcode == Opcode::kCompareSwap ||
                       wr.opcode == Opcode::kFetchAdd)) {
        fenced_rd_atomic->fetch_add(1);
      }
    });
  }
  struct Unhook {
    soft::SoftDevice* d;
    ~Unhook() {
      if (d != nullptr) d->SetPostHook(nullptr);
    }
  } unhook{soft_dev};
  // Deterministic allocation: the same offsets on both nodes.
  ASSIGN_OR_RETURN(auto block, node.Allocate(4096));
  ASSIGN_OR_RETURN(auto counter, node.Allocate(64));
  const uint64_t block_off = node.OffsetOf(block);
  const uint64_t counter_off = node.OffsetOf(counter);
  RETURN_IF_ERROR(boot.Barrier());  // both arenas ready, every node is up

  ASSIGN_OR_RETURN(auto session, Session::Create(node, conn));
  Session& s = *session;
  for (NodeId target : {other, me}) {
    where = absl::StrCat("node ", me, " -> node ", target);
    ASSIGN_OR_RETURN(auto arena, conn.Arena(target));
    const RemotePtr slot(target, arena.base + block_off + me * 1024);
    uint8_t out[256], in[256] = {};
    for (int i = 0; i < 256; ++i) out[i] = Pattern(me, target, i);
    RETURN_IF_ERROR(s.Write(slot, out, sizeof out));
    RETURN_IF_ERROR(s.Read(slot, in, sizeof in));
    REQUIRE(std::memcmp(in, out, sizeof in) == 0, "READ after WRITE differs");

    const RemotePtr cas_word = slot + 512, faa_word = slot + 520;
    RETURN_IF_ERROR(s.Write64(cas_word, 5));
    ASSIGN_OR_RETURN(auto c1, s.CompareAndSwap(cas_word, 5, 9));
    REQUIRE(c1 == 5, "CAS(5->9) returned ", c1);
    ASSIGN_OR_RETURN(auto c2, s.CompareAndSwap(cas_word, 5, 11));
    REQUIRE(c2 == 9, "failing CAS returned ", c2);
    ASSIGN_OR_RETURN(auto v, s.Read64(cas_word));
    REQUIRE(v == 9, "after CAS read ", v);
    ASSIGN_OR_RETURN(auto f1, s.FetchAndAdd(faa_word, 3));
    ASSIGN_OR_RETURN(auto f2, s.FetchAndAdd(faa_word, 4));
    REQUIRE(f1 == 0 && f2 == 3, "FAA returned ", f1, ", ", f2);

    // One chain, one doorbell: 8 WRITEs, 8 READs, FAA, CAS. No Fence before
    // the READs: the responder executes one QP's requests in order, so they
    // see the WRITEs anyway, and on rxe a fenced READ that gets retransmitted
    // (the UDP link between the guests drops and delays packets) deadlocks
    // for good (tests/verbs/README.md, "rxe fence"). Fence is for "wait
    // until earlier READs/atomics have completed", which nothing here needs.
    uint64_t vals[8] = {}, old_faa = 0, old_cas = 0;
    {
      Batch b(s, target);
      for (int i = 0; i < 8; ++i) b.Write64(slot + 256 + 8 * i, 100 + i);
      for (int i = 0; i < 8; ++i) b.Read(slot + 256 + 8 * i, &vals[i], 8);
      b.FetchAndAdd(faa_word, 10, &old_faa);
      b.CompareAndSwap(cas_word, 9, 13, &old_cas);
      RETURN_IF_ERROR(b.Execute());
    }
    for (int i = 0; i < 8; ++i) REQUIRE(vals[i] == uint64_t(100 + i), "batch READ ", i, " = ", vals[i]);
    REQUIRE(old_faa == 7 && old_cas == 9, "batch FAA/CAS returned ", old_faa, "/", old_cas);
    const char msg[16] = "inline-payload";  // stack memory, goes inline
    RETURN_IF_ERROR(s.Write(slot + 600, msg, sizeof msg));
  }

  // Latency (informational), one node at a time: the other one waits in a
  // barrier instead of busy-polling, so under emulation it does not steal
  // the CPUs that run the NIC.
  if (me == 1) RETURN_IF_ERROR(boot.Barrier());
  for (NodeId target : {other, me}) {
    where = absl::StrCat("node ", me, " latency to node ", target);
    ASSIGN_OR_RETURN(auto arena, conn.Arena(target));
    const RemotePtr w(target, arena.base + block_off + me * 1024 + 512);
    constexpr int kOps = 100;
    auto t0 = Clock::now();
    for (int i = 0; i < kOps; ++i) RETURN_IF_ERROR(s.Read64(w).status());
    const double read_us = MicrosPerOp(Clock::now() - t0, kOps);
    t0 = Clock::now();
    for (int i = 0; i < kOps; ++i) RETURN_IF_ERROR(s.FetchAndAdd(w + 8, 0).status());
    const double faa_us = MicrosPerOp(Clock::now() - t0, kOps);
    std::printf("node %d -> node %d (%s): READ %.1f us, FAA %.1f us (busy polling)\n", me, target,
                target == me ? "loopback" : "remote", read_us, faa_us);
  }
  {
    SessionOptions notify;
    notify.poll_mode = PollMode::kNotify;
    ASSIGN_OR_RETURN(auto ns, Session::Create(node, conn, notify));
    ASSIGN_OR_RETURN(auto arena, conn.Arena(other));
    const RemotePtr w(other, arena.base + block_off + me * 1024 + 512);
    constexpr int kOps = 100;
    const auto t0 = Clock::now();
    for (int i = 0; i < kOps; ++i) RETURN_IF_ERROR(ns->Read64(w).status());
    std::printf("node %d -> node %d (remote): READ %.1f us (completion channel)\n", me, other,
                MicrosPerOp(Clock::now() - t0, kOps));
  }
  if (me == 0) RETURN_IF_ERROR(boot.Barrier());  // node 1's turn...
  RETURN_IF_ERROR(boot.Barrier());                // ...until it is done

  // A NIC-domain counter on node 0, hit by node 0 (loopback) and node 1 (remote).
  where = absl::StrCat("node ", me, " shared counter");
  ASSIGN_OR_RETURN(auto arena0, conn.Arena(0));
  const RemotePtr shared(0, arena0.base + counter_off);
  constexpr int kAdds = 200;
  for (int i = 0; i < kAdds; ++i) RETURN_IF_ERROR(s.FetchAndAdd(shared, 1).status());
  RETURN_IF_ERROR(boot.Barrier());

  // Everybody is done writing: check what landed in my memory.
  where = absl::StrCat("node ", me, " checking its memory");
  for (NodeId writer : {other, me}) {
    const uint8_t* p = block.local<uint8_t>() + writer * 1024;
    for (int i = 0; i < 256; ++i) REQUIRE(p[i] == Pattern(writer, me, i), "byte ", i, " from node ", writer);
    const auto* words = reinterpret_cast<const uint64_t*>(p);
    REQUIRE(words[512 / 8] == 13, "CAS word from node ", writer, " = ", words[512 / 8]);
    REQUIRE(words[520 / 8] == 17, "FAA word from node ", writer, " = ", words[520 / 8]);
    REQUIRE(std::strcmp(reinterpret_cast<const char*>(p + 600), "inline-payload") == 0, "inline payload");
  }
  if (me == 0) {
    const uint64_t total = __atomic_load_n(counter.local<uint64_t>(), __ATOMIC_ACQUIRE);
    REQUIRE(total == 2 * kAdds, "shared counter = ", total);
  }
  ASSIGN_OR_RETURN(auto seen, s.Read64(shared));
  REQUIRE(seen == 2 * kAdds, "shared counter read over RDMA = ", seen);
  where = absl::StrCat("node ", me);
  RETURN_IF_ERROR(boot.Barrier());  // nobody tears down while the other still works
  REQUIRE(fenced_rd_atomic->load() == 0, fenced_rd_atomic->load(),
          " fenced READ/atomic WRs posted: on rxe across the two-guest link they can deadlock (tests/verbs/README.md)");
  std::printf("node %d: all checks passed\n", me);
  return absl::OkStatus();
}

TEST(TwoNode, ReadWriteAtomicsAndBatchesBothWays) { rdma::testing::RunNodes(RunNodeAt); }

}  // namespace
}  // namespace rdma
