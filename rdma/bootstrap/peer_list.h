#ifndef RDMA_BOOTSTRAP_PEER_LIST_H_
#define RDMA_BOOTSTRAP_PEER_LIST_H_

// The peer-list Bootstrap (rdma/bootstrap.h) for machines without a launcher,
// and the parsing of its environment. Tests build it from a PeerListConfig.
//
// Each collective is one star round through rank 0 over TCP (Boost.Asio):
// rank 0 listens on peers[0] from Create on; every other rank connects to it,
// sends one request and reads one reply, on a fresh connection per round.
// All integers little-endian.
//   request  u32 magic 'RDBS' (0x53424452), u16 version (1), u16 cluster
//            length C, u32 round, u32 rank, u32 size, u32 blob length B;
//            then C bytes of cluster name and B bytes of blob.
//   reply    u32 magic, u16 version, u16 status (0 ok, else the
//            absl::StatusCode of the refusal), u32 round, u32 count; then
//            count x (u32 length, bytes): every rank's blob when ok, one
//            error message otherwise. Rank 0 closes after the reply.
// Rank 0 refuses (and names, to the peer and in its own error) a peer with
// another version, cluster, size or round, a rank out of range or one that
// already arrived; it keeps waiting for the right one until its deadline.
// `round` counts collectives, so a restarted process is refused too.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdma/bootstrap.h"

namespace rdma::bootstrap {

struct PeerAddress {
  std::string host;  // a name, an IPv4 literal or an IPv6 literal (no brackets)
  uint16_t port = 0;
  std::string ToString() const;  // host:port, [v6]:port
};

struct PeerListConfig {
  int rank = 0;
  std::vector<PeerAddress> peers;  // index = rank; size() is the job size
  std::string cluster = "rdmads";
  // Where the list came from, for messages ("RDMADS_PEERS", a file name).
  std::string source = "peer list";
};

inline constexpr char kDefaultCluster[] = "rdmads";

// "host:port" with an IPv6 literal in brackets ("[::1]:7000"); port 1..65535.
absl::StatusOr<PeerAddress> ParsePeerAddress(absl::string_view text);
// "a:1,b:2" (entries trimmed; none may be empty).
absl::StatusOr<std::vector<PeerAddress>> ParsePeerList(absl::string_view list);
// One host:port a line; '#' starts a comment; blank lines skipped. Errors
// name `name`:line.
absl::StatusOr<std::vector<PeerAddress>> ParsePeersText(absl::string_view text, absl::string_view name);
absl::StatusOr<std::vector<PeerAddress>> ParsePeersFile(const std::string& path);

// Reads RDMADS_NODE_ID, RDMADS_PEERS or RDMADS_PEERS_FILE, RDMADS_CLUSTER
// through `getenv` (nullopt = unset).
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
absl::StatusOr<PeerListConfig> PeerListConfigFromEnv(const EnvLookup& getenv);

class PeerListBootstrap final : public Bootstrap {
 public:
  // Checks `config`; rank 0 resolves peers[0] and listens there (port 0
  // picks a free port, see listen_port()), the others resolve peers[0].
  static absl::StatusOr<std::unique_ptr<PeerListBootstrap>> Create(const PeerListConfig& config,
                                                                   const BootstrapOptions& options = {});
  ~PeerListBootstrap() override;

  // Rank 0's bound port; 0 on other ranks.
  uint16_t listen_port() const;

  int rank() const override;
  int size() const override;
  const std::string& job() const override;
  absl::string_view kind() const override { return "peer-list"; }
  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view blob) override;
  absl::Status Barrier() override;
  [[noreturn]] void Abort(int exit_code, absl::string_view reason) override;

  struct Impl;

 private:
  explicit PeerListBootstrap(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace rdma::bootstrap

#endif  // RDMA_BOOTSTRAP_PEER_LIST_H_
