#include "sched/pack/frag.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tessera::sched::pack {

NodeFree FromState(const NodeState& st) {
  NodeFree n;
  n.model = st.model;
  n.num_gpus = st.num_gpus;
  n.cpu_free = st.cpu_free;
  for (int g = 0; g < st.num_gpus; ++g) n.free[g] = st.healthy(g) ? st.free_milli[g] : 0;
  return n;
}

double NodeFragmentation(const NodeFree& n, const std::vector<TypicalPod>& typical) {
  const int64_t total = n.total_free();
  if (total == 0) return 0;
  double frag = 0;
  for (const TypicalPod& t : typical) {
    const PodShape& s = t.shape;
    if (s.gpus == 0 || s.gpu_milli == 0 || !s.AllowsModel(n.model) || n.cpu_free < s.cpu_milli) {
      frag += t.p * static_cast<double>(total);
      continue;
    }
    int fits = 0;
    int64_t below = 0;
    for (int g = 0; g < n.num_gpus; ++g) {
      if (n.free[g] >= s.gpu_milli) {
        ++fits;
      } else {
        below += n.free[g];
      }
    }
    frag += t.p * static_cast<double>(fits >= s.gpus ? below : total);
  }
  return frag;
}

std::vector<TypicalPod> TypicalPods(const std::vector<PodShape>& pods, double popularity) {
  using Key = std::tuple<int64_t, int32_t, int32_t, uint64_t>;
  std::map<Key, int64_t> count;
  for (const PodShape& s : pods) ++count[{s.cpu_milli, s.gpu_milli, s.gpus, s.model_mask}];
  std::vector<std::pair<int64_t, Key>> order;
  order.reserve(count.size());
  for (const auto& [k, c] : count) order.push_back({c, k});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second > b.second;
  });
  std::vector<TypicalPod> out;
  const double need = popularity * static_cast<double>(pods.size());
  double cum = 0;
  for (const auto& [c, k] : order) {
    if (cum >= need) break;
    TypicalPod t;
    std::tie(t.shape.cpu_milli, t.shape.gpu_milli, t.shape.gpus, t.shape.model_mask) = k;
    t.p = static_cast<double>(c);
    cum += t.p;
    out.push_back(t);
  }
  for (TypicalPod& t : out) t.p /= cum;
  return out;
}

}  // namespace tessera::sched::pack
