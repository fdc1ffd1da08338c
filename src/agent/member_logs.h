// A node's member logs: which files there are, a coarse time index into them, and the agent's
// GET /logs (docs/agent.md, "Logs").
//
// Files: STATE/logs/<namespace>/<job>/<group>-<index>.g<generation>.{stdout,stderr} (the
// launcher writes one pair per member and generation, appending; files of agents before
// generations were in the name, <group>-<index>.{stdout,stderr}, count as generation 0). They
// stay after the member is gone, so a finished or moved member's logs can be read on the node
// that ran it.
//
// Time index: the member's output goes straight from its process to the file (it outlives the
// agent), so lines carry no time. Instead LogIndexer samples, about once a second, the size of
// each running member's files and appends "<unix ms> <bytes>" to <file>.idx when it grew.
// OffsetSince(T) is then the size at the last sample at or before T: reading from there gives
// every line written after T, and at most one sampling period of lines before it
// (`tessera logs --since`). A file never sampled is read whole.
//
// GET /logs?namespace=NS&job=J[&members=a,b|&member=a][&stream=stdout|stderr][&generation=G]
//          [&tail=N][&sinceSeconds=S][&follow=1]
//   The files of the job's members on this node: of generation G, or else each member's newest
//   here; each line prefixed "[member] ". 404 when there is none.
// GET /logs?namespace=NS&job=J&list=1
//   JSON {"files": [{"member", "generation", "stream", "bytes"}]}: what this node has, for a
//   client choosing a generation across nodes (`tessera logs --previous`).
//
// Thread safety: ServeLogs and the free functions may run concurrently; LogIndexer is used from
// one thread.
#pragma once

#include <httplib.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/launcher/launcher.h"

namespace tessera::agent {

struct LogFile {
  std::string member;  // "<group>-<index>"
  int64_t generation = 0;
  std::string stream;  // "stdout" or "stderr"
  std::string path;
};

// The log files in `dir` (a job's log directory), sorted by member, generation, stream.
std::vector<LogFile> ListLogFiles(const std::string& dir);

// The byte offset from which `path` holds what was written after `since` (see above); 0 when
// its index has no sample at or before `since`.
int64_t OffsetSince(const std::string& path, absl::Time since);

class LogIndexer {
 public:
  // Appends a sample to `path`.idx for each path whose size changed since its last sample.
  void Sample(const std::vector<std::string>& paths, absl::Time now);

 private:
  std::map<std::string, int64_t> last_size_;
};

// The agent's GET /logs. `stop` ends follow streams (the agent is stopping).
void ServeLogs(const httplib::Request& req, httplib::Response& res, const Launcher& launcher,
               const std::atomic<bool>& stop);

}  // namespace tessera::agent
