#include "structures/common/catalogue.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "locks/lock.h"
#include "rdma/session.h"
#include "structures/common/checksum.h"
#include "structures/common/parts.h"
#include "util/status_macros.h"

namespace structures {
namespace {

constexpr size_t kWords = Catalogue::kEntryBytes / 8;
constexpr size_t kNameWords = 6;     // words 0..5
constexpr size_t kShapeWord = 6;     // kind << 32 | value_bytes
constexpr size_t kBytesWord = 7;     // part_bytes
constexpr size_t kOffsetWord = 8;    // part offset
constexpr size_t kOptionsWord = 9;   // words 9..24: the options text
constexpr size_t kOptionsWords = 16;
constexpr size_t kEpochWord = 25;    // the creator's epoch
constexpr size_t kSumWord = kWords - 1;
static_assert(kNameWords * 8 > Catalogue::kMaxName && kOptionsWords * 8 > Catalogue::kMaxOptions);
static_assert(kOptionsWord + kOptionsWords <= kEpochWord && kEpochWord < kSumWord);

constexpr uint64_t kLockOffset = 0;
constexpr uint64_t kHeaderOffset = 64;  // word 0: next free offset (0: none used yet); word 1: entries used
constexpr uint64_t kEntriesOffset = Catalogue::kEntriesOffset;
constexpr uint64_t kFirstPart = (Catalogue::kBytes + 4095) & ~uint64_t{4095};

using EntryWords = std::array<uint64_t, kWords>;

// Never 0, so an empty (all-zero) entry is never whole.
uint64_t Sum(const EntryWords& w) { return HashWords(w.data(), kSumWord) | 1; }
bool IsWhole(const EntryWords& w) { return w[kSumWord] == Sum(w); }

std::string TextAt(const EntryWords& w, size_t first, size_t words) {
  const char* p = reinterpret_cast<const char*>(&w[first]);
  return std::string(p, strnlen(p, words * 8));
}

EntryWords Encode(const NamedSpec& spec, uint64_t offset, uint64_t epoch) {
  EntryWords w{};
  std::memcpy(&w[0], spec.name.data(), spec.name.size());
  w[kShapeWord] = (uint64_t{static_cast<uint32_t>(spec.kind)} << 32) | spec.value_bytes;
  w[kBytesWord] = spec.part_bytes;
  w[kOffsetWord] = offset;
  w[kEpochWord] = epoch;
  std::memcpy(&w[kOptionsWord], spec.options.data(), spec.options.size());
  w[kSumWord] = Sum(w);
  return w;
}

std::string Describe(StructureKind kind, uint32_t value_bytes, absl::string_view options) {
  return absl::StrCat(StructureKindName(kind), " of ", value_bytes, "-byte values with \"", options, "\"");
}

// The found entry against what the caller asked for.
absl::StatusOr<NamedParts> Match(const EntryWords& w, const NamedSpec& spec) {
  const auto kind = static_cast<StructureKind>(w[kShapeWord] >> 32);
  const auto value_bytes = static_cast<uint32_t>(w[kShapeWord]);
  const std::string options = TextAt(w, kOptionsWord, kOptionsWords);
  if (kind != spec.kind || value_bytes != spec.value_bytes || options != spec.options ||
      w[kBytesWord] != spec.part_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("\"", spec.name, "\" exists as a ",
                                                      Describe(kind, value_bytes, options), "; asked for a ",
                                                      Describe(spec.kind, spec.value_bytes, spec.options)));
  }
  return NamedParts{.offset = w[kOffsetWord], .created = false, .epoch = w[kEpochWord]};
}

struct Table {
  uint64_t next = 0;  // header word 0
  uint64_t used = 0;  // header word 1
  std::vector<EntryWords> entries;
};

// One READ of the header and every entry.
absl::StatusOr<Table> ReadTable(rdma::Session& s, rdma::RemotePtr base) {
  std::vector<uint64_t> raw((Catalogue::kBytes - kHeaderOffset) / 8);
  RETURN_IF_ERROR(s.Read(base + kHeaderOffset, raw.data(), raw.size() * 8));
  Table t;
  t.next = raw[0];
  t.used = raw[1];
  t.entries.resize(Catalogue::kEntries);
  for (int i = 0; i < Catalogue::kEntries; ++i) {
    std::memcpy(t.entries[i].data(), &raw[(kEntriesOffset - kHeaderOffset) / 8 + i * kWords], Catalogue::kEntryBytes);
  }
  return t;
}

// The whole entry named `name`; nullopt when there is none. An empty entry
// and a torn one (checksum wrong: being written, or left by a creation that
// failed) are skipped: without the lock, the caller then looks again under it.
std::optional<EntryWords> Lookup(const Table& t, absl::string_view name) {
  for (const EntryWords& w : t.entries) {
    if (!IsWhole(w)) continue;
    if (TextAt(w, 0, kNameWords) == name) return w;
  }
  return std::nullopt;
}

// A part's initial contents, built once in this process's memory (64-byte
// aligned, as the structures' lines are) and copied to the parts of nodes in
// other processes as its runs of non-zero lines (a new part is zero-filled).
class Image {
 public:
  explicit Image(size_t bytes) : lines_((bytes + 63) / 64) {
    words_ = static_cast<uint64_t*>(std::aligned_alloc(64, lines_ * 64));
    if (words_ != nullptr) std::memset(words_, 0, lines_ * 64);
  }
  ~Image() { std::free(words_); }
  Image(const Image&) = delete;
  Image& operator=(const Image&) = delete;
  uint64_t* words() const { return words_; }

  // After the image is written: finds its runs of non-zero lines, each at
  // most kMaxRun bytes (one WRITE, well inside a Session's scratch buffer).
  void FindRuns() {
    constexpr size_t kMaxRun = size_t{64} << 10;
    auto zero = [&](size_t l) {
      return std::all_of(&words_[l * 8], &words_[(l + 1) * 8], [](uint64_t x) { return x == 0; });
    };
    for (size_t i = 0; i < lines_;) {
      if (zero(i)) {
        ++i;
        continue;
      }
      size_t j = i + 1;
      while (j < lines_ && !zero(j) && (j - i) * 64 < kMaxRun) ++j;
      runs_.push_back({i, j - i});
      i = j;
    }
  }
  // Writes the runs to `part`.
  absl::Status CopyTo(rdma::Session& s, rdma::RemotePtr part) const {
    for (const auto& [first, lines] : runs_) {
      RETURN_IF_ERROR(s.Write(part + first * 64, &words_[first * 8], lines * 64));
    }
    return absl::OkStatus();
  }

 private:
  size_t lines_;
  uint64_t* words_;
  std::vector<std::pair<size_t, size_t>> runs_;  // first line, lines
};

// Under the catalogue lock: the name again, else a new entry and its parts.
// The header is written first: a creation that fails part way leaves its
// slot and its range used (an entry that stays empty or torn, which every
// lookup skips), so no later creation reuses memory it may have written.
absl::StatusOr<NamedParts> CreateLocked(rdma::Cluster& cluster, rdma::Session& s, rdma::RemotePtr base,
                                        const NamedSpec& spec, const InitNamedPart& init) {
  ASSIGN_OR_RETURN(Table t, ReadTable(s, base));
  if (std::optional<EntryWords> w = Lookup(t, spec.name)) return Match(*w, spec);
  if (t.used >= Catalogue::kEntries) {
    return absl::ResourceExhaustedError(absl::StrCat("the catalogue is full: all ", Catalogue::kEntries,
                                                     " names are used; \"", spec.name, "\" cannot be added"));
  }
  const uint64_t offset = t.next == 0 ? kFirstPart : t.next;
  const uint64_t end = (offset + spec.part_bytes + 4095) & ~uint64_t{4095};
  const size_t reserved = s.node().reserved_bytes();
  if (end > reserved) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "named structures' region of ", reserved, " bytes per node has ", reserved - std::min(reserved, offset),
        " bytes free; the ", StructureKindName(spec.kind), " \"", spec.name, "\" needs ", spec.part_bytes,
        " per node; raise rdma::ClusterOptions::named_bytes (and arena_bytes)"));
  }
  for (int n = 0; n < cluster.num_nodes(); ++n) {
    const rdma::ArenaInfo& a = s.arena(static_cast<rdma::NodeId>(n));
    if (!cluster.PeerStatus(static_cast<rdma::NodeId>(n)).ok()) continue;  // gets no part (below)
    if (end > a.length) {
      return absl::FailedPreconditionError(
          absl::StrCat("node ", n, "'s arena (", a.length, " bytes) cannot hold \"", spec.name, "\" at ", offset));
    }
  }
  // Before any part is initialized: every node that joined by this epoch
  // is let in here already (rdma::Cluster::epoch), so its part gets
  // initialized below, or the creation fails.
  const uint64_t epoch = cluster.epoch();
  const uint64_t slot = t.used;
  const std::array<uint64_t, 2> header{end, slot + 1};
  RETURN_IF_ERROR(s.Write(base + kHeaderOffset, header.data(), sizeof(header)));
  std::unique_ptr<Image> image;  // the initialized part, for nodes in other processes
  for (int n = 0; n < cluster.num_nodes(); ++n) {
    const auto id = static_cast<rdma::NodeId>(n);
    const rdma::RemotePtr part(id, s.arena(id).base + offset);
    if (!init) continue;
    if (cluster.is_local(id)) {
      RETURN_IF_ERROR(init(cluster.node(id), part));
      continue;
    }
    // A node declared dead gets no part: its keys are Unavailable, and a
    // process that rejoins as it joins after `epoch`, so its part is lost.
    if (!cluster.PeerStatus(id).ok()) continue;
    if (image == nullptr) {
      image = std::make_unique<Image>(spec.part_bytes);
      if (image->words() == nullptr) {
        return absl::ResourceExhaustedError(
            absl::StrCat("no memory for the ", spec.part_bytes, "-byte image of a new part"));
      }
      RETURN_IF_ERROR(init(s.node(), rdma::RemotePtr(s.self(), image->words())));
      image->FindRuns();
    }
    if (absl::Status copied = image->CopyTo(s, part); !copied.ok()) {
      if (!cluster.PeerStatus(id).ok()) continue;  // it died meanwhile
      return copied;
    }
  }
  const EntryWords entry = Encode(spec, offset, epoch);
  RETURN_IF_ERROR(s.Write(base + kEntriesOffset + slot * Catalogue::kEntryBytes, entry.data(), entry.size() * 8));
  return NamedParts{.offset = offset, .created = true, .epoch = epoch};
}

absl::Status CheckSpec(const NamedSpec& spec) {
  if (spec.name.empty() || spec.name.size() > Catalogue::kMaxName || spec.name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("a structure's name must be 1..", Catalogue::kMaxName,
                                                   " bytes without NUL; got \"", spec.name, "\""));
  }
  if (spec.options.size() > Catalogue::kMaxOptions) {
    return absl::InvalidArgumentError(
        absl::StrCat("options text over ", Catalogue::kMaxOptions, " bytes: \"", spec.options, "\""));
  }
  if (spec.part_bytes == 0) return absl::InvalidArgumentError("a named structure's part_bytes must be positive");
  return absl::OkStatus();
}

// Binds the calling thread back to its node when a temporary Session is done.
class RestoreThreadNode {
 public:
  RestoreThreadNode() : node_(rdma::ThisThreadNode()) {}
  ~RestoreThreadNode() { rdma::BindThisThreadToNode(node_); }

 private:
  rdma::NodeId node_;
};

}  // namespace

absl::string_view StructureKindName(StructureKind kind) {
  switch (kind) {
    case StructureKind::kHashMap:
      return "hash map";
    case StructureKind::kOrderedMap:
      return "ordered map";
    case StructureKind::kQueue:
      return "queue";
  }
  return "unknown structure";
}

absl::StatusOr<NamedParts> FindOrCreate(rdma::Cluster& cluster, const NamedSpec& spec, const InitNamedPart& init,
                                        std::optional<rdma::NodeId> from) {
  RETURN_IF_ERROR(CheckSpec(spec));
  const rdma::NodeId me = from.value_or(cluster.self());
  if (!cluster.is_local(me)) {
    return absl::InvalidArgumentError(absl::StrCat("node ", me, " is not hosted by this process"));
  }
  rdma::Node& self = cluster.node(me);
  if (self.reserved_bytes() < kFirstPart + 4096) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the cluster reserves ", self.reserved_bytes(), " bytes per node for named structures; the catalogue needs ",
        kFirstPart, " and the parts more; raise rdma::ClusterOptions::named_bytes"));
  }
  const RestoreThreadNode restore;
  ASSIGN_OR_RETURN(std::unique_ptr<rdma::Session> s, cluster.ThisThread(self.id()));
  // After the session: it can reach a restarted node 0 only once the
  // cluster let it in, and by then Restarted(0) says so.
  if (cluster.Restarted(0)) {
    return absl::DataLossError(
        "node 0, which keeps the catalogue of named structures, is a restarted process: the catalogue was lost "
        "with its memory (no replication), and named structures cannot be found or made in this job any more");
  }
  const rdma::RemotePtr base(0, s->arena(0).base);  // node 0's reserved region

  // Lock-free: a whole entry with the name answers.
  ASSIGN_OR_RETURN(Table t, ReadTable(*s, base));
  if (std::optional<EntryWords> w = Lookup(t, spec.name)) return Match(*w, spec);

  // An RDMA spin lock: every process takes it through the NIC (node 0's own
  // over loopback), and its client allocates nothing in the node's arena, so
  // opening a name never shifts this process's allocation sequence.
  locks::ClientOptions lo;
  lo.max_held = 1;
  ASSIGN_OR_RETURN(std::unique_ptr<locks::LockClient> lock,
                   locks::NewLockClient(locks::LockKind::kRdmaSpin, self, s.get(), lo));
  const rdma::RemotePtr lock_line = base + kLockOffset;
  RETURN_IF_ERROR(util::Annotate(lock->Lock(lock_line), "the catalogue's lock"));
  absl::StatusOr<NamedParts> found = CreateLocked(cluster, *s, base, spec, init);
  const absl::Status unlocked = lock->Unlock(lock_line);
  if (unlocked.ok()) return found;
  // A lock left held stops every later creation: say so with either outcome.
  if (!found.ok()) {
    return absl::Status(found.status().code(), absl::StrCat(found.status().message(), "; releasing the catalogue's lock "
                                                            "then failed too: ", unlocked.ToString()));
  }
  return absl::Status(unlocked.code(), absl::StrCat("created, but releasing the catalogue's lock failed: ",
                                                    unlocked.message()));
}

std::unique_ptr<rdma::Cluster::DeathWatch> WatchCatalogue(rdma::Cluster& cluster) {
  if (!cluster.is_local(0) || cluster.node(0).reserved_bytes() < kFirstPart) return nullptr;
  rdma::Cluster* c = &cluster;
  return cluster.WatchDeaths([c](rdma::NodeId dead) {
    RepairLocksOf(*c, c->node(0).reserved(), locks::LockKind::kRdmaSpin, {LockLines{.offset = kLockOffset}}, dead,
                  "the catalogue");
  });
}

}  // namespace structures
