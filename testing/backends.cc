#include "testing/backends.h"

#include <cstdlib>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace rdma::testing {

std::vector<std::string> BackendsUnderTest() {
  const char* env = std::getenv("RDMADS_FABRICS");
  if (env == nullptr || *env == '\0') return {"soft"};
  return absl::StrSplit(env, ',', absl::SkipEmpty());
}

std::vector<std::string> SoftIfUnderTest() {
  std::vector<std::string> out;
  for (const std::string& b : BackendsUnderTest()) {
    if (b == "soft") out.push_back(b);
  }
  return out;
}

std::unique_ptr<Cluster> MakeCluster(const std::string& backend, int nodes, size_t arena_bytes) {
  return MakeCluster(backend, nodes, arena_bytes, SoftTweaks{});
}

std::unique_ptr<Cluster> MakeCluster(const std::string& backend, int nodes, size_t arena_bytes,
                                     const SoftTweaks& soft) {
  ClusterOptions o;
  o.num_nodes = nodes;
  o.node.arena_bytes = arena_bytes;
  // Room for a few named structures only: in the guest every registered
  // byte is pinned, and these clusters hold anonymous structures.
  o.named_bytes = size_t{1} << 20;
  auto kind = ParseFabricKind(backend);
  EXPECT_TRUE(kind.ok()) << kind.status();
  o.fabric.kind = kind.value_or(FabricKind::kSoft);
  if (o.fabric.kind == FabricKind::kSoft) {
    o.fabric.soft_latency = soft.latency;
    o.fabric.soft_byte_granular_copies = soft.byte_granular_copies;
  }
  auto c = Cluster::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

ClusterWithSession MakeClusterWithSession(const std::string& backend, int nodes, size_t arena_bytes) {
  ClusterWithSession e;
  e.cluster = MakeCluster(backend, nodes, arena_bytes);
  if (e.cluster == nullptr) return e;
  auto s = e.cluster->NewSession(0);
  EXPECT_TRUE(s.ok()) << s.status();
  if (s.ok()) e.session = std::move(*s);
  return e;
}

}  // namespace rdma::testing
