// Event objects (docs/api.md, "Events"): how every writer of the control plane
// (the scheduling controller, the federation hub) builds one, and how old ones
// are collected.
//
// An Event is stored under /registry/events/NS/NAME with labels involved-kind
// and involved-name, so `GET .../events?labelSelector=involved-name%3DJOB` and
// `tessera describe` find it. Kubernetes keeps events for an hour for the
// same reason we collect them: every transition writes one, and a busy fleet
// would otherwise grow its store without bound.
#pragma once

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "controller/store_layout.h"
#include "obs/log.h"
#include "store/store.h"

namespace tessera::controller {

// What an Event says about its object.
struct EventNote {
  std::string reason;
  std::string message;  // cut at 4096 bytes
  bool warning = false;
};

// The write that creates the Event about `obj` (any kind with metadata.name; namespace
// "default" when it has none), created at `now`: its key and stored text. `tag` makes the name
// unique among the writer's events about the same object: the name is the object's name (at
// most 40 characters) and `tag`. Pure; thread-safe.
store::Op EventPut(const Json& obj, absl::string_view tag, const EventNote& note, absl::Time now);

// Deletes Event objects older than `ttl`, one page of 1,000 per call to
// Step, in passes every ttl / 10 (10 s to 10 min), so a pass over many events
// never stalls its caller. Not thread-safe; the store must outlive it.
class EventCollector {
 public:
  EventCollector(store::Store& store, absl::Duration ttl, obs::Logger log)
      : store_(store), ttl_(ttl), log_(std::move(log)) {}
  // Events deleted by this call (0 when ttl <= 0 or not due).
  int64_t Step(absl::Time now);

 private:
  store::Store& store_;
  absl::Duration ttl_;
  obs::Logger log_;
  absl::Time next_ = absl::InfinitePast();
  std::string cursor_;  // the next page of a pass starts after this key
};

}  // namespace tessera::controller
