#include "store/etcd/event_window.h"

#include <algorithm>
#include <utility>

namespace tessera::store {

EventWindow::EventWindow(size_t max_bytes, int64_t revision)
    : max_bytes_(max_bytes), from_(revision), to_(revision) {}

void EventWindow::Append(std::vector<Event> events, int64_t complete_to) {
  if (complete_to <= to_) return;
  for (Event& e : events) {
    if (e.revision <= to_ || e.revision > complete_to) continue;  // not this window's
    bytes_ += Cost(e);
    events_.push_back(std::move(e));
  }
  to_ = complete_to;
  Trim();
}

void EventWindow::Reset(int64_t revision) {
  events_.clear();
  bytes_ = 0;
  from_ = to_ = revision;
}

void EventWindow::Trim() {
  // Drop whole revisions, oldest first, while over budget; never the newest revision.
  while (bytes_ > max_bytes_ && !events_.empty() &&
         events_.front().revision != events_.back().revision) {
    const int64_t rev = events_.front().revision;
    while (!events_.empty() && events_.front().revision == rev) {
      bytes_ -= Cost(events_.front());
      events_.pop_front();
    }
    from_ = rev;
  }
}

EventsResult EventWindow::Read(std::string_view prefix, int64_t since, int64_t limit) const {
  EventsResult result;
  result.revision = to_;
  auto it = std::upper_bound(events_.begin(), events_.end(), since,
                             [](int64_t rev, const Event& e) { return rev < e.revision; });
  for (; it != events_.end(); ++it) {
    const Event& e = *it;
    if (!HasPrefix(e.kv.key, prefix)) continue;
    if (limit > 0 && static_cast<int64_t>(result.events.size()) >= limit &&
        e.revision != result.events.back().revision) {
      result.revision = e.revision - 1;
      break;
    }
    result.events.push_back(e);
  }
  return result;
}

}  // namespace tessera::store
