// MemberStatus: one member's entry in a job's status.members[], the typed record in which node
// agents report what became of the members bound to them, and from which the controller derives
// the job's phase (docs/api.md, "Member status").
//
//   {"member": "<group>-<index>", "generation": G, "state": "Starting|Running|Exited|Failed",
//    "exitCode": C, "reason": "...", "message": "...", "node": "N",
//    "lastCheckpoint": {"step": S, "path": "...", "time": "..."}, "time": "..."}
//
// Contract:
//  - `member` is model::MemberKey(group, index); one entry per member; `generation` is the
//    fencing generation of the binding the report is about (a report of another generation says
//    nothing about the current binding).
//  - Exited means the member's command ended with code 0; Failed means it ended otherwise (a
//    non-zero code, a signal: exitCode 128+N as shells report it) or could not be started.
//    `reason` says which in a few words; `message` carries the last lines of its stderr.
//  - `node` is stamped by the API server from the placement, never taken from the reporter.
// Pure values and functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace tessera::api {

enum class MemberState { kStarting, kRunning, kExited, kFailed };

// "Starting", "Running", "Exited", "Failed".
const char* MemberStateName(MemberState s);
std::optional<MemberState> ParseMemberState(absl::string_view s);
// Exited or Failed: the member's process is gone.
inline bool Finished(MemberState s) {
  return s == MemberState::kExited || s == MemberState::kFailed;
}

struct MemberCheckpoint {
  int64_t step = 0;
  std::string path;
  absl::Time time = absl::InfinitePast();  // InfinitePast: unknown
  friend bool operator==(const MemberCheckpoint&, const MemberCheckpoint&) = default;
};

struct MemberStatus {
  std::string member;  // "<group>-<index>"
  int64_t generation = 0;
  MemberState state = MemberState::kStarting;
  std::optional<int64_t> exit_code;  // Exited (0) / Failed
  std::string reason;
  std::string message;
  std::string node;
  std::optional<MemberCheckpoint> last_checkpoint;
  absl::Time time = absl::InfinitePast();  // when the agent saw this state; InfinitePast: unknown

  friend bool operator==(const MemberStatus&, const MemberStatus&) = default;
};

// Limits of the record (the schema in kinds.cc enforces them on input).
inline constexpr size_t kMemberReasonMaxBytes = 256;
inline constexpr size_t kMemberMessageMaxBytes = 2048;

nlohmann::json ToJson(const MemberStatus& m);
// InvalidArgument naming the field when `j` is not a well-formed entry.
absl::StatusOr<MemberStatus> MemberStatusFromJson(const nlohmann::json& j);

// Every well-formed entry of status.members (malformed ones are skipped: the schema keeps them
// out of the store, so there are none but in a corrupted record).
std::vector<MemberStatus> MembersOf(const nlohmann::json& status);
// The exit code that speaks for a job's members (sacct's EXIT, the dashboard's "exit 3"): the
// first Failed member's, else 0 when one Exited; nullopt while none has finished.
std::optional<int64_t> JobExitCode(const std::vector<MemberStatus>& members);
// The entry for `member`, or null.
const MemberStatus* FindMember(const std::vector<MemberStatus>& members, absl::string_view member);

// What a finished member's exit code means in words: "exited with code 3", "killed by signal 9
// (SIGKILL)" for 128+N, "completed" for 0.
std::string ExitReason(int64_t exit_code);

// The last `max_lines` lines of `text` (a log's tail), at most `max_bytes` bytes, cut at a line
// start where it can be and made valid UTF-8 (a cut inside a character is dropped).
std::string TailLines(absl::string_view text, size_t max_lines, size_t max_bytes);

}  // namespace tessera::api
