#ifndef TESTING_BACKENDS_H_
#define TESTING_BACKENDS_H_

// Test clusters on the backends (fabrics) a run is testing: the soft NIC by
// default, Soft-RoCE's verbs in the guest run (RDMADS_FABRICS=verbs).
//
//   class MapTest : public ::testing::TestWithParam<std::string> {};
//   INSTANTIATE_TEST_SUITE_P(Backends, MapTest,
//                            ::testing::ValuesIn(rdma::testing::BackendsUnderTest()));
//   TEST_P(MapTest, PutThenGet) {
//     auto env = rdma::testing::MakeClusterWithSession(GetParam(), 2);
//     ASSERT_NE(env.session, nullptr);
//     ...
//   }
//
// Contract: for gtest code only (testonly). A setup failure is recorded as a
// gtest failure (EXPECT) and returned as null, so callers ASSERT on the
// pointer. The caller owns what is returned; a Session must be destroyed
// before its Cluster.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rdma/cluster.h"

namespace rdma::testing {

// Backends under test, from the env var RDMADS_FABRICS (comma-separated,
// default "soft"). The Soft-RoCE guest run sets RDMADS_FABRICS=verbs.
std::vector<std::string> BackendsUnderTest();
// {"soft"} when soft is among them, else {}: for suites that need the soft
// NIC's fault hooks (byte-copy mode, copy pauses), which then do not exist in
// a verbs-only run rather than being skipped.
std::vector<std::string> SoftIfUnderTest();

// A cluster of `nodes` nodes on the named backend, with small arenas.
std::unique_ptr<Cluster> MakeCluster(const std::string& backend, int nodes, size_t arena_bytes = 4 << 20);

// Soft-NIC options a stress test turns on; ignored on other backends.
struct SoftTweaks {
  std::chrono::nanoseconds latency{0};  // added to every NIC operation
  bool byte_granular_copies = false;    // copy payloads a byte at a time, as rxe does
};
// MakeCluster, with `soft` applied when the backend is soft.
std::unique_ptr<Cluster> MakeCluster(const std::string& backend, int nodes, size_t arena_bytes,
                                     const SoftTweaks& soft);

// A cluster and a Session of node 0 for the test's main thread.
struct ClusterWithSession {
  std::unique_ptr<Cluster> cluster;  // null if it could not be created
  std::unique_ptr<Session> session;  // node 0's; null on failure (a test failure is recorded)
};
ClusterWithSession MakeClusterWithSession(const std::string& backend, int nodes, size_t arena_bytes = 4 << 20);

}  // namespace rdma::testing

#endif  // TESTING_BACKENDS_H_
