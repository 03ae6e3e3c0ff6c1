#define THREADED
#include "rdma/coord/internal/zk_client.h"

#include <zookeeper/zookeeper.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace rdma::coord::internal {
namespace {

// The C client logs every failed connect attempt to stderr; keep it to
// errors, and to nothing unless RDMADS_ZK_LOG is set (a down coordinator
// would otherwise flood a job's output).
void QuietClientLog() {
  static const bool done = [] {
    const char* env = std::getenv("RDMADS_ZK_LOG");
    if (env != nullptr && *env != '\0') {
      zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
    } else {
      static FILE* sink = std::fopen("/dev/null", "w");
      if (sink != nullptr) zoo_set_log_stream(sink);
      zoo_set_debug_level(ZOO_LOG_LEVEL_ERROR);
    }
    return true;
  }();
  (void)done;
}

int CreateFlags(NodeKind k) {
  switch (k) {
    case NodeKind::kPersistent: return ZOO_PERSISTENT;
    case NodeKind::kEphemeral: return ZOO_EPHEMERAL;
    case NodeKind::kPersistentSequential: return ZOO_PERSISTENT_SEQUENTIAL;
    case NodeKind::kEphemeralSequential: return ZOO_EPHEMERAL_SEQUENTIAL;
  }
  return ZOO_PERSISTENT;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZkClient>> ZkClient::Connect(const std::string& ensemble,
                                                            std::chrono::milliseconds session_timeout,
                                                            std::chrono::milliseconds connect_timeout) {
  if (ensemble.empty()) return absl::InvalidArgumentError("coordinator: empty ensemble (want host:port[,host:port...])");
  QuietClientLog();
  std::unique_ptr<ZkClient> c(new ZkClient(ensemble));
  c->zh_ = zookeeper_init(ensemble.c_str(), &ZkClient::OnEvent, static_cast<int>(session_timeout.count()), nullptr,
                          c.get(), 0);
  if (c->zh_ == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator: cannot use ensemble '", ensemble, "': ", std::strerror(errno)));
  }
  std::unique_lock<std::mutex> l(c->mu_);
  const bool up = c->cv_.wait_for(l, connect_timeout, [&] { return c->state_ == ZOO_CONNECTED_STATE || c->expired_; });
  if (!up || c->expired_) {
    l.unlock();
    return absl::UnavailableError(absl::StrCat("coordinator: no ZooKeeper server of '", ensemble, "' answered within ",
                                               connect_timeout.count(), " ms; start one (README, \"The coordinator\") or "
                                               "check RDMADS_COORDINATOR"));
  }
  return c;
}

ZkClient::~ZkClient() {
  if (zh_ != nullptr) zookeeper_close(zh_);  // joins the client's threads; no event after this
}

void ZkClient::OnEvent(zhandle_t*, int type, int state, const char*, void* ctx) {
  auto* c = static_cast<ZkClient*>(ctx);
  std::lock_guard<std::mutex> l(c->mu_);
  if (type == ZOO_SESSION_EVENT) {
    c->state_ = state;
    if (state == ZOO_EXPIRED_SESSION_STATE) c->expired_ = true;
  }
  ++c->changes_;
  c->cv_.notify_all();
}

uint64_t ZkClient::changes() const {
  std::lock_guard<std::mutex> l(mu_);
  return changes_;
}

void ZkClient::Kick() {
  std::lock_guard<std::mutex> l(mu_);
  ++changes_;
  cv_.notify_all();
}

void ZkClient::WaitForChange(uint64_t seen, std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait_until(l, deadline, [&] { return changes_ != seen; });
}

bool ZkClient::expired() const {
  std::lock_guard<std::mutex> l(mu_);
  return expired_;
}

bool ZkClient::connected() const {
  std::lock_guard<std::mutex> l(mu_);
  return state_ == ZOO_CONNECTED_STATE && !expired_;
}

std::chrono::milliseconds ZkClient::session_timeout() const {
  return std::chrono::milliseconds(zoo_recv_timeout(zh_));
}

absl::Status ZkClient::Usable(absl::string_view call, const std::string& path) const {
  std::lock_guard<std::mutex> l(mu_);
  if (expired_) {
    return absl::AbortedError(absl::StrCat("coordinator: ", call, " ", path, ": this process's session expired"));
  }
  if (state_ != ZOO_CONNECTED_STATE) {
    return absl::UnavailableError(
        absl::StrCat("coordinator: ", call, " ", path, ": coordinator unreachable (", ensemble_, ")"));
  }
  return absl::OkStatus();
}

absl::Status ZkClient::Check(int rc, absl::string_view call, const std::string& path) const {
  if (rc == ZOK) return absl::OkStatus();
  const std::string what = absl::StrCat("coordinator: ", call, " ", path, ": ", zerror(rc));
  switch (rc) {
    case ZNONODE: return absl::NotFoundError(what);
    case ZNODEEXISTS: return absl::AlreadyExistsError(what);
    case ZBADVERSION: return absl::FailedPreconditionError(what);
    case ZNOTEMPTY: return absl::FailedPreconditionError(what);
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE: {
      std::lock_guard<std::mutex> l(mu_);
      if (rc == ZSESSIONEXPIRED) expired_ = true;
      return absl::AbortedError(what);
    }
    case ZCONNECTIONLOSS:
    case ZOPERATIONTIMEOUT:
    case ZCLOSING:
    // The ensemble's own transient states: "retry" (ZooKeeper's docs).
    case ZTHROTTLEDOP:
    case ZSESSIONMOVED:
    case ZSYSTEMERROR:
    case ZNEWCONFIGNOQUORUM:
    case ZRECONFIGINPROGRESS:
      return absl::UnavailableError(absl::StrCat(what, " (", ensemble_, ")"));
    default: return absl::InternalError(what);
  }
}

absl::StatusOr<std::string> ZkClient::Create(const std::string& path, absl::string_view data, NodeKind kind) {
  if (absl::Status s = Usable("create", path); !s.ok()) return s;
  std::string out(path.size() + 32, '\0');
  const int rc = zoo_create(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
                            CreateFlags(kind), out.data(), static_cast<int>(out.size()));
  if (absl::Status s = Check(rc, "create", path); !s.ok()) return s;
  out.resize(std::strlen(out.c_str()));
  return out;
}

absl::Status ZkClient::EnsurePath(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    absl::StatusOr<std::string> made = Create(path.substr(0, i), "", NodeKind::kPersistent);
    if (!made.ok() && !absl::IsAlreadyExists(made.status())) return made.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<ZkClient::Data> ZkClient::Get(const std::string& path, bool watch) {
  if (absl::Status s = Usable("get", path); !s.ok()) return s;
  std::string buf(4096, '\0');
  for (;;) {
    int len = static_cast<int>(buf.size());
    struct Stat st {};
    const int rc = zoo_get(zh_, path.c_str(), watch ? 1 : 0, buf.data(), &len, &st);
    if (absl::Status s = Check(rc, "get", path); !s.ok()) return s;
    if (st.dataLength > static_cast<int>(buf.size())) {
      buf.resize(static_cast<size_t>(st.dataLength));
      continue;
    }
    buf.resize(static_cast<size_t>(std::max(len, 0)));
    return Data{std::move(buf), st.version};
  }
}

absl::Status ZkClient::Set(const std::string& path, absl::string_view data, int version) {
  if (absl::Status s = Usable("set", path); !s.ok()) return s;
  return Check(zoo_set(zh_, path.c_str(), data.data(), static_cast<int>(data.size()), version), "set", path);
}

absl::Status ZkClient::Delete(const std::string& path, int version) {
  if (absl::Status s = Usable("delete", path); !s.ok()) return s;
  return Check(zoo_delete(zh_, path.c_str(), version), "delete", path);
}

absl::StatusOr<bool> ZkClient::Exists(const std::string& path, bool watch) {
  if (absl::Status s = Usable("exists", path); !s.ok()) return s;
  struct Stat st {};
  const int rc = zoo_exists(zh_, path.c_str(), watch ? 1 : 0, &st);
  if (rc == ZNONODE) return false;
  if (absl::Status s = Check(rc, "exists", path); !s.ok()) return s;
  return true;
}

absl::StatusOr<std::vector<std::string>> ZkClient::Children(const std::string& path, bool watch) {
  if (absl::Status s = Usable("children", path); !s.ok()) return s;
  String_vector kids{};
  const int rc = zoo_get_children(zh_, path.c_str(), watch ? 1 : 0, &kids);
  if (absl::Status s = Check(rc, "children", path); !s.ok()) return s;
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(kids.count));
  for (int i = 0; i < kids.count; ++i) out.emplace_back(kids.data[i]);
  deallocate_String_vector(&kids);
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status ZkClient::Multi(const std::vector<ZkOp>& ops) {
  if (ops.empty()) return absl::OkStatus();
  if (absl::Status s = Usable("multi", ops.front().path); !s.ok()) return s;
  std::vector<zoo_op_t> zops(ops.size());
  std::vector<zoo_op_result_t> results(ops.size());
  std::vector<std::string> created(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    const ZkOp& o = ops[i];
    switch (o.kind) {
      case ZkOp::kCreate:
        created[i].assign(o.path.size() + 32, '\0');
        zoo_create_op_init(&zops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                           &ZOO_OPEN_ACL_UNSAFE, CreateFlags(o.node_kind), created[i].data(),
                           static_cast<int>(created[i].size()));
        break;
      case ZkOp::kSet:
        zoo_set_op_init(&zops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()), o.version,
                        nullptr);
        break;
      case ZkOp::kDelete: zoo_delete_op_init(&zops[i], o.path.c_str(), o.version); break;
      case ZkOp::kCheck: zoo_check_op_init(&zops[i], o.path.c_str(), o.version); break;
    }
  }
  const int rc = zoo_multi(zh_, static_cast<int>(zops.size()), zops.data(), results.data());
  if (rc == ZOK) return absl::OkStatus();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (results[i].err != ZOK && results[i].err != ZRUNTIMEINCONSISTENCY) {
      return Check(results[i].err, "multi", ops[i].path);
    }
  }
  return Check(rc, "multi", ops.front().path);
}

}  // namespace rdma::coord::internal
