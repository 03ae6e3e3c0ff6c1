#ifndef RDMA_VERBS_TCP_CONNECTOR_H_
#define RDMA_VERBS_TCP_CONNECTOR_H_

// A multi-process rdma::Connector: the out-of-band QpEndpoint exchange over
// TCP, for one local Node per process (e.g. one per Soft-RoCE guest).
//
// Backend-neutral: it only moves QpEndpoint/ArenaInfo bytes and calls
// Node::AcceptConnection, so it needs no libibverbs.
//
// Every process listens on its own address (peers[local node id]) and serves,
// on a background thread, one fixed-size binary request per TCP connection:
//   CONNECT  initiator QpEndpoint -> local Node::AcceptConnection -> responder
//            QpEndpoint (the responder QP is created and connected before the
//            reply, so the initiator can Connect its side and post at once)
//   ARENA    -> local Node::arena_info()
//   BARRIER  id -> records that the sender reached barrier `id`
//   DISCONNECT responder QpEndpoint -> local Node::ReleaseConnection (the
//            initiator's session closed or reconnected); NotFound if the
//            node holds no such QP
// Requests to the local node itself never touch TCP. Connecting retries
// (every 100 ms) for up to connect_timeout while a peer is still booting;
// reads and writes time out after io_timeout. Errors name the peer, its
// address and what to check. Addresses are numeric IPv4 (no DNS: these runs
// are offline); "localhost" means 127.0.0.1.
//
// Messages are little-endian and fixed-size (64-byte request, 256-byte
// reply) with a magic number and version, so mismatched builds fail cleanly.
//
// Thread-safe. Destroy Sessions that use it before it, and it before the Node.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rdma/node.h"

namespace rdma::verbs {

struct TcpPeer {
  std::string host;  // numeric IPv4, or "localhost"
  uint16_t port = 0;
};

// Parses "10.0.0.1:7471,10.0.0.2:7471" (index = node id).
absl::StatusOr<std::vector<TcpPeer>> ParseTcpPeers(absl::string_view list);

struct TcpConnectorOptions {
  // Where every node listens, by node id. peers[local id] is where this
  // process binds; port 0 there picks a free port (see listen_port()).
  std::vector<TcpPeer> peers;
  // How long to keep retrying a refused/unreachable peer (it may be booting).
  std::chrono::milliseconds connect_timeout{60'000};
  // Per request once connected (the peer creates a QP before it answers).
  std::chrono::milliseconds io_timeout{15'000};
};

class TcpConnector final : public Connector {
 public:
  // Binds and starts serving requests for `local`.
  static absl::StatusOr<std::unique_ptr<TcpConnector>> Create(Node& local, const TcpConnectorOptions& options);
  ~TcpConnector() override;  // stops serving, joins the server thread

  uint16_t listen_port() const { return listen_port_; }
  // Changes a peer's address (e.g. once a peer that bound port 0 reports it).
  void SetPeer(NodeId node, const TcpPeer& peer);

  // Connector:
  int num_nodes() const override { return num_nodes_; }
  absl::StatusOr<QpEndpoint> Connect(NodeId target, const QpEndpoint& initiator) override;
  absl::StatusOr<ArenaInfo> Arena(NodeId node) const override;
  // Releases `responder` (an endpoint Connect returned) on `target`: the
  // target destroys that responder QP. Tries to reach the target for at most
  // kDisconnectConnectTimeout (it may have exited already); errors are
  // advisory, as Connector::Disconnect says.
  absl::Status Disconnect(NodeId target, const QpEndpoint& responder) override;
  static constexpr std::chrono::milliseconds kDisconnectConnectTimeout{2000};

  // Returns once every node has called Barrier(id) (each tells every other
  // one). DeadlineExceeded naming the missing nodes after `timeout`.
  absl::Status Barrier(uint64_t id, std::chrono::milliseconds timeout);

 private:
  struct Request;
  struct Reply;
  TcpConnector(Node& local, const TcpConnectorOptions& options);
  void Serve();
  void HandleClient(int fd);
  absl::StatusOr<Reply> Call(NodeId target, const Request& req, std::chrono::steady_clock::time_point connect_deadline) const;
  TcpPeer PeerAddress(NodeId node) const;

  Node& local_;
  TcpConnectorOptions options_;
  const int num_nodes_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  uint16_t listen_port_ = 0;
  std::thread server_;

  mutable std::mutex mu_;  // peers, arena cache, barrier arrivals
  std::condition_variable barrier_cv_;
  mutable std::map<NodeId, ArenaInfo> arenas_;
  std::map<uint64_t, std::set<NodeId>> arrived_;
};

}  // namespace rdma::verbs

#endif  // RDMA_VERBS_TCP_CONNECTOR_H_
