// RMW-domain words: the compile-time rules (misuse does not compile; checked
// with concepts so this file itself fails to build if a forbidden member ever
// appears), the layout promises, and the operations on both sides.

#include "locks/rmw_word.h"

#include <thread>

#include "gtest/gtest.h"
#include "rdma/cluster.h"

namespace locks {
namespace {

// --- Misuse must fail to compile. Each concept is true iff the expression
// compiles; the static_asserts pin down which ones must not.
template <typename W>
concept HasCpuCas = requires(W& w) { w.Cas(uint64_t{0}, uint64_t{1}); };
template <typename W>
concept HasCpuCompareExchange = requires(W& w, uint64_t& e) { w.CompareExchange(e, uint64_t{1}); };
template <typename W>
concept HasCpuSwap = requires(W& w) { w.Swap(uint64_t{1}); };
template <typename W>
concept HasCpuFetchAdd = requires(W& w) { w.FetchAdd(uint64_t{1}); };
template <typename W>
concept HasNicCas = requires(RemoteWord<W> r, rdma::Session& s) { r.Cas(s, uint64_t{0}, uint64_t{1}); };
template <typename W>
concept HasNicSwap = requires(RemoteWord<W> r, rdma::Session& s) { r.Swap(s, uint64_t{1}); };
template <typename W>
concept HasNicFetchAdd = requires(RemoteWord<W> r, rdma::Session& s) { r.FetchAdd(s, uint64_t{1}); };
template <typename W>
concept HasNicCasIn = requires(RemoteWord<W> r, rdma::Batch& b, uint64_t* o) { r.CasIn(b, 0, 1, o); };
template <typename W>
concept HasLoadStore = requires(W& w, RemoteWord<W> r, rdma::Session& s) {
  w.Load();
  w.Store(uint64_t{1});
  r.Read(s);
  r.Write(s, uint64_t{1});
};

// CPU words: CPU RMWs yes, NIC RMWs no.
static_assert(HasCpuCas<CpuWord> && HasCpuCompareExchange<CpuWord> && HasCpuSwap<CpuWord> &&
              HasCpuFetchAdd<CpuWord>);
static_assert(!HasNicCas<CpuWord> && !HasNicSwap<CpuWord> && !HasNicFetchAdd<CpuWord> && !HasNicCasIn<CpuWord>,
              "a NIC RMW on a CPU-domain word must not compile");
// NIC words: NIC RMWs yes, CPU RMWs no (the example misuse of the issue).
static_assert(HasNicCas<NicWord> && HasNicSwap<NicWord> && HasNicFetchAdd<NicWord> && HasNicCasIn<NicWord>);
static_assert(!HasCpuCas<NicWord> && !HasCpuCompareExchange<NicWord> && !HasCpuSwap<NicWord> &&
                  !HasCpuFetchAdd<NicWord>,
              "a CPU RMW on a NIC-domain word must not compile");
// Plain words: no RMW at all.
static_assert(!HasCpuCas<PlainWord> && !HasCpuSwap<PlainWord> && !HasCpuFetchAdd<PlainWord> &&
              !HasNicCas<PlainWord> && !HasNicSwap<PlainWord> && !HasNicFetchAdd<PlainWord>);
// Loads and plain stores from both sides, for every domain.
static_assert(HasLoadStore<CpuWord> && HasLoadStore<NicWord> && HasLoadStore<PlainWord>);
// Words cannot be copied (a copy would be a non-atomic read of a shared word).
static_assert(!std::is_copy_constructible_v<NicWord> && !std::is_copy_assignable_v<CpuWord>);
// Layout: exactly one 8-byte word, placeable in zero-filled arena memory.
static_assert(sizeof(CpuWord) == 8 && alignof(CpuWord) == 8 && std::is_standard_layout_v<CpuWord>);
static_assert(sizeof(NicWord) == 8 && alignof(NicWord) == 8 && std::is_standard_layout_v<NicWord>);
static_assert(sizeof(PlainWord) == 8 && alignof(PlainWord) == 8 && std::is_trivially_destructible_v<PlainWord>);
static_assert(sizeof(RemoteWord<NicWord>) == 8);

std::unique_ptr<rdma::Cluster> SoftCluster(int nodes) {
  rdma::ClusterOptions o;
  o.num_nodes = nodes;
  o.node.arena_bytes = 1 << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  return std::move(*rdma::Cluster::Create(o));
}

TEST(CpuWord, CpuOperations) {
  CpuWord w;
  EXPECT_EQ(w.Load(), 0u);
  w.Store(5);
  EXPECT_EQ(w.Cas(5, 7), 5u);  // succeeded
  EXPECT_EQ(w.Cas(5, 9), 7u);  // failed, saw 7
  uint64_t e = 1;
  EXPECT_FALSE(w.CompareExchange(e, 3));
  EXPECT_EQ(e, 7u);
  EXPECT_TRUE(w.CompareExchange(e, 3));
  EXPECT_EQ(w.Swap(11), 3u);
  EXPECT_EQ(w.FetchAdd(4), 11u);
  EXPECT_EQ(w.Load(), 15u);
}

TEST(RemoteWord, NicWordAtomicsRemoteAndLoopback) {
  auto cluster = SoftCluster(2);
  rdma::RemotePtr p = *cluster->node(0).Allocate(64);
  NicWord& local = *p.local<NicWord>();
  for (rdma::NodeId from : {rdma::NodeId{1}, rdma::NodeId{0}}) {  // remote, then loopback
    auto s = std::move(*cluster->NewSession(from));
    RemoteWord<NicWord> r(p);
    local.Store(0);
    EXPECT_EQ(*r.Cas(*s, 0, 10), 0u);
    EXPECT_EQ(*r.Cas(*s, 0, 20), 10u);  // failed
    EXPECT_EQ(*r.FetchAdd(*s, 5), 10u);
    EXPECT_EQ(local.Load(), 15u);  // the owner may load it
    int attempts = 0;
    // Swap from a wrong guess: a CAS loop, two NIC ops.
    const auto before = rdma::ThisThreadCounters();
    EXPECT_EQ(*r.Swap(*s, 99, /*guess=*/0, &attempts), 15u);
    EXPECT_EQ(attempts, 2);
    EXPECT_EQ((rdma::ThisThreadCounters() - before).nic_ops, 2u);
    EXPECT_EQ(*r.Swap(*s, 100, /*guess=*/99, &attempts), 99u);
    EXPECT_EQ(attempts, 1);
    local.Store(7);  // the owner may plainly store it
    EXPECT_EQ(*r.Read(*s), 7u);
    rdma::Batch b(*s, 0);
    uint64_t old = 0, seen = 0;
    r.CasIn(b, 7, 8, &old);
    r.FetchAddIn(b, 1, nullptr);
    r.ReadIn(b, &seen);
    ASSERT_TRUE(b.Execute().ok());
    EXPECT_EQ(old, 7u);
    EXPECT_EQ(seen, 9u);
  }
}

TEST(RemoteWord, CpuWordIsReadAndPlainlyWrittenRemotely) {
  auto cluster = SoftCluster(2);
  rdma::RemotePtr p = *cluster->node(0).Allocate(64);
  CpuWord& local = *p.local<CpuWord>();
  auto s = std::move(*cluster->NewSession(1));
  RemoteWord<CpuWord> r(p);
  local.FetchAdd(41);
  EXPECT_EQ(*r.Read(*s), 41u);
  ASSERT_TRUE(r.Write(*s, 5).ok());
  EXPECT_EQ(local.Swap(6), 5u);
  EXPECT_EQ(&r.Local(0), &local);
}

#ifndef NDEBUG
TEST(RemoteWordDeathTest, LocalAccessToAnotherNodesWordAbortsInDebug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  RemoteWord<CpuWord> r(rdma::RemotePtr(1, uint64_t{0x1000}));
  EXPECT_DEATH(r.Local(0), "another node");
}
#endif

}  // namespace
}  // namespace locks
