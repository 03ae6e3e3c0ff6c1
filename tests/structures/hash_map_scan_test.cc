// The hash map's lock-free reader routines under replayed interleavings: the
// reader scan (structures/hash_map/search.h: QuickHit, then ScanWindowsFully,
// which make ScanWindows; and ScanWindow) over
// scripted word accessors, each test fixing exactly which version of a slot
// every load returns; and the native directory lookup (native_path.h) over a
// directory in the state that a read spanning a wrap of its one-byte version
// sees. An interleaving that a stress run meets once in many runs is
// replayed on every run.

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "structures/hash_map/layout.h"
#include "structures/hash_map/search.h"
#include "structures/hash_map/native_path.h"

namespace structures::hash_map_internal {
namespace {

using L = SlotLayout<uint64_t>;
constexpr uint64_t kKey = 0x1234567890abcdefULL;
constexpr uint64_t kOtherKey = 42;

// A window's slots as plain words (zero = every slot empty, epoch 0).
struct Window {
  std::vector<uint64_t> words = std::vector<uint64_t>(L::kWindowWords, 0);
  uint64_t* slot(size_t i) { return words.data() + i * L::kWords; }
  void Put(size_t i, uint64_t key, uint64_t value) {
    uint64_t* s = slot(i);
    L::MakeSlot(s[L::kStateWord], key, &value, s);
  }
};

// A split's rewrite of an old-segment slot whose key moved out: next version,
// epoch `epoch`, empty, a checksum that matches (what the splitter stores).
std::vector<uint64_t> MovedOut(const uint64_t* old, int epoch) {
  std::vector<uint64_t> t(L::kWords, 0);
  t[L::kStateWord] = L::Restamped(old[L::kStateWord], epoch, /*occupied=*/false);
  t[L::kChecksumWord] = L::Checksum(t.data());
  return t;
}

// Loads of window `w`'s words, except that slot `racy` answers its first
// `switch_after` loads from `before` and every later load from `after`: with
// 1, a writer's stores landed between the reader's state and key loads; with
// 2, between the scan's key load and the miss path's re-read.
struct RacyWindow {
  const Window& w;
  size_t racy;
  std::vector<uint64_t> before, after;
  int switch_after = 1;
  int loads_of_racy = 0;
  uint64_t operator()(size_t slot, size_t word) {
    if (slot != racy) return w.words[slot * L::kWords + word];
    return (loads_of_racy++ < switch_after ? before : after)[word];
  }
};

Placement TwoUnits() {
  Placement p;
  p.c[0] = {0, 0};
  p.c[1] = {1, 0};
  p.start = 0;
  return p;
}

// A split moved kKey from slot 3 of this window to the new segment and then
// restamped slot 3 with the next epoch. The reader, holding the old
// directory, loaded slot 3's state before the restamp (old epoch, occupied)
// and its key word after (0): slot 3 looks like another key's. Every other
// slot still has the old epoch. The key was present (in the new segment) the
// whole time. Returns what the full scan (ScanWindowsFully) says, with or
// without the epoch check, and how many loads of slot 3 it made. (QuickHit,
// which runs first in ScanWindows, cannot meet this mix: it loads the key
// word before the state word; QuickHitRejectsWhatAFullScanMustDecide has
// its side of the race.)
Lookup::Kind ScanAcrossARestamp(bool check_epoch, int* loads_of_slot3) {
  Window w0, w1;
  w0.Put(3, kKey, 7);
  w1.Put(5, kOtherKey, 8);
  const std::vector<uint64_t> before(w0.slot(3), w0.slot(3) + L::kWords);
  RacyWindow r0{w0, 3, before, MovedOut(w0.slot(3), 1)};
  auto r1 = [&](size_t slot, size_t word) { return w1.words[slot * L::kWords + word]; };
  uint64_t found[L::kWords];
  const Lookup l = ScanWindowsFully<uint64_t>(r0, r1, kKey, TwoUnits(), 2, EpochBits(0), check_epoch,
                                              /*verify=*/true, found);
  *loads_of_slot3 = r0.loads_of_racy;
  return l.kind;
}

// "Absent" would be wrong there; the re-read of slot 3 on the miss path sees
// the new epoch: kStale (refresh the directory, read again).
TEST(HashMapScan, MissPathSeesTheEpochOfASlotRestampedMidScan) {
  int loads = 0;
  EXPECT_EQ(ScanAcrossARestamp(/*check_epoch=*/true, &loads), Lookup::kStale);
  EXPECT_GE(loads, 3);  // the state, the key, then the miss path's re-read

  // The same race through the single-window scan.
  Window w0;
  w0.Put(3, kKey, 7);
  const std::vector<uint64_t> before(w0.slot(3), w0.slot(3) + L::kWords);
  RacyWindow single{w0, 3, before, MovedOut(w0.slot(3), 1)};
  uint64_t found[L::kWords];
  const Lookup one = ScanWindow<uint64_t>(single, kKey, /*side=*/0, /*start=*/0, EpochBits(0), /*verify=*/true, found);
  EXPECT_EQ(one.kind, Lookup::kStale);
}

// The test-only mutant that ignores epochs (ShippedChecks::kReadersCheckEpoch
// = false) does say "absent" there: the check above is what catches it.
TEST(HashMapScan, WithoutTheEpochCheckTheRaceReadsAsAbsent) {
  int loads = 0;
  EXPECT_EQ(ScanAcrossARestamp(/*check_epoch=*/false, &loads), Lookup::kAbsent);
}

// (The full scan, as in ScanAcrossARestamp: a miss always reaches it, after
// a QuickHit that found no key word.) A writer that overwrote another key's
// slot between the reader's loads: the re-read does not match the checksum of what the first loads saw, but it is
// a consistent tuple of the same epoch, so the miss stands (kAbsent); and a
// slot that is torn when read again is kTorn.
TEST(HashMapScan, MissPathRereadsOtherKeysSlots) {
  Window w0, w1;
  w0.Put(2, kOtherKey, 1);
  w1.Put(6, kOtherKey + 1, 2);
  const std::vector<uint64_t> before(w0.slot(2), w0.slot(2) + L::kWords);
  Window later = w0;
  later.Put(2, kOtherKey, 99);  // same key, next version, new value
  RacyWindow r0{w0, 2, before, std::vector<uint64_t>(later.slot(2), later.slot(2) + L::kWords)};
  auto r1 = [&](size_t slot, size_t word) { return w1.words[slot * L::kWords + word]; };
  uint64_t found[L::kWords];
  EXPECT_EQ(ScanWindowsFully<uint64_t>(r0, r1, kKey, TwoUnits(), 2, EpochBits(0), true, true, found).kind,
            Lookup::kAbsent);

  std::vector<uint64_t> torn(later.slot(2), later.slot(2) + L::kWords);
  torn[L::kValueWord] ^= 1;  // one word of another write
  RacyWindow t0{w0, 2, before, torn};
  EXPECT_EQ(ScanWindowsFully<uint64_t>(t0, r1, kKey, TwoUnits(), 2, EpochBits(0), true, true, found).kind,
            Lookup::kTorn);

  // And the key arriving in that slot after the scan looked at it (the other
  // key erased, kKey put there): read again, the slot holds the key, so the
  // miss cannot stand (kTorn: read again).
  Window arrived = w0;
  L::MakeSlot(arrived.slot(2)[L::kStateWord], kOtherKey, nullptr, arrived.slot(2));
  arrived.Put(2, kKey, 5);
  RacyWindow a0{w0, 2, before, std::vector<uint64_t>(arrived.slot(2), arrived.slot(2) + L::kWords),
                /*switch_after=*/2};
  EXPECT_EQ(ScanWindowsFully<uint64_t>(a0, r1, kKey, TwoUnits(), 2, EpochBits(0), true, true, found).kind,
            Lookup::kTorn);
  EXPECT_EQ(a0.loads_of_racy, 2 + static_cast<int>(L::kWords));
}

// Without races: a hit in either window, and a clean miss.
TEST(HashMapScan, HitsAndMissesWithoutRaces) {
  Window w0, w1;
  w0.Put(1, kOtherKey, 1);
  w1.Put(12, kKey, 77);  // window 1's overflow group
  auto r0 = [&](size_t slot, size_t word) { return w0.words[slot * L::kWords + word]; };
  auto r1 = [&](size_t slot, size_t word) { return w1.words[slot * L::kWords + word]; };
  uint64_t found[L::kWords];
  const Lookup hit = ScanWindows<uint64_t>(r0, r1, kKey, TwoUnits(), 2, EpochBits(0), true, true, found);
  ASSERT_EQ(hit.kind, Lookup::kFound);
  EXPECT_EQ(hit.window, 1);
  EXPECT_EQ(hit.slot, 12);
  EXPECT_EQ(L::DecodeValue(found + L::kValueWord), 77u);
  // Reading only the first window (the test-only mutant) misses it.
  EXPECT_EQ(ScanWindows<uint64_t>(r0, r1, kKey, TwoUnits(), 1, EpochBits(0), true, true, found).kind,
            Lookup::kAbsent);
  EXPECT_EQ(ScanWindows<uint64_t>(r0, r1, kKey + 1, TwoUnits(), 2, EpochBits(0), true, true, found).kind,
            Lookup::kAbsent);
  // A reader whose directory says another epoch: kStale at the first slot.
  EXPECT_EQ(ScanWindows<uint64_t>(r0, r1, kKey, TwoUnits(), 2, EpochBits(1), true, true, found).kind,
            Lookup::kStale);
}

// QuickHit accepts a slot only by the full scan's hit rules; each race below
// makes its key word match while the rest of the slot says otherwise, and
// ScanWindows must then answer what the full scan answers. Every load of
// the racy slot after its key word returns the later version.
TEST(HashMapScan, QuickHitRejectsWhatAFullScanMustDecide) {
  Window w0, w1;
  w0.Put(3, kKey, 7);
  w1.Put(5, kOtherKey, 8);
  const std::vector<uint64_t> before(w0.slot(3), w0.slot(3) + L::kWords);
  auto r1 = [&](size_t slot, size_t word) { return w1.words[slot * L::kWords + word]; };
  uint64_t found[L::kWords];
  Lookup l;

  // Without a race it takes the key at once: one load of slot 3's key word,
  // then the slot's other words, each once.
  RacyWindow quiet{w0, 3, before, before};
  ASSERT_TRUE(QuickHit<uint64_t>(quiet, r1, kKey, TwoUnits(), 2, EpochBits(0), true, true, found, &l));
  EXPECT_EQ(l.kind, Lookup::kFound);
  EXPECT_EQ(l.slot, 3);
  EXPECT_EQ(L::DecodeValue(found + L::kValueWord), 7u);
  EXPECT_EQ(quiet.loads_of_racy, static_cast<int>(L::kWords));

  // QuickHit, or the whole ScanWindows, over window 0 with slot 3 turning
  // into `after` after its first load (QuickHit's load of its key word).
  auto quick = [&](const std::vector<uint64_t>& after, bool check_epoch, bool verify) {
    RacyWindow r0{w0, 3, before, after};
    return QuickHit<uint64_t>(r0, r1, kKey, TwoUnits(), 2, EpochBits(0), check_epoch, verify, found, &l);
  };
  auto scan = [&](const std::vector<uint64_t>& after) {
    RacyWindow r0{w0, 3, before, after};
    return ScanWindows<uint64_t>(r0, r1, kKey, TwoUnits(), 2, EpochBits(0), true, true, found).kind;
  };

  // A split moved the key out after QuickHit loaded its key word: the slot is
  // empty at the next epoch now. Not a hit; the full scan says kStale.
  const std::vector<uint64_t> moved = MovedOut(w0.slot(3), 1);
  EXPECT_FALSE(quick(moved, true, true));
  EXPECT_EQ(scan(moved), Lookup::kStale);

  // The slot was restamped with the key still in it (a split that kept the
  // key): consistent, but of the next epoch. Not a hit for a reader of epoch
  // 0 (kStale from the full scan); the test-only mutant that ignores epochs
  // takes it.
  std::vector<uint64_t> kept(before);
  kept[L::kStateWord] = L::Restamped(before[L::kStateWord], 1, /*occupied=*/true);
  kept[L::kChecksumWord] = L::Checksum(kept.data());
  EXPECT_FALSE(quick(kept, true, true));
  EXPECT_EQ(scan(kept), Lookup::kStale);
  EXPECT_TRUE(quick(kept, /*check_epoch=*/false, true));

  // An overwrite of the key landed torn after the key word: a value word of
  // the new write, the rest old. Not a hit; nor does the full scan say
  // "absent" (kTorn: read again). Without checksums (the test-only mutant)
  // QuickHit takes it.
  Window later = w0;
  later.Put(3, kKey, 99);
  std::vector<uint64_t> torn(before);
  torn[L::kValueWord] = later.slot(3)[L::kValueWord];
  EXPECT_FALSE(quick(torn, true, true));
  EXPECT_EQ(scan(torn), Lookup::kTorn);
  EXPECT_TRUE(quick(torn, true, /*verify=*/false));
}

// An empty slot's key word is 0, so for key 0 every empty slot's key word
// matches: QuickHit must not take an empty slot, and the full scan says
// "absent"; once key 0 is put, it is found where it is.
TEST(HashMapScan, QuickHitSkipsEmptySlotsForKeyZero) {
  Window w0, w1;
  auto r0 = [&](size_t slot, size_t word) { return w0.words[slot * L::kWords + word]; };
  auto r1 = [&](size_t slot, size_t word) { return w1.words[slot * L::kWords + word]; };
  uint64_t found[L::kWords];
  Lookup l;
  EXPECT_FALSE(QuickHit<uint64_t>(r0, r1, 0, TwoUnits(), 2, EpochBits(0), true, true, found, &l));
  EXPECT_EQ(ScanWindows<uint64_t>(r0, r1, 0, TwoUnits(), 2, EpochBits(0), true, true, found).kind,
            Lookup::kAbsent);
  w1.Put(2, 0, 5);
  const Lookup hit = ScanWindows<uint64_t>(r0, r1, 0, TwoUnits(), 2, EpochBits(0), true, true, found);
  ASSERT_EQ(hit.kind, Lookup::kFound);
  EXPECT_EQ(hit.window, 1);
  EXPECT_EQ(hit.slot, 2);
  EXPECT_EQ(L::DecodeValue(found + L::kValueWord), 5u);
}

// A directory of depth 5 in which segment 3 has just been split and the
// directory doubled (entry 3 -> segment 3 at depth 6, entry 35 -> the new
// segment 40 at depth 6), seen by a reader that loaded the version and the
// depth (5) before 128 publishes brought the one-byte version back to the
// same value, and the entry after. A key with directory hash 35 now lives in
// segment 40; entry 35 & 31 = 3 names segment 3 at local depth 6 > 5, which
// the lookup must not take. It retries until the depth it reads is 6.
TEST(HashMapDirectory, LookupRefusesAnEntryDeeperThanTheDepthItRead) {
  struct Dir {
    DirectoryHeader h;
    rdma::PlainWord more[63];  // entry[] really has 64 entries here
  };
  auto* d = new Dir{};  // zeroed: version 0 (even)
  rdma::PlainWord* entries = d->h.entry;
  for (size_t i = 0; i < 32; ++i) entries[i].Store(DirEntry(i, 5), std::memory_order_relaxed);
  for (size_t i = 32; i < 64; ++i) entries[i].Store(DirEntry(i - 32, 6), std::memory_order_relaxed);
  entries[3].Store(DirEntry(3, 6), std::memory_order_relaxed);
  entries[35].Store(DirEntry(40, 6), std::memory_order_relaxed);
  d->h.depth.Store(5, std::memory_order_release);  // what the reader loaded before the wrap
  absl::Notification done;
  uint64_t e = 0;
  absl::Status st;
  std::thread reader([&] {
    st = NativeDirLookup(d->h, entries, /*max_depth=*/6, /*dir=*/35, &e);
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(100)))
      << "took entry " << EntrySegment(e) << "/" << EntryDepth(e) << " with depth 5";
  d->h.depth.Store(6, std::memory_order_release);  // the publish's depth lands
  reader.join();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(EntrySegment(e), 40u);
  EXPECT_EQ(EntryDepth(e), 6);
  delete d;
}

}  // namespace
}  // namespace structures::hash_map_internal
