// ReadAheadParser: parses a list of stored values (api::ParseStored) on a helper thread, ahead of
// the one thread that consumes them, so that a restarting controller decodes the store on two
// cores: one parses JSON while the other rebuilds the cluster from what was parsed.
//
// Algorithm: the values are cut into chunks of kChunk; a ring of kRing chunk buffers goes round
// between the two threads. The helper parses chunk c into buffer c % kRing once the consumer has
// handed that buffer back, destroying the objects the buffer still holds first; the consumer
// takes chunks in order and hands each back when it moves past it. Each parsed object is so
// allocated and freed on the helper thread: glibc's malloc gives each thread its own arena, and
// objects freed from another thread than the one that allocated them cost a locked free each
// (decoding on several threads without this measured slower than one thread). The consumer
// copies what it keeps out of the objects.
//
// Contract: `values` outlives the parser and does not change while it runs. Next() is called
// from one thread only, at most values.size() times; the reference it returns is valid until the
// following call of Next() or the destructor. The destructor stops the helper and joins it,
// whether or not every value was taken.
#pragma once

#include <array>
#include <cstddef>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "store/store.h"

namespace tessera::controller {

class ReadAheadParser {
 public:
  explicit ReadAheadParser(const std::vector<store::KeyValue>& values);
  ~ReadAheadParser();
  ReadAheadParser(const ReadAheadParser&) = delete;
  ReadAheadParser& operator=(const ReadAheadParser&) = delete;

  // The next value, parsed: values[0] first. DataLoss when it is not a stored object.
  const absl::StatusOr<nlohmann::json>& Next();

 private:
  static constexpr size_t kChunk = 128;
  static constexpr size_t kRing = 4;

  void Run();

  const std::vector<store::KeyValue>& values_;
  const size_t chunks_;
  std::array<std::vector<absl::StatusOr<nlohmann::json>>, kRing> ring_;
  absl::Mutex mu_;
  size_t parsed_ ABSL_GUARDED_BY(mu_) = 0;    // chunks the helper has filled
  size_t released_ ABSL_GUARDED_BY(mu_) = 0;  // chunks the consumer is done with
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  size_t next_ = 0;  // the consumer's next value
  std::thread helper_;
};

}  // namespace tessera::controller
