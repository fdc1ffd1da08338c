#include "kube/reflector.h"

#include <algorithm>

#include "kube/api_error.h"

namespace tessera::kube {
namespace {

std::string RvOf(const Json& obj) {
  if (!obj.is_object() || !obj.contains("metadata") || !obj["metadata"].is_object()) return "";
  return obj["metadata"].value("resourceVersion", "");
}

}  // namespace

Reflector::Reflector(RestClient& client, ReflectorOptions options, ReflectorSink& sink)
    : client_(client), options_(std::move(options)), sink_(sink), rng_(options_.seed) {}

void Reflector::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_.HasBeenNotified()) stop_.Notify();
  }
  cancel_.Cancel();
}

std::string Reflector::last_resource_version() const {
  absl::MutexLock lock(&mu_);
  return rv_;
}

bool Reflector::Wait(absl::Duration d) { return !stop_.WaitForNotificationWithTimeout(d); }

bool Reflector::ListOnce() {
  ListOptions lo;
  lo.label_selector = options_.label_selector;
  lo.field_selector = options_.field_selector;
  lo.limit = options_.page_size;
  absl::StatusOr<Json> list = client_.List(options_.type, options_.ns, lo);
  if (!list.ok()) {
    options_.log.Warn("list failed", {{"resource", options_.type.plural},
                                      {"error", std::string(list.status().message())}});
    return false;
  }
  std::vector<ObjectPtr> objs;
  objs.reserve((*list)["items"].size());
  for (Json& item : (*list)["items"]) {
    // List items carry no kind/apiVersion; give them the ones a watch event's object has.
    item["kind"] = options_.type.kind;
    item["apiVersion"] = options_.type.group.empty()
                             ? options_.type.version
                             : options_.type.group + "/" + options_.type.version;
    objs.push_back(std::make_shared<const Json>(std::move(item)));
  }
  const std::string rv = (*list)["metadata"].value("resourceVersion", "");
  sink_.OnReplace(std::move(objs), rv);
  {
    absl::MutexLock lock(&mu_);
    rv_ = rv;
  }
  lists_.fetch_add(1);
  return true;
}

void Reflector::Run() {
  bool need_list = true;
  absl::Duration backoff = options_.backoff_initial;
  auto fail = [&]() {
    if (!Wait(backoff)) return false;
    backoff = std::min(backoff * 2, options_.backoff_max);
    return true;
  };
  while (!stop_.HasBeenNotified()) {
    if (need_list) {
      if (!ListOnce()) {
        if (!fail()) return;
        continue;
      }
      need_list = false;
    }
    ListOptions wo;
    wo.label_selector = options_.label_selector;
    wo.field_selector = options_.field_selector;
    wo.resource_version = last_resource_version();
    wo.allow_watch_bookmarks = true;
    const int64_t min_s = std::max<int64_t>(1, absl::ToInt64Seconds(options_.min_watch_timeout));
    wo.timeout_seconds = min_s + static_cast<int64_t>(rng_() % static_cast<uint64_t>(min_s));
    watches_.fetch_add(1);
    absl::Status s = client_.Watch(
        options_.type, options_.ns, wo,
        [&](WatchEvent&& ev) {
          const std::string rv = RvOf(ev.object);
          if (ev.type != "BOOKMARK") {
            sink_.OnEvent(ev.type, std::make_shared<const Json>(std::move(ev.object)));
          }
          if (!rv.empty()) {
            absl::MutexLock lock(&mu_);
            rv_ = rv;
          }
          return !stop_.HasBeenNotified();
        },
        &cancel_);
    if (stop_.HasBeenNotified() || absl::IsCancelled(s)) return;
    if (s.ok()) {
      backoff = options_.backoff_initial;
      continue;  // the server ended the watch: resume
    }
    if (IsApiGone(s)) {
      gone_.fetch_add(1);
      options_.log.Info("watch expired, relisting", {{"resource", options_.type.plural},
                                                     {"resourceVersion", wo.resource_version}});
      need_list = true;
      continue;
    }
    options_.log.Warn("watch failed",
                      {{"resource", options_.type.plural}, {"error", std::string(s.message())}});
    // A lost connection resumes from the same resourceVersion; anything else relists.
    if (!absl::IsUnavailable(s)) need_list = true;
    if (!fail()) return;
  }
}

}  // namespace tessera::kube
