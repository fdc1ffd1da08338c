// Store: the informer's thread-safe cache of objects by key ("NS/NAME", or "NAME" for
// cluster-scoped objects), with indexes (client-go's cache.ThreadSafeStore + Indexers).
//
// An index maps each object to zero or more index values (IndexFunc); ByIndex(name, value)
// returns the objects that produced `value`. Objects are immutable shared JSON: a reader keeps
// a consistent snapshot of an object however the store changes after.
// Thread safety: all methods are safe for concurrent use; indexers are added before the first
// object (AddIndexer after that fails with FailedPrecondition).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace tessera::kube {

using ObjectPtr = std::shared_ptr<const nlohmann::json>;
using IndexFunc = std::function<std::vector<std::string>(const nlohmann::json&)>;

// metadata.namespace + "/" + metadata.name, or metadata.name without a namespace.
std::string KeyOf(const nlohmann::json& obj);
// The index client-go calls "namespace": by metadata.namespace.
std::vector<std::string> NamespaceIndex(const nlohmann::json& obj);

class Store {
 public:
  absl::Status AddIndexer(const std::string& name, const IndexFunc& fn);

  // Inserts or replaces the object at KeyOf(*obj); returns the previous one (null if none).
  ObjectPtr Upsert(ObjectPtr obj);
  // Removes the object at `key`; returns it (null if absent).
  ObjectPtr Remove(const std::string& key);
  // Replaces the whole content (a relist); returns the objects that were there before.
  std::vector<ObjectPtr> Replace(std::vector<ObjectPtr> objs);

  ObjectPtr Get(const std::string& key) const;
  std::vector<ObjectPtr> List() const;
  std::vector<std::string> ListKeys() const;
  // NotFound for an unknown index.
  absl::Status ByIndex(const std::string& index, const std::string& value,
                       std::vector<ObjectPtr>* out) const;
  size_t size() const;

 private:
  void IndexLocked(const std::string& key, const nlohmann::json* old_obj,
                   const nlohmann::json* new_obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ObjectPtr> items_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, IndexFunc> indexers_ ABSL_GUARDED_BY(mu_);
  // index name -> index value -> keys
  absl::flat_hash_map<std::string,
                      absl::flat_hash_map<std::string, absl::flat_hash_set<std::string>>>
      indices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::kube
