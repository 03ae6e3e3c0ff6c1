// Mutual exclusion under stress for every lock kind, on the soft NIC, with
// native, loopback and remote threads mixed on the same locks. The critical
// section is a non-atomic read-increment-write over the holder's own path
// (CPU for native holders, RDMA READ + WRITE for NIC-path holders); the final
// counts must be exact and no two holders may ever overlap. Fixed seeds,
// bounded iterations and time (scaled down under sanitizers).

#include "gtest/gtest.h"
#include "locks/lock.h"
#include "tests/locks/stress_harness.h"

namespace locks::testing {
namespace {

ClientFactory FactoryFor(LockKind kind) {
  return [kind](rdma::Node& node, rdma::Session* session) {
    ClientOptions o;
    o.timeout = std::chrono::seconds(20);
    return NewLockClient(kind, node, session, o);
  };
}

struct Case {
  std::string name;
  LockKind kind;
  Budgets budgets;
  bool pause_nic_atomics;
  // rxe emulation: byte-by-byte READ/WRITE with a yield inside every word.
  bool byte_copies = false;
  bool descending = false;  // ... last byte first (adversarial)
};

class MutualExclusion : public ::testing::TestWithParam<Case> {};

TEST_P(MutualExclusion, ExactCountsNoOverlapMixedPaths) {
  const Case& c = GetParam();
  StressConfig cfg;
  cfg.name = c.name;
  cfg.init = {c.kind, c.budgets};
  cfg.factory = FactoryFor(c.kind);
  cfg.seed = 20240611;
  cfg.pause_nic_atomics = c.pause_nic_atomics;
  cfg.byte_granular_copies = c.byte_copies;
  cfg.yield_after_byte = c.byte_copies ? 3 : -1;
  cfg.byte_copies_descending = c.descending;
  if (c.kind == LockKind::kLocalMcs) {
    // Native-only lock: every thread on the locks' node.
    cfg.num_nodes = 1;
    cfg.lock_nodes = {0};
    cfg.locks_per_node = 3;
    cfg.threads = MixedThreads(1, 4, {}, 0);
    cfg.iterations_per_thread = Scaled(100000);
  } else {
    // Locks on nodes 0 and 1; one plain thread per node (native for its own
    // node's locks, remote for the others) plus one loopback thread per lock
    // node: all three paths meet on every lock.
    cfg.num_nodes = 3;
    cfg.lock_nodes = {0, 1};
    cfg.locks_per_node = 2;
    cfg.threads = MixedThreads(3, 1, cfg.lock_nodes, 1);
    cfg.iterations_per_thread = Scaled(c.kind == LockKind::kRdmaSpin ? 8000 : 15000);
  }
  cfg.max_duration = std::chrono::seconds(20);
  StressResult r = RunStress(cfg);
  SCOPED_TRACE(r.Summary());
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.overlaps, 0u);
  EXPECT_EQ(r.mismatched_locks, 0u);
  EXPECT_EQ(r.counter_total, r.acquisitions);
  EXPECT_GT(r.acquisitions, 0u);
  std::printf("[%s] %s\n", c.name.c_str(), r.Summary().c_str());
}

INSTANTIATE_TEST_SUITE_P(
    AllLocks, MutualExclusion,
    ::testing::Values(Case{"alock", LockKind::kALock, {5, 5}, false},
                      Case{"alock_budget1", LockKind::kALock, {1, 1}, false},
                      Case{"alock_budget_3_2_paused_atomics", LockKind::kALock, {3, 2}, true},
                      Case{"rdma_mcs", LockKind::kRdmaMcs, {}, false},
                      Case{"rdma_mcs_paused_atomics", LockKind::kRdmaMcs, {}, true},
                      Case{"local_mcs", LockKind::kLocalMcs, {}, false}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// The RDMA spin baseline on the soft fabric only: on Soft-RoCE a retransmitted
// CAS is sometimes executed a second time, after the lock's release, which
// wedges a spin lock released by a plain WRITE for good (the lock then fails
// with DATA_LOSS naming its own token; tests/verbs/README.md "rxe duplicate
// CAS"). That is an rxe bug, not something this baseline can survive.
INSTANTIATE_TEST_SUITE_P(SpinBaseline, MutualExclusion,
                         ::testing::ValuesIn(OnlyOnSoft<Case>({Case{"rdma_spin", LockKind::kRdmaSpin, {}, false}})),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Soft-RoCE's torn 8-byte WRITEs (tests/verbs/README.md, "rxe torn WRITE") on
// the host: RDMA MCS waiters must act only on complete `next`/`budget`
// values. ALock writes no descriptor over the NIC (its NIC side is one
// token word, taken by CAS), so it holds in either byte order. Soft only
// (the guest's verbs run has the real thing in the cases above).
INSTANTIATE_TEST_SUITE_P(
    ByteCopies, MutualExclusion,
    ::testing::ValuesIn(OnlyOnSoft<Case>({Case{"alock_byte_copies", LockKind::kALock, {5, 5}, false, true},
                                          Case{"alock_budget1_byte_copies", LockKind::kALock, {1, 1}, false, true},
                                          Case{"alock_byte_copies_descending", LockKind::kALock, {5, 5}, false, true,
                                               true},
                                          Case{"rdma_mcs_byte_copies", LockKind::kRdmaMcs, {}, false, true},
                                          Case{"rdma_spin_byte_copies", LockKind::kRdmaSpin, {}, false, true}})),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Disabled (run with --gtest_also_run_disabled_tests): bytes landing last to
// first, an order no known NIC uses (rxe on x86 copies ascending). RDMA MCS
// fails here within one run (seed 20240611), which is the residual risk
// tests/verbs/README.md names, in a stronger form: a `next` link seen with its
// low byte(s) still zero is a 64-byte-aligned address inside the same node's
// arena, so Unlock accepts it and hands over to the wrong line (Lock finds
// the queue tail holding 0x1, kGo written over the lock word at the arena
// start). Ascending copies cannot produce this: a prefix of a descriptor
// pointer over zeros is far below any arena unless all six address bytes
// landed.
INSTANTIATE_TEST_SUITE_P(
    DISABLED_DescendingByteCopies, MutualExclusion,
    ::testing::Values(Case{"rdma_mcs_byte_copies_descending", LockKind::kRdmaMcs, {}, false, true, true}),
    [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

}  // namespace
}  // namespace locks::testing
