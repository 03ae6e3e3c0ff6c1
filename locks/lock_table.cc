#include <utility>

#include "absl/strings/str_cat.h"
#include "locks/alock.h"
#include "locks/lock.h"

namespace locks {

absl::string_view LockKindName(LockKind k) {
  switch (k) {
    case LockKind::kALock: return "alock";
    case LockKind::kRdmaSpin: return "rdma-spin";
    case LockKind::kRdmaMcs: return "rdma-mcs";
    case LockKind::kLocalMcs: return "local-mcs";
  }
  return "?";
}

absl::StatusOr<LockKind> ParseLockKind(absl::string_view name) {
  for (LockKind k : {LockKind::kALock, LockKind::kRdmaSpin, LockKind::kRdmaMcs, LockKind::kLocalMcs}) {
    if (name == LockKindName(k)) return k;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown lock '", name, "' (expected alock, rdma-spin, rdma-mcs or local-mcs)"));
}

absl::string_view CohortName(Cohort c) { return c == Cohort::kLocal ? "local" : "remote"; }

absl::Status InitLock(rdma::RemotePtr lock, rdma::NodeId self, const LockInit& init) {
  if (!lock.is_local(self)) {
    return absl::InvalidArgumentError(
        absl::StrCat("InitLock: lock on node ", lock.node(), " must be initialized on its own node, not ", self));
  }
  if (lock.address() % kLockAlign != 0) {
    return absl::InvalidArgumentError(absl::StrCat("InitLock: lock address 0x", absl::Hex(lock.address()),
                                                   " is not ", kLockAlign, "-byte aligned"));
  }
  if (init.kind == LockKind::kALock) {
    const Budgets& b = init.budgets;
    if (b.local < 1 || b.local > kMaxBudget || b.remote < 1 || b.remote > kMaxBudget) {
      return absl::InvalidArgumentError(absl::StrCat("ALock budgets must be in 1..", kMaxBudget, " (got local ",
                                                     b.local, ", remote ", b.remote, ")"));
    }
    lock.local<ALockWord>()->budgets.Store(ALockWord::PackBudgets(b));
  }
  return absl::OkStatus();
}

absl::Status RequireNicAtomics(rdma::Node& node, LockKind kind, absl::string_view user) {
  if (kind == LockKind::kLocalMcs) return absl::OkStatus();  // CPU atomics only
  absl::Status s = rdma::RequireAtomics(node.device().caps(), /*need_global=*/false,
                                        absl::StrCat("device ", node.device().name(), " of node ", node.id()));
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(std::string(user), " needs NIC CAS/FAA for its ",
                                             std::string(LockKindName(kind)), " locks, but ", std::string(s.message()),
                                             " (or the local-mcs lock, single node only)"));
}

absl::StatusOr<LockTable> LockTable::Create(rdma::Node& node, size_t count, const LockInit& init) {
  if (count == 0) return absl::InvalidArgumentError("LockTable::Create: count must be positive");
  // Refuse at start-up rather than fail on the first remote Lock.
  if (absl::Status s = RequireNicAtomics(node, init.kind, "LockTable"); !s.ok()) return s;
  auto base = node.Allocate(count * kLockBytes, kLockAlign);
  if (!base.ok()) return base.status();
  LockTable t;
  t.base_ = *base;
  t.count_ = count;
  t.init_ = init;
  for (size_t i = 0; i < count; ++i) {
    if (absl::Status s = InitLock(t.at(i), node.id(), init); !s.ok()) {
      node.Free(*base, count * kLockBytes);
      return s;
    }
  }
  return t;
}

void LockTable::Destroy(rdma::Node& node) {
  if (count_ == 0) return;
  node.Free(base_, count_ * kLockBytes);
  base_ = rdma::RemotePtr();
  count_ = 0;
}

}  // namespace locks
