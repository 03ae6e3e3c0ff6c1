// RMW-domain words: the compile-time rules (misuse does not compile; checked
// with concepts so this file itself fails to build if a forbidden member ever
// appears), the layout promises, and the operations on both sides. The word
// types and RemoteRef live in rdma/; the lock lines whose fields are checked
// here live in locks/.

#include "rdma/rmw_word.h"

#include <cstddef>
#include <thread>

#include "gtest/gtest.h"
#include "locks/alock.h"
#include "locks/baselines.h"
#include "rdma/cluster.h"
#include "rdma/remote_ref.h"

namespace locks {
namespace {

using rdma::CpuWord;
using rdma::NicWord;
using rdma::PlainWord;
using rdma::RemoteRef;
using rdma::RemoteWord;

// --- Misuse must fail to compile. Each concept is true iff the expression
// compiles; the static_asserts pin down which ones must not.
template <typename W>
concept HasCpuCompareAndSwap = requires(W& w) { w.CompareAndSwap(uint64_t{0}, uint64_t{1}); };
template <typename W>
concept HasCpuCompareExchange = requires(W& w, uint64_t& e) { w.CompareExchange(e, uint64_t{1}); };
template <typename W>
concept HasCpuSwap = requires(W& w) { w.Swap(uint64_t{1}); };
template <typename W>
concept HasCpuFetchAndAdd = requires(W& w) { w.FetchAndAdd(uint64_t{1}); };
template <typename W>
concept HasNicCompareAndSwap = requires(RemoteWord<W> r, rdma::Session& s) { r.CompareAndSwap(s, uint64_t{0}, uint64_t{1}); };
template <typename W>
concept HasNicSwap = requires(RemoteWord<W> r, rdma::Session& s) { r.Swap(s, uint64_t{1}); };
template <typename W>
concept HasNicFetchAndAdd = requires(RemoteWord<W> r, rdma::Session& s) { r.FetchAndAdd(s, uint64_t{1}); };
template <typename W>
concept HasNicCompareAndSwapIn = requires(RemoteWord<W> r, rdma::Batch& b, uint64_t* o) { r.CompareAndSwapIn(b, 0, 1, o); };
template <typename W>
concept HasLoadStore = requires(W& w, RemoteWord<W> r, rdma::Session& s) {
  w.Load();
  w.Store(uint64_t{1});
  r.Read(s);
  r.Write(s, uint64_t{1});
};

// CPU words: CPU RMWs yes, NIC RMWs no.
static_assert(HasCpuCompareAndSwap<CpuWord> && HasCpuCompareExchange<CpuWord> && HasCpuSwap<CpuWord> &&
              HasCpuFetchAndAdd<CpuWord>);
static_assert(!HasNicCompareAndSwap<CpuWord> && !HasNicSwap<CpuWord> && !HasNicFetchAndAdd<CpuWord> && !HasNicCompareAndSwapIn<CpuWord>,
              "a NIC RMW on a CPU-domain word must not compile");
// NIC words: NIC RMWs yes, CPU RMWs no.
static_assert(HasNicCompareAndSwap<NicWord> && HasNicSwap<NicWord> && HasNicFetchAndAdd<NicWord> && HasNicCompareAndSwapIn<NicWord>);
static_assert(!HasCpuCompareAndSwap<NicWord> && !HasCpuCompareExchange<NicWord> && !HasCpuSwap<NicWord> &&
                  !HasCpuFetchAndAdd<NicWord>,
              "a CPU RMW on a NIC-domain word must not compile");
// Plain words: no RMW at all.
static_assert(!HasCpuCompareAndSwap<PlainWord> && !HasCpuSwap<PlainWord> && !HasCpuFetchAndAdd<PlainWord> &&
              !HasNicCompareAndSwap<PlainWord> && !HasNicSwap<PlainWord> && !HasNicFetchAndAdd<PlainWord>);
// Loads and plain stores from both sides, for every domain.
static_assert(HasLoadStore<CpuWord> && HasLoadStore<NicWord> && HasLoadStore<PlainWord>);
// Words cannot be copied (a copy would be a non-atomic read of a shared word).
static_assert(!std::is_copy_constructible_v<NicWord> && !std::is_copy_assignable_v<CpuWord>);
// Layout: exactly one 8-byte word, placeable in zero-filled arena memory.
static_assert(sizeof(CpuWord) == 8 && alignof(CpuWord) == 8 && std::is_standard_layout_v<CpuWord>);
static_assert(sizeof(NicWord) == 8 && alignof(NicWord) == 8 && std::is_standard_layout_v<NicWord>);
static_assert(sizeof(PlainWord) == 8 && alignof(PlainWord) == 8 && std::is_trivially_destructible_v<PlainWord>);
static_assert(sizeof(RemoteWord<NicWord>) == 8);

// --- The domain comes from the field: a handle derived from a struct member
// can only do what the member's declared type allows.
template <auto kMember>
concept FieldHasNicCompareAndSwap = requires(RemoteRef<ALockWord> line, rdma::Session& s) {
  line.Field(kMember).CompareAndSwap(s, uint64_t{0}, uint64_t{1});
};
template <auto kMember>
concept FieldHasNicSwap = requires(RemoteRef<ALockWord> line, rdma::Session& s) {
  line.Field(kMember).Swap(s, uint64_t{1});
};
template <auto kMember>
concept FieldHasNicFetchAndAddIn = requires(RemoteRef<ALockWord> line, rdma::Batch& b, uint64_t* o) {
  line.Field(kMember).FetchAndAddIn(b, uint64_t{1}, o);
};
template <auto kMember>
concept FieldHasCpuSwap = requires(ALockWord& line) { (line.*kMember).Swap(uint64_t{1}); };
// ALock's r_tail is NIC-domain: NIC RMWs compile, CPU RMWs do not.
static_assert(FieldHasNicCompareAndSwap<&ALockWord::r_tail> && FieldHasNicSwap<&ALockWord::r_tail> &&
              FieldHasNicFetchAndAddIn<&ALockWord::r_tail>);
static_assert(!FieldHasCpuSwap<&ALockWord::r_tail>, "a CPU RMW on the NIC-domain r_tail must not compile");
// ALock's l_tail is CPU-domain: the reverse, so a NIC CAS on l_tail (the
// domain-mixing bug of docs/design.md §3) cannot be written.
static_assert(!FieldHasNicCompareAndSwap<&ALockWord::l_tail> && !FieldHasNicSwap<&ALockWord::l_tail> &&
                  !FieldHasNicFetchAndAddIn<&ALockWord::l_tail>,
              "a NIC RMW on the CPU-domain l_tail must not compile");
static_assert(FieldHasCpuSwap<&ALockWord::l_tail>);
// victim and budgets are plain: no RMW from either side.
static_assert(!FieldHasNicCompareAndSwap<&ALockWord::victim> && !FieldHasCpuSwap<&ALockWord::victim> &&
              !FieldHasNicCompareAndSwap<&ALockWord::budgets>);
// A word handle cannot be made from a raw pointer, so no caller can pick the
// domain for an offset: neither by constructor nor by At/Checked.
template <typename W>
concept WordAtPointer = requires(rdma::RemotePtr p) { RemoteRef<W>::At(p); };
template <typename W>
concept WordCheckedAtPointer = requires(rdma::RemotePtr p) { RemoteRef<W>::Checked(p); };
static_assert(!std::is_constructible_v<RemoteWord<NicWord>, rdma::RemotePtr> &&
              !std::is_constructible_v<RemoteWord<CpuWord>, rdma::RemotePtr> &&
              !std::is_constructible_v<RemoteWord<PlainWord>, rdma::RemotePtr>);
static_assert(!WordAtPointer<NicWord> && !WordAtPointer<CpuWord> && !WordAtPointer<PlainWord> &&
              !WordCheckedAtPointer<NicWord>);
static_assert(WordAtPointer<ALockWord> && WordAtPointer<NicLockLine>);
// The handle's type is exactly the member's.
static_assert(std::is_same_v<decltype(RemoteRef<ALockWord>{}.Field(&ALockWord::r_tail)), RemoteWord<NicWord>>);
static_assert(std::is_same_v<decltype(RemoteRef<CpuLockLine>{}.Field(&CpuLockLine::tail)), RemoteWord<CpuWord>>);

// Test lines: one word of each domain, as a structure would declare them.
struct alignas(64) TestLine {
  NicWord nic;
  CpuWord cpu;
  PlainWord plain;
  uint64_t pad_[5];
};
static_assert(offsetof(TestLine, nic) == 0 && offsetof(TestLine, cpu) == 8 && offsetof(TestLine, plain) == 16);

std::unique_ptr<rdma::Cluster> SoftCluster(int nodes) {
  rdma::ClusterOptions o;
  o.named_bytes = 0;  // no named structures: nothing registered for them
  o.num_nodes = nodes;
  o.node.arena_bytes = 1 << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  return std::move(*rdma::Cluster::Create(o));
}

TEST(CpuWord, CpuOperations) {
  CpuWord w;
  EXPECT_EQ(w.Load(), 0u);
  w.Store(5);
  EXPECT_EQ(w.CompareAndSwap(5, 7), 5u);  // succeeded
  EXPECT_EQ(w.CompareAndSwap(5, 9), 7u);  // failed, saw 7
  uint64_t e = 1;
  EXPECT_FALSE(w.CompareExchange(e, 3));
  EXPECT_EQ(e, 7u);
  EXPECT_TRUE(w.CompareExchange(e, 3));
  EXPECT_EQ(w.Swap(11), 3u);
  EXPECT_EQ(w.FetchAndAdd(4), 11u);
  EXPECT_EQ(w.Load(), 15u);
}

TEST(RemoteWord, NicWordAtomicsRemoteAndLoopback) {
  auto cluster = SoftCluster(2);
  const auto line = RemoteRef<TestLine>::At(*cluster->node(0).Allocate(64));
  NicWord& local = line.Local(0).nic;
  for (rdma::NodeId from : {rdma::NodeId{1}, rdma::NodeId{0}}) {  // remote, then loopback
    auto s = std::move(*cluster->NewSession(from));
    const RemoteWord<NicWord> r = line.Field(&TestLine::nic);
    local.Store(0);
    EXPECT_EQ(*r.CompareAndSwap(*s, 0, 10), 0u);
    EXPECT_EQ(*r.CompareAndSwap(*s, 0, 20), 10u);  // failed
    EXPECT_EQ(*r.FetchAndAdd(*s, 5), 10u);
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
    r.CompareAndSwapIn(b, 7, 8, &old);
    r.FetchAndAddIn(b, 1, nullptr);
    r.ReadIn(b, &seen);
    ASSERT_TRUE(b.Execute().ok());
    EXPECT_EQ(old, 7u);
    EXPECT_EQ(seen, 9u);
  }
}

TEST(RemoteWord, CpuWordIsReadAndPlainlyWrittenRemotely) {
  auto cluster = SoftCluster(2);
  const auto line = RemoteRef<TestLine>::At(*cluster->node(0).Allocate(64));
  CpuWord& local = line.Local(0).cpu;
  auto s = std::move(*cluster->NewSession(1));
  const RemoteWord<CpuWord> r = line.Field(&TestLine::cpu);
  local.FetchAndAdd(41);
  EXPECT_EQ(*r.Read(*s), 41u);
  ASSERT_TRUE(r.Write(*s, 5).ok());
  EXPECT_EQ(local.Swap(6), 5u);
  EXPECT_EQ(&r.Local(0), &local);
}

TEST(RemoteRef, FieldsSitAtTheirOffsetsAndWholeLinesReadIntoTypedCopies) {
  auto cluster = SoftCluster(2);
  const auto line = RemoteRef<TestLine>::At(*cluster->node(0).Allocate(64));
  EXPECT_EQ(line.Field(&TestLine::cpu).ptr(), line.ptr() + 8);
  EXPECT_EQ(line.Field(&TestLine::plain).ptr(), line.ptr() + 16);
  line.Local(0).cpu.Store(3);
  line.Local(0).plain.Store(4);
  auto s = std::move(*cluster->NewSession(1));
  TestLine copy;
  ASSERT_TRUE(line.ReadInto(*s, &copy).ok());
  EXPECT_EQ(copy.cpu.Load(), 3u);
  EXPECT_EQ(copy.plain.Load(), 4u);
  // A trivially copyable pointee reads as a value in one line.
  struct Pair {
    uint64_t a, b;
  };
  const auto pair = RemoteRef<Pair>::At(line.ptr() + 32);
  ASSERT_TRUE(pair.Write(*s, Pair{7, 8}).ok());
  absl::StatusOr<Pair> back = pair.Read(*s);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->a + back->b, 15u);
  EXPECT_FALSE(RemoteRef<TestLine>::Checked(line.ptr() + 8).ok());  // misaligned: an error, not UB
  EXPECT_FALSE(RemoteRef<TestLine>::Checked(rdma::RemotePtr()).ok());
}

TEST(RemoteRefDeathTest, MisuseAbortsInEveryBuild) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(RemoteRef<TestLine>::At(rdma::RemotePtr(0, uint64_t{0x1008})), "aligned");
  EXPECT_DEATH(RemoteRef<TestLine>::At(rdma::RemotePtr(1, uint64_t{0x1000})).Local(0), "node 1");
}

}  // namespace
}  // namespace locks
