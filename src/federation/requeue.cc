#include "federation/requeue.h"

#include <algorithm>

#include "controller/store_layout.h"
#include "federation/json_fields.h"

namespace tessera::federation {

bool Unplaced(const Json& copy_status) {
  if (!copy_status.is_object()) return true;  // not looked at by its member yet
  const std::string phase = Str(copy_status, "phase");
  if (phase != "Pending" && phase != "Admitted" && phase != "Queued" && !phase.empty()) {
    return false;
  }
  auto p = copy_status.find("placement");
  return p == copy_status.end() || !p->is_array() || p->empty();
}

absl::Time UnplacedSince(const Json& copy, absl::Time now) {
  const Json status = copy.is_object() && copy.contains("status") ? copy["status"] : Json();
  if (!Str(status, "scheduledTime").empty()) return now;
  absl::Time created;
  const Json meta = copy.is_object() && copy.contains("metadata") ? copy["metadata"] : Json();
  if (!controller::ParseTimestamp(Str(meta, "creationTimestamp"), &created) || created > now) {
    return now;
  }
  return created;
}

std::string PickMember(const std::vector<Candidate>& members, const JobDemand& demand,
                       absl::string_view exclude) {
  const Candidate* best = nullptr;
  for (const Candidate& c : members) {
    if (!c.ready || c.cap == nullptr || c.name == exclude || !Fits(*c.cap, demand)) continue;
    if (best == nullptr || c.cap->free_gpus > best->cap->free_gpus) best = &c;
  }
  return best == nullptr ? "" : best->name;
}

absl::Duration RequeueWait(absl::Duration after, int64_t requeues) {
  if (after <= absl::ZeroDuration()) return absl::ZeroDuration();
  return after * (int64_t{1} << std::clamp<int64_t>(requeues, 0, 6));
}

std::string RequeueTarget(absl::Time since, absl::Time now, absl::Duration after, int64_t requeues,
                          const std::vector<Candidate>& members, const JobDemand& demand,
                          absl::string_view from) {
  if (after <= absl::ZeroDuration() || now - since < RequeueWait(after, requeues)) return "";
  return PickMember(members, demand, from);
}

}  // namespace tessera::federation
