#ifndef RDMA_COORD_INTERNAL_ZK_CLIENT_H_
#define RDMA_COORD_INTERNAL_ZK_CLIENT_H_

// ZkClient: one ZooKeeper session through the C client (libzookeeper_mt),
// with absl::Status errors and a change counter in place of callbacks.
// Internal to rdma/coord (docs/design.md §5, "Membership").
//
//   ASSIGN_OR_RETURN(auto zk, ZkClient::Connect("127.0.0.1:2181", 2s, 5s));
//   ASSIGN_OR_RETURN(std::string path, zk->Create("/a/m-", "x", kEphemeralSequential));
//   uint64_t seen = zk->changes();
//   ASSIGN_OR_RETURN(auto kids, zk->Children("/a", /*watch=*/true));
//   zk->WaitForChange(seen, deadline);  // a watch fired or the session changed
//
// Contract:
//  * Thread-safe (the C client's synchronous calls are).
//  * Every call is bounded: one that finds the session not connected fails
//    at once with Unavailable ("coordinator unreachable"); one in flight when
//    the connection drops fails with Unavailable after the client's receive
//    timeout (2/3 of the session timeout). An expired session is final:
//    every call then returns Aborted, and expired() is true.
//  * Watches are level-triggered for the caller: any watch or session event
//    bumps changes() and wakes WaitForChange; the caller re-reads.
//  * Error codes: NONODE is NotFound, NODEEXISTS AlreadyExists, BADVERSION
//    FailedPrecondition, connection loss, timeouts and the ensemble's
//    transient states (throttled, reconfiguring, no quorum) Unavailable,
//    session expiry Aborted, anything else Internal; each message names the
//    call and the path.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

typedef struct _zhandle zhandle_t;

namespace rdma::coord::internal {

enum class NodeKind { kPersistent, kEphemeral, kPersistentSequential, kEphemeralSequential };

struct ZkOp {
  enum Kind { kCreate, kSet, kDelete, kCheck } kind;
  std::string path;
  std::string data;
  int version = -1;
  NodeKind node_kind = NodeKind::kPersistent;
};

class ZkClient {
 public:
  // Connects to `ensemble` ("host:port,..."), asking for `session_timeout`;
  // Unavailable naming the ensemble if no server answers within
  // `connect_timeout`.
  static absl::StatusOr<std::unique_ptr<ZkClient>> Connect(const std::string& ensemble,
                                                           std::chrono::milliseconds session_timeout,
                                                           std::chrono::milliseconds connect_timeout);
  ~ZkClient();
  ZkClient(const ZkClient&) = delete;
  ZkClient& operator=(const ZkClient&) = delete;

  // The path created (with its sequence suffix for sequential kinds).
  absl::StatusOr<std::string> Create(const std::string& path, absl::string_view data, NodeKind kind);
  // Creates each missing persistent node along `path` (empty data).
  absl::Status EnsurePath(const std::string& path);
  struct Data {
    std::string bytes;
    int version = 0;
  };
  absl::StatusOr<Data> Get(const std::string& path, bool watch);
  absl::Status Set(const std::string& path, absl::string_view data, int version);
  absl::Status Delete(const std::string& path, int version = -1);
  // Whether `path` exists; with `watch`, a later create, delete or change of
  // it bumps changes().
  absl::StatusOr<bool> Exists(const std::string& path, bool watch);
  // Child names (not full paths), sorted.
  absl::StatusOr<std::vector<std::string>> Children(const std::string& path, bool watch);
  // All or nothing; the first failing op's error.
  absl::Status Multi(const std::vector<ZkOp>& ops);

  uint64_t changes() const;
  // Bumps changes(): wakes a WaitForChange for a reason of the caller's.
  void Kick();
  // Until changes() differs from `seen`, or `deadline`.
  void WaitForChange(uint64_t seen, std::chrono::steady_clock::time_point deadline) const;
  bool expired() const;
  bool connected() const;
  // The timeout the server granted.
  std::chrono::milliseconds session_timeout() const;
  const std::string& ensemble() const { return ensemble_; }

 private:
  ZkClient(std::string ensemble) : ensemble_(std::move(ensemble)) {}
  static void OnEvent(zhandle_t* zh, int type, int state, const char* path, void* ctx);
  absl::Status Check(int rc, absl::string_view call, const std::string& path) const;
  absl::Status Usable(absl::string_view call, const std::string& path) const;

  const std::string ensemble_;
  zhandle_t* zh_ = nullptr;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t changes_ = 0;
  int state_ = 0;
  mutable bool expired_ = false;
};

}  // namespace rdma::coord::internal

#endif  // RDMA_COORD_INTERNAL_ZK_CLIENT_H_
