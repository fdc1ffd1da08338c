#include "server/slot_shares.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::server {
namespace {

using ::testing::HasSubstr;

TEST(SlotSharesTest, NoKeyHoldsMoreThanItsShareAndSlotsComeBack) {
  SlotShares s("watches", 4, 2);
  std::string why;
  auto a1 = s.Acquire("a", &why), a2 = s.Acquire("a", &why);
  ASSERT_NE(a1, nullptr);
  ASSERT_NE(a2, nullptr);
  EXPECT_EQ(s.Acquire("a", &why), nullptr);
  EXPECT_THAT(why, HasSubstr("this token (a) holds 2 open watches"));
  EXPECT_THAT(why, HasSubstr("at most 2 per token"));
  auto b1 = s.Acquire("b", &why), b2 = s.Acquire("b", &why);
  ASSERT_NE(b1, nullptr);
  ASSERT_NE(b2, nullptr);
  EXPECT_EQ(s.held(), 4);
  EXPECT_EQ(s.Acquire("c", &why), nullptr);
  EXPECT_THAT(why, HasSubstr("too many open watches (4 in all)"));
  a1.reset();
  EXPECT_NE(s.Acquire("a", &why), nullptr) << "a freed slot is a's again";
  EXPECT_EQ(s.held(), 3) << "the slot above was released when its pointer went";
}

TEST(SlotSharesTest, TheDefaultShareIsAQuarterAndTheEmptyKeyHasOnlyTheTotal) {
  SlotShares s("binding waits", 8, 0);
  EXPECT_EQ(s.per_key(), 2);
  EXPECT_EQ(SlotShares("x", 3, 0).per_key(), 1);
  std::string why;
  std::vector<std::shared_ptr<SlotShares::Slot>> held;
  for (int i = 0; i < 8; ++i) held.push_back(s.Acquire("", &why));
  for (const auto& h : held) EXPECT_NE(h, nullptr);
  EXPECT_EQ(s.Acquire("", &why), nullptr);
  EXPECT_THAT(why, HasSubstr("8 in all"));
}

}  // namespace
}  // namespace tessera::server
