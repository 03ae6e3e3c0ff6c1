#include "testing/node_harness.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "rdma/cm/cm_connector.h"
#include "rdma/fabric.h"
#include "util/status_macros.h"

namespace rdma::testing {
namespace {

NodeOptions SmallNode() {
  NodeOptions o;
  o.arena_bytes = 4 << 20;
  return o;
}

// The collectives of several threads of one process, one rank per thread.
// Every wait is bounded; once a rank's body failed (Abort), every wait ends
// at once with Aborted, so the other ranks report instead of hanging.
class SharedRound {
 public:
  explicit SharedRound(int size) : size_(size), blobs_(size) {}
  absl::StatusOr<std::vector<std::string>> Exchange(int rank, absl::string_view blob) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!aborted_.ok()) return aborted_;
    const uint64_t round = round_;
    blobs_[rank] = std::string(blob);
    if (++arrived_ == size_) {
      result_ = blobs_;
      arrived_ = 0;
      ++round_;
      cv_.notify_all();
      return result_;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(180), [&] { return round_ != round || !aborted_.ok(); })) {
      return absl::DeadlineExceededError(absl::StrCat("rank ", rank, ": the other ranks did not reach collective ",
                                                      round, " within 180 s"));
    }
    if (round_ == round) return aborted_;
    return result_;
  }
  void Abort(int rank) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_.ok()) aborted_ = absl::AbortedError(absl::StrCat("node ", rank, "'s body failed"));
    cv_.notify_all();
  }

 private:
  const int size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> blobs_, result_;
  int arrived_ = 0;
  uint64_t round_ = 0;
  absl::Status aborted_;
};

class ThreadBootstrap final : public Bootstrap {
 public:
  ThreadBootstrap(SharedRound& round, int rank, int size) : round_(round), rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& job() const override { return job_; }
  absl::string_view kind() const override { return "threads"; }
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view blob) override {
    return round_.Exchange(rank_, blob);
  }
  absl::Status Barrier() override { return round_.Exchange(rank_, "").status(); }
  [[noreturn]] void Abort(int exit_code, absl::string_view reason) override {
    std::fprintf(stderr, "rank %d aborts: %.*s\n", rank_, static_cast<int>(reason.size()), reason.data());
    std::exit(exit_code);
  }

 private:
  SharedRound& round_;
  const int rank_, size_;
  const std::string job_ = "in-process";
};

// Every node of the process, reached by calling it directly.
class InProcessConnector final : public Connector {
 public:
  explicit InProcessConnector(const std::vector<std::unique_ptr<Node>>& nodes) : nodes_(nodes) {}
  int num_nodes() const override { return static_cast<int>(nodes_.size()); }
  absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator) override {
    return nodes_.at(target)->AcceptConnection(initiator);
  }
  absl::StatusOr<ArenaInfo> Arena(NodeId node) const override { return nodes_.at(node)->arena_info(); }
  absl::Status Disconnect(NodeId target, const QpEndpoint& responder) override {
    return nodes_.at(target)->ReleaseConnection(responder.qp_num);
  }

 private:
  const std::vector<std::unique_ptr<Node>>& nodes_;
};

// The body, then (if it succeeded) one more barrier, so no node tears down
// while another still works. A failed body skips it: its peers' next
// collective fails instead of pairing with the wrong one.
absl::Status RunBody(const NodeBody& body, Node& node, Connector& peers, Bootstrap& boot) {
  std::string where = "body";
  absl::Status st = util::Annotate(body(node, peers, boot, where), where);
  if (!st.ok()) return st;
  return util::Annotate(boot.Barrier(), "final barrier");
}

// This process's node of a job the environment describes.
void RunOnePerProcess(const NodeBody& body) {
  auto pn = OpenProcessNode();
  ASSERT_TRUE(pn.ok()) << pn.status();
  const int rank = pn->boot->rank();
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = RunBody(body, *pn->node, *pn->peers, *pn->boot);
  EXPECT_TRUE(st.ok()) << "node " << rank << ": " << st;
  std::printf("node %d (%s bootstrap, listening on %s) finished in %.2f s\n", rank,
              std::string(pn->boot->kind()).c_str(), pn->peers->listen_address().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

void RunAllInProcess(const NodeBody& body, int n) {
  const char* env = std::getenv("RDMADS_FABRICS");
  std::vector<std::string> backends = absl::StrSplit(env == nullptr ? "soft" : env, ',', absl::SkipEmpty());
  auto kind = ParseFabricKind(backends.empty() ? "soft" : backends[0]);
  ASSERT_TRUE(kind.ok()) << kind.status();
  FabricOptions fo;
  fo.kind = *kind;
  auto fabric = OpenFabric(fo);
  ASSERT_TRUE(fabric.ok()) << fabric.status();
  std::vector<std::unique_ptr<Node>> nodes;
  for (int id = 0; id < n; ++id) {
    auto dev = (*fabric)->OpenDevice(static_cast<NodeId>(id));
    ASSERT_TRUE(dev.ok()) << dev.status();
    auto node = Node::Create(static_cast<NodeId>(id), std::move(*dev), SmallNode());
    ASSERT_TRUE(node.ok()) << node.status();
    nodes.push_back(std::move(*node));
  }
  InProcessConnector peers(nodes);
  SharedRound round(n);
  std::vector<absl::Status> results(n);
  std::vector<std::thread> threads;
  for (int id = 1; id < n; ++id) {
    threads.emplace_back([&, id] {
      ThreadBootstrap boot(round, id, n);
      results[id] = RunBody(body, *nodes[id], peers, boot);
      if (!results[id].ok()) round.Abort(id);
    });
  }
  ThreadBootstrap boot0(round, 0, n);
  results[0] = RunBody(body, *nodes[0], peers, boot0);
  if (!results[0].ok()) round.Abort(0);
  for (auto& t : threads) t.join();
  for (int id = 0; id < n; ++id) EXPECT_TRUE(results[id].ok()) << "node " << id << ": " << results[id];
}

}  // namespace

absl::StatusOr<ProcessNode> OpenProcessNode(size_t arena_bytes) {
  ProcessNode pn;
  BootstrapOptions bo;
  bo.timeout = std::chrono::seconds(180);
  ASSIGN_OR_RETURN(pn.boot, Bootstrap::FromEnvironment(bo));
  const NodeId rank = static_cast<NodeId>(pn.boot->rank());
  FabricOptions fo;
  fo.kind = FabricKind::kVerbs;
  ASSIGN_OR_RETURN(pn.fabric, OpenFabric(fo));
  ASSIGN_OR_RETURN(auto dev, pn.fabric->OpenDevice(rank));
  NodeOptions no;
  no.arena_bytes = arena_bytes;
  ASSIGN_OR_RETURN(pn.node, Node::Create(rank, std::move(dev), no));
  ASSIGN_OR_RETURN(pn.peers, cm::CmConnector::Create(*pn.node, *pn.boot));
  return pn;
}

bool OneNodePerProcess() {
  return std::getenv("PMIX_NAMESPACE") != nullptr || std::getenv("RDMADS_COORDINATOR") != nullptr;
}

void RunNodes(const NodeBody& body, int in_process_nodes) {
  if (OneNodePerProcess()) {
    RunOnePerProcess(body);
  } else {
    RunAllInProcess(body, in_process_nodes);
  }
}

}  // namespace rdma::testing
