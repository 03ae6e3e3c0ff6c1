// RemotePtr: the 16-bit node / 48-bit address packing that lets a global
// pointer live in one 8-byte word (and be moved by one RDMA READ/WRITE/CAS).

#include "rdma/remote_ptr.h"

#include <initializer_list>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace rdma {
namespace {

TEST(RemotePtr, PacksNodeAboveA48BitAddress) {
  static_assert(sizeof(RemotePtr) == 8);
  constexpr RemotePtr p(0x1234, uint64_t{0x0000'9abc'def0'1238});
  static_assert(p.node() == 0x1234);
  static_assert(p.address() == 0x9abc'def0'1238);
  EXPECT_EQ(p.raw(), 0x1234'9abc'def0'1238ull);
  // The extremes of both fields.
  constexpr RemotePtr top(0xffff, RemotePtr::kAddressMask);
  EXPECT_EQ(top.node(), 0xffff);
  EXPECT_EQ(top.address(), RemotePtr::kAddressMask);
  EXPECT_EQ(top.raw(), ~uint64_t{0});
  EXPECT_EQ(RemotePtr::kAddressMask, (uint64_t{1} << 48) - 1);
}

TEST(RemotePtr, RawRoundTripsExactly) {
  for (uint64_t raw : std::initializer_list<uint64_t>{0, 1, 0x0001'0000'0000'0000, 0xdead'beef'cafe'f00d, ~uint64_t{0}}) {
    RemotePtr p = RemotePtr::FromRaw(raw);
    EXPECT_EQ(p.raw(), raw);
    EXPECT_EQ(RemotePtr(p.node(), p.address()), p) << std::hex << raw;
  }
  int x = 0;
  RemotePtr local(7, &x);
  EXPECT_EQ(local.local<int>(), &x);
  EXPECT_EQ(RemotePtr::FromRaw(local.raw()).local<int>(), &x);
}

TEST(RemotePtr, OutOfRangeAddressBitsAreDroppedNotMixedIntoTheNode) {
  // The header's contract: the address is masked to 48 bits; bits above it
  // never change the node.
  RemotePtr p(3, uint64_t{0xffff'1234'5678'9abc});
  EXPECT_EQ(p.node(), 3);
  EXPECT_EQ(p.address(), 0x1234'5678'9abcull);
  // Arithmetic stays on the same node, wrapping within the 48-bit space.
  RemotePtr end = RemotePtr(5, RemotePtr::kAddressMask) + 1;
  EXPECT_EQ(end.node(), 5);
  EXPECT_EQ(end.address(), 0u);
  EXPECT_EQ((RemotePtr(2, 0x100) + 0x28).address(), 0x128u);
}

TEST(RemotePtr, NullIsAllZeroAndNeverLocal) {
  constexpr RemotePtr null;
  static_assert(null.is_null() && null.raw() == 0);
  EXPECT_FALSE(null.is_local(0));
  EXPECT_TRUE(RemotePtr(0, uint64_t{0}).is_null());
  EXPECT_FALSE(RemotePtr(1, uint64_t{0}).is_null());  // node 1, address 0 is not null
  EXPECT_FALSE(RemotePtr(0, uint64_t{8}).is_null());
}

TEST(RemotePtr, IsLocalAgainstAnExplicitNode) {
  RemotePtr p(4, uint64_t{0x1000});
  EXPECT_TRUE(p.is_local(4));
  EXPECT_FALSE(p.is_local(3));
  EXPECT_FALSE(p.is_local(0));
}

TEST(RemotePtr, IsLocalUsesTheCallingThreadsBinding) {
  RemotePtr on2(2, uint64_t{0x1000});
  std::thread([&] {
    EXPECT_EQ(ThisThreadNode(), 0) << "a new thread starts bound to node 0";
    EXPECT_FALSE(on2.is_local());
    BindThisThreadToNode(2);
    EXPECT_EQ(ThisThreadNode(), 2);
    EXPECT_TRUE(on2.is_local());
    // The binding is per thread: another thread does not see it.
    std::thread([&] {
      EXPECT_EQ(ThisThreadNode(), 0);
      EXPECT_FALSE(on2.is_local());
    }).join();
    BindThisThreadToNode(1);
    EXPECT_FALSE(on2.is_local());
  }).join();
}

TEST(RemotePtr, PrintsNodeAndHexAddress) {
  std::ostringstream os;
  os << RemotePtr(3, uint64_t{0xbeef}) << " " << 10;
  EXPECT_EQ(os.str(), "node3:0xbeef 10");  // the stream is left in decimal
}

}  // namespace
}  // namespace rdma
