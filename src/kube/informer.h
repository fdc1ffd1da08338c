// Informer: a Reflector feeding a Store, with event handlers (client-go's SharedIndexInformer,
// without resync or shared registration).
//
// Events: on_add(obj, in_initial_list), on_update(old, new), on_delete(last known state). The
// store already holds the change when a handler runs. A relist (after a 410) is turned into the
// events that bring the handlers from the old set to the new one: adds for new keys, updates for
// objects whose resourceVersion changed, deletes (with the last state seen) for keys that are
// gone; objects that did not change produce no event.
// Handlers run on the informer's thread, one at a time, in the order of the changes: they must
// not block (enqueue into a WorkQueue and return).
// Thread safety: AddIndexer and AddEventHandlers before Start; the rest from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "kube/reflector.h"
#include "kube/store.h"

namespace tessera::kube {

struct EventHandlers {
  std::function<void(const ObjectPtr& obj, bool in_initial_list)> on_add;
  std::function<void(const ObjectPtr& old_obj, const ObjectPtr& new_obj)> on_update;
  std::function<void(const ObjectPtr& obj)> on_delete;
};

class Informer final : private ReflectorSink {
 public:
  // `client` must outlive the informer.
  Informer(RestClient& client, ReflectorOptions options);
  ~Informer() override;

  absl::Status AddIndexer(const std::string& name, const IndexFunc& fn) {
    return store_.AddIndexer(name, fn);
  }
  void AddEventHandlers(EventHandlers h) { handlers_.push_back(std::move(h)); }

  void Start();
  // Stops the reflector and joins its thread; idempotent.
  void Stop();
  // True once the first list is in the store.
  bool HasSynced() const { return synced_.HasBeenNotified(); }
  bool WaitForSync(absl::Duration timeout) const {
    return synced_.WaitForNotificationWithTimeout(timeout);
  }

  const Store& store() const { return store_; }
  const Reflector& reflector() const { return reflector_; }

 private:
  void OnReplace(std::vector<ObjectPtr> objects, const std::string& resource_version) override;
  void OnEvent(const std::string& type, ObjectPtr object) override;

  Store store_;
  Reflector reflector_;
  std::vector<EventHandlers> handlers_;
  absl::Notification synced_;
  std::thread thread_;
};

}  // namespace tessera::kube
