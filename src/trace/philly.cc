#include "trace/philly.h"

#include "absl/strings/str_cat.h"
#include "trace/csv.h"

namespace tessera::trace {
namespace {

constexpr const char* kHeader = "timestamp,duration,num_gpus,gpu_time,cluster";

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool Digits(absl::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

bool ParseDateTime(absl::string_view s, int64_t* out) {
  int y, mo, d, h, mi, se;
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' ||
      s[16] != ':') {
    return false;
  }
  if (!Digits(s, 0, 4, &y) || !Digits(s, 5, 2, &mo) || !Digits(s, 8, 2, &d) ||
      !Digits(s, 11, 2, &h) || !Digits(s, 14, 2, &mi) || !Digits(s, 17, 2, &se)) {
    return false;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return false;
  *out = DaysFromCivil(y, mo, d) * 86400 + int64_t{h} * 3600 + int64_t{mi} * 60 + se;
  return true;
}

absl::StatusOr<std::vector<PhillyJob>> ParsePhillyJobs(absl::string_view text,
                                                       absl::string_view file) {
  constexpr double kMaxSeconds = 1e12;
  std::vector<PhillyJob> out;
  size_t columns = 0;
  absl::Status s = ForEachCsvRow(
      text, file, {kHeader}, &columns,
      [&](size_t line, const std::vector<absl::string_view>& f,
          const CsvColumns& names) -> absl::Status {
        PhillyJob j;
        if (!ParseDateTime(f[0], &j.timestamp)) {
          return CsvFieldError(file, line, 0, names,
                               absl::StrCat("\"", f[0], "\" is not YYYY-MM-DD HH:MM:SS"));
        }
        int64_t gpus = 0;
        absl::Status st = CsvDouble(file, line, 1, names, f[1], 0, kMaxSeconds, &j.duration_s);
        if (st.ok()) st = CsvInt(file, line, 2, names, f[2], 1, int64_t{1} << 30, &gpus);
        if (st.ok()) st = CsvDouble(file, line, 3, names, f[3], 0, 1e18, &j.gpu_time);
        if (!st.ok()) return st;
        j.num_gpus = static_cast<int32_t>(gpus);
        j.cluster = std::string(f[4]);
        if (j.cluster.empty()) return CsvFieldError(file, line, 4, names, "must not be empty");
        out.push_back(std::move(j));
        return absl::OkStatus();
      });
  if (!s.ok()) return s;
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat(file, ": no jobs"));
  return out;
}

absl::StatusOr<std::vector<PhillyJob>> LoadPhillyJobs(const std::string& path) {
  auto text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParsePhillyJobs(*text, path);
}

}  // namespace tessera::trace
