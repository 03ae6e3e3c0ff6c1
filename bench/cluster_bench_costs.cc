#include "bench/cluster_bench_costs.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status_macros.h"

namespace bench::cluster {
namespace {

structures::HashMapOptions CheckMapOptions() {
  structures::HashMapOptions o;
  o.groups_per_node = 64;
  o.max_groups_per_node = 64;
  return o;
}
structures::SkipListOptions CheckOrderedOptions() {
  structures::SkipListOptions o;
  o.part_bytes = uint64_t{256} << 10;
  return o;
}
structures::QueueOptions CheckQueueOptions() {
  structures::QueueOptions o;
  o.capacity = 64;
  return o;
}

std::string Figure(const std::optional<uint64_t>& v) { return v ? absl::StrCat(*v) : "-"; }

bool Matches(const ExpectedCost& e, const rdma::OpCounters& c) {
  return (!e.nic_ops || *e.nic_ops == c.nic_ops) && (!e.doorbells || *e.doorbells == c.doorbells) &&
         (!e.round_trips || *e.round_trips == c.round_trips) && (!e.bytes || *e.bytes == c.bytes);
}

// Runs `op` (returning absl::Status) and returns its counts.
absl::StatusOr<rdma::OpCounters> CostOf(const std::function<absl::Status()>& op) {
  const rdma::OpCounters before = rdma::ThisThreadCounters();
  RETURN_IF_ERROR(op());
  return rdma::ThisThreadCounters() - before;
}

}  // namespace

std::vector<ExpectedCost> ExpectedCosts() {
  const std::string map_test = "tests/structures/hash_map_test.cc, HashMapTest.OperationCosts";
  const std::string ordered_test = "tests/structures/skiplist_test.cc, SkipListTest.OperationCosts";
  const std::string queue_test = "tests/structures/queue_test.cc, QueueTest.OperationCosts";
  return {
      // Two READs, one per 16-slot candidate window, in one doorbell.
      {"hash map remote Get", 2, 1, 1, 2 * 16 * Map::kSlotBytes, map_test},
      // A new key whose windows are in two units: 2 x (CAS + READ + READ), WRITE, 2 x CAS.
      {"hash map remote Put (new key, two units)", 9, 5, 4, std::nullopt, map_test},
      // One READ of the leaf's image, the leaf's location known.
      {"ordered map remote Get (leaf known)", 1, 1, 1, sizeof(structures::skiplist_internal::NodeImage<Value32>),
       ordered_test},
      // CAS, READ line, READ image; WRITEs of version, key, value, meta, checksum, version; CAS.
      {"ordered map remote Insert (no split)", 10, std::nullopt, 2, std::nullopt, ordered_test},
      // {CAS, READ line, READ tail, READ seq, READ the head's claim word}, {WRITE payload, seq,
      // tail} inline, unlock CAS.
      {"queue remote Enqueue", 9, 3, 2, std::nullopt, queue_test},
      // The same with the payload READ in the first chain, {WRITE seq, head}.
      {"queue remote Dequeue", 9, 3, 2, std::nullopt, queue_test},
  };
}

size_t CheckNamedBytes() {
  return NamedRegionBytes({Map::PartBytes(CheckMapOptions()), CheckOrderedOptions().part_bytes,
                           Queue::PartBytes(CheckQueueOptions())});
}

absl::StatusOr<CheckStructures> OpenCheckStructures(rdma::Cluster& cluster) {
  ASSIGN_OR_RETURN(Map map, Map::Open(cluster, "cluster_bench.check.hash_map", CheckMapOptions()));
  ASSIGN_OR_RETURN(Ordered ordered, Ordered::Open(cluster, "cluster_bench.check.skiplist", CheckOrderedOptions()));
  ASSIGN_OR_RETURN(Queue queue, Queue::Open(cluster, "cluster_bench.check.queue", CheckQueueOptions()));
  return CheckStructures{std::move(map), std::move(ordered), std::move(queue)};
}

absl::StatusOr<std::vector<MeasuredCost>> MeasureCosts(rdma::Cluster& cluster, const CheckStructures& st,
                                                       rdma::NodeId from, rdma::NodeId home) {
  if (from == home) return absl::InvalidArgumentError("MeasureCosts: the home must be another node");
  ASSIGN_OR_RETURN(std::unique_ptr<rdma::Session> session, cluster.ThisThread(from));
  ASSIGN_OR_RETURN(auto map, st.map.NewClient(*session));
  ASSIGN_OR_RETURN(auto ordered, st.ordered.NewClient(*session));
  ASSIGN_OR_RETURN(auto queue, st.queue.NewClient(*session));
  std::vector<MeasuredCost> m;
  for (const ExpectedCost& e : ExpectedCosts()) {
    MeasuredCost c;
    c.expected = e;
    m.push_back(std::move(c));
  }

  // Hash map: keys homed on `home` whose two windows are in two units.
  std::vector<uint64_t> keys;
  for (uint64_t k = 1; keys.size() < kSamples; ++k) {
    const auto units = st.map.CandidatesOf(k);
    if (st.map.HomeOf(k) == home && units[0] != units[1]) keys.push_back(k);
  }
  for (uint64_t k : keys) {
    ASSIGN_OR_RETURN(rdma::OpCounters put, CostOf([&] { return map->Put(k, MakeValue(k, 1)).status(); }));
    m[1].samples.push_back(put);
    ASSIGN_OR_RETURN(rdma::OpCounters get, CostOf([&]() -> absl::Status {
                       ASSIGN_OR_RETURN(std::optional<Value32> v, map->Get(k));
                       if (!v.has_value()) return absl::InternalError(absl::StrCat("hash map: key ", k, " not found"));
                       return absl::OkStatus();
                     }));
    m[0].samples.push_back(get);
  }

  // Ordered map: a few keys in `home`'s range, one leaf; the client learns
  // where it is before anything is measured.
  const uint64_t base = (home == 0 ? 0 : st.ordered.split_keys()[home - 1]) + 1000;
  for (uint64_t i = 0; i < 8; ++i) {
    RETURN_IF_ERROR(ordered->Put(base + 10 * i, MakeValue(base + 10 * i, 1)).status());
  }
  RETURN_IF_ERROR(ordered->Get(base).status());
  const uint64_t splits = ordered->stats().splits;
  for (uint64_t i = 0; i < kSamples; ++i) {
    const uint64_t k = base + 10 * i;
    ASSIGN_OR_RETURN(rdma::OpCounters get, CostOf([&]() -> absl::Status {
                       ASSIGN_OR_RETURN(std::optional<Value32> v, ordered->Get(k));
                       if (!v.has_value()) return absl::InternalError(absl::StrCat("ordered map: key ", k, " not found"));
                       return absl::OkStatus();
                     }));
    m[2].samples.push_back(get);
    ASSIGN_OR_RETURN(rdma::OpCounters ins, CostOf([&]() -> absl::Status {
                       ASSIGN_OR_RETURN(bool added, ordered->Insert(k + 5, MakeValue(k + 5, 1)));
                       if (!added) return absl::InternalError(absl::StrCat("ordered map: key ", k + 5, " was present"));
                       return absl::OkStatus();
                     }));
    m[3].samples.push_back(ins);
  }
  if (ordered->stats().splits != splits) {
    return absl::InternalError("ordered map: a node split during the measured inserts, which the tests' figures exclude");
  }

  // Queue: `home`'s ring.
  for (uint64_t i = 0; i < kSamples; ++i) {
    ASSIGN_OR_RETURN(rdma::OpCounters enq, CostOf([&]() -> absl::Status {
                       ASSIGN_OR_RETURN(bool in, queue->Enqueue(home, MakeValue(i, 1)));
                       return in ? absl::OkStatus() : absl::InternalError("queue: the ring is full");
                     }));
    m[4].samples.push_back(enq);
  }
  for (uint64_t i = 0; i < kSamples; ++i) {
    ASSIGN_OR_RETURN(rdma::OpCounters deq, CostOf([&]() -> absl::Status {
                       ASSIGN_OR_RETURN(std::optional<Value32> v, queue->Dequeue(home));
                       return v.has_value() ? absl::OkStatus() : absl::InternalError("queue: the ring is empty");
                     }));
    m[5].samples.push_back(deq);
  }
  for (MeasuredCost& c : m) {
    c.ok = !c.samples.empty();
    for (const rdma::OpCounters& s : c.samples) c.ok = c.ok && Matches(c.expected, s);
  }
  return m;
}

void PrintCosts(std::FILE* out, const std::vector<MeasuredCost>& measured) {
  absl::FPrintF(out, "%-42s %-26s %-26s %s\n", "operation (uncontended, remote)", "measured NIC/db/RT/bytes",
                "expected NIC/db/RT/bytes", "");
  for (const MeasuredCost& c : measured) {
    // Every sample is shown when they differ; one when they agree.
    std::string got;
    for (size_t i = 0; i < c.samples.size(); ++i) {
      const rdma::OpCounters& s = c.samples[i];
      if (i > 0 && s == c.samples[0]) continue;
      absl::StrAppend(&got, got.empty() ? "" : " ", s.nic_ops, "/", s.doorbells, "/", s.round_trips, "/", s.bytes);
    }
    const ExpectedCost& e = c.expected;
    absl::FPrintF(out, "%-42s %-26s %-26s %s\n", e.op, got,
                  absl::StrCat(Figure(e.nic_ops), "/", Figure(e.doorbells), "/", Figure(e.round_trips), "/", Figure(e.bytes)),
                  c.ok ? "ok" : "DIFFERS");
  }
  absl::FPrintF(out, "(- : a figure the test does not assert; %d samples each; asserted by:", kSamples);
  std::string last;
  for (const MeasuredCost& c : measured) {
    if (c.expected.asserted_by != last) absl::FPrintF(out, "\n   %s", c.expected.asserted_by);
    last = c.expected.asserted_by;
  }
  absl::FPrintF(out, ")\n");
  std::fflush(out);
}

bool AllAsExpected(const std::vector<MeasuredCost>& measured) {
  for (const MeasuredCost& c : measured) {
    if (!c.ok) return false;
  }
  return !measured.empty();
}

}  // namespace bench::cluster
