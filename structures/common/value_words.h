#ifndef STRUCTURES_COMMON_VALUE_WORDS_H_
#define STRUCTURES_COMMON_VALUE_WORDS_H_

// A structure's value in registered memory: the bytes of a trivially copyable
// V (at most 56 bytes) in ValueWords<V> 8-byte words, zero padded, so every
// word is a PlainWord that a CPU or a NIC copies whole (docs/design.md §3).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace structures {

template <typename V>
inline constexpr size_t kValueWords = sizeof(V) == 0 ? 1 : (sizeof(V) + 7) / 8;

template <typename V>
void EncodeValueWords(const V& v, uint64_t* out) {
  static_assert(std::is_trivially_copyable_v<V>);
  std::memset(out, 0, 8 * kValueWords<V>);
  std::memcpy(out, &v, sizeof(V));
}

template <typename V>
V DecodeValueWords(const uint64_t* words) {
  static_assert(std::is_trivially_copyable_v<V>);
  V v;
  std::memcpy(&v, words, sizeof(V));
  return v;
}

}  // namespace structures

#endif  // STRUCTURES_COMMON_VALUE_WORDS_H_
