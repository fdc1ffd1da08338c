// Small helpers shared by the `tessera bench ...` commands.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace tessera {

// Peak resident set size of this process, in MiB.
inline double PeakRssMb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

// The p-quantile (0..1) of `v` by nearest rank (rounded); 0 for no samples.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::llround(p * static_cast<double>(v.size() - 1)));
  return v[std::min(i, v.size() - 1)];
}

}  // namespace tessera
