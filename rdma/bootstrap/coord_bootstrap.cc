#include "rdma/bootstrap/coord_bootstrap.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rdma/coord/internal/zk_client.h"
#include "rdma/coord/membership.h"

namespace rdma::bootstrap {
namespace {

using coord::internal::NodeKind;
using coord::internal::ZkClient;
using Clock = std::chrono::steady_clock;

constexpr auto kPoll = std::chrono::milliseconds(20);
// The bootstrap's own session: long, since it fences nothing; a killed
// process's stale claims last this long.
constexpr auto kSession = std::chrono::milliseconds(10'000);

std::string RankName(int r) { return absl::StrFormat("%06d", r); }

class CoordBootstrap final : public Bootstrap {
 public:
  CoordBootstrap(CoordConfig c, BootstrapOptions o) : c_(std::move(c)), o_(o) {
    std::random_device rd;
    while (inc_ == 0) inc_ = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    root_ = "/rdmads/" + c_.job + "/boot";
  }

  absl::Status Start() {
    auto zk = ZkClient::Connect(c_.ensemble, kSession, o_.timeout);
    if (!zk.ok()) return zk.status();
    zk_ = *std::move(zk);
    // A running job (another rank's member registered) takes this process
    // back through the membership when it may rejoin; the rendezvous is
    // only for a start.
    if (c_.rejoin != RejoinMode::kNever) {
      absl::StatusOr<bool> running = coord::Membership::Running(*zk_, c_.job, static_cast<uint32_t>(c_.rank));
      if (!running.ok()) return running.status();
      if (*running) {
        rejoining_ = true;
        return absl::OkStatus();
      }
      if (c_.rejoin == RejoinMode::kAlways) {
        return absl::FailedPreconditionError(absl::StrCat(
            "RDMADS_REJOIN=1, but job '", c_.job, "' does not run: no other rank is a member of it; start it "
            "without RDMADS_REJOIN (or with RDMADS_REJOIN=auto)"));
      }
    }
    if (absl::Status s = zk_->EnsurePath(root_ + "/arrive"); !s.ok()) return s;
    if (absl::Status s = CreateWaitingOutStale(root_ + "/arrive/" + RankName(c_.rank),
                                               absl::StrFormat("%016x", inc_), "rank's claim");
        !s.ok()) {
      return s;
    }
    // Holding the claim, this process is the only live one of its rank: what
    // round nodes of its rank are left are an earlier run's.
    auto dirs = zk_->Children(root_, false);
    if (!dirs.ok()) return dirs.status();
    for (const std::string& d : *dirs) {
      if (d.rfind("round-", 0) != 0) continue;
      absl::Status del = zk_->Delete(absl::StrCat(root_, "/", d, "/", RankName(c_.rank)));
      if (!del.ok() && !absl::IsNotFound(del)) return del;
    }
    return absl::OkStatus();
  }

  int rank() const override { return c_.rank; }
  int size() const override { return c_.size; }
  const std::string& job() const override { return c_.job; }
  absl::string_view kind() const override { return "coordinator"; }
  bool rejoining() const override { return rejoining_; }

  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view blob) override {
    if (rejoining_) {
      return absl::FailedPreconditionError(absl::StrCat(
          "rank ", c_.rank, " rejoined job '", c_.job, "' while it runs: the job's collectives are over"));
    }
    if (!failed_.ok()) return absl::FailedPreconditionError(absl::StrCat("bootstrap failed earlier: ", failed_.message()));
    if (blob.size() > kMaxBlobBytes) {
      return absl::InvalidArgumentError(absl::StrCat("AllGather: blob of ", blob.size(), " bytes, at most ", kMaxBlobBytes));
    }
    auto r = Round(blob);
    if (!r.ok()) failed_ = r.status();
    return r;
  }

  absl::Status Barrier() override { return AllGather("").status(); }

  [[noreturn]] void Abort(int exit_code, absl::string_view reason) override {
    std::fprintf(stderr, "rdmads: rank %d aborts the job: %.*s\n", c_.rank, static_cast<int>(reason.size()),
                 reason.data());
    if (zk_ != nullptr) {
      // "<incarnation> <rank>: <reason>"; ephemeral: gone with this process's session.
      auto made = zk_->Create(root_ + "/abort", absl::StrFormat("%016x %d: %s", inc_, c_.rank, reason),
                              NodeKind::kEphemeral);
      if (!made.ok()) std::fprintf(stderr, "rdmads: could not tell the others: %s\n", made.status().ToString().c_str());
    }
    std::fflush(stderr);
    std::_Exit(exit_code);
  }

 private:
  // Creates the ephemeral `path`; while another process's node is there,
  // waits for its session to end (bounded).
  absl::Status CreateWaitingOutStale(const std::string& path, const std::string& data, const char* what) {
    const auto deadline = Clock::now() + o_.timeout;
    for (;;) {
      auto made = zk_->Create(path, data, NodeKind::kEphemeral);
      if (made.ok()) return absl::OkStatus();
      if (!absl::IsAlreadyExists(made.status())) return made.status();
      if (Clock::now() >= deadline) {
        auto holder = zk_->Get(path, false);
        return absl::FailedPreconditionError(absl::StrCat(
            "coordinator bootstrap: the ", what, " ", path, " is held by another live process (incarnation ",
            holder.ok() ? holder->bytes.substr(0, 16) : "?", ") for ", o_.timeout.count(),
            " ms: two processes were started as rank ", c_.rank, " of job '", c_.job, "'"));
      }
      std::this_thread::sleep_for(kPoll);
    }
  }

  absl::StatusOr<std::vector<std::string>> Round(absl::string_view blob) {
    const std::string dir = absl::StrFormat("%s/round-%010d", root_, round_);
    const auto deadline = Clock::now() + o_.timeout;
    std::vector<std::string> out(static_cast<size_t>(c_.size));
    std::vector<bool> have(static_cast<size_t>(c_.size), false);
    if (claims_.empty()) claims_.assign(static_cast<size_t>(c_.size), "");
    bool written = false;
    absl::Status last;  // the coordinator's last transient error
    for (;;) {
      const uint64_t seen = zk_->changes();
      absl::Status s = written ? Collect(dir, out, have) : Write(dir, blob);
      if (s.ok() && !written) {
        written = true;
        continue;
      }
      if (!s.ok() && !absl::IsUnavailable(s)) return s;
      last = s;
      if (written && std::find(have.begin(), have.end(), false) == have.end()) break;
      if (Clock::now() >= deadline) {
        std::string who;
        for (int r = 0; r < c_.size; ++r) {
          if (!have[r]) absl::StrAppend(&who, who.empty() ? "" : ", ", r);
        }
        return absl::DeadlineExceededError(absl::StrCat(
            "coordinator bootstrap: collective ", round_, " of job '", c_.job, "' still misses rank(s) ", who,
            " after ", o_.timeout.count(), " ms (did they start, with RDMADS_NODES=", c_.size,
            " and RDMADS_COORDINATOR=", c_.ensemble, "?)", last.ok() ? "" : absl::StrCat("; ", last.message())));
      }
      zk_->WaitForChange(seen, std::min(deadline, Clock::now() + std::chrono::milliseconds(200)));
    }
    // Everyone wrote this round, so everyone finished reading the one
    // before it: that round's node can go (one left behind is deleted when
    // this rank is next claimed).
    if (round_ >= 1) {
      absl::Status del = zk_->Delete(absl::StrFormat("%s/round-%010d/%s", root_, round_ - 1, RankName(c_.rank)));
      if (!del.ok() && !absl::IsNotFound(del)) {
        std::fprintf(stderr, "rdmads: coordinator bootstrap: leaving collective %d's node behind: %s\n", round_ - 1,
                     del.ToString().c_str());
      }
    }
    ++round_;
    return out;
  }

  // Persistent: a rank that finishes the last collective and exits must not
  // take its blob away from a slower one.
  absl::Status Write(const std::string& dir, absl::string_view blob) {
    if (absl::Status s = zk_->EnsurePath(dir); !s.ok()) return s;
    auto made = zk_->Create(dir + "/" + RankName(c_.rank), absl::StrCat(absl::StrFormat("%016x", inc_), blob),
                            NodeKind::kPersistent);
    // AlreadyExists: a retry after a connection loss whose create landed.
    return made.ok() || absl::IsAlreadyExists(made.status()) ? absl::OkStatus() : made.status();
  }

  // Reads every rank's node of `dir` that names the incarnation holding that
  // rank's claim; Aborted if a process of this run aborted.
  absl::Status Collect(const std::string& dir, std::vector<std::string>& out, std::vector<bool>& have) {
    auto aborted = zk_->Exists(root_ + "/abort", /*watch=*/true);
    if (!aborted.ok()) return aborted.status();
    if (*aborted) {
      auto a = zk_->Get(root_ + "/abort", false);
      if (!a.ok() && !absl::IsNotFound(a.status())) return a.status();
      int r = -1;
      if (a.ok() && a->bytes.size() > 17 && absl::SimpleAtoi(a->bytes.substr(17, a->bytes.find(':') - 17), &r) &&
          r >= 0 && r < c_.size && Claim(r).value_or("") == a->bytes.substr(0, 16)) {
        return absl::AbortedError(absl::StrCat("coordinator bootstrap: the job was aborted by rank ",
                                               a->bytes.substr(17)));
      }
    }
    auto kids = zk_->Children(dir, /*watch=*/true);
    if (!kids.ok()) return kids.status();
    for (const std::string& k : *kids) {
      int r = -1;
      if (!absl::SimpleAtoi(k, &r) || r < 0 || r >= c_.size || have[r]) continue;
      auto d = zk_->Get(dir + "/" + k, false);
      if (absl::IsNotFound(d.status())) continue;
      if (!d.ok()) return d.status();
      const std::string inc = d->bytes.substr(0, 16);
      if (claims_[r] != inc) {
        // Not (yet) the claim's holder: the claim may have changed hands
        // since it was read (an earlier run's process gone). Read it again.
        auto claim = Claim(r);
        if (!claim.ok()) return claim.status();
        if (*claim != inc) continue;  // an earlier run's node, or rank r not claimed yet
      }
      out[r] = d->bytes.substr(16);
      have[r] = true;
    }
    return absl::OkStatus();
  }

  // The incarnation that holds rank r's claim now ("" if none); remembered,
  // so a rank that finished and exited still counts.
  absl::StatusOr<std::string> Claim(int r) {
    auto claim = zk_->Get(root_ + "/arrive/" + RankName(r), false);
    if (absl::IsNotFound(claim.status())) return claims_[r];
    if (!claim.ok()) return claim.status();
    claims_[r] = claim->bytes;
    return claims_[r];
  }

  const CoordConfig c_;
  const BootstrapOptions o_;
  uint64_t inc_ = 0;
  std::string root_;
  std::unique_ptr<ZkClient> zk_;
  std::vector<std::string> claims_;
  int round_ = 0;
  absl::Status failed_;
  bool rejoining_ = false;
};

}  // namespace

absl::StatusOr<CoordConfig> CoordConfigFromEnv(const EnvLookup& getenv) {
  CoordConfig c;
  const std::optional<std::string> ensemble = getenv("RDMADS_COORDINATOR");
  const std::optional<std::string> nodes = getenv("RDMADS_NODES");
  const std::optional<std::string> node = getenv("RDMADS_NODE_ID");
  const std::optional<std::string> cluster = getenv("RDMADS_CLUSTER");
  if (!ensemble || ensemble->empty()) return absl::InvalidArgumentError("RDMADS_COORDINATOR is not set");
  c.ensemble = *ensemble;
  if (!nodes || !absl::SimpleAtoi(absl::StripAsciiWhitespace(*nodes), &c.size) || c.size < 1 || c.size > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("RDMADS_NODES='", nodes.value_or(""),
                                                   "': set it to the job's number of processes, 1..1024"));
  }
  if (!node) {
    return absl::InvalidArgumentError(
        absl::StrCat("RDMADS_NODE_ID is not set: set it to this process's rank, 0..", c.size - 1));
  }
  const absl::string_view id = absl::StripAsciiWhitespace(*node);
  if (id.empty() || !absl::ascii_isdigit(id[0]) || !absl::SimpleAtoi(id, &c.rank)) {
    return absl::InvalidArgumentError(absl::StrCat("RDMADS_NODE_ID='", *node, "' is not a rank: set it to 0..", c.size - 1));
  }
  if (c.rank >= c.size) {
    return absl::OutOfRangeError(
        absl::StrCat("RDMADS_NODE_ID=", c.rank, " is out of range: RDMADS_NODES=", c.size, ", so ranks are 0..", c.size - 1));
  }
  if (cluster) c.job = *cluster;
  const std::optional<std::string> rejoin = getenv("RDMADS_REJOIN");
  const std::string mode(absl::StripAsciiWhitespace(rejoin.value_or("")));
  if (mode.empty() || mode == "0") {
    c.rejoin = RejoinMode::kNever;
  } else if (mode == "1") {
    c.rejoin = RejoinMode::kAlways;
  } else if (mode == "auto") {
    c.rejoin = RejoinMode::kAuto;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("RDMADS_REJOIN='", *rejoin,
                                                   "': want 0 (a fresh start), 1 (rejoin the running job) or auto"));
  }
  if (c.job.empty() || c.job.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("RDMADS_CLUSTER='", c.job, "': want a non-empty name without '/'"));
  }
  return c;
}

absl::StatusOr<std::unique_ptr<Bootstrap>> CreateCoordBootstrap(const CoordConfig& config,
                                                                 const BootstrapOptions& options) {
  auto b = std::make_unique<CoordBootstrap>(config, options);
  if (absl::Status s = b->Start(); !s.ok()) return s;
  return std::unique_ptr<Bootstrap>(std::move(b));
}

}  // namespace rdma::bootstrap
