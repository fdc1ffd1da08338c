// DecisionSpans: one scheduling decision as a trace for OTLP export.
//
// The root span "schedule" covers the whole decision and carries the job,
// queue, result, reason / explanation and node count; its children are the
// phases in order: "queue_sort" (from the end of the previous cycle to the
// pop of this job: ordering and picking the next job, with the queue's length
// and how long the job waited), then the scheduler's own spans (prefilter,
// filter, score, reserve, permit, bind) with their candidate and feasible node
// counts. Pure: the times come from the caller's clock.
#pragma once

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "model/job.h"
#include "obs/otlp_exporter.h"
#include "sched/framework/scheduler.h"

namespace tessera::controller {

struct DecisionContext {
  absl::Time sort_start;           // when the queue started looking for this job
  absl::Time cycle_start;          // when the job was popped and Schedule began
  absl::Time end;                  // when the decision was recorded (bound or requeued)
  int64_t queue_length = 0;        // jobs still queued after the pop
  absl::Duration waited;           // since the job was (re)queued
  std::vector<std::string> nodes;  // chosen nodes (placed)
  std::string result;              // scheduled | unschedulable | error
};

obs::TraceRecord DecisionSpans(const model::Job& job, const sched::ScheduleResult& r,
                               const DecisionContext& c);

}  // namespace tessera::controller
