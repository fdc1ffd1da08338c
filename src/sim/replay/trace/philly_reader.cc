#include "sim/replay/trace/philly_reader.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tessera::sim::replay {
namespace {

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
  *out = DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
  return true;
}

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

absl::StatusOr<Workload> ParsePhillyCsv(absl::string_view text) {
  Workload w;
  w.source = "philly";
  absl::flat_hash_map<std::string, int32_t> queue_ids;
  std::vector<int64_t> stamps;
  int line_no = 0;
  bool header = true;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripTrailingAsciiWhitespace(line);
    if (line.empty()) continue;
    if (header) {
      header = false;
      if (!absl::StartsWith(line, "timestamp,duration,num_gpus")) {
        return absl::InvalidArgumentError(
            "line 1: expected header timestamp,duration,num_gpus,gpu_time,cluster");
      }
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (f.size() < 5) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": expected 5 columns, got ", f.size()));
    }
    int64_t ts;
    if (!ParseDateTime(f[0], &ts)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": timestamp: \"", f[0], "\" is not YYYY-MM-DD HH:MM:SS"));
    }
    SimJob j;
    if (!absl::SimpleAtod(f[1], &j.duration_s) || j.duration_s < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": duration: \"", f[1], "\" is not a number >= 0"));
    }
    if (!absl::SimpleAtoi(f[2], &j.gpus) || j.gpus <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", line_no, ": num_gpus: \"", f[2], "\" is not an integer > 0"));
    }
    std::string vc(f[4]);
    auto [it, inserted] = queue_ids.try_emplace(vc, static_cast<int32_t>(w.queues.size()));
    if (inserted) w.queues.push_back(vc);
    j.queue = it->second;
    stamps.push_back(ts);
    w.jobs.push_back(j);
  }
  if (w.jobs.empty()) return absl::InvalidArgumentError("philly trace: no jobs");
  int64_t t0 = *std::min_element(stamps.begin(), stamps.end());
  for (size_t i = 0; i < w.jobs.size(); ++i)
    w.jobs[i].submit_s = static_cast<double>(stamps[i] - t0);
  SortBySubmit(&w);
  return w;
}

absl::StatusOr<Workload> ReadPhillyTrace(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  auto w = ParsePhillyCsv(*text);
  if (!w.ok())
    return absl::Status(w.status().code(), absl::StrCat(path, ": ", w.status().message()));
  w->source = absl::StrCat("philly:", path);
  return w;
}

}  // namespace tessera::sim::replay
