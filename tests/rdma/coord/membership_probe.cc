// One member of a job, driven over stdin/stdout by membership_test: it joins,
// prints what it sees, and obeys one command a line.
//   out: "inc <hex>", "joined <epoch>", "epoch <E> <rank>/<inc> ...",
//        "since <E> start <S> <rank>:<epoch that admitted it> ...",
//        "manager", "fenced <why>", and one answer per command
//   in:  "report <rank>"  ReportDeath of that rank's member in the current epoch
//        "serving"        prints "serving OK" or "serving <status>"
//        "quit"
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rdma/coord/membership.h"

namespace {
std::mutex out_mu;
void Say(const std::string& line) {
  std::lock_guard<std::mutex> l(out_mu);
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: membership_probe ENSEMBLE JOB SIZE RANK SESSION_MS\n");
    return 2;
  }
  rdma::coord::MembershipOptions o;
  o.ensemble = argv[1];
  o.job = argv[2];
  if (!absl::SimpleAtoi(argv[3], &o.size) || !absl::SimpleAtoi(argv[4], &o.rank)) return 2;
  int ms = 0;
  if (!absl::SimpleAtoi(argv[5], &ms)) return 2;
  o.session_timeout = std::chrono::milliseconds(ms);
  o.join_timeout = std::chrono::seconds(60);
  o.incarnation = ((static_cast<uint64_t>(getpid()) << 32) ^
                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) | 1;
  Say(absl::StrFormat("inc %016x", o.incarnation));
  o.card = absl::StrCat("card of ", o.rank);
  o.on_epoch = [](const rdma::coord::Configuration&, const rdma::coord::Configuration& after) {
    std::string line = absl::StrCat("epoch ", after.epoch);
    std::string since = absl::StrCat("since ", after.epoch, " start ", after.start);
    for (const auto& m : after.members) {
      absl::StrAppend(&line, absl::StrFormat(" %u/%016x", m.rank, m.incarnation));
      absl::StrAppend(&since, " ", m.rank, ":", m.since);
    }
    Say(line);
    Say(since);
  };
  o.on_fenced = [](const absl::Status& why) { Say(absl::StrCat("fenced ", why.ToString())); };
  auto m = rdma::coord::Membership::Join(o);
  if (!m.ok()) {
    Say(absl::StrCat("join-error ", m.status().ToString()));
    return 1;
  }
  Say(absl::StrCat("joined ", (*m)->current().epoch));
  std::atomic<bool> stop{false};
  std::thread watch([&] {
    bool was = false;
    while (!stop.load()) {
      const bool is = (*m)->is_manager();
      if (is && !was) Say("manager");
      was = is;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  for (std::string line; std::getline(std::cin, line);) {
    if (line == "quit") break;
    if (line == "serving") {
      Say(absl::StrCat("serving ", (*m)->Serving().ToString()));
    } else if (line.rfind("report ", 0) == 0) {
      uint32_t rank = 0;
      const auto cfg = (*m)->current();
      const auto* who = absl::SimpleAtoi(line.substr(7), &rank) ? cfg.Find(rank) : nullptr;
      if (who == nullptr) {
        Say("report error no such member");
      } else {
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status s = (*m)->ReportDeath(rank, who->incarnation, "reported by the test");
        const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
        Say(absl::StrCat("report ", s.ok() ? "ok" : s.ToString(), " in ", ms.count(), " ms"));
      }
    } else {
      Say("unknown command");
    }
  }
  stop.store(true);
  watch.join();
  return 0;
}
