// Error paths, on every backend in RDMADS_FABRICS: each failure is a clear
// error completion, the QP goes to the error state, later WRs are flushed,
// posting to the broken QP is refused, and the process stays healthy.

#include <thread>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"
#include "rdma/cluster.h"
#include "testing/backends.h"

namespace rdma {
namespace {

class ErrorPaths : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    cluster_ = testing::MakeCluster(GetParam(), 2);
    ASSERT_NE(cluster_, nullptr);
    Node& n0 = cluster_->node(0);
    auto cq = n0.device().CreateCompletionQueue(64);
    ASSERT_TRUE(cq.ok());
    cq_ = std::move(*cq);
    auto qp = n0.device().CreateQueuePair(cq_.get(), {});
    ASSERT_TRUE(qp.ok());
    qp_ = std::move(*qp);
    auto remote = cluster_->Connect(1, qp_->endpoint());
    ASSERT_TRUE(remote.ok()) << remote.status();
    ASSERT_TRUE(qp_->Connect(*remote).ok());
    auto local = n0.device().RegisterMemory(buf_, sizeof buf_, kLocalWrite);
    ASSERT_TRUE(local.ok());
    local_mr_ = std::move(*local);
    target_ = *cluster_->node(1).Allocate(64);
    arena_ = cluster_->node(1).arena_info();
  }
  void TearDown() override {
    qp_.reset();
    cq_.reset();
    local_mr_.reset();
  }

  WorkRequest Wr(Opcode op, uint64_t wr_id, uint64_t remote_addr, uint32_t rkey, bool signaled = true) {
    WorkRequest wr;
    wr.opcode = op;
    wr.wr_id = wr_id;
    wr.local = buf_;
    wr.lkey = local_mr_->lkey();
    wr.length = 8;
    wr.remote_addr = remote_addr;
    wr.rkey = rkey;
    wr.signaled = signaled;
    return wr;
  }

  std::vector<Completion> Collect(int n) {
    std::vector<Completion> out;
    Completion c[8];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (static_cast<int>(out.size()) < n && std::chrono::steady_clock::now() < deadline) {
      int got = cq_->Wait(absl::MakeSpan(c), PollMode::kBusy, std::chrono::milliseconds(100));
      out.insert(out.end(), c, c + got);
    }
    return out;
  }

  // Posts `bad` followed by a signaled good READ; expects `status` for the
  // first and a flush for the second, the QP in error, and a refused post.
  void ExpectFailureAndFlush(const WorkRequest& bad, CompletionStatus status) {
    WorkRequest chain[2] = {bad, Wr(Opcode::kRead, 99, target_.address(), arena_.rkey)};
    chain[0].signaled = false;  // errors complete even when unsignaled
    ASSERT_TRUE(qp_->Post(chain).ok());
    std::vector<Completion> got = Collect(2);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0].wr_id, bad.wr_id);
    EXPECT_EQ(got[0].status, status) << CompletionStatusName(got[0].status);
    EXPECT_EQ(got[1].wr_id, 99u);
    EXPECT_EQ(got[1].status, CompletionStatus::kFlushed);
    EXPECT_EQ(qp_->state(), QpState::kError);

    absl::Status st = CompletionToStatus(got[0]);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(CompletionStatusName(status)), absl::string_view::npos) << st;

    WorkRequest again = Wr(Opcode::kRead, 100, target_.address(), arena_.rkey);
    absl::Status post = qp_->Post({&again, 1});
    EXPECT_EQ(post.code(), absl::StatusCode::kFailedPrecondition) << post;
    EXPECT_NE(absl::AsciiStrToLower(post.message()).find("error"), std::string::npos) << post;

    // The process is healthy: a fresh session still works.
    auto s = cluster_->NewSession(0);
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE((*s)->Write64(target_, 5).ok());
    EXPECT_EQ(*(*s)->Read64(target_), 5u);

    // And the broken QP recovers after Reset + Connect.
    ASSERT_TRUE(qp_->Reset().ok());
    Completion drain[8];
    while (cq_->Poll(absl::MakeSpan(drain)) > 0) {
    }
    auto remote = cluster_->Connect(1, qp_->endpoint());
    ASSERT_TRUE(remote.ok());
    ASSERT_TRUE(qp_->Connect(*remote).ok());
    WorkRequest ok = Wr(Opcode::kRead, 101, target_.address(), arena_.rkey);
    ASSERT_TRUE(qp_->Post({&ok, 1}).ok());
    std::vector<Completion> fine = Collect(1);
    ASSERT_EQ(fine.size(), 1u);
    EXPECT_EQ(fine[0].status, CompletionStatus::kSuccess);
  }

  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<QueuePair> qp_;
  std::unique_ptr<MemoryRegion> local_mr_;
  alignas(64) uint64_t buf_[8] = {};
  RemotePtr target_;
  ArenaInfo arena_;
};

TEST_P(ErrorPaths, BadRkeyIsARemoteAccessError) {
  ExpectFailureAndFlush(Wr(Opcode::kRead, 1, target_.address(), arena_.rkey ^ 0x5a5a), 
                        CompletionStatus::kRemoteAccessError);
}

TEST_P(ErrorPaths, OutOfBoundsIsARemoteAccessError) {
  ExpectFailureAndFlush(Wr(Opcode::kWrite, 2, arena_.base + arena_.length - 4, arena_.rkey),
                        CompletionStatus::kRemoteAccessError);
}

TEST_P(ErrorPaths, MissingRemotePermissionIsARemoteAccessError) {
  // A region on node 1 registered for remote READ only.
  alignas(8) static uint64_t read_only[8];
  auto mr = cluster_->node(1).device().RegisterMemory(read_only, sizeof read_only, kRemoteRead);
  ASSERT_TRUE(mr.ok());
  // READ is allowed...
  WorkRequest rd = Wr(Opcode::kRead, 3, reinterpret_cast<uint64_t>(read_only), (*mr)->rkey());
  ASSERT_TRUE(qp_->Post({&rd, 1}).ok());
  ASSERT_EQ(Collect(1).at(0).status, CompletionStatus::kSuccess);
  // ...an atomic is not.
  WorkRequest faa = Wr(Opcode::kFetchAdd, 4, reinterpret_cast<uint64_t>(read_only), (*mr)->rkey());
  ExpectFailureAndFlush(faa, CompletionStatus::kRemoteAccessError);
}

TEST_P(ErrorPaths, MissingLocalWriteIsALocalProtectionError) {
  alignas(8) static uint64_t no_local_write[8];
  auto mr = cluster_->node(0).device().RegisterMemory(no_local_write, sizeof no_local_write, kRemoteRead);
  ASSERT_TRUE(mr.ok());
  WorkRequest rd = Wr(Opcode::kRead, 5, target_.address(), arena_.rkey);
  rd.local = no_local_write;
  rd.lkey = (*mr)->lkey();
  ExpectFailureAndFlush(rd, CompletionStatus::kLocalProtectionError);
}

TEST_P(ErrorPaths, MisalignedAtomicIsRefusedAtPost) {
  // Real verbs (rxe, mlx5) reject it in ibv_post_send: nothing is posted, no
  // completion arrives, and the QP stays usable.
  WorkRequest cas = Wr(Opcode::kCompareSwap, 6, target_.address() + 4, arena_.rkey);
  WorkRequest chain[2] = {Wr(Opcode::kRead, 98, target_.address(), arena_.rkey, false), cas};
  absl::Status st = qp_->Post(chain);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  Completion c[4];
  EXPECT_EQ(cq_->Wait(absl::MakeSpan(c), PollMode::kBusy, std::chrono::milliseconds(50)), 0);
  EXPECT_EQ(qp_->state(), QpState::kReadyToSend);
  WorkRequest ok = Wr(Opcode::kRead, 7, target_.address(), arena_.rkey);
  ASSERT_TRUE(qp_->Post({&ok, 1}).ok());
  std::vector<Completion> got = Collect(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, CompletionStatus::kSuccess);
}

TEST_P(ErrorPaths, RemoteWriteWithoutLocalWriteCannotBeRegistered) {
  alignas(8) static uint64_t mem[8];
  auto mr = cluster_->node(1).device().RegisterMemory(mem, sizeof mem, kRemoteWrite);
  EXPECT_EQ(mr.status().code(), absl::StatusCode::kInvalidArgument) << mr.status();
}

TEST_P(ErrorPaths, PostingToAnUnconnectedQpIsRefused) {
  auto qp = cluster_->node(0).device().CreateQueuePair(cq_.get(), {});
  ASSERT_TRUE(qp.ok());
  WorkRequest rd = Wr(Opcode::kRead, 7, target_.address(), arena_.rkey);
  absl::Status s = (*qp)->Post({&rd, 1});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("RESET"), absl::string_view::npos) << s;
}

TEST_P(ErrorPaths, SessionRejectsPointersOutsideTheCluster) {
  auto s = cluster_->NewSession(0);
  ASSERT_TRUE(s.ok());
  uint64_t v;
  absl::Status bad_node = (*s)->Read(RemotePtr(7, arena_.base), &v, 8);
  EXPECT_EQ(bad_node.code(), absl::StatusCode::kInvalidArgument) << bad_node;
  absl::Status oob = (*s)->Read(RemotePtr(1, arena_.base + arena_.length), &v, 8);
  EXPECT_EQ(oob.code(), absl::StatusCode::kOutOfRange) << oob;
  EXPECT_NE(oob.message().find("arena"), absl::string_view::npos);
  // Nothing was posted, the session still works.
  EXPECT_TRUE((*s)->Write64(target_, 1).ok());
}

TEST_P(ErrorPaths, SessionReportsAndRecoversFromAnErrorCompletion) {
  auto s = cluster_->NewSession(0);
  ASSERT_TRUE(s.ok());
  // Knock the session's QP to node 1 back to RESET behind its back.
  ASSERT_TRUE((*s)->queue_pair(1).Reset().ok());
  absl::Status st = (*s)->Write64(target_, 3);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  ASSERT_TRUE((*s)->Reconnect(1).ok());
  EXPECT_TRUE((*s)->Write64(target_, 4).ok());
  EXPECT_EQ(*(*s)->Read64(target_), 4u);
}

INSTANTIATE_TEST_SUITE_P(Backends, ErrorPaths, ::testing::ValuesIn(testing::BackendsUnderTest()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace rdma
