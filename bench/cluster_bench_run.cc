#include "bench/cluster_bench_run.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/cluster_bench_costs.h"
#include "bench/cluster_bench_crew.h"
#include "bench/cluster_bench_flags.h"
#include "bench/cluster_bench_results.h"
#include "bench/cluster_bench_workload.h"
#include "rdma/bootstrap.h"
#include "rdma/cluster.h"
#include "util/status_macros.h"

namespace bench::cluster {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string Me(const rdma::Cluster* c) {
  return c != nullptr && c->processes() > 1 ? absl::StrCat("cluster_bench[rank ", c->rank(), "]") : "cluster_bench";
}

int BadFlags(absl::string_view message) {
  absl::FPrintF(stderr, "cluster_bench: %s\nTry 'cluster_bench --help'.\n", message);
  return 2;
}

// Rank 0's progress lines on stderr.
template <typename... Args>
void Say(const rdma::Cluster& c, const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (c.rank() != 0) return;
  absl::FPrintF(stderr, "cluster_bench: %s\n", absl::StrFormat(format, args...));
  std::fflush(stderr);
}

absl::StatusOr<std::vector<std::string>> AllGather(rdma::Cluster& c, const std::string& blob) {
  if (c.bootstrap() == nullptr) return std::vector<std::string>{blob};
  return c.bootstrap()->AllGather(blob);
}

// Every process's status after a stage: OK when all are. A failure of this
// rank keeps its code; another rank's failure is Aborted, naming that rank.
absl::Status Agree(rdma::Cluster& c, const absl::Status& mine, absl::string_view stage) {
  const std::string blob = mine.ok() ? "" : mine.ToString().substr(0, 2000);
  absl::StatusOr<std::vector<std::string>> all = AllGather(c, blob);
  if (!all.ok()) return util::Annotate(all.status(), absl::StrCat("exchanging the processes' status after ", stage));
  for (size_t r = 0; r < all->size(); ++r) {
    if ((*all)[r].empty()) continue;
    if (static_cast<int>(r) == c.rank()) return util::Annotate(mine, stage);
    return absl::AbortedError(absl::StrCat(stage, " failed on rank ", r, ": ", (*all)[r]));
  }
  return absl::OkStatus();
}

// The process's workers and the crew that runs them.
struct Threads {
  std::vector<std::unique_ptr<Worker>> workers;
  std::unique_ptr<Crew> crew;

  // Runs fn(worker) on every worker's thread; the first error, naming it.
  template <typename Fn>
  absl::Status Each(Fn fn) {
    const std::vector<absl::Status> s = crew->RunAll([&](int i) { return fn(*workers[static_cast<size_t>(i)]); });
    for (size_t i = 0; i < s.size(); ++i) {
      if (!s[i].ok()) return util::Annotate(s[i], Name(i));
    }
    return absl::OkStatus();
  }
  std::string Name(size_t i) const {
    return absl::StrCat("node ", workers[i]->node(), " thread ", workers[i]->index());
  }
};

// Runs every cell; the rows go to *rows as they are measured.
absl::Status RunCells(rdma::Cluster& cluster, const Config& config, const Structures& st, const ClusterShape& shape,
                      Threads& t, std::atomic<bool>& abort, std::vector<Row>* rows) {
  RETURN_IF_ERROR(Agree(cluster, t.Each([](Worker& w) { return w.Start(); }), "connecting the client threads"));
  const Clock::time_point load_start = Clock::now();
  Say(cluster, "loading %d keys into each map (each node its own)...", static_cast<int64_t>(config.keys));
  RETURN_IF_ERROR(Agree(cluster, t.Each([](Worker& w) { return w.Preload(); }), "loading the keys"));
  Say(cluster, "loaded in %.1f s", Since(load_start));
  if (st.ordered) {
    const Clock::time_point scan_start = Clock::now();
    Say(cluster, "every client scans the whole ordered map once (checks it, fills its leaf cache)...");
    RETURN_IF_ERROR(Agree(cluster, t.Each([](Worker& w) { return w.ScanAll(); }), "scanning the ordered map"));
    Say(cluster, "scanned in %.1f s", Since(scan_start));
  }

  const std::vector<Cell> cells = CellsOf(config);
  std::vector<std::string> names;
  for (size_t i = 0; i < t.workers.size(); ++i) names.push_back(t.Name(i));
  const Clock::time_point cells_start = Clock::now();
  for (size_t i = 0; i < cells.size(); ++i) {
    const Cell& cell = cells[i];
    const std::string label = CellLabel(cell);
    const double per_cell = i == 0 ? config.warmup + config.seconds + 0.1 : Since(cells_start) / static_cast<double>(i);
    Say(cluster, "[%d/%d] %s: %.3g s warm-up + %.3g s measured; about %.0f s left", i + 1, cells.size(), label,
        config.warmup, config.seconds, per_cell * static_cast<double>(cells.size() - i));
    abort.store(false);
    const int index = static_cast<int>(i);
    RETURN_IF_ERROR(Agree(cluster, t.Each([&](Worker& w) { return w.Prepare(cell, index); }),
                          absl::StrCat("preparing ", label)));
    std::vector<ThreadResult> results(t.workers.size());
    t.crew->RunAll([&](int w) {
      results[static_cast<size_t>(w)] = t.workers[static_cast<size_t>(w)]->Measure(cell);
      return absl::OkStatus();
    });
    const ProcessResult mine = SumThreads(cluster.rank(), results, names);
    ASSIGN_OR_RETURN(std::vector<std::string> blobs, AllGather(cluster, Encode(mine)));
    std::vector<ProcessResult> each;
    for (const std::string& b : blobs) {
      ASSIGN_OR_RETURN(ProcessResult p, Decode(b));
      each.push_back(std::move(p));
    }
    const Row row = Aggregate(cell, each, shape);
    if (cluster.rank() == 0) {
      if (i == 0) PrintHeader(stdout);
      PrintRow(stdout, row);
    }
    // Every rank has every process's errors: all stop here alike.
    if (!row.errors.empty()) {
      return absl::AbortedError(absl::StrCat(label, ": ", absl::StrJoin(row.errors, "; ")));
    }
    if (row.ops == 0) return absl::AbortedError(absl::StrCat(label, ": no operation completed in the measured time"));
    rows->push_back(row);
    RETURN_IF_ERROR(Agree(cluster, t.Each([&](Worker& w) { return w.Cleanup(cell); }),
                          absl::StrCat("erasing the fresh keys of ", label)));
  }
  Say(cluster, "%d cells in %.1f s", cells.size(), Since(cells_start));
  return absl::OkStatus();
}

absl::Status RunMatrix(rdma::Cluster& cluster, const Config& config, const Sizing& sizing, const ClusterShape& shape,
                       std::vector<Row>* rows) {
  Say(cluster, "%d nodes in %d process(es), %s fabric; %d client thread(s) per node; %d cells", shape.nodes,
      shape.processes, shape.fabric, config.threads, CellsOf(config).size());
  absl::StatusOr<Structures> st = OpenStructures(cluster, config, sizing);
  RETURN_IF_ERROR(Agree(cluster, st.status(), "opening the structures"));
  const KeySets keys = KeySets::Make(config, *st, cluster);
  std::atomic<bool> abort{false};
  Threads t;
  for (rdma::Node* node : cluster.local_nodes()) {
    for (int i = 0; i < config.threads; ++i) {
      const int global = static_cast<int>(node->id()) * config.threads + i;
      t.workers.push_back(std::make_unique<Worker>(cluster, *st, keys, config, sizing, node->id(), i, global, &abort));
    }
  }
  t.crew = std::make_unique<Crew>(static_cast<int>(t.workers.size()));
  const absl::Status s = RunCells(cluster, config, *st, shape, t, abort, rows);
  // Clients and sessions go on their own threads, before the structures.
  t.crew->RunAll([&](int i) {
    t.workers[static_cast<size_t>(i)]->Stop();
    return absl::OkStatus();
  });
  return s;
}

absl::Status CheckCosts(rdma::Cluster& cluster) {
  absl::StatusOr<CheckStructures> st = OpenCheckStructures(cluster);
  RETURN_IF_ERROR(Agree(cluster, st.status(), "opening the check structures"));
  absl::Status mine;
  if (cluster.rank() == 0) {
    // The other processes only host their parts meanwhile: uncontended.
    absl::StatusOr<std::vector<MeasuredCost>> m = MeasureCosts(cluster, *st, cluster.self(), cluster.self() == 0 ? 1 : 0);
    if (m.ok()) {
      PrintCosts(stdout, *m);
      if (!AllAsExpected(*m)) {
        mine = absl::FailedPreconditionError("a remote operation's cost differs from what the structures' tests assert");
      }
    } else {
      mine = m.status();
    }
  }
  return Agree(cluster, mine, "checking the costs");
}

}  // namespace

int Main(const std::vector<std::string>& args) {
  absl::StatusOr<Parsed> parsed = ParseFlags(args);
  if (!parsed.ok()) return BadFlags(parsed.status().message());
  if (parsed->help) {
    std::fputs(Usage().c_str(), stdout);
    return 0;
  }
  const Config& config = parsed->config;
  std::unique_ptr<rdma::Bootstrap> boot;
  int nodes = config.in_process;
  if (nodes == 0) {
    // Every collective waits up to 180 s: a slow rank (a loaded or emulated
    // host) may take long to load its keys.
    rdma::BootstrapOptions bo;
    bo.timeout = std::chrono::seconds(180);
    absl::StatusOr<std::unique_ptr<rdma::Bootstrap>> b = rdma::Bootstrap::FromEnvironment(bo);
    if (!b.ok()) {
      absl::FPrintF(stderr, "cluster_bench: cannot find the job: %s\n(or run every node in this process: --in-process=N)\n",
                    b.status().ToString());
      return 1;
    }
    boot = std::move(*b);
    nodes = boot->size();
  }
  if (absl::Status s = CheckAgainstCluster(config, nodes); !s.ok()) return BadFlags(s.message());
  const Sizing sizing = SizingFor(config, nodes);
  rdma::ClusterOptions o;
  o.num_nodes = nodes;
  o.node.arena_bytes = sizing.arena_bytes;
  o.named_bytes = config.check_costs ? CheckNamedBytes() : sizing.named_bytes;
  o.fabric.kind = config.fabric;
  if (absl::Status s = config.device.Apply(&o.fabric); !s.ok()) return BadFlags(s.message());
  absl::StatusOr<std::unique_ptr<rdma::Cluster>> cluster =
      boot ? rdma::Cluster::Open(std::move(boot), o) : rdma::Cluster::Create(o);
  if (!cluster.ok()) {
    absl::FPrintF(stderr, "cluster_bench: cannot open the cluster: %s\n", cluster.status().ToString());
    return 1;
  }
  rdma::Cluster& c = **cluster;
  const ClusterShape shape{.nodes = c.num_nodes(), .processes = c.processes(),
                           .fabric = std::string(rdma::FabricKindName(c.fabric().kind()))};
  std::vector<Row> rows;
  const absl::Status s = config.check_costs ? CheckCosts(c) : RunMatrix(c, config, sizing, shape, &rows);
  if (!s.ok()) {
    // Rank 0 says what failed anywhere; another rank only its own failures.
    if (c.rank() == 0 || !absl::IsAborted(s)) absl::FPrintF(stderr, "%s: %s\n", Me(&c), s.ToString());
    return 1;
  }
  if (c.rank() != 0 || config.check_costs) return 0;
  int code = 0;
  const std::string command = absl::StrJoin(args, " ");
  if (!config.json_path.empty()) {
    if (absl::Status w = WriteJson(config.json_path, rows, shape, command); !w.ok()) {
      absl::FPrintF(stderr, "cluster_bench: %s\n", w.ToString());
      code = 1;
    } else {
      Say(c, "wrote %d rows to %s", rows.size(), config.json_path);
    }
  }
  if (!config.csv_path.empty()) {
    if (absl::Status w = WriteCsv(config.csv_path, rows, shape); !w.ok()) {
      absl::FPrintF(stderr, "cluster_bench: %s\n", w.ToString());
      code = 1;
    } else {
      Say(c, "wrote %d rows to %s", rows.size(), config.csv_path);
    }
  }
  return code;
}

}  // namespace bench::cluster
