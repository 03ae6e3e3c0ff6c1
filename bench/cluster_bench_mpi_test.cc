// cluster_bench as a test, for the Soft-RoCE guest: under `mpirun -np 3`
// (tests/verbs/run_guest_tests.sh, MPI_TESTS) every process runs
// bench::cluster::Main with one node per process on rxe0; anywhere else
// (no PMIX_NAMESPACE or RDMADS_NODE_ID in the environment) it runs 3 nodes in
// this process on the soft NIC.
//
//  * RemoteCostsMatchTheStructuresTests: `--check-costs` exits 0: rank 0's
//    remote hash map Get/Put, ordered map Get/Insert and queue
//    Enqueue/Dequeue cost what the structures' tests assert.
//  * EveryCellOfAShortRunIsReported: a short matrix (every structure, YCSB A
//    and E, uniform keys, --local=0, uniform and 100) exits 0 on every rank,
//    and rank 0's JSON has one row per cell, named for the job's node and
//    process counts, with throughput and latency, no NIC operation where every
//    key is local and none local where none is.
//
// The guest runner passes --gtest_brief=1 and reads gtest's summary; bench
// flags come from here, not from the command line.

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/cluster_bench_run.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

bool OneNodePerProcess() { return std::getenv("PMIX_NAMESPACE") != nullptr || std::getenv("RDMADS_NODE_ID") != nullptr; }

// This process's rank in the job (0 in process).
int Rank() {
  for (const char* v : {"PMIX_RANK", "OMPI_COMM_WORLD_RANK", "RDMADS_NODE_ID"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return 0;
}

// The job's size: 3 in process.
int Size() {
  if (const char* s = std::getenv("OMPI_COMM_WORLD_SIZE")) return std::atoi(s);
  if (const char* s = std::getenv("PMIX_SIZE")) return std::atoi(s);
  return 3;
}

std::vector<std::string> Where() {
  if (OneNodePerProcess()) return {};
  return {"--in-process=3", "--fabric=soft"};
}

TEST(ClusterBench, RemoteCostsMatchTheStructuresTests) {
  std::vector<std::string> args = Where();
  args.push_back("--check-costs");
  EXPECT_EQ(bench::cluster::Main(args), 0);
}

TEST(ClusterBench, EveryCellOfAShortRunIsReported) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string json = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/cluster_bench_mpi_test.", getpid(), ".json");
  std::vector<std::string> args = Where();
  // In the guest 3 processes share 2 vCPUs with rxe: a second per cell.
  const std::string seconds = OneNodePerProcess() ? "1" : "0.3";
  for (const char* a : {"--keys=6000", "--workloads=a,e", "--dists=uniform", "--local=0,uniform,100", "--warmup=0.2"}) {
    args.push_back(a);
  }
  args.push_back("--seconds=" + seconds);
  args.push_back("--json=" + json);
  ASSERT_EQ(bench::cluster::Main(args), 0);
  if (Rank() != 0) return;

  std::ifstream f(json);
  ASSERT_TRUE(f) << "rank 0 wrote no " << json;
  const nlohmann::json doc = nlohmann::json::parse(f, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << json << " is not JSON";
  const int procs = OneNodePerProcess() ? Size() : 1;
  const std::string suffix = absl::StrCat("/nodes:3/procs:", procs, "/real_time/threads:3");
  std::set<std::string> want;
  for (auto [local, path] : {std::pair{"0", "remote"}, std::pair{"uniform", "mixed"}, std::pair{"100", "native"}}) {
    const std::string l = absl::StrCat("/local:", local);
    want.insert(absl::StrCat(path, "/map/get50_put50/uniform", l, suffix));
    want.insert(absl::StrCat(path, "/skiplist/get50_put50/uniform", l, suffix));
    want.insert(absl::StrCat(path, "/skiplist/scan95_insert5/uniform", l, suffix));
    want.insert(absl::StrCat(path, "/queue/enq_deq", l, suffix));
  }
  std::set<std::string> got;
  for (const nlohmann::json& b : doc.at("benchmarks")) {
    const std::string name = b.at("name").get<std::string>();
    got.insert(name);
    EXPECT_GT(b.at("items_per_second").get<double>(), 0) << name;
    EXPECT_GT(b.at("median_us").get<double>(), 0) << name;
    EXPECT_GE(b.at("p99_us").get<double>(), b.at("median_us").get<double>()) << name;
    const double nic = b.at("nic_ops/op").get<double>();
    const double local = b.at("local_pct").get<double>();
    if (name.find("/local:100/") != std::string::npos) {
      EXPECT_EQ(local, 100) << name;
      // A Scan of 50 near the end of a node's range reads on into the next node's.
      EXPECT_LE(nic, name.find("scan") != std::string::npos ? 0.1 : 0.0) << name;
    } else if (name.find("/local:0/") != std::string::npos) {
      EXPECT_EQ(local, 0) << name;
      EXPECT_GE(nic, 1.0) << name;  // every operation takes at least one NIC op
    } else {
      EXPECT_GT(local, 15) << name;  // a third of the keys, about
      EXPECT_LT(local, 55) << name;
    }
  }
  EXPECT_EQ(got, want);
  std::remove(json.c_str());
}

}  // namespace
