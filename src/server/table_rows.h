// TableRows: the rows of lists asked for as Tables (kubectl's server-side printing, api/table.h),
// kept per object revision, so that listing 50,000 jobs again parses only the objects that
// changed since: the cells of an unchanged object are already JSON text, and only its AGE is
// written anew.
//
// Bounded: past `max_entries` rows (objects deleted since they were listed would otherwise
// stay), the cache is emptied and fills again from the next lists.
//
// Thread safety: thread-safe; objects are parsed outside the lock, and a row is shared, not
// copied, while a list writes it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/table.h"
#include "nlohmann/json.hpp"
#include "store/store.h"

namespace tessera::server {

class TableRows {
 public:
  explicit TableRows(size_t max_entries = 200000) : max_entries_(max_entries) {}

  // The Table row of the object of `kind` stored at `kv`, as of `now`. `parsed` is the object
  // when the caller has it already (a selector looked inside), else nullptr: it is parsed here
  // when its row is not kept. DataLoss when the stored value is not an object.
  absl::StatusOr<std::string> RowText(absl::string_view kind, const store::KeyValue& kv,
                                      const nlohmann::json* parsed, absl::Time now,
                                      bool with_metadata);

  size_t size() const;

 private:
  struct Entry {
    int64_t revision = 0;
    api::PreparedRow row;
  };
  const size_t max_entries_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const Entry>> rows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::server
