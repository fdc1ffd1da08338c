#include "server/auth.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::server {
namespace {

using ::testing::HasSubstr;

TEST(AuthTest, ParsesTokensAndRejectsBadLines) {
  auto a = Authenticator::Parse(
      "# comment\n\nadmintoken1 * admin\nusertoken1 team-a user\nnodetoken1 - node:gpu-01\n");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->enabled());
  EXPECT_FALSE(a->Authenticate("").has_value());
  EXPECT_FALSE(a->Authenticate("Bearer nope-nope").has_value());
  EXPECT_FALSE(a->Authenticate("usertoken1").has_value()) << "the Bearer scheme is required";
  EXPECT_EQ(a->Authenticate("Bearer usertoken1")->name_space, "team-a");
  EXPECT_EQ(a->Authenticate("Bearer nodetoken1")->node, "gpu-01");
  EXPECT_THAT(Authenticator::Parse("x y").status().message(), HasSubstr("line 1"));
  EXPECT_THAT(Authenticator::Parse("tok12345 ns root").status().message(),
              HasSubstr("unknown role"));
  EXPECT_THAT(Authenticator::Parse("tok12345 ns user\ntok12345 ns user").status().message(),
              HasSubstr("line 2: duplicate"));
  EXPECT_FALSE(Authenticator::Parse("short ns user").ok());
}

TEST(AuthTest, TheUserColumnNamesWhoSubmits) {
  auto a = Authenticator::Parse(
      "admintoken1 * admin\nusertoken1 team-a user\nusertoken2 team-a user alice@lab\n"
      "nodetoken1 - node:gpu-01\nadmintoken2 * admin ops-bot\n");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->Authenticate("Bearer usertoken1")->user, "team-a");
  EXPECT_EQ(a->Authenticate("Bearer usertoken2")->user, "alice@lab");
  EXPECT_EQ(a->Authenticate("Bearer nodetoken1")->user, "system:node:gpu-01");
  EXPECT_EQ(a->Authenticate("Bearer admintoken1")->user, "admin");
  EXPECT_EQ(a->Authenticate("Bearer admintoken2")->user, "ops-bot");
  EXPECT_THAT(Authenticator::Parse("tok12345 ns user bad/name").status().message(),
              HasSubstr("line 1: USER must be"));
  EXPECT_FALSE(Authenticator::Parse("tok12345 ns user a b").ok());
}

TEST(AuthTest, Rules) {
  Principal user{Principal::Role::kUser, "team-a", ""};
  Principal node{Principal::Role::kNode, "", "gpu-01"};
  Principal admin{Principal::Role::kAdmin, "", ""};
  Resource own{"trainingjobs", true, "team-a", "j"};
  Resource other{"trainingjobs", true, "team-b", "j"};
  Resource all{"trainingjobs", true, "", ""};
  Resource queue{"queues", false, "", "q"};
  Resource n1{"nodes", false, "", "gpu-01"};
  Resource n2{"nodes", false, "", "gpu-02"};
  EXPECT_EQ(Authorize(user, Verb::kDelete, own), "");
  EXPECT_NE(Authorize(user, Verb::kGet, other), "");
  EXPECT_NE(Authorize(user, Verb::kList, all), "");
  EXPECT_EQ(Authorize(user, Verb::kGet, queue), "");
  EXPECT_NE(Authorize(user, Verb::kUpdate, queue), "");
  EXPECT_EQ(Authorize(node, Verb::kUpdate, n1), "");
  EXPECT_EQ(Authorize(node, Verb::kCreate, n1), "");
  EXPECT_NE(Authorize(node, Verb::kUpdate, n2), "");
  EXPECT_NE(Authorize(node, Verb::kDelete, n1), "");
  EXPECT_EQ(Authorize(node, Verb::kGet, own), "");   // its bindings
  EXPECT_NE(Authorize(node, Verb::kList, all), "");  // its bindings come from its own index
  EXPECT_NE(Authorize(node, Verb::kWatch, all), "");
  EXPECT_NE(Authorize(node, Verb::kUpdate, own), "");  // reports go to .../status
  EXPECT_NE(Authorize(node, Verb::kDelete, own), "");
  EXPECT_NE(Authorize(node, Verb::kCreate, own), "");
  EXPECT_NE(Authorize(node, Verb::kGet, queue), "");
  EXPECT_EQ(Authorize(admin, Verb::kDelete, other), "");
}

}  // namespace
}  // namespace tessera::server
