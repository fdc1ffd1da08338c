#include "api/selector.h"

#include <gtest/gtest.h>

namespace tessera::api {
namespace {

nlohmann::json Obj(nlohmann::json labels, std::string phase = "Running") {
  return {{"metadata", {{"name", "a"}, {"namespace", "ns"}, {"labels", labels}}},
          {"status", {{"phase", phase}}}};
}

bool L(const char* sel, const nlohmann::json& o) {
  auto s = Selector::ParseLabels(sel);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() && s->Matches(o);
}

TEST(SelectorTest, LabelOperators) {
  auto o = Obj({{"team", "nlp"}, {"tier", "gold"}});
  EXPECT_TRUE(L("", o));
  EXPECT_TRUE(L("team=nlp", o));
  EXPECT_TRUE(L("team==nlp,tier!=silver", o));
  EXPECT_FALSE(L("team=cv", o));
  EXPECT_TRUE(L("missing!=x", o)) << "!= matches objects without the label";
  EXPECT_TRUE(L("team", o));
  EXPECT_FALSE(L("!team", o));
  EXPECT_TRUE(L("!owner", o));
  EXPECT_TRUE(L("tier in (gold, silver)", o));
  EXPECT_FALSE(L("tier notin (gold)", o));
  EXPECT_FALSE(L("team=nlp,tier=bronze", o));
}

TEST(SelectorTest, BadSyntaxIsAnError) {
  EXPECT_FALSE(Selector::ParseLabels("a=b,,c").ok());
  EXPECT_FALSE(Selector::ParseLabels("a in b").ok());
  EXPECT_FALSE(Selector::ParseLabels("a=b c").ok());
  EXPECT_FALSE(Selector::ParseLabels("a=\xff").ok());
  EXPECT_FALSE(Selector::ParseFields("spec.gpus=x").ok());
  EXPECT_TRUE(Selector::ParseFields("spec.queue=x,status.reason!=OverQuota").ok());
  EXPECT_FALSE(Selector::ParseFields("metadata.name").ok());
}

TEST(SelectorTest, Fields) {
  auto o = Obj({}, "Pending");
  auto s = Selector::ParseFields("metadata.name=a,status.phase!=Running");
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(s->Matches(o));
  EXPECT_FALSE(Selector::ParseFields("status.phase=Running")->Matches(o));
  EXPECT_TRUE(Selector::ParseFields("metadata.namespace==ns")->Matches(o));
}

}  // namespace
}  // namespace tessera::api
