#include "api/store_layout.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/time/time.h"

namespace tessera::api {
namespace {

// ParseTimestamp reads Timestamp()'s form directly and anything else with absl::ParseTime: both
// ways must agree with absl::ParseTime on what is a time and which.
TEST(StoreLayoutTest, ParseTimestampAgreesWithRfc3339) {
  for (const char* s :
       {"2026-01-02T03:04:05Z", "1970-01-01T00:00:00Z", "2024-02-29T23:59:59Z",
        "2023-02-29T00:00:00Z", "2026-13-01T00:00:00Z", "2026-04-31T00:00:00Z",
        "2026-01-02T24:00:00Z", "2026-01-02T03:60:00Z", "2016-12-31T23:59:60Z",
        "2026-01-02T03:04:05.5Z", "2026-01-02T03:04:05+02:00", "2026-01-02 03:04:05Z",
        "2026-01-0xT03:04:05Z", "", "garbage", "9999-12-31T23:59:59Z"}) {
    absl::Time want, got;
    std::string err;
    const bool ok = absl::ParseTime(absl::RFC3339_full, s, &want, &err);
    ASSERT_EQ(ParseTimestamp(s, &got), ok) << s;
    if (ok) {
      EXPECT_EQ(got, want) << s;
    }
  }
  absl::Time t = absl::FromUnixSeconds(1780000000);
  absl::Time back;
  ASSERT_TRUE(ParseTimestamp(Timestamp(t), &back));
  EXPECT_EQ(back, t);
}

}  // namespace
}  // namespace tessera::api
