// Reflector: keeps a sink in step with one resource type through list + watch (client-go's
// cache.Reflector).
//
// Algorithm (Run):
//   1. List every page (page_size objects, a consistent read) and hand the whole set to the sink
//      (OnReplace); remember the list's resourceVersion.
//   2. Watch from that resourceVersion with bookmarks; each event goes to the sink (OnEvent) and
//      advances the remembered resourceVersion (a BOOKMARK advances it only). Each watch asks the
//      server to end it after a random time in [min_watch_timeout, 2*min_watch_timeout), as
//      client-go does, so that watches do not all reconnect together.
//   3. When a watch ends normally or its connection is lost, watch again from the remembered
//      resourceVersion (resumption: nothing is listed again, nothing is missed). When the
//      apiserver answers 410 Gone (the resourceVersion was compacted away, or predates a
//      restarted apiserver's cache), go to 1 (relist). Other failures back off exponentially
//      (backoff_initial doubling to backoff_max) and relist.
// Stop() ends Run promptly (the watch's connection is shut down).
// Thread safety: Run on one thread; Stop and the accessors from any thread. The sink is called
// on Run's thread only, one call at a time.
#pragma once

#include <atomic>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "kube/resource.h"
#include "kube/rest_client.h"
#include "kube/store.h"
#include "obs/log.h"

namespace tessera::kube {

class ReflectorSink {
 public:
  virtual ~ReflectorSink() = default;
  // The complete set of objects as of `resource_version` (the first list and every relist).
  virtual void OnReplace(std::vector<ObjectPtr> objects, const std::string& resource_version) = 0;
  // type: ADDED, MODIFIED or DELETED (DELETED carries the object's last state).
  virtual void OnEvent(const std::string& type, ObjectPtr object) = 0;
};

struct ReflectorOptions {
  ResourceType type;
  std::string ns;  // empty: all namespaces (or a cluster-scoped type)
  std::string label_selector, field_selector;
  int64_t page_size = 500;
  absl::Duration min_watch_timeout = absl::Minutes(5);
  absl::Duration backoff_initial = absl::Milliseconds(800);
  absl::Duration backoff_max = absl::Seconds(30);
  uint64_t seed = 1;  // the watch timeouts' jitter
  obs::Logger log;
};

class Reflector {
 public:
  // `client` and `sink` must outlive the reflector.
  Reflector(RestClient& client, ReflectorOptions options, ReflectorSink& sink);
  void Run();
  void Stop();

  std::string last_resource_version() const;
  int64_t lists() const { return lists_.load(); }      // successful lists (1 + relists)
  int64_t watches() const { return watches_.load(); }  // watch requests started
  int64_t gone() const { return gone_.load(); }        // 410s that forced a relist

 private:
  // False when stopped while waiting.
  bool Wait(absl::Duration d);
  bool ListOnce();

  RestClient& client_;
  const ReflectorOptions options_;
  ReflectorSink& sink_;
  absl::Notification stop_;
  WatchCancel cancel_;
  std::mt19937_64 rng_;
  mutable absl::Mutex mu_;
  std::string rv_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> lists_{0}, watches_{0}, gone_{0};
};

}  // namespace tessera::kube
