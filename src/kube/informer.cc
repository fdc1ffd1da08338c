#include "kube/informer.h"

#include "absl/container/flat_hash_map.h"

namespace tessera::kube {
namespace {

std::string RvOf(const Json& obj) {
  const Json md = obj.value("metadata", Json::object());
  return md.value("resourceVersion", "");
}

}  // namespace

Informer::Informer(RestClient& client, ReflectorOptions options)
    : reflector_(client, std::move(options), *this) {}

Informer::~Informer() { Stop(); }

void Informer::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { reflector_.Run(); });
}

void Informer::Stop() {
  reflector_.Stop();
  if (thread_.joinable()) thread_.join();
}

void Informer::OnReplace(std::vector<ObjectPtr> objects, const std::string&) {
  const bool initial = !synced_.HasBeenNotified();
  std::vector<ObjectPtr> fresh = objects;
  std::vector<ObjectPtr> before = store_.Replace(std::move(objects));
  absl::flat_hash_map<std::string, ObjectPtr> old_by_key;
  for (ObjectPtr& o : before) old_by_key.emplace(KeyOf(*o), std::move(o));
  for (const ObjectPtr& obj : fresh) {
    auto it = old_by_key.find(KeyOf(*obj));
    if (it == old_by_key.end()) {
      for (const EventHandlers& h : handlers_) {
        if (h.on_add) h.on_add(obj, initial);
      }
      continue;
    }
    if (RvOf(*it->second) != RvOf(*obj)) {
      for (const EventHandlers& h : handlers_) {
        if (h.on_update) h.on_update(it->second, obj);
      }
    }
    old_by_key.erase(it);
  }
  for (const auto& [key, gone] : old_by_key) {
    for (const EventHandlers& h : handlers_) {
      if (h.on_delete) h.on_delete(gone);
    }
  }
  if (initial) synced_.Notify();
}

void Informer::OnEvent(const std::string& type, ObjectPtr object) {
  if (type == "DELETED") {
    ObjectPtr old = store_.Remove(KeyOf(*object));
    if (old == nullptr) return;  // never seen (or already gone by a relist)
    for (const EventHandlers& h : handlers_) {
      if (h.on_delete) h.on_delete(object);
    }
    return;
  }
  ObjectPtr old = store_.Upsert(object);
  for (const EventHandlers& h : handlers_) {
    if (old == nullptr) {
      if (h.on_add) h.on_add(object, false);
    } else if (h.on_update) {
      h.on_update(old, object);
    }
  }
}

}  // namespace tessera::kube
