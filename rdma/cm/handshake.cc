#include "rdma/cm/handshake.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"

namespace rdma::cm {
namespace {

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) out_.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
  }
  void Bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  template <typename T>
  bool Get(T& v) {
    if (in_.size() < sizeof(T)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) x |= static_cast<uint64_t>(static_cast<uint8_t>(in_[i])) << (8 * i);
    v = static_cast<T>(x);
    in_.remove_prefix(sizeof(T));
    return true;
  }
  bool Bytes(void* p, size_t n) {
    if (in_.size() < n) return false;
    std::memcpy(p, in_.data(), n);
    in_.remove_prefix(n);
    return true;
  }
  size_t left() const { return in_.size(); }

 private:
  absl::string_view in_;
};

void PutHeader(Writer& w, uint8_t tag) {
  w.Put<uint32_t>(kMagic);
  w.Put<uint16_t>(kVersion);
  w.Put<uint8_t>(tag);
  w.Put<uint8_t>(0);
}

// Tags keep one message kind from being read as another.
constexpr uint8_t kTagCard = 'C', kTagRequest = 'Q', kTagAccept = 'A', kTagReject = 'R';

absl::Status GetHeader(Reader& r, uint8_t tag, absl::string_view what) {
  uint32_t magic = 0;
  uint16_t version = 0;
  uint8_t got_tag = 0, pad = 0;
  if (!r.Get(magic) || !r.Get(version) || !r.Get(got_tag) || !r.Get(pad)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is too short to be an rdmads message"));
  }
  if (magic != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat(what, " does not start with rdmads' magic (got 0x",
                                                   absl::Hex(magic), "): another program is at that address"));
  }
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is version ", version, ", this build speaks ", kVersion,
                                                   ": run the same build on every node"));
  }
  if (got_tag != tag) return absl::InvalidArgumentError(absl::StrCat(what, " is another kind of message"));
  return absl::OkStatus();
}

absl::Status Truncated(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(what, " is truncated"));
}

void PutArena(Writer& w, const ArenaInfo& a) {
  w.Put<uint32_t>(a.node);
  w.Put<uint64_t>(a.base);
  w.Put<uint64_t>(a.length);
  w.Put<uint32_t>(a.rkey);
}

bool GetArena(Reader& r, ArenaInfo& a) {
  uint32_t node = 0;
  if (!r.Get(node) || !r.Get(a.base) || !r.Get(a.length) || !r.Get(a.rkey)) return false;
  a.node = static_cast<NodeId>(node);
  return true;
}

}  // namespace

uint64_t JobHash(absl::string_view job) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : job) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t NewIncarnation() {
  std::random_device rd;
  uint64_t x = 0;
  while (x == 0) x = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return x;
}

std::string EncodeCard(const NodeCard& card) {
  Writer w;
  PutHeader(w, kTagCard);
  w.Put<uint32_t>(card.node);
  w.Put<uint64_t>(card.job_hash);
  w.Put<uint64_t>(card.incarnation);
  w.Put<uint16_t>(card.cm_port);
  w.Put<uint16_t>(static_cast<uint16_t>(card.address.size()));
  w.Bytes(card.address.data(), card.address.size());
  PutArena(w, card.arena);
  return w.Take();
}

absl::StatusOr<NodeCard> DecodeCard(absl::string_view blob) {
  Reader r(blob);
  if (absl::Status s = GetHeader(r, kTagCard, "a node card"); !s.ok()) return s;
  NodeCard c;
  uint32_t node = 0;
  uint16_t len = 0;
  if (!r.Get(node) || !r.Get(c.job_hash) || !r.Get(c.incarnation) || !r.Get(c.cm_port) || !r.Get(len)) {
    return Truncated("a node card");
  }
  c.node = static_cast<NodeId>(node);
  c.address.resize(len);
  if (!r.Bytes(c.address.data(), len) || !GetArena(r, c.arena)) return Truncated("a node card");
  return c;
}

std::string EncodeRequest(const ConnectRequest& q) {
  Writer w;
  PutHeader(w, kTagRequest);
  w.Put<uint8_t>(static_cast<uint8_t>(q.kind));
  w.Put<uint8_t>(0);
  w.Put<uint16_t>(q.lid);
  w.Put<uint16_t>(q.from);
  w.Put<uint16_t>(q.to);
  w.Put<uint64_t>(q.job_hash);
  w.Put<uint64_t>(q.from_incarnation);
  w.Put<uint64_t>(q.to_incarnation);
  w.Put<uint32_t>(q.qp_num);
  w.Put<uint32_t>(q.psn);
  return w.Take();  // 8 + 4 + 4 + 24 + 8 = 48 bytes
}

absl::StatusOr<ConnectRequest> DecodeRequest(absl::string_view bytes) {
  Reader r(bytes);
  if (absl::Status s = GetHeader(r, kTagRequest, "a connection request"); !s.ok()) return s;
  ConnectRequest q;
  uint8_t kind = 0, pad = 0;
  if (!r.Get(kind) || !r.Get(pad) || !r.Get(q.lid) || !r.Get(q.from) || !r.Get(q.to) || !r.Get(q.job_hash) ||
      !r.Get(q.from_incarnation) || !r.Get(q.to_incarnation) || !r.Get(q.qp_num) || !r.Get(q.psn)) {
    return Truncated("a connection request");
  }
  if (kind != static_cast<uint8_t>(ConnectionKind::kControl) && kind != static_cast<uint8_t>(ConnectionKind::kData)) {
    return absl::InvalidArgumentError(absl::StrCat("a connection request of unknown kind ", kind));
  }
  q.kind = static_cast<ConnectionKind>(kind);
  return q;
}

absl::Status CheckRequest(const ConnectRequest& q, const ResponderView& me) {
  if (q.job_hash != me.job_hash) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", me.self, " belongs to another job (its job hash ", absl::Hex(me.job_hash), ", the request's ",
        absl::Hex(q.job_hash), "): two services share this fabric; give each its own RDMADS_CLUSTER or launcher job"));
  }
  if (q.to != me.self) {
    return absl::FailedPreconditionError(absl::StrCat("the request is for node ", q.to, " but reached node ", me.self,
                                                      ": the peers' address lists disagree"));
  }
  if (static_cast<int>(q.from) >= me.num_nodes) {
    return absl::FailedPreconditionError(
        absl::StrCat("the request comes from node ", q.from, " but the job has ", me.num_nodes, " nodes"));
  }
  if (q.to_incarnation != me.incarnation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", me.self, " is another incarnation than the one node ", q.from,
        " knows (it was restarted): with a coordinator it is let in once the job's membership admits it, "
        "else restart the job"));
  }
  if (q.from_incarnation != me.card_incarnation_of_from) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", q.from, " is another incarnation than the one node ", me.self,
        " knows (it was restarted): with a coordinator it is let in once the job's membership admits it, else "
        "restart the job"));
  }
  if (q.kind == ConnectionKind::kData && q.qp_num == 0) {
    return absl::InvalidArgumentError(absl::StrCat("a data connection from node ", q.from, " names no QP"));
  }
  return absl::OkStatus();
}

std::string EncodeAccept(const AcceptReply& a) {
  Writer w;
  PutHeader(w, kTagAccept);
  w.Put<uint16_t>(a.node);
  w.Put<uint16_t>(a.responder.lid);
  w.Put<uint64_t>(a.incarnation);
  w.Put<uint32_t>(a.responder.qp_num);
  w.Put<uint32_t>(a.responder.psn);
  w.Bytes(a.responder.gid.data(), a.responder.gid.size());
  PutArena(w, a.arena);
  return w.Take();
}

absl::StatusOr<AcceptReply> DecodeAccept(absl::string_view bytes) {
  Reader r(bytes);
  if (absl::Status s = GetHeader(r, kTagAccept, "a connection reply"); !s.ok()) return s;
  AcceptReply a;
  if (!r.Get(a.node) || !r.Get(a.responder.lid) || !r.Get(a.incarnation) || !r.Get(a.responder.qp_num) ||
      !r.Get(a.responder.psn) || !r.Bytes(a.responder.gid.data(), a.responder.gid.size()) || !GetArena(r, a.arena)) {
    return Truncated("a connection reply");
  }
  a.responder.node = a.node;
  return a;
}

absl::Status CheckAccept(const AcceptReply& a, const NodeCard& target) {
  if (a.node != target.node || a.incarnation != target.incarnation) {
    return absl::FailedPreconditionError(absl::StrCat("node ", target.node, "'s address answered as node ", a.node,
                                                      a.node == target.node ? " of another incarnation (restarted)" : "",
                                                      ": restart the job so every node learns the current peers"));
  }
  if (a.arena.base != target.arena.base || a.arena.length != target.arena.length ||
      a.arena.rkey != target.arena.rkey) {
    return absl::FailedPreconditionError(
        absl::StrCat("node ", a.node, "'s arena in its reply differs from its card: the peer was restarted"));
  }
  return absl::OkStatus();
}

std::string EncodeReject(const absl::Status& why) {
  Writer w;
  PutHeader(w, kTagReject);
  w.Put<uint16_t>(static_cast<uint16_t>(why.code()));
  const size_t room = kMaxRejectPrivateData - 10;
  const absl::string_view msg = why.message().substr(0, room);
  w.Bytes(msg.data(), msg.size());
  return w.Take();
}

bool IsOurReject(absl::string_view bytes) {
  Reader r(bytes);
  uint16_t code = 0;
  return GetHeader(r, kTagReject, "a reject").ok() && r.Get(code) && code != 0 && code <= 16;
}

absl::Status DecodeReject(absl::string_view bytes, absl::string_view peer) {
  Reader r(bytes);
  uint16_t code = 0;
  if (!GetHeader(r, kTagReject, "a reject").ok() || !r.Get(code) || code == 0 || code > 16) {
    return absl::UnavailableError(absl::StrCat(peer, " rejected the connection without a reason (nothing listens at "
                                                     "its address and port, or the connection timed out)"));
  }
  std::string msg(r.left(), '\0');
  r.Bytes(msg.data(), msg.size());
  return absl::Status(static_cast<absl::StatusCode>(code), absl::StrCat(peer, " refused the connection: ", msg));
}

}  // namespace rdma::cm
