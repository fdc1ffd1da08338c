#include "common/suggest.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(SuggestTest, EditDistance) {
  EXPECT_EQ(EditDistance("reserch", "research"), 1u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(SuggestTest, ClosestMatchIsATypoOrNothing) {
  const std::vector<std::string> queues = {"default", "research", "production"};
  EXPECT_EQ(ClosestMatch("reserch", queues), "research");
  EXPECT_EQ(ClosestMatch("prodution", queues), "production");
  EXPECT_EQ(ClosestMatch("team-a", queues), "");
  EXPECT_EQ(ClosestMatch("ab", {"xy", "abcdef"}), "");  // 2 edits of 2 characters: no typo
  EXPECT_EQ(ClosestMatch("research", queues), "");      // itself is not a suggestion
  EXPECT_EQ(DidYouMean("gpuModel", {"gpuModels", "gpuType"}), "; did you mean \"gpuModels\"?");
  EXPECT_EQ(DidYouMean("zzz", {"gpuModels"}), "");
}

}  // namespace
}  // namespace tessera
