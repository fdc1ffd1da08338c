// EventRecorder: writes events.k8s.io/v1 Events about objects, as client-go's recorder does
// (without its aggregation): one Event per call, named after the object with a unique
// hexadecimal suffix, the note cut to the API's 1 KiB limit. A write that fails is logged at
// debug level and dropped: Events are best effort, never a reason to fail a reconcile.
// Thread safety: Post may be called from any thread.
#pragma once

#include <atomic>
#include <string>

#include "common/clock.h"
#include "kube/objects.h"
#include "kube/rest_client.h"
#include "obs/log.h"

namespace tessera::kube {

class EventRecorder {
 public:
  // `client` and `clock` are borrowed. `controller`: reportingController ("tessera.dev/operator");
  // `instance`: reportingInstance (the process's identity).
  EventRecorder(RestClient& client, const Clock& clock, std::string controller,
                std::string instance, obs::Logger log = {});

  // type: Normal or Warning; action: what was done ("Binding", "Restarting").
  void Post(const ObjectReference& regarding, const std::string& type, const std::string& reason,
            const std::string& action, const std::string& note);

 private:
  RestClient& client_;
  const Clock& clock_;
  const std::string controller_, instance_;
  obs::Logger log_;
  std::atomic<uint64_t> seq_{0};
};

// The reference to an object as Events and owner references name it: apiVersion and kind as
// given, namespace, name and uid from its metadata.
ObjectReference ReferenceTo(const Json& obj);

}  // namespace tessera::kube
