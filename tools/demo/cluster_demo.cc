// The quick-start demo: builds a 3-node cluster on the chosen fabric, runs
// READ, WRITE, CAS and FAA on one word of node 0 over the three access paths
// of DESIGN §2 (native CPU, loopback NIC, remote NIC), then puts and gets in
// a distributed hash map over the same three paths (tools/demo/map_demo.h),
// checking every result and printing each path's per-operation costs.

#include <atomic>
#include <cstdio>
#include <iostream>
#include <string>

#include <boost/program_options.hpp>

#include "absl/strings/str_format.h"
#include "rdma/cluster.h"
#include "rdma/verbs/flags.h"
#include "tools/demo/map_demo.h"
#include "tools/demo/measure.h"

namespace {

namespace po = boost::program_options;
using demo::Measure;
using demo::Row;
using rdma::RemotePtr;

// One path's implementation of the four verbs on an 8-byte word.
class PathOps {
 public:
  virtual ~PathOps() = default;
  virtual absl::StatusOr<uint64_t> Read(RemotePtr w) = 0;
  virtual absl::Status Write(RemotePtr w, uint64_t v) = 0;
  virtual absl::StatusOr<uint64_t> Cas(RemotePtr w, uint64_t expected, uint64_t desired) = 0;
  virtual absl::StatusOr<uint64_t> Faa(RemotePtr w, uint64_t add) = 0;
};

// Native: CPU loads, stores and atomics on the owner's memory. (This word is
// only RMW'd by one domain at a time in the demo; mixing is what locks/ is for.)
class NativeOps : public PathOps {
 public:
  absl::StatusOr<uint64_t> Read(RemotePtr w) override { return Word(w).load(std::memory_order_acquire); }
  absl::Status Write(RemotePtr w, uint64_t v) override {
    Word(w).store(v, std::memory_order_release);
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> Cas(RemotePtr w, uint64_t expected, uint64_t desired) override {
    Word(w).compare_exchange_strong(expected, desired);
    return expected;
  }
  absl::StatusOr<uint64_t> Faa(RemotePtr w, uint64_t add) override { return Word(w).fetch_add(add); }

 private:
  static std::atomic_ref<uint64_t> Word(RemotePtr w) { return std::atomic_ref<uint64_t>(*w.local<uint64_t>()); }
};

// Loopback and remote: the same calls through a Session; which QP carries
// them is decided by the session's node vs the word's node.
class NicOps : public PathOps {
 public:
  explicit NicOps(rdma::Session& s) : s_(s) {}
  absl::StatusOr<uint64_t> Read(RemotePtr w) override { return s_.Read64(w); }
  absl::Status Write(RemotePtr w, uint64_t v) override { return s_.Write64(w, v); }
  absl::StatusOr<uint64_t> Cas(RemotePtr w, uint64_t e, uint64_t d) override { return s_.CompareAndSwap(w, e, d); }
  absl::StatusOr<uint64_t> Faa(RemotePtr w, uint64_t add) override { return s_.FetchAndAdd(w, add); }

 private:
  rdma::Session& s_;
};

// Runs and checks the four verbs on `word` over `ops`; appends cost rows.
absl::Status Exercise(const std::string& path, PathOps& ops, RemotePtr word, int reps, std::vector<Row>& rows) {
  auto check = [&](bool cond, const std::string& what) {
    return cond ? absl::OkStatus() : absl::InternalError(absl::StrFormat("%s path: %s", path, what));
  };
  if (auto s = ops.Write(word, 10); !s.ok()) return s;
  auto r = ops.Read(word);
  if (!r.ok()) return r.status();
  if (auto s = check(*r == 10, "READ after WRITE did not see 10"); !s.ok()) return s;
  auto c1 = ops.Cas(word, 10, 20);
  if (!c1.ok()) return c1.status();
  if (auto s = check(*c1 == 10, "successful CAS did not return 10"); !s.ok()) return s;
  auto c2 = ops.Cas(word, 10, 30);
  if (!c2.ok()) return c2.status();
  if (auto s = check(*c2 == 20, "failed CAS did not return the current value 20"); !s.ok()) return s;
  auto f = ops.Faa(word, 5);
  if (!f.ok()) return f.status();
  auto r2 = ops.Read(word);
  if (!r2.ok()) return r2.status();
  if (auto s = check(*f == 20 && *r2 == 25, "FAA 20+5 did not give 25"); !s.ok()) return s;

  uint64_t v = 0;
  if (auto s = Measure(path, "WRITE", reps, rows, [&](int) { return ops.Write(word, ++v); }); !s.ok()) return s;
  if (auto s = Measure(path, "READ", reps, rows, [&](int) { return ops.Read(word).status(); }); !s.ok()) return s;
  if (auto s = Measure(path, "CAS", reps, rows, [&](int) { return ops.Cas(word, v, v + 1).status(); }); !s.ok()) return s;
  if (auto s = Measure(path, "FAA", reps, rows, [&](int) { return ops.Faa(word, 1).status(); }); !s.ok()) return s;
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
      "cluster_demo: a 3-node cluster; READ/WRITE/CAS/FAA on a word of node 0, then hash map put/get,\n"
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
            << "3 nodes; the word lives on node 0; native and loopback run on node 0, remote on node 1\n\n";
  auto word = (*cluster)->node(0).Allocate(8);
  if (!word.ok()) {
    std::cerr << word.status() << "\n";
    return 1;
  }

  std::vector<Row> rows;
  absl::Status status;
  {
    rdma::BindThisThreadToNode(0);
    NativeOps native;
    status = Exercise("native", native, *word, reps, rows);
  }
  for (auto [path, node] : {std::pair<const char*, rdma::NodeId>{"loopback", 0}, {"remote", 1}}) {
    if (!status.ok()) break;
    auto session = (*cluster)->NewSession(node);
    if (!session.ok()) {
      status = session.status();
      break;
    }
    NicOps nic(**session);
    status = Exercise(path, nic, *word, reps, rows);
  }
  if (!status.ok()) {
    std::cerr << "cluster_demo: FAILED: " << status << "\n";
    return 1;
  }
  std::cout << "One 8-byte word on node 0:\n";
  demo::PrintRows(rows);

  std::vector<Row> map_rows;
  if (absl::Status s = demo::RunMapDemo(**cluster, reps, map_rows); !s.ok()) {
    std::cerr << "cluster_demo: FAILED: " << s << "\n";
    return 1;
  }
  std::cout << "\nHash map (structures::HashMap<24-byte value>), keys homed on node 0, uncontended:\n";
  demo::PrintRows(map_rows);
  std::cout << "\nall results checked: OK (counts are per operation; times are this machine's, counts are not)\n";
  return 0;
}
