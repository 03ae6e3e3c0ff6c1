// Linearizability of the queue under mixed paths (docs/design.md §7):
// producers and consumers on node 0 take the native and the loopback path,
// threads on nodes 1 and 2 the remote path, all on node 0's queue. Enqueued
// values are distinct, so long histories are decided by lincheck's queue
// decider; short runs on a tiny ring, which keep the queue at full and empty,
// are decided by the generic search against the bounded model.
// Backends from RDMADS_FABRICS (default soft); fixed seeds; bounded ops and
// time per worker.

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/lincheck/checker.h"
#include "tests/lincheck/queue_model.h"
#include "tests/lincheck/test_util.h"
#include "tests/structures/queue_stress.h"

namespace structures::testing {
namespace {

class QueueLincheckTest : public ::testing::TestWithParam<std::string> {
 protected:
  bool soft() const { return GetParam() == "soft"; }
  // Native operations are ~100x faster than NIC ones: native workers pause
  // between operations so that they overlap the whole NIC run.
  std::chrono::microseconds Think() const { return std::chrono::microseconds(soft() ? 20 : 1000); }

  QueueStressConfig Mixed(uint64_t seed) const {
    QueueStressConfig c;
    c.backend = GetParam();
    c.seed = seed;
    c.workers = {{0, Path::kAuto, QueueWorker::kProducer, 1, Think()},
                 {0, Path::kAuto, QueueWorker::kConsumer, 1, Think()},
                 {0, Path::kLoopback, QueueWorker::kBoth},
                 {1, Path::kAuto, QueueWorker::kProducer},
                 {2, Path::kAuto, QueueWorker::kConsumer}};
    c.ops_per_worker = soft() ? 1500 : 300;
    c.duration = std::chrono::milliseconds(soft() ? 4000 : 15000);
    return c;
  }

  void CheckUnbounded(const QueueStressConfig& c) {
    QueueStressResult r = RunQueueStress<queue_internal::ShippedChecks>(c);
    EXPECT_EQ(r.errors, 0u) << r.first_error;
    std::printf("%zu ops recorded: %llu enqueued, %llu dequeued, %llu empty, %llu full\n", r.history.size(),
                static_cast<unsigned long long>(r.enqueued), static_cast<unsigned long long>(r.dequeued),
                static_cast<unsigned long long>(r.empty), static_cast<unsigned long long>(r.full));
    EXPECT_EQ(r.full, 0u) << "the ring was sized never to fill";
    EXPECT_GT(r.dequeued, c.workers.size() * 10);
    bool batches = false;
    for (const QueueWorker& w : c.workers) batches = batches || w.batch > 1;
    if (batches) {  // the batch conditions had something to check
      std::printf("%zu enqueue batches and %zu dequeue batches of 2 or more\n", r.enq_batches.size(),
                  r.deq_batches.size());
      EXPECT_FALSE(r.enq_batches.empty());
      EXPECT_FALSE(r.deq_batches.empty());
    }
    EXPECT_EQ(BatchOrderViolation(r.history, r.enq_batches, r.deq_batches), "");
    lincheck::CheckOptions o;
    o.timeout = absl::Seconds(30);
    EXPECT_TRUE(lincheck::IsLinearizable(lincheck::QueueModel(), r.history, o));
  }
};

TEST_P(QueueLincheckTest, MixedPaths) { CheckUnbounded(Mixed(1)); }

// Full speed: no worker pauses, so the native producer and consumer on node
// 0 meet each other (and the NIC workers) at the ring's ends as often as
// the CPU allows; with two native threads both producing and consuming, and
// with a small ring that wraps many times.
TEST_P(QueueLincheckTest, FullSpeedMixedPaths) { CheckUnbounded(FullSpeed(Mixed(5))); }
TEST_P(QueueLincheckTest, FullSpeedNativesBothWays) {
  QueueStressConfig c = FullSpeed(Mixed(6));
  for (int w : {0, 1}) c.workers[w].role = QueueWorker::kBoth;
  CheckUnbounded(c);
}

// The batch conditions on hand-made histories that the per-value queue
// checker accepts (each value recorded as its own operation over the
// batch's interval).
TEST(QueueBatchOrder, CatchesWhatSeparateOperationsHide) {
  using lincheck::Op;
  // One EnqueueBatch([1, 2]); 2 comes out before 1.
  const lincheck::History reversed = {
      Op(0, 0, 10, "enqueue", {1}, {}),  Op(0, 0, 10, "enqueue", {2}, {}),
      Op(1, 20, 30, "dequeue", {}, {1, 2}), Op(1, 40, 50, "dequeue", {}, {1, 1})};
  EXPECT_TRUE(lincheck::IsLinearizable(lincheck::QueueModel(), reversed));  // what the checker alone says
  EXPECT_NE(BatchOrderViolation(reversed, {{1, 2}}, {}), "");
  EXPECT_EQ(BatchOrderViolation(reversed, {{2, 1}}, {}), "");  // a batch [2, 1] did exactly this
  // 1, 2, 3 go in one at a time; one DequeueBatch returns [1, 3] while
  // another consumer's dequeue of 2 overlaps it.
  const lincheck::History gap = {
      Op(0, 0, 1, "enqueue", {1}, {}),    Op(0, 2, 3, "enqueue", {2}, {}),
      Op(0, 4, 5, "enqueue", {3}, {}),    Op(1, 10, 20, "dequeue", {}, {1, 1}),
      Op(1, 10, 20, "dequeue", {}, {1, 3}), Op(2, 12, 18, "dequeue", {}, {1, 2})};
  EXPECT_TRUE(lincheck::IsLinearizable(lincheck::QueueModel(), gap));
  EXPECT_NE(BatchOrderViolation(gap, {}, {{1, 3}}), "");
  EXPECT_EQ(BatchOrderViolation(gap, {}, {{2, 3}}), "");
  // A DequeueBatch [2, 1] of values that went in 1 then 2.
  EXPECT_NE(BatchOrderViolation(gap, {}, {{2, 1}}), "");
  // Half a batch out, the first half: fine; the second half alone: not.
  const lincheck::History half = {Op(0, 0, 10, "enqueue", {1}, {}), Op(0, 0, 10, "enqueue", {2}, {}),
                                  Op(1, 20, 30, "dequeue", {}, {1, 1})};
  EXPECT_EQ(BatchOrderViolation(half, {{1, 2}}, {}), "");
  EXPECT_NE(BatchOrderViolation(half, {{2, 1}}, {}), "");
}

// Every thread both produces and consumes, in batches of 4: batches
// interleave with single operations of the other paths.
TEST_P(QueueLincheckTest, MixedPathsWithBatches) {
  QueueStressConfig c = Mixed(2);
  for (QueueWorker& w : c.workers) {
    w.role = QueueWorker::kBoth;
    w.batch = 4;
  }
  c.workers[3].batch = 1;
  CheckUnbounded(c);
}

// Two native threads producing and consuming at full speed, next to the
// loopback and remote threads: the native lease of each side closes for
// every NIC arrival while native claims are in flight, and opens again.
TEST_P(QueueLincheckTest, MixedPathsWithBusyNatives) {
  QueueStressConfig c = Mixed(4);
  for (int w : {0, 1}) {
    c.workers[w].role = QueueWorker::kBoth;
    c.workers[w].think = std::chrono::microseconds(0);
  }
  CheckUnbounded(c);
}

// A ring of 3 slots, kept at full and at empty, wrapped many times: many
// short runs (the generic search copes with a few dozen operations), each
// checked against the bounded model.
TEST_P(QueueLincheckTest, TinyRingNearFullAndEmpty) {
  const int runs = soft() ? 40 : 6;
  uint64_t full = 0, empty = 0;
  for (int run = 0; run < runs; ++run) {
    QueueStressConfig c;
    c.backend = GetParam();
    c.seed = 100 + run;
    c.capacity = 3;
    c.workers = {{0, Path::kAuto, QueueWorker::kBoth},
                 {0, Path::kLoopback, QueueWorker::kBoth},
                 {1, Path::kAuto, QueueWorker::kBoth}};
    c.ops_per_worker = 8;
    QueueStressResult r = RunQueueStress<queue_internal::ShippedChecks>(c);
    ASSERT_EQ(r.errors, 0u) << r.first_error;
    full += r.full;
    empty += r.empty;
    lincheck::CheckOptions o;
    o.timeout = absl::Seconds(20);
    ASSERT_TRUE(lincheck::IsLinearizable(lincheck::QueueModel(3), r.history, o)) << "run " << run;
  }
  std::printf("%d runs: %llu full enqueues, %llu empty dequeues\n", runs, static_cast<unsigned long long>(full),
              static_cast<unsigned long long>(empty));
  EXPECT_GT(full, 0u);
  EXPECT_GT(empty, 0u);
}

// Soft NIC in byte-copy mode (rxe's byte-by-byte payload copies) with every
// NIC copy of node 0's ring parked in the middle of a value: NIC producers'
// payload WRITEs are seen half done by native consumers, and native
// producers' stores land inside NIC consumers' READs. The seq words must
// keep every consumer from taking such a value.
class QueueLincheckByteCopiesTest : public QueueLincheckTest {};

TEST_P(QueueLincheckByteCopiesTest, MixedPaths) {
  QueueStressConfig c = Mixed(3);
  c.byte_granular_copies = true;
  c.pause = std::chrono::microseconds(10);
  c.ops_per_worker = 600;
  CheckUnbounded(c);
}

TEST_P(QueueLincheckByteCopiesTest, FullSpeedMixedPaths) {
  QueueStressConfig c = FullSpeed(Mixed(7));
  c.byte_granular_copies = true;
  c.pause = std::chrono::microseconds(10);
  c.ops_per_worker = 600;
  CheckUnbounded(c);
}

// Node 2's worker, producing and consuming through the NIC, dies in the
// middle of an operation (a crash point after its NIC's k-th work request,
// k varied by seed) while native, loopback and remote workers use node 0's
// ring: its last operation stays pending (the checker may take it, with any
// value for a dequeue, or leave it out), node 0 flags the side it held, the
// next holder makes whole what it left, and the history stays linearizable.
// Plain and byte-by-byte copies.
class QueueLincheckCrashTest : public QueueLincheckTest {};

TEST_P(QueueLincheckCrashTest, ARemoteProducerOrConsumerThatDiesStaysPending) {
  for (bool bytes : {false, true}) {
    for (uint64_t seed : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << (bytes ? "byte copies" : "word copies") << ", seed " << seed);
      QueueStressConfig c = Mixed(20 + seed);
      c.workers[4] = {2, Path::kAuto, QueueWorker::kBoth};
      c.byte_granular_copies = bytes;
      c.crash_node = 2;
      c.crash_after_wrs = 120 + 53 * seed + (bytes ? 11 : 0);
      c.ops_per_worker = 800;
      c.duration = std::chrono::milliseconds(1500);
      QueueStressResult r = RunQueueStress<queue_internal::ShippedChecks>(c);
      EXPECT_EQ(r.errors, 0u) << r.first_error;
      EXPECT_EQ(r.crashed, 1u) << "node 2's worker did not die in an operation";
      EXPECT_GT(r.dequeued, c.workers.size() * 10);
      lincheck::CheckOptions o;
      o.timeout = absl::Seconds(30);
      EXPECT_TRUE(lincheck::IsLinearizable(lincheck::QueueModel(), r.history, o));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, QueueLincheckTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Backends, QueueLincheckByteCopiesTest,
                         ::testing::ValuesIn(rdma::testing::SoftIfUnderTest()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QueueLincheckByteCopiesTest);
INSTANTIATE_TEST_SUITE_P(Backends, QueueLincheckCrashTest, ::testing::ValuesIn(rdma::testing::SoftIfUnderTest()),
                         [](const auto& info) { return info.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(QueueLincheckCrashTest);

}  // namespace
}  // namespace structures::testing
