#include "controller/decision_spans.h"

#include <algorithm>

#include "absl/strings/str_join.h"

namespace tessera::controller {

obs::TraceRecord DecisionSpans(const model::Job& job, const sched::ScheduleResult& r,
                               const DecisionContext& c) {
  obs::TraceRecord t;
  obs::SpanRecord root;
  root.name = "schedule";
  root.start = std::min(c.sort_start, c.cycle_start);
  root.end = std::max(c.end, root.start);
  root.attributes = {{"tessera.job", job.name},
                     {"tessera.namespace", job.ns},
                     {"tessera.queue", job.queue},
                     {"tessera.priority", int64_t{job.priority}},
                     {"tessera.result", c.result},
                     {"tessera.nodes_evaluated", r.nodes_evaluated},
                     {"tessera.domains_tried", int64_t{r.domains_tried}}};
  if (!r.reason.empty()) root.attributes.push_back({"tessera.reason", r.reason});
  if (!r.plugin.empty()) root.attributes.push_back({"tessera.plugin", r.plugin});
  if (!r.trace.explanation.empty()) {
    root.attributes.push_back({"tessera.explanation", r.trace.explanation});
  }
  if (!c.nodes.empty()) {
    root.attributes.push_back({"tessera.nodes", absl::StrJoin(c.nodes, ",")});
  }
  if (!r.victims.empty()) {
    root.attributes.push_back({"tessera.victims", int64_t(r.victims.size())});
  }
  root.error = r.outcome == sched::ScheduleResult::Outcome::kError;
  if (root.error) root.status_message = r.reason;
  t.push_back(std::move(root));

  obs::SpanRecord sort;
  sort.name = "queue_sort";
  sort.start = std::min(c.sort_start, c.cycle_start);
  sort.end = c.cycle_start;
  sort.parent = 0;
  sort.attributes = {{"tessera.queue", job.queue},
                     {"tessera.queue_length", c.queue_length},
                     {"tessera.waited_seconds", absl::ToDoubleSeconds(c.waited)}};
  t.push_back(std::move(sort));

  for (const sched::TraceSpan& s : r.trace.spans) {
    obs::SpanRecord span;
    span.name = s.name;
    // Spans of a scheduler without a clock have no start: place them at the
    // cycle's start so the trace stays well-formed.
    span.start = s.start == absl::InfinitePast() ? c.cycle_start : s.start;
    span.end = span.start + s.duration;
    span.parent = 0;
    span.attributes = {{"tessera.candidates", s.candidates}, {"tessera.feasible", s.feasible}};
    t.push_back(std::move(span));
  }
  return t;
}

}  // namespace tessera::controller
