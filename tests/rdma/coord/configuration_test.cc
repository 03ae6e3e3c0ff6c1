#include "rdma/coord/configuration.h"

#include "gtest/gtest.h"

namespace rdma::coord {
namespace {

TEST(ConfigurationTest, RoundTrips) {
  Configuration c{7, {{0, 0x11, "a"}, {2, 0x22, std::string("\0b", 2)}}};
  auto back = DecodeConfiguration(EncodeConfiguration(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->epoch, 7u);
  ASSERT_EQ(back->members.size(), 2u);
  EXPECT_EQ(back->members[1], c.members[1]);
  EXPECT_TRUE(back->Has(2, 0x22));
  EXPECT_FALSE(back->Has(2, 0x23));
  EXPECT_FALSE(back->Has(1, 0x11));
  EXPECT_EQ(back->ToString(), "epoch 7: 0/0000000000000011 2/0000000000000022");
}

TEST(ConfigurationTest, RefusesWhatIsNotOne) {
  const std::string good = EncodeConfiguration(Configuration{3, {{1, 5, "x"}}});
  EXPECT_FALSE(DecodeConfiguration("").ok());
  EXPECT_FALSE(DecodeConfiguration("hello world").ok());
  EXPECT_FALSE(DecodeConfiguration(good.substr(0, good.size() - 1)).ok());
  EXPECT_FALSE(DecodeConfiguration(good + "z").ok());
  std::string other_version = good;
  other_version[4] = 9;
  auto v = DecodeConfiguration(other_version);
  EXPECT_NE(v.status().message().find("version"), std::string::npos) << v.status();
  // Ranks out of order, or twice.
  const std::string twice = EncodeConfiguration(Configuration{3, {{1, 5, ""}, {1, 6, ""}}});
  EXPECT_FALSE(DecodeConfiguration(twice).ok());
}

}  // namespace
}  // namespace rdma::coord
