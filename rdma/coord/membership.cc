#include "rdma/coord/membership.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "rdma/coord/internal/zk_client.h"

namespace rdma::coord {

using internal::NodeKind;
using internal::ZkClient;
using internal::ZkOp;
using Clock = std::chrono::steady_clock;

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// members/<rank, 6 digits>-<incarnation, 16 hex digits>
std::string MemberName(uint32_t rank, uint64_t inc) { return absl::StrFormat("%06u-%016x", rank, inc); }
bool ParseMemberName(const std::string& name, uint32_t* rank, uint64_t* inc) {
  return std::sscanf(name.c_str(), "%6" SCNu32 "-%16" SCNx64, rank, inc) == 2 && name.size() == 23;
}
// epochs/e-<epoch, 20 digits>: sorted names are sorted epochs.
std::string EpochName(uint64_t e) { return absl::StrFormat("e-%020u", e); }
bool ParseEpochName(const std::string& name, uint64_t* e) {
  return name.size() > 2 && name.compare(0, 2, "e-") == 0 && absl::SimpleAtoi(name.substr(2), e);
}

struct Report {
  uint32_t suspect = 0;
  uint64_t suspect_inc = 0;
  uint32_t reporter = 0;
  uint64_t reporter_inc = 0;
};
std::string EncodeReport(const Report& r, const std::string& why) {
  return absl::StrFormat("%u %016x %u %016x %s", r.suspect, r.suspect_inc, r.reporter, r.reporter_inc, why);
}
bool DecodeReport(const std::string& s, Report* r) {
  return std::sscanf(s.c_str(), "%" SCNu32 " %" SCNx64 " %" SCNu32 " %" SCNx64, &r->suspect, &r->suspect_inc,
                     &r->reporter, &r->reporter_inc) == 4;
}

}  // namespace

Membership::Membership(MembershipOptions o) : o_(std::move(o)) {}

absl::StatusOr<std::unique_ptr<Membership>> Membership::Join(MembershipOptions options) {
  if (options.job.empty() || options.job.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("membership: job name '", options.job, "' must be non-empty, no '/'"));
  }
  if (options.rank >= options.size || options.incarnation == 0) {
    return absl::InvalidArgumentError(absl::StrCat("membership: rank ", options.rank, " of ", options.size,
                                                   ", incarnation ", options.incarnation, ": want rank < size, incarnation != 0"));
  }
  std::unique_ptr<Membership> m(new Membership(std::move(options)));
  if (absl::Status s = m->Start(); !s.ok()) return s;
  std::unique_lock<std::mutex> l(m->mu_);
  const bool in = m->cv_.wait_for(l, m->o_.join_timeout, [&] { return m->admitted_ || m->fenced(); });
  if (m->fenced()) return m->fence_why_;
  if (!in || !m->admitted_) {
    const Configuration now = m->current_;
    l.unlock();
    return absl::DeadlineExceededError(absl::StrCat(
        "membership: rank ", m->o_.rank, " of job '", m->o_.job, "' was not admitted within ",
        m->o_.join_timeout.count(), " ms (newest ", now.ToString(),
        "; a fresh job waits for all ", m->o_.size, " ranks, a restarted rank for its old process to be dropped)"));
  }
  return m;
}

absl::Status Membership::Start() {
  auto zk = ZkClient::Connect(o_.ensemble, o_.session_timeout, o_.connect_timeout);
  if (!zk.ok()) return zk.status();
  zk_ = *std::move(zk);
  for (const char* dir : {"/members", "/election", "/epochs", "/reports"}) {
    if (absl::Status s = zk_->EnsurePath(Root() + dir); !s.ok()) return s;
  }
  auto made = zk_->Create(Root() + "/config", EncodeConfiguration(Configuration{}), NodeKind::kPersistent);
  if (!made.ok() && !absl::IsAlreadyExists(made.status())) return made.status();
  auto cfg = zk_->Get(Root() + "/config", false);
  if (!cfg.ok()) return cfg.status();
  auto base = DecodeConfiguration(cfg->bytes);
  if (!base.ok()) return base.status();
  current_ = *std::move(base);
  auto me = zk_->Create(Root() + "/members/" + MemberName(o_.rank, o_.incarnation), o_.card, NodeKind::kEphemeral);
  if (!me.ok()) return me.status();
  member_path_ = *me;
  auto el = zk_->Create(Root() + "/election/m-", MemberName(o_.rank, o_.incarnation), NodeKind::kEphemeralSequential);
  if (!el.ok()) return el.status();
  election_path_ = *el;
  gap_ = zk_->session_timeout() / 3;
  valid_until_ns_.store(NowNs() + gap_.count(), std::memory_order_release);
  loop_ = std::thread([this] { Loop(); });
  ticker_ = std::thread([this] { Tick(); });
  return absl::OkStatus();
}

Membership::~Membership() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (zk_ != nullptr) zk_->Kick();
  if (loop_.joinable()) loop_.join();
  if (ticker_.joinable()) ticker_.join();
  zk_.reset();  // closes the session: the others drop this process
}

std::chrono::milliseconds Membership::session_timeout() const { return zk_->session_timeout(); }

Configuration Membership::current() const {
  std::lock_guard<std::mutex> l(mu_);
  return current_;
}

bool Membership::WaitForEpoch(uint64_t epoch, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> l(mu_);
  return cv_.wait_for(l, timeout, [&] { return current_.epoch >= epoch; });
}

absl::Status Membership::Serving() const {
  if (!fenced() && NowNs() < valid_until_ns_.load(std::memory_order_acquire)) return absl::OkStatus();
  // Fenced, or this process was paused (or starved) and has not yet heard
  // from the coordinator since: wait for the verdict.
  const auto deadline = Clock::now() + 2 * zk_->session_timeout();
  std::unique_lock<std::mutex> l(mu_);
  for (;;) {
    if (fenced()) return fence_why_;
    if (NowNs() < valid_until_ns_.load(std::memory_order_acquire)) return absl::OkStatus();
    if (Clock::now() >= deadline) {
      return absl::UnavailableError(absl::StrCat(
          "membership: rank ", o_.rank, " was paused and the coordinator has not confirmed its session since (",
          zk_->ensemble(), " unreachable?); it does not serve until it does"));
    }
    cv_.wait_for(l, std::chrono::milliseconds(1));
  }
}

absl::Status Membership::ReportDeath(uint32_t rank, uint64_t incarnation, const std::string& why) {
  return StoreReport(EncodeReport(Report{rank, incarnation, o_.rank, o_.incarnation}, why));
}

absl::Status Membership::StoreReport(const std::string& report) {
  auto made = zk_->Create(Root() + "/reports/r-", report, NodeKind::kPersistentSequential);
  if (!made.ok()) return made.status();
  // The suspect may be the manager, whose reports nobody reads until its
  // session expires: its election node goes now, so the next process
  // manages at once (a live suspect finds it gone and fences itself, as it
  // would once the manager drops it).
  Report r;
  if (!DecodeReport(report, &r) || !current().Has(o_.rank, o_.incarnation)) return absl::OkStatus();
  auto kids = zk_->Children(Root() + "/election", false);
  if (!kids.ok()) return kids.status();
  const std::string suspect = MemberName(r.suspect, r.suspect_inc);
  for (const std::string& k : *kids) {
    auto d = zk_->Get(Root() + "/election/" + k, false);
    if (absl::IsNotFound(d.status())) continue;
    if (!d.ok()) return d.status();
    if (d->bytes != suspect) continue;
    absl::Status del = zk_->Delete(Root() + "/election/" + k);
    if (!del.ok() && !absl::IsNotFound(del)) return del;
  }
  return absl::OkStatus();
}

void Membership::ReportDeathAsync(uint32_t rank, uint64_t incarnation, const std::string& why) {
  {
    std::lock_guard<std::mutex> l(mu_);
    pending_reports_.push_back(EncodeReport(Report{rank, incarnation, o_.rank, o_.incarnation}, why));
  }
  zk_->Kick();
}

void Membership::Fence(const absl::Status& why) {
  if (fenced()) return;  // only the membership thread fences
  const absl::Status status = absl::UnavailableError(absl::StrCat("rank ", o_.rank, " is fenced: ", why.message()));
  manager_.store(false, std::memory_order_release);
  // Stop serving (the owner shuts its node down) before saying so: a thread
  // that Serving() held back after a pause finds the node already down.
  if (o_.on_fenced) o_.on_fenced(status);
  {
    std::lock_guard<std::mutex> l(mu_);
    fence_why_ = status;
    fenced_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  // Leave the job at once: the manager drops a registration that is gone,
  // and another process manages if this one did. An expired session has
  // lost both already; an unreachable coordinator drops them when the
  // session expires.
  for (const std::string& path : {election_path_, member_path_}) {
    absl::Status del = zk_->Delete(path);
    if (!del.ok() && !absl::IsNotFound(del) && !absl::IsAborted(del) && !absl::IsUnavailable(del)) {
      std::fprintf(stderr, "rdmads: rank %u, fenced, could not leave the job: %s\n", o_.rank, del.ToString().c_str());
    }
  }
}

void Membership::Tick() {
  const auto period = std::max<std::chrono::nanoseconds>(std::chrono::milliseconds(1), gap_ / 16);
  int64_t last = NowNs();
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      if (cv_.wait_for(l, period, [&] { return stopping_; })) return;
    }
    const int64_t now = NowNs();
    if (now - last > gap_.count()) {
      pauses_.fetch_add(1, std::memory_order_acq_rel);
      zk_->Kick();
    } else if (!NeedsConfirm()) {
      valid_until_ns_.store(now + gap_.count(), std::memory_order_release);
    }
    last = now;
  }
}

bool Membership::NeedsConfirm() const {
  return pauses_.load(std::memory_order_acquire) != confirmed_.load(std::memory_order_acquire);
}

absl::Status Membership::CheckRegistration() {
  // An answer confirms the pauses counted before the question only: one
  // that comes while it is in flight is confirmed by the next question.
  const uint64_t pauses = pauses_.load(std::memory_order_acquire);
  const bool confirming = pauses != confirmed_.load(std::memory_order_acquire);
  const int64_t sent = NowNs();
  auto here = zk_->Exists(member_path_, /*watch=*/true);
  if (!here.ok()) return here.status();
  if (!*here) return absl::NotFoundError("its registration is gone (session expired or dropped by the manager)");
  if (confirming) {
    confirmed_.store(pauses, std::memory_order_release);
    if (!NeedsConfirm()) valid_until_ns_.store(sent + gap_.count(), std::memory_order_release);
  }
  return absl::OkStatus();
}

void Membership::Loop() {
  // Watches wake it; the period is a safety net, and the pace of retries
  // while the coordinator is unreachable.
  const auto period = std::max<std::chrono::milliseconds>(
      std::chrono::milliseconds(20), std::chrono::duration_cast<std::chrono::milliseconds>(zk_->session_timeout() / 2));
  for (;;) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopping_) return;
    }
    const uint64_t seen = zk_->changes();
    if (!fenced()) {
      const absl::Status s = Step();
      // Unavailable: the coordinator is unreachable; try again. Anything
      // else (expired session, registration gone, a gap in the epochs) is
      // final for this process.
      if (!s.ok() && !absl::IsUnavailable(s)) Fence(s);
    }
    const bool confirming = NeedsConfirm();
    zk_->WaitForChange(seen, Clock::now() + (confirming ? std::chrono::milliseconds(2) : period));
  }
}

absl::Status Membership::Step() {
  if (zk_->expired()) return absl::AbortedError("its coordinator session expired");
  if (absl::Status s = CheckRegistration(); !s.ok()) return s;
  for (;;) {
    std::string report;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (pending_reports_.empty()) break;
      report = pending_reports_.front();
    }
    if (absl::Status s = StoreReport(report); !s.ok()) return s;
    std::lock_guard<std::mutex> l(mu_);
    pending_reports_.pop_front();
  }
  // Election (ZooKeeper's recipe): the lowest sequence number manages; the
  // others watch the node just below their own.
  auto kids = zk_->Children(Root() + "/election", false);
  if (!kids.ok()) return kids.status();
  const std::string mine = election_path_.substr(election_path_.rfind('/') + 1);
  auto it = std::find(kids->begin(), kids->end(), mine);
  if (it == kids->end()) return absl::NotFoundError("its election node is gone (session expired)");
  manager_.store(it == kids->begin(), std::memory_order_release);
  if (it != kids->begin()) {
    auto below = zk_->Exists(Root() + "/election/" + *(it - 1), /*watch=*/true);
    if (!below.ok()) return below.status();
    if (!*below) zk_->Kick();  // it went meanwhile: look again
  } else if (absl::Status s = Manage(); !s.ok()) {
    return s;
  }
  return ApplyNewEpochs();
}

absl::Status Membership::Manage() {
  auto cfg_data = zk_->Get(Root() + "/config", false);
  if (!cfg_data.ok()) return cfg_data.status();
  auto cfg = DecodeConfiguration(cfg_data->bytes);
  if (!cfg.ok()) return cfg.status();
  auto names = zk_->Children(Root() + "/members", /*watch=*/true);
  if (!names.ok()) return names.status();
  std::map<std::pair<uint32_t, uint64_t>, std::string> live;  // (rank, incarnation) -> node name
  for (const std::string& n : *names) {
    uint32_t rank = 0;
    uint64_t inc = 0;
    if (ParseMemberName(n, &rank, &inc) && rank < o_.size) live[{rank, inc}] = n;
  }
  // Reports from members of the current configuration drop their suspect:
  // its registration is deleted, so it fences itself if it is still alive.
  auto reports = zk_->Children(Root() + "/reports", /*watch=*/true);
  if (!reports.ok()) return reports.status();
  for (const std::string& name : *reports) {
    const std::string path = Root() + "/reports/" + name;
    auto d = zk_->Get(path, false);
    if (!d.ok() && !absl::IsNotFound(d.status())) return d.status();
    Report r;
    if (d.ok() && DecodeReport(d->bytes, &r) && cfg->Has(r.reporter, r.reporter_inc)) {
      auto hit = live.find({r.suspect, r.suspect_inc});
      if (hit != live.end()) {
        absl::Status del = zk_->Delete(Root() + "/members/" + hit->second);
        if (!del.ok() && !absl::IsNotFound(del)) return del;
        live.erase(hit);
      }
    }
    absl::Status del = zk_->Delete(path);
    if (!del.ok() && !absl::IsNotFound(del)) return del;
  }
  bool running = false;
  for (const Member& m : cfg->members) running |= live.count({m.rank, m.incarnation}) > 0;
  Configuration next{cfg->epoch + 1, {}};
  next.start = running ? cfg->start : next.epoch;
  std::map<uint32_t, Member> by_rank;
  for (const Member& m : cfg->members) {
    if (live.count({m.rank, m.incarnation})) by_rank[m.rank] = m;
  }
  std::map<uint32_t, uint64_t> newcomers;  // a rank nobody live holds -> its lowest-named process's incarnation
  for (const auto& [key, name] : live) {
    if (!by_rank.count(key.first) && !newcomers.count(key.first)) newcomers[key.first] = key.second;
  }
  // A fresh job starts with every rank at once; a running one admits
  // newcomers one epoch at a time as they come.
  if (!running && by_rank.size() + newcomers.size() < o_.size) return absl::OkStatus();
  for (const auto& [rank, inc] : newcomers) {
    auto card = zk_->Get(Root() + "/members/" + MemberName(rank, inc), false);
    if (absl::IsNotFound(card.status())) continue;  // it went meanwhile
    if (!card.ok()) return card.status();
    by_rank[rank] = Member{rank, inc, card->bytes, next.epoch};
  }
  for (auto& [rank, m] : by_rank) next.members.push_back(m);
  auto same = [](const std::vector<Member>& a, const std::vector<Member>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const Member& x, const Member& y) { return x.rank == y.rank && x.incarnation == y.incarnation; });
  };
  if (same(next.members, cfg->members)) return absl::OkStatus();
  const std::string bytes = EncodeConfiguration(next);
  // The configuration's version makes the write conditional: a manager that
  // read an older one (another manager wrote since) writes nothing.
  absl::Status w = zk_->Multi({
      ZkOp{ZkOp::kSet, Root() + "/config", bytes, cfg_data->version},
      ZkOp{ZkOp::kCreate, Root() + "/epochs/" + EpochName(next.epoch), bytes, -1, NodeKind::kPersistent},
  });
  if (absl::IsFailedPrecondition(w) || absl::IsAlreadyExists(w)) {
    zk_->Kick();
    return absl::OkStatus();
  }
  if (!w.ok()) return w;
  // Keep the last kEpochHistory epochs.
  auto epochs = zk_->Children(Root() + "/epochs", false);
  if (!epochs.ok()) return epochs.status();
  for (const std::string& name : *epochs) {
    uint64_t e = 0;
    if (!ParseEpochName(name, &e) || e + kEpochHistory > next.epoch) continue;
    absl::Status del = zk_->Delete(Root() + "/epochs/" + name);
    if (!del.ok() && !absl::IsNotFound(del)) return del;
  }
  return absl::OkStatus();
}

absl::Status Membership::ApplyNewEpochs() {
  auto names = zk_->Children(Root() + "/epochs", /*watch=*/true);
  if (!names.ok()) return names.status();
  uint64_t applied = current().epoch;
  for (const std::string& name : *names) {
    uint64_t e = 0;
    if (!ParseEpochName(name, &e) || e <= applied) continue;
    if (e != applied + 1) {
      return absl::FailedPreconditionError(absl::StrCat("it missed epochs ", applied + 1, "..", e - 1,
                                                        " (more than ", kEpochHistory, " behind)"));
    }
    auto d = zk_->Get(Root() + "/epochs/" + name, false);
    if (!d.ok()) return d.status();
    auto next = DecodeConfiguration(d->bytes);
    if (!next.ok()) return next.status();
    if (next->epoch != e) return absl::DataLossError(absl::StrCat("epoch node ", name, " holds epoch ", next->epoch));
    const Configuration before = current();
    const bool in = next->Has(o_.rank, o_.incarnation);
    if (o_.on_epoch) o_.on_epoch(before, *next);
    bool was_admitted = false;
    {
      std::lock_guard<std::mutex> l(mu_);
      current_ = *next;
      was_admitted = admitted_;
      admitted_ |= in;
    }
    cv_.notify_all();
    if (was_admitted && !in) return absl::NotFoundError(absl::StrCat("epoch ", e, " left it out"));
    applied = e;
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Membership::Running(internal::ZkClient& zk, const std::string& job, uint32_t rank) {
  const std::string root = "/rdmads/" + job;
  auto d = zk.Get(root + "/config", false);
  if (absl::IsNotFound(d.status())) return false;
  if (!d.ok()) return d.status();
  auto cfg = DecodeConfiguration(d->bytes);
  if (!cfg.ok()) return cfg.status();
  for (const Member& m : cfg->members) {
    if (m.rank == rank) continue;
    auto live = zk.Exists(root + "/members/" + MemberName(m.rank, m.incarnation), false);
    if (!live.ok()) return live.status();
    if (*live) return true;
  }
  return false;
}

}  // namespace rdma::coord
