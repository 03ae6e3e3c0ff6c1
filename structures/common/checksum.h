#ifndef STRUCTURES_COMMON_CHECKSUM_H_
#define STRUCTURES_COMMON_CHECKSUM_H_

// The word checksum every structure's NIC readers validate a READ with
// (docs/design.md §3: the words of one READ land in no fixed order, and on
// Soft-RoCE even a word's bytes do, so a READ racing a writer may return a
// mix of old and new words).

#include <array>
#include <cstddef>
#include <cstdint>

#include "absl/base/attributes.h"

namespace structures {

// A fixed 64-bit bijective mixer (the "splitmix64" finalizer). Fixed, unlike
// absl::Hash, so every process computes the same checksums and placements.
constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// Strong-enough 64-bit hash of `n` words, position dependent (word i is
// offset by its own constant before mixing), so a READ that mixes words of
// different writes matches the stored checksum only by a ~2^-64 accident: the
// mix differs from the write's tuple in some positions, and the sum of the
// differences of a strong bijective mixer's outputs is zero only by accident.
// The words are mixed independently and summed, so the n mixes run in
// parallel (a reader pays about two mixes of latency, not n).
ABSL_ATTRIBUTE_ALWAYS_INLINE constexpr uint64_t HashWords(const uint64_t* w, size_t n) {
  uint64_t h = 0x6a09e667f3bcc909ULL;  // arbitrary nonzero seed
#pragma GCC unroll 16
  for (size_t i = 0; i < n; ++i) h += Mix64(w[i] + (i + 1) * 0x9e3779b97f4a7c15ULL);
  return Mix64(h ^ n);
}

// HashWords of n zero words: XORed into a checksum so that all-zero memory
// (a fresh, zero-filled part) carries a valid checksum of 0.
template <size_t kWords>
constexpr uint64_t ZeroHash() {
  std::array<uint64_t, kWords> z{};
  return HashWords(z.data(), kWords);
}

}  // namespace structures

#endif  // STRUCTURES_COMMON_CHECKSUM_H_
