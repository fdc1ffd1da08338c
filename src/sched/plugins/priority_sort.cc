#include "sched/plugins/priority_sort.h"

namespace tessera::sched {

bool PrioritySort::Less(const model::Job& a, const model::Job& b) const {
  if (a.priority != b.priority) return a.priority > b.priority;
  if (a.creation_time != b.creation_time) return a.creation_time < b.creation_time;
  if (a.ns != b.ns) return a.ns < b.ns;
  return a.name < b.name;
}

}  // namespace tessera::sched
