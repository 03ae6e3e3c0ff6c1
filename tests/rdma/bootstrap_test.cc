// The peer-list bootstrap: parsing of RDMADS_* and of peers files with every
// error path, and 3-rank runs in one process (one thread per rank, all on
// 127.0.0.1 with rank 0 on an ephemeral port): AllGather, Barrier, and the
// refusals and timeouts, each within its stated bound.

#include "rdma/bootstrap/peer_list.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rdma/bootstrap.h"

namespace rdma::bootstrap {
namespace {

using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// --- parsing ---------------------------------------------------------------

TEST(ParsePeerAddress, NamesAndLiterals) {
  auto a = ParsePeerAddress(" node-1.example:7000 ");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->host, "node-1.example");
  EXPECT_EQ(a->port, 7000);
  auto v4 = ParsePeerAddress("10.0.0.2:1");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->ToString(), "10.0.0.2:1");
  auto v6 = ParsePeerAddress("[fe80::1%eth0]:65535");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "fe80::1%eth0");
  EXPECT_EQ(v6->port, 65535);
  EXPECT_EQ(v6->ToString(), "[fe80::1%eth0]:65535");
}

TEST(ParsePeerAddress, Errors) {
  const std::map<std::string, std::string> bad = {
      {"host", "has no port"},
      {"::1:7000", "in brackets"},
      {"[::1]7000", "is not [IPv6]:port"},
      {"[::1", "is not [IPv6]:port"},
      {":7000", "empty host"},
      {"[]:7000", "empty host"},
      {"h:0", "1..65535"},
      {"h:65536", "1..65535"},
      {"h:+5", "1..65535"},
      {"h:12ab", "1..65535"},
      {"h:", "1..65535"},
      {"a b:5", "space"},
  };
  for (const auto& [text, why] : bad) {
    auto a = ParsePeerAddress(text);
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_THAT(std::string(a.status().message()), HasSubstr(why)) << text;
  }
}

TEST(ParsePeerList, CommaSeparatedIndexIsRank) {
  auto l = ParsePeerList("a:1, [::1]:2 ,10.0.0.3:3");
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[1].host, "::1");
  EXPECT_EQ((*l)[2].port, 3);
  EXPECT_THAT(std::string(ParsePeerList("a:1,,b:2").status().message()), HasSubstr("entry 1 of the peer list is empty"));
  EXPECT_THAT(std::string(ParsePeerList("a:1,b").status().message()), HasSubstr("entry 1: 'b' has no port"));
  EXPECT_THAT(std::string(ParsePeerList(" ").status().message()), HasSubstr("the peer list is empty"));
}

TEST(ParsePeersText, CommentsBlanksAndLineNumbers) {
  auto l = ParsePeersText("# rank 0 first\n\n  a:1   # head\nb:2\n\t\n[::1]:3\n", "peers.txt");
  ASSERT_TRUE(l.ok()) << l.status();
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[0].host, "a");
  EXPECT_EQ((*l)[2].host, "::1");
  auto bad = ParsePeersText("a:1\n# fine\nb:x\n", "peers.txt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("peers.txt:3: 'b:x'"));
  EXPECT_THAT(std::string(ParsePeersText("# nobody\n\n", "empty.txt").status().message()),
              HasSubstr("empty.txt has no host:port line"));
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path) << text;
  return path;
}

TEST(ParsePeersFile, ReadsAndReportsMissingFile) {
  const std::string path = WriteFile("peers_ok.txt", "127.0.0.1:7000\n127.0.0.1:7001 # rank 1\n");
  auto l = ParsePeersFile(path);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->size(), 2u);
  auto missing = ParsePeersFile(TempPath("no_such_peers.txt"));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("no_such_peers.txt"));
}

// An environment as a map; absent keys are unset.
EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(PeerListConfigFromEnv, Peers) {
  auto c = PeerListConfigFromEnv(
      Env({{"RDMADS_NODE_ID", "2"}, {"RDMADS_PEERS", "a:1,b:1,c:1"}, {"RDMADS_CLUSTER", "job-7"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 2);
  EXPECT_EQ(c->peers.size(), 3u);
  EXPECT_EQ(c->cluster, "job-7");
  EXPECT_EQ(c->source, "RDMADS_PEERS");
}

TEST(PeerListConfigFromEnv, DefaultCluster) {
  auto c = PeerListConfigFromEnv(Env({{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS", "a:1"}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->cluster, kDefaultCluster);
}

TEST(PeerListConfigFromEnv, PeersFile) {
  const std::string path = WriteFile("peers_env.txt", "# cluster x\nh0:9000\nh1:9000\n");
  auto c = PeerListConfigFromEnv(Env({{"RDMADS_NODE_ID", "1"}, {"RDMADS_PEERS_FILE", path}}));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(c->peers[1].host, "h1");
  EXPECT_THAT(c->source, HasSubstr(path));

  auto missing = PeerListConfigFromEnv(
      Env({{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS_FILE", TempPath("absent_peers.txt")}}));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("RDMADS_PEERS_FILE"));

  const std::string bad = WriteFile("peers_bad.txt", "h0:9000\nh1\n");
  auto bad_line = PeerListConfigFromEnv(Env({{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS_FILE", bad}}));
  EXPECT_EQ(bad_line.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_line.status().message()), HasSubstr("peers_bad.txt:2"));
}

TEST(PeerListConfigFromEnv, Errors) {
  struct Case {
    std::map<std::string, std::string> env;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{{"RDMADS_NODE_ID", "0"}}, absl::StatusCode::kInvalidArgument, "neither RDMADS_PEERS nor RDMADS_PEERS_FILE"},
      {{{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS", "a:1"}, {"RDMADS_PEERS_FILE", "/x"}},
       absl::StatusCode::kInvalidArgument,
       "set only one"},
      {{{"RDMADS_PEERS", "a:1,b:1"}}, absl::StatusCode::kInvalidArgument, "RDMADS_NODE_ID is not set"},
      {{{"RDMADS_NODE_ID", "one"}, {"RDMADS_PEERS", "a:1,b:1"}},
       absl::StatusCode::kInvalidArgument,
       "RDMADS_NODE_ID='one' is not a rank: set it to 0..1"},
      {{{"RDMADS_NODE_ID", "-1"}, {"RDMADS_PEERS", "a:1,b:1"}}, absl::StatusCode::kInvalidArgument, "not a rank"},
      {{{"RDMADS_NODE_ID", ""}, {"RDMADS_PEERS", "a:1,b:1"}}, absl::StatusCode::kInvalidArgument, "not a rank"},
      {{{"RDMADS_NODE_ID", "1x"}, {"RDMADS_PEERS", "a:1,b:1"}}, absl::StatusCode::kInvalidArgument, "not a rank"},
      {{{"RDMADS_NODE_ID", "2"}, {"RDMADS_PEERS", "a:1,b:1"}},
       absl::StatusCode::kOutOfRange,
       "RDMADS_NODE_ID=2 is out of range: RDMADS_PEERS lists 2 peers, so ranks are 0..1"},
      {{{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS", "a:1,"}},
       absl::StatusCode::kInvalidArgument,
       "RDMADS_PEERS='a:1,': entry 1"},
      {{{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS", ""}}, absl::StatusCode::kInvalidArgument, "RDMADS_PEERS=''"},
      {{{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS", "a:1"}, {"RDMADS_CLUSTER", "my job"}},
       absl::StatusCode::kInvalidArgument,
       "RDMADS_CLUSTER='my job' must be"},
      {{{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS", "a:1"}, {"RDMADS_CLUSTER", ""}},
       absl::StatusCode::kInvalidArgument,
       "RDMADS_CLUSTER=''"},
      {{{"RDMADS_NODE_ID", "0"}, {"RDMADS_PEERS", "a:1,b:2,a:1"}},
       absl::StatusCode::kInvalidArgument,
       "RDMADS_PEERS[0] and [2] are both a:1"},
  };
  for (const Case& c : cases) {
    auto got = PeerListConfigFromEnv(Env(c.env));
    EXPECT_EQ(got.status().code(), c.code) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.says));
  }
}

// FromEnvironment reads the real environment: set and restore around each use.
class ScopedEnv {
 public:
  explicit ScopedEnv(std::map<std::string, std::optional<std::string>> vars) {
    for (const auto& [k, v] : vars) {
      const char* old = std::getenv(k.c_str());
      saved_[k] = old ? std::optional<std::string>(old) : std::nullopt;
      if (v) {
        setenv(k.c_str(), v->c_str(), 1);
      } else {
        unsetenv(k.c_str());
      }
    }
  }
  ~ScopedEnv() {
    for (const auto& [k, v] : saved_) {
      if (v) {
        setenv(k.c_str(), v->c_str(), 1);
      } else {
        unsetenv(k.c_str());
      }
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

const std::map<std::string, std::optional<std::string>> kNoBootstrapEnv = {
    {"PMIX_NAMESPACE", std::nullopt}, {"PMIX_RANK", std::nullopt},        {"RDMADS_NODE_ID", std::nullopt},
    {"RDMADS_PEERS", std::nullopt},   {"RDMADS_PEERS_FILE", std::nullopt}, {"RDMADS_CLUSTER", std::nullopt}};

TEST(FromEnvironment, NothingSetSaysWhatToSet) {
  ScopedEnv env(kNoBootstrapEnv);
  auto b = Bootstrap::FromEnvironment();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("RDMADS_PEERS"));
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("mpirun"));
}

TEST(FromEnvironment, PmixNamespaceWithoutRank) {
  auto vars = kNoBootstrapEnv;
  vars["PMIX_NAMESPACE"] = "job";
  ScopedEnv env(vars);
  auto b = Bootstrap::FromEnvironment();
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(b.status().message()), HasSubstr("PMIX_RANK is not"));
}

TEST(FromEnvironment, SingleRankPeerList) {
  auto vars = kNoBootstrapEnv;
  vars["RDMADS_NODE_ID"] = "0";
  vars["RDMADS_PEERS"] = "127.0.0.1:1";  // one rank: nothing listens
  vars["RDMADS_CLUSTER"] = "solo";
  ScopedEnv env(vars);
  auto b = Bootstrap::FromEnvironment();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*b)->kind(), "peer-list");
  EXPECT_EQ((*b)->job(), "solo");
  EXPECT_EQ((*b)->size(), 1);
  auto all = (*b)->AllGather("me");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(*all, std::vector<std::string>{"me"});
  EXPECT_TRUE((*b)->Barrier().ok());
}

// --- runs on 127.0.0.1 -------------------------------------------------------

struct Job {
  std::unique_ptr<PeerListBootstrap> root;
  uint16_t port = 0;
};

// Rank 0 of an n-rank job on an ephemeral port; the other entries are
// placeholders (rank 0 never dials them).
PeerListConfig RootConfig(int n, const std::string& cluster) {
  PeerListConfig c;
  c.rank = 0;
  c.cluster = cluster;
  c.source = "test peers";
  c.peers.push_back({"127.0.0.1", 0});
  for (int r = 1; r < n; ++r) c.peers.push_back({"127.0.0.1", static_cast<uint16_t>(r)});
  return c;
}

PeerListConfig LeafConfig(int rank, int n, uint16_t root_port, const std::string& cluster) {
  PeerListConfig c = RootConfig(n, cluster);
  c.rank = rank;
  c.peers[0].port = root_port;
  return c;
}

BootstrapOptions Timeout(milliseconds t) {
  BootstrapOptions o;
  o.timeout = t;
  return o;
}

std::unique_ptr<PeerListBootstrap> MustCreate(const PeerListConfig& c, BootstrapOptions o = {}) {
  auto b = PeerListBootstrap::Create(c, o);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(PeerListRun, ThreeRanksAllGatherAndBarrier) {
  auto root = MustCreate(RootConfig(3, "c3"));
  ASSERT_NE(root, nullptr);
  const uint16_t port = root->listen_port();
  ASSERT_NE(port, 0);
  std::vector<std::unique_ptr<PeerListBootstrap>> ranks;
  ranks.push_back(std::move(root));
  for (int r = 1; r < 3; ++r) {
    ranks.push_back(MustCreate(LeafConfig(r, 3, port, "c3")));
    ASSERT_NE(ranks.back(), nullptr);
  }
  const std::string big(4096, 'x');
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      PeerListBootstrap& b = *ranks[r];
      auto check = [&](absl::string_view what, bool ok) {
        if (!ok && errors[r].empty()) errors[r] = absl::StrCat("rank ", r, ": ", what);
      };
      for (int round = 0; round < 5; ++round) {
        // Rank-dependent sizes, including 0 bytes and 4 KiB.
        const std::string mine = r == 1 ? big : std::string(static_cast<size_t>(r * round), static_cast<char>('a' + r));
        auto all = b.AllGather(mine);
        if (!all.ok()) return check(all.status().ToString(), false);
        check("count", all->size() == 3);
        for (int q = 0; q < 3 && all->size() == 3; ++q) {
          const std::string want =
              q == 1 ? big : std::string(static_cast<size_t>(q * round), static_cast<char>('a' + q));
          check(absl::StrCat("blob ", q, " of round ", round), (*all)[q] == want);
        }
        absl::Status s = b.Barrier();
        check(s.ToString(), s.ok());
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(ranks[r]->rank(), r);
    EXPECT_EQ(ranks[r]->size(), 3);
    EXPECT_EQ(ranks[r]->job(), "c3");
  }
}

// Runs AllGather("r<rank>") on every given bootstrap, one thread each.
std::vector<absl::StatusOr<std::vector<std::string>>> GatherAll(
    const std::vector<PeerListBootstrap*>& ranks, std::vector<double>* seconds = nullptr) {
  std::vector<absl::StatusOr<std::vector<std::string>>> out(ranks.size());
  if (seconds) seconds->assign(ranks.size(), 0);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      out[i] = ranks[i]->AllGather(absl::StrCat("r", ranks[i]->rank()));
      if (seconds) (*seconds)[i] = SecondsSince(t0);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(PeerListRun, MissingPeerTimesOutWithinTheBound) {
  const milliseconds t{1000};
  auto root = MustCreate(RootConfig(3, "c"), Timeout(t));
  auto one = MustCreate(LeafConfig(1, 3, root->listen_port(), "c"), Timeout(t));
  std::vector<double> secs;
  auto got = GatherAll({root.get(), one.get()}, &secs);
  // Rank 0: its own timeout, naming the missing rank and its address.
  EXPECT_EQ(got[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(got[0].status().message()), HasSubstr("rank(s) 2 (127.0.0.1:2) never arrived"));
  EXPECT_LT(secs[0], 1.0 + 3.0);
  // Rank 1: rank 0's verdict, relayed.
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(got[1].status().message()), HasSubstr("rank 0 reports"));
  EXPECT_THAT(std::string(got[1].status().message()), HasSubstr("never arrived"));
  EXPECT_LT(secs[1], 2 * 1.0 + 2.0 + 3.0);
  // A failed bootstrap stays failed.
  auto again = root->AllGather("x");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("failed earlier"));
}

TEST(PeerListRun, MissingRankZeroTimesOutWithinTheBound) {
  uint16_t dead_port;
  {
    auto gone = MustCreate(RootConfig(2, "c"));
    dead_port = gone->listen_port();
  }  // nobody listens there any more
  auto one = MustCreate(LeafConfig(1, 2, dead_port, "c"), Timeout(milliseconds(700)));
  const auto t0 = Clock::now();
  auto got = one->AllGather("x");
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("rank 1 could not reach rank 0 at 127.0.0.1:"));
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("Connection refused"));
  EXPECT_LT(SecondsSince(t0), 0.7 + 3.0);
}

TEST(PeerListRun, WrongClusterIsRefusedAndNamed) {
  const milliseconds t{1000};
  auto root = MustCreate(RootConfig(3, "blue"), Timeout(t));
  auto one = MustCreate(LeafConfig(1, 3, root->listen_port(), "blue"), Timeout(t));
  auto two = MustCreate(LeafConfig(2, 3, root->listen_port(), "green"), Timeout(t));
  auto got = GatherAll({root.get(), one.get(), two.get()});
  EXPECT_EQ(got[2].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(got[2].status().message()), HasSubstr("refused rank 2 from 127.0.0.1:"));
  EXPECT_THAT(std::string(got[2].status().message()), HasSubstr("cluster 'green', this is cluster 'blue'"));
  // Rank 0 waited for a rank 2 of its own cluster, and says whom it refused.
  EXPECT_EQ(got[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(got[0].status().message()), HasSubstr("refused meanwhile: rank 2 from 127.0.0.1:"));
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(PeerListRun, WrongSizeIsRefused) {
  const milliseconds t{1000};
  auto root = MustCreate(RootConfig(3, "c"), Timeout(t));
  auto one = MustCreate(LeafConfig(1, 3, root->listen_port(), "c"), Timeout(t));
  auto two = MustCreate(LeafConfig(2, 4, root->listen_port(), "c"), Timeout(t));
  auto got = GatherAll({root.get(), one.get(), two.get()});
  EXPECT_EQ(got[2].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(got[2].status().message()), HasSubstr("it counts 4 ranks, rank 0 counts 3"));
}

TEST(PeerListRun, DuplicateRankIsRefused) {
  const milliseconds t{1000};
  auto root = MustCreate(RootConfig(3, "c"), Timeout(t));
  auto one = MustCreate(LeafConfig(1, 3, root->listen_port(), "c"), Timeout(t));
  auto also_one = MustCreate(LeafConfig(1, 3, root->listen_port(), "c"), Timeout(t));
  auto got = GatherAll({root.get(), one.get(), also_one.get()});
  int refused = 0;
  for (int i : {1, 2}) {
    if (got[i].status().code() == absl::StatusCode::kAlreadyExists) {
      ++refused;
      EXPECT_THAT(std::string(got[i].status().message()), HasSubstr("two processes claim RDMADS_NODE_ID=1"));
    } else {
      EXPECT_EQ(got[i].status().code(), absl::StatusCode::kDeadlineExceeded) << got[i].status();
    }
  }
  EXPECT_EQ(refused, 1);
  EXPECT_EQ(got[0].status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(got[0].status().message()), HasSubstr("rank(s) 2 (127.0.0.1:2) never arrived"));
  EXPECT_THAT(std::string(got[0].status().message()), HasSubstr("already arrived"));
}

TEST(PeerListRun, SecondRankZeroCannotListen) {
  auto root = MustCreate(RootConfig(2, "c"));
  PeerListConfig c = RootConfig(2, "c");
  c.peers[0].port = root->listen_port();
  auto again = PeerListBootstrap::Create(c);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(again.status().message()), HasSubstr("two processes claim RDMADS_NODE_ID=0"));
}

TEST(PeerListRun, RestartedProcessIsRefused) {
  const milliseconds t{1000};
  auto root = MustCreate(RootConfig(2, "c"), Timeout(t));
  auto one = MustCreate(LeafConfig(1, 2, root->listen_port(), "c"), Timeout(t));
  auto first = GatherAll({root.get(), one.get()});
  ASSERT_TRUE(first[0].ok() && first[1].ok());
  auto reborn = MustCreate(LeafConfig(1, 2, root->listen_port(), "c"), Timeout(t));
  auto got = GatherAll({root.get(), reborn.get()});
  EXPECT_EQ(got[1].status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(got[1].status().message()), HasSubstr("collective #0, rank 0 at #1"));
}

// A raw client speaking another version: refused with a reply naming both.
TEST(PeerListRun, OtherVersionIsRefusedAndTheJobGoesOn) {
  auto root = MustCreate(RootConfig(2, "c"), Timeout(milliseconds(20'000)));
  auto one = MustCreate(LeafConfig(1, 2, root->listen_port(), "c"));
  absl::StatusOr<std::vector<std::string>> root_result;
  std::thread t([&] { root_result = root->AllGather("r0"); });

  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(root->listen_port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  // magic 'RDBS', version 2, the rest zero.
  const unsigned char head[24] = {'R', 'D', 'B', 'S', 2, 0};
  ASSERT_EQ(write(fd, head, sizeof head), static_cast<ssize_t>(sizeof head));
  std::string reply;
  char buf[512];
  for (ssize_t k; (k = read(fd, buf, sizeof buf)) > 0;) reply.append(buf, static_cast<size_t>(k));
  close(fd);
  ASSERT_GE(reply.size(), 20u);
  EXPECT_EQ(reply.substr(0, 4), "RDBS");
  EXPECT_EQ(static_cast<int>(reply[6]), static_cast<int>(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(reply, HasSubstr("speaks bootstrap version 2, rank 0 speaks 1"));

  // The real rank 1 still completes the collective.
  auto mine = one->AllGather("r1");
  t.join();
  ASSERT_TRUE(mine.ok()) << mine.status();
  ASSERT_TRUE(root_result.ok()) << root_result.status();
  EXPECT_EQ(*mine, (std::vector<std::string>{"r0", "r1"}));
}

// Hosts go through getaddrinfo: a name ("localhost", from /etc/hosts) and an
// IPv6 literal, each for rank 0's address.
TEST(PeerListRun, HostNamesAndIpv6Literals) {
  for (const std::string host : {"localhost", "::1"}) {
    PeerListConfig rc = RootConfig(2, "c");
    rc.peers[0].host = host;
    auto root = PeerListBootstrap::Create(rc);
    if (host == "::1" && !root.ok()) {
      std::printf("no IPv6 loopback here, [::1] not run: %s\n", root.status().ToString().c_str());
      continue;
    }
    ASSERT_TRUE(root.ok()) << host << ": " << root.status();
    PeerListConfig lc = LeafConfig(1, 2, (*root)->listen_port(), "c");
    lc.peers[0].host = host;
    auto leaf = MustCreate(lc);
    auto got = GatherAll({root->get(), leaf.get()});
    ASSERT_TRUE(got[0].ok()) << host << ": " << got[0].status();
    ASSERT_TRUE(got[1].ok()) << host << ": " << got[1].status();
    EXPECT_EQ(*got[1], (std::vector<std::string>{"r0", "r1"})) << host;
  }
}

TEST(PeerListRun, OversizedBlobIsRefusedLocally) {
  auto root = MustCreate(RootConfig(2, "c"));
  auto got = root->AllGather(std::string(Bootstrap::kMaxBlobBytes + 1, 'x'));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("kMaxBlobBytes"));
}

TEST(PeerListRun, CreateRejectsBadConfigs) {
  PeerListConfig c = RootConfig(2, "c");
  c.rank = 2;
  EXPECT_EQ(PeerListBootstrap::Create(c).status().code(), absl::StatusCode::kOutOfRange);
  c = LeafConfig(1, 2, 0, "c");  // a leaf must know rank 0's port
  EXPECT_THAT(std::string(PeerListBootstrap::Create(c).status().message()), HasSubstr("port 0"));
  c = RootConfig(2, "bad name");
  EXPECT_THAT(std::string(PeerListBootstrap::Create(c).status().message()), HasSubstr("RDMADS_CLUSTER"));
  c = RootConfig(2, "c");
  EXPECT_EQ(PeerListBootstrap::Create(c, Timeout(milliseconds(0))).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PeerListDeathTest, AbortExitsWithTheCodeAndReason) {
  auto root = MustCreate(RootConfig(2, "c"));
  EXPECT_EXIT(root->Abort(3, "disk on fire"), ::testing::ExitedWithCode(3), "rank 0 of cluster 'c' aborts: disk on fire");
}

}  // namespace
}  // namespace rdma::bootstrap
