#ifndef BENCH_CLUSTER_BENCH_WORKLOAD_H_
#define BENCH_CLUSTER_BENCH_WORKLOAD_H_

// cluster_bench's workload driver: the structures by name and their sizes,
// the key set every process agrees on, and the client thread (Worker) that
// loads its node's keys and runs a cell's operations.
//
//   const Sizing sizing = SizingFor(config, cluster.num_nodes());
//   ASSIGN_OR_RETURN(Structures st, OpenStructures(cluster, config, sizing));
//   KeySets keys = KeySets::Make(config, st, cluster);
//   Worker w(cluster, st, keys, config, sizing, node, /*index=*/0, /*global=*/0, &abort);
//   // on the worker's own thread, in order:
//   w.Start(); w.Preload();  // then, per cell: Prepare, Measure, Cleanup; at the end Stop
//
// Keys: --keys random 64-bit keys from --seed, the same in every process;
// each node loads the ones homed on it (the hash map by its hash placement,
// the ordered map by its equal key ranges), and then every client scans the
// ordered map once (ScanAll). A thread on node n draws keys
// (uniform or Zipf 0.99 over the keys' order) from all keys (--local=uniform)
// or, per operation, from those homed on n with probability P% and from
// those homed elsewhere otherwise (--local=P). Puts overwrite loaded keys;
// YCSB E inserts fresh keys (never loaded, homed by the same rule) from the
// thread's own list; when the list is used up the thread erases them in a
// pause that is not measured, and after the cell it erases what it inserted.
// Queue: each operation enqueues a value on a ring chosen by the same rule
// and then dequeues from that ring.
//
// Checks: a Get or Put that finds no value for a loaded key, a value that is
// not its key's, a Scan that does not start at its loaded key, an insert of a
// fresh key that finds it present, a full ring or an empty dequeue end the
// thread's run with an error (Internal), as does any operation's error.
// Every 8th operation's latency is timed (ThreadResult).

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "bench/cluster_bench_flags.h"
#include "bench/cluster_bench_results.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"
#include "structures/queue/queue.h"
#include "structures/skiplist/skiplist.h"

namespace bench::cluster {

// The value of every structure: 32 bytes that name their key (or, in the
// queue, themselves), so a wrong one is seen.
struct Value32 {
  uint64_t w[4];
};
Value32 MakeValue(uint64_t key, uint64_t seq);
bool ValueIsOf(const Value32& v, uint64_t key);

using Map = structures::HashMap<Value32>;
using Ordered = structures::SkipList<Value32>;
using Queue = structures::Queue<Value32>;

inline constexpr size_t kScanLength = 50;

// What every process computes alike from the flags and the node count.
struct Sizing {
  structures::HashMapOptions map;
  structures::SkipListOptions ordered;
  structures::QueueOptions queue;
  size_t fresh_per_thread = 0;  // YCSB E's fresh keys per thread before a recycling pause
  size_t named_bytes = 0;       // rdma::ClusterOptions::named_bytes
  size_t arena_bytes = 0;       // rdma::NodeOptions::arena_bytes
};
Sizing SizingFor(const Config& config, int num_nodes);

// The bytes a named structure's part takes in the named region (4 KiB
// pages), and the catalogue's own; what ClusterOptions::named_bytes must hold.
size_t NamedRegionBytes(const std::vector<size_t>& part_bytes);

// The selected structures, opened by name ("cluster_bench.<structure>").
struct Structures {
  std::optional<Map> map;
  std::optional<Ordered> ordered;
  std::optional<Queue> queue;
};
absl::StatusOr<Structures> OpenStructures(rdma::Cluster& cluster, const Config& config, const Sizing& sizing);

// The loaded keys, and per structure and local node those homed there and
// those homed elsewhere, each in the keys' (rank) order.
class KeySets {
 public:
  static KeySets Make(const Config& config, const Structures& st, const rdma::Cluster& cluster);
  const std::vector<uint64_t>& all() const { return all_; }
  bool loaded(uint64_t key) const { return set_.contains(key); }
  const std::vector<uint64_t>& homed_on(Structure s, rdma::NodeId n) const { return views_[Slot(s, n)].on; }
  const std::vector<uint64_t>& homed_off(Structure s, rdma::NodeId n) const { return views_[Slot(s, n)].off; }

 private:
  struct View {
    std::vector<uint64_t> on, off;
  };
  static size_t Slot(Structure s, rdma::NodeId n) { return 2 * static_cast<size_t>(n) + (s == Structure::kSkipList); }
  std::vector<uint64_t> all_;
  absl::flat_hash_set<uint64_t> set_;
  std::vector<View> views_;  // by Slot; empty for nodes of other processes
};

// One client thread on one node. Every method but the constructor runs on
// the thread that called Start.
class Worker {
 public:
  // `global` numbers the thread in the whole cluster (node * threads + index),
  // for seeds. `abort` is shared by the process's workers: set when one
  // fails, so the others end their run early.
  Worker(rdma::Cluster& cluster, const Structures& st, const KeySets& keys, const Config& config,
         const Sizing& sizing, rdma::NodeId node, int index, int global, std::atomic<bool>* abort);
  ~Worker();

  absl::Status Start();    // the thread's Session and a client per structure
  absl::Status Preload();  // this thread's share of the keys homed on its node
  // After every node's Preload: Scans the whole ordered map once, which
  // checks that it holds every loaded key and fills the client's leaf cache,
  // so that measured operations find remote leaves as a long-running client
  // does (not measured).
  absl::Status ScanAll();
  // Builds the cell's trace (and fresh keys), outside any measurement.
  absl::Status Prepare(const Cell& cell, int cell_index);
  ThreadResult Measure(const Cell& cell);
  absl::Status Cleanup(const Cell& cell);  // erases the fresh keys it inserted
  void Stop();                             // clients, then the Session

  rdma::NodeId node() const { return node_; }
  int index() const { return index_; }

 private:
  template <typename Op>
  ThreadResult TimedLoop(Op op);
  absl::Status MapOp(size_t j);
  absl::Status OrderedOp(size_t j);
  absl::Status QueueOp(size_t j);
  absl::Status InsertFresh();
  absl::Status EraseInserted();
  // A key homed per the share: `local` on this node, else on another.
  std::vector<uint64_t> FreshKeys(const LocalShare& share, size_t count, uint64_t seed) const;

  rdma::Cluster& cluster_;
  const Structures& st_;
  const KeySets& keys_;
  const Config& config_;
  const Sizing& sizing_;
  const rdma::NodeId node_;
  const int index_;
  const int global_;
  std::atomic<bool>* const abort_;

  std::unique_ptr<rdma::Session> session_;  // declared before the clients: destroyed after them
  std::unique_ptr<Map::Client> map_;
  std::unique_ptr<Ordered::Client> ordered_;
  std::unique_ptr<Queue::Client> queue_;

  // The cell's trace: per operation a key (queue: a home node) and a kind.
  std::vector<uint64_t> trace_keys_;
  std::vector<uint8_t> trace_ops_;
  std::vector<uint64_t> fresh_;     // YCSB E: fresh keys, used in order
  size_t next_fresh_ = 0;
  std::vector<uint64_t> inserted_;  // fresh keys inserted and not yet erased
  uint64_t seq_ = 0;                // distinguishes the values this thread writes
  double paused_s_ = 0;             // recycling pauses in the measured part of a run
  rdma::OpCounters paused_cost_;
};

}  // namespace bench::cluster

#endif  // BENCH_CLUSTER_BENCH_WORKLOAD_H_
