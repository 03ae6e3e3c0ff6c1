#ifndef TESTING_ZK_SERVER_H_
#define TESTING_ZK_SERVER_H_

// ZkServer: a throw-away standalone ZooKeeper server on loopback, for tests
// of the coordinator (rdma/coord): tools/coordinator.sh, the server users
// run, on a free port of 127.0.0.1, its config and data in a fresh
// temporary directory.
//
//   ASSIGN_OR_RETURN(auto zk, testing::ZkServer::Start());
//   options.ensemble = zk->address();   // "127.0.0.1:40123"
//   zk->Stop();     // kill -9: the coordinator is down
//   zk->Restart();  // same port and data: sessions that did not expire resume
//
// If RDMADS_TEST_COORDINATOR is set (tools/run_tests.sh starts one server
// for the suite), Shared() returns that address instead of starting one;
// tests that stop the server always Start their own. The server's log is
// kept in its directory and its last lines are in Start's error.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace rdmads_testing {

struct ZkServerOptions {
  std::string host = "127.0.0.1";  // the address it listens on
  int port = 0;                    // 0: a free one
};

class ZkServer {
 public:
  static absl::StatusOr<std::unique_ptr<ZkServer>> Start(const ZkServerOptions& options = {});
  // RDMADS_TEST_COORDINATOR if set (and then *owned is null), else a server of
  // the caller's own in *owned.
  static absl::StatusOr<std::string> Shared(std::unique_ptr<ZkServer>* owned);
  ~ZkServer();

  const std::string& address() const { return address_; }
  absl::Status Stop();
  absl::Status Restart();

 private:
  ZkServer() = default;
  absl::Status Launch();

  std::string dir_;
  std::string host_;
  std::string address_;
  int port_ = 0;
  int pid_ = -1;
};

}  // namespace rdmads_testing

#endif  // TESTING_ZK_SERVER_H_
