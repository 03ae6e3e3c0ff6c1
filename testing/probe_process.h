#ifndef TESTING_PROBE_PROCESS_H_
#define TESTING_PROBE_PROCESS_H_

// ProbeProcess: a child process driven over its stdin and stdout, one line
// at a time (membership_probe, cluster probes). Every wait has a deadline.
//
//   ProbeProcess p({"tests/rdma/coord/membership_probe", zk, "job", "3", "0", "2000"});
//   ASSERT_TRUE(p.WaitFor([](const std::string& l) { return l.rfind("joined", 0) == 0; }, 30s));
//   p.Send("serving");
//   p.Signal(SIGKILL);

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace rdmads_testing {

class ProbeProcess {
 public:
  // `env`: "K=V" sets K for the child, a bare "K" removes it; the rest of
  // this process's environment is passed on.
  explicit ProbeProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
  ~ProbeProcess();  // SIGTERM if still running, SIGKILL 5 s later
  ProbeProcess(const ProbeProcess&) = delete;
  ProbeProcess& operator=(const ProbeProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void Send(const std::string& line);
  void Signal(int sig);
  // The first line (from the start of the output) that `pred` accepts, waiting
  // up to `timeout`; false if none came.
  bool WaitFor(const std::function<bool(const std::string&)>& pred, std::chrono::milliseconds timeout,
               std::string* line = nullptr);
  // Same, but only among lines printed from index `from` on.
  bool WaitForFrom(size_t from, const std::function<bool(const std::string&)>& pred,
                   std::chrono::milliseconds timeout, std::string* line = nullptr);
  std::vector<std::string> Lines() const;
  size_t line_count() const;
  // Everything it printed, for failure messages.
  std::string Transcript() const;

 private:
  pid_t pid_ = -1;
  int in_fd_ = -1;
  int out_fd_ = -1;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> lines_;
  bool eof_ = false;
  std::thread reader_;
};

}  // namespace rdmads_testing

#endif  // TESTING_PROBE_PROCESS_H_
