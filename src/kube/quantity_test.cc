#include "kube/quantity.h"

#include <gtest/gtest.h>

namespace tessera::kube {
namespace {

int64_t Milli(const char* s) {
  absl::StatusOr<Quantity> q = ParseQuantity(s);
  EXPECT_TRUE(q.ok()) << s << ": " << q.status();
  return q.ok() ? q->milli : -1;
}

TEST(QuantityTest, ParsesEverySuffixFamily) {
  EXPECT_EQ(Milli("2"), 2000);
  EXPECT_EQ(Milli("500m"), 500);
  EXPECT_EQ(Milli("0.5"), 500);
  EXPECT_EQ(Milli("1.5"), 1500);
  EXPECT_EQ(Milli(".25"), 250);
  EXPECT_EQ(Milli("3."), 3000);
  EXPECT_EQ(Milli("1k"), 1000000);
  EXPECT_EQ(Milli("1Ki"), 1024000);
  EXPECT_EQ(Milli("1Mi"), int64_t{1048576} * 1000);
  EXPECT_EQ(Milli("1.5Gi"), int64_t{1610612736} * 1000);
  EXPECT_EQ(Milli("4G"), int64_t{4000000000} * 1000);
  EXPECT_EQ(Milli("1e3"), 1000000);
  EXPECT_EQ(Milli("1E-3"), 1);
  EXPECT_EQ(Milli("+7"), 7000);
  EXPECT_EQ(Milli("-2"), -2000);
  EXPECT_EQ(Milli("8Ti"), int64_t{8} * 1099511627776 * 1000);
}

TEST(QuantityTest, RoundsSubMilliValuesUp) {
  // Quantity.MilliValue() rounds up: a request never shrinks.
  EXPECT_EQ(Milli("1n"), 1);
  EXPECT_EQ(Milli("1u"), 1);
  EXPECT_EQ(Milli("1500u"), 2);
  EXPECT_EQ(Milli("0.0001"), 1);
  EXPECT_EQ(Milli("0"), 0);
  absl::StatusOr<Quantity> q = ParseQuantity("100m");
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->Value(), 1);
  EXPECT_EQ(q->text, "100m");
}

TEST(QuantityTest, RejectsMalformedAndHugeValues) {
  for (const char* bad :
       {"", "abc", "1.2.3", "1Qi", "1x", "m", "1e", "1e+", "1ee3", "--1", "1 Gi", "1Gib"}) {
    absl::StatusOr<Quantity> q = ParseQuantity(bad);
    EXPECT_FALSE(q.ok()) << "accepted \"" << bad << "\"";
    if (!q.ok()) {
      EXPECT_NE(q.status().message().find("quantity"), absl::string_view::npos);
    }
  }
  EXPECT_EQ(ParseQuantity("100Ei").status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(ParseQuantity("1e40").status().code(), absl::StatusCode::kOutOfRange);
}

TEST(QuantityTest, BuildsQuantitiesItWrites) {
  EXPECT_EQ(UnitsQuantity(8).text, "8");
  EXPECT_EQ(UnitsQuantity(8).milli, 8000);
  EXPECT_EQ(MilliQuantity(250).text, "250m");
  EXPECT_EQ(MilliQuantity(3000).text, "3");
}

}  // namespace
}  // namespace tessera::kube
