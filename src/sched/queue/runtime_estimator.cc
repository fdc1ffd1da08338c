#include "sched/queue/runtime_estimator.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera::sched {

int32_t RuntimeEstimator::SizeClass(int64_t gpus) {
  int32_t c = 0;
  while (c < 62 && (int64_t{1} << c) < gpus) ++c;
  return c;
}

void RuntimeEstimator::Observe(absl::string_view queue, absl::string_view ns, int64_t gpus,
                               absl::Duration runtime) {
  if (runtime < absl::ZeroDuration()) return;
  const int32_t size = SizeClass(gpus);
  for (const Key& k : {Key{std::string(queue), std::string(ns), size},
                       Key{std::string(queue), "", size}, Key{std::string(queue), "", -1}}) {
    std::deque<absl::Duration>& d = runs_[k];
    d.push_back(runtime);
    while (static_cast<int32_t>(d.size()) > opt_.window) d.pop_front();
  }
}

std::optional<absl::Duration> RuntimeEstimator::From(const Key& k) const {
  auto it = runs_.find(k);
  if (it == runs_.end() || static_cast<int32_t>(it->second.size()) < opt_.min_samples) {
    return std::nullopt;
  }
  std::vector<absl::Duration> v(it->second.begin(), it->second.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(std::floor(opt_.quantile * v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v.end());
  return std::max(absl::Minutes(1), v[i] * opt_.margin);
}

std::optional<absl::Duration> RuntimeEstimator::Estimate(absl::string_view queue,
                                                         absl::string_view ns, int64_t gpus) const {
  const int32_t size = SizeClass(gpus);
  for (const Key& k : {Key{std::string(queue), std::string(ns), size},
                       Key{std::string(queue), "", size}, Key{std::string(queue), "", -1}}) {
    if (std::optional<absl::Duration> e = From(k)) return e;
  }
  return std::nullopt;
}

}  // namespace tessera::sched
