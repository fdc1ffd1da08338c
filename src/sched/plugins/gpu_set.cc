#include "sched/plugins/gpu_set.h"

#include <algorithm>
#include <array>

namespace tessera::sched {
namespace {

using model::LinkClass;

struct Key {
  int worst = 0;
  int domains = 0;
  int broken = 0;
  int sum = 0;
  bool operator<(const Key& o) const {
    if (worst != o.worst) return worst < o.worst;
    if (domains != o.domains) return domains < o.domains;
    if (broken != o.broken) return broken < o.broken;
    return sum < o.sum;
  }
};

struct Ctx {
  const model::NodeTopology& topo;
  std::array<int, model::kMaxGpusPerNode> domain_free{};  // free GPUs per domain
  std::array<int, model::kMaxGpusPerNode> domain_size{};  // GPUs per domain
};

Key Evaluate(const Ctx& c, const int8_t* set, int n) {
  Key k;
  std::array<int, model::kMaxGpusPerNode> taken{};
  for (int i = 0; i < n; ++i) {
    int d = c.topo.domain(set[i]);
    if (taken[d]++ == 0) ++k.domains;
    for (int j = i + 1; j < n; ++j) {
      int l = static_cast<int>(c.topo.link(set[i], set[j]));
      k.worst = std::max(k.worst, l);
      k.sum += l;
    }
  }
  for (int d = 0; d < c.topo.num_domains(); ++d) {
    if (taken[d] > 0 && c.domain_free[d] == c.domain_size[d] && taken[d] < c.domain_size[d]) {
      ++k.broken;
    }
  }
  return k;
}

int64_t Choose(int n, int k) {
  if (k < 0 || k > n) return 0;
  int64_t r = 1;
  for (int i = 1; i <= k; ++i) r = r * (n - k + i) / i;
  return r;
}

}  // namespace

bool ChooseWholeGpus(const model::NodeTopology& topo, const NodeState& st, int g,
                     GpuSetChoice* out) {
  if (g <= 0) return false;
  std::array<int8_t, model::kMaxGpusPerNode> free{};
  int nfree = 0;
  Ctx c{topo};
  for (int i = 0; i < st.num_gpus; ++i) {
    c.domain_size[topo.domain(i)]++;
    if (st.healthy(i) && st.free_milli[i] == model::kMilliPerGpu) {
      free[nfree++] = static_cast<int8_t>(i);
      c.domain_free[topo.domain(i)]++;
    }
  }
  if (nfree < g) return false;
  std::array<int8_t, model::kMaxGpusPerNode> best{};
  Key best_key;
  bool have = false;
  if (Choose(nfree, g) <= 512) {
    // Enumerate g-subsets of free[0..nfree) in lexicographic order.
    std::array<int, model::kMaxGpusPerNode> idx{};
    for (int i = 0; i < g; ++i) idx[i] = i;
    std::array<int8_t, model::kMaxGpusPerNode> set{};
    while (true) {
      for (int i = 0; i < g; ++i) set[i] = free[idx[i]];
      Key k = Evaluate(c, set.data(), g);
      if (!have || k < best_key) {
        best_key = k;
        best = set;
        have = true;
      }
      int i = g - 1;
      while (i >= 0 && idx[i] == nfree - g + i) --i;
      if (i < 0) break;
      ++idx[i];
      for (int j = i + 1; j < g; ++j) idx[j] = idx[j - 1] + 1;
    }
  } else {
    for (int seed = 0; seed < topo.num_domains(); ++seed) {
      if (c.domain_free[seed] == 0) continue;
      std::array<int8_t, model::kMaxGpusPerNode> set{};
      std::array<bool, model::kMaxGpusPerNode> used{};
      int n = 0;
      for (int i = 0; i < nfree && n < g; ++i) {
        if (topo.domain(free[i]) == seed) {
          set[n++] = free[i];
          used[i] = true;
        }
      }
      while (n < g) {
        int pick = -1;
        int pick_worst = 1 << 20;
        for (int i = 0; i < nfree; ++i) {
          if (used[i]) continue;
          int w = 0;
          for (int j = 0; j < n; ++j) w = std::max(w, static_cast<int>(topo.link(free[i], set[j])));
          if (w < pick_worst) {
            pick_worst = w;
            pick = i;
          }
        }
        used[pick] = true;
        set[n++] = free[pick];
      }
      std::sort(set.begin(), set.begin() + g);
      Key k = Evaluate(c, set.data(), g);
      if (!have || k < best_key) {
        best_key = k;
        best = set;
        have = true;
      }
    }
  }
  out->gpus.assign(best.begin(), best.begin() + g);
  out->worst = static_cast<LinkClass>(best_key.worst);
  out->domains = best_key.domains;
  return true;
}

int ChooseFractionalGpu(const model::NodeTopology& topo, const NodeState& st, int milli,
                        bool pack) {
  std::array<int, model::kMaxGpusPerNode> domain_free{};
  for (int i = 0; i < st.num_gpus; ++i) {
    if (st.healthy(i) && st.free_milli[i] == model::kMilliPerGpu) domain_free[topo.domain(i)]++;
  }
  int best = -1;
  for (int i = 0; i < st.num_gpus; ++i) {
    if (!st.healthy(i) || st.free_milli[i] < milli) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    int f = st.free_milli[i], bf = st.free_milli[best];
    if (pack) {
      // Best fit: least free share that fits; among whole free GPUs, the one
      // in the most used domain.
      if (f < bf || (f == bf && f == model::kMilliPerGpu &&
                     domain_free[topo.domain(i)] < domain_free[topo.domain(best)])) {
        best = i;
      }
    } else if (f > bf) {
      best = i;
    }
  }
  return best;
}

}  // namespace tessera::sched
