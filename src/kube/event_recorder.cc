#include "kube/event_recorder.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kube/codec.h"

namespace tessera::kube {

EventRecorder::EventRecorder(RestClient& client, const Clock& clock, std::string controller,
                             std::string instance, obs::Logger log)
    : client_(client),
      clock_(clock),
      controller_(std::move(controller)),
      instance_(std::move(instance)),
      log_(std::move(log)) {}

void EventRecorder::Post(const ObjectReference& regarding, const std::string& type,
                         const std::string& reason, const std::string& action,
                         const std::string& note) {
  Event e;
  const absl::Time now = clock_.Now();
  e.metadata.name =
      absl::StrCat(regarding.name, ".", absl::Hex(absl::ToUnixNanos(now) + seq_.fetch_add(1)));
  e.metadata.ns = regarding.ns.empty() ? "default" : regarding.ns;
  e.event_time = FormatMicroTime(now);
  e.reporting_controller = controller_;
  e.reporting_instance = instance_;
  e.action = action;
  e.reason = reason;
  e.type = type;
  e.note = note.size() > 1024 ? note.substr(0, 1021) + "..." : note;
  e.regarding = regarding;
  absl::StatusOr<Json> r = client_.Create(EventsResource(), e.metadata.ns, EncodeEvent(e));
  if (!r.ok()) log_.Debug("event not written", {{"error", r.status().ToString()}});
}

ObjectReference ReferenceTo(const Json& obj) {
  ObjectReference r;
  r.api_version = obj.value("apiVersion", "");
  r.kind = obj.value("kind", "");
  if (auto m = obj.find("metadata"); m != obj.end() && m->is_object()) {
    r.ns = m->value("namespace", "");
    r.name = m->value("name", "");
    r.uid = m->value("uid", "");
  }
  return r;
}

}  // namespace tessera::kube
