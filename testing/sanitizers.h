#ifndef TESTING_SANITIZERS_H_
#define TESTING_SANITIZERS_H_

// Whether this build runs under a sanitizer (ASan or TSan), for tests that
// scale down work a sanitizer can find nothing in (one thread), or that a
// sanitizer slows past the test's budget:
//
//   std::vector<size_t> sizes = {16, 256};
//   if (!rdma::testing::kSanitized) sizes.push_back(65536);

namespace rdma::testing {

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace rdma::testing

#endif  // TESTING_SANITIZERS_H_
