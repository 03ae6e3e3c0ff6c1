// Transport conformance: one suite, run against every backend named in
// RDMADS_FABRICS (soft on the host; verbs inside the Soft-RoCE guest).

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "testing/backends.h"

namespace rdma {
namespace {

class TransportConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    cluster_ = testing::MakeCluster(GetParam(), 3);
    ASSERT_NE(cluster_, nullptr);
  }
  std::unique_ptr<Session> NewSession(NodeId self, SessionOptions o = {}) {
    auto s = cluster_->NewSession(self, o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? std::move(*s) : nullptr;
  }
  RemotePtr Alloc(NodeId node, size_t bytes) {
    auto p = cluster_->node(node).Allocate(bytes);
    EXPECT_TRUE(p.ok()) << p.status();
    return *p;
  }
  std::unique_ptr<Cluster> cluster_;
};

TEST_P(TransportConformance, ReadAfterWriteIsVisibleRemoteAndLoopback) {
  auto s = NewSession(0);
  for (NodeId target : {NodeId{0}, NodeId{1}, NodeId{2}}) {
    RemotePtr p = Alloc(target, 64);
    char out[64], in[64] = {};
    for (int i = 0; i < 64; ++i) out[i] = static_cast<char>(i * 7 + target);
    ASSERT_TRUE(s->Write(p, out, 64).ok());
    ASSERT_TRUE(s->Read(p, in, 64).ok());
    EXPECT_EQ(0, std::memcmp(out, in, 64)) << "target node " << target;
    // The owner sees the bytes in its memory too.
    EXPECT_EQ(0, std::memcmp(out, p.local<char>(), 64));
  }
}

TEST_P(TransportConformance, WorkRequestsExecuteInOrderWithinAQp) {
  auto s = NewSession(1);
  RemotePtr word = Alloc(2, 8);
  uint64_t seen = 0, old = 0;
  {
    Batch b(*s, 2);
    for (uint64_t v = 1; v <= 50; ++v) b.Write64(word, v);
    b.Read(word, &seen, 8);
    b.FetchAndAdd(word, 1000, &old);
    ASSERT_TRUE(b.Execute().ok());
  }
  EXPECT_EQ(seen, 50u);  // the READ saw the last of 50 ordered WRITEs
  EXPECT_EQ(old, 50u);
  EXPECT_EQ(*s->Read64(word), 1050u);
}

TEST_P(TransportConformance, WritesBecomeVisibleInPostOrder) {
  // data then flag, one chain: whoever sees the flag must see the data.
  auto s = NewSession(0);
  RemotePtr data = Alloc(1, 8), flag = Alloc(1, 8);
  auto* d = data.local<uint64_t>();
  auto* f = flag.local<uint64_t>();
  std::atomic<bool> bad{false}, done{false};
  std::thread observer([&] {
    while (!done.load()) {
      uint64_t fl = __atomic_load_n(f, __ATOMIC_ACQUIRE);
      uint64_t da = __atomic_load_n(d, __ATOMIC_ACQUIRE);
      if (da < fl) bad = true;
    }
  });
  // Values below 256: one write changes only the low byte, so a CPU load
  // that sees an 8-byte WRITE half landed (rxe copies bytes) still reads the
  // old or the new value, never a mix such as 0x1ff from 0xff and 0x100.
  for (uint64_t i = 1; i <= 255; ++i) {
    ASSERT_TRUE(Batch(*s, 1).Write64(data, i).Write64(flag, i).Execute().ok());
  }
  done = true;
  observer.join();
  EXPECT_FALSE(bad.load());
}

TEST_P(TransportConformance, CompareAndSwapReturnsOldValueOnSuccessAndFailure) {
  auto s = NewSession(0);
  for (NodeId target : {NodeId{0}, NodeId{2}}) {
    RemotePtr w = Alloc(target, 8);
    ASSERT_TRUE(s->Write64(w, 5).ok());
    auto ok = s->CompareAndSwap(w, 5, 9);
    ASSERT_TRUE(ok.ok());
    EXPECT_EQ(*ok, 5u);
    EXPECT_EQ(*s->Read64(w), 9u);
    auto fail = s->CompareAndSwap(w, 5, 11);
    ASSERT_TRUE(fail.ok());
    EXPECT_EQ(*fail, 9u);  // failure returns the current value
    EXPECT_EQ(*s->Read64(w), 9u);
  }
}

TEST_P(TransportConformance, FetchAndAddReturnsOldValueAndWraps) {
  auto s = NewSession(2);
  RemotePtr w = Alloc(1, 8);
  EXPECT_EQ(*s->FetchAndAdd(w, 3), 0u);
  EXPECT_EQ(*s->FetchAndAdd(w, 4), 3u);
  EXPECT_EQ(*s->FetchAndAdd(w, ~uint64_t{0}), 7u);  // adding -1
  EXPECT_EQ(*s->Read64(w), 6u);
}

TEST_P(TransportConformance, ChainUsesOneDoorbellOneRoundTripOneCompletion) {
  auto s = NewSession(0);
  RemotePtr p = Alloc(1, 128);
  OpCounters before = ThisThreadCounters();
  uint64_t vals[4];
  {
    Batch b(*s, 1);
    for (int i = 0; i < 4; ++i) b.Write64(p + 8 * i, 100 + i);
    for (int i = 0; i < 4; ++i) b.Read(p + 8 * i, &vals[i], 8);
    ASSERT_TRUE(b.Execute().ok());
  }
  OpCounters d = ThisThreadCounters() - before;
  EXPECT_EQ(d.nic_ops, 8u);
  EXPECT_EQ(d.doorbells, 1u);
  EXPECT_EQ(d.round_trips, 1u);
  EXPECT_EQ(d.bytes, 64u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(vals[i], 100u + i);
}

TEST_P(TransportConformance, OnlySignaledWorkRequestsComplete) {
  // Raw QP level: a chain of 5 with only the last signaled yields exactly one
  // completion, carrying the last wr_id.
  Node& n0 = cluster_->node(0);
  auto cq = n0.device().CreateCompletionQueue(64);
  ASSERT_TRUE(cq.ok());
  auto qp = n0.device().CreateQueuePair(cq->get(), {});
  ASSERT_TRUE(qp.ok());
  auto remote = cluster_->Connect(1, (*qp)->endpoint());
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_TRUE((*qp)->Connect(*remote).ok());
  RemotePtr dst = Alloc(1, 64);
  ArenaInfo arena = cluster_->node(1).arena_info();
  std::vector<WorkRequest> chain(5);
  uint64_t payload = 42;
  for (int i = 0; i < 5; ++i) {
    chain[i].opcode = Opcode::kWrite;
    chain[i].wr_id = 10 + i;
    chain[i].local = &payload;
    chain[i].length = 8;
    chain[i].inline_data = true;
    chain[i].remote_addr = dst.address() + 8 * i;
    chain[i].rkey = arena.rkey;
  }
  chain.back().signaled = true;
  ASSERT_TRUE((*qp)->Post(chain).ok());
  payload = 0;  // inline: the payload was copied at post time
  Completion c[8];
  int n = (*cq)->Wait(absl::MakeSpan(c), PollMode::kBusy, std::chrono::seconds(5));
  ASSERT_EQ(n, 1);
  EXPECT_EQ(c[0].wr_id, 14u);
  EXPECT_EQ(c[0].status, CompletionStatus::kSuccess);
  EXPECT_EQ((*cq)->Poll(absl::MakeSpan(c)), 0);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(dst.local<uint64_t>()[i], 42u);
}

TEST_P(TransportConformance, WorkRequestsCompleteWithoutThePosterPolling) {
  // The NIC runs asynchronously: memory changes even if nobody polls.
  Node& n0 = cluster_->node(0);
  auto cq = n0.device().CreateCompletionQueue(16);
  auto qp = n0.device().CreateQueuePair(cq->get(), {});
  auto remote = cluster_->Connect(2, (*qp)->endpoint());
  ASSERT_TRUE((*qp)->Connect(*remote).ok());
  RemotePtr dst = Alloc(2, 8);
  uint64_t v = 77;
  WorkRequest wr;
  wr.opcode = Opcode::kWrite;
  wr.local = &v;
  wr.length = 8;
  wr.inline_data = true;
  wr.remote_addr = dst.address();
  wr.rkey = cluster_->node(2).arena_info().rkey;
  wr.signaled = true;
  ASSERT_TRUE((*qp)->Post({&wr, 1}).ok());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (__atomic_load_n(dst.local<uint64_t>(), __ATOMIC_ACQUIRE) != 77 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  EXPECT_EQ(__atomic_load_n(dst.local<uint64_t>(), __ATOMIC_ACQUIRE), 77u);
  Completion c;
  EXPECT_EQ((*cq)->Wait({&c, 1}, PollMode::kBusy, std::chrono::seconds(5)), 1);
}

TEST_P(TransportConformance, InlineWritesNeedNoRegisteredSource) {
  auto s = NewSession(0);
  RemotePtr p = Alloc(1, 32);
  const char msg[] = "inline-16-bytes";  // stack memory, never registered
  ASSERT_TRUE(s->Write(p, msg, sizeof msg).ok());
  EXPECT_STREQ(p.local<char>(), msg);
}

TEST_P(TransportConformance, LargeTransfersRoundTrip) {
  auto s = NewSession(0);
  const size_t n = 512 << 10;
  RemotePtr p = Alloc(2, n);
  std::vector<uint8_t> out(n), in(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 131 + 7);
  ASSERT_TRUE(s->Write(p, out.data(), n).ok());
  ASSERT_TRUE(s->Read(p, in.data(), n).ok());
  EXPECT_EQ(out, in);
  // Unaligned length and offset.
  ASSERT_TRUE(s->Write(p + 3, out.data(), 1001).ok());
  ASSERT_TRUE(s->Read(p + 3, in.data(), 1001).ok());
  EXPECT_EQ(0, std::memcmp(out.data(), in.data(), 1001));
}

TEST_P(TransportConformance, ManyThreadsOnManyQpsAddExactly) {
  constexpr int kThreadsPerNode = 3, kIters = 300;
  std::vector<RemotePtr> counters;
  for (NodeId n = 0; n < 3; ++n) counters.push_back(Alloc(n, 8));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (NodeId n = 0; n < 3; ++n) {
    for (int t = 0; t < kThreadsPerNode; ++t) {
      threads.emplace_back([&, n] {
        auto s = cluster_->NewSession(n);
        if (!s.ok()) {
          ++failures;
          return;
        }
        for (int i = 0; i < kIters; ++i) {
          for (RemotePtr c : counters) {
            if (!(*s)->FetchAndAdd(c, 1).ok()) ++failures;
          }
        }
      });
    }
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (RemotePtr c : counters) {
    EXPECT_EQ(__atomic_load_n(c.local<uint64_t>(), __ATOMIC_ACQUIRE), uint64_t{3 * kThreadsPerNode * kIters});
  }
}

TEST_P(TransportConformance, ConcurrentCasIncrementsAreNotLost) {
  RemotePtr w = Alloc(1, 8);
  std::vector<std::thread> threads;
  for (NodeId n = 0; n < 3; ++n) {
    threads.emplace_back([&, n] {
      auto s = cluster_->NewSession(n);
      ASSERT_TRUE(s.ok());
      for (int i = 0; i < 200; ++i) {
        uint64_t cur = *(*s)->Read64(w);
        for (;;) {
          uint64_t old = *(*s)->CompareAndSwap(w, cur, cur + 1);
          if (old == cur) break;
          cur = old;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(__atomic_load_n(w.local<uint64_t>(), __ATOMIC_ACQUIRE), 600u);
}

TEST_P(TransportConformance, NotifyModeDeliversCompletions) {
  SessionOptions o;
  o.poll_mode = PollMode::kNotify;
  auto s = NewSession(0, o);
  RemotePtr w = Alloc(1, 8);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(s->FetchAndAdd(w, 2).ok());
  EXPECT_EQ(*s->Read64(w), 40u);
}

// CPU time the calling thread has used.
std::chrono::nanoseconds ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
}

TEST_P(TransportConformance, IdleNotifyWaitSleepsInsteadOfSpinning) {
  // kNotify exists to save CPU: an idle wait must block, not poll. Busy
  // polling for 200 ms burns ~200 ms of this thread's CPU; the bound leaves
  // room for slow sanitizer builds while still catching a spinning wait.
  auto cq = cluster_->node(0).device().CreateCompletionQueue(16);
  ASSERT_TRUE(cq.ok()) << cq.status();
  Completion c[4];
  const auto wall = std::chrono::steady_clock::now();
  const auto cpu = ThreadCpuTime();
  EXPECT_EQ((*cq)->Wait(absl::MakeSpan(c), PollMode::kNotify, std::chrono::milliseconds(200)), 0);
  const auto cpu_used = ThreadCpuTime() - cpu;
  EXPECT_GE(std::chrono::steady_clock::now() - wall, std::chrono::milliseconds(190)) << "returned early";
  EXPECT_LT(cpu_used, std::chrono::milliseconds(50))
      << "an idle 200 ms notify wait used " << cpu_used.count() / 1000 << " us of CPU";
}

TEST_P(TransportConformance, PostWithoutWaitingSurfacesLaterAndDrains) {
  auto s = NewSession(0);
  RemotePtr w = Alloc(2, 8);
  for (uint64_t i = 1; i <= 1000; ++i) {  // more than the send queue holds
    ASSERT_TRUE(Batch(*s, 2).Write64(w, i).PostWithoutWaiting().ok());
  }
  ASSERT_TRUE(s->Drain().ok());
  EXPECT_EQ(__atomic_load_n(w.local<uint64_t>(), __ATOMIC_ACQUIRE), 1000u);
  uint64_t v = 0;
  EXPECT_EQ(Batch(*s, 2).Read(w, &v, 8).PostWithoutWaiting().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(TransportConformance, ClosedAndReconnectedSessionsReleaseTheirResponderQps) {
  // Every session holds one responder QP on every node; closing it or
  // reconnecting must give the peer's old one back, not keep it until the
  // peer shuts down.
  Node& peer = cluster_->node(1);
  const size_t idle = peer.responder_qp_count();
  {
    auto s = NewSession(0);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(peer.responder_qp_count(), idle + 1);
    RemotePtr w = Alloc(1, 8);
    for (int i = 0; i < 25; ++i) {
      ASSERT_TRUE(s->Reconnect(1).ok());
      ASSERT_TRUE(s->Write64(w, i).ok());
      EXPECT_EQ(peer.responder_qp_count(), idle + 1) << "after " << i + 1 << " reconnects";
    }
    EXPECT_EQ(*s->Read64(w), 24u);
  }
  EXPECT_EQ(peer.responder_qp_count(), idle);
  for (int i = 0; i < 25; ++i) {
    auto s = NewSession(static_cast<NodeId>(i % 3));
    ASSERT_NE(s, nullptr);
  }
  for (NodeId n = 0; n < 3; ++n) EXPECT_EQ(cluster_->node(n).responder_qp_count(), n == 1 ? idle : 0u);
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformance, ::testing::ValuesIn(testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rdma
