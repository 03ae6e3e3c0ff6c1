// The quick-start demo: builds a 3-node cluster on the chosen fabric, runs
// READ, WRITE, CAS and FAA on one word of node 0 over the three access paths
// of docs/design.md §2 (native CPU, loopback NIC, remote NIC), then puts and gets in
// a distributed hash map, a distributed queue and a distributed ordered map
// over the same three paths (tools/demo/map_demo.h, tools/demo/queue_demo.h,
// tools/demo/skiplist_demo.h),
// checking every result and printing each path's per-operation costs.

#include <cstddef>
#include <cstdio>
#include <iostream>
#include <string>

#include <boost/program_options.hpp>

#include "absl/strings/str_format.h"
#include "rdma/cluster.h"
#include "rdma/remote_ref.h"
#include "rdma/rmw_word.h"
#include "rdma/verbs/flags.h"
#include "tools/demo/map_demo.h"
#include "tools/demo/queue_demo.h"
#include "tools/demo/skiplist_demo.h"
#include "tools/demo/measure.h"

namespace {

namespace po = boost::program_options;
using demo::Measure;
using demo::Row;

// The demo's words on node 0, each with its one RMW domain (docs/design.md
// §3): the native path RMWs `cpu` with CPU atomics, the NIC paths RMW `nic`
// with NIC atomics. Mixing the two domains on one word would not be atomic.
struct alignas(64) DemoLine {
  rdma::CpuWord cpu;  // RMW'd by node 0's CPU only
  rdma::NicWord nic;  // RMW'd by NIC atomics only (loopback and remote)
  uint64_t pad_[6];
};
static_assert(offsetof(DemoLine, cpu) == 0 && offsetof(DemoLine, nic) == 8 && sizeof(DemoLine) == 64);

// One path's implementation of the four verbs on its word of `line`.
class PathOps {
 public:
  virtual ~PathOps() = default;
  virtual absl::StatusOr<uint64_t> Read() = 0;
  virtual absl::Status Write(uint64_t v) = 0;
  virtual absl::StatusOr<uint64_t> CompareAndSwap(uint64_t expected, uint64_t desired) = 0;
  virtual absl::StatusOr<uint64_t> FetchAndAdd(uint64_t add) = 0;
};

// Native: CPU loads, stores and atomics on the owner's memory.
class NativeOps : public PathOps {
 public:
  explicit NativeOps(rdma::RemoteRef<DemoLine> line) : w_(line.Local(0).cpu) {}
  absl::StatusOr<uint64_t> Read() override { return w_.Load(); }
  absl::Status Write(uint64_t v) override {
    w_.Store(v);
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> CompareAndSwap(uint64_t e, uint64_t d) override { return w_.CompareAndSwap(e, d); }
  absl::StatusOr<uint64_t> FetchAndAdd(uint64_t add) override { return w_.FetchAndAdd(add); }

 private:
  rdma::CpuWord& w_;
};

// Loopback and remote: the same calls through a Session; which QP carries
// them is decided by the session's node vs the word's node.
class NicOps : public PathOps {
 public:
  NicOps(rdma::Session& s, rdma::RemoteRef<DemoLine> line) : s_(s), w_(line.Field(&DemoLine::nic)) {}
  absl::StatusOr<uint64_t> Read() override { return w_.Read(s_); }
  absl::Status Write(uint64_t v) override { return w_.Write(s_, v); }
  absl::StatusOr<uint64_t> CompareAndSwap(uint64_t e, uint64_t d) override { return w_.CompareAndSwap(s_, e, d); }
  absl::StatusOr<uint64_t> FetchAndAdd(uint64_t add) override { return w_.FetchAndAdd(s_, add); }

 private:
  rdma::Session& s_;
  rdma::RemoteWord<rdma::NicWord> w_;
};

// Runs and checks the four verbs on `word` over `ops`; appends cost rows.
absl::Status Exercise(const std::string& path, PathOps& ops, int reps, std::vector<Row>& rows) {
  auto check = [&](bool cond, const std::string& what) {
    return cond ? absl::OkStatus() : absl::InternalError(absl::StrFormat("%s path: %s", path, what));
  };
  if (auto s = ops.Write(10); !s.ok()) return s;
  auto r = ops.Read();
  if (!r.ok()) return r.status();
  if (auto s = check(*r == 10, "READ after WRITE did not see 10"); !s.ok()) return s;
  auto c1 = ops.CompareAndSwap(10, 20);
  if (!c1.ok()) return c1.status();
  if (auto s = check(*c1 == 10, "successful CAS did not return 10"); !s.ok()) return s;
  auto c2 = ops.CompareAndSwap(10, 30);
  if (!c2.ok()) return c2.status();
  if (auto s = check(*c2 == 20, "failed CAS did not return the current value 20"); !s.ok()) return s;
  auto f = ops.FetchAndAdd(5);
  if (!f.ok()) return f.status();
  auto r2 = ops.Read();
  if (!r2.ok()) return r2.status();
  if (auto s = check(*f == 20 && *r2 == 25, "FAA 20+5 did not give 25"); !s.ok()) return s;

  uint64_t v = 0;
  if (auto s = Measure(path, "WRITE", reps, rows, [&](int) { return ops.Write(++v); }); !s.ok()) return s;
  if (auto s = Measure(path, "READ", reps, rows, [&](int) { return ops.Read().status(); }); !s.ok()) return s;
  if (auto s = Measure(path, "CAS", reps, rows, [&](int) { return ops.CompareAndSwap(v, v + 1).status(); }); !s.ok()) return s;
  if (auto s = Measure(path, "FAA", reps, rows, [&](int) { return ops.FetchAndAdd(1).status(); }); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string fabric;
  int reps = 0;
  // --device/--port/--gid-index first (shared with the other programs), so
  // program_options sees only its own flags.
  rdma::verbs::DeviceFlags device_flags;
  if (absl::Status s = device_flags.Extract(&argc, argv); !s.ok()) {
    std::cerr << "cluster_demo: " << s.message() << "\n";
    return 2;
  }
  po::options_description desc(
      "cluster_demo: a 3-node cluster; READ/WRITE/CAS/FAA on a word of node 0, then hash map put/get\n"
      "queue enqueue/dequeue and ordered-map get/put,\n"
      "over the native, loopback and remote paths, with per-op NIC operations, doorbells, round\n"
      "trips and bytes.\n\nOptions");
  desc.add_options()("help,h", "show this help")(
      "fabric", po::value<std::string>(&fabric)->default_value("auto"),
      "soft | verbs | auto (auto = verbs if an RDMA device exists, else the in-process soft RNIC)")(
      "reps", po::value<int>(&reps)->default_value(10000), "repetitions per measured operation (1..10^7)");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "cluster_demo: " << e.what() << "\n\n" << desc << rdma::verbs::kDeviceFlagsHelp << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc << rdma::verbs::kDeviceFlagsHelp << "\n";
    return 0;
  }
  auto kind = rdma::ParseFabricKind(fabric);
  if (!kind.ok()) {
    std::cerr << "cluster_demo: " << kind.status().message() << "\n";
    return 2;
  }
  if (reps < 1 || reps > 10000000) {
    std::cerr << "cluster_demo: --reps must be in 1..10000000\n";
    return 2;
  }

  rdma::ClusterOptions options;

  options.named_bytes = 0;  // no named structures: nothing registered for them
  options.num_nodes = 3;
  options.node.arena_bytes = 16 << 20;
  options.fabric.kind = *kind;
  if (absl::Status s = device_flags.Apply(&options.fabric); !s.ok()) {
    std::cerr << "cluster_demo: " << s.message() << "\n";
    return 2;
  }
  auto cluster = rdma::Cluster::Create(options);
  if (!cluster.ok()) {
    std::cerr << "cluster_demo: cannot build the cluster: " << cluster.status() << "\n";
    return 1;
  }
  std::cout << "fabric: " << rdma::FabricKindName((*cluster)->fabric().kind()) << ", device "
            << (*cluster)->node(0).device().name() << ", atomics: "
            << rdma::AtomicScopeName((*cluster)->node(0).device().caps().atomic_scope) << "\n"
            << "3 nodes; the words live on node 0 (a CpuWord for the native path, a NicWord for the NIC paths);\n"
            << "native and loopback run on node 0, remote on node 1\n\n";
  auto mem = (*cluster)->node(0).Allocate(sizeof(DemoLine));
  if (!mem.ok()) {
    std::cerr << mem.status() << "\n";
    return 1;
  }
  const auto line = rdma::RemoteRef<DemoLine>::At(*mem);

  std::vector<Row> rows;
  absl::Status status;
  {
    rdma::BindThisThreadToNode(0);
    NativeOps native(line);
    status = Exercise("native", native, reps, rows);
  }
  for (auto [path, node] : {std::pair<const char*, rdma::NodeId>{"loopback", 0}, {"remote", 1}}) {
    if (!status.ok()) break;
    auto session = (*cluster)->NewSession(node);
    if (!session.ok()) {
      status = session.status();
      break;
    }
    NicOps nic(**session, line);
    status = Exercise(path, nic, reps, rows);
  }
  if (!status.ok()) {
    std::cerr << "cluster_demo: FAILED: " << status << "\n";
    return 1;
  }
  std::cout << "One 8-byte word on node 0 per RMW domain:\n";
  demo::PrintRows(rows);

  std::vector<Row> map_rows;
  if (absl::Status s = demo::RunMapDemo(**cluster, reps, map_rows); !s.ok()) {
    std::cerr << "cluster_demo: FAILED: " << s << "\n";
    return 1;
  }
  std::cout << "\nHash map (structures::HashMap<24-byte value>), keys homed on node 0, uncontended:\n";
  demo::PrintRows(map_rows);
  std::vector<Row> queue_rows;
  if (absl::Status s = demo::RunQueueDemo(**cluster, reps, queue_rows); !s.ok()) {
    std::cerr << "cluster_demo: FAILED: " << s << "\n";
    return 1;
  }
  std::cout << "\nQueue (structures::Queue<24-byte value>), node 0's queue, uncontended:\n";
  demo::PrintRows(queue_rows);
  std::vector<Row> ordered_rows;
  if (absl::Status s = demo::RunSkipListDemo(**cluster, reps, ordered_rows); !s.ok()) {
    std::cerr << "cluster_demo: FAILED: " << s << "\n";
    return 1;
  }
  std::cout << "\nOrdered map (structures::SkipList<24-byte value>), keys of node 0's range, leaf locations known, "
               "uncontended:\n";
  demo::PrintRows(ordered_rows);
  std::cout << "\nall results checked: OK (counts are per operation; times are this machine's, counts are not)\n";
  return 0;
}
