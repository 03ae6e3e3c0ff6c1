#include "rdma/bootstrap/peer_list.h"

#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <utility>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace rdma::bootstrap {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr uint32_t kMagic = 0x53424452;  // "RDBS" in little-endian bytes
constexpr uint16_t kVersion = 1;
constexpr size_t kRequestHeader = 24;
constexpr size_t kReplyHeader = 16;
constexpr size_t kMaxClusterBytes = 64;
constexpr std::chrono::milliseconds kRetryPause{100};
// How much longer than rank 0 another rank waits for the reply, so that rank
// 0's verdict (who is missing) arrives before its own deadline.
constexpr std::chrono::milliseconds kReplyGrace{2000};

std::string Seconds(std::chrono::milliseconds d) {
  return absl::StrCat(static_cast<double>(d.count()) / 1000.0, " s");
}

// --- little-endian encoding ---------------------------------------------

void PutU16(std::string& out, uint16_t v) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t GetLE(const char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

struct RequestHeader {
  uint32_t magic, round, rank, size, blob_len;
  uint16_t version, cluster_len;
};

RequestHeader DecodeRequestHeader(const char* p) {
  RequestHeader h;
  h.magic = GetLE(p, 4);
  h.version = static_cast<uint16_t>(GetLE(p + 4, 2));
  h.cluster_len = static_cast<uint16_t>(GetLE(p + 6, 2));
  h.round = GetLE(p + 8, 4);
  h.rank = GetLE(p + 12, 4);
  h.size = GetLE(p + 16, 4);
  h.blob_len = GetLE(p + 20, 4);
  return h;
}

std::string EncodeRequest(uint32_t round, uint32_t rank, uint32_t size, absl::string_view cluster,
                          absl::string_view blob) {
  std::string out;
  PutU32(out, kMagic);
  PutU16(out, kVersion);
  PutU16(out, static_cast<uint16_t>(cluster.size()));
  PutU32(out, round);
  PutU32(out, rank);
  PutU32(out, size);
  PutU32(out, static_cast<uint32_t>(blob.size()));
  out.append(cluster.data(), cluster.size());
  out.append(blob.data(), blob.size());
  return out;
}

std::string EncodeReply(absl::StatusCode status, uint32_t round, const std::vector<std::string>& items) {
  std::string out;
  PutU32(out, kMagic);
  PutU16(out, kVersion);
  PutU16(out, static_cast<uint16_t>(status));
  PutU32(out, round);
  PutU32(out, static_cast<uint32_t>(items.size()));
  for (const std::string& item : items) {
    PutU32(out, static_cast<uint32_t>(item.size()));
    out += item;
  }
  return out;
}

std::string EndpointText(const tcp::endpoint& ep) {
  error_code ec;
  const std::string addr = ep.address().to_string(ec);
  if (ep.address().is_v6()) return absl::StrCat("[", addr, "]:", ep.port());
  return absl::StrCat(addr, ":", ep.port());
}

bool ValidCluster(absl::string_view c) {
  if (c.empty() || c.size() > kMaxClusterBytes) return false;
  return std::all_of(c.begin(), c.end(), [](char ch) {
    return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '_' || ch == '-';
  });
}

absl::Status ValidateConfig(const PeerListConfig& c) {
  if (c.peers.empty()) return absl::InvalidArgumentError(absl::StrCat(c.source, " lists no peers"));
  const int n = static_cast<int>(c.peers.size());
  if (c.rank < 0 || c.rank >= n) {
    return absl::OutOfRangeError(absl::StrCat("rank ", c.rank, " (RDMADS_NODE_ID) is out of range: ", c.source,
                                              " lists ", n, " peers, so ranks are 0..", n - 1));
  }
  if (!ValidCluster(c.cluster)) {
    return absl::InvalidArgumentError(absl::StrCat("cluster name '", c.cluster,
                                                   "' (RDMADS_CLUSTER) must be 1..64 characters of "
                                                   "[A-Za-z0-9._-]"));
  }
  std::map<std::string, int> seen;
  for (int i = 0; i < n; ++i) {
    const PeerAddress& p = c.peers[i];
    if (p.host.empty()) return absl::InvalidArgumentError(absl::StrCat(c.source, "[", i, "] has an empty host"));
    if (p.port == 0 && !(i == 0 && c.rank == 0)) {
      return absl::InvalidArgumentError(absl::StrCat(c.source, "[", i, "] has port 0: give a port 1..65535"));
    }
    const auto [it, fresh] = seen.emplace(p.ToString(), i);
    if (!fresh && p.port != 0) {
      return absl::InvalidArgumentError(absl::StrCat(c.source, "[", it->second, "] and [", i, "] are both ",
                                                     p.ToString(), ": every rank needs its own host:port"));
    }
  }
  return absl::OkStatus();
}

// getaddrinfo, all results (IPv4 and IPv6).
absl::StatusOr<std::vector<tcp::endpoint>> Resolve(const PeerAddress& p, absl::string_view what) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(p.port);
  const int rc = getaddrinfo(p.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve host '", p.host, "' of ", what, ": ",
                                                   gai_strerror(rc),
                                                   "; fix the name or use an IPv4/IPv6 literal"));
  }
  std::vector<tcp::endpoint> out;
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    tcp::endpoint ep;
    if (ai->ai_addrlen > ep.capacity()) continue;
    std::memcpy(ep.data(), ai->ai_addr, ai->ai_addrlen);
    ep.resize(ai->ai_addrlen);
    if (std::find(out.begin(), out.end(), ep) == out.end()) out.push_back(ep);
  }
  freeaddrinfo(res);
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("host '", p.host, "' of ", what, " has no IPv4/IPv6 address"));
  }
  return out;
}

// Runs handlers until `done()` or `deadline`; false on the deadline.
bool RunUntil(asio::io_context& io, Clock::time_point deadline, const std::function<bool()>& done) {
  io.restart();
  while (!done()) {
    const auto now = Clock::now();
    if (now >= deadline) return false;
    if (io.run_one_for(deadline - now) == 0 && io.stopped()) return done();
  }
  return true;
}

}  // namespace

std::string PeerAddress::ToString() const {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<PeerAddress> ParsePeerAddress(absl::string_view text) {
  const absl::string_view t = absl::StripAsciiWhitespace(text);
  PeerAddress out;
  absl::string_view port;
  if (absl::StartsWith(t, "[")) {
    const size_t close = t.find(']');
    if (close == absl::string_view::npos || close + 1 >= t.size() || t[close + 1] != ':') {
      return absl::InvalidArgumentError(absl::StrCat("'", t, "' is not [IPv6]:port"));
    }
    out.host = std::string(t.substr(1, close - 1));
    port = t.substr(close + 2);
  } else {
    const size_t colon = t.rfind(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("'", t, "' has no port: write host:port"));
    }
    out.host = std::string(t.substr(0, colon));
    port = t.substr(colon + 1);
    if (out.host.find(':') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", t, "': put an IPv6 literal in brackets, as [", out.host, "]:", port));
    }
  }
  if (out.host.empty()) return absl::InvalidArgumentError(absl::StrCat("'", t, "' has an empty host"));
  if (std::any_of(out.host.begin(), out.host.end(), [](char c) { return absl::ascii_isspace(c); })) {
    return absl::InvalidArgumentError(absl::StrCat("'", t, "': the host contains a space"));
  }
  uint32_t p = 0;
  if (!absl::SimpleAtoi(port, &p) || p < 1 || p > 65535 || port.empty() || !absl::ascii_isdigit(port[0])) {
    return absl::InvalidArgumentError(absl::StrCat("'", t, "': port '", port, "' is not a number in 1..65535"));
  }
  out.port = static_cast<uint16_t>(p);
  return out;
}

absl::StatusOr<std::vector<PeerAddress>> ParsePeerList(absl::string_view list) {
  std::vector<PeerAddress> out;
  if (absl::StripAsciiWhitespace(list).empty()) {
    return absl::InvalidArgumentError("the peer list is empty: give host:port,host:port,... (index = rank)");
  }
  int i = 0;
  for (absl::string_view entry : absl::StrSplit(list, ',')) {
    if (absl::StripAsciiWhitespace(entry).empty()) {
      return absl::InvalidArgumentError(absl::StrCat("entry ", i, " of the peer list is empty"));
    }
    absl::StatusOr<PeerAddress> a = ParsePeerAddress(entry);
    if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat("entry ", i, ": ", a.status().message()));
    out.push_back(*std::move(a));
    ++i;
  }
  return out;
}

absl::StatusOr<std::vector<PeerAddress>> ParsePeersText(absl::string_view text, absl::string_view name) {
  std::vector<PeerAddress> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    absl::StatusOr<PeerAddress> a = ParsePeerAddress(line);
    if (!a.ok()) return absl::InvalidArgumentError(absl::StrCat(name, ":", line_no, ": ", a.status().message()));
    out.push_back(*std::move(a));
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has no host:port line (one per rank, rank 0 first)"));
  }
  return out;
}

absl::StatusOr<std::vector<PeerAddress>> ParsePeersFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot read peers file '", path, "': ", std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading peers file '", path, "'"));
  return ParsePeersText(text.str(), path);
}

absl::StatusOr<PeerListConfig> PeerListConfigFromEnv(const EnvLookup& getenv) {
  const std::optional<std::string> node = getenv("RDMADS_NODE_ID");
  const std::optional<std::string> list = getenv("RDMADS_PEERS");
  const std::optional<std::string> file = getenv("RDMADS_PEERS_FILE");
  const std::optional<std::string> cluster = getenv("RDMADS_CLUSTER");
  PeerListConfig c;
  if (list && file) {
    return absl::InvalidArgumentError("both RDMADS_PEERS and RDMADS_PEERS_FILE are set: set only one");
  }
  if (!list && !file) {
    return absl::InvalidArgumentError(
        "neither RDMADS_PEERS nor RDMADS_PEERS_FILE is set: give the job's host:port list (index = rank), "
        "or start the program under a PMIx launcher (mpirun, srun --mpi=pmix)");
  }
  if (list) {
    absl::StatusOr<std::vector<PeerAddress>> p = ParsePeerList(*list);
    if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat("RDMADS_PEERS='", *list, "': ", p.status().message()));
    c.peers = *std::move(p);
    c.source = "RDMADS_PEERS";
  } else {
    absl::StatusOr<std::vector<PeerAddress>> p = ParsePeersFile(*file);
    if (!p.ok()) return absl::Status(p.status().code(), absl::StrCat("RDMADS_PEERS_FILE: ", p.status().message()));
    c.peers = *std::move(p);
    c.source = absl::StrCat("RDMADS_PEERS_FILE ", *file);
  }
  const int n = static_cast<int>(c.peers.size());
  if (!node) {
    return absl::InvalidArgumentError(absl::StrCat("RDMADS_NODE_ID is not set: set it to this process's rank, 0..",
                                                   n - 1, " (the index of its own entry in ", c.source, ")"));
  }
  const absl::string_view id = absl::StripAsciiWhitespace(*node);
  if (id.empty() || !absl::ascii_isdigit(id[0]) || !absl::SimpleAtoi(id, &c.rank)) {
    return absl::InvalidArgumentError(absl::StrCat("RDMADS_NODE_ID='", *node, "' is not a rank: set it to 0..", n - 1,
                                                   " (the index of this process's entry in ", c.source, ")"));
  }
  if (c.rank >= n) {
    return absl::OutOfRangeError(absl::StrCat("RDMADS_NODE_ID=", c.rank, " is out of range: ", c.source, " lists ",
                                              n, " peers, so ranks are 0..", n - 1));
  }
  if (cluster) {
    c.cluster = *cluster;
    if (!ValidCluster(c.cluster)) {
      return absl::InvalidArgumentError(absl::StrCat("RDMADS_CLUSTER='", c.cluster,
                                                     "' must be 1..64 characters of [A-Za-z0-9._-]"));
    }
  } else {
    c.cluster = kDefaultCluster;
  }
  if (absl::Status s = ValidateConfig(c); !s.ok()) return s;
  return c;
}

// --- the star ---------------------------------------------------------------

struct PeerListBootstrap::Impl {
  PeerListConfig config;
  BootstrapOptions options;
  asio::io_context io;
  std::optional<tcp::acceptor> acceptor;  // rank 0 of a job of 2 or more
  uint16_t port = 0;
  std::vector<tcp::endpoint> root;  // peers[0], on the other ranks
  uint32_t round = 0;
  absl::Status failed;  // sticky: the first failed collective's error

  int size() const { return static_cast<int>(config.peers.size()); }
  std::string RootText() const { return absl::StrCat(config.peers[0].ToString(), " (", config.source, "[0])"); }

  absl::Status Listen();
  absl::StatusOr<std::vector<std::string>> GatherAtRoot(absl::string_view blob);
  absl::StatusOr<std::vector<std::string>> GatherAtLeaf(absl::string_view blob);
};

absl::Status PeerListBootstrap::Impl::Listen() {
  absl::StatusOr<std::vector<tcp::endpoint>> eps = Resolve(config.peers[0], absl::StrCat(config.source, "[0]"));
  if (!eps.ok()) return eps.status();
  error_code last;
  for (const tcp::endpoint& ep : *eps) {
    tcp::acceptor a(io);
    error_code ec;
    a.open(ep.protocol(), ec);
    // Not inherited by programs this process starts: the port is rank 0's.
    if (!ec) ::fcntl(a.native_handle(), F_SETFD, FD_CLOEXEC);
    if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) a.bind(ep, ec);
    if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) {
      port = a.local_endpoint(ec).port();
      if (!ec) {
        acceptor.emplace(std::move(a));
        return absl::OkStatus();
      }
    }
    last = ec;
  }
  std::string hint = "check that this host is peers[0]";
  if (last == asio::error::address_in_use) {
    hint = "another process listens there: two processes claim RDMADS_NODE_ID=0, or a leftover from an "
           "earlier run; stop it or change the port";
  } else if (last == boost::system::errc::address_not_available) {
    hint = "that is not an address of this machine: is this process really rank 0 (RDMADS_NODE_ID)?";
  }
  return absl::UnavailableError(
      absl::StrCat("rank 0 cannot listen on ", RootText(), ": ", last.message(), "; ", hint));
}

absl::StatusOr<std::vector<std::string>> PeerListBootstrap::Impl::GatherAtRoot(absl::string_view blob) {
  struct Conn {
    explicit Conn(tcp::socket s) : sock(std::move(s)) {}
    tcp::socket sock;
    std::string from;
    std::array<char, kRequestHeader> head{};
    RequestHeader h{};
    std::string body;
  };
  const int n = size();
  const uint32_t this_round = round;
  std::vector<std::string> blobs(n);
  std::vector<std::shared_ptr<Conn>> members(n);
  std::vector<std::shared_ptr<Conn>> all;  // every accepted connection, to close at the end
  std::vector<std::string> refusals;
  blobs[0] = std::string(blob);
  int arrived = 1;
  bool stopping = false;
  int pending = 0;  // reply writes in flight
  std::vector<std::string> write_errors;
  asio::steady_timer pause(io);

  // Whatever happens below, no handler may outlive this frame.
  struct Cleanup {
    Impl& self;
    bool& stopping;
    asio::steady_timer& pause;
    std::vector<std::shared_ptr<Conn>>& all;
    ~Cleanup() {
      stopping = true;
      error_code ec;
      self.acceptor->cancel(ec);
      pause.cancel();
      for (auto& c : all) c->sock.close(ec);
      try {
        self.io.restart();
        self.io.run();
      } catch (...) {
      }
    }
  } cleanup{*this, stopping, pause, all};

  auto refuse = [&](const std::shared_ptr<Conn>& c, absl::StatusCode code, const std::string& why) {
    const std::string who = c->h.magic == kMagic ? absl::StrCat("rank ", c->h.rank, " from ", c->from)
                                                  : absl::StrCat("a connection from ", c->from);
    refusals.push_back(absl::StrCat(who, ": ", why));
    auto reply = std::make_shared<std::string>(EncodeReply(
        code, this_round, {absl::StrCat("rank 0 at ", RootText(), " refused ", who, ": ", why)}));
    asio::async_write(c->sock, asio::buffer(*reply), [c, reply](error_code, size_t) {
      error_code ec;
      c->sock.close(ec);
    });
  };

  auto on_body = [&](const std::shared_ptr<Conn>& c) {
    const RequestHeader& h = c->h;
    const absl::string_view cluster(c->body.data(), h.cluster_len);
    if (cluster != config.cluster) {
      return refuse(c, absl::StatusCode::kFailedPrecondition,
                    absl::StrCat("it belongs to cluster '", cluster, "', this is cluster '", config.cluster,
                                 "' (RDMADS_CLUSTER)"));
    }
    if (h.size != static_cast<uint32_t>(n)) {
      return refuse(c, absl::StatusCode::kFailedPrecondition,
                    absl::StrCat("it counts ", h.size, " ranks, rank 0 counts ", n, " (", config.source,
                                 "): the peer lists differ"));
    }
    if (h.rank == 0 || h.rank >= static_cast<uint32_t>(n)) {
      return refuse(c, absl::StatusCode::kOutOfRange,
                    absl::StrCat("rank ", h.rank, " is not one of 1..", n - 1, " (RDMADS_NODE_ID)"));
    }
    if (h.round != this_round) {
      return refuse(c, absl::StatusCode::kFailedPrecondition,
                    absl::StrCat("it is at collective #", h.round, ", rank 0 at #", this_round,
                                 ": a restarted process, or ranks calling different collectives"));
    }
    if (members[h.rank] != nullptr) {
      return refuse(c, absl::StatusCode::kAlreadyExists,
                    absl::StrCat("rank ", h.rank, " already arrived from ", members[h.rank]->from,
                                 ": two processes claim RDMADS_NODE_ID=", h.rank));
    }
    members[h.rank] = c;
    blobs[h.rank] = c->body.substr(h.cluster_len);
    ++arrived;
  };

  auto on_head = [&](const std::shared_ptr<Conn>& c) {
    c->h = DecodeRequestHeader(c->head.data());
    const RequestHeader& h = c->h;
    if (h.magic != kMagic) {
      return refuse(c, absl::StatusCode::kFailedPrecondition, "not an rdmads bootstrap request (bad magic)");
    }
    if (h.version != kVersion) {
      return refuse(c, absl::StatusCode::kFailedPrecondition,
                    absl::StrCat("it speaks bootstrap version ", h.version, ", rank 0 speaks ", kVersion,
                                 ": run the same build everywhere"));
    }
    if (h.cluster_len > kMaxClusterBytes || h.blob_len > Bootstrap::kMaxBlobBytes) {
      return refuse(c, absl::StatusCode::kInvalidArgument,
                    absl::StrCat("cluster name of ", h.cluster_len, " bytes or blob of ", h.blob_len,
                                 " bytes is too long"));
    }
    c->body.resize(size_t{h.cluster_len} + h.blob_len);
    asio::async_read(c->sock, asio::buffer(c->body), [&, c](error_code ec, size_t) {
      if (stopping) return;
      if (ec) {
        refusals.push_back(absl::StrCat("a connection from ", c->from, " broke: ", ec.message()));
        return;
      }
      on_body(c);
    });
  };

  std::function<void()> accept = [&] {
    acceptor->async_accept([&](error_code ec, tcp::socket s) {
      if (stopping) return;
      if (ec) {
        refusals.push_back(absl::StrCat("accept failed: ", ec.message()));
        pause.expires_after(kRetryPause);
        pause.async_wait([&](error_code e) {
          if (!stopping && !e) accept();
        });
        return;
      }
      auto c = std::make_shared<Conn>(std::move(s));
      error_code e;
      c->from = EndpointText(c->sock.remote_endpoint(e));
      all.push_back(c);
      asio::async_read(c->sock, asio::buffer(c->head), [&, c](error_code rec, size_t) {
        if (stopping || rec) return;
        on_head(c);
      });
      accept();
    });
  };

  const auto deadline = Clock::now() + options.timeout;
  accept();
  if (!RunUntil(io, deadline, [&] { return arrived == n; })) {
    std::vector<std::string> missing;
    for (int r = 1; r < n; ++r) {
      if (members[r] == nullptr) missing.push_back(absl::StrCat(r, " (", config.peers[r].ToString(), ")"));
    }
    std::string msg = absl::StrCat("rank 0 of cluster '", config.cluster, "' waited ", Seconds(options.timeout),
                                   " in collective #", this_round, " but rank(s) ", absl::StrJoin(missing, ", "),
                                   " never arrived");
    if (!refusals.empty()) absl::StrAppend(&msg, "; refused meanwhile: ", absl::StrJoin(refusals, "; "));
    absl::StrAppend(&msg, ". Start the missing ranks, or check their RDMADS_NODE_ID, RDMADS_PEERS and "
                          "RDMADS_CLUSTER");
    // Tell the ranks that did arrive, briefly.
    stopping = true;
    error_code ec;
    acceptor->cancel(ec);
    auto reply = std::make_shared<std::string>(
        EncodeReply(absl::StatusCode::kDeadlineExceeded, this_round, {absl::StrCat("rank 0 reports: ", msg)}));
    for (auto& m : members) {
      if (m == nullptr) continue;
      ++pending;
      asio::async_write(m->sock, asio::buffer(*reply), [&pending, m, reply](error_code, size_t) {
        --pending;
        error_code e;
        m->sock.close(e);
      });
    }
    RunUntil(io, Clock::now() + std::min<std::chrono::milliseconds>(options.timeout, std::chrono::seconds(2)),
             [&] { return pending == 0; });
    return absl::DeadlineExceededError(msg);
  }

  // Everyone is here: reply with all blobs.
  stopping = true;
  error_code ec;
  acceptor->cancel(ec);
  auto reply = std::make_shared<std::string>(EncodeReply(absl::StatusCode::kOk, this_round, blobs));
  for (int r = 1; r < n; ++r) {
    ++pending;
    std::shared_ptr<Conn> m = members[r];
    asio::async_write(m->sock, asio::buffer(*reply), [&, r, m, reply](error_code e, size_t) {
      --pending;
      if (e) write_errors.push_back(absl::StrCat("rank ", r, " at ", m->from, ": ", e.message()));
      error_code ignored;
      m->sock.shutdown(tcp::socket::shutdown_send, ignored);
      m->sock.close(ignored);
    });
  }
  if (!RunUntil(io, Clock::now() + options.timeout, [&] { return pending == 0; })) {
    write_errors.push_back(absl::StrCat(pending, " replies still unsent after ", Seconds(options.timeout)));
  }
  if (!write_errors.empty()) {
    return absl::UnavailableError(absl::StrCat("rank 0 gathered every blob of collective #", this_round,
                                               " but could not send them: ", absl::StrJoin(write_errors, "; ")));
  }
  return blobs;
}

absl::StatusOr<std::vector<std::string>> PeerListBootstrap::Impl::GatherAtLeaf(absl::string_view blob) {
  const int n = size();
  const uint32_t this_round = round;
  const std::string request = EncodeRequest(this_round, static_cast<uint32_t>(config.rank),
                                            static_cast<uint32_t>(n), config.cluster, blob);
  tcp::socket sock(io);
  asio::steady_timer pause(io);
  std::string reply;
  bool busy = false;
  error_code result;
  struct Cleanup {
    asio::io_context& io;
    tcp::socket& sock;
    asio::steady_timer& pause;
    ~Cleanup() {
      error_code ec;
      sock.close(ec);
      pause.cancel();
      try {
        io.restart();
        io.run();
      } catch (...) {
      }
    }
  } cleanup{io, sock, pause};

  // Connect, retrying while rank 0 is not up yet.
  const auto connect_deadline = Clock::now() + options.timeout;
  error_code last;
  for (;;) {
    busy = true;
    asio::async_connect(sock, root, [&](error_code ec, const tcp::endpoint&) {
      busy = false;
      result = ec;
    });
    if (!RunUntil(io, connect_deadline, [&] { return !busy; })) {
      return absl::DeadlineExceededError(
          absl::StrCat("rank ", config.rank, " could not reach rank 0 at ", RootText(), " within ",
                       Seconds(options.timeout), last ? absl::StrCat(" (last error: ", last.message(), ")") : "",
                       ": start rank 0, or check ", config.source, "[0] and the firewall"));
    }
    if (!result) break;
    last = result;
    error_code ec;
    sock.close(ec);
    busy = true;
    pause.expires_after(kRetryPause);
    pause.async_wait([&](error_code) { busy = false; });
    RunUntil(io, connect_deadline, [&] { return !busy; });
  }

  // Send the request and read the reply up to rank 0's close.
  const auto reply_deadline = Clock::now() + options.timeout + kReplyGrace;
  const size_t max_reply = kReplyHeader + static_cast<size_t>(n) * (4 + Bootstrap::kMaxBlobBytes);
  busy = true;
  asio::async_write(sock, asio::buffer(request), [&](error_code ec, size_t) {
    if (ec) {
      busy = false;
      result = ec;
      return;
    }
    asio::async_read(sock, asio::dynamic_buffer(reply, max_reply), [&](error_code rec, size_t) {
      busy = false;
      result = rec == asio::error::eof ? error_code() : rec;
    });
  });
  if (!RunUntil(io, reply_deadline, [&] { return !busy; })) {
    return absl::DeadlineExceededError(
        absl::StrCat("rank ", config.rank, " reached rank 0 at ", RootText(), " but got no reply to collective #",
                     this_round, " within ", Seconds(options.timeout + kReplyGrace),
                     ": rank 0 waits for all ranks; its own error names the missing ones"));
  }
  if (result) {
    return absl::UnavailableError(absl::StrCat("rank ", config.rank, ": the connection to rank 0 at ", RootText(),
                                               " broke in collective #", this_round, ": ", result.message(),
                                               " (", reply.size(), " reply bytes received)"));
  }

  // Parse.
  auto bad = [&](absl::string_view what) {
    return absl::DataLossError(absl::StrCat("rank ", config.rank, ": bad reply from rank 0 at ", RootText(),
                                            " in collective #", this_round, ": ", what));
  };
  if (reply.size() < kReplyHeader) return bad(absl::StrCat("only ", reply.size(), " bytes"));
  const char* p = reply.data();
  if (GetLE(p, 4) != kMagic) return bad("bad magic: is that an rdmads process?");
  const uint16_t version = static_cast<uint16_t>(GetLE(p + 4, 2));
  if (version != kVersion) {
    return absl::FailedPreconditionError(absl::StrCat("rank 0 at ", RootText(), " speaks bootstrap version ",
                                                      version, ", rank ", config.rank, " speaks ", kVersion,
                                                      ": run the same build everywhere"));
  }
  const uint16_t status = static_cast<uint16_t>(GetLE(p + 6, 2));
  const uint32_t reply_round = GetLE(p + 8, 4);
  const uint32_t count = GetLE(p + 12, 4);
  std::vector<std::string> items;
  size_t off = kReplyHeader;
  for (uint32_t i = 0; i < count; ++i) {
    if (reply.size() - off < 4) return bad("truncated");
    const uint32_t len = GetLE(p + off, 4);
    off += 4;
    if (reply.size() - off < len) return bad("truncated");
    items.emplace_back(p + off, len);
    off += len;
  }
  if (off != reply.size()) return bad("trailing bytes");
  if (status != 0) {
    return absl::Status(static_cast<absl::StatusCode>(status), items.empty() ? "refused by rank 0" : items[0]);
  }
  if (reply_round != this_round) {
    return bad(absl::StrCat("it answers collective #", reply_round, ", not #", this_round));
  }
  if (count != static_cast<uint32_t>(n)) return bad(absl::StrCat(count, " blobs for ", n, " ranks"));
  return items;
}

PeerListBootstrap::PeerListBootstrap(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PeerListBootstrap::~PeerListBootstrap() = default;

absl::StatusOr<std::unique_ptr<PeerListBootstrap>> PeerListBootstrap::Create(const PeerListConfig& config,
                                                                            const BootstrapOptions& options) {
  try {
    if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
    if (options.timeout <= std::chrono::milliseconds::zero()) {
      return absl::InvalidArgumentError("BootstrapOptions::timeout must be positive");
    }
    auto impl = std::make_unique<Impl>();
    impl->config = config;
    impl->options = options;
    if (impl->size() > 1) {
      if (config.rank == 0) {
        if (absl::Status s = impl->Listen(); !s.ok()) return s;
      } else {
        absl::StatusOr<std::vector<tcp::endpoint>> eps =
            Resolve(config.peers[0], absl::StrCat("rank 0 (", config.source, "[0])"));
        if (!eps.ok()) return eps.status();
        impl->root = *std::move(eps);
      }
    }
    return std::unique_ptr<PeerListBootstrap>(new PeerListBootstrap(std::move(impl)));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("peer-list bootstrap: ", e.what()));
  }
}

uint16_t PeerListBootstrap::listen_port() const { return impl_->port; }
int PeerListBootstrap::rank() const { return impl_->config.rank; }
int PeerListBootstrap::size() const { return impl_->size(); }
const std::string& PeerListBootstrap::job() const { return impl_->config.cluster; }

absl::StatusOr<std::vector<std::string>> PeerListBootstrap::AllGather(absl::string_view blob) {
  Impl& m = *impl_;
  if (!m.failed.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the bootstrap failed earlier and cannot be used again: ", m.failed.message()));
  }
  if (blob.size() > kMaxBlobBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("AllGather blob of ", blob.size(), " bytes exceeds kMaxBlobBytes (", kMaxBlobBytes, ")"));
  }
  absl::StatusOr<std::vector<std::string>> out;
  try {
    if (m.size() == 1) {
      out = std::vector<std::string>{std::string(blob)};
    } else {
      out = m.config.rank == 0 ? m.GatherAtRoot(blob) : m.GatherAtLeaf(blob);
    }
  } catch (const std::exception& e) {
    out = absl::InternalError(absl::StrCat("peer-list bootstrap: ", e.what()));
  }
  ++m.round;
  if (!out.ok()) m.failed = out.status();
  return out;
}

absl::Status PeerListBootstrap::Barrier() { return AllGather("").status(); }

void PeerListBootstrap::Abort(int exit_code, absl::string_view reason) {
  std::fprintf(stderr, "rdmads bootstrap: rank %d of cluster '%s' aborts: %.*s\n", rank(), job().c_str(),
               static_cast<int>(reason.size()), reason.data());
  std::fflush(stderr);
  std::_Exit(exit_code);
}

}  // namespace rdma::bootstrap
