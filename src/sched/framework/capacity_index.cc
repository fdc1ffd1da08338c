#include "sched/framework/capacity_index.h"

namespace tessera::sched {
namespace {
// Removes v[at] by moving the last element into its place.
void SwapRemove(std::vector<NodeId>& v, int32_t at) {
  v[at] = v.back();
  v.pop_back();
}
}  // namespace

void CapacityIndex::Resize(int num_models, int num_nodes) {
  if (static_cast<int>(whole_.size()) < num_models) {
    whole_.resize(num_models);
    partial_.resize(num_models);
  }
  if (static_cast<int>(pos_.size()) < num_nodes) pos_.resize(num_nodes);
}

void CapacityIndex::Insert(NodeId node, ModelId model, int whole, int partial) {
  Remove(node);
  Pos& p = pos_[node];
  p.model = model;
  p.whole = static_cast<int8_t>(whole);
  auto& wb = whole_[model][whole];
  p.whole_pos = static_cast<int32_t>(wb.size());
  wb.push_back(node);
  if (partial > 0) {
    int d = partial / 100;
    p.partial = static_cast<int8_t>(d);
    auto& pb = partial_[model][d];
    p.partial_pos = static_cast<int32_t>(pb.size());
    pb.push_back(node);
  }
}

void CapacityIndex::Remove(NodeId node) {
  if (node >= static_cast<NodeId>(pos_.size())) return;
  Pos& p = pos_[node];
  if (p.model == kNoModel) return;
  {
    auto& wb = whole_[p.model][p.whole];
    NodeId moved = wb.back();
    SwapRemove(wb, p.whole_pos);
    if (moved != node) pos_[moved].whole_pos = p.whole_pos;
  }
  if (p.partial >= 0) {
    auto& pb = partial_[p.model][p.partial];
    NodeId moved = pb.back();
    SwapRemove(pb, p.partial_pos);
    if (moved != node) pos_[moved].partial_pos = p.partial_pos;
  }
  p = Pos{};
}

}  // namespace tessera::sched
