#include "agent/replica_metrics.h"

#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tessera::agent {
namespace {

constexpr size_t kMaxBytes = 4096;

absl::Status Field(const nlohmann::json& obj, const char* key, std::optional<double>* out) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number() || it->get<double>() < 0 || !std::isfinite(it->get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be a non-negative number"));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<ReplicaMetrics>> ReadReplicaMetrics(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return std::optional<ReplicaMetrics>();
    return absl::InvalidArgumentError(absl::StrCat("file: cannot stat ", path));
  }
  if (st.st_size > static_cast<off_t>(kMaxBytes)) {
    return absl::InvalidArgumentError(absl::StrCat("file: larger than ", kMaxBytes, " bytes"));
  }
  std::ifstream in(path);
  if (!in) return std::optional<ReplicaMetrics>();  // renamed away in between
  std::string text(std::istreambuf_iterator<char>(in), {});
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("file: not a JSON object");
  }
  ReplicaMetrics m;
  if (absl::Status s = Field(j, "p99LatencyMs", &m.p99_latency_ms); !s.ok()) return s;
  if (absl::Status s = Field(j, "rps", &m.rps); !s.ok()) return s;
  m.time = absl::TimeFromTimespec(st.st_mtim);
  return std::optional<ReplicaMetrics>(m);
}

}  // namespace tessera::agent
