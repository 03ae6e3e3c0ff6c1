// A creator that dies mid-creation never stops the catalogue of named
// structures (structures/common/catalogue.h; docs/design.md §9.1): on the
// soft NIC, node 2 creates a name and dies after its k-th work request, for
// every k of a whole creation. Node 0's repair releases the catalogue's lock
// once the cluster declares node 2 dead, and node 1 then opens the name
// within a second, as one structure, with every other name intact.

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "rdma/soft/soft_nic.h"
#include "structures/common/catalogue.h"

namespace structures {
namespace {

std::unique_ptr<rdma::Cluster> Make() {
  rdma::ClusterOptions o;
  o.num_nodes = 3;
  o.node.arena_bytes = size_t{1} << 20;
  o.named_bytes = size_t{2} << 20;
  o.fabric.kind = rdma::FabricKind::kSoft;
  auto c = rdma::Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

NamedSpec Spec(const std::string& name) {
  return NamedSpec{.name = name, .kind = StructureKind::kHashMap, .value_bytes = 8, .options = "test",
                   .part_bytes = 4096};
}

// Writes a recognizable image, so a part left unwritten would show.
absl::Status Fill(rdma::Node&, rdma::RemotePtr part) {
  auto* w = reinterpret_cast<uint64_t*>(part.address());
  for (int i = 0; i < 512; ++i) w[i] = 0x5eed0000u + i;
  return absl::OkStatus();
}

rdma::soft::SoftDevice& Soft(rdma::Cluster& c, rdma::NodeId n) { return *rdma::soft::AsSoftDevice(c.node(n).device()); }

// Work requests node 2 posts for a whole creation of a new name.
uint64_t CreationWrs() {
  auto c = Make();
  if (c == nullptr) return 0;
  const uint64_t before = Soft(*c, 2).stats().wrs_posted;
  auto made = FindOrCreate(*c, Spec("probe"), Fill, /*from=*/2);
  EXPECT_TRUE(made.ok() && made->created) << made.status();
  return Soft(*c, 2).stats().wrs_posted - before;
}

TEST(CatalogueCrashTest, ACreatorDyingAtAnyWorkRequestNeverStopsTheCatalogue) {
  const uint64_t n = CreationWrs();
  ASSERT_GE(n, 5u) << "a creation reads, locks, writes header and entry, unlocks";
  for (uint64_t k = 0; k < n; ++k) {
    SCOPED_TRACE(testing::Message() << "node 2 dies after " << k << " of " << n << " work requests");
    auto c = Make();
    ASSERT_NE(c, nullptr);
    auto watch = WatchCatalogue(*c);
    ASSERT_NE(watch, nullptr);
    auto before = FindOrCreate(*c, Spec("before"), Fill, /*from=*/0);
    ASSERT_TRUE(before.ok()) << before.status();

    Soft(*c, 2).faults().CrashAfterOperations(k);
    auto dying = FindOrCreate(*c, Spec("x"), Fill, /*from=*/2);
    EXPECT_FALSE(dying.ok()) << "node 2 is dead; its creation cannot have finished";
    EXPECT_FALSE(c->PeerStatus(2).ok());

    const auto start = std::chrono::steady_clock::now();
    auto after = FindOrCreate(*c, Spec("x"), Fill, /*from=*/1);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_LT(took, std::chrono::seconds(2)) << "the dead creator's lock was not repaired promptly";
    // One structure: every later open finds the same parts, whole.
    auto again = FindOrCreate(*c, Spec("x"), Fill, /*from=*/0);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_FALSE(again->created);
    EXPECT_EQ(again->offset, after->offset);
    for (rdma::NodeId node : {0, 1}) {
      const auto* w = reinterpret_cast<const uint64_t*>(c->node(node).arena_info().base + after->offset);
      EXPECT_EQ(w[0], 0x5eed0000u);
      EXPECT_EQ(w[511], 0x5eed0000u + 511);
    }
    // The name made before is intact and distinct.
    auto still = FindOrCreate(*c, Spec("before"), Fill, /*from=*/1);
    ASSERT_TRUE(still.ok()) << still.status();
    EXPECT_FALSE(still->created);
    EXPECT_EQ(still->offset, before->offset);
    EXPECT_NE(still->offset, after->offset);
  }
}

// Without the repair (no watch in any process), the dead creator's lock
// stays held and the next creation times out: the test above depends on it.
TEST(CatalogueCrashTest, WithoutTheRepairALockLeftByTheDeadIsHeld) {
  auto c = Make();
  ASSERT_NE(c, nullptr);
  Soft(*c, 2).faults().CrashAfterOperations(2);  // the lookup READ and the lock CAS
  EXPECT_FALSE(FindOrCreate(*c, Spec("x"), Fill, /*from=*/2).ok());
  // (The lookup reads one table; the lock's CAS lands; node 2 is then dead.)
  const uint64_t word = *reinterpret_cast<const uint64_t*>(c->node(0).reserved().address() + Catalogue::kLockOffset);
  EXPECT_EQ(word >> 48, 2u) << "node 2's token holds the lock";
}

}  // namespace
}  // namespace structures
