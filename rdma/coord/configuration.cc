#include "rdma/coord/configuration.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace rdma::coord {
namespace {

constexpr uint32_t kMagic = 0x46434452;  // "RDCF"
constexpr uint16_t kVersion = 2;

template <typename T>
void Put(std::string& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

class Reader {
 public:
  explicit Reader(absl::string_view b) : b_(b) {}
  template <typename T>
  bool Take(T* v) {
    if (b_.size() < sizeof(T)) return false;
    uint64_t x = 0;
    for (size_t i = 0; i < sizeof(T); ++i) x |= uint64_t{static_cast<uint8_t>(b_[i])} << (8 * i);
    *v = static_cast<T>(x);
    b_.remove_prefix(sizeof(T));
    return true;
  }
  bool TakeBytes(size_t n, std::string* s) {
    if (b_.size() < n) return false;
    s->assign(b_.data(), n);
    b_.remove_prefix(n);
    return true;
  }
  bool done() const { return b_.empty(); }

 private:
  absl::string_view b_;
};

}  // namespace

const Member* Configuration::Find(uint32_t rank) const {
  for (const Member& m : members) {
    if (m.rank == rank) return &m;
  }
  return nullptr;
}

bool Configuration::Has(uint32_t rank, uint64_t incarnation) const {
  const Member* m = Find(rank);
  return m != nullptr && m->incarnation == incarnation;
}

std::string Configuration::ToString() const {
  std::string s = absl::StrCat("epoch ", epoch, ":");
  for (const Member& m : members) absl::StrAppend(&s, " ", m.rank, "/", absl::StrFormat("%016x", m.incarnation));
  return s;
}

std::string EncodeConfiguration(const Configuration& c) {
  std::string out;
  Put<uint32_t>(out, kMagic);
  Put<uint16_t>(out, kVersion);
  Put<uint64_t>(out, c.epoch);
  Put<uint64_t>(out, c.start);
  Put<uint32_t>(out, static_cast<uint32_t>(c.members.size()));
  for (const Member& m : c.members) {
    Put<uint32_t>(out, m.rank);
    Put<uint64_t>(out, m.incarnation);
    Put<uint64_t>(out, m.since);
    Put<uint32_t>(out, static_cast<uint32_t>(m.card.size()));
    out += m.card;
  }
  return out;
}

absl::StatusOr<Configuration> DecodeConfiguration(absl::string_view bytes) {
  Reader r(bytes);
  uint32_t magic = 0, count = 0;
  uint16_t version = 0;
  Configuration c;
  if (!r.Take(&magic) || magic != kMagic || !r.Take(&version)) {
    return absl::InvalidArgumentError("configuration: not an rdmads configuration (another program's node?)");
  }
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("configuration: version ", version, ", this build reads ", kVersion, " (another build?)"));
  }
  if (!r.Take(&c.epoch) || !r.Take(&c.start) || !r.Take(&count)) return absl::InvalidArgumentError("configuration: truncated header");
  for (uint32_t i = 0; i < count; ++i) {
    Member m;
    uint32_t len = 0;
    if (!r.Take(&m.rank) || !r.Take(&m.incarnation) || !r.Take(&m.since) || !r.Take(&len) || !r.TakeBytes(len, &m.card)) {
      return absl::InvalidArgumentError(absl::StrCat("configuration: member ", i, " truncated"));
    }
    if (!c.members.empty() && c.members.back().rank >= m.rank) {
      return absl::InvalidArgumentError(absl::StrCat("configuration: members unsorted or rank ", m.rank, " twice"));
    }
    c.members.push_back(std::move(m));
  }
  if (!r.done()) return absl::InvalidArgumentError("configuration: trailing bytes");
  return c;
}

}  // namespace rdma::coord
