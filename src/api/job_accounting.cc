#include "api/job_accounting.h"

#include <algorithm>
#include <cmath>

#include "api/store_layout.h"

namespace tessera::api {

using Json = nlohmann::json;

double PlacementGpus(const Json& placement) {
  if (!placement.is_array()) return 0;
  double gpus = 0;
  for (const Json& m : placement) {
    if (!m.is_object() || !m.contains("gpus") || !m["gpus"].is_array()) continue;
    const double n = static_cast<double>(m["gpus"].size());
    const int64_t milli = m.value("gpuMilli", int64_t{0});
    gpus += milli > 0 && milli < 1000 ? n * static_cast<double>(milli) / 1000.0 : n;
  }
  return gpus;
}

namespace {

// The open binding's GPU-seconds up to `end`.
double OpenBinding(const Json& status, absl::Time end) {
  if (!status.contains("placement") || !status.contains("scheduledTime") ||
      !status["scheduledTime"].is_string()) {
    return 0;
  }
  absl::Time since;
  if (!ParseTimestamp(status["scheduledTime"].get<std::string>(), &since)) return 0;
  if (auto a = status.find("accountedTime"); a != status.end() && a->is_string()) {
    absl::Time t;
    if (ParseTimestamp(a->get<std::string>(), &t)) since = std::max(since, t);
  }
  const double seconds = std::max(0.0, absl::ToDoubleSeconds(end - since));
  return PlacementGpus(status["placement"]) * seconds;
}

double Closed(const Json& status) {
  auto it = status.find("gpuSeconds");
  return it != status.end() && it->is_number() ? it->get<double>() : 0;
}

}  // namespace

double GpuSecondsUsed(const Json& status, absl::Time now) {
  if (!status.is_object()) return 0;
  absl::Time end = now;
  if (auto c = status.find("completionTime"); c != status.end() && c->is_string()) {
    absl::Time t;
    if (ParseTimestamp(c->get<std::string>(), &t)) end = std::min(end, t);
  }
  return Closed(status) + OpenBinding(status, end);
}

void AccrueOpenBinding(Json& status, absl::Time now) {
  if (!status.is_object() || !status.contains("placement")) return;
  const double total = Closed(status) + OpenBinding(status, now);
  // Whole milli-GPU-seconds: the stored number stays short and exact enough.
  status["gpuSeconds"] = static_cast<double>(std::llround(total * 1000)) / 1000;
  status["accountedTime"] = Timestamp(now);
}

void ReleasePlacement(Json& status, absl::Time now) {
  if (!status.is_object() || !status.contains("placement")) return;
  AccrueOpenBinding(status, now);
  status.erase("placement");
  status.erase("replicas");
  status.erase("accountedTime");
}

void StampStart(Json& status, absl::Time now) {
  if (status.is_object() && !status.contains("startTime")) status["startTime"] = Timestamp(now);
}

void StampCompletion(Json& status, absl::Time now) {
  if (status.is_object() && !status.contains("completionTime")) {
    status["completionTime"] = Timestamp(now);
  }
}

}  // namespace tessera::api
