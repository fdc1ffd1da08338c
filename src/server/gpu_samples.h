// GpuSamples: the newest measured utilization of every node's GPUs, as its
// agent reported them in its last heartbeat, kept in the server's memory.
//
// Why: heartbeats are leases (node_heartbeat.cc); the Node is written only on
// a health change or every --node-status-seconds, so the samples stored in
// status.gpus[].utilization can be a minute old. Readers that show live
// utilization (the dashboard's GET /api/v1/fleet) take it from here instead,
// and wait for it to change as they wait for store writes.
//
// Versions: every Report that changes a node's samples takes the next version
// (1, 2, ...), process-local: a reader passes the version it last saw and gets
// the nodes changed after it. A version from a previous server process (larger
// than the current one) gets every node, as does 0.
//
// History: every report (changed or not) also goes into per-minute means of the last
// kHistoryMinutes (60) minutes per GPU, for the dashboard's utilization sparklines
// (GET /api/v1/nodes/NAME/utilization). A ring of 60 slots per node, a slot reused when its
// minute comes round again: about 1.5 KB per 8-GPU node (18 MB for 12,500 nodes).
//
// Thread-safe (one mutex); waiting readers are woken by any change.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tessera::server {

class GpuSamples {
 public:
  // Utilization % per GPU index (0..100), -1 where the agent reported none.
  using Samples = std::vector<int>;

  static constexpr int kHistoryMinutes = 60;

  // Records `node`'s samples taken at `now` (into the history too); a new version only when
  // they differ from the last ones. Returns whether they did.
  bool Report(absl::string_view node, Samples samples, absl::Time now = absl::InfinitePast())
      ABSL_LOCKS_EXCLUDED(mu_);
  // Per GPU, the mean utilization of each of the kHistoryMinutes minutes up to the one holding
  // `now`, oldest first; -1 for a minute without samples. Empty when the node never reported.
  std::vector<std::vector<int>> History(absl::string_view node, absl::Time now) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The node's last samples, or empty when none were reported. (A deleted
  // node's entry stays until its name reports again: bounded by the names.)
  Samples Get(absl::string_view node) const ABSL_LOCKS_EXCLUDED(mu_);

  struct Changes {
    int64_t version = 0;  // complete up to this version: the reader's next `since`
    std::vector<std::pair<std::string, Samples>> nodes;  // sorted by name
  };
  // Nodes whose samples changed after `since` (every node when `since` is 0
  // or from another process, i.e. larger than version()).
  Changes Since(int64_t since) const ABSL_LOCKS_EXCLUDED(mu_);
  int64_t version() const ABSL_LOCKS_EXCLUDED(mu_);

  // Waits until version() > since or `deadline`; returns whether it changed.
  bool WaitForChange(int64_t since, absl::Time deadline) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // One minute of one node: per GPU the sum and number of its samples.
  struct Minute {
    int64_t minute = -1;  // minutes since the epoch; -1: unused
    std::vector<uint16_t> sum;
    std::vector<uint8_t> count;
  };
  struct Entry {
    Samples samples;
    int64_t version = 0;
    std::vector<Minute> ring;  // kHistoryMinutes slots, by minute % kHistoryMinutes
  };
  mutable absl::Mutex mu_;
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, Entry> nodes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tessera::server
