// The queue's native lease at its hand-overs, made deterministic on the soft
// NIC: a native claim frozen in flight while the lease closes, and a NIC
// holder frozen inside the side while a native thread arrives
// (structures/queue/native_lease.h, native_claims.h; docs/design.md §9.4.1).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/lock.h"
#include "rdma/cluster.h"
#include "rdma/path.h"
#include "rdma/soft/soft_nic.h"
#include "rdma/work_request.h"
#include "structures/queue/layout.h"
#include "structures/queue/native_lease.h"
#include "structures/queue/queue.h"

namespace {

using structures::Path;
using structures::queue_internal::Header;
using structures::queue_internal::kClaimOpen;
using structures::queue_internal::NativeLease;

std::unique_ptr<rdma::Cluster> TwoSoftNodes() {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures
  o.num_nodes = 2;
  o.node.arena_bytes = 4 << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  return std::move(*rdma::Cluster::Create(o));
}

bool WaitFor(const std::atomic<bool>& flag, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!flag.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  return flag.load();
}

// A native claim is in flight (claimed, not yet published) when a NIC
// thread asks for the side. The close must wait for it: the NIC thread gets
// the lock, and the counter the index, only after the claim completed, and
// the index counts the claim.
TEST(QueueLease, CloseWaitsForTheClaimInFlightBeforeTheNicSideGetsTheIndex) {
  auto cluster = TwoSoftNodes();
  absl::StatusOr<rdma::RemotePtr> ring = cluster->node(0).Allocate(sizeof(Header));
  ASSERT_TRUE(ring.ok()) << ring.status();
  Header& h = *ring->local<Header>();
  locks::ClientOptions options;
  options.timeout = std::chrono::seconds(20);
  NativeLease lease(*ring, /*producer=*/true, options);
  ASSERT_TRUE(lease.Open([](uint64_t* counter) {
                     *counter = 5;
                     return absl::OkStatus();
                   }).ok());
  ASSERT_EQ(h.tail_claim.Load(), 5 | kClaimOpen);

  // The claim in flight, as NativeClaims makes it: inside, then the CAS.
  lease.Enter(0);
  uint64_t c = 5 | kClaimOpen;
  ASSERT_TRUE(h.tail_claim.CompareExchange(c, c + 1));

  auto session = std::move(*cluster->NewSession(1));
  auto nic = std::move(*locks::ALockClient::Create(cluster->node(1), session.get()));
  const rdma::RemotePtr lock = *ring + offsetof(Header, tail_lock);
  std::atomic<bool> nic_in{false}, closed{false};
  absl::Status nic_status;
  std::thread nic_thread([&] {
    nic_status = nic->Lock(lock);
    nic_in.store(true);
  });
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!lease.NicWaiting() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  ASSERT_TRUE(lease.NicWaiting()) << "the NIC locker never reached r_tail";
  std::thread closer([&] {
    lease.Close();
    closed.store(true);
  });
  // The closer's CAS clears kClaimOpen first; then it must wait.
  const auto cas_until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((h.tail_claim.Load() & kClaimOpen) != 0 && std::chrono::steady_clock::now() < cas_until) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(closed.load()) << "the close did not wait for the claim in flight";
  EXPECT_FALSE(nic_in.load()) << "the NIC thread entered while a native claim was in flight: " << nic_status;
  EXPECT_EQ(h.tail.Load(), 0u) << "the index went to the NIC side before the claim landed";
  EXPECT_EQ(h.tail_claim.Load(), 6u) << "closed (no kClaimOpen) at the claimed index";

  lease.Exit(0);  // the claim completed
  closer.join();
  ASSERT_TRUE(WaitFor(nic_in, std::chrono::seconds(20)));
  nic_thread.join();
  ASSERT_TRUE(nic_status.ok()) << nic_status;
  EXPECT_EQ(h.tail.Load(), 6u) << "the index handed over counts the claim";
  EXPECT_TRUE(nic->Unlock(lock).ok());
}

// A NIC producer holds the tail (frozen before its payload WRITE) when a
// native producer arrives: the native one waits for it instead of claiming
// from the closed lease, and both values come out, the NIC one first.
TEST(QueueLease, NativeProducerWaitsForTheNicHolderInsteadOfClaiming) {
  auto cluster = TwoSoftNodes();
  auto q = structures::Queue<uint64_t>::Create(*cluster, {.capacity = 64});
  ASSERT_TRUE(q.ok()) << q.status();
  auto native = std::move(*q->NewClient(cluster->node(0)));
  ASSERT_TRUE(*native->Enqueue(0, 1));  // the native lease is open
  ASSERT_EQ(*native->Dequeue(0), std::optional<uint64_t>(1));

  auto session = std::move(*cluster->NewSession(1));
  auto remote = std::move(*q->NewClient(*session));
  std::atomic<bool> held{false}, release{false};
  uint64_t ring = 0;  // the tail lock's address is the ring's: the first CAS names it
  auto* nic1 = rdma::soft::AsSoftDevice(cluster->node(1).device());
  nic1->SetPostHook([&](const rdma::WorkRequest& wr) {
    if (ring == 0 && wr.opcode == rdma::Opcode::kCompareSwap) ring = wr.remote_addr;
    if (wr.opcode != rdma::Opcode::kWrite || wr.remote_addr < ring + structures::queue_internal::kSeqOffset ||
        held.exchange(true)) {
      return;
    }
    // The NIC producer's payload WRITE: it holds the tail lock now.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!release.load() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
  });
  absl::StatusOr<bool> remote_in = false;
  std::thread remote_thread([&] { remote_in = remote->Enqueue(0, 2); });
  ASSERT_TRUE(WaitFor(held, std::chrono::seconds(20))) << "the NIC producer never got the tail";

  std::atomic<bool> native_done{false};
  absl::StatusOr<bool> native_in = false;
  std::thread native_thread([&] {
    native_in = native->Enqueue(0, 3);
    native_done.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(native_done.load()) << "a native producer claimed while a NIC producer held the tail";
  release.store(true);
  remote_thread.join();
  native_thread.join();
  nic1->SetPostHook(nullptr);
  ASSERT_TRUE(remote_in.ok() && *remote_in) << remote_in.status();
  ASSERT_TRUE(native_in.ok() && *native_in) << native_in.status();
  EXPECT_EQ(*native->Dequeue(0), std::optional<uint64_t>(2));
  EXPECT_EQ(*native->Dequeue(0), std::optional<uint64_t>(3));
  EXPECT_EQ(*native->Dequeue(0), std::nullopt);
}

// Native threads that went quiet leave the lease open: a NIC thread that
// arrives gets the side anyway (the keeper closes it), and the native side
// takes it back on its next operation, order kept throughout.
TEST(QueueLease, AQuietNativeSideHandsOverAndTakesBack) {
  auto cluster = TwoSoftNodes();
  auto q = structures::Queue<uint64_t>::Create(*cluster, {.capacity = 8});
  ASSERT_TRUE(q.ok()) << q.status();
  auto native = std::move(*q->NewClient(cluster->node(0)));
  auto session = std::move(*cluster->NewSession(1));
  auto remote = std::move(*q->NewClient(*session));
  uint64_t next_in = 0, next_out = 0;
  for (int round = 0; round < 20; ++round) {
    ASSERT_TRUE(*native->Enqueue(0, next_in++));
    ASSERT_TRUE(*native->Enqueue(0, next_in++));
    ASSERT_TRUE(*remote->Enqueue(0, next_in++));  // the native side is idle
    ASSERT_EQ(*remote->Dequeue(0), std::optional<uint64_t>(next_out++));
    ASSERT_EQ(*native->Dequeue(0), std::optional<uint64_t>(next_out++));
    ASSERT_EQ(*native->Dequeue(0, Path::kNative), std::optional<uint64_t>(next_out++));
    ASSERT_EQ(*remote->Dequeue(0), std::nullopt);
  }
}

}  // namespace
