// EventWindow: the most recent stretch of a store's history, held in memory so that Events calls
// are answered without a round trip (EtcdStore's watch cache, watch_cache.h, fills it from one
// long-lived etcd watch).
//
// The window is complete for the revisions in (from(), to()]: it holds every event of those
// revisions, in (revision, position within Txn) order, and nothing else. Appending a watch
// response's events extends to(); a byte budget drops the oldest revisions (whole revisions, a
// Txn's events are never split), which raises from(); Reset() forgets everything after a gap
// (etcd compacted the history the watch had to resume from).
//
// Thread safety: none; the owner locks. Not copyable (it can be large).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string_view>
#include <vector>

#include "store/store.h"

namespace tessera::store {

class EventWindow {
 public:
  // An empty window complete from `revision` (from() == to() == revision), holding at most about
  // `max_bytes` of keys and values (at least the newest revision is always kept).
  EventWindow(size_t max_bytes, int64_t revision);
  EventWindow(const EventWindow&) = delete;
  EventWindow& operator=(const EventWindow&) = delete;

  int64_t from() const { return from_; }
  int64_t to() const { return to_; }
  size_t bytes() const { return bytes_; }
  size_t size() const { return events_.size(); }

  // Adds `events` (revisions in (to(), complete_to], ascending) and marks the window complete up
  // to `complete_to` (which may be above the last event: revisions without events of this
  // store, e.g. another key space's writes). `complete_to` below to() changes nothing.
  void Append(std::vector<Event> events, int64_t complete_to);

  // Forgets every event; the window is complete from `revision` on.
  void Reset(int64_t revision);

  // As Store::Events(prefix, since, limit) over the window. Requires from() <= since <= to().
  // result.revision is to(), or, when `limit` cut the page, the revision before the first event
  // left out.
  EventsResult Read(std::string_view prefix, int64_t since, int64_t limit) const;

 private:
  static size_t Cost(const Event& e) { return sizeof(Event) + e.kv.key.size() + e.kv.value.size(); }
  void Trim();

  size_t max_bytes_;
  int64_t from_, to_;
  size_t bytes_ = 0;
  std::deque<Event> events_;
};

}  // namespace tessera::store
