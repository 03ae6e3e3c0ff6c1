#include "bench/cluster_bench_flags.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace bench::cluster {
namespace {

absl::Status Bad(absl::string_view flag, absl::string_view value, absl::string_view want) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", want));
}

absl::Status ParseInt(absl::string_view flag, absl::string_view v, int64_t lo, int64_t hi, int64_t* out) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) return Bad(flag, v, absl::StrCat("want an integer in ", lo, "..", hi));
  *out = x;
  return absl::OkStatus();
}

absl::Status ParseSeconds(absl::string_view flag, absl::string_view v, double lo, double hi, double* out) {
  double x = 0;
  if (!absl::SimpleAtod(v, &x) || !std::isfinite(x) || x < lo || x > hi) {
    return Bad(flag, v, absl::StrCat("want seconds in ", lo, "..", hi));
  }
  *out = x;
  return absl::OkStatus();
}

// A comma-separated list, each item through `one`; "all" (when `all` is
// given) is every item. Duplicates are dropped, the first order kept.
template <typename T>
absl::Status ParseList(absl::string_view flag, absl::string_view v, const std::vector<T>* all,
                       const std::function<absl::StatusOr<T>(absl::string_view)>& one, std::vector<T>* out) {
  if (all != nullptr && v == "all") {
    *out = *all;
    return absl::OkStatus();
  }
  std::vector<T> items;
  for (absl::string_view item : absl::StrSplit(v, ',')) {
    absl::StatusOr<T> t = one(absl::StripAsciiWhitespace(item));
    if (!t.ok()) return Bad(flag, v, t.status().message());
    bool seen = false;
    for (const T& x : items) seen = seen || x == *t;
    if (!seen) items.push_back(*t);
  }
  *out = std::move(items);
  return absl::OkStatus();
}

absl::StatusOr<Structure> OneStructure(absl::string_view s) {
  for (Structure x : {Structure::kHashMap, Structure::kSkipList, Structure::kQueue}) {
    if (s == StructureFlagName(x)) return x;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown structure '", s, "' (hash_map, skiplist, queue or all)"));
}

absl::StatusOr<Workload> OneWorkload(absl::string_view s) {
  const std::string l = absl::AsciiStrToLower(s);
  for (Workload x : {Workload::kA, Workload::kB, Workload::kC, Workload::kE}) {
    if (l == WorkloadFlagName(x)) return x;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown workload '", s, "' (a, b, c, e or all)"));
}

absl::StatusOr<KeyDist> OneDist(absl::string_view s) {
  if (s == "uniform") return KeyDist::kUniform;
  if (s == "zipf" || s == "zipf0.99") return KeyDist::kZipf;
  return absl::InvalidArgumentError(absl::StrCat("unknown distribution '", s, "' (uniform, zipf or all)"));
}

absl::StatusOr<LocalShare> OneLocal(absl::string_view s) {
  if (s == "uniform") return LocalShare{};
  int p = 0;
  if (!absl::SimpleAtoi(s, &p) || p < 0 || p > 100) {
    return absl::InvalidArgumentError(absl::StrCat("'", s, "' is neither 'uniform' nor a percentage 0..100"));
  }
  return LocalShare{.uniform = false, .percent = p};
}

struct Flag {
  const char* name;
  const char* value;  // "" for a boolean flag
  const char* help;   // ends with the default
  std::function<absl::Status(absl::string_view value, Config& c)> set;
};

const std::vector<Flag>& Flags() {
  static const auto* flags = new std::vector<Flag>{
      {"in-process", "N",
       "run N nodes in this process, one thread group per node, for a quick look; 0: one node per\n"
       "process from the job's environment (mpirun, srun, or the coordinator: RDMADS_COORDINATOR,\n"
       "RDMADS_NODES, RDMADS_NODE_ID).\n"
       "Default 0",
       [](absl::string_view v, Config& c) {
         int64_t x = 0;
         absl::Status s = ParseInt("in-process", v, 0, 64, &x);
         c.in_process = static_cast<int>(x);
         return s;
       }},
      {"fabric", "soft|verbs|auto",
       "the NIC. auto: for one node per process, $RDMADS_FABRIC if set, else verbs; in process,\n"
       "verbs when this machine has an RDMA device, else the soft NIC. Default auto",
       [](absl::string_view v, Config& c) -> absl::Status {
         absl::StatusOr<rdma::FabricKind> k = rdma::ParseFabricKind(v);
         if (!k.ok()) return Bad("fabric", v, k.status().message());
         c.fabric = *k;
         return absl::OkStatus();
       }},
      {"poll", "busy|notify",
       "how a thread waits for a completion: spin on the CQ, or block on its channel (for more\n"
       "threads than cores). Default busy",
       [](absl::string_view v, Config& c) -> absl::Status {
         if (v == "busy") c.poll = rdma::PollMode::kBusy;
         else if (v == "notify") c.poll = rdma::PollMode::kNotify;
         else return Bad("poll", v, "want busy or notify");
         return absl::OkStatus();
       }},
      {"structures", "LIST", "hash_map, skiplist, queue, comma-separated, or all. Default all",
       [](absl::string_view v, Config& c) {
         static const std::vector<Structure> all = {Structure::kHashMap, Structure::kSkipList, Structure::kQueue};
         return ParseList<Structure>("structures", v, &all, OneStructure, &c.structures);
       }},
      {"workloads", "LIST",
       "the maps' YCSB mixes: a (50% get / 50% put), b (95/5), c (100% get), e (95% Scan of 50 /\n"
       "5% insert; ordered map only), comma-separated, or all. The queue always runs its one shape\n"
       "(enqueue, then dequeue on the same home). Default all",
       [](absl::string_view v, Config& c) {
         static const std::vector<Workload> all = {Workload::kA, Workload::kB, Workload::kC, Workload::kE};
         return ParseList<Workload>("workloads", v, &all, OneWorkload, &c.workloads);
       }},
      {"dists", "LIST", "key popularity: uniform, zipf (Zipf 0.99), comma-separated, or all. Default all",
       [](absl::string_view v, Config& c) {
         static const std::vector<KeyDist> all = {KeyDist::kUniform, KeyDist::kZipf};
         return ParseList<KeyDist>("dists", v, &all, OneDist, &c.dists);
       }},
      {"local", "LIST",
       "share of operations on keys (queue: rings) homed on the thread's own node: uniform (the\n"
       "structures' own placement over all nodes), or a percentage: 0 (every key homed on another\n"
       "node), 100 (every key on this node), 0..100; comma-separated. Default uniform",
       [](absl::string_view v, Config& c) {
         return ParseList<LocalShare>("local", v, nullptr, OneLocal, &c.locals);
       }},
      {"seconds", "S", "measured time per cell. Default 3",
       [](absl::string_view v, Config& c) { return ParseSeconds("seconds", v, 0.01, 3600, &c.seconds); }},
      {"warmup", "S", "time each cell runs before it is measured. Default 0.5",
       [](absl::string_view v, Config& c) { return ParseSeconds("warmup", v, 0, 600, &c.warmup); }},
      {"threads", "N", "client threads per node. Default 1",
       [](absl::string_view v, Config& c) {
         int64_t x = 0;
         absl::Status s = ParseInt("threads", v, 1, 256, &x);
         c.threads = static_cast<int>(x);
         return s;
       }},
      {"keys", "N", "keys loaded into each map, over the whole cluster (each node loads its own). Default 100000",
       [](absl::string_view v, Config& c) {
         int64_t x = 0;
         absl::Status s = ParseInt("keys", v, 100, int64_t{1} << 30, &x);
         c.keys = static_cast<uint64_t>(x);
         return s;
       }},
      {"seed", "N", "seed of the key set and the traces; every process must get the same. Default 1",
       [](absl::string_view v, Config& c) {
         int64_t x = 0;
         absl::Status s = ParseInt("seed", v, 0, INT64_MAX, &x);
         c.seed = static_cast<uint64_t>(x);
         return s;
       }},
      {"check-costs", "",
       "instead of the matrix: one thread, uncontended, measures NIC ops, doorbells, round trips and\n"
       "bytes of a remote hash map Get and Put, ordered map Get and Insert, queue Enqueue and\n"
       "Dequeue, prints them, and exits 1 if any differs from what the structures' tests assert",
       [](absl::string_view, Config& c) {
         c.check_costs = true;
         return absl::OkStatus();
       }},
      {"json", "FILE",
       "rank 0 writes the rows as Google Benchmark JSON (bench/suite/report.py reads it). Default none",
       [](absl::string_view v, Config& c) {
         c.json_path = std::string(v);
         return v.empty() ? Bad("json", v, "want a file name") : absl::OkStatus();
       }},
      {"csv", "FILE", "rank 0 writes the rows in results.csv's columns (bench/suite/README.md). Default none",
       [](absl::string_view v, Config& c) {
         c.csv_path = std::string(v);
         return v.empty() ? Bad("csv", v, "want a file name") : absl::OkStatus();
       }},
  };
  return *flags;
}

absl::Status CheckSelection(const Config& c) {
  bool any = false;
  for (Structure s : c.structures) {
    if (s == Structure::kQueue) any = true;
    for (Workload w : c.workloads) any = any || w != Workload::kE || s == Structure::kSkipList;
  }
  if (!any) {
    return absl::InvalidArgumentError(
        "nothing to run: workload e runs on the ordered map only (--structures=skiplist), and --workloads "
        "selects no other mix for the chosen structures");
  }
  if (!c.device.given) return absl::OkStatus();
  rdma::FabricOptions fo;
  fo.kind = c.fabric;
  return c.device.Apply(&fo);
}

}  // namespace

const char* StructureFlagName(Structure s) {
  switch (s) {
    case Structure::kHashMap: return "hash_map";
    case Structure::kSkipList: return "skiplist";
    case Structure::kQueue: return "queue";
  }
  return "?";
}

const char* WorkloadFlagName(Workload w) {
  switch (w) {
    case Workload::kA: return "a";
    case Workload::kB: return "b";
    case Workload::kC: return "c";
    case Workload::kE: return "e";
    case Workload::kQueue: return "queue";
  }
  return "?";
}

std::string LocalShareName(const LocalShare& l) { return l.uniform ? "uniform" : absl::StrCat(l.percent); }

absl::StatusOr<Parsed> ParseFlags(const std::vector<std::string>& args) {
  Parsed p;
  // The verbs device flags have their own parser (rdma/verbs/flags.h).
  std::vector<std::string> copy = args;
  std::vector<char*> argv = {const_cast<char*>("cluster_bench")};
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(argv.size()) - 1;
  if (absl::Status s = p.config.device.Extract(&argc, argv.data()); !s.ok()) return s;
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      p.help = true;
      continue;
    }
    if (arg.substr(0, 2) != "--") {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "' (flags are --name=value)"));
    }
    const size_t eq = arg.find('=');
    const absl::string_view name = arg.substr(2, eq == absl::string_view::npos ? absl::string_view::npos : eq - 2);
    const Flag* flag = nullptr;
    for (const Flag& f : Flags()) flag = name == f.name ? &f : flag;
    if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag '", arg, "'"));
    const bool boolean = flag->value[0] == '\0';
    if (boolean && eq != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " takes no value"));
    }
    if (!boolean && eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value: --", name, "=", flag->value));
    }
    if (absl::Status s = flag->set(boolean ? "" : arg.substr(eq + 1), p.config); !s.ok()) return s;
  }
  if (p.help) return p;
  if (absl::Status s = CheckSelection(p.config); !s.ok()) return s;
  return p;
}

absl::Status CheckAgainstCluster(const Config& c, int num_nodes) {
  if (num_nodes >= 2) return absl::OkStatus();
  for (const LocalShare& l : c.locals) {
    if (!l.uniform && l.percent < 100) {
      return absl::InvalidArgumentError(absl::StrCat("--local=", l.percent,
                                                     " needs keys homed on another node, and the cluster has ",
                                                     num_nodes, " node; use --local=100 or uniform, or more nodes"));
    }
  }
  if (c.check_costs) {
    return absl::InvalidArgumentError("--check-costs measures remote operations and needs at least 2 nodes");
  }
  return absl::OkStatus();
}

std::string Usage() {
  std::string u =
      "Usage: cluster_bench [flags]\n"
      "\n"
      "The cross-process benchmark of rdmads' structures. Every process hosts its node's part of a\n"
      "hash map, an ordered map and a queue (opened by name), loads the keys homed on its node, and\n"
      "runs client threads on them: YCSB A, B, C (and E on the ordered map) with uniform or Zipf 0.99\n"
      "keys, and queue enqueue+dequeue pairs, with a chosen share of the keys homed on the thread's\n"
      "own node. Rank 0 gathers every process's counts and prints, per cell, ops/s of the whole\n"
      "cluster, p50/p99 latency, and NIC ops, doorbells, round trips and bytes per operation (a\n"
      "queue operation is an enqueue and a dequeue). Progress goes to stderr.\n"
      "\n"
      "  mpirun -np 3 cluster_bench                       one node per process (PMIx; srun likewise)\n"
      "  RDMADS_COORDINATOR=h:2181 RDMADS_NODES=3 RDMADS_NODE_ID=i cluster_bench   no launcher (rdma/bootstrap.h)\n"
      "  cluster_bench --in-process=3 --seconds=1         3 nodes in this process, soft NIC\n"
      "  mpirun -np 3 cluster_bench --check-costs         the uncontended remote costs, checked\n"
      "\n"
      "Flags:\n";
  for (const Flag& f : Flags()) {
    std::string head = absl::StrCat("  --", f.name, f.value[0] ? "=" : "", f.value);
    if (head.size() < 24) head.resize(24, ' ');
    else head += "\n" + std::string(24, ' ');
    u += head;
    // The help as one paragraph, wrapped to 100 columns.
    size_t column = 24;
    for (absl::string_view word : absl::StrSplit(f.help, absl::ByAnyChar(" \n"), absl::SkipEmpty())) {
      if (column > 24 && column + 1 + word.size() > 100) {
        u += "\n" + std::string(24, ' ');
        column = 24;
      } else if (column > 24) {
        u += ' ';
        ++column;
      }
      absl::StrAppend(&u, word);
      column += word.size();
    }
    u += "\n";
  }
  u += "  --help                this text\n";
  u += rdma::verbs::kDeviceFlagsHelp;
  u +=
      "\n"
      "Exit codes: 0 done (and, with --check-costs, every cost as expected); 1 an operation or the\n"
      "cluster failed, or a cost differed; 2 bad flags.\n";
  return u;
}

}  // namespace bench::cluster
