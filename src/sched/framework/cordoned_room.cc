#include "sched/framework/cordoned_room.h"

namespace tessera::sched {

CordonedRoom FindCordonedRoom(const ClusterState& cs, const JobContext& ctx, int min_gpus) {
  CordonedRoom r;
  for (NodeId n = 0; n < cs.num_node_slots(); ++n) {
    const NodeState& st = cs.state(n);
    if (!st.present || st.schedulable || st.model == kNoModel || !ctx.AllowsModel(st.model) ||
        st.whole_free < std::max(min_gpus, 1)) {
      continue;
    }
    ++r.nodes;
    r.free_gpus += st.whole_free;
    if (st.whole_free > r.example_free) {
      r.example_free = st.whole_free;
      r.example = cs.node(n).name;
    }
  }
  return r;
}

}  // namespace tessera::sched
