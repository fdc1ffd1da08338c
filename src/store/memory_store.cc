#include "store/memory_store.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "store/txn_check.h"

namespace tessera::store {

absl::StatusOr<KeyValue> MemoryStore::Get(std::string_view key) {
  absl::MutexLock l(&mu_);
  auto it = kvs_.find(key);
  if (it == kvs_.end())
    return absl::NotFoundError(absl::StrCat("key ", std::string(key), " not found"));
  return it->second;
}

absl::StatusOr<ListResult> MemoryStore::List(std::string_view prefix, const ListOptions& options) {
  if (options.limit < 0) return absl::InvalidArgumentError("list: negative limit");
  absl::MutexLock l(&mu_);
  ListResult result;
  result.revision = revision_;
  auto it = options.continue_after.empty() || options.continue_after < prefix
                ? kvs_.lower_bound(prefix)
                : kvs_.upper_bound(options.continue_after);
  for (; it != kvs_.end() && HasPrefix(it->first, prefix); ++it) {
    if (options.limit > 0 && static_cast<int64_t>(result.kvs.size()) == options.limit) {
      result.more = true;
      result.next_key = result.kvs.back().key;
      break;
    }
    result.kvs.push_back(it->second);
  }
  return result;
}

absl::StatusOr<int64_t> MemoryStore::Txn(const std::vector<Op>& ops) {
  if (absl::Status s = ValidateTxnShape(ops); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  for (const Op& op : ops) {
    auto it = kvs_.find(op.key);
    if (absl::Status s = CheckOp(op, it == kvs_.end() ? nullptr : &it->second); !s.ok()) return s;
  }
  const int64_t rev = ++revision_;
  for (const Op& op : ops) {
    Event ev;
    ev.revision = rev;
    auto it = kvs_.find(op.key);
    if (op.kind == Op::Kind::kPut) {
      ev.type = Event::Type::kPut;
      if (it == kvs_.end()) {
        it = kvs_.emplace(op.key, KeyValue{op.key, op.value, rev, rev}).first;
      } else {
        ev.prev_mod_revision = it->second.mod_revision;
        it->second.value = op.value;
        it->second.mod_revision = rev;
      }
      ev.kv = it->second;
    } else {
      ev.type = Event::Type::kDelete;
      ev.prev_mod_revision = it->second.mod_revision;
      ev.kv = std::move(it->second);
      ev.kv.mod_revision = rev;
      kvs_.erase(it);
    }
    history_.push_back(std::move(ev));
  }
  if (options_.retain_revisions > 0 && revision_ - compacted_ > options_.retain_revisions) {
    CompactLocked(revision_ - options_.retain_revisions);
  }
  return rev;
}

absl::StatusOr<EventsResult> MemoryStore::Events(std::string_view prefix, int64_t since_revision,
                                                 int64_t limit) {
  absl::MutexLock l(&mu_);
  if (since_revision < 0 || since_revision > revision_) {
    return absl::InvalidArgumentError(
        absl::StrCat("events: revision ", since_revision, " is not in [0, ", revision_, "]"));
  }
  if (since_revision < compacted_) {
    return absl::OutOfRangeError(absl::StrCat("required revision ", since_revision,
                                              " has been compacted (compacted revision ",
                                              compacted_, ")"));
  }
  EventsResult result;
  result.revision = revision_;
  auto it = std::upper_bound(history_.begin(), history_.end(), since_revision,
                             [](int64_t rev, const Event& e) { return rev < e.revision; });
  for (; it != history_.end(); ++it) {
    if (limit > 0 && static_cast<int64_t>(result.events.size()) >= limit &&
        it->revision != result.events.back().revision) {
      result.revision = it->revision - 1;
      break;
    }
    if (HasPrefix(it->kv.key, prefix)) result.events.push_back(*it);
  }
  return result;
}

absl::Status MemoryStore::WaitForRevision(int64_t revision, absl::Time deadline) {
  absl::MutexLock l(&mu_);
  auto reached = [this, revision]()
                     ABSL_SHARED_LOCKS_REQUIRED(mu_) { return revision_ >= revision; };
  if (mu_.AwaitWithDeadline(absl::Condition(&reached), deadline)) return absl::OkStatus();
  return absl::DeadlineExceededError(absl::StrCat("revision ", revision, " not reached"));
}

int64_t MemoryStore::CurrentRevision() {
  absl::MutexLock l(&mu_);
  return revision_;
}

int64_t MemoryStore::CompactedRevision() {
  absl::MutexLock l(&mu_);
  return compacted_;
}

absl::Status MemoryStore::Compact(int64_t revision) {
  absl::MutexLock l(&mu_);
  if (revision > revision_) {
    return absl::OutOfRangeError(
        absl::StrCat("compact: revision ", revision, " is above current revision ", revision_));
  }
  CompactLocked(revision);
  return absl::OkStatus();
}

void MemoryStore::CompactLocked(int64_t revision) {
  if (revision <= compacted_) return;
  while (!history_.empty() && history_.front().revision <= revision) history_.pop_front();
  compacted_ = revision;
}

}  // namespace tessera::store
