// The phase a bound job's member reports call for: the controller's reading of
// status.members[] (api/member_status.h), which node agents write and the controller alone turns
// into phases, Events and restarts.
//
// Algorithm. Take each member of status.placement with its report at the binding's generation
// (other generations, and members without a report, count as not yet started), then:
//   TrainingJob:      a Failed member -> Failed (unless restarts are left: MaybeRestart restarts
//                     the gang); every member Exited -> Succeeded; a member Running while the
//                     job is Scheduled -> Running.
//   InferenceService: every replica Running -> Ready; else Degraded once it has served (Ready or
//                     Degraded), Deploying before. A service never finishes by itself: its
//                     agents restart replicas that exit.
// A preemption victim (PreemptionPending) neither fails nor succeeds by its exits: they answer
// its checkpoint signal, and the controller requeues it. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "api/member_status.h"
#include "nlohmann/json.hpp"

namespace tessera::controller {

// A member that failed at the job's current generation.
struct MemberFailure {
  std::string member;  // "<group>-<index>"
  int64_t code = 0;
  std::string node;
  std::string reason;   // "exited with code 3", "killed by signal 9 (SIGKILL)"
  std::string message;  // the last lines of its stderr
};

struct MemberVerdict {
  std::string phase;  // the phase the reports call for (the current one when nothing changes)
  std::optional<MemberFailure> failure;  // the first failed member, restarts left or not
  bool all_exited = false;               // every placed member's process is gone
};

// `phase`: the job's stored phase (a bound one); `restarts_left`: spec.maxRestarts - restarts.
MemberVerdict JudgeMembers(absl::string_view kind, absl::string_view phase,
                           const nlohmann::json& status, int64_t restarts_left);

// True when every member of status.placement reported its process gone at the binding's
// generation (a victim whose members answered the checkpoint signal).
inline bool AllMembersExited(const nlohmann::json& status) {
  return JudgeMembers("", "", status, 0).all_exited;
}

// A one-line account of a failure for messages and Events: "member worker-1 exited with code 3
// on node n1; its stderr ends: ...".
std::string DescribeFailure(const MemberFailure& f);

// The failure as a job's status.reason, a word as kubectl shows for a container: "Error" (a
// non-zero exit code), "Killed" (a signal, exit code 128+N), "StartError" (it never ran).
std::string FailureClass(const MemberFailure& f);

}  // namespace tessera::controller
