// One process of a job opened with a coordinator (Cluster::Open from the
// environment), driven by agreed_death_test: it keeps writing into every
// live node's part of a hash map and prints what it sees, one line each:
//   "pid <rank> <pid>", "rejoined <rank> <epoch>" (a restarted process), "ready <rank>",
//   "epoch <rank> <E> <monotonic ns> <member ranks...>"   (each epoch applied)
//   "progress <rank> <writes>"                            (every 100 rounds)
//   "write <rank> <home> <value> <status>"                (a write that failed)
//   "fenced <rank> <monotonic ns> <status>"
//   "read <rank> <writer> <home> <value or status>"        (answer to a command)
// Commands on stdin (launcher-less runs; under mpirun stdin is empty and it
// just runs until killed):
//   "read <writer> <home>"  reads the key `writer` writes on node `home`
//   "oldwrite <home>"       puts its key on `home` with its first client
//                           (whatever the node became): "oldwrite <rank> <home> <status code>"
//   "reopen <home>"         a client of the map it opened at the start, on
//                           a new session, gets its key on `home`:
//                           "reopen <rank> <home> <value, none or status code>"
//   "check <name>"          with a new session, opens (or makes) hash map
//                           <name>, puts then gets its key on every node:
//                           "check <rank> <name> <home>=<status code>..."
//   "quit"
// It writes only to the processes its session reached: once a node rejoins
// as a new process, this session's writes skip it.
// Usage: cluster_probe SESSION_MS
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rdma/cluster.h"
#include "structures/hash_map/hash_map.h"

namespace {

int64_t MonoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void Say(const std::string& line) {
  std::fputs((line + "\n").c_str(), stdout);
  std::fflush(stdout);
}

// The key `writer` writes on node `home`: the first of writer's range there.
uint64_t KeyOf(const structures::HashMap<uint64_t>& m, int writer, int home) {
  for (uint64_t k = uint64_t(writer + 1) << 32;; ++k) {
    if (static_cast<int>(m.HomeOf(k)) == home) return k;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int session_ms = 0;
  if (argc != 2 || !absl::SimpleAtoi(argv[1], &session_ms)) {
    std::fprintf(stderr, "usage: cluster_probe SESSION_MS (the job comes from the environment)\n");
    return 2;
  }
  rdma::ClusterOptions o;
  o.coordinator_session = std::chrono::milliseconds(session_ms);
  o.node.arena_bytes = size_t{16} << 20;
  o.named_bytes = size_t{8} << 20;
  auto cluster = rdma::Cluster::Open(o);
  if (!cluster.ok()) {
    Say(absl::StrCat("error open ", cluster.status().ToString()));
    return 1;
  }
  rdma::Cluster& c = **cluster;
  const int rank = c.rank(), n = c.processes();
  Say(absl::StrCat("pid ", rank, " ", getpid()));
  if (c.membership() == nullptr) {
    Say("error no coordinator: set RDMADS_COORDINATOR");
    return 1;
  }
  auto map = structures::HashMap<uint64_t>::Open(c, "probe");
  auto thread = c.ThisThread();
  if (!map.ok() || !thread.ok()) {
    Say(absl::StrCat("error setup ", map.ok() ? thread.status().ToString() : map.status().ToString()));
    // A rejoined process stays in the job until told (its peers see it back).
    for (std::string cmd; c.rejoined() && std::getline(std::cin, cmd) && cmd != "quit";) {
    }
    return 1;
  }
  auto client = map->NewClient(**thread);
  if (!client.ok()) {
    Say(absl::StrCat("error client ", client.status().ToString()));
    return 1;
  }
  std::vector<uint64_t> mine(n), reached(n);
  for (int h = 0; h < n; ++h) {
    mine[h] = KeyOf(*map, rank, h);
    reached[h] = c.Incarnation(static_cast<rdma::NodeId>(h));
  }
  std::vector<bool> lost(n, false);  // homes whose part is lost (DataLoss)
  if (c.rejoined()) {
    Say(absl::StrCat("rejoined ", rank, " ", c.epoch()));
  } else if (absl::Status s = c.Barrier(); !s.ok()) {
    Say(absl::StrCat("error barrier ", s.ToString()));
    return 1;
  }
  Say(absl::StrCat("ready ", rank));
  uint64_t epoch = 0, writes = 0, rounds = 0;
  bool fenced = false;
  bool commands = true;  // until stdin ends (under mpirun it is empty)
  for (;;) {
    const rdma::coord::Configuration cfg = c.membership()->current();
    if (cfg.epoch != epoch) {
      epoch = cfg.epoch;
      std::string line = absl::StrCat("epoch ", rank, " ", epoch, " ", MonoNs());
      for (const auto& m : cfg.members) absl::StrAppend(&line, " ", m.rank);
      Say(line);
    }
    for (int h = 0; h < n && !fenced; ++h) {
      if (lost[h]) continue;
      if (h != rank && (!c.PeerStatus(static_cast<rdma::NodeId>(h)).ok() ||
                        c.Incarnation(static_cast<rdma::NodeId>(h)) != reached[h])) {
        continue;
      }
      const uint64_t value = (uint64_t(rank) << 48) | (writes + 1);
      auto put = (*client)->Put(mine[h], value);
      if (put.ok()) {
        ++writes;
        continue;
      }
      Say(absl::StrCat("write ", rank, " ", h, " ", value, " ", put.status().ToString()));
      lost[h] = absl::IsDataLoss(put.status());
      if (c.membership()->fenced()) {
        fenced = true;
        Say(absl::StrCat("fenced ", rank, " ", MonoNs(), " ", c.ServingStatus().ToString()));
      }
    }
    if (++rounds % 100 == 0) Say(absl::StrCat("progress ", rank, " ", writes));
    if (commands) {
      pollfd p{0, POLLIN, 0};
      if (poll(&p, 1, 5) > 0) {
        std::string cmd;
        if (!std::getline(std::cin, cmd)) {
          commands = false;
          continue;
        }
        if (cmd == "quit") break;
        int which = 0;
        if (std::sscanf(cmd.c_str(), "oldwrite %d", &which) == 1 && which >= 0 && which < n) {
          const absl::Status st = (*client)->Put(mine[which], 7).status();
          Say(absl::StrCat("oldwrite ", rank, " ", which, " ", absl::StatusCodeToString(st.code())));
          continue;
        }
        if (std::sscanf(cmd.c_str(), "reopen %d", &which) == 1 && which >= 0 && which < n) {
          std::string got;
          auto s2 = c.ThisThread();
          if (!s2.ok()) {
            got = absl::StatusCodeToString(s2.status().code());
          } else if (auto c2 = map->NewClient(**s2); !c2.ok()) {
            got = absl::StatusCodeToString(c2.status().code());
          } else {
            auto v = (*c2)->Get(mine[which]);
            got = !v.ok() ? absl::StatusCodeToString(v.status().code()) : v->has_value() ? absl::StrCat(**v) : "none";
          }
          Say(absl::StrCat("reopen ", rank, " ", which, " ", got));
          continue;
        }
        if (cmd.rfind("check ", 0) == 0) {
          const std::string name = cmd.substr(6);
          std::string line = absl::StrCat("check ", rank, " ", name);
          auto s2 = c.ThisThread();
          if (!s2.ok()) {
            Say(absl::StrCat(line, " setup ", s2.status().ToString()));
            continue;
          }
          auto m2 = structures::HashMap<uint64_t>::Open(c, name);
          if (!m2.ok()) {
            Say(absl::StrCat(line, " setup ", m2.status().ToString()));
            continue;
          }
          auto c2 = m2->NewClient(**s2);
          if (!c2.ok()) {
            Say(absl::StrCat(line, " setup ", c2.status().ToString()));
            continue;
          }
          for (int h = 0; h < n; ++h) {
            const uint64_t key = KeyOf(*m2, rank, h);
            absl::Status st = (*c2)->Put(key, 1000 + h).status();
            if (st.ok()) {
              auto got = (*c2)->Get(key);
              st = !got.ok() ? got.status()
                   : (got->has_value() && **got == uint64_t(1000 + h))
                       ? absl::OkStatus()
                       : absl::InternalError("read back another value");
            }
            absl::StrAppend(&line, " ", h, "=", absl::StatusCodeToString(st.code()));
          }
          Say(line);
          continue;
        }
        int writer = 0, home = 0;
        if (std::sscanf(cmd.c_str(), "read %d %d", &writer, &home) == 2 && writer < n && home < n) {
          auto v = (*client)->Get(KeyOf(*map, writer, home));
          Say(absl::StrCat("read ", rank, " ", writer, " ", home, " ",
                           !v.ok() ? v.status().ToString() : v->has_value() ? absl::StrCat(**v) : "none"));
        }
      }
    } else {
      usleep(5000);
    }
  }
  return 0;
}
