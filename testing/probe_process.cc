#include "testing/probe_process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

extern char** environ;

namespace rdmads_testing {

ProbeProcess::ProbeProcess(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  signal(SIGPIPE, SIG_IGN);  // a Send to a child that died is an EPIPE, not the end of the test
  std::vector<std::string> vars;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string v(*e);
    const std::string key = v.substr(0, v.find('='));
    bool overridden = false;
    for (const std::string& o : env) overridden |= o.substr(0, o.find('=')) == key;
    if (!overridden) vars.push_back(v);
  }
  for (const std::string& o : env) {
    if (o.find('=') != std::string::npos) vars.push_back(o);
  }
  std::vector<char*> envp;
  for (std::string& v : vars) envp.push_back(v.data());
  envp.push_back(nullptr);
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) != 0) return;
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    return;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    return;
  }
  pid_ = pid;
  in_fd_ = in[1];
  out_fd_ = out[0];
  reader_ = std::thread([this] {
    std::string partial;
    char buf[4096];
    for (;;) {
      const ssize_t n = read(out_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      partial.append(buf, static_cast<size_t>(n));
      size_t nl;
      while ((nl = partial.find('\n')) != std::string::npos) {
        std::lock_guard<std::mutex> l(mu_);
        lines_.push_back(partial.substr(0, nl));
        partial.erase(0, nl + 1);
        cv_.notify_all();
      }
    }
    std::lock_guard<std::mutex> l(mu_);
    eof_ = true;
    cv_.notify_all();
  });
}

ProbeProcess::~ProbeProcess() {
  if (in_fd_ >= 0) close(in_fd_);
  if (pid_ > 0) {
    // TERM first, so a launcher (mpirun) ends its ranks; KILL after 5 s.
    kill(pid_, SIGCONT);
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500 && waitpid(pid_, &status, WNOHANG) == 0; ++i) usleep(10'000);
    if (waitpid(pid_, &status, WNOHANG) == 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
  }
  if (reader_.joinable()) reader_.join();
  if (out_fd_ >= 0) close(out_fd_);
}

void ProbeProcess::Send(const std::string& line) {
  const std::string l = line + "\n";
  if (in_fd_ >= 0) (void)!write(in_fd_, l.data(), l.size());
}

void ProbeProcess::Signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

bool ProbeProcess::WaitFor(const std::function<bool(const std::string&)>& pred, std::chrono::milliseconds timeout,
                           std::string* line) {
  return WaitForFrom(0, pred, timeout, line);
}

bool ProbeProcess::WaitForFrom(size_t from, const std::function<bool(const std::string&)>& pred,
                               std::chrono::milliseconds timeout, std::string* line) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::unique_lock<std::mutex> l(mu_);
  size_t i = from;
  for (;;) {
    for (; i < lines_.size(); ++i) {
      if (pred(lines_[i])) {
        if (line != nullptr) *line = lines_[i];
        return true;
      }
    }
    if (eof_) return false;
    if (cv_.wait_until(l, deadline) == std::cv_status::timeout && i == lines_.size()) return false;
  }
}

std::vector<std::string> ProbeProcess::Lines() const {
  std::lock_guard<std::mutex> l(mu_);
  return lines_;
}

size_t ProbeProcess::line_count() const {
  std::lock_guard<std::mutex> l(mu_);
  return lines_.size();
}

std::string ProbeProcess::Transcript() const {
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  for (const std::string& s : lines_) out += "  | " + s + "\n";
  return out;
}

}  // namespace rdmads_testing
