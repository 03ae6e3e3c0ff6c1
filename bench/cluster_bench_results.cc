#include "bench/cluster_bench_results.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace bench::cluster {
namespace {

using json = nlohmann::json;

double PerOp(uint64_t v, uint64_t ops) { return ops == 0 ? 0 : static_cast<double>(v) / static_cast<double>(ops); }

// Field readers that never throw: false when absent or of another type.
bool GetU64(const json& j, const char* key, uint64_t* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return false;
  *out = it->get<uint64_t>();
  return true;
}
bool GetDouble(const json& j, const char* key, double* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  *out = it->get<double>();
  return true;
}
bool GetString(const json& j, const char* key, std::string* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

std::string Dump(const json& j, int indent) { return j.dump(indent, ' ', false, json::error_handler_t::replace); }

absl::Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  if (!f) return absl::UnavailableError(absl::StrCat("cannot open ", path, " for writing"));
  f << text;
  f.close();
  if (!f) return absl::DataLossError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

const char* ImplName(Structure s) {
  switch (s) {
    case Structure::kHashMap: return "map";  // report.py's name for the hash map
    case Structure::kSkipList: return "skiplist";
    case Structure::kQueue: return "queue";
  }
  return "?";
}

}  // namespace

std::vector<Cell> CellsOf(const Config& c) {
  std::vector<Cell> cells;
  for (Structure s : c.structures) {
    if (s == Structure::kQueue) {
      for (const LocalShare& l : c.locals) cells.push_back({s, Workload::kQueue, KeyDist::kUniform, l});
      continue;
    }
    for (Workload w : c.workloads) {
      if (w == Workload::kE && s != Structure::kSkipList) continue;
      for (KeyDist d : c.dists) {
        for (const LocalShare& l : c.locals) cells.push_back({s, w, d, l});
      }
    }
  }
  return cells;
}

const char* MixName(Workload w) {
  switch (w) {
    case Workload::kA: return "get50_put50";
    case Workload::kB: return "get95_put5";
    case Workload::kC: return "get100";
    case Workload::kE: return "scan95_insert5";
    case Workload::kQueue: return "enq_deq";
  }
  return "?";
}

const char* PathName(const LocalShare& l, int num_nodes) {
  if (num_nodes == 1 || (!l.uniform && l.percent == 100)) return "native";
  if (!l.uniform && l.percent == 0) return "remote";
  return "mixed";
}

std::string CellLabel(const Cell& c) {
  std::string mix = MixName(c.workload);
  if (c.structure != Structure::kQueue) absl::StrAppend(&mix, "/", KeyDistName(c.dist));
  return absl::StrCat(StructureFlagName(c.structure), " ", mix, " local=", LocalShareName(c.local));
}

// ---------------------------------------------------------------- Histogram

int Histogram::Index(uint64_t ns) {
  if (ns < 64) return static_cast<int>(ns);
  const int msb = 63 - std::countl_zero(ns);
  return (msb - 5) * 32 + static_cast<int>(ns >> (msb - 5));
}
uint64_t Histogram::Lower(int i) {
  if (i < 64) return static_cast<uint64_t>(i);
  const int msb = i / 32 + 4;
  return static_cast<uint64_t>(i % 32 + 32) << (msb - 5);
}
uint64_t Histogram::Width(int i) { return i < 64 ? 1 : uint64_t{1} << (i / 32 - 1); }

void Histogram::Merge(const Histogram& o) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
  count_ += o.count_;
}

double Histogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return static_cast<double>(Lower(i)) + static_cast<double>(Width(i) - 1) / 2.0;
  }
  return static_cast<double>(Lower(kBuckets - 1));
}

std::string Histogram::Encode() const {
  std::string s;
  for (int i = 0; i < kBuckets; ++i) {
    if (counts_[i] != 0) absl::StrAppend(&s, s.empty() ? "" : ",", i, ":", counts_[i]);
  }
  return s;
}

absl::StatusOr<Histogram> Histogram::Decode(absl::string_view text) {
  Histogram h;
  if (text.empty()) return h;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(item, absl::MaxSplits(':', 1));
    int i = 0;
    uint64_t c = 0;
    if (!absl::SimpleAtoi(kv.first, &i) || !absl::SimpleAtoi(kv.second, &c) || i < 0 || i >= kBuckets) {
      return absl::InvalidArgumentError(absl::StrCat("bad histogram bucket '", item, "'"));
    }
    h.counts_[i] += c;
    h.count_ += c;
  }
  return h;
}

// ------------------------------------------------------ process and cluster

ProcessResult SumThreads(int rank, const std::vector<ThreadResult>& threads, const std::vector<std::string>& who) {
  ProcessResult p;
  p.rank = rank;
  p.threads = static_cast<int>(threads.size());
  for (size_t i = 0; i < threads.size(); ++i) {
    const ThreadResult& t = threads[i];
    p.ops += t.ops;
    p.local_ops += t.local_ops;
    if (t.seconds > 0) p.ops_per_s += static_cast<double>(t.ops) / t.seconds;
    p.max_seconds = std::max(p.max_seconds, t.seconds);
    p.cost += t.cost;
    p.latency.Merge(t.latency);
    if (!t.status.ok()) p.errors.push_back(absl::StrCat(i < who.size() ? who[i] : "a thread", ": ", t.status.ToString()));
  }
  return p;
}

std::string Encode(const ProcessResult& r) {
  json j = {{"rank", r.rank},
            {"threads", r.threads},
            {"ops", r.ops},
            {"local_ops", r.local_ops},
            {"ops_per_s", r.ops_per_s},
            {"max_seconds", r.max_seconds},
            {"nic_ops", r.cost.nic_ops},
            {"doorbells", r.cost.doorbells},
            {"round_trips", r.cost.round_trips},
            {"bytes", r.cost.bytes},
            {"latency", r.latency.Encode()},
            {"errors", r.errors}};
  return Dump(j, -1);
}

absl::StatusOr<ProcessResult> Decode(absl::string_view blob) {
  const json j = json::parse(blob.begin(), blob.end(), nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const char* what) {
    return absl::InvalidArgumentError(absl::StrCat("malformed process result (", what, "): ", blob.substr(0, 200)));
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  ProcessResult r;
  uint64_t rank = 0, threads = 0;
  std::string latency;
  if (!GetU64(j, "rank", &rank) || !GetU64(j, "threads", &threads) || !GetU64(j, "ops", &r.ops) ||
      !GetU64(j, "local_ops", &r.local_ops) || !GetDouble(j, "ops_per_s", &r.ops_per_s) ||
      !GetDouble(j, "max_seconds", &r.max_seconds) || !GetU64(j, "nic_ops", &r.cost.nic_ops) ||
      !GetU64(j, "doorbells", &r.cost.doorbells) || !GetU64(j, "round_trips", &r.cost.round_trips) ||
      !GetU64(j, "bytes", &r.cost.bytes) || !GetString(j, "latency", &latency)) {
    return bad("a field is missing or of the wrong type");
  }
  r.rank = static_cast<int>(rank);
  r.threads = static_cast<int>(threads);
  absl::StatusOr<Histogram> h = Histogram::Decode(latency);
  if (!h.ok()) return bad("latency");
  r.latency = std::move(*h);
  auto errors = j.find("errors");
  if (errors == j.end() || !errors->is_array()) return bad("errors");
  for (const json& e : *errors) {
    if (!e.is_string()) return bad("errors");
    r.errors.push_back(e.get<std::string>());
  }
  return r;
}

Row Aggregate(const Cell& cell, const std::vector<ProcessResult>& processes, const ClusterShape& shape) {
  Row row;
  row.cell = cell;
  row.nodes = shape.nodes;
  row.processes = shape.processes;
  row.path = PathName(cell.local, shape.nodes);
  rdma::OpCounters cost;
  Histogram latency;
  uint64_t local_ops = 0;
  for (const ProcessResult& p : processes) {
    row.threads += p.threads;
    row.ops += p.ops;
    local_ops += p.local_ops;
    row.ops_per_s += p.ops_per_s;
    row.seconds = std::max(row.seconds, p.max_seconds);
    cost += p.cost;
    latency.Merge(p.latency);
    for (const std::string& e : p.errors) row.errors.push_back(absl::StrCat("rank ", p.rank, " ", e));
  }
  row.nic_ops = PerOp(cost.nic_ops, row.ops);
  row.doorbells = PerOp(cost.doorbells, row.ops);
  row.round_trips = PerOp(cost.round_trips, row.ops);
  row.bytes = PerOp(cost.bytes, row.ops);
  row.local_pct = 100 * PerOp(local_ops, row.ops);
  row.p50_ns = latency.Quantile(0.5);
  row.p99_ns = latency.Quantile(0.99);
  row.workload = MixName(cell.workload);
  if (cell.structure != Structure::kQueue) absl::StrAppend(&row.workload, "/", KeyDistName(cell.dist));
  absl::StrAppend(&row.workload, "/local:", LocalShareName(cell.local), "/nodes:", shape.nodes, "/procs:",
                  shape.processes);
  row.name = absl::StrCat(row.path, "/", ImplName(cell.structure), "/", row.workload, "/real_time/threads:",
                          row.threads);
  return row;
}

// ------------------------------------------------------------------ output

void PrintHeader(std::FILE* out) {
  absl::FPrintF(out, "%-9s %-15s %-9s %-7s %-6s %5s %5s %4s %12s %9s %9s %8s %8s %8s %9s %7s\n", "structure",
                "mix", "keys", "local", "path", "nodes", "procs", "thr", "ops/s", "p50 us", "p99 us", "NIC/op",
                "dbell/op", "RT/op", "bytes/op", "local%");
}

void PrintRow(std::FILE* out, const Row& r) {
  const bool queue = r.cell.structure == Structure::kQueue;
  absl::FPrintF(out, "%-9s %-15s %-9s %-7s %-6s %5d %5d %4d %12.0f %9.2f %9.2f %8.3f %8.3f %8.3f %9.1f %7.1f\n",
                StructureFlagName(r.cell.structure), MixName(r.cell.workload), queue ? "-" : KeyDistName(r.cell.dist),
                LocalShareName(r.cell.local), r.path, r.nodes, r.processes, r.threads, r.ops_per_s, r.p50_ns / 1e3,
                r.p99_ns / 1e3, r.nic_ops, r.doorbells, r.round_trips, r.bytes, r.local_pct);
  std::fflush(out);
}

absl::Status WriteJson(const std::string& path, const std::vector<Row>& rows, const ClusterShape& shape,
                       const std::string& command) {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  json benchmarks = json::array();
  for (const Row& r : rows) {
    json b = {{"name", r.name},
              {"run_name", r.name},
              {"run_type", "iteration"},
              {"repetitions", 1},
              {"repetition_index", 0},
              {"threads", r.threads},
              {"iterations", r.ops},
              // Mean time of one operation of one thread, as Google Benchmark's real_time.
              {"real_time", r.ops_per_s > 0 ? 1e9 * r.threads / r.ops_per_s : 0.0},
              {"time_unit", "ns"},
              {"items_per_second", r.ops_per_s},
              {"nic_ops/op", r.nic_ops},
              {"doorbells/op", r.doorbells},
              {"round_trips/op", r.round_trips},
              {"bytes/op", r.bytes},
              {"median_us", r.p50_ns / 1e3},
              {"p99_us", r.p99_ns / 1e3},
              {"local_pct", r.local_pct},
              {"nodes", r.nodes},
              {"processes", r.processes},
              {"seconds", r.seconds}};
    benchmarks.push_back(std::move(b));
  }
  json doc = {{"context",
               {{"date", absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone())},
                {"host_name", host},
                {"executable", "cluster_bench"},
                {"command", command},
                {"num_cpus", std::thread::hardware_concurrency()},
                {"nodes", shape.nodes},
                {"processes", shape.processes},
                {"fabric", shape.fabric}}},
              {"benchmarks", std::move(benchmarks)}};
  return WriteFile(path, Dump(doc, 2) + "\n");
}

absl::Status WriteCsv(const std::string& path, const std::vector<Row>& rows, const ClusterShape& shape) {
  std::string text =
      "fabric,structure,path,workload,threads,ops_per_s,nic_ops_per_op,doorbells_per_op,round_trips_per_op,"
      "bytes_per_op,p50_ns,p99_ns,benchmark\n";
  const char* structure[] = {"hash_map", "skiplist", "queue"};
  for (const Row& r : rows) {
    absl::StrAppendFormat(&text, "%s,%s,%s,%s,%d,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%.10g,%s\n", shape.fabric,
                          structure[static_cast<int>(r.cell.structure)], r.path, r.workload, r.threads, r.ops_per_s,
                          r.nic_ops, r.doorbells, r.round_trips, r.bytes, r.p50_ns, r.p99_ns, r.name);
  }
  return WriteFile(path, text);
}

}  // namespace bench::cluster
