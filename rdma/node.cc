#include "rdma/node.h"

#include <sys/mman.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace rdma {

Node::Node(NodeId id, std::unique_ptr<Device> device) : id_(id), device_(std::move(device)) {}

absl::StatusOr<std::unique_ptr<Node>> Node::Create(NodeId id, std::unique_ptr<Device> device,
                                                   const NodeOptions& options) {
  if (device == nullptr) return absl::InvalidArgumentError("Node::Create: null device");
  if (options.arena_bytes == 0 || options.arena_bytes >= (uint64_t{1} << RemotePtr::kAddressBits)) {
    return absl::InvalidArgumentError(absl::StrCat("arena size ", options.arena_bytes, " out of range"));
  }
  if (options.reserved_bytes % 64 != 0 || options.reserved_bytes >= (uint64_t{1} << RemotePtr::kAddressBits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("reserved_bytes ", options.reserved_bytes, " must be a multiple of 64 and in range"));
  }
  const size_t total = options.arena_bytes + options.reserved_bytes;
  if (total >= (uint64_t{1} << RemotePtr::kAddressBits)) {
    return absl::InvalidArgumentError(absl::StrCat("arena_bytes ", options.arena_bytes, " + reserved_bytes ",
                                                   options.reserved_bytes, " out of range"));
  }
  std::unique_ptr<Node> node(new Node(id, std::move(device)));
  void* mem = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return absl::ResourceExhaustedError(absl::StrCat("mmap of a ", total,
                                                     "-byte arena failed: ", std::strerror(errno)));
  }
  node->arena_ = mem;
  node->arena_bytes_ = total;
  node->reserved_bytes_ = options.reserved_bytes;
  node->next_offset_ = options.reserved_bytes;
  auto mr = node->device_->RegisterMemory(mem, total,
                                          kLocalWrite | kRemoteRead | kRemoteWrite | kRemoteAtomic);
  if (!mr.ok()) return mr.status();
  node->arena_mr_ = std::move(*mr);
  auto cq = node->device_->CreateCompletionQueue(options.responder_cq_depth);
  if (!cq.ok()) return cq.status();
  node->responder_cq_ = std::move(*cq);
  return node;
}

Node::~Node() {
  {
    std::lock_guard<std::mutex> l(mu_);
    responder_qps_.clear();
  }
  responder_cq_.reset();
  arena_mr_.reset();
  if (arena_ != nullptr) munmap(arena_, arena_bytes_);
}

ArenaInfo Node::arena_info() const {
  return ArenaInfo{id_, reinterpret_cast<uint64_t>(arena_), arena_bytes_, arena_mr_->rkey()};
}

RemotePtr Node::reserved() const {
  if (reserved_bytes_ == 0) return RemotePtr();
  return RemotePtr(id_, reinterpret_cast<uint64_t>(arena_));
}

absl::StatusOr<RemotePtr> Node::Allocate(size_t bytes, size_t align) {
  if (bytes == 0 || align == 0 || (align & (align - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Allocate(", bytes, ", align ", align, ")"));
  }
  const size_t rounded = (bytes + 7) & ~size_t{7};
  uint64_t offset;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = free_lists_.find(rounded);
    if (it != free_lists_.end() && !it->second.empty() && it->second.back() % align == 0) {
      offset = it->second.back();
      it->second.pop_back();
    } else {
      const size_t start = (next_offset_ + align - 1) & ~(align - 1);
      if (start + rounded > arena_bytes_) {
        return absl::ResourceExhaustedError(
            absl::StrCat("node ", id_, ": arena of ", arena_bytes_ - reserved_bytes_, " bytes is full (asked for ", bytes,
                         "); create the node with a larger NodeOptions::arena_bytes"));
      }
      offset = start;
      next_offset_ = start + rounded;
    }
  }
  char* p = static_cast<char*>(arena_) + offset;
  std::memset(p, 0, rounded);
  return RemotePtr(id_, p);
}

void Node::Free(RemotePtr p, size_t bytes) {
  if (p.is_null()) return;
  const size_t rounded = (bytes + 7) & ~size_t{7};
  std::lock_guard<std::mutex> l(mu_);
  free_lists_[rounded].push_back(OffsetOf(p));
}

absl::StatusOr<QpEndpoint> Node::AcceptConnection(const QpEndpoint& initiator) {
  if (is_shut_down()) return absl::UnavailableError(absl::StrCat("node ", id_, " is shut down"));
  auto qp = device_->CreateQueuePair(responder_cq_.get(), QpOptions{});
  if (!qp.ok()) return qp.status();
  if (absl::Status s = (*qp)->Connect(initiator); !s.ok()) return s;
  QpEndpoint ep = (*qp)->endpoint();
  ep.node = id_;
  std::lock_guard<std::mutex> l(mu_);
  responder_qps_[ep.qp_num] = std::move(*qp);
  return ep;
}

absl::Status Node::ReleaseConnection(uint32_t responder_qp_num) {
  std::unique_ptr<QueuePair> qp;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = responder_qps_.find(responder_qp_num);
    if (it == responder_qps_.end()) {
      return absl::NotFoundError(absl::StrCat("node ", id_, " holds no responder QP ", responder_qp_num));
    }
    qp = std::move(it->second);
    responder_qps_.erase(it);
  }
  return absl::OkStatus();  // `qp` is destroyed here, outside mu_
}

size_t Node::responder_qp_count() {
  std::lock_guard<std::mutex> l(mu_);
  return responder_qps_.size();
}

void Node::Shutdown() {
  shut_down_.store(true, std::memory_order_release);
  std::lock_guard<std::mutex> l(mu_);
  responder_qps_.clear();
}

}  // namespace rdma
