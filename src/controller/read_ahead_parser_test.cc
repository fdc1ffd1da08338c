#include "controller/read_ahead_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "api/store_layout.h"

namespace tessera::controller {
namespace {

std::vector<store::KeyValue> Values(int n) {
  std::vector<store::KeyValue> out;
  for (int i = 0; i < n; ++i) {
    store::KeyValue kv;
    kv.key = absl::StrCat("/registry/nodes/n", i);
    // Every 7th value is not a stored object: its error comes in its place.
    kv.value = i % 7 == 3 ? "{not json" : absl::StrCat(R"({"metadata":{"name":"n)", i, R"("}})");
    out.push_back(std::move(kv));
  }
  return out;
}

TEST(ReadAheadParserTest, GivesEveryValueParsedInOrder) {
  for (int n : {0, 1, 127, 128, 129, 1000, 5000}) {
    const std::vector<store::KeyValue> kvs = Values(n);
    ReadAheadParser parser(kvs);
    for (int i = 0; i < n; ++i) {
      const absl::StatusOr<nlohmann::json>& got = parser.Next();
      if (i % 7 == 3) {
        EXPECT_TRUE(absl::IsDataLoss(got.status())) << i << " of " << n;
      } else {
        ASSERT_TRUE(got.ok()) << i << " of " << n << ": " << got.status();
        EXPECT_EQ((*got)["metadata"]["name"], absl::StrCat("n", i));
        EXPECT_EQ(*got, *api::ParseStored(kvs[i].value));
      }
    }
  }
}

// The consumer may stop early (a failed restart): the destructor stops the helper, which may be
// waiting for a buffer, and joins it.
TEST(ReadAheadParserTest, StopsWhenTheConsumerStopsEarly) {
  const std::vector<store::KeyValue> kvs = Values(5000);
  for (int taken : {0, 1, 200, 1000}) {
    ReadAheadParser parser(kvs);
    for (int i = 0; i < taken; ++i) (void)parser.Next();
  }
}

}  // namespace
}  // namespace tessera::controller
