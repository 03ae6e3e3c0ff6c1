// Lock checks on queue and lock words seen corrupt, late or half written,
// which the mixed-path stress (mutual_exclusion_test) does not reach, each
// shown by its own test (tests/README.md, audit table):
//  * a queue word that names no descriptor (an ALock or MCS tail, an MCS
//    `next` link): the lock returns DataLoss and never writes through it;
//  * the RDMA spin lock finding its own token in the word after its release
//    (a CAS executed twice): DataLoss at once, not a wait for nobody;
//  * a releaser whose successor swapped itself in but has not linked yet
//    waits for the link (ALock native, local MCS, RDMA MCS);
//  * the RDMA MCS waiter waits for the whole hand-over WRITE (byte copies),
//    held half landed by the soft NIC's copy hook.
// Soft NIC only: the corrupted words are stored by the test's CPU, and the
// half-landed WRITE is held by the soft NIC's copy hook.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/session.h"
#include "tests/locks/lock_checks_util.h"

namespace locks::testing {
namespace {

using rdma::NodeId;
using rdma::RemotePtr;

class CorruptWordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rdma::ClusterOptions o;
    o.named_bytes = 0;  // no named structures: nothing registered for them
    o.num_nodes = 2;
    o.node.arena_bytes = 2 << 20;
    o.fabric.kind = rdma::FabricKind::kSoft;
    auto c = rdma::Cluster::Create(o);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = std::move(*c);
  }
  std::unique_ptr<rdma::Session> Session(NodeId n) { return std::move(*cluster_->NewSession(n)); }
  LockTable Table(LockKind kind) {
    auto t = LockTable::Create(cluster_->node(0), 1, {kind, {}});
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  }
  std::unique_ptr<LockClient> Client(LockKind kind, NodeId n, rdma::Session* s, std::chrono::milliseconds timeout) {
    ClientOptions o;
    o.timeout = timeout;
    auto c = NewLockClient(kind, cluster_->node(n), s, o);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  // A 64-byte line just past node `n`'s arena, so no descriptor line: what
  // a corrupted queue word could name.
  uint64_t PastTheArena(NodeId n) const {
    const rdma::ArenaInfo a = cluster_->node(n).arena_info();
    return RemotePtr(n, a.base + a.length).raw();
  }

  std::unique_ptr<rdma::Cluster> cluster_;
};

// ALock's NIC locker whose CAS finds r_tail held expects a token, its
// holder's descriptor line: a value that names no descriptor is DataLoss at
// once (waiting on it would last until the timeout, for a holder that does
// not exist).
TEST_F(CorruptWordTest, ALockNicLockerRefusesATailThatNamesNoDescriptor) {
  LockTable t = Table(LockKind::kALock);
  t.at(0).local<ALockWord>()->r_tail.Store(PastTheArena(0));
  auto s = Session(1);
  auto c = Client(LockKind::kALock, 1, s.get(), std::chrono::milliseconds(300));
  ASSERT_NE(c, nullptr);
  const absl::Status st = c->Lock(t.at(0));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
}

// The same for the RDMA MCS lock's tail word.
TEST_F(CorruptWordTest, RdmaMcsLockerRefusesATailThatNamesNoDescriptor) {
  LockTable t = Table(LockKind::kRdmaMcs);
  t.at(0).local<NicLockLine>()->word.Store(PastTheArena(0));
  auto s = Session(1);
  auto c = Client(LockKind::kRdmaMcs, 1, s.get(), std::chrono::milliseconds(300));
  ASSERT_NE(c, nullptr);
  const absl::Status st = c->Lock(t.at(0));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
}

// The RDMA MCS releaser with a successor waits for the successor's `next`
// link to name a descriptor line; one that never does (here: a line past
// the successor's node's arena) is DataLoss at the timeout, and nothing is
// written through it (kGo would go to memory that is no descriptor, and the
// successor would wait for nothing).
TEST_F(CorruptWordTest, RdmaMcsReleaserRefusesANextLinkThatNamesNoDescriptor) {
  LockTable t = Table(LockKind::kRdmaMcs);
  const RemotePtr lock = t.at(0);
  auto sa = Session(1);
  auto sb = Session(1);
  auto a = Client(LockKind::kRdmaMcs, 1, sa.get(), std::chrono::milliseconds(300));
  auto b = Client(LockKind::kRdmaMcs, 1, sb.get(), std::chrono::milliseconds(1500));
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->Lock(lock).ok());
  const uint64_t mine = lock.local<NicLockLine>()->word.Load();  // a's descriptor, the tail
  rdma::PlainWord& next = RemotePtr::FromRaw(mine).local<ALockDescriptor>()->next;
  absl::Status b_status;
  std::thread waiter([&] { b_status = b->Lock(lock); });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (next.Load() == 0 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  const uint64_t linked = next.Load();
  ASSERT_NE(linked, 0u) << "the waiter never linked in";
  next.Store(PastTheArena(1));
  const absl::Status st = a->Unlock(lock);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  waiter.join();
  EXPECT_EQ(b_status.code(), absl::StatusCode::kDeadlineExceeded) << "nobody handed b the lock: " << b_status;
}

// The RDMA spin lock's word holding this client's own token after its
// release means one of its CASes ran twice (rxe re-executing a retransmitted
// atomic): nobody will ever release it. Lock says so at once (DataLoss)
// instead of waiting out its timeout.
TEST_F(CorruptWordTest, RdmaSpinFindingItsOwnTokenIsDataLoss) {
  LockTable t = Table(LockKind::kRdmaSpin);
  const RemotePtr lock = t.at(0);
  auto s = Session(1);
  auto c = Client(LockKind::kRdmaSpin, 1, s.get(), std::chrono::seconds(5));
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->Lock(lock).ok());
  rdma::NicWord& word = lock.local<NicLockLine>()->word;
  const uint64_t token = word.Load();
  ASSERT_NE(token, 0u);
  ASSERT_TRUE(c->Unlock(lock).ok());
  ASSERT_EQ(word.Load(), 0u);
  word.Store(token);  // the first CAS, executed again after the release
  const auto start = std::chrono::steady_clock::now();
  const absl::Status st = c->Lock(lock);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4)) << "it waited for nobody";
}

// A releaser whose tail CAS fails has a successor that swapped itself in
// but may not have linked yet: it waits for the link, then hands over. Here
// the test is the successor: it swaps a descriptor of its own into the tail
// (as the lock's own enqueue does), lets the holder's Unlock start, and
// links 20 ms later. The hand-over must land in that descriptor.
class LinkWaitTest : public CorruptWordTest {
 protected:
  // A fresh descriptor line on node `n`, waiting.
  ALockDescriptor& Descriptor(NodeId n, RemotePtr* at) {
    *at = *cluster_->node(n).Allocate(sizeof(ALockDescriptor), 64);
    ALockDescriptor& d = *at->local<ALockDescriptor>();
    d.budget.Store(static_cast<uint64_t>(ALockDescriptor::kWaiting));
    return d;
  }
  // Unlocks `holder` on a thread, links `successor` behind `holder_line`
  // 20 ms later, and returns Unlock's status.
  absl::Status UnlockThenLink(LockClient& holder, RemotePtr lock, RemotePtr holder_line, RemotePtr successor) {
    absl::Status st;
    std::thread releasing([&] { st = holder.Unlock(lock); });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    holder_line.local<ALockDescriptor>()->next.Store(successor.raw());
    releasing.join();
    return st;
  }
};

TEST_F(LinkWaitTest, ALockNativeReleaserWaitsForTheLink) {
  LockTable t = Table(LockKind::kALock);
  const RemotePtr lock = t.at(0);
  auto holder = Client(LockKind::kALock, 0, nullptr, std::chrono::seconds(5));
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->Lock(lock).ok());
  rdma::CpuWord& tail = lock.local<ALockWord>()->l_tail;
  RemotePtr d;
  ALockDescriptor& succ = Descriptor(0, &d);
  const RemotePtr mine = RemotePtr::FromRaw(tail.Swap(d.raw()));  // the successor's enqueue
  const absl::Status st = UnlockThenLink(*holder, lock, mine, d);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(succ.budget.Load(), uint64_t{kDefaultBudget - 1}) << "the hand-over did not reach the successor";
}

TEST_F(LinkWaitTest, LocalMcsReleaserWaitsForTheLink) {
  LockTable t = Table(LockKind::kLocalMcs);
  const RemotePtr lock = t.at(0);
  auto holder = Client(LockKind::kLocalMcs, 0, nullptr, std::chrono::seconds(5));
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->Lock(lock).ok());
  RemotePtr d;
  ALockDescriptor& succ = Descriptor(0, &d);
  const RemotePtr mine = RemotePtr::FromRaw(lock.local<CpuLockLine>()->tail.Swap(d.raw()));
  const absl::Status st = UnlockThenLink(*holder, lock, mine, d);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(succ.budget.Load(), 1u) << "the hand-over (kGo) did not reach the successor";
}

TEST_F(LinkWaitTest, RdmaMcsReleaserWaitsForTheLink) {
  LockTable t = Table(LockKind::kRdmaMcs);
  const RemotePtr lock = t.at(0);
  auto s = Session(1);
  auto holder = Client(LockKind::kRdmaMcs, 1, s.get(), std::chrono::seconds(5));
  ASSERT_NE(holder, nullptr);
  ASSERT_TRUE(holder->Lock(lock).ok());
  rdma::NicWord& tail = lock.local<NicLockLine>()->word;
  const RemotePtr mine = RemotePtr::FromRaw(tail.Load());
  RemotePtr d;
  ALockDescriptor& succ = Descriptor(1, &d);
  tail.Store(d.raw());  // the successor's swap (nobody else touches the word now)
  const absl::Status st = UnlockThenLink(*holder, lock, mine, d);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(succ.budget.Load(), 1u) << "the hand-over (kGo) did not reach the successor";
}

// The RDMA MCS waiter takes the lock only on exactly kGo: a hand-over WRITE
// seen half landed (byte-by-byte copies, as rxe's) is not yet the lock.
// Held by the copy hook after its first byte, the WRITE leaves the waiter's
// word at 0xff..ff01, and the waiter must go on waiting. (A waiter that went
// on would let the rest of the WRITE land later, over the reset of its next
// acquire, which would then read a "go" nobody sent.)
TEST(LockChecks, RdmaMcsWaiterWaitsForTheWholeHandOver) {
  auto cluster = TwoSoftNodes(/*byte_copies=*/true);
  LockTable t = *LockTable::Create(cluster->node(0), 1, {LockKind::kRdmaMcs, {}});
  const RemotePtr lock = t.at(0);
  auto s0 = std::move(*cluster->NewSession(0));
  auto s1 = std::move(*cluster->NewSession(1));
  ClientOptions o;
  o.timeout = std::chrono::seconds(20);
  auto holder = std::move(*RdmaMcsClient::Create(cluster->node(0), s0.get(), o));
  auto waiter = std::move(*RdmaMcsClient::Create(cluster->node(1), s1.get(), o));
  ASSERT_TRUE(holder->Lock(lock).ok());
  const rdma::NicWord& tail = lock.local<NicLockLine>()->word;
  const uint64_t mine = tail.Load();
  std::atomic<bool> in{false};
  absl::Status waiter_status;
  std::thread waiting([&] {
    waiter_status = waiter->Lock(lock);
    in.store(true);
  });
  // The waiter swapped itself in and its link WRITE landed whole.
  const rdma::PlainWord& next = RemotePtr::FromRaw(mine).local<ALockDescriptor>()->next;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((tail.Load() == mine || next.Load() != tail.Load()) && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  const uint64_t theirs = tail.Load();
  ASSERT_NE(theirs, mine) << "the waiter never swapped itself in";
  ASSERT_EQ(next.Load(), theirs) << "the waiter's link never landed";
  const rdma::PlainWord& go = RemotePtr::FromRaw(theirs).local<ALockDescriptor>()->budget;
  std::optional<CopyGate> hold;
  hold.emplace(*cluster, 1, /*at=*/1);  // node 1's next copied byte: the hand-over's first
  absl::Status unlock_status;
  std::thread releasing([&] { unlock_status = holder->Unlock(lock); });
  ASSERT_TRUE(hold->WaitReached()) << "the hand-over WRITE never started";
  EXPECT_EQ(go.Load(), 0xffffffffffffff01u) << "not the hand-over's first byte";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(in.load()) << "the waiter took the lock on a half-landed hand-over";
  hold->Release();
  releasing.join();
  waiting.join();
  hold.reset();
  EXPECT_TRUE(unlock_status.ok()) << unlock_status;
  ASSERT_TRUE(waiter_status.ok()) << waiter_status;
  EXPECT_TRUE(waiter->Unlock(lock).ok());
}

}  // namespace
}  // namespace locks::testing
