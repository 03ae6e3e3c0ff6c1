#ifndef BENCH_CLUSTER_BENCH_FLAGS_H_
#define BENCH_CLUSTER_BENCH_FLAGS_H_

// cluster_bench's command line: what to run (structures, YCSB mixes, key
// distributions, the share of keys homed on the thread's own node), for how
// long, on which cluster, and where the rows go. bench/cluster_bench_main.cc
// is the program; bench/README.md ("cluster_bench") shows how to run it.
//
//   absl::StatusOr<bench::cluster::Parsed> p = bench::cluster::ParseFlags(
//       {"--in-process=3", "--structures=hash_map", "--local=0,100", "--seconds=1"});
//   if (!p.ok()) { /* print p.status().message(), exit 2 */ }
//   if (p->help) { fputs(bench::cluster::Usage().c_str(), stdout); }
//
// Contract: flags are "--name=value" (a boolean flag is just "--name"), in
// any order; a later occurrence overrides an earlier one. Anything else, an
// unknown flag, a bad value, or a selection with nothing to run is
// InvalidArgument with a message naming the flag; the program exits 2 on it.
// Usage() lists every flag with its default. Checks that need the cluster's
// size (a --local share other than 100 needs at least two nodes) are
// CheckAgainstCluster's.

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/zipf.h"
#include "rdma/device.h"
#include "rdma/fabric.h"
#include "rdma/verbs/flags.h"

namespace bench::cluster {

enum class Structure { kHashMap, kSkipList, kQueue };
// YCSB A (50% get, 50% put), B (95/5), C (100% get), E (95% Scan of 50, 5%
// insert of a fresh key; the ordered map only). The queue has one shape: an
// enqueue then a dequeue on the same home.
enum class Workload { kA, kB, kC, kE, kQueue };

// Which nodes the keys (or queue homes) a thread uses live on: `uniform` is
// the structure's own placement over every node; otherwise `percent`% of the
// operations go to keys homed on the thread's own node and the rest to keys
// homed on the others.
struct LocalShare {
  bool uniform = true;
  int percent = 0;  // 0..100 when !uniform
  friend bool operator==(const LocalShare&, const LocalShare&) = default;
};

struct Config {
  int in_process = 0;  // > 0: that many nodes in this process; 0: one node per process (the job's environment)
  rdma::FabricKind fabric = rdma::FabricKind::kAuto;
  rdma::verbs::DeviceFlags device;
  rdma::PollMode poll = rdma::PollMode::kBusy;
  std::vector<Structure> structures = {Structure::kHashMap, Structure::kSkipList, Structure::kQueue};
  std::vector<Workload> workloads = {Workload::kA, Workload::kB, Workload::kC, Workload::kE};
  std::vector<KeyDist> dists = {KeyDist::kUniform, KeyDist::kZipf};
  std::vector<LocalShare> locals = {LocalShare{}};
  double seconds = 3.0;  // measured, per cell
  double warmup = 0.5;   // run but not measured, before each cell's measurement
  int threads = 1;       // client threads per node
  uint64_t keys = 100000;  // keys loaded into each map, over the whole cluster
  uint64_t seed = 1;
  bool check_costs = false;  // measure the uncontended remote costs and exit
  std::string json_path;     // rank 0 writes Google-Benchmark-shaped JSON here (report.py reads it)
  std::string csv_path;      // rank 0 writes rows in results.csv's columns here
};

struct Parsed {
  Config config;
  bool help = false;
};

// Parses the arguments after argv[0].
absl::StatusOr<Parsed> ParseFlags(const std::vector<std::string>& args);

// The --help text: what the program does and every flag with its default.
std::string Usage();

// Checks the parts of `config` that depend on the cluster's node count.
absl::Status CheckAgainstCluster(const Config& config, int num_nodes);

// Names used in flags, output rows and messages.
const char* StructureFlagName(Structure s);  // hash_map, skiplist, queue
const char* WorkloadFlagName(Workload w);    // a, b, c, e, queue
std::string LocalShareName(const LocalShare& l);  // uniform, 0, 50, 100

}  // namespace bench::cluster

#endif  // BENCH_CLUSTER_BENCH_FLAGS_H_
