#include "store/txn_runs.h"

namespace tessera::store {

std::vector<size_t> TxnRuns(const std::vector<size_t>& sizes, size_t max_ops) {
  std::vector<size_t> ends;
  size_t ops = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (max_ops > 0 && ops > 0 && ops + sizes[i] > max_ops) {
      ends.push_back(i);
      ops = 0;
    }
    ops += sizes[i];
  }
  if (!sizes.empty()) ends.push_back(sizes.size());
  return ends;
}

}  // namespace tessera::store
