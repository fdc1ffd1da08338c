#pragma once

#include <string_view>

namespace tessera::sched {

// Why a pending job waits, as a bounded class: the `reason` label of the server's metrics and
// the REASON column of `tessera get jobs`. The prose that says which queue, which quota or
// what topology is short stays in QueueManager::WaitingReason and the job's status; a label
// must not take a new value with every change of that prose (one series per value).
enum class WaitReason {
  kNotTried,       // submitted, not yet through a cycle
  kOverQuota,      // its queue's quota (or an ancestor's borrowing limit) is what blocks it
  kNoRoom,         // within quota, but no placement is free now
  kReserved,       // waits at the head with a backfill reservation of the nodes it will start on
  kUnschedulable,  // no placement exists even on an empty fleet; no preemption can help
  kPreempting,     // admitted after preemption: its victims are checkpointing and exiting
  kPreempted,      // was running, preempted, waits to run again
};

// The CamelCase name ("OverQuota"), stable: dashboards and alerts match on it.
constexpr std::string_view WaitReasonName(WaitReason r) {
  switch (r) {
    case WaitReason::kNotTried:
      return "NotTried";
    case WaitReason::kOverQuota:
      return "OverQuota";
    case WaitReason::kNoRoom:
      return "NoRoom";
    case WaitReason::kReserved:
      return "Reserved";
    case WaitReason::kUnschedulable:
      return "Unschedulable";
    case WaitReason::kPreempting:
      return "Preempting";
    case WaitReason::kPreempted:
      return "Preempted";
  }
  return "Unknown";
}

}  // namespace tessera::sched
