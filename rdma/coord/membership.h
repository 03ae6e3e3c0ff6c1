#ifndef RDMA_COORD_MEMBERSHIP_H_
#define RDMA_COORD_MEMBERSHIP_H_

// Membership: one agreed view of who is alive, kept in ZooKeeper
// (docs/design.md §5, "Membership"). Each process registers (rank,
// incarnation, card) as an ephemeral node; a configuration manager, elected
// with ZooKeeper's recipe, writes each new configuration under a new epoch;
// every process applies the epochs one by one, in order.
//
//   MembershipOptions o{.ensemble = "127.0.0.1:2181", .job = "svc", .size = 3,
//                       .rank = 1, .incarnation = inc, .card = card};
//   o.on_epoch = [](const Configuration& before, const Configuration& after) { ... };
//   o.on_fenced = [](const absl::Status& why) { ... };  // stop serving
//   ASSIGN_OR_RETURN(auto m, Membership::Join(o));      // returns once it is a member
//   m->ReportDeath(2, inc2, "CM disconnect");           // the manager drops it
//
// Contract:
//  * Join returns once an applied epoch lists this process; else the fence's
//    Unavailable, or DeadlineExceeded after join_timeout. A fresh job's
//    first epoch waits for `size` ranks; later processes (a restarted rank)
//    are admitted in the next epoch, once no live process holds their rank.
//    Each member carries the epoch that admitted it (Member::since), and
//    each configuration the epoch its run of the job started in (start).
//  * on_epoch runs on the membership thread for every epoch after the one
//    Join found (the admitting one too, before Join returns), strictly in
//    epoch order, never two at once. A process that falls more than
//    kEpochHistory epochs behind fences itself.
//  * Fenced is final: when the session expires, the registration vanishes,
//    an epoch leaves it out, or the coordinator's data makes no sense,
//    on_fenced runs once, then Serving() is Unavailable from then on.
//  * Serving() is OK while not fenced and not paused: after a gap of more
//    than session_timeout / 3 in its own ticker (SIGSTOP, a frozen VM) it
//    waits, up to 2 x session_timeout, for the coordinator to confirm the
//    session or fence the process. A coordinator that is unreachable fences
//    nobody: data goes on; membership changes wait, with errors.
//  * The server grants a session within its own bounds (2 to 20 tickTime
//    by default); tools/coordinator.sh's server allows 0.2 s to 60 s.
//  * Destroying the object closes its session: the others drop it.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rdma/coord/configuration.h"

namespace rdma::coord {

namespace internal {
class ZkClient;
}

struct MembershipOptions {
  std::string ensemble;  // "host:port[,host:port...]"
  std::string job;       // the job's name: its nodes live under /rdmads/<job>
  uint32_t size = 1;     // ranks 0..size-1; a fresh job's first epoch has all
  uint32_t rank = 0;
  uint64_t incarnation = 0;  // this process's start, never 0
  std::string card;
  // Pick it with margin for loaded machines: an expiry fences a live process.
  std::chrono::milliseconds session_timeout{2000};
  std::chrono::milliseconds connect_timeout{5000};
  std::chrono::milliseconds join_timeout{60'000};
  std::function<void(const Configuration& before, const Configuration& after)> on_epoch;
  std::function<void(const absl::Status& why)> on_fenced;
};

class Membership {
 public:
  static constexpr int kEpochHistory = 64;

  static absl::StatusOr<std::unique_ptr<Membership>> Join(MembershipOptions options);
  // Whether job `job` runs now: a member of its configuration other than
  // `rank` is registered. A process starting as `rank` then rejoins it
  // (rdma/bootstrap/coord_bootstrap.h) rather than waits for a fresh start.
  static absl::StatusOr<bool> Running(internal::ZkClient& zk, const std::string& job, uint32_t rank);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  // The newest epoch this process applied.
  Configuration current() const;
  // OK while this process may serve (see the contract), else Unavailable.
  absl::Status Serving() const;
  bool fenced() const { return fenced_.load(std::memory_order_acquire); }
  // Tells the manager that (rank, incarnation) is dead, and takes the
  // suspect out of the election (it may be the manager). Returns once the
  // report is stored; Unavailable if the coordinator is unreachable.
  absl::Status ReportDeath(uint32_t rank, uint64_t incarnation, const std::string& why);
  // ReportDeath from a thread that must not block (a CM event thread): the
  // membership thread stores it, retrying while the coordinator is down.
  void ReportDeathAsync(uint32_t rank, uint64_t incarnation, const std::string& why);
  // Whether this process is the configuration manager now.
  bool is_manager() const { return manager_.load(std::memory_order_acquire); }
  // Waits up to `timeout` for an applied epoch >= `epoch`.
  bool WaitForEpoch(uint64_t epoch, std::chrono::milliseconds timeout) const;
  // The session timeout the coordinator granted.
  std::chrono::milliseconds session_timeout() const;

 private:
  explicit Membership(MembershipOptions o);
  absl::Status Start();
  void Loop();
  void Tick();
  absl::Status Step();
  absl::Status ApplyNewEpochs();
  absl::Status Manage();
  // Exists on this process's registration (watched); its answer also
  // confirms the pauses the ticker saw before it was asked.
  absl::Status CheckRegistration();
  bool NeedsConfirm() const;
  absl::Status StoreReport(const std::string& report);
  void Fence(const absl::Status& why);
  std::string Root() const { return "/rdmads/" + o_.job; }

  MembershipOptions o_;
  std::unique_ptr<internal::ZkClient> zk_;
  std::string member_path_;
  std::string election_path_;
  std::chrono::nanoseconds gap_{};

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  Configuration current_;
  bool admitted_ = false;
  absl::Status fence_why_;
  std::deque<std::string> pending_reports_;
  bool stopping_ = false;

  std::atomic<bool> fenced_{false};
  std::atomic<bool> manager_{false};
  // Pauses the ticker saw, and how many of them the coordinator confirmed.
  std::atomic<uint64_t> pauses_{0};
  std::atomic<uint64_t> confirmed_{0};
  std::atomic<int64_t> valid_until_ns_{0};  // steady clock
  std::thread loop_;
  std::thread ticker_;
};

}  // namespace rdma::coord

#endif  // RDMA_COORD_MEMBERSHIP_H_
