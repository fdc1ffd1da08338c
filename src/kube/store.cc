#include "kube/store.h"

#include "absl/strings/str_cat.h"

namespace tessera::kube {

std::string KeyOf(const nlohmann::json& obj) {
  const nlohmann::json md = obj.value("metadata", nlohmann::json::object());
  const std::string ns = md.value("namespace", "");
  const std::string name = md.value("name", "");
  return ns.empty() ? name : absl::StrCat(ns, "/", name);
}

std::vector<std::string> NamespaceIndex(const nlohmann::json& obj) {
  const nlohmann::json md = obj.value("metadata", nlohmann::json::object());
  return {md.value("namespace", "")};
}

absl::Status Store::AddIndexer(const std::string& name, const IndexFunc& fn) {
  absl::MutexLock lock(&mu_);
  if (!items_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("index ", name, ": indexers are added before the store has objects"));
  }
  if (indexers_.contains(name)) {
    return absl::AlreadyExistsError(absl::StrCat("index ", name, ": already defined"));
  }
  indexers_.emplace(name, fn);
  return absl::OkStatus();
}

void Store::IndexLocked(const std::string& key, const nlohmann::json* old_obj,
                        const nlohmann::json* new_obj) {
  for (const auto& [name, fn] : indexers_) {
    auto& index = indices_[name];
    if (old_obj != nullptr) {
      for (const std::string& v : fn(*old_obj)) {
        auto it = index.find(v);
        if (it == index.end()) continue;
        it->second.erase(key);
        if (it->second.empty()) index.erase(it);
      }
    }
    if (new_obj != nullptr) {
      for (const std::string& v : fn(*new_obj)) index[v].insert(key);
    }
  }
}

ObjectPtr Store::Upsert(ObjectPtr obj) {
  const std::string key = KeyOf(*obj);
  absl::MutexLock lock(&mu_);
  ObjectPtr& slot = items_[key];
  ObjectPtr old = std::move(slot);
  IndexLocked(key, old.get(), obj.get());
  slot = std::move(obj);
  return old;
}

ObjectPtr Store::Remove(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = items_.find(key);
  if (it == items_.end()) return nullptr;
  ObjectPtr old = std::move(it->second);
  items_.erase(it);
  IndexLocked(key, old.get(), nullptr);
  return old;
}

std::vector<ObjectPtr> Store::Replace(std::vector<ObjectPtr> objs) {
  absl::MutexLock lock(&mu_);
  std::vector<ObjectPtr> before;
  before.reserve(items_.size());
  for (auto& [key, obj] : items_) before.push_back(std::move(obj));
  items_.clear();
  indices_.clear();
  for (ObjectPtr& o : objs) {
    const std::string key = KeyOf(*o);
    IndexLocked(key, nullptr, o.get());
    items_[key] = std::move(o);
  }
  return before;
}

ObjectPtr Store::Get(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = items_.find(key);
  return it == items_.end() ? nullptr : it->second;
}

std::vector<ObjectPtr> Store::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<ObjectPtr> out;
  out.reserve(items_.size());
  for (const auto& [key, obj] : items_) out.push_back(obj);
  return out;
}

std::vector<std::string> Store::ListKeys() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [key, obj] : items_) out.push_back(key);
  return out;
}

absl::Status Store::ByIndex(const std::string& index, const std::string& value,
                            std::vector<ObjectPtr>* out) const {
  absl::MutexLock lock(&mu_);
  if (!indexers_.contains(index)) {
    return absl::NotFoundError(absl::StrCat("index ", index, ": not defined"));
  }
  out->clear();
  auto idx = indices_.find(index);
  if (idx == indices_.end()) return absl::OkStatus();
  auto keys = idx->second.find(value);
  if (keys == idx->second.end()) return absl::OkStatus();
  for (const std::string& k : keys->second) {
    auto it = items_.find(k);
    if (it != items_.end()) out->push_back(it->second);
  }
  return absl::OkStatus();
}

size_t Store::size() const {
  absl::MutexLock lock(&mu_);
  return items_.size();
}

}  // namespace tessera::kube
