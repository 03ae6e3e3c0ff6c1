// Queue unit tests: sequential semantics against std::deque on every path
// (native, loopback, remote), full and empty edges, the ring wrapping around
// many times, batches, bad input, shutdown, multi-process style creation, and
// the per-operation NIC costs. Backends from RDMADS_FABRICS (default soft),
// so the same binary runs on verbs in the Soft-RoCE guest.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/op_counters.h"
#include "structures/queue/queue.h"
#include "testing/backends.h"
#include "testing/op_cost.h"

namespace structures {
namespace {

struct Msg {
  uint64_t id;
  uint64_t body[4];
  friend bool operator==(const Msg&, const Msg&) = default;
};
Msg MakeMsg(uint64_t id) { return {id, {id * 3, ~id, id + 7, 42}}; }

static_assert(QueueValue<uint8_t> && QueueValue<Msg> && QueueValue<char[56]>);
static_assert(!QueueValue<char[57]>, "values over 56 bytes must not compile");
static_assert(!QueueValue<std::string>, "non-trivially-copyable values must not compile");

QueueOptions Capacity(uint64_t c) {
  QueueOptions o;
  o.capacity = c;
  return o;
}

using Env = rdma::testing::ClusterWithSession;
Env MakeEnv(const std::string& backend, int nodes) {
  return rdma::testing::MakeClusterWithSession(backend, nodes, 8 << 20);
}

class QueuePathTest : public ::testing::TestWithParam<std::tuple<std::string, Path>> {};

// Random enqueues, dequeues and batches against std::deque on one path, with
// a capacity of 7 so the ring fills, empties and wraps around many times.
TEST_P(QueuePathTest, SequentialMatchesDeque) {
  const auto [backend, path] = GetParam();
  Env e = MakeEnv(backend, 2);
  ASSERT_NE(e.session, nullptr);
  auto q = Queue<Msg>::Create(*e.cluster, Capacity(7));
  ASSERT_TRUE(q.ok()) << q.status();
  auto c = q->NewClient(*e.session);
  ASSERT_TRUE(c.ok()) << c.status();
  const rdma::NodeId home = path == Path::kRemote ? 1 : 0;
  std::deque<Msg> model;
  std::mt19937_64 rng(7);
  uint64_t next = 1;
  for (int i = 0; i < 600; ++i) {
    const int op = static_cast<int>(rng() % 4);
    if (op == 0) {
      const Msg m = MakeMsg(next++);
      auto in = (*c)->Enqueue(home, m, path);
      ASSERT_TRUE(in.ok()) << in.status();
      EXPECT_EQ(*in, model.size() < 7) << i;
      if (*in) model.push_back(m);
    } else if (op == 1) {
      auto out = (*c)->Dequeue(home, path);
      ASSERT_TRUE(out.ok()) << out.status();
      if (model.empty()) {
        EXPECT_EQ(*out, std::nullopt) << i;
      } else {
        EXPECT_EQ(*out, std::optional<Msg>(model.front())) << i;
        model.pop_front();
      }
    } else if (op == 2) {
      std::vector<Msg> batch;
      const size_t k = 1 + rng() % 5;
      for (size_t j = 0; j < k; ++j) batch.push_back(MakeMsg(next++));
      auto n = (*c)->EnqueueBatch(home, batch, path);
      ASSERT_TRUE(n.ok()) << n.status();
      EXPECT_EQ(*n, std::min(k, 7 - model.size())) << i;
      for (size_t j = 0; j < *n; ++j) model.push_back(batch[j]);
    } else {
      const size_t k = 1 + rng() % 5;
      auto out = (*c)->DequeueBatch(home, k, path);
      ASSERT_TRUE(out.ok()) << out.status();
      ASSERT_EQ(out->size(), std::min(k, model.size())) << i;
      for (const Msg& m : *out) {
        EXPECT_EQ(m, model.front()) << i;
        model.pop_front();
      }
    }
    auto size = (*c)->Size(home, path);
    ASSERT_TRUE(size.ok());
    EXPECT_EQ(*size, model.size()) << i;
  }
  EXPECT_GT(next, 7u * 20) << "the ring should have wrapped many times";
}

INSTANTIATE_TEST_SUITE_P(
    Paths, QueuePathTest,
    ::testing::Combine(::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                       ::testing::Values(Path::kNative, Path::kLoopback, Path::kRemote)),
    [](const auto& info) {
      return std::get<0>(info.param) + "_" + std::string(rdma::PathName(std::get<1>(info.param)));
    });

class QueueTest : public ::testing::TestWithParam<std::string> {};

// What one path enqueues, the others dequeue, in order.
TEST_P(QueueTest, PathsSeeEachOthersValues) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  auto q = Queue<uint64_t>::Create(*e.cluster, Capacity(64));
  ASSERT_TRUE(q.ok());
  auto s1 = e.cluster->NewSession(1);
  ASSERT_TRUE(s1.ok());
  auto c0 = q->NewClient(*e.session);
  auto c1 = q->NewClient(**s1);
  ASSERT_TRUE(c0.ok() && c1.ok());
  ASSERT_TRUE(*(*c0)->Enqueue(0, 1, Path::kNative));
  ASSERT_TRUE(*(*c0)->Enqueue(0, 2, Path::kLoopback));
  ASSERT_TRUE(*(*c1)->Enqueue(0, 3, Path::kRemote));
  EXPECT_EQ(*(*c1)->Dequeue(0), std::optional<uint64_t>(1));
  EXPECT_EQ(*(*c0)->Dequeue(0, Path::kLoopback), std::optional<uint64_t>(2));
  EXPECT_EQ(*(*c0)->Dequeue(0), std::optional<uint64_t>(3));
  EXPECT_EQ(*(*c0)->Dequeue(0), std::nullopt);
  // Node 1's own queue is separate.
  ASSERT_TRUE(*(*c0)->Enqueue(1, 9));
  EXPECT_EQ(*(*c0)->Size(0), 0u);
  EXPECT_EQ(*(*c1)->Dequeue(1), std::optional<uint64_t>(9));
}

TEST_P(QueueTest, FullAndEmptyEdges) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  auto q = Queue<uint64_t>::Create(*e.cluster, Capacity(4));
  ASSERT_TRUE(q.ok());
  auto c = q->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  for (rdma::NodeId home : {0, 1}) {
    const Path path = home == 0 ? Path::kAuto : Path::kRemote;
    EXPECT_EQ(*(*c)->Dequeue(home, path), std::nullopt);
    EXPECT_TRUE((*c)->DequeueBatch(home, 4, path)->empty());
    const std::vector<uint64_t> six = {1, 2, 3, 4, 5, 6};
    EXPECT_EQ(*(*c)->EnqueueBatch(home, absl::MakeConstSpan(six).first(3), path), 3u);
    EXPECT_EQ(*(*c)->EnqueueBatch(home, absl::MakeConstSpan(six).subspan(3, 3), path), 1u);  // one fits
    EXPECT_FALSE(*(*c)->Enqueue(home, 7, path));  // full: nothing changes
    EXPECT_EQ(*(*c)->Size(home, path), 4u);
    EXPECT_EQ(*(*c)->DequeueBatch(home, 4, path), (std::vector<uint64_t>{1, 2, 3, 4}));
    EXPECT_EQ(*(*c)->Dequeue(home, path), std::nullopt);
  }
}

// The smallest ring (kMinCapacity = 2), on both homes, round after round:
// full at two values, FIFO across every wrap.
TEST_P(QueueTest, SmallestRingWrapsAround) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  auto q = Queue<uint64_t>::Create(*e.cluster, Capacity(2));
  ASSERT_TRUE(q.ok()) << q.status();
  auto c = q->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  for (rdma::NodeId home : {0, 1}) {
    const Path path = home == 0 ? Path::kAuto : Path::kRemote;
    for (uint64_t round = 0; round < 20; ++round) {
      const uint64_t v = 10 * round + 1;
      ASSERT_TRUE(*(*c)->Enqueue(home, v, path)) << round;
      ASSERT_TRUE(*(*c)->Enqueue(home, v + 1, path)) << round;
      ASSERT_FALSE(*(*c)->Enqueue(home, v + 2, path)) << round;  // full: nothing changes
      ASSERT_EQ(*(*c)->Dequeue(home, path), std::optional<uint64_t>(v)) << round;
      if (round % 2 == 1) {  // one in, one out: the ring is never empty here
        ASSERT_TRUE(*(*c)->Enqueue(home, v + 3, path));
        ASSERT_EQ(*(*c)->Dequeue(home, path), std::optional<uint64_t>(v + 1));
        ASSERT_EQ(*(*c)->Dequeue(home, path), std::optional<uint64_t>(v + 3));
      } else {
        ASSERT_EQ(*(*c)->Dequeue(home, path), std::optional<uint64_t>(v + 1));
      }
      ASSERT_EQ(*(*c)->Dequeue(home, path), std::nullopt) << round;
    }
  }
}

TEST_P(QueueTest, BadInput) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  EXPECT_EQ(Queue<uint64_t>::Create(*e.cluster, Capacity(0)).status().code(), absl::StatusCode::kInvalidArgument);
  // One slot cannot tell "full" from "free for the next round" (layout.h,
  // kMinCapacity): refused, not a queue that overwrites its only value.
  EXPECT_EQ(Queue<uint64_t>::Create(*e.cluster, Capacity(1)).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Queue<uint64_t>::Create(*e.cluster, Capacity(uint64_t{1} << 33)).status().code(),
            absl::StatusCode::kInvalidArgument);
  QueueOptions no_timeout;
  no_timeout.lock_timeout = std::chrono::seconds(0);
  EXPECT_EQ(Queue<uint64_t>::Create(*e.cluster, no_timeout).status().code(), absl::StatusCode::kInvalidArgument);
  QueueOptions bad_budget;
  bad_budget.budgets.remote = 0;
  EXPECT_EQ(Queue<uint64_t>::Create(*e.cluster, bad_budget).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Queue<uint64_t>::Create(*e.cluster, Capacity(1 << 20)).status().code(),
            absl::StatusCode::kResourceExhausted);  // larger than the arena
  auto q = Queue<uint64_t>::Create(*e.cluster, Capacity(8));
  ASSERT_TRUE(q.ok());
  auto c = q->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  std::vector<uint64_t> nine(9, 1);
  EXPECT_EQ((*c)->EnqueueBatch(0, nine).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->EnqueueBatch(0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->DequeueBatch(0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->DequeueBatch(0, 9).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->Enqueue(2, 1).status().code(), absl::StatusCode::kInvalidArgument);  // no node 2
  EXPECT_EQ((*c)->Enqueue(1, 1, Path::kNative).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*c)->Enqueue(0, 1, Path::kRemote).status().code(), absl::StatusCode::kInvalidArgument);
  // No session: a NIC path is refused.
  auto bare = q->NewClient(e.cluster->node(0));
  ASSERT_TRUE(bare.ok());
  EXPECT_TRUE(*(*bare)->Enqueue(0, 5));
  EXPECT_EQ((*bare)->Enqueue(1, 5).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*bare)->Dequeue(0, Path::kLoopback).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*(*bare)->Dequeue(0), std::optional<uint64_t>(5));  // nothing lost
}

TEST_P(QueueTest, ShutDownNodes) {
  Env e = MakeEnv(GetParam(), 3);
  ASSERT_NE(e.session, nullptr);
  auto q = Queue<uint64_t>::Create(*e.cluster, Capacity(8));
  ASSERT_TRUE(q.ok());
  auto c = q->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(*(*c)->Enqueue(0, 1));
  e.cluster->node(2).Shutdown();
  EXPECT_EQ((*c)->Enqueue(2, 1).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(q->NewClient(e.cluster->node(2)).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(*(*c)->Dequeue(0), std::optional<uint64_t>(1));  // the live queue still works
}

// Two native threads that both enqueue and dequeue at full speed on the
// smallest ring (claims completing out of order, full and empty met on most
// operations, a thread waiting for the other's claim in flight): every value
// comes out exactly once, and each thread's values come out, to any one
// consumer, in the order it enqueued them.
TEST_P(QueueTest, TwoNativeThreadsBothWaysOnTheSmallestRingKeepEveryValueAndItsOrder) {
  Env e = MakeEnv(GetParam(), 1);
  ASSERT_NE(e.session, nullptr);
  auto q = Queue<uint64_t>::Create(*e.cluster, Capacity(2));
  ASSERT_TRUE(q.ok()) << q.status();
  constexpr uint64_t kPerThread = 200000;
  std::atomic<uint64_t> in{0}, out{0};
  std::vector<std::vector<uint64_t>> seen(2);
  auto worker = [&](int t) {
    auto c = q->NewClient(e.cluster->node(0));
    ASSERT_TRUE(c.ok()) << c.status();
    uint64_t last[2] = {0, 0};
    for (uint64_t i = 1; i <= kPerThread; ++i) {
      absl::StatusOr<bool> ok = (*c)->Enqueue(0, (uint64_t{1} + t) << 40 | i);
      ASSERT_TRUE(ok.ok()) << ok.status();
      if (*ok) in.fetch_add(1, std::memory_order_relaxed);
      absl::StatusOr<std::optional<uint64_t>> v = (*c)->Dequeue(0);
      ASSERT_TRUE(v.ok()) << v.status();
      if (!v->has_value()) continue;
      out.fetch_add(1, std::memory_order_relaxed);
      const int from = static_cast<int>((**v >> 40) - 1);
      ASSERT_TRUE(from == 0 || from == 1) << **v;
      const uint64_t n = **v & ((uint64_t{1} << 40) - 1);
      ASSERT_GT(n, last[from]) << "thread " << t << " saw thread " << from << "'s values out of order";
      last[from] = n;
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  auto c = q->NewClient(e.cluster->node(0));
  ASSERT_TRUE(c.ok());
  for (;;) {
    absl::StatusOr<std::optional<uint64_t>> v = (*c)->Dequeue(0);
    ASSERT_TRUE(v.ok()) << v.status();
    if (!v->has_value()) break;
    out.fetch_add(1);
  }
  EXPECT_EQ(in.load(), out.load());
  EXPECT_GT(in.load(), 0u);
}

// Multi-process style: each node creates only its own ring; clients find the
// other rings through their sessions.
TEST_P(QueueTest, LocalPartsAgreeOnLayout) {
  auto cluster = rdma::testing::MakeCluster(GetParam(), 2, 8 << 20);
  ASSERT_NE(cluster, nullptr);
  rdma::Node* const only0[] = {&cluster->node(0)};
  rdma::Node* const only1[] = {&cluster->node(1)};
  auto q0 = Queue<uint64_t>::Create(*cluster, only0, Capacity(16));
  auto q1 = Queue<uint64_t>::Create(*cluster, only1, Capacity(16));
  ASSERT_TRUE(q0.ok() && q1.ok());
  auto s0 = cluster->NewSession(0);
  auto s1 = cluster->NewSession(1);
  ASSERT_TRUE(s0.ok() && s1.ok());
  auto c0 = q0->NewClient(**s0);
  auto c1 = q1->NewClient(**s1);
  ASSERT_TRUE(c0.ok() && c1.ok());
  for (uint64_t v = 0; v < 10; ++v) ASSERT_TRUE(*(*c1)->Enqueue(0, v));
  for (uint64_t v = 0; v < 10; ++v) EXPECT_EQ(*(*c0)->Dequeue(0), std::optional<uint64_t>(v));
  ASSERT_TRUE(*(*c0)->Enqueue(1, 77));
  EXPECT_EQ(*(*c1)->Dequeue(1), std::optional<uint64_t>(77));
}

// Per-operation costs, uncontended (docs/design.md §8): deterministic counts.
TEST_P(QueueTest, OperationCosts) {
  Env e = MakeEnv(GetParam(), 2);
  ASSERT_NE(e.session, nullptr);
  auto q = Queue<Msg>::Create(*e.cluster, Capacity(64));
  ASSERT_TRUE(q.ok());
  auto c = q->NewClient(*e.session);
  ASSERT_TRUE(c.ok());
  auto cost = [](auto&& op) { return rdma::testing::CostOf(op); };
  auto print = [](const std::string& what, const rdma::OpCounters& o) { rdma::testing::PrintCost(what, o); };

  const Msg m = MakeMsg(1);
  std::vector<Msg> sixteen(16, m);
  for (auto [name, home, path] : {std::tuple{"remote", rdma::NodeId{1}, Path::kRemote},
                                  std::tuple{"loopback", rdma::NodeId{0}, Path::kLoopback}}) {
    const std::string n(name);
    const rdma::OpCounters enq = cost([&] { ASSERT_TRUE(*(*c)->Enqueue(home, m, path)); });
    const rdma::OpCounters deq = cost([&] { ASSERT_TRUE((*c)->Dequeue(home, path)->has_value()); });
    const rdma::OpCounters empty = cost([&] { ASSERT_FALSE((*c)->Dequeue(home, path)->has_value()); });
    const rdma::OpCounters batch_in = cost([&] { ASSERT_EQ(*(*c)->EnqueueBatch(home, sixteen, path), 16u); });
    const rdma::OpCounters batch_out = cost([&] { ASSERT_EQ((*c)->DequeueBatch(home, 16, path)->size(), 16u); });
    print(n + " enqueue", enq);
    print(n + " dequeue", deq);
    print(n + " dequeue (empty)", empty);
    print(n + " enqueue batch of 16", batch_in);
    print(n + " dequeue batch of 16", batch_out);
    // Enqueue: {CAS, READ line, READ tail, READ seq, READ the head's claim
    // word} + {WRITE payload, WRITE seq, WRITE tail} inline unwaited +
    // unlock CAS: 2 round trips.
    EXPECT_EQ(enq.round_trips, 2u) << n;
    EXPECT_EQ(enq.nic_ops, 9u) << n;
    EXPECT_EQ(enq.doorbells, 3u) << n;
    // Dequeue: + the payload READ in the first chain; {WRITE seq, WRITE head}.
    EXPECT_EQ(deq.round_trips, 2u) << n;
    EXPECT_EQ(deq.nic_ops, 9u) << n;
    EXPECT_EQ(deq.doorbells, 3u) << n;
    // Empty: the lock with its reads, then the unlock.
    EXPECT_EQ(empty.round_trips, 2u) << n;
    EXPECT_EQ(empty.nic_ops, 7u) << n;
    // Batches of 16: at most 3 round trips.
    EXPECT_LE(batch_in.round_trips, 3u) << n;
    EXPECT_LE(batch_out.round_trips, 3u) << n;
  }
  // Native last: node 0's side is then the native lease's, which a NIC
  // thread arriving later waits for (queue_lease_test).
  for (auto [name, o] :
       {std::pair{"native enqueue", cost([&] { ASSERT_TRUE(*(*c)->Enqueue(0, m)); })},
        std::pair{"native dequeue", cost([&] { ASSERT_TRUE((*c)->Dequeue(0)->has_value()); })},
        std::pair{"native dequeue (empty)", cost([&] { ASSERT_FALSE((*c)->Dequeue(0)->has_value()); })}}) {
    print(name, o);
    EXPECT_EQ(o, rdma::OpCounters{}) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, QueueTest, ::testing::ValuesIn(rdma::testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace structures
