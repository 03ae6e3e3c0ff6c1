#include "rdma/bootstrap/pmix_bootstrap.h"

#include <pmix.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace rdma::bootstrap {
namespace {

absl::Status PmixError(pmix_status_t rc, absl::string_view what) {
  const std::string msg = absl::StrCat(what, " failed: ", PMIx_Error_string(rc), " (", rc, ")");
  if (rc == PMIX_ERR_TIMEOUT) return absl::DeadlineExceededError(msg);
  return absl::UnavailableError(msg);
}

// Seconds for PMIX_TIMEOUT, at least 1 (0 would mean "no timeout").
int TimeoutSeconds(std::chrono::milliseconds t) {
  return static_cast<int>(std::max<int64_t>(1, (t.count() + 999) / 1000));
}

class PmixBootstrap final : public Bootstrap {
 public:
  PmixBootstrap(const pmix_proc_t& self, int size, const BootstrapOptions& options)
      : self_(self), size_(size), job_(self.nspace), options_(options), instance_(instances_.fetch_add(1)) {}
  ~PmixBootstrap() override { PMIx_Finalize(nullptr, 0); }

  int rank() const override { return static_cast<int>(self_.rank); }
  int size() const override { return size_; }
  const std::string& job() const override { return job_; }
  absl::string_view kind() const override { return "pmix"; }

  absl::StatusOr<std::vector<std::string>> AllGather(absl::string_view blob) override {
    if (!failed_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the bootstrap failed earlier and cannot be used again: ", failed_.message()));
    }
    if (blob.size() > kMaxBlobBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("AllGather blob of ", blob.size(), " bytes exceeds kMaxBlobBytes (", kMaxBlobBytes, ")"));
    }
    absl::StatusOr<std::vector<std::string>> out = Gather(blob);
    ++round_;
    if (!out.ok()) failed_ = out.status();
    return out;
  }

  absl::Status Barrier() override {
    if (!failed_.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("the bootstrap failed earlier and cannot be used again: ", failed_.message()));
    }
    absl::Status s = Fence(/*collect=*/false, "PMIx_Fence (Barrier)");
    if (!s.ok()) failed_ = s;
    return s;
  }

  [[noreturn]] void Abort(int exit_code, absl::string_view reason) override {
    const std::string msg(reason);
    std::fprintf(stderr, "rdmads bootstrap: rank %d of job '%s' aborts: %s\n", rank(), job_.c_str(), msg.c_str());
    std::fflush(stderr);
    PMIx_Abort(exit_code, msg.c_str(), nullptr, 0);  // asks the launcher to end every rank
    std::_Exit(exit_code);
  }

 private:
  absl::Status Fence(bool collect, absl::string_view what) {
    pmix_info_t info[2];
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    int seconds = TimeoutSeconds(options_.timeout);
    bool yes = true;
    PMIx_Info_load(&info[0], PMIX_TIMEOUT, &seconds, PMIX_INT);
    size_t ninfo = 1;
    if (collect) {
      PMIx_Info_load(&info[1], PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
      ninfo = 2;
    }
    const pmix_status_t rc = PMIx_Fence(nullptr, 0, info, ninfo);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
      return PmixError(rc, absl::StrCat(what, " in job '", job_, "' (rank ", rank(), " of ", size_, ", timeout ",
                                        seconds, " s)"));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::string>> Gather(absl::string_view blob) {
    // Keys are never reused: a later Bootstrap in the same process (ranks
    // create theirs in the same order) must not read an earlier one's values.
    const std::string key = absl::StrCat("rdmads.bootstrap.", instance_, ".", round_);
    // One leading byte, so an empty blob is still a non-empty byte object.
    std::string payload = absl::StrCat("b", blob);
    pmix_byte_object_t bo;
    bo.bytes = payload.data();
    bo.size = payload.size();
    pmix_value_t value;
    PMIX_VALUE_CONSTRUCT(&value);
    pmix_status_t rc = PMIx_Value_load(&value, &bo, PMIX_BYTE_OBJECT);
    if (rc == PMIX_SUCCESS) rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);
    PMIX_VALUE_DESTRUCT(&value);
    if (rc != PMIX_SUCCESS) return PmixError(rc, absl::StrCat("PMIx_Put of ", key));
    rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) return PmixError(rc, "PMIx_Commit");
    if (absl::Status s = Fence(/*collect=*/true, "PMIx_Fence (AllGather)"); !s.ok()) return s;

    std::vector<std::string> out(size_);
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    int seconds = TimeoutSeconds(options_.timeout);
    PMIx_Info_load(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
    absl::Status status;
    for (int r = 0; r < size_ && status.ok(); ++r) {
      pmix_proc_t peer;
      PMIX_LOAD_PROCID(&peer, self_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* got = nullptr;
      rc = PMIx_Get(&peer, key.c_str(), &info, 1, &got);
      if (rc != PMIX_SUCCESS) {
        status = PmixError(rc, absl::StrCat("PMIx_Get of ", key, " from rank ", r, " of job '", job_, "'"));
      } else if (got == nullptr || got->type != PMIX_BYTE_OBJECT || got->data.bo.size < 1) {
        status = absl::DataLossError(absl::StrCat("PMIx_Get of ", key, " from rank ", r,
                                                  " returned something other than this library's byte object"));
      } else {
        out[r].assign(got->data.bo.bytes + 1, got->data.bo.size - 1);
      }
      if (got != nullptr) PMIX_VALUE_RELEASE(got);
    }
    PMIX_INFO_DESTRUCT(&info);
    if (!status.ok()) return status;
    return out;
  }

  pmix_proc_t self_;
  int size_;
  std::string job_;
  BootstrapOptions options_;
  const uint64_t instance_;
  uint64_t round_ = 0;
  absl::Status failed_;
  static inline std::atomic<uint64_t> instances_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Bootstrap>> CreatePmixBootstrap(const BootstrapOptions& options) {
  pmix_proc_t self;
  PMIX_PROC_CONSTRUCT(&self);
  pmix_status_t rc = PMIx_Init(&self, nullptr, 0);
  if (rc == PMIX_SUCCESS) {
    // The PMIx client counts its Inits. Hold one reference until the
    // process exits, so that a Bootstrap's Finalize never disconnects the
    // process from the server while it lives: a rank that finalized and
    // initialized again between two Bootstraps (one after the other in one
    // process, as tests make them) would let the server complete the other
    // ranks' next fence without it (PMIX_ERR_PARTIAL_SUCCESS), and then
    // wait out its own.
    static std::once_flag hold;
    std::call_once(hold, [] {
      if (PMIx_Init(nullptr, nullptr, 0) == PMIX_SUCCESS) std::atexit([] { PMIx_Finalize(nullptr, 0); });
    });
  }
  if (rc != PMIX_SUCCESS) {
    return absl::UnavailableError(absl::StrCat(
        "PMIx_Init failed: ", PMIx_Error_string(rc), " (", rc,
        "). PMIX_NAMESPACE is set, so a PMIx launcher was expected: start the program with mpirun or "
        "srun --mpi=pmix, or unset PMIX_NAMESPACE to start without a launcher (rdma/bootstrap.h)"));
  }
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, self.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* value = nullptr;
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &value);
  if (rc != PMIX_SUCCESS || value == nullptr || value->type != PMIX_UINT32 || value->data.uint32 == 0) {
    absl::Status s = rc != PMIX_SUCCESS ? PmixError(rc, "PMIx_Get of PMIX_JOB_SIZE")
                                        : absl::DataLossError("PMIX_JOB_SIZE is not a positive uint32");
    if (value != nullptr) PMIX_VALUE_RELEASE(value);
    PMIx_Finalize(nullptr, 0);
    return s;
  }
  const int size = static_cast<int>(value->data.uint32);
  PMIX_VALUE_RELEASE(value);
  if (self.rank >= static_cast<pmix_rank_t>(size)) {
    PMIx_Finalize(nullptr, 0);
    return absl::OutOfRangeError(absl::StrCat("PMIx rank ", self.rank, " is not below the job size ", size));
  }
  return std::unique_ptr<Bootstrap>(new PmixBootstrap(self, size, options));
}

}  // namespace rdma::bootstrap
