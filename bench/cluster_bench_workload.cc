#include "bench/cluster_bench_workload.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "absl/random/distributions.h"
#include "absl/strings/str_cat.h"
#include "bench/zipf.h"
#include "rdma/op_counters.h"
#include "structures/common/catalogue.h"
#include "util/status_macros.h"

namespace bench::cluster {
namespace {

using Clock = std::chrono::steady_clock;

// A cell's trace is replayed in a loop: 2^18 operations (a power of two).
constexpr size_t kTraceLength = size_t{1} << 18;
// trace_ops_: the kind in the low bits, kLocalBit when the key (or ring) is
// homed on the thread's node.
enum Kind : uint8_t { kGet = 0, kPut = 1, kScan = 2, kInsert = 3, kEnqDeq = 4 };
constexpr uint8_t kKindMask = 7;
constexpr uint8_t kLocalBit = 0x80;

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

uint64_t Mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
  h ^= (c + 0x94d049bb133111ebull) * 0x2545f4914f6cdd1dull;
  return h ^ (h >> 31);
}

int PutPercent(Workload w) {
  switch (w) {
    case Workload::kA: return 50;
    case Workload::kB: return 5;
    case Workload::kE: return 5;  // inserts
    default: return 0;
  }
}

absl::Status Wrong(absl::string_view what, uint64_t key, rdma::NodeId home) {
  return absl::InternalError(absl::StrCat(what, " (key ", key, ", homed on node ", home, ")"));
}

}  // namespace

Value32 MakeValue(uint64_t key, uint64_t seq) { return Value32{{key, seq, ~key, key ^ (seq * 0xff51afd7ed558ccdull)}}; }

bool ValueIsOf(const Value32& v, uint64_t key) {
  return v.w[0] == key && v.w[2] == ~key && v.w[3] == (key ^ (v.w[1] * 0xff51afd7ed558ccdull));
}

// ------------------------------------------------------------------ sizing

size_t NamedRegionBytes(const std::vector<size_t>& part_bytes) {
  size_t total = RoundUp(structures::Catalogue::kBytes, 4096);
  for (size_t b : part_bytes) total += RoundUp(b, 4096);
  return total + 4096;
}

Sizing SizingFor(const Config& c, int num_nodes) {
  Sizing s;
  const double per_node = static_cast<double>(c.keys) / num_nodes;
  // A node's share of the keys, with room for the hash placement's spread.
  const double most = per_node * 1.1 + 64;
  // Hash map: 8-slot groups at 80% load, and room to grow to twice that.
  s.map.groups_per_node = static_cast<size_t>(std::ceil(most / (8 * 0.8))) + 8;
  s.map.max_groups_per_node = 2 * s.map.groups_per_node;
  // YCSB E: each thread's fresh keys between recycling pauses.
  s.fresh_per_thread = static_cast<size_t>(std::clamp(per_node / (4 * c.threads), 256.0, 4096.0));
  // Ordered map: wide nodes at least half full (8 of 16 keys) after splits,
  // with half again for the nodes erasures leave emptier; a node receives
  // about as many fresh keys as its own threads insert.
  const double fresh_here = 1.5 * static_cast<double>(s.fresh_per_thread) * c.threads;
  const double nodes = std::ceil((most + fresh_here) / 8 * 1.5) + 64;
  s.ordered.part_bytes = static_cast<uint64_t>(nodes) * Ordered::kNodeBytes + (uint64_t{64} << 10);
  // A client remembers every leaf of every part (16 bytes each).
  s.ordered.cache_entries = static_cast<size_t>(nodes + 128) * static_cast<size_t>(num_nodes);
  // Queue: a ring holds at most one value per thread of the cluster.
  s.queue.capacity = std::max<uint64_t>(1024, 2 * static_cast<uint64_t>(num_nodes) * c.threads);
  std::vector<size_t> parts;
  for (Structure st : c.structures) {
    if (st == Structure::kHashMap) parts.push_back(Map::PartBytes(s.map));
    if (st == Structure::kSkipList) parts.push_back(s.ordered.part_bytes);
    if (st == Structure::kQueue) parts.push_back(Queue::PartBytes(s.queue));
  }
  s.named_bytes = NamedRegionBytes(parts);
  // The arena holds each client's lock descriptor lines.
  s.arena_bytes = (size_t{8} << 20) + static_cast<size_t>(c.threads) * 8192;
  return s;
}

absl::StatusOr<Structures> OpenStructures(rdma::Cluster& cluster, const Config& c, const Sizing& s) {
  Structures st;
  for (Structure which : c.structures) {
    if (which == Structure::kHashMap) {
      ASSIGN_OR_RETURN(st.map, Map::Open(cluster, "cluster_bench.hash_map", s.map));
    } else if (which == Structure::kSkipList) {
      ASSIGN_OR_RETURN(st.ordered, Ordered::Open(cluster, "cluster_bench.skiplist", s.ordered));
    } else {
      ASSIGN_OR_RETURN(st.queue, Queue::Open(cluster, "cluster_bench.queue", s.queue));
    }
  }
  return st;
}

// ------------------------------------------------------------------- keys

KeySets KeySets::Make(const Config& c, const Structures& st, const rdma::Cluster& cluster) {
  KeySets k;
  k.all_ = MakeKeys(c.keys, c.seed, [](uint64_t) { return true; });
  k.set_.insert(k.all_.begin(), k.all_.end());
  k.views_.resize(2 * static_cast<size_t>(cluster.num_nodes()));
  for (rdma::Node* node : cluster.local_nodes()) {
    const rdma::NodeId n = node->id();
    View& map = k.views_[Slot(Structure::kHashMap, n)];
    View& ordered = k.views_[Slot(Structure::kSkipList, n)];
    for (uint64_t key : k.all_) {
      if (st.map) (st.map->HomeOf(key) == n ? map.on : map.off).push_back(key);
      if (st.ordered) (st.ordered->HomeOf(key) == n ? ordered.on : ordered.off).push_back(key);
    }
  }
  return k;
}

// ----------------------------------------------------------------- Worker

Worker::Worker(rdma::Cluster& cluster, const Structures& st, const KeySets& keys, const Config& config,
               const Sizing& sizing, rdma::NodeId node, int index, int global, std::atomic<bool>* abort)
    : cluster_(cluster), st_(st), keys_(keys), config_(config), sizing_(sizing), node_(node), index_(index),
      global_(global), abort_(abort) {}

Worker::~Worker() = default;

absl::Status Worker::Start() {
  rdma::SessionOptions so;
  so.poll_mode = config_.poll;
  ASSIGN_OR_RETURN(session_, cluster_.ThisThread(node_, so));
  if (st_.map) {
    ASSIGN_OR_RETURN(map_, st_.map->NewClient(*session_));
  }
  if (st_.ordered) {
    ASSIGN_OR_RETURN(ordered_, st_.ordered->NewClient(*session_));
  }
  if (st_.queue) {
    ASSIGN_OR_RETURN(queue_, st_.queue->NewClient(*session_));
  }
  return absl::OkStatus();
}

void Worker::Stop() {
  queue_.reset();
  ordered_.reset();
  map_.reset();
  session_.reset();
}

absl::Status Worker::Preload() {
  const size_t step = static_cast<size_t>(config_.threads);
  if (map_) {
    const std::vector<uint64_t>& mine = keys_.homed_on(Structure::kHashMap, node_);
    for (size_t i = static_cast<size_t>(index_); i < mine.size(); i += step) {
      ASSIGN_OR_RETURN(std::optional<Value32> prev, map_->Put(mine[i], MakeValue(mine[i], 0)));
      if (prev.has_value()) return Wrong("hash map: a key was loaded twice", mine[i], node_);
    }
  }
  if (ordered_) {
    const std::vector<uint64_t>& mine = keys_.homed_on(Structure::kSkipList, node_);
    for (size_t i = static_cast<size_t>(index_); i < mine.size(); i += step) {
      ASSIGN_OR_RETURN(bool added, ordered_->Insert(mine[i], MakeValue(mine[i], 0)));
      if (!added) return Wrong("ordered map: a key was loaded twice", mine[i], node_);
    }
  }
  return absl::OkStatus();
}

absl::Status Worker::ScanAll() {
  if (!ordered_) return absl::OkStatus();
  constexpr size_t kChunk = 1024;
  uint64_t from = 0, seen = 0;
  for (;;) {
    absl::StatusOr<std::vector<std::pair<uint64_t, Value32>>> got = ordered_->Scan(from, kChunk);
    if (!got.ok()) return util::Annotate(got.status(), absl::StrCat("ordered map Scan from ", from));
    for (const auto& [k, v] : *got) {
      if (!ValueIsOf(v, k) || !keys_.loaded(k)) {
        return Wrong("ordered map: a Scan met a key never loaded, or another key's value", k, st_.ordered->HomeOf(k));
      }
    }
    seen += got->size();
    if (got->size() < kChunk || got->back().first == ~uint64_t{0}) break;
    from = got->back().first + 1;
  }
  if (seen != keys_.all().size()) {
    return absl::InternalError(absl::StrCat("ordered map: a Scan of the whole map found ", seen, " keys of the ",
                                            keys_.all().size(), " loaded"));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> Worker::FreshKeys(const LocalShare& share, size_t count, uint64_t seed) const {
  std::mt19937_64 gen(seed);
  absl::flat_hash_set<uint64_t> taken;
  std::vector<uint64_t> out;
  out.reserve(count);
  while (out.size() < count) {
    const bool on = share.uniform ? false : absl::Uniform<int>(gen, 0, 100) < share.percent;
    for (;;) {
      const uint64_t k = gen();
      if (k == 0 || k == ~uint64_t{0} || keys_.loaded(k) || taken.contains(k)) continue;
      if (!share.uniform && (st_.ordered->HomeOf(k) == node_) != on) continue;
      taken.insert(k);
      out.push_back(k);
      break;
    }
  }
  return out;
}

absl::Status Worker::Prepare(const Cell& cell, int cell_index) {
  std::mt19937_64 gen(Mix(config_.seed, static_cast<uint64_t>(cell_index), static_cast<uint64_t>(global_)));
  trace_keys_.resize(kTraceLength);
  trace_ops_.resize(kTraceLength);
  const int nodes = cluster_.num_nodes();
  const LocalShare& share = cell.local;
  if (cell.structure == Structure::kQueue) {
    for (size_t i = 0; i < kTraceLength; ++i) {
      rdma::NodeId home;
      if (share.uniform) {
        home = static_cast<rdma::NodeId>(absl::Uniform<int>(gen, 0, nodes));
      } else if (absl::Uniform<int>(gen, 0, 100) < share.percent) {
        home = node_;
      } else {
        home = static_cast<rdma::NodeId>(absl::Uniform<int>(gen, 0, nodes - 1));
        if (home >= node_) ++home;
      }
      trace_keys_[i] = home;
      trace_ops_[i] = kEnqDeq | (home == node_ ? kLocalBit : 0);
    }
    return absl::OkStatus();
  }
  const std::vector<uint64_t>& all = keys_.all();
  const std::vector<uint64_t>& on = keys_.homed_on(cell.structure, node_);
  const std::vector<uint64_t>& off = keys_.homed_off(cell.structure, node_);
  std::optional<RankSampler> from_all, from_on, from_off;
  if (share.uniform) from_all.emplace(cell.dist, all.size());
  if (!share.uniform && share.percent > 0) {
    if (on.empty()) return absl::FailedPreconditionError(absl::StrCat("no key is homed on node ", node_, "; raise --keys"));
    from_on.emplace(cell.dist, on.size());
  }
  if (!share.uniform && share.percent < 100) {
    if (off.empty()) return absl::FailedPreconditionError(absl::StrCat("every key is homed on node ", node_));
    from_off.emplace(cell.dist, off.size());
  }
  auto home_of = [&](uint64_t k) {
    return cell.structure == Structure::kHashMap ? st_.map->HomeOf(k) : st_.ordered->HomeOf(k);
  };
  const int put = PutPercent(cell.workload);
  const bool e = cell.workload == Workload::kE;
  for (size_t i = 0; i < kTraceLength; ++i) {
    uint64_t key;
    bool local;
    if (share.uniform) {
      key = all[(*from_all)(gen)];
      local = home_of(key) == node_;
    } else {
      local = absl::Uniform<int>(gen, 0, 100) < share.percent;
      key = local ? on[(*from_on)(gen)] : off[(*from_off)(gen)];
    }
    const bool write = absl::Uniform<int>(gen, 0, 100) < put;
    trace_keys_[i] = key;
    trace_ops_[i] = static_cast<uint8_t>((e ? (write ? kInsert : kScan) : (write ? kPut : kGet)) | (local ? kLocalBit : 0));
  }
  if (e) {
    fresh_ = FreshKeys(share, sizing_.fresh_per_thread, Mix(config_.seed + 1, static_cast<uint64_t>(cell_index), global_));
    next_fresh_ = 0;
  }
  return absl::OkStatus();
}

template <typename Op>
ThreadResult Worker::TimedLoop(Op op) {
  ThreadResult r;
  const Clock::time_point start = Clock::now();
  const Clock::time_point measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                                     std::chrono::duration<double>(config_.warmup));
  const Clock::time_point end = measure_from + std::chrono::duration_cast<Clock::duration>(
                                                   std::chrono::duration<double>(config_.seconds));
  bool measuring = false;
  Clock::time_point measured_since{};
  rdma::OpCounters before;
  for (size_t i = 0;; ++i) {
    const size_t j = i & (kTraceLength - 1);
    const bool sample = (i & 7) == 0;
    Clock::time_point t0{};
    if (sample) {
      t0 = Clock::now();
      if (!measuring && t0 >= measure_from) {
        measuring = true;
        measured_since = t0;
        before = rdma::ThisThreadCounters();
        paused_s_ = 0;
        paused_cost_ = {};
      }
      if (t0 >= end || abort_->load(std::memory_order_relaxed)) break;
    }
    bool local = (trace_ops_[j] & kLocalBit) != 0;
    if (absl::Status s = op(j, &local); !s.ok()) {
      r.status = s;
      abort_->store(true, std::memory_order_relaxed);
      break;
    }
    if (measuring) {
      ++r.ops;
      r.local_ops += local;
      if (sample) r.latency.Add(static_cast<uint64_t>(std::chrono::nanoseconds(Clock::now() - t0).count()));
    }
  }
  if (measuring) {
    r.seconds = std::chrono::duration<double>(Clock::now() - measured_since).count() - paused_s_;
    r.cost = rdma::ThisThreadCounters() - before - paused_cost_;
  }
  return r;
}

absl::Status Worker::MapOp(size_t j) {
  const uint64_t key = trace_keys_[j];
  absl::StatusOr<std::optional<Value32>> v = (trace_ops_[j] & kKindMask) == kGet
                                                 ? map_->Get(key)
                                                 : map_->Put(key, MakeValue(key, ++seq_));
  if (!v.ok()) return util::Annotate(v.status(), absl::StrCat("hash map op on key ", key));
  if (!v->has_value()) return Wrong("hash map: a loaded key has no value", key, st_.map->HomeOf(key));
  if (!ValueIsOf(**v, key)) return Wrong("hash map: a key's value is another key's", key, st_.map->HomeOf(key));
  return absl::OkStatus();
}

absl::Status Worker::OrderedOp(size_t j) {
  const uint64_t key = trace_keys_[j];
  const uint8_t kind = trace_ops_[j] & kKindMask;
  if (kind == kScan) {
    absl::StatusOr<std::vector<std::pair<uint64_t, Value32>>> got = ordered_->Scan(key, kScanLength);
    if (!got.ok()) return util::Annotate(got.status(), absl::StrCat("ordered map Scan from ", key));
    if (got->empty() || got->front().first != key) {
      return Wrong("ordered map: a Scan from a loaded key did not start at it", key, st_.ordered->HomeOf(key));
    }
    for (const auto& [k, v] : *got) {
      if (!ValueIsOf(v, k)) return Wrong("ordered map: a Scan returned another key's value", k, st_.ordered->HomeOf(k));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::optional<Value32>> v =
      kind == kGet ? ordered_->Get(key) : ordered_->Put(key, MakeValue(key, ++seq_));
  if (!v.ok()) return util::Annotate(v.status(), absl::StrCat("ordered map op on key ", key));
  if (!v->has_value()) return Wrong("ordered map: a loaded key has no value", key, st_.ordered->HomeOf(key));
  if (!ValueIsOf(**v, key)) return Wrong("ordered map: a key's value is another key's", key, st_.ordered->HomeOf(key));
  return absl::OkStatus();
}

absl::Status Worker::InsertFresh() {
  if (next_fresh_ == fresh_.size()) {
    // Every fresh key is in: erase them (not measured) and use them again.
    const Clock::time_point t0 = Clock::now();
    const rdma::OpCounters c0 = rdma::ThisThreadCounters();
    RETURN_IF_ERROR(EraseInserted());
    paused_cost_ += rdma::ThisThreadCounters() - c0;
    paused_s_ += std::chrono::duration<double>(Clock::now() - t0).count();
    next_fresh_ = 0;
  }
  const uint64_t key = fresh_[next_fresh_++];
  absl::StatusOr<bool> added = ordered_->Insert(key, MakeValue(key, ++seq_));
  if (!added.ok()) return util::Annotate(added.status(), absl::StrCat("ordered map Insert of ", key));
  if (!*added) return Wrong("ordered map: a fresh key was already present", key, st_.ordered->HomeOf(key));
  inserted_.push_back(key);
  return absl::OkStatus();
}

absl::Status Worker::EraseInserted() {
  for (uint64_t key : inserted_) {
    absl::StatusOr<std::optional<Value32>> gone = ordered_->Erase(key);
    if (!gone.ok()) return util::Annotate(gone.status(), absl::StrCat("ordered map Erase of ", key));
    if (!gone->has_value()) return Wrong("ordered map: an inserted key was gone", key, st_.ordered->HomeOf(key));
  }
  inserted_.clear();
  return absl::OkStatus();
}

absl::Status Worker::QueueOp(size_t j) {
  const auto home = static_cast<rdma::NodeId>(trace_keys_[j]);
  const uint64_t id = uint64_t{static_cast<uint32_t>(global_)} << 40 | ++seq_;
  absl::StatusOr<bool> in = queue_->Enqueue(home, MakeValue(id, seq_));
  if (!in.ok()) return util::Annotate(in.status(), absl::StrCat("Enqueue on node ", home));
  if (!*in) return absl::InternalError(absl::StrCat("queue: node ", home, "'s ring is full"));
  absl::StatusOr<std::optional<Value32>> out = queue_->Dequeue(home);
  if (!out.ok()) return util::Annotate(out.status(), absl::StrCat("Dequeue on node ", home));
  if (!out->has_value()) {
    return absl::InternalError(absl::StrCat("queue: node ", home, "'s ring was empty right after an enqueue to it"));
  }
  if (!ValueIsOf(**out, (*out)->w[0])) return absl::InternalError(absl::StrCat("queue: a malformed value from node ", home));
  return absl::OkStatus();
}

ThreadResult Worker::Measure(const Cell& cell) {
  switch (cell.structure) {
    case Structure::kHashMap:
      return TimedLoop([this](size_t j, bool*) { return MapOp(j); });
    case Structure::kSkipList:
      return TimedLoop([this](size_t j, bool* local) {
        if ((trace_ops_[j] & kKindMask) != kInsert) return OrderedOp(j);
        // The fresh key's home, not the trace key's, says where an insert went.
        const uint64_t key = fresh_.empty() ? 0 : fresh_[next_fresh_ % fresh_.size()];
        *local = st_.ordered->HomeOf(key) == node_;
        return InsertFresh();
      });
    case Structure::kQueue:
      return TimedLoop([this](size_t j, bool*) { return QueueOp(j); });
  }
  ThreadResult r;
  r.status = absl::InternalError("unknown structure");
  return r;
}

absl::Status Worker::Cleanup(const Cell& cell) {
  if (cell.workload != Workload::kE) return absl::OkStatus();
  return EraseInserted();
}

}  // namespace bench::cluster
