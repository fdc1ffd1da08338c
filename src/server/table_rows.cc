#include "server/table_rows.h"

#include <utility>

#include "api/object_codec.h"

namespace tessera::server {

absl::StatusOr<std::string> TableRows::RowText(absl::string_view kind, const store::KeyValue& kv,
                                               const nlohmann::json* parsed, absl::Time now,
                                               bool with_metadata) {
  std::shared_ptr<const Entry> entry;
  {
    absl::MutexLock l(&mu_);
    if (auto it = rows_.find(kv.key);
        it != rows_.end() && it->second->revision == kv.mod_revision) {
      entry = it->second;
    }
  }
  if (entry == nullptr) {
    auto fresh = std::make_shared<Entry>();
    fresh->revision = kv.mod_revision;
    if (parsed != nullptr) {
      fresh->row = api::PrepareRow(kind, *parsed);
    } else {
      absl::StatusOr<nlohmann::json> obj = api::FromStored(kv.value, kv.mod_revision);
      if (!obj.ok()) return obj.status();
      fresh->row = api::PrepareRow(kind, *obj);
    }
    entry = fresh;
    absl::MutexLock l(&mu_);
    if (rows_.size() >= max_entries_) rows_.clear();
    rows_[kv.key] = entry;
  }
  return api::RowText(entry->row, now, with_metadata);
}

size_t TableRows::size() const {
  absl::MutexLock l(&mu_);
  return rows_.size();
}

}  // namespace tessera::server
