#include "trace/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::trace {
namespace {

using ::testing::HasSubstr;

struct Row {
  size_t line;
  std::vector<std::string> fields;
  friend bool operator==(const Row&, const Row&) = default;
};

absl::Status Collect(absl::string_view text, std::vector<Row>* rows, size_t* columns) {
  return ForEachCsvRow(text, "t.csv", {"a,b,c", "a,b"}, columns,
                       [&](size_t line, const std::vector<absl::string_view>& f,
                           const CsvColumns& names) -> absl::Status {
                         EXPECT_EQ(names.size(), *columns);
                         Row r{line, {}};
                         for (absl::string_view x : f) r.fields.emplace_back(x);
                         rows->push_back(std::move(r));
                         return absl::OkStatus();
                       });
}

TEST(CsvTest, SplitsRowsSkipsBlankLinesAndStripsCarriageReturns) {
  std::vector<Row> rows;
  size_t columns = 0;
  ASSERT_TRUE(Collect("a,b,c\r\n1,,3\r\n\n x,y,z \n", &rows, &columns).ok());
  EXPECT_EQ(columns, 3u);
  std::vector<Row> want = {{2, {"1", "", "3"}}, {4, {" x", "y", "z"}}};
  EXPECT_EQ(rows, want);

  rows.clear();
  ASSERT_TRUE(Collect("a,b\n7,8", &rows, &columns).ok());  // no final newline
  EXPECT_EQ(columns, 2u);
  EXPECT_EQ(rows, (std::vector<Row>{{2, {"7", "8"}}}));
}

TEST(CsvTest, ShapeErrorsAndFieldHelpers) {
  std::vector<Row> rows;
  size_t columns = 0;
  auto s = Collect("a,b,c\n1,2\n", &rows, &columns);
  EXPECT_THAT(std::string(s.message()), HasSubstr("t.csv:2: expected 3 columns, got 2"));
  s = Collect("", &rows, &columns);
  EXPECT_THAT(std::string(s.message()), HasSubstr("t.csv:1: empty file"));
  s = Collect("x,y\n", &rows, &columns);
  EXPECT_THAT(std::string(s.message()), HasSubstr("expected \"a,b,c\" or \"a,b\""));

  CsvColumns names = {"n", "v"};
  int64_t i = 0;
  EXPECT_TRUE(CsvInt("f", 3, 1, names, "42", 0, 100, &i).ok());
  EXPECT_EQ(i, 42);
  EXPECT_THAT(std::string(CsvInt("f", 3, 1, names, "4x", 0, 100, &i).message()),
              HasSubstr("f:3: column 2 (v): expected an integer, got \"4x\""));
  double d = 0;
  EXPECT_TRUE(CsvDouble("f", 3, 0, names, "2.5", 0, 10, &d).ok());
  EXPECT_EQ(d, 2.5);
  EXPECT_FALSE(CsvDouble("f", 3, 0, names, "inf", 0, 1e300, &d).ok());
  EXPECT_THAT(std::string(CsvDouble("f", 3, 0, names, "11", 0, 10, &d).message()),
              HasSubstr("column 1 (n): must be in 0..10, got 11"));
}

}  // namespace
}  // namespace tessera::trace
