#include "testing/zk_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rdma/coord/internal/zk_client.h"

extern char** environ;

namespace rdmads_testing {
namespace {

constexpr char kScript[] = "tools/coordinator.sh";

absl::StatusOr<int> FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return absl::InternalError("bind to a free loopback port failed");
  }
  close(fd);
  return ntohs(a.sin_port);
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out;
  for (size_t i = lines.size() > 15 ? lines.size() - 15 : 0; i < lines.size(); ++i) absl::StrAppend(&out, lines[i], "\n");
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZkServer>> ZkServer::Start(const ZkServerOptions& options) {
  std::unique_ptr<ZkServer> s(new ZkServer());
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string tmpl = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/zk.XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  s->dir_ = tmpl;
  if (options.port != 0) {
    s->port_ = options.port;
  } else {
    auto port = FreePort();
    if (!port.ok()) return port.status();
    s->port_ = *port;
  }
  s->host_ = options.host;
  s->address_ = absl::StrCat(options.host, ":", s->port_);
  if (absl::Status st = s->Launch(); !st.ok()) return st;
  return s;
}

absl::StatusOr<std::string> ZkServer::Shared(std::unique_ptr<ZkServer>* owned) {
  const char* env = std::getenv("RDMADS_TEST_COORDINATOR");
  if (env != nullptr && *env != '\0') return std::string(env);
  auto s = Start();
  if (!s.ok()) return s.status();
  *owned = *std::move(s);
  return (*owned)->address();
}

absl::Status ZkServer::Launch() {
  const std::string log = dir_ + "/server.log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  // The server users run (tools/coordinator.sh, in the foreground: it execs
  // java, so pid_ ends up being the server's); the runfiles under bazel
  // test, the repository root in the guest.
  if (access(kScript, X_OK) != 0) {
    posix_spawn_file_actions_destroy(&fa);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot find ", kScript, " (the test runs under bazel test, or from the repository's root)"));
  }
  std::vector<std::string> args = {kScript, "--host", host_, "--port", std::to_string(port_), "--dir", dir_};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, kScript, &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return absl::InternalError(absl::StrCat("cannot start ", kScript, ": ", std::strerror(rc)));
  pid_ = pid;
  // Ready when a client gets a session (the port opens a little earlier).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  absl::Status last;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("the ZooKeeper test server exited at start; its log:\n", Tail(log)));
    }
    auto c = rdma::coord::internal::ZkClient::Connect(address_, std::chrono::milliseconds(2000),
                                                      std::chrono::milliseconds(500));
    if (c.ok()) return absl::OkStatus();
    last = c.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  (void)Stop();
  return absl::DeadlineExceededError(
      absl::StrCat("the ZooKeeper test server did not answer within 60 s (", last.message(), "); its log:\n", Tail(log)));
}

absl::Status ZkServer::Stop() {
  if (pid_ < 0) return absl::OkStatus();
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return absl::OkStatus();
}

absl::Status ZkServer::Restart() {
  if (absl::Status s = Stop(); !s.ok()) return s;
  return Launch();
}

ZkServer::~ZkServer() { (void)Stop(); }

}  // namespace rdmads_testing
