#include "controller/member_phase.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "controller/controller_internal.h"
#include "model/job.h"

namespace tessera::controller {

using namespace internal;  // NOLINT: the module's own helpers

MemberVerdict JudgeMembers(absl::string_view kind, absl::string_view phase, const Json& status,
                           int64_t restarts_left) {
  MemberVerdict v;
  v.phase = std::string(phase);
  auto placement = status.find("placement");
  if (placement == status.end() || !placement->is_array() || placement->empty()) return v;
  const std::vector<api::MemberStatus> members = api::MembersOf(status);
  const int64_t job_gen = IntOr(status, "generation", 0);
  bool any_running = false, all_running = true, all_ok = true, all_exited = true;
  for (const Json& m : *placement) {
    if (!m.is_object()) {
      all_running = all_ok = all_exited = false;
      continue;
    }
    const std::string key = model::MemberKey(Str(m, "group"), IntOr(m, "member", 0));
    const api::MemberStatus* r = api::FindMember(members, key);
    if (r != nullptr && r->generation != IntOr(m, "generation", job_gen)) r = nullptr;
    const api::MemberState state = r != nullptr ? r->state : api::MemberState::kStarting;
    any_running = any_running || state == api::MemberState::kRunning;
    all_running = all_running && state == api::MemberState::kRunning;
    all_ok = all_ok && state == api::MemberState::kExited;
    all_exited = all_exited && api::Finished(state);
    if (state == api::MemberState::kFailed && !v.failure) {
      v.failure = MemberFailure{key, r->exit_code.value_or(-1), r->node, r->reason, r->message};
    }
  }
  v.all_exited = all_exited;
  const bool victim = ConditionTrue(status, "PreemptionPending");
  if (kind == "InferenceService") {
    if (victim) return v;
    const bool served = phase == "Ready" || phase == "Degraded";
    v.phase = all_running ? "Ready" : served ? "Degraded" : "Deploying";
    return v;
  }
  if (victim) return v;
  if (v.failure && restarts_left <= 0) {
    v.phase = "Failed";
  } else if (v.failure) {
    // MaybeRestart restarts the gang; until it has, the phase stays.
  } else if (all_ok) {
    v.phase = "Succeeded";
  } else if (any_running && phase == "Scheduled") {
    v.phase = "Running";
  }
  return v;
}

std::string FailureClass(const MemberFailure& f) {
  if (f.code < 0) return "StartError";
  if (f.code > 128 && f.code < 128 + 65) return "Killed";
  return "Error";
}

std::string DescribeFailure(const MemberFailure& f) {
  std::string out =
      absl::StrCat("member ", f.member, " ", f.reason.empty() ? api::ExitReason(f.code) : f.reason);
  if (!f.node.empty()) absl::StrAppend(&out, " on node ", f.node);
  if (!f.message.empty()) {
    // One line: the stderr tail's newlines become " | ".
    absl::StrAppend(&out, "; its stderr ends: ", absl::StrReplaceAll(f.message, {{"\n", " | "}}));
  }
  return out;
}

}  // namespace tessera::controller
