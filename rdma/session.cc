#include "rdma/session.h"

#include <algorithm>
#include <cstring>

#include "absl/base/optimization.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace rdma {

// ---------------------------------------------------------------- Batch

Batch::Batch(Session& session, NodeId target) : session_(session), target_(target) {
  if (session_.batch_open_) {
    error_ = absl::FailedPreconditionError("another Batch is open on this Session");
  } else if (target >= session_.qps_.size()) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("node ", target, " out of range (cluster has ", session_.qps_.size(), " nodes)"));
  } else {
    session_.batch_open_ = true;
    owns_session_ = true;
  }
}

Batch::~Batch() {
  if (owns_session_) session_.batch_open_ = false;
}

absl::StatusOr<uint32_t> Batch::RemoteKey(RemotePtr p, size_t len) {
  if (!error_.ok()) return error_;
  if (p.node() != target_) {
    error_ = absl::InvalidArgumentError(absl::StrCat("batch to node ", target_, " got a pointer on node ", p.node()));
    return error_;
  }
  auto rkey = session_.RkeyFor(p, len);
  if (!rkey.ok()) error_ = rkey.status();
  return rkey;
}

absl::Status Batch::Prepare(size_t len, size_t* scratch_offset) {
  if (!error_.ok()) return error_;
  if (len == 0 || len > UINT32_MAX) {
    return error_ = absl::InvalidArgumentError(absl::StrCat("transfer length ", len, " out of range"));
  }
  const size_t offset = (scratch_used_ + 7) & ~size_t{7};
  if (offset + len > session_.options_.scratch_bytes) {
    return error_ = absl::ResourceExhaustedError(
               absl::StrCat("batch needs more than the session's ", session_.options_.scratch_bytes,
                            "-byte scratch buffer; raise SessionOptions::scratch_bytes"));
  }
  scratch_used_ = offset + len;
  *scratch_offset = offset;
  return absl::OkStatus();
}

namespace {
WorkRequest MakeWr(Opcode op, uint64_t remote, uint32_t rkey, void* local, uint32_t lkey, size_t len) {
  WorkRequest wr;
  wr.opcode = op;
  wr.remote_addr = remote;
  wr.rkey = rkey;
  wr.local = local;
  wr.lkey = lkey;
  wr.length = static_cast<uint32_t>(len);
  return wr;
}
}  // namespace

Batch& Batch::Read(RemotePtr src, void* dst, size_t len) {
  size_t off;
  if (!Prepare(len, &off).ok()) return *this;
  auto rkey = RemoteKey(src, len);
  if (!rkey.ok()) return *this;
  char* local = session_.scratch_storage_.data() + off;
  WorkRequest wr = MakeWr(Opcode::kRead, src.address(), *rkey, local, session_.scratch_mr_->lkey(), len);
  wr.fence = std::exchange(fence_next_, false);
  wrs_.push_back(wr);
  copybacks_.push_back({dst, off, len});
  return *this;
}

Batch& Batch::Write(RemotePtr dst, const void* src, size_t len) {
  if (!error_.ok()) return *this;
  auto rkey = RemoteKey(dst, len);
  if (!rkey.ok()) return *this;
  // The payload is staged in scratch now, so the caller's buffer may die
  // before Execute. Small payloads go inline (the NIC copies them at post).
  size_t off;
  if (!Prepare(len, &off).ok()) return *this;
  char* local = session_.scratch_storage_.data() + off;
  std::memcpy(local, src, len);
  WorkRequest wr = MakeWr(Opcode::kWrite, dst.address(), *rkey, local, session_.scratch_mr_->lkey(), len);
  wr.inline_data = len <= session_.max_inline_;
  wr.fence = std::exchange(fence_next_, false);
  wrs_.push_back(wr);
  return *this;
}

Batch& Batch::CompareAndSwap(RemotePtr word, uint64_t expected, uint64_t desired, uint64_t* old_out) {
  size_t off;
  if (!Prepare(8, &off).ok()) return *this;
  auto rkey = RemoteKey(word, 8);
  if (!rkey.ok()) return *this;
  char* local = session_.scratch_storage_.data() + off;
  WorkRequest wr = MakeWr(Opcode::kCompareSwap, word.address(), *rkey, local, session_.scratch_mr_->lkey(), 8);
  wr.compare_add = expected;
  wr.swap = desired;
  wr.fence = std::exchange(fence_next_, false);
  wrs_.push_back(wr);
  copybacks_.push_back({old_out, off, 8});
  return *this;
}

Batch& Batch::FetchAndAdd(RemotePtr word, uint64_t add, uint64_t* old_out) {
  size_t off;
  if (!Prepare(8, &off).ok()) return *this;
  auto rkey = RemoteKey(word, 8);
  if (!rkey.ok()) return *this;
  char* local = session_.scratch_storage_.data() + off;
  WorkRequest wr = MakeWr(Opcode::kFetchAdd, word.address(), *rkey, local, session_.scratch_mr_->lkey(), 8);
  wr.compare_add = add;
  wr.fence = std::exchange(fence_next_, false);
  wrs_.push_back(wr);
  copybacks_.push_back({old_out, off, 8});
  return *this;
}

Batch& Batch::Fence() {
  fence_next_ = true;
  return *this;
}

absl::Status Batch::Execute() {
  if (!error_.ok()) return error_;
  if (wrs_.empty()) return absl::OkStatus();
  absl::Status s = session_.Post(target_, absl::MakeSpan(wrs_), /*wait=*/true);
  if (!s.ok()) return s;
  for (const Copyback& c : copybacks_) {
    if (c.dst != nullptr) std::memcpy(c.dst, session_.scratch_storage_.data() + c.scratch_offset, c.len);
  }
  return absl::OkStatus();
}

absl::Status Batch::PostWithoutWaiting() {
  if (!error_.ok()) return error_;
  for (const WorkRequest& wr : wrs_) {
    if (wr.opcode != Opcode::kWrite || !wr.inline_data) {
      return absl::InvalidArgumentError(
          "PostWithoutWaiting allows only inline WRITEs; use Execute for READs, atomics and large WRITEs");
    }
  }
  if (wrs_.empty()) return absl::OkStatus();
  return session_.Post(target_, absl::MakeSpan(wrs_), /*wait=*/false);
}

// ---------------------------------------------------------------- Session

Session::Session(Node& self, Connector& peers, const SessionOptions& options)
    : self_(self), peers_(peers), options_(options) {}

Session::~Session() {
  // Let in-flight WRs finish before their buffers and QPs go away.
  (void)Drain();
  for (size_t n = 0; n < qps_.size(); ++n) {
    qps_[n].qp.reset();
    ReleaseResponder(static_cast<NodeId>(n));
  }
}

void Session::ReleaseResponder(NodeId node) {
  PeerQp& p = qps_[node];
  if (p.responder.qp_num == 0) return;  // none held (never connected, or released)
  // Advisory: a dead or shut-down peer has nothing left to free, and a
  // process that replaced it never had this QP (its numbers may repeat).
  if (peers_.Incarnation(node) == p.incarnation) (void)peers_.Disconnect(node, p.responder);
  p.responder = QpEndpoint{};
}

absl::StatusOr<std::unique_ptr<Session>> Session::Create(Node& self, Connector& peers,
                                                         const SessionOptions& options) {
  if (self.is_shut_down()) return absl::UnavailableError(absl::StrCat("node ", self.id(), " is shut down"));
  if (options.scratch_bytes < 64 || options.max_send_wr == 0 || options.liveness_check <= std::chrono::nanoseconds::zero()) {
    return absl::InvalidArgumentError(
        "SessionOptions: scratch_bytes >= 64, max_send_wr > 0 and liveness_check > 0 required");
  }
  std::unique_ptr<Session> s(new Session(self, peers, options));
  s->max_inline_ = std::min(self.device().caps().max_inline_data, QpOptions{}.max_inline_data);
  auto cq = self.device().CreateCompletionQueue(static_cast<int>(options.max_send_wr) * 2);
  if (!cq.ok()) return cq.status();
  s->cq_ = std::move(*cq);
  s->scratch_storage_.assign(options.scratch_bytes, 0);
  auto mr = self.device().RegisterMemory(s->scratch_storage_.data(), options.scratch_bytes, kLocalWrite);
  if (!mr.ok()) return mr.status();
  s->scratch_mr_ = std::move(*mr);
  s->qps_.resize(peers.num_nodes());
  for (int n = 0; n < peers.num_nodes(); ++n) {
    // The incarnation first: if the node is readmitted as another process
    // between here and the connect, ConnectTo sees the change.
    s->qps_[n].incarnation = peers.Incarnation(static_cast<NodeId>(n));
    auto arena = peers.Arena(static_cast<NodeId>(n));
    if (!arena.ok()) return arena.status();
    s->qps_[n].arena = *arena;
    if (absl::Status st = s->ConnectTo(static_cast<NodeId>(n)); !st.ok()) {
      // A node already known dead leaves this session without a QP to it
      // (its operations fail with the connector's Unavailable), however the
      // connect failed; anything else fails.
      absl::Status alive = s->PeerAlive(static_cast<NodeId>(n));
      if (alive.ok()) return st;
      s->qps_[n].connect_error = alive;
    }
  }
  BindThisThreadToNode(self.id());
  return s;
}

absl::Status Session::ConnectTo(NodeId node) {
  QpOptions qo;
  qo.max_send_wr = options_.max_send_wr;
  qo.max_inline_data = max_inline_;
  auto qp = self_.device().CreateQueuePair(cq_.get(), qo);
  if (!qp.ok()) return qp.status();
  QpEndpoint mine = (*qp)->endpoint();
  mine.node = self_.id();
  auto theirs = peers_.Connect(node, mine);
  if (!theirs.ok()) {
    return absl::Status(theirs.status().code(),
                        absl::StrCat("connecting node ", self_.id(), " -> node ", node, ": ",
                                     theirs.status().message()));
  }
  PeerQp& p = qps_[node];
  p.responder = *theirs;  // ours to release from here on, even if Connect fails
  if (peers_.Incarnation(node) != p.incarnation) {
    // The node rejoined as another process while this connected: the QP
    // reaches the new process, but the session holds the old one's arena.
    // Free the new process's responder and install nothing.
    (void)peers_.Disconnect(node, p.responder);
    p.responder = QpEndpoint{};
    return PeerAlive(node);
  }
  if (absl::Status s = (*qp)->Connect(*theirs); !s.ok()) {
    ReleaseResponder(node);
    return s;
  }
  p.qp = std::move(*qp);
  p.last_completed = p.last_posted;
  p.inflight.clear();
  p.inflight_wrs = 0;
  p.deferred_error = absl::OkStatus();
  p.broken = false;
  return absl::OkStatus();
}

absl::Status Session::Reconnect(NodeId node) {
  if (node >= qps_.size()) return absl::InvalidArgumentError(absl::StrCat("no node ", node));
  // Discard the old QP's completions (its flushes) before its number can be
  // reused; every other QP's completions in the shared CQ are booked as
  // WaitFor books them (their errors kept for their nodes), not dropped.
  const bool had_qp = qps_[node].qp != nullptr;
  const uint32_t old_num = had_qp ? qps_[node].qp->qp_num() : 0;
  if (had_qp) (void)qps_[node].qp->Reset();
  Completion buf[16];
  for (int n; (n = cq_->Poll(absl::MakeSpan(buf))) > 0;) {
    for (int i = 0; i < n; ++i) {
      if (had_qp && buf[i].qp_num == old_num) continue;
      Account(buf[i], node, nullptr);
    }
  }
  qps_[node].qp.reset();
  ReleaseResponder(node);  // the peer's end of the old QP
  // Never to another process than the one this session reached.
  absl::Status s = peers_.Incarnation(node) == qps_[node].incarnation ? absl::OkStatus() : PeerAlive(node);
  if (s.ok()) s = ConnectTo(node);
  // ConnectTo installs a QP only on success; remember why there is none.
  qps_[node].connect_error = s;
  qps_[node].stand_in.reset();
  return s;
}

absl::Status Session::Repair(NodeId node) {
  if (node >= qps_.size()) return absl::InvalidArgumentError(absl::StrCat("no node ", node));
  if (!broken(node)) return absl::OkStatus();
  // An error still to be reported is not dropped: the next post says it.
  if (!qps_[node].deferred_error.ok()) return absl::OkStatus();
  // A dead peer, or another process now: nothing to reconnect to (and no
  // QP is created only to find that out).
  if (absl::Status alive = PeerAlive(node); !alive.ok()) return alive;
  return Reconnect(node);
}

absl::Status Session::NotConnectedError(NodeId node) const {
  if (absl::IsUnavailable(qps_[node].connect_error)) return qps_[node].connect_error;
  return absl::FailedPreconditionError(absl::StrCat("QP from node ", self_.id(), " to node ", node,
                                                    " is not connected (last Reconnect failed: ",
                                                    qps_[node].connect_error.ToString(),
                                                    "); call Reconnect again once the peer is back"));
}

namespace {
// Stands in for the QP of a peer whose Reconnect failed: Post fails with the
// session's explanation instead of the caller dereferencing a missing QP.
class DisconnectedQueuePair final : public QueuePair {
 public:
  explicit DisconnectedQueuePair(absl::Status why) : why_(std::move(why)) {}
  uint32_t qp_num() const override { return 0; }
  QpEndpoint endpoint() const override { return {}; }
  QpState state() const override { return QpState::kError; }
  absl::Status Connect(const QpEndpoint&) override { return why_; }
  absl::Status Reset() override { return absl::OkStatus(); }
  absl::Status Post(absl::Span<const WorkRequest>) override { return why_; }

 private:
  absl::Status why_;
};
}  // namespace

QueuePair& Session::queue_pair(NodeId node) {
  PeerQp& p = qps_[node];
  if (p.qp) return *p.qp;
  if (!p.stand_in) p.stand_in = std::make_unique<DisconnectedQueuePair>(NotConnectedError(node));
  return *p.stand_in;
}

absl::StatusOr<uint32_t> Session::RkeyFor(RemotePtr p, size_t len) const {
  if (p.node() >= qps_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("remote pointer ", absl::StrCat(p.raw()), " names node ", p.node(), " but the cluster has ",
                     qps_.size(), " nodes"));
  }
  const ArenaInfo& a = qps_[p.node()].arena;
  if (p.address() < a.base || len > a.length || p.address() - a.base > a.length - len) {
    return absl::OutOfRangeError(absl::StrCat("[0x", absl::Hex(p.address()), ", +", len,
                                              ") is outside node ", p.node(), "'s registered arena"));
  }
  return a.rkey;
}

absl::Status Session::Post(NodeId target, absl::Span<WorkRequest> wrs, bool wait) {
  if (absl::Status s = peers_.ServingStatus(); !s.ok()) return s;
  PeerQp& p = qps_[target];
  if (ABSL_PREDICT_FALSE(peers_.Incarnation(target) != p.incarnation)) return PeerAlive(target);
  if (!p.qp) return NotConnectedError(target);
  if (!p.deferred_error.ok()) return PeerError(target, std::exchange(p.deferred_error, absl::OkStatus()));
  if (wrs.size() > options_.max_send_wr) {
    return absl::InvalidArgumentError(absl::StrCat("chain of ", wrs.size(), " WRs exceeds the send queue (",
                                                   options_.max_send_wr, ")"));
  }
  // Make room in the send queue: slots free only when a signaled WR completes.
  while (p.inflight_wrs + wrs.size() > options_.max_send_wr) {
    if (absl::Status s = WaitFor(target, p.inflight.front().first); !s.ok()) return s;
  }
  OpCounters& counters = ThisThreadCounters();
  uint64_t bytes = 0;
  bool fenced = false;
  for (WorkRequest& wr : wrs) {
    wr.wr_id = next_wr_id_++;
    wr.signaled = false;
    bytes += wr.length;
    fenced = fenced || (wr.fence && wr.opcode != Opcode::kWrite);
  }
  wrs.back().signaled = true;
  const uint64_t last = wrs.back().wr_id;
  if (absl::Status s = p.qp->Post(wrs); !s.ok()) return PeerError(target, s);  // nothing posted, nothing counted
  if (fenced) p.fenced_rd_atomic = last;
  counters.bytes += bytes;
  counters.nic_ops += wrs.size();
  counters.doorbells += 1;
  p.last_posted = last;
  p.inflight.emplace_back(last, wrs.size());
  p.inflight_wrs += wrs.size();
  if (!wait) return absl::OkStatus();
  counters.round_trips += 1;
  return WaitFor(target, last);
}

void Session::AbandonQp(PeerQp& p) {
  p.broken = true;
  (void)p.qp->Reset();
  p.last_completed = p.last_posted;
  p.inflight.clear();
  p.inflight_wrs = 0;
}

absl::Status Session::WaitFor(NodeId target, uint64_t wr_id) {
  PeerQp& target_qp = qps_[target];
  const auto deadline = std::chrono::steady_clock::now() + options_.completion_timeout;
  absl::Status first_error;
  while (target_qp.last_completed < wr_id) {
    Completion buf[16];
    auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds::zero()) {
      // A known Soft-RoCE deadlock looks exactly like a stalled peer: say so.
      const bool fenced = target_qp.fenced_rd_atomic > target_qp.last_completed;
      // The QP is broken from here on (SessionOptions::completion_timeout):
      // its queued work requests must never run later, when a READ's or an
      // atomic's result would land in scratch bytes that a later operation
      // uses. Reset it (the soft NIC waits for a work request it is
      // executing; verbs moves it to ERR, then RESET); posts fail until
      // Reconnect, and nothing is waited for on it any more.
      AbandonQp(target_qp);
      return absl::DeadlineExceededError(absl::StrCat(
          "no completion within ", absl::FormatDuration(absl::FromChrono(options_.completion_timeout)),
          " on the QP from node ", self_.id(), " to node ", target, "; the NIC or the peer is stalled",
          fenced ? " (a fenced READ/atomic is outstanding on it: Soft-RoCE (rxe) never restarts a fenced "
                   "READ/atomic after a retransmission timeout, see tests/verbs/README.md \"rxe fence\")"
                 : ""));
    }
    int n = cq_->Wait(absl::MakeSpan(buf), options_.poll_mode, std::min<std::chrono::nanoseconds>(left, options_.liveness_check));
    for (int i = 0; i < n; ++i) Account(buf[i], target, &first_error);
    if (n == 0 && target_qp.last_completed < wr_id) {
      if (absl::Status alive = PeerAlive(target); !alive.ok()) {
        AbandonQp(target_qp);
        return absl::Status(alive.code(), absl::StrCat("waiting on node ", target, " from node ", self_.id(), ": ",
                                                       alive.message()));
      }
    }
  }
  if (first_error.ok() && !target_qp.deferred_error.ok()) {
    first_error = std::exchange(target_qp.deferred_error, absl::OkStatus());
  }
  return PeerError(target, first_error);
}

absl::Status Session::PeerError(NodeId target, absl::Status error) const {
  if (error.ok()) return error;
  // A dead peer's flushed or retried work says less than the connector does.
  if (absl::Status alive = PeerAlive(target); !alive.ok()) return alive;
  return error;
}

absl::Status Session::PeerAlive(NodeId target) const {
  if (absl::Status alive = peers_.PeerStatus(target); !alive.ok()) return alive;
  const uint64_t now = peers_.Incarnation(target);
  if (now == qps_[target].incarnation) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "node ", target, " is another process now (incarnation ", absl::Hex(now), "; this session reached ",
      absl::Hex(qps_[target].incarnation), "): its memory began empty when it rejoined; a new Session reaches it"));
}

void Session::Account(const Completion& c, NodeId target, absl::Status* target_error) {
  for (size_t node = 0; node < qps_.size(); ++node) {
    PeerQp& p = qps_[node];
    if (!p.qp || p.qp->qp_num() != c.qp_num) continue;
    if (c.status != CompletionStatus::kSuccess) {
      p.broken = true;  // the QP is in the error state now
      absl::Status err = CompletionToStatus(c);
      if (c.status == CompletionStatus::kRetryExceeded) peers_.ReportUnreachable(static_cast<NodeId>(node), err);
      if (node == target && target_error != nullptr) {
        if (target_error->ok()) *target_error = err;
      } else if (p.deferred_error.ok()) {
        p.deferred_error = err;
      }
    }
    if (c.wr_id > p.last_completed) p.last_completed = c.wr_id;
    while (!p.inflight.empty() && p.inflight.front().first <= p.last_completed) {
      p.inflight_wrs -= p.inflight.front().second;
      p.inflight.pop_front();
    }
  }
}

std::string Session::DescribeAddress(uint64_t address) const {
  const uint64_t scratch = reinterpret_cast<uintptr_t>(scratch_storage_.data());
  if (address >= scratch && address - scratch < scratch_storage_.size()) {
    return absl::StrCat("node ", self(), " session scratch buffer +0x", absl::Hex(address - scratch));
  }
  std::string arenas;
  for (size_t n = 0; n < qps_.size(); ++n) {
    const ArenaInfo& a = qps_[n].arena;
    if (address >= a.base && address - a.base < a.length) {
      return absl::StrCat("node ", n, "'s arena +0x", absl::Hex(address - a.base));
    }
    absl::StrAppend(&arenas, n == 0 ? "" : ", ", "node ", n, " [0x", absl::Hex(a.base), ", 0x",
                    absl::Hex(a.base + a.length), ")");
  }
  return absl::StrCat("none of: node ", self(), " session scratch [0x", absl::Hex(scratch), ", 0x",
                      absl::Hex(scratch + scratch_storage_.size()), "), arenas ", arenas);
}

absl::Status Session::Drain() {
  absl::Status result;
  for (size_t n = 0; n < qps_.size(); ++n) {
    if (!qps_[n].qp) continue;
    absl::Status s = WaitFor(static_cast<NodeId>(n), qps_[n].last_posted);
    if (result.ok()) result = s;
  }
  return result;
}

absl::Status Session::Read(RemotePtr src, void* dst, size_t len) {
  return Batch(*this, src.node()).Read(src, dst, len).Execute();
}

absl::Status Session::Write(RemotePtr dst, const void* src, size_t len) {
  return Batch(*this, dst.node()).Write(dst, src, len).Execute();
}

absl::StatusOr<uint64_t> Session::Read64(RemotePtr src) {
  uint64_t v = 0;
  if (absl::Status s = Read(src, &v, 8); !s.ok()) return s;
  return v;
}

absl::Status Session::Write64(RemotePtr dst, uint64_t value) { return Write(dst, &value, 8); }

absl::StatusOr<uint64_t> Session::CompareAndSwap(RemotePtr word, uint64_t expected, uint64_t desired) {
  uint64_t old = 0;
  if (absl::Status s = Batch(*this, word.node()).CompareAndSwap(word, expected, desired, &old).Execute();
      !s.ok()) {
    return s;
  }
  return old;
}

absl::StatusOr<uint64_t> Session::FetchAndAdd(RemotePtr word, uint64_t add) {
  uint64_t old = 0;
  if (absl::Status s = Batch(*this, word.node()).FetchAndAdd(word, add, &old).Execute(); !s.ok()) return s;
  return old;
}

}  // namespace rdma
